//! `report.md`: feedback a student reads, rendered as GitHub-flavoured Markdown.
//!
//! Order: the score, plain notes about what the run could not do, a summary table, then each
//! milestone's non-passing checks with their evidence folded in `<details>`, then the compiler
//! output with per-kernel resources. Student text is escaped for its context: inline text gets
//! backslash escapes (and `\|` in table cells), long text goes into a fenced code block whose
//! fence is longer than any backtick run inside it, and text inside raw HTML is HTML-escaped.

use super::describe::{self, status_symbol};
use super::findings::{self, Finding};
use super::sanitize::{DETAILS_CAP, one_line, plain_text, truncate};
use crate::result::{CheckKind, CompileSummary, GradeResult, MilestoneResult, Status};
use std::fmt::Write as _;

/// Cases a finding names before "and N more" (result.json lists them all).
const CASES_SHOWN: usize = 8;

/// The Markdown report for one submission.
pub fn render(r: &GradeResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {}: {}\n", inline(&r.assignment), inline(&r.student));
    let _ = writeln!(out, "**Score: {}** {}\n", total_score(r), total_status(r));
    notes(&mut out, r);
    summary_table(&mut out, r);
    for row in findings::placed(r) {
        if let Some(p) = row.first() {
            milestone(&mut out, p.milestone, &row);
        }
    }
    if let Some(c) = &r.compile {
        compile_section(&mut out, c, r);
    }
    run_section(&mut out, r);
    flags_section(&mut out, r);
    out
}

/// Integrity flags (`GradeResult::flags`): listed for the reader, no points attached.
fn flags_section(out: &mut String, r: &GradeResult) {
    if r.flags.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "## Flags for the instructor

Not verdicts, and no points depend on them (docs/integrity.md):
"
    );
    for f in &r.flags {
        let at = f
            .location
            .as_deref()
            .map(|l| format!(" ({})", inline(l)))
            .unwrap_or_default();
        let m = f
            .milestone
            .as_deref()
            .map(|m| format!("{}: ", inline(m)))
            .unwrap_or_default();
        let _ = writeln!(out, "- `{}`{at}: {m}{}", f.kind, inline(&f.message));
    }
    out.push('\n');
}

/// The total: `60 / 100`, with `, speed not measured` unless the status already says so.
fn total_score(r: &GradeResult) -> String {
    let provisional = r.provisional() && !describe::overall_unmeasured(r);
    describe::provisional_score(r.score, r.max_score, provisional)
}

/// `✅ pass`, `❌ fail`, `✅ pass, speed not measured` for the whole result.
fn total_status(r: &GradeResult) -> String {
    let shown = describe::shown_overall(r);
    if describe::overall_unmeasured(r) {
        format!("{} {}", status_symbol(shown), UNMEASURED)
    } else {
        format!("{} {}", status_symbol(shown), shown.as_str())
    }
}

/// `✅ pass`, or `✅ pass, speed not measured` for a correct milestone whose speed was not
/// measured (result.json: `skipped` with `provisional: true`).
fn milestone_status(m: &MilestoneResult) -> String {
    let shown = describe::shown_status(m);
    if describe::unmeasured_pass(m) {
        format!("{} {}", status_symbol(shown), UNMEASURED)
    } else {
        format!("{} {}", status_symbol(shown), shown.as_str())
    }
}

/// Markdown's words for [`describe::PASS_UNMEASURED`], in its lower-case status style.
const UNMEASURED: &str = "pass, speed not measured";

/// A milestone's score; `, speed not measured` when provisional and the status does not say it.
fn milestone_score(m: &MilestoneResult) -> String {
    let provisional = m.provisional && !describe::unmeasured_pass(m);
    describe::provisional_score(m.score, m.max_score, provisional)
}

fn notes(out: &mut String, r: &GradeResult) {
    let mut notes = Vec::new();
    if !r.run.timed {
        notes.push(format!(
            "**Speed was not measured:** {}",
            inline(&describe::untimed_reason(r))
        ));
    }
    let degraded = describe::degraded_sandbox(r);
    if !degraded.is_empty() {
        let layers: Vec<String> = degraded.iter().map(|l| inline(l)).collect();
        notes.push(format!(
            "**The sandbox was degraded** for this run, so the submission ran with fewer \
             protections than usual: {}.",
            layers.join("; ")
        ));
    }
    for n in r.run.notes.iter().chain(&r.notes) {
        notes.push(inline(n));
    }
    for n in notes {
        let _ = writeln!(out, "> [!NOTE]\n> {n}\n");
    }
}

fn summary_table(out: &mut String, r: &GradeResult) {
    out.push_str("| Milestone | Status | Score |\n| --- | --- | ---: |\n");
    for m in &r.milestones {
        let title = if m.title.is_empty() || m.title == m.id {
            cell(&m.id)
        } else {
            format!("{} ({})", cell(&m.id), cell(&m.title))
        };
        let _ = writeln!(
            out,
            "| {title} | {} | {} |",
            milestone_status(m),
            milestone_score(m)
        );
    }
    let _ = writeln!(
        out,
        "| **Total** | {} | **{}** |\n",
        total_status(r),
        total_score(r)
    );
}

fn milestone(out: &mut String, m: &MilestoneResult, placed: &[findings::Placed]) {
    let title = if m.title.is_empty() || m.title == m.id {
        String::new()
    } else {
        format!(": {}", inline(&m.title))
    };
    let _ = writeln!(
        out,
        "## {} {}{title}\n",
        status_symbol(describe::shown_status(m)),
        inline(&m.id)
    );
    let kernel = if m.kernel.is_empty() {
        String::new()
    } else {
        format!(" Kernel `{}`.", code_span_text(&m.kernel))
    };
    let verdict = if describe::unmeasured_pass(m) {
        format!(" ({UNMEASURED})")
    } else {
        String::new()
    };
    let _ = writeln!(out, "Score {}{verdict}.{kernel}\n", milestone_score(m));
    // One section per finding; a milestone's hint is given once, under its first finding. A
    // finding an earlier milestone showed word for word is one line pointing there.
    let mut hints_said: Vec<&str> = Vec::new();
    let mut unmeasured = Vec::new();
    let mut estimates: Vec<String> = Vec::new();
    for p in placed
        .iter()
        .filter(|p| p.finding.check.status != Status::Pass)
    {
        let f = &p.finding;
        if describe::unmeasured(m, f.check) {
            unmeasured.push(inline(&findings::display_name(f)));
            // The emulator's speed estimate, where there is one: shown, never scored.
            if let Some(text) = f.check.estimate.as_ref().map(|e| e.sentence()) {
                // An estimate likely to fail its bar says what to change.
                let hint = f
                    .check
                    .hint
                    .as_deref()
                    .map(|h| format!(" **Hint:** {}", inline(h)))
                    .unwrap_or_default();
                estimates.push(format!(
                    "- **{}:** {}{hint}",
                    inline(&findings::display_name(f)),
                    inline(&text)
                ));
            }
            continue;
        }
        match &p.shared {
            findings::Shared::Repeat { first } => {
                let _ = writeln!(
                    out,
                    "{} **{}**: the same as in milestone {} above.\n",
                    status_symbol(f.check.status),
                    inline(&findings::display_name(f)),
                    inline(first)
                );
            }
            findings::Shared::First { also } => check(out, f, also, &mut hints_said),
            findings::Shared::Alone => check(out, f, &[], &mut hints_said),
        }
    }
    if !unmeasured.is_empty() {
        let _ = writeln!(
            out,
            "Speed not measured (no GPU): {}. Its points are not awarded yet.\n",
            unmeasured.join(", ")
        );
        if !estimates.is_empty() {
            let _ = writeln!(out, "{}\n", estimates.join("\n"));
        }
    }
    let passed = passed_names(m);
    if !passed.is_empty() {
        let _ = writeln!(out, "Passed: {}.\n", passed.join(", "));
    }
}

fn check<'a>(out: &mut String, f: &Finding<'a>, also: &[&str], hints_said: &mut Vec<&'a str>) {
    let c = f.check;
    let _ = writeln!(
        out,
        "### {} {} ({})\n",
        status_symbol(c.status),
        inline(&findings::display_name(f)),
        c.kind.as_str()
    );
    let label = match c.status {
        Status::Fail => "Failed",
        Status::Error => "Error",
        Status::Skipped => "Skipped",
        Status::Pass => "Passed",
    };
    let _ = writeln!(
        out,
        "**{label}:** {}\n",
        inline(&findings::display_message(f))
    );
    if c.snippet.is_some() {
        // The student's line, underlined, as a compiler would show it.
        let title = findings::display_name(f);
        out.push_str(&fenced(&findings::diagnostic(
            f,
            &title,
            &[],
            None,
            false,
            findings::REPORT_WIDTH,
        )));
        out.push('\n');
    }
    let mut facts = Vec::new();
    if let Some(l) = &c.location {
        facts.push(format!("- **Where:** `{}`", code_span_text(l)));
    }
    let cases = f.cases();
    if !cases.is_empty() {
        let label = if cases.len() > 1 { "Cases" } else { "Case" };
        let spans: Vec<String> = cases
            .iter()
            .take(CASES_SHOWN)
            .map(|c| format!("`{}`", code_span_text(c)))
            .collect();
        let more = match cases.len().saturating_sub(CASES_SHOWN) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        facts.push(format!("- **{label}:** {}{more}", spans.join(", ")));
    }
    if let Some(m) = describe::measurement(c) {
        // An estimated check has a bar but no measurement (docs/estimate.md).
        let label = if c.measured.is_none() && c.estimate.is_some() {
            "Not measured"
        } else {
            "Measured"
        };
        facts.push(format!("- **{label}:** {}", inline(&m)));
    }
    if !also.is_empty() {
        facts.push(format!(
            "- **Also in:** {} (shown once, here)",
            inline(&findings::milestones_phrase(also))
        ));
    }
    if let Some(h) = c.hint.as_deref().filter(|h| !hints_said.contains(h)) {
        hints_said.push(h);
        facts.push(format!("- **Hint:** {}", inline(h)));
    }
    if !facts.is_empty() {
        out.push_str(&facts.join("\n"));
        out.push_str("\n\n");
    }
    if let Some(d) = &c.details {
        let summary = match c.kind {
            CheckKind::Compile => "Compiler output",
            CheckKind::Correctness => "Mismatches",
            CheckKind::Runtime => "Captured output",
            CheckKind::Sanitizer => "PTX",
            _ => "Details",
        };
        folded(out, summary, d);
    }
}

/// The passing checks by name, a check run in several cases once with their count:
/// `compile reduce.cu, kernel reduce_naive, correctness (8 cases)`.
fn passed_names(m: &MilestoneResult) -> Vec<String> {
    let mut names: Vec<(String, usize)> = Vec::new();
    for c in m.checks.iter().filter(|c| c.status == Status::Pass) {
        let base = match c.case.as_deref() {
            Some(case) => c
                .name
                .strip_suffix(case)
                .map_or(c.name.as_str(), str::trim_end),
            None => c.name.as_str(),
        };
        let base = if base.is_empty() {
            c.name.as_str()
        } else {
            base
        };
        match names.iter_mut().find(|(n, _)| n == base) {
            Some((_, k)) => *k += 1,
            None => names.push((base.to_string(), 1)),
        }
    }
    names
        .into_iter()
        .map(|(n, k)| {
            if k > 1 {
                format!("{} ({k} cases)", inline(&n))
            } else {
                inline(&n)
            }
        })
        .collect()
}

fn compile_section(out: &mut String, c: &CompileSummary, r: &GradeResult) {
    out.push_str("## Compiler output\n\n");
    if !c.ok {
        out.push_str("The submission did not compile.\n\n");
    }
    if !c.kernels.is_empty() {
        out.push_str(
            "| Kernel | Registers | Shared memory | Spill stores | Spill loads | Stack |\n\
             | --- | ---: | ---: | ---: | ---: | ---: |\n",
        );
        for k in &c.kernels {
            let spill = |n: u64| {
                if n > 0 {
                    format!("⚠️ {} ", describe::bytes(n))
                } else {
                    "0".to_string()
                }
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                cell(&k.name),
                k.registers,
                describe::bytes(k.shared_bytes),
                spill(k.spill_stores).trim_end(),
                spill(k.spill_loads).trim_end(),
                describe::bytes(k.stack_bytes)
            );
        }
        out.push('\n');
        if c.kernels
            .iter()
            .any(|k| k.spill_stores > 0 || k.spill_loads > 0)
        {
            out.push_str(
                "Spills mean the compiler ran out of registers and moved values to slow local \
                 memory; fewer live variables or a smaller unrolled loop usually removes them.\n\n",
            );
        }
    }
    // Each compile error is a finding above (its line, column and notes): the log here is
    // what they do not already say (warnings, ptxas's facts), so nothing is said twice.
    let shown: Vec<&str> = r
        .milestones
        .iter()
        .flat_map(|m| &m.checks)
        .filter(|ch| describe::is_problem(ch))
        .filter_map(|ch| ch.details.as_deref())
        .collect();
    if shown.contains(&c.log.as_str()) {
        return;
    }
    let errors: Vec<String> = crate::compile::log_errors(&c.log)
        .into_iter()
        .filter(|e| {
            let at = e.location();
            r.milestones
                .iter()
                .flat_map(|m| &m.checks)
                .any(|ch| describe::is_problem(ch) && ch.location.as_deref() == Some(at.as_str()))
        })
        .map(|e| e.text)
        .collect();
    let mut rest = c.log.clone();
    for e in &errors {
        rest = rest.replacen(e.as_str(), "", 1);
    }
    let rest: Vec<&str> = rest
        .lines()
        .filter(|l| errors.is_empty() || !l.contains(" detected in the compilation of "))
        .collect();
    let rest = rest.join("\n");
    if !rest.trim().is_empty() {
        let summary = if errors.is_empty() {
            "Compile log"
        } else {
            "Compile log (beyond the errors above)"
        };
        folded(out, summary, rest.trim_matches('\n'));
    }
}

fn run_section(out: &mut String, r: &GradeResult) {
    out.push_str("## Run\n\n");
    let device = if r.run.device.is_empty() {
        "-"
    } else {
        &r.run.device
    };
    let _ = writeln!(
        out,
        "- Backend: {} ({})",
        inline(&r.backend),
        inline(device)
    );
    if !r.run.arch.is_empty() {
        let _ = writeln!(out, "- Target: {}", inline(&r.run.arch));
    }
    let _ = writeln!(
        out,
        "- Seed: {} (grade again with `--seed {}` to reproduce)",
        r.seed, r.seed
    );
    if !r.run.cugrade_version.is_empty() {
        let _ = writeln!(out, "- cugrade {}", inline(&r.run.cugrade_version));
    }
    if !r.submission_sha256.is_empty() {
        let _ = writeln!(
            out,
            "- Submission sha256: `{}`",
            code_span_text(&r.submission_sha256)
        );
    }
    for l in &r.run.sandbox {
        let _ = writeln!(out, "- Sandbox: {}", inline(l));
    }
    out.push('\n');
}

/// Long text folded under a summary line, in a code block nothing inside can close.
fn folded(out: &mut String, summary: &str, text: &str) {
    let _ = writeln!(out, "<details>\n<summary>{}</summary>\n", html(summary));
    out.push_str(&fenced(text));
    out.push_str("\n</details>\n\n");
}

/// A fenced code block around `text`. The fence is one backtick longer than the longest run of
/// backticks in the text, so no line inside can close it (CommonMark 4.5).
pub fn fenced(text: &str) -> String {
    // Cut after sanitizing: visible escapes make text longer.
    let body = truncate(&plain_text(text), DETAILS_CAP).into_owned();
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat((longest + 1).max(3));
    let body = body.trim_end_matches('\n');
    format!("{fence}text\n{body}\n{fence}\n")
}

/// Inline text: one line, with every character Markdown could read as syntax escaped.
pub fn inline(s: &str) -> String {
    let mut out = String::new();
    for c in one_line(s).chars() {
        // Backslash escapes work for every ASCII punctuation character in CommonMark; these
        // are the ones that can start emphasis, links, code, HTML, tables, math or entities.
        if matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '#' | '~' | '$' | '&' | '!'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    escape_line_start(out)
}

/// Text that starts a line (a note in a block quote) could open a list or, under a paragraph,
/// turn it into a setext heading or a thematic break: escape the marker when it would act as
/// one (a marker needs a space or the line end after it; an underline is all one character).
fn escape_line_start(s: String) -> String {
    let marker_end = |rest: &str| rest.is_empty() || rest.starts_with(' ');
    if let Some(c @ ('-' | '+' | '=')) = s.chars().next() {
        let underline = s.chars().all(|x| x == c || x == ' ');
        if underline || marker_end(&s[1..]) {
            return format!("\\{s}");
        }
    }
    let digits = s.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 && s[digits..].starts_with(['.', ')']) && marker_end(&s[digits + 1..]) {
        return format!("{}\\{}", &s[..digits], &s[digits..]);
    }
    s
}

/// Inline text for a table cell: `inline` already escapes `|`, which GFM requires in cells.
fn cell(s: &str) -> String {
    inline(s)
}

/// Text for inside a single-backtick code span (never used in a table): backticks cannot be
/// escaped there, so they are replaced.
fn code_span_text(s: &str) -> String {
    one_line(s).replace('`', "'")
}

/// Text for inside raw HTML.
fn html(s: &str) -> String {
    one_line(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fence_outgrows_backtick_runs() {
        let f = fenced("a ```` b\n```\n");
        assert!(f.starts_with("`````text\n"), "{f}");
        assert!(f.ends_with("\n`````\n"), "{f}");
        assert!(fenced("plain").starts_with("```text\n"));
    }

    #[test]
    fn inline_escapes_markdown_syntax() {
        assert_eq!(inline("a|b *c* <x>"), "a\\|b \\*c\\* \\<x\\>");
        assert_eq!(inline("two\nlines"), "two lines");
        assert_eq!(inline("- item"), "\\- item");
        assert_eq!(inline("12. item"), "12\\. item");
        assert_eq!(inline("==="), "\\===");
        assert_eq!(inline("- - -"), "\\- - -");
        assert_eq!(inline("289.5 ms"), "289.5 ms");
        assert_eq!(inline("-5 points"), "-5 points");
    }
}

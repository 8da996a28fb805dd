//! What `cugrade check` prints: a short summary (`--format human`), the same plus GitHub
//! Actions annotations (`--format github`), or the result JSON (`--format json`).
//!
//! Student text is flattened to one line with escape sequences removed: a kernel's output must
//! not be able to recolour, move the cursor of, or issue commands to the grader's terminal or
//! the CI runner reading it.

use super::describe::{self, status_word};
use super::findings::{self, Finding};
use super::sanitize::{one_line, plain_text};
use crate::result::{CheckKind, GradeResult, MilestoneResult, Status};
use owo_colors::{OwoColorize, Style};
use std::fmt::Write as _;

/// Lines of a failing check's details shown in the terminal; --json and --markdown keep all.
const DETAIL_LINES: usize = 8;
/// Characters of one detail line beyond which it is cut (a minified source line); the
/// terminal wraps shorter ones whole (`report::output::fit`).
const DETAIL_WIDTH: usize = 1000;

/// The human summary for an 80-column terminal. `color` should be false when stdout is not a
/// terminal or `NO_COLOR` is set (the caller knows which stream it writes to).
pub fn render(r: &GradeResult, color: bool) -> String {
    render_at(r, color, false, 80)
}

/// [`render`], and with `verbose` the evidence a student rarely needs (the PTX instruction of a
/// sanitizer finding, every occurrence's case).
pub fn render_with(r: &GradeResult, color: bool, verbose: bool) -> String {
    render_at(r, color, verbose, 80)
}

/// [`render_with`] for a terminal `width` columns wide: a quoted source line wider than that
/// is shortened around its underline (the rest of the text is wrapped by
/// `report::output::fit`).
pub fn render_at(r: &GradeResult, color: bool, verbose: bool, width: usize) -> String {
    let paint = |s: &str, style: Style| {
        if color {
            s.style(style).to_string()
        } else {
            s.to_string()
        }
    };
    let mut out = String::new();
    header(&mut out, r, &paint);
    milestone_rows(&mut out, r, &paint);
    notes(&mut out, r, &paint);
    problems(&mut out, r, (verbose, color, width), &paint);
    total(&mut out, r, &paint);
    out
}

/// The first line: assignment, student, backend, device and seed.
fn header(out: &mut String, r: &GradeResult, paint: &dyn Fn(&str, Style) -> String) {
    let device = if r.run.device.is_empty() {
        String::new()
    } else {
        format!(", {}", one_line(&r.run.device))
    };
    let _ = writeln!(
        out,
        "{} {} ({}{device}, seed {})",
        paint(&one_line(&r.assignment), Style::new().bold()),
        paint(&one_line(&r.student), Style::new().bold()),
        one_line(&r.backend),
        r.seed
    );
}

/// One row per milestone: its status, id and score, the ids padded to one column.
fn milestone_rows(out: &mut String, r: &GradeResult, paint: &dyn Fn(&str, Style) -> String) {
    let id_width = r
        .milestones
        .iter()
        .map(|m| one_line(&m.id).chars().count())
        .max()
        .unwrap_or(0);
    for m in &r.milestones {
        let id = one_line(&m.id);
        let pad = " ".repeat(id_width.saturating_sub(id.chars().count()));
        // A correct kernel whose speed was not measured passed: "PASS ... , speed not measured".
        let shown = describe::shown_status(m);
        let _ = writeln!(
            out,
            "  {} {id}{pad}  {:>9}",
            paint(&format!("{:<5}", status_word(shown)), status_style(shown)),
            describe::score_of(m.score, m.max_score)
        )
        .and_then(|()| {
            if m.provisional {
                // Before the newline: "20 / 45, speed not measured" on the milestone's row.
                out.pop();
                writeln!(out, ", {}", describe::PROVISIONAL)
            } else {
                Ok(())
            }
        });
    }
}

/// The lines under the rows: the untimed note, speed estimates with their hints, sandbox
/// warnings, then the run's and the result's notes.
fn notes(out: &mut String, r: &GradeResult, paint: &dyn Fn(&str, Style) -> String) {
    if !r.run.timed {
        let _ = writeln!(
            out,
            "{} {}",
            paint("note:", Style::new().yellow().bold()),
            describe::untimed_note(r)
        );
    }
    // Without a GPU: each performance check's speed estimate (docs/estimate.md).
    for m in &r.milestones {
        for c in &m.checks {
            if let Some(e) = &c.estimate {
                let _ = writeln!(
                    out,
                    "{} {} › {}: {}",
                    paint("estimate:", Style::new().cyan().bold()),
                    one_line(&m.id),
                    one_line(&c.name),
                    one_line(&e.sentence())
                );
                // An estimate likely to fail its bar says what to change.
                if let Some(h) = &c.hint {
                    let _ = writeln!(
                        out,
                        "  {} {}",
                        paint("help:", Style::new().cyan().bold()),
                        one_line(h)
                    );
                }
            }
        }
    }
    for l in describe::degraded_sandbox(r) {
        let _ = writeln!(
            out,
            "{} sandbox degraded: {}",
            paint("warning:", Style::new().yellow().bold()),
            one_line(l)
        );
    }
    for n in r.run.notes.iter().chain(&r.notes) {
        let _ = writeln!(
            out,
            "{} {}",
            paint("note:", Style::new().yellow().bold()),
            one_line(n)
        );
    }
}

/// Every problem finding as a diagnostic, after one blank line (none without findings).
fn problems(
    out: &mut String,
    r: &GradeResult,
    shown: (bool, bool, usize),
    paint: &dyn Fn(&str, Style) -> String,
) {
    // A finding several milestones share word for word (one compile error stops them all) is
    // printed once, under the first, with the others named.
    let placed = findings::placed(r);
    let mut first = true;
    let mut hints_said: Vec<(&str, &str)> = Vec::new();
    for p in placed
        .iter()
        .flatten()
        .filter(|p| describe::is_problem(p.finding.check))
    {
        let also: &[&str] = match &p.shared {
            findings::Shared::Repeat { .. } => continue,
            findings::Shared::First { also } => also,
            findings::Shared::Alone => &[],
        };
        if first {
            out.push('\n');
            first = false;
        }
        finding(
            out,
            p.milestone,
            &p.finding,
            also,
            &mut hints_said,
            shown,
            paint,
        );
    }
}

/// The last line, after a blank one: the total score and the overall status.
fn total(out: &mut String, r: &GradeResult, paint: &dyn Fn(&str, Style) -> String) {
    let shown = describe::shown_overall(r);
    let (total, word) = if describe::overall_unmeasured(r) {
        (
            describe::score_of(r.score, r.max_score),
            describe::PASS_UNMEASURED,
        )
    } else {
        (
            describe::provisional_score(r.score, r.max_score, r.provisional()),
            status_word(shown),
        )
    };
    let _ = writeln!(
        out,
        "\n{} {}  {}",
        paint("Total:", Style::new().bold()),
        paint(&total, Style::new().bold()),
        paint(word, status_style(shown))
    );
}

/// One finding: a compiler-style diagnostic (title, the student's line, where it happened, the
/// hint), then the first lines of its evidence.
fn finding<'a>(
    out: &mut String,
    m: &'a MilestoneResult,
    f: &Finding<'a>,
    also: &[&str],
    hints_said: &mut Vec<(&'a str, &'a str)>,
    (verbose, color, width): (bool, bool, usize),
    paint: &dyn Fn(&str, Style) -> String,
) {
    let c = f.check;
    let title = format!(
        "{} › {}: {}",
        m.id,
        findings::display_name(f),
        findings::display_message(f)
    );
    let mut notes = Vec::new();
    if let Some(w) = f.where_cases() {
        notes.push(w);
    }
    if !also.is_empty() {
        let s = if also.len() > 1 { "s" } else { "" };
        notes.push(format!("the same in milestone{s} {}", also.join(", ")));
    }
    if verbose && f.all.len() > 1 {
        notes.push(format!(
            "{} occurrences (result.json lists each)",
            f.all.len()
        ));
    }
    if let Some(meas) = describe::measurement(c) {
        notes.push(format!("measured {meas}"));
    }
    // A milestone's hint is said once, under its first finding.
    let hint = c
        .hint
        .as_deref()
        .filter(|h| !hints_said.contains(&(m.id.as_str(), *h)));
    if let Some(h) = hint {
        hints_said.push((m.id.as_str(), h));
    }
    let text = findings::diagnostic(f, &title, &notes, hint, color, width);
    out.push_str(text.trim_end());
    out.push('\n');
    // A sanitizer's evidence is the PTX instruction: for --verbose only.
    let show = c.kind != CheckKind::Sanitizer || verbose;
    if let Some(d) = c.details.as_ref().filter(|_| show) {
        details(out, d, paint);
    }
}

/// The first lines of a check's details, each behind a fixed prefix so that no student line
/// starts a line of output (GitHub reads `::command::` at the start of any output line).
fn details(out: &mut String, d: &str, paint: &dyn Fn(&str, Style) -> String) {
    let text = plain_text(d);
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let bar = paint("    │", Style::new().dimmed());
    for line in lines.iter().take(DETAIL_LINES) {
        let line = line.replace('\t', "    ");
        let cut: String = line.chars().take(DETAIL_WIDTH).collect();
        let more = if cut.len() < line.len() { " …" } else { "" };
        let _ = writeln!(out, "{bar} {cut}{more}");
    }
    if lines.len() > DETAIL_LINES {
        let _ = writeln!(
            out,
            "{bar} {}",
            paint(
                &format!(
                    "… {} more lines (--json or --markdown writes them all)",
                    lines.len() - DETAIL_LINES
                ),
                Style::new().dimmed()
            )
        );
    }
}

/// Whether stdout should get colour: it is a terminal and `NO_COLOR` is unset or empty
/// (<https://no-color.org>).
pub fn stdout_wants_color() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn status_style(s: Status) -> Style {
    match s {
        Status::Pass => Style::new().green().bold(),
        Status::Fail => Style::new().red().bold(),
        Status::Error => Style::new().magenta().bold(),
        Status::Skipped => Style::new().yellow(),
    }
}

/// `--format github`: one `::error` workflow command per failed or errored check (with the
/// file and line when the check has a location), a `::notice` when speed was not measured, then
/// the plain summary.
pub fn github(r: &GradeResult) -> String {
    github_in(r, "")
}

/// [`github`] for a submission that sits in `dir` of the repository (e.g. `submissions/alice`):
/// GitHub needs annotation paths from the repository root, locations are from the submission.
pub fn github_in(r: &GradeResult, dir: &str) -> String {
    let dir = dir.trim_end_matches('/');
    let mut out = String::new();
    // One annotation per finding: not per case, and not per milestone for a finding several
    // milestones share (its title names them all).
    for p in findings::placed(r).iter().flatten() {
        let f = &p.finding;
        if !describe::is_problem(f.check) {
            continue;
        }
        let mut ids = vec![p.milestone.id.as_str()];
        match &p.shared {
            findings::Shared::Repeat { .. } => continue,
            findings::Shared::First { also } => ids.extend(also),
            findings::Shared::Alone => {}
        }
        {
            let c = f.check;
            let mut props = Vec::new();
            if let Some(l) = &c.location {
                let l = one_line(l);
                let loc = describe::location(&l);
                let file = if dir.is_empty() || dir == "." {
                    loc.file.to_string()
                } else {
                    format!("{dir}/{}", loc.file)
                };
                props.push(format!("file={}", escape_property(&file)));
                if let Some(line) = loc.line {
                    props.push(format!("line={line}"));
                }
                if let Some(col) = loc.col {
                    props.push(format!("col={col}"));
                }
            }
            let title = format!(
                "{} › {}",
                ids.iter()
                    .map(|i| one_line(i))
                    .collect::<Vec<_>>()
                    .join(", "),
                one_line(&findings::display_name(f))
            );
            props.push(format!("title={}", escape_property(&title)));
            let mut message = one_line(&c.message);
            if let Some(w) = f.where_cases().filter(|_| f.all.len() > 1) {
                message.push_str(&format!("\n{w}"));
            }
            if let Some(meas) = describe::measurement(c) {
                message.push_str(&format!("\nmeasured {meas}"));
            }
            if let Some(h) = &c.hint {
                message.push_str(&format!("\nhint: {}", one_line(h)));
            }
            let _ = writeln!(
                out,
                "::error {}::{}",
                props.join(","),
                escape_data(&message)
            );
        }
    }
    if !r.run.timed {
        let _ = writeln!(
            out,
            "::notice title=speed not measured::{}",
            escape_data(&describe::untimed_note(r))
        );
    }
    out.push_str(&render(r, false));
    out
}

/// `--format json`: the result exactly as result.json holds it.
pub fn json(r: &GradeResult) -> String {
    super::json::to_string(r)
}

/// Workflow-command data escaping, as in `@actions/core` (`escapeData`).
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Workflow-command property escaping, as in `@actions/core` (`escapeProperty`).
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_escaping_follows_actions_core() {
        assert_eq!(escape_data("50%\r\nnext"), "50%25%0D%0Anext");
        assert_eq!(escape_property("a:b,c%"), "a%3Ab%2Cc%25");
    }
}

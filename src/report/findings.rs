//! One finding per cause: the checks of a milestone that report the same problem (same kind of
//! check, same cause, same source location, same status) in several cases or trials become one
//! finding that lists where it happened. The human, Markdown and JUnit views show findings;
//! result.json keeps every check.
//!
//! A finding with a source line renders the way rustc shows an error, through
//! annotate-snippets: the title, `--> file:line`, the student's line with the code underlined,
//! then notes. Student text (the line, messages) is sanitized before it reaches the renderer.

use super::sanitize::one_line;
use crate::result::{Check, GradeResult, MilestoneResult, Status};
use annotate_snippets::{AnnotationKind, Group, Level, Origin, Renderer, Snippet};

/// How many case names a finding lists before "and N more".
const SHOWN_CASES: usize = 3;

/// Checks that report one problem.
#[derive(Debug, Clone)]
pub struct Finding<'a> {
    /// The first occurrence: its message, details and hint speak for the finding.
    pub check: &'a Check,
    /// Every occurrence, in order (the first included).
    pub all: Vec<&'a Check>,
}

impl<'a> Finding<'a> {
    /// Distinct cases the finding occurred in, in order.
    pub fn cases(&self) -> Vec<&'a str> {
        let mut out: Vec<&str> = Vec::new();
        for c in &self.all {
            if let Some(case) = c.case.as_deref()
                && !out.contains(&case)
            {
                out.push(case);
            }
        }
        out
    }

    /// `case n1`, `cases n1, n31 and n255`, `cases n1, n31, n255 and 5 more`.
    pub fn where_cases(&self) -> Option<String> {
        let cases: Vec<String> = self.cases().iter().map(|c| one_line(c)).collect();
        match cases.len() {
            0 => None,
            1 => Some(format!("case {}", cases[0])),
            n if n <= SHOWN_CASES + 1 => Some(format!(
                "cases {} and {}",
                cases[..n - 1].join(", "),
                cases[n - 1]
            )),
            n => Some(format!(
                "cases {} and {} more",
                cases[..SHOWN_CASES].join(", "),
                n - SHOWN_CASES
            )),
        }
    }

    /// The name without its case: `correctness n255` in several cases is `correctness`.
    pub fn name(&self) -> String {
        if self.all.len() == 1 {
            return self.check.name.clone();
        }
        base_name(self.check).to_string()
    }
}

/// A check's name without the case it ran (names are `<what> <case>` by convention).
fn base_name(c: &Check) -> &str {
    match c.case.as_deref() {
        Some(case) if !case.is_empty() => c
            .name
            .strip_suffix(case)
            .map(str::trim_end)
            .filter(|s| !s.is_empty())
            .unwrap_or(&c.name),
        _ => &c.name,
    }
}

/// The identity of a problem: checks with equal keys are one finding.
fn key(
    c: &Check,
) -> (
    crate::result::CheckKind,
    Status,
    &str,
    Option<&str>,
    Option<&str>,
) {
    (
        c.kind,
        c.status,
        base_name(c),
        c.location.as_deref(),
        c.cause.as_deref(),
    )
}

/// Group checks into findings, in the order of first occurrence. Passing checks are never
/// merged: each is its own finding (they are the evidence of what works, one per case).
pub fn group(checks: &[Check]) -> Vec<Finding<'_>> {
    let mut out: Vec<Finding> = Vec::new();
    for c in checks {
        let same = (c.status != Status::Pass)
            .then(|| {
                out.iter_mut()
                    .find(|f| f.check.status != Status::Pass && key(f.check) == key(c))
            })
            .flatten();
        match same {
            Some(f) => f.all.push(c),
            None => out.push(Finding {
                check: c,
                all: vec![c],
            }),
        }
    }
    out
}

/// Whether two findings say the same thing word for word: a compile error that stops every
/// milestone is one problem, not one per milestone.
pub fn same(a: &Finding, b: &Finding) -> bool {
    let (x, y) = (a.check, b.check);
    (x.kind, x.status, &x.name, &x.message, &x.location)
        == (y.kind, y.status, &y.name, &y.message, &y.location)
}

/// Where a finding stands among the milestones that share it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shared<'a> {
    /// Only this milestone has it.
    Alone,
    /// The first milestone to have it: reports show it here, in full, naming the others.
    First { also: Vec<&'a str> },
    /// An earlier milestone has it word for word: reports refer to that one.
    Repeat { first: &'a str },
}

/// A milestone's finding and whether other milestones share it.
#[derive(Debug, Clone)]
pub struct Placed<'a> {
    pub milestone: &'a MilestoneResult,
    pub finding: Finding<'a>,
    pub shared: Shared<'a>,
}

/// Every milestone's findings, in rubric order, each marked with the milestones it shares
/// with ([`same`]). Passing findings are never shared (each milestone's evidence of what
/// works stays its own). Every report renders a shared finding once, under its first
/// milestone, and lets the others refer to it.
pub fn placed(r: &GradeResult) -> Vec<Vec<Placed<'_>>> {
    let all: Vec<Vec<Finding>> = r.milestones.iter().map(|m| group(&m.checks)).collect();
    let mut out: Vec<Vec<Placed>> = Vec::new();
    for (i, (m, fs)) in r.milestones.iter().zip(&all).enumerate() {
        let mut row = Vec::new();
        for f in fs {
            let shared = if f.check.status == Status::Pass {
                Shared::Alone
            } else if let Some(j) = (0..i).find(|&j| all[j].iter().any(|g| same(f, g))) {
                Shared::Repeat {
                    first: r.milestones[j].id.as_str(),
                }
            } else {
                let also: Vec<&str> = (i + 1..all.len())
                    .filter(|&j| all[j].iter().any(|g| same(f, g)))
                    .map(|j| r.milestones[j].id.as_str())
                    .collect();
                if also.is_empty() {
                    Shared::Alone
                } else {
                    Shared::First { also }
                }
            };
            row.push(Placed {
                milestone: m,
                finding: f.clone(),
                shared,
            });
        }
        out.push(row);
    }
    out
}

/// `milestone reduce_shared`, `milestones reduce_shared and reduce_shuffle`.
pub fn milestones_phrase(ids: &[&str]) -> String {
    let ids: Vec<String> = ids.iter().map(|i| one_line(i)).collect();
    match ids.as_slice() {
        [] => String::new(),
        [one] => format!("milestone {one}"),
        [init @ .., last] => format!("milestones {} and {last}", init.join(", ")),
    }
}

/// A source line made safe to print with its indentation kept: escape sequences and controls
/// go the way of all student text; tabs stay (the renderer shows them four columns wide and
/// still counts each as one column, as a compiler does).
fn source_text(s: &str) -> String {
    let text = super::sanitize::plain_text(s);
    let line = text.lines().next().unwrap_or_default();
    super::sanitize::truncate(line.trim_end(), super::sanitize::LINE_CAP).into_owned()
}

/// The name a finding shows: without its case, and without a location the diagnostic prints
/// anyway (`racecheck reduce.cu:17` is `racecheck`).
pub fn display_name(f: &Finding) -> String {
    let name = f.name();
    match f.check.location.as_deref() {
        Some(l) => name
            .strip_suffix(l)
            .map(str::trim_end)
            .filter(|s| !s.is_empty())
            .map_or_else(|| name.clone(), str::to_string),
        None => name,
    }
}

/// A finding's message without a leading `<name>: ` that repeats its name.
pub fn display_message(f: &Finding) -> String {
    let name = display_name(f);
    let m = &f.check.message;
    m.strip_prefix(&format!("{name}: "))
        .unwrap_or(m)
        .to_string()
}

/// The column a `file:line:col` location names.
fn column(location: &str) -> Option<usize> {
    super::describe::location(location)
        .col
        .map(|c| c as usize)
        .filter(|&c| c > 0)
}

/// The byte range of `shown` (the line as [`source_text`] prints it) to underline: at `col`
/// (1-based, in characters of the `original` line, as a compiler counts), the identifier or
/// number that starts there, else the one character; without a column, the whole statement.
fn underline(shown: &str, original: &str, col: Option<usize>) -> (usize, usize) {
    let statement = || {
        let start = shown.len() - shown.trim_start().len();
        (start, shown.trim_end().len().max(start + 1))
    };
    let Some(col) = col.filter(|&c| c <= original.chars().count()) else {
        return statement();
    };
    // Where the column lands once tabs are expanded and controls made visible.
    let before: String = original.chars().take(col - 1).collect();
    let start = super::sanitize::plain_text(&before).len();
    if start >= shown.len() || !shown.is_char_boundary(start) {
        return statement();
    }
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let rest = &shown[start..];
    let len = match rest.chars().next() {
        Some(c) if word(c) => rest.find(|c: char| !word(c)).unwrap_or(rest.len()),
        Some(c) => c.len_utf8(),
        None => return statement(),
    };
    (start, start + len)
}

/// A `file:line` split, for the renderer's `-->` line.
fn file_and_line(location: &str) -> (String, Option<usize>) {
    let l = super::describe::location(location);
    (one_line(l.file), l.line.map(|n| n as usize))
}

/// Width a file report (Markdown, JUnit) lets a quoted source line have before the renderer
/// shortens it; the terminal uses its own width.
pub const REPORT_WIDTH: usize = 400;

/// Render a finding as a compiler diagnostic: `title`, then the location with the student's
/// line underlined (when the check quotes it), then `notes` and the `help` line.
/// `color` gives ANSI styles (terminal only); a source line wider than `width` columns is
/// shortened around the underline, as rustc does.
pub fn diagnostic(
    f: &Finding,
    title: &str,
    notes: &[String],
    help: Option<&str>,
    color: bool,
    width: usize,
) -> String {
    let c = f.check;
    let level = match c.status {
        Status::Fail => Level::ERROR.with_name(Some("FAIL")),
        Status::Error => Level::ERROR.with_name(Some("ERROR")),
        Status::Skipped => Level::WARNING.with_name(Some("SKIP")),
        Status::Pass => Level::NOTE.with_name(Some("PASS")),
    };
    let title = one_line(title);
    let mut group = Group::with_title(level.primary_title(title.as_str()));
    let line_text;
    let file;
    if let Some(loc) = &c.location {
        let (path, line) = file_and_line(loc);
        file = path;
        match (&c.snippet, line) {
            (Some(s), Some(n)) if s.line as usize == n && !s.text.trim().is_empty() => {
                line_text = source_text(&s.text);
                let (start, end) = underline(&line_text, &s.text, column(loc));
                group = group.element(
                    Snippet::source(line_text.as_str())
                        .line_start(n)
                        .path(file.as_str())
                        .annotation(AnnotationKind::Primary.span(start..end)),
                );
            }
            (_, Some(n)) => {
                group = group.element(Origin::path(file.as_str()).line(n));
            }
            (_, None) => {
                group = group.element(Origin::path(file.as_str()));
            }
        }
    }
    let notes: Vec<String> = notes.iter().map(|n| one_line(n)).collect();
    for n in &notes {
        group = group.element(Level::NOTE.message(n.as_str()));
    }
    let help = help.map(one_line);
    if let Some(h) = &help {
        group = group.element(Level::HELP.message(h.as_str()));
    }
    let renderer = if color {
        Renderer::styled()
    } else {
        Renderer::plain()
    }
    .term_width(width);
    renderer.render(&[group])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{CheckKind, SourceLine};

    fn race(case: &str, line: u32) -> Check {
        Check::fail(
            CheckKind::Sanitizer,
            format!("racecheck reduce.cu:{line}"),
            "racecheck: hazard",
        )
        .with_case(case)
        .with_location(Some(format!("reduce.cu:{line}")))
        .with_cause("racecheck")
    }

    fn wrong(case: &str, cause: &str) -> Check {
        Check::fail(
            CheckKind::Correctness,
            format!("correctness {case}"),
            "wrong",
        )
        .with_case(case)
        .with_cause(cause)
    }

    #[test]
    fn same_cause_and_place_is_one_finding() {
        let checks = vec![
            race("n1", 14),
            race("n1", 17),
            wrong("n1", "nan"),
            race("n31", 14),
            race("n31", 17),
            wrong("n31", "nan"),
            wrong("n255", "zeros"),
            Check::pass(CheckKind::Correctness, "correctness n2", "ok").with_case("n2"),
            Check::pass(CheckKind::Correctness, "correctness n3", "ok").with_case("n3"),
        ];
        let f = group(&checks);
        let shape: Vec<(String, usize)> = f.iter().map(|f| (f.name(), f.all.len())).collect();
        assert_eq!(
            shape,
            vec![
                ("racecheck reduce.cu:14".to_string(), 2),
                ("racecheck reduce.cu:17".to_string(), 2),
                ("correctness".to_string(), 2),
                ("correctness n255".to_string(), 1),
                ("correctness n2".to_string(), 1),
                ("correctness n3".to_string(), 1),
            ]
        );
        assert_eq!(f[2].where_cases().unwrap(), "cases n1 and n31");
        assert_eq!(f[3].where_cases().unwrap(), "case n255");
    }

    #[test]
    fn many_cases_are_counted() {
        let checks: Vec<Check> = ["n1", "n31", "n255", "n256", "n257", "n1000", "n65537", "n9"]
            .iter()
            .map(|c| wrong(c, "nan"))
            .collect();
        let f = group(&checks);
        assert_eq!(f.len(), 1);
        assert_eq!(
            f[0].where_cases().unwrap(),
            "cases n1, n31, n255 and 5 more"
        );
        let four = group(&checks[..4]);
        assert_eq!(
            four[0].where_cases().unwrap(),
            "cases n1, n31, n255 and n256"
        );
    }

    #[test]
    fn diagnostic_underlines_the_students_line() {
        let mut c = race("n1", 17);
        c.snippet = Some(SourceLine {
            line: 17,
            text: "\t\tpartial[tid] += partial[tid + s];".into(),
        });
        let checks = [c];
        let f = &group(&checks)[0];
        let text = diagnostic(
            f,
            "reduce_shared › racecheck: hazard",
            &["cases n1".into()],
            Some("add a barrier"),
            false,
            REPORT_WIDTH,
        );
        assert!(
            text.starts_with("FAIL: reduce_shared › racecheck: hazard"),
            "{text}"
        );
        assert!(text.contains("--> reduce.cu:17"), "{text}");
        assert!(
            text.contains("17 |         partial[tid] += partial[tid + s];"),
            "{text}"
        );
        assert!(text.contains("|         ^^^^^^^^^"), "{text}");
        assert!(text.contains("= note: cases n1"), "{text}");
        assert!(text.contains("= help: add a barrier"), "{text}");
        // Without the line: the location alone.
        let checks = [race("n1", 9)];
        let text = diagnostic(&group(&checks)[0], "t", &[], None, false, REPORT_WIDTH);
        assert!(text.contains("--> reduce.cu:9"), "{text}");
    }

    #[test]
    fn a_column_underlines_what_starts_there() {
        let mut c = Check::fail(
            CheckKind::Compile,
            "compile k.cu",
            "error: identifier \"bb\" is undefined",
        )
        .with_location(Some("k.cu:4:27".into()));
        c.snippet = Some(SourceLine {
            line: 4,
            text: "\tif (i < n) c[i] = a[i] + bb[i];".into(),
        });
        let checks = [c];
        let text = diagnostic(&group(&checks)[0], "t", &[], None, false, REPORT_WIDTH);
        assert!(text.contains("--> k.cu:4:27"), "{text}");
        let lines: Vec<&str> = text.lines().collect();
        let src = lines.iter().position(|l| l.contains("bb[i]")).unwrap();
        let marks = lines[src + 1];
        // Under `bb` only: the tab is four columns wide on screen.
        let at = lines[src].find("bb[i]").unwrap();
        assert_eq!(marks.find('^'), Some(at), "{text}");
        assert_eq!(marks.matches('^').count(), 2, "{text}");
    }

    #[test]
    fn hostile_source_text_is_sanitized() {
        let mut c = race("n1", 3);
        c.snippet = Some(SourceLine {
            line: 3,
            text: "x = 1; \u{1b}[2J\u{1b}]0;pwned\u{7} // \u{202e}".into(),
        });
        let checks = [c];
        let text = diagnostic(&group(&checks)[0], "t\u{1b}[31m", &[], None, false, 80);
        assert!(
            !text.contains('\u{1b}') && !text.contains("pwned"),
            "{text:?}"
        );
    }
}

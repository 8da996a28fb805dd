//! JUnit XML, the format CI systems (Jenkins, GitLab, GitHub test-report actions) display.
//!
//! One `<testsuite>` per milestone, one `<testcase>` per check. Failures and errors carry the
//! message as their `message` attribute and the whole explanation (location, case,
//! measurement, hint, details) as their text, because that text is what every CI viewer shows.
//! The output validates against Jenkins' `junit-10.xsd` (see tests/data/junit-10.xsd); that
//! schema has no `file` attribute on `<testcase>`, so locations go into the text instead.
//! Every string passes through [`sanitize`](super::sanitize) first: `junit-report` writes
//! `system-out` and failure text as raw CDATA.

use super::describe;
use super::findings::{self, Finding};
use super::sanitize::{xml_attr, xml_text};
use crate::result::{GradeResult, MilestoneResult, Status};
use junit_report::{Duration, Report, TestCase, TestSuite};

/// The JUnit XML for one submission.
pub fn to_string(r: &GradeResult) -> String {
    let mut report = Report::new();
    report.add_testsuites(suites(r, Naming::Single));
    render(&report)
}

/// The JUnit XML for a whole cohort: one testsuite per student and milestone, named
/// `<student>/<milestone>`, so that all students can share one CI test report.
pub fn cohort_to_string(results: &[GradeResult]) -> String {
    let mut report = Report::new();
    for r in results {
        report.add_testsuites(suites(r, Naming::Cohort));
    }
    render(&report)
}

const YEAR_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

#[derive(Clone, Copy)]
enum Naming {
    Single,
    Cohort,
}

fn suites(r: &GradeResult, naming: Naming) -> Vec<TestSuite> {
    if r.milestones.is_empty() {
        // A submission that produced no milestone (nothing to grade) must still show up in a
        // cohort report, or a student silently vanishes from CI.
        let mut suite = TestSuite::new(&xml_attr(r.key()));
        suite.package = xml_attr(&r.assignment);
        suite.set_system_out(&xml_text(&suite_header(r, None)));
        return vec![suite];
    }
    findings::placed(r)
        .iter()
        .zip(&r.milestones)
        .map(|(placed, m)| milestone_suite(r, m, placed, naming))
        .collect()
}

fn milestone_suite(
    r: &GradeResult,
    m: &MilestoneResult,
    placed: &[findings::Placed],
    naming: Naming,
) -> TestSuite {
    let (name, classname) = match naming {
        Naming::Single => (m.id.clone(), format!("{}.{}", r.assignment, m.id)),
        Naming::Cohort => (
            format!("{}/{}", r.key(), m.id),
            format!("{}.{}.{}", r.assignment, r.key(), m.id),
        ),
    };
    let mut suite = TestSuite::new(&xml_attr(&name));
    // The XSD has `package` but no properties in junit-report's output: the package keeps
    // assignment and student readable in a combined file.
    suite.package = xml_attr(&format!("{}/{}", r.assignment, r.key()));
    let classname = xml_attr(&classname);
    // One testcase per finding: a problem seen in eight cases is one failure listing them.
    for p in placed {
        suite.add_testcase(testcase(m, p, &classname));
    }
    suite.set_system_out(&xml_text(&suite_header(r, Some(m))));
    suite
}

/// What a JUnit property list would hold: who, what, where, and the score.
fn suite_header(r: &GradeResult, m: Option<&MilestoneResult>) -> String {
    let mut lines = vec![
        format!("assignment: {}", r.assignment),
        format!("student: {}", r.student),
    ];
    if let Some(m) = m {
        lines.push(format!("milestone: {} ({})", m.id, m.title));
        if !m.kernel.is_empty() {
            lines.push(format!("kernel: {}", m.kernel));
        }
        lines.push(format!(
            "milestone score: {}",
            describe::provisional_score(m.score, m.max_score, m.provisional)
        ));
        lines.push(format!(
            "milestone status: {}",
            if describe::unmeasured_pass(m) {
                describe::PASS_UNMEASURED.to_string()
            } else {
                describe::shown_status(m).as_str().to_uppercase()
            }
        ));
    }
    lines.push(format!(
        "total score: {}",
        describe::provisional_score(r.score, r.max_score, r.provisional())
    ));
    let device = if r.run.device.is_empty() {
        "-"
    } else {
        &r.run.device
    };
    lines.push(format!("backend: {} ({device})", r.backend));
    lines.push(format!("seed: {}", r.seed));
    if !r.run.timed {
        lines.push(format!("note: {}", describe::untimed_note(r)));
    }
    for l in describe::degraded_sandbox(r) {
        lines.push(format!("sandbox: {l}"));
    }
    for n in r.run.notes.iter().chain(&r.notes) {
        lines.push(format!("note: {n}"));
    }
    lines.join("\n")
}

fn testcase(m: &MilestoneResult, p: &findings::Placed, classname: &str) -> TestCase {
    let f = &p.finding;
    let c = f.check;
    let name = match f.where_cases() {
        Some(w) if f.all.len() > 1 => xml_attr(&format!("{} ({w})", f.name())),
        _ => xml_attr(&c.name),
    };
    let time = f
        .all
        .iter()
        .filter_map(|c| c.seconds)
        .reduce(|a, b| a + b)
        .filter(|s| s.is_finite() && *s >= 0.0)
        // junit-report sums the times of a suite and panics on overflow: a year is plenty.
        .map(|s| s.min(YEAR_SECONDS))
        .and_then(Duration::checked_seconds_f64)
        .unwrap_or(Duration::ZERO);
    let kind = c.kind.as_str();
    let text = match &p.shared {
        // Shown in full in the first milestone's suite; here it still fails, and says where.
        findings::Shared::Repeat { first } => format!(
            "{}\nThe same finding as in milestone {first}: its failure there has the \
             details.",
            c.message
        ),
        findings::Shared::First { also } => format!(
            "{}\n\nalso in: {} (shown once, here)",
            explanation(f),
            findings::milestones_phrase(also)
        ),
        findings::Shared::Alone => explanation(f),
    };
    let mut tc = match c.status {
        Status::Pass => TestCase::success(&name, time),
        Status::Fail => with_cause(
            TestCase::failure(&name, time, kind, &xml_attr(&c.message)),
            &text,
        ),
        Status::Error => with_cause(
            TestCase::error(&name, time, kind, &xml_attr(&c.message)),
            &text,
        ),
        // The kernel is correct and its speed could not be measured (no GPU): a pass whose
        // note says so, not a skipped test (CI views show skipped tests as not done).
        Status::Skipped if describe::unmeasured(m, c) => {
            let mut tc = TestCase::success(&name, time);
            tc.set_system_out(&xml_text(&format!(
                "{}: {}",
                describe::PASS_UNMEASURED,
                c.message
            )));
            tc
        }
        Status::Skipped => {
            let mut tc = TestCase::skipped_with_cause(&name, kind, &xml_attr(&c.message));
            tc.time = time;
            tc
        }
    };
    tc.set_classname(classname);
    if c.status == Status::Pass
        && let Some(d) = &c.details
    {
        // Evidence for a pass (say, compiler warnings) is still worth keeping.
        tc.set_system_out(&xml_text(d));
    }
    tc
}

fn with_cause(mut tc: TestCase, text: &str) -> TestCase {
    let text = xml_text(text);
    if let junit_report::TestResult::Failure { cause, .. }
    | junit_report::TestResult::Error { cause, .. } = &mut tc.result
    {
        *cause = Some(text);
    }
    tc
}

/// The failure text: everything a student needs, in reading order, details last.
fn explanation(f: &Finding) -> String {
    let c = f.check;
    let mut s = c.message.clone();
    if let Some(l) = &c.location {
        s.push_str(&format!("\nat: {l}"));
    }
    match f.cases().as_slice() {
        [] => {}
        [one] => s.push_str(&format!("\ncase: {one}")),
        all => s.push_str(&format!("\ncases: {}", all.join(", "))),
    }
    if let Some(m) = describe::measurement(c) {
        s.push_str(&format!("\nmeasured: {m}"));
    }
    if let Some(h) = &c.hint {
        s.push_str(&format!("\nhint: {h}"));
    }
    if c.snippet.is_some() {
        s.push_str("\n\n");
        s.push_str(&findings::diagnostic(
            f,
            &findings::display_name(f),
            &[],
            None,
            false,
            findings::REPORT_WIDTH,
        ));
    }
    if let Some(d) = &c.details {
        s.push_str("\n\n");
        s.push_str(d);
    }
    s
}

fn render(report: &Report) -> String {
    let mut buf = Vec::new();
    match report.write_xml(&mut buf) {
        Ok(()) => String::from_utf8_lossy(&buf).into_owned(),
        // Writing to memory only fails on a bug in junit-report; still hand CI a valid file
        // that says what happened rather than a torn one.
        Err(e) => format!(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?><testsuites><testsuite name=\"cugrade\" \
             tests=\"1\" failures=\"0\" errors=\"1\"><testcase name=\"report\"><error \
             type=\"internal\" message=\"could not write JUnit XML: {}\"/></testcase>\
             </testsuite></testsuites>",
            xml_escape(&e.to_string())
        ),
    }
}

fn xml_escape(s: &str) -> String {
    xml_attr(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

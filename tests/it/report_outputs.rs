//! The reports, checked with the tools that read them: JUnit with two XML parsers and
//! `xmllint` against Jenkins' JUnit schema, Markdown with a GFM parser, CSV with a CSV reader,
//! plus snapshots of the Markdown and JUnit of hand-made verdicts (tests/data/snapshots/;
//! `UPDATE_SNAPSHOTS=1 cargo test --test it report_outputs::` rewrites them).

use crate::support;
use cugrade::report::outputs::Outputs;
use cugrade::report::{cohort, json, junit, markdown, sanitize, terminal};
use cugrade::result::{
    Check, CheckKind, CompileSummary, GradeResult, KernelResources, MilestoneResult, RunInfo,
    Status,
};
use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};
use std::path::PathBuf;
use std::process::Command;

// ---------------------------------------------------------------------------------------------
// Fixtures

fn milestone(id: &str, title: &str, max: f64, score: f64, checks: Vec<Check>) -> MilestoneResult {
    MilestoneResult {
        id: id.into(),
        title: title.into(),
        status: Status::aggregate(checks.iter().map(|c| c.status)),
        score,
        max_score: max,
        checks,
        kernel: id.into(),
        provisional: false,
    }
}

fn timed(mut c: Check, seconds: f64) -> Check {
    c.seconds = Some(seconds);
    c
}

fn gpu_run() -> RunInfo {
    RunInfo {
        device: "NVIDIA H200".into(),
        arch: "sm_90".into(),
        timed: true,
        cugrade_version: "0.1.0".into(),
        sandbox: vec!["landlock: active".into(), "seccomp: active".into()],
        notes: vec![],
        seconds: None,
        gpu: None,
        phases: None,
    }
}

fn emu_run() -> RunInfo {
    RunInfo {
        device: "PTX emulator".into(),
        arch: "sm_90".into(),
        timed: false,
        cugrade_version: "0.1.0".into(),
        sandbox: vec![
            "landlock: DEGRADED (kernel lacks Landlock ABI 1)".into(),
            "seccomp: active".into(),
        ],
        notes: vec![],
        seconds: None,
        gpu: None,
        phases: None,
    }
}

const COMPILE_LOG: &str = "reduce.cu(12): error: identifier \"tid\" is undefined\n      sum += in[tid];\n             ^\n\n1 error detected in the compilation of \"reduce.cu\".\n";

/// The submission does not compile: the first milestone fails on it, the rest are not run.
fn compile_failure() -> GradeResult {
    let compile = Check::fail(
        CheckKind::Compile,
        "compile",
        "the submission did not compile",
    )
    .with_location(Some("reduce.cu:12".into()))
    .with_hint("`tid` is used before it is declared; declare it from threadIdx.x first")
    .with_details(COMPILE_LOG);
    let not_run = |k| Check::skipped(k, "not run", "not run: the submission did not compile");
    GradeResult {
        assignment: "reduction".into(),
        student: "bob".into(),
        student_id: None,
        id: String::new(),
        entry: String::new(),
        backend: "cuda".into(),
        seed: 1234,
        score: 0.0,
        max_score: 100.0,
        milestones: vec![
            milestone(
                "reduce_naive",
                "Naive reduction",
                30.0,
                0.0,
                vec![timed(compile, 0.41)],
            ),
            milestone(
                "reduce_shared",
                "Shared memory",
                30.0,
                0.0,
                vec![not_run(CheckKind::Correctness)],
            ),
            milestone(
                "reduce_shuffle",
                "Warp shuffle",
                40.0,
                0.0,
                vec![not_run(CheckKind::Correctness)],
            ),
        ],
        submission_sha256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
            .into(),
        rubric_sha256: String::new(),
        compile: Some(CompileSummary {
            ok: false,
            log: COMPILE_LOG.into(),
            kernels: vec![],
        }),
        run: gpu_run(),
        notes: vec![],
        flags: vec![],
    }
}

const MISMATCH: &str = "first 3 mismatches of 1000003 elements (tolerance 1e-3):\n| index | expected | got |\n|---|---|---|\n| 0 | 500001.5 | 499712.0 |\n| 256 | 500001.5 | 0.0 |\n| 1000002 | 500001.5 | nan |\n";

/// On the emulator: a pass with a skipped speed check, a correctness failure with a mismatch
/// table, and a timeout.
fn mixed() -> GradeResult {
    let ok = |k, n: &str| timed(Check::pass(k, n, "ok"), 0.01);
    let perf_skipped = Check::skipped(
        CheckKind::Performance,
        "speedup n=16777216",
        "speed is not measured on the PTX emulator",
    );
    let wrong = Check::fail(
        CheckKind::Correctness,
        "correctness n=1000003",
        "out[0] is 499712, expected 500001.5 (3 of 3 runs wrong)",
    )
    .with_location(Some("reduce.cu:42".into()))
    .with_case("n=1000003")
    .with_measure(289.5, Some(0.5), "abs error")
    .with_hint("the last block is partial: guard loads with `i < n` and load 0 otherwise")
    .with_details(MISMATCH);
    let timeout = Check::error(
        CheckKind::Runtime,
        "runtime n=65536",
        "the kernel did not finish within 10 s and was killed",
    )
    .with_case("n=65536")
    .with_location(Some("reduce.cu:77:9".into()))
    .with_hint("a `while` loop whose condition never changes? Check the loop over `offset`")
    .with_details("captured output (last lines):\nblock 0 offset 16\nblock 0 offset 16\n");
    GradeResult {
        assignment: "reduction".into(),
        student: "alice".into(),
        student_id: None,
        id: String::new(),
        entry: String::new(),
        backend: "emu".into(),
        seed: 987654321,
        score: 30.0,
        max_score: 100.0,
        milestones: vec![
            MilestoneResult {
                provisional: true,
                ..milestone(
                    "reduce_naive",
                    "Naive reduction",
                    30.0,
                    30.0,
                    vec![
                        ok(CheckKind::Compile, "compile"),
                        ok(CheckKind::Correctness, "correctness n=1000003"),
                        perf_skipped,
                    ],
                )
            },
            milestone(
                "reduce_shared",
                "Shared memory",
                30.0,
                0.0,
                vec![ok(CheckKind::Compile, "compile"), timed(wrong, 1.25)],
            ),
            milestone("reduce_shuffle", "Warp shuffle", 40.0, 0.0, vec![timed(timeout, 10.0)]),
        ],
        submission_sha256: String::new(),
        rubric_sha256: String::new(),
        compile: Some(CompileSummary {
            ok: true,
            log: "reduce.cu(5): warning #177-D: variable \"unused\" was declared but never referenced\n"
                .into(),
            kernels: vec![
                KernelResources {
                    name: "reduce_naive".into(),
                    registers: 16,
                    shared_bytes: 0,
                    ..Default::default()
                },
                KernelResources {
                    name: "reduce_shared".into(),
                    registers: 255,
                    shared_bytes: 49152,
                    spill_stores: 96,
                    spill_loads: 128,
                    stack_bytes: 96,
                    const_bytes: 0,
                },
            ],
        }),
        run: emu_run(),
        notes: vec![],
        flags: vec![],
    }
}

/// What a hostile kernel can print: CDATA terminators, NUL, ESC sequences and other controls,
/// Markdown and HTML, longer fences, table pipes, GitHub workflow commands, bidi overrides.
const HOSTILE: &str = "printf: ]]> <![CDATA[ x ]]]]> \0 NUL \x1b[31mred\x1b[0m \x1b]0;pwned\x07 \
     \x01\x02\x08\x0b\x0c\x1f\x7f \u{85}\u{9b} \u{fffe}\u{ffff} \u{202e}evil\u{202c}\n\
     ```` \n```\n</details>\n<script>alert(1)</script>\n| a | b |\n\
     \n::error file=x.cu,line=1::injected\n##[error]old style\n& &amp; <b>bold</b>\n";

fn hostile() -> GradeResult {
    let mut r = mixed();
    r.student = "=HYPERLINK(\"x\"), \"Bobby\" | <img src=x> `tick`".into();
    r.seed = 42;
    let m = &mut r.milestones[1];
    m.checks[1].details = Some(HOSTILE.into());
    m.checks[1].message = "got ]]> and \0 and \x1b[2J\nsecond line ::warning::x | pipe".into();
    m.checks[1].name = "correctness | <n>".into();
    m.checks[1].hint = Some("try `]]>` ``` and *this*".into());
    m.title = "Shared | memory <b>".into();
    r.milestones[2].checks[0].details = Some(format!("{HOSTILE}{}", "y".repeat(200_000)));
    r.notes.push("manifest ignored: \x1b[1mbold\x1b[0m".into());
    r
}

fn all_fixtures() -> Vec<(&'static str, GradeResult)> {
    vec![
        ("compile_failure", compile_failure()),
        ("mixed", mixed()),
        ("hostile", hostile()),
    ]
}

// ---------------------------------------------------------------------------------------------
// Helpers

fn data_dir() -> PathBuf {
    crate::support::root().join("tests/data")
}

/// Validate with libxml2 against Jenkins' JUnit schema. CI installs `libxml2-utils`;
/// `CUGRADE_SKIP_XMLLINT=1` lets a machine without it run the rest.
fn xmllint_validate(xml: &str) {
    if std::env::var_os("CUGRADE_SKIP_XMLLINT").is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("junit.xml");
    std::fs::write(&file, xml).unwrap();
    let out = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(data_dir().join("junit-10.xsd"))
        .arg(&file)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run xmllint ({e}): install libxml2-utils, or set CUGRADE_SKIP_XMLLINT=1")
        });
    assert!(
        out.status.success(),
        "xmllint rejected the JUnit XML:\n{}\n--- document ---\n{}",
        String::from_utf8_lossy(&out.stderr),
        &xml[..xml.len().min(4000)]
    );
}

/// Parse to the end with quick-xml too: a streaming parser trips over other things than a
/// tree builder (it checks CDATA and comment boundaries as it goes).
fn quick_xml_parses(xml: &str) {
    let mut reader = quick_xml::Reader::from_str(xml);
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("quick-xml: {e} at {}", reader.buffer_position()),
        }
    }
}

fn assert_snapshot(name: &str, actual: &str) {
    support::assert_snapshot(&data_dir().join("snapshots").join(name), actual);
}

/// Replace the value after `key` up to `end` everywhere: times and seeds differ between runs.
fn redact(text: &str, key: &str, end: char, with: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(key) {
        out.push_str(&rest[..i + key.len()]);
        rest = &rest[i + key.len()..];
        let j = rest.find(end).unwrap_or(rest.len());
        out.push_str(with);
        rest = &rest[j..];
    }
    out.push_str(rest);
    out
}

/// JUnit with a line per element, for a readable snapshot; CDATA is written back unchanged.
fn pretty_xml(xml: &str) -> String {
    let mut reader = quick_xml::Reader::from_str(xml);
    reader.config_mut().trim_text(true);
    let mut writer = quick_xml::Writer::new_with_indent(Vec::new(), b' ', 2);
    loop {
        match reader.read_event().unwrap() {
            quick_xml::events::Event::Eof => break,
            e => writer.write_event(e).unwrap(),
        }
    }
    String::from_utf8(writer.into_inner()).unwrap()
}

fn md_events(md: &str) -> Vec<Event<'_>> {
    Parser::new_ext(md, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH).collect()
}

/// Rows (including the header) and cells per row of each table in the document.
fn md_tables(md: &str) -> Vec<Vec<usize>> {
    let mut tables = Vec::new();
    let mut rows: Vec<usize> = Vec::new();
    for e in md_events(md) {
        match e {
            Event::Start(Tag::Table(_)) => rows.clear(),
            Event::Start(Tag::TableHead) | Event::Start(Tag::TableRow) => rows.push(0),
            Event::Start(Tag::TableCell) => *rows.last_mut().unwrap() += 1,
            Event::End(TagEnd::Table) => tables.push(rows.clone()),
            _ => {}
        }
    }
    tables
}

/// All text inside fenced code blocks, and all raw HTML, of a document.
fn md_code_and_html(md: &str) -> (String, Vec<String>) {
    let (mut code, mut html, mut in_code) = (String::new(), Vec::new(), false);
    for e in md_events(md) {
        match e {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(_))) => in_code = true,
            Event::End(TagEnd::CodeBlock) => in_code = false,
            Event::Text(t) if in_code => code.push_str(&t),
            Event::Html(h) | Event::InlineHtml(h) => html.push(h.to_string()),
            _ => {}
        }
    }
    (code, html)
}

// ---------------------------------------------------------------------------------------------
// JSON

#[test]
fn result_json_round_trips_and_has_spec_fields() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("result.json");
    for (_, r) in all_fixtures() {
        cugrade::report::atomic::write(&path, json::to_string(&r)).unwrap();
        assert_eq!(json::read(&path).unwrap(), r);
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for key in [
            "assignment",
            "student",
            "backend",
            "seed",
            "score",
            "max_score",
            "milestones",
        ] {
            assert!(v.get(key).is_some(), "result.json lacks {key}");
        }
        let check = &v["milestones"][0]["checks"][0];
        assert!(check["kind"].is_string() && check["status"].is_string());
    }
    assert!(json::read(&dir.path().join("missing.json")).is_err());
}

// ---------------------------------------------------------------------------------------------
// JUnit

#[test]
fn junit_is_one_suite_per_milestone_and_one_case_per_check() {
    for (name, r) in all_fixtures() {
        let xml = junit::to_string(&r);
        let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{name}: {e}"));
        let suites: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("testsuite"))
            .collect();
        assert_eq!(suites.len(), r.milestones.len(), "{name}");
        for (suite, m) in suites.iter().zip(&r.milestones) {
            assert_eq!(suite.attribute("name"), Some(m.id.as_str()));
            let cases: Vec<_> = suite
                .children()
                .filter(|n| n.has_tag_name("testcase"))
                .collect();
            assert_eq!(cases.len(), m.checks.len());
            let count = |s| {
                m.checks
                    .iter()
                    .filter(|c| c.status == s)
                    .count()
                    .to_string()
            };
            assert_eq!(
                suite.attribute("failures"),
                Some(count(Status::Fail).as_str())
            );
            assert_eq!(
                suite.attribute("errors"),
                Some(count(Status::Error).as_str())
            );
            for (case, c) in cases.iter().zip(&m.checks) {
                assert_eq!(
                    case.attribute("classname").unwrap(),
                    sanitize::xml_attr(&format!("{}.{}", r.assignment, m.id))
                );
                let child = |tag| case.children().find(|n| n.has_tag_name(tag));
                match c.status {
                    Status::Pass => assert!(child("failure").or(child("error")).is_none()),
                    Status::Fail => assert!(child("failure").is_some()),
                    Status::Error => assert!(child("error").is_some()),
                    // A correct kernel whose speed no GPU measured: a pass that says so.
                    Status::Skipped if m.provisional && c.kind == CheckKind::Performance => {
                        assert!(child("skipped").or(child("failure")).is_none());
                        let note = child("system-out").unwrap().text().unwrap();
                        assert!(note.starts_with("PASS, speed not measured: "), "{note}");
                    }
                    Status::Skipped => assert!(child("skipped").is_some()),
                }
            }
            let out = suite
                .children()
                .find(|n| n.has_tag_name("system-out"))
                .unwrap();
            assert!(out.text().unwrap().contains("assignment: reduction"));
        }
        quick_xml_parses(&xml);
        xmllint_validate(&xml);
    }
}

#[test]
fn the_schema_check_can_fail() {
    // Guards the guard: a `file` attribute on `<testcase>` (which junit-report writes when
    // asked to) is outside Jenkins' schema, so validation must reject it.
    if std::env::var_os("CUGRADE_SKIP_XMLLINT").is_some() {
        return;
    }
    let bad = "<testsuites><testsuite name=\"s\" tests=\"1\" failures=\"0\" errors=\"0\">\
               <testcase name=\"c\" file=\"k.cu\"/></testsuite></testsuites>";
    let result = std::panic::catch_unwind(|| xmllint_validate(bad));
    assert!(
        result.is_err(),
        "xmllint accepted a document outside the schema"
    );
}

#[test]
fn junit_failure_text_explains_the_failure() {
    let xml = junit::to_string(&mixed());
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let failure = doc
        .descendants()
        .find(|n| n.has_tag_name("failure"))
        .unwrap();
    assert_eq!(failure.attribute("type"), Some("correctness"));
    assert!(
        failure
            .attribute("message")
            .unwrap()
            .starts_with("out[0] is 499712")
    );
    let text = failure.text().unwrap();
    for part in [
        "at: reduce.cu:42",
        "case: n=1000003",
        "measured: 289.5 abs error (threshold 0.5 abs error)",
        "hint: the last block",
        "| 256 | 500001.5 | 0.0 |",
    ] {
        assert!(text.contains(part), "failure text lacks {part:?}:\n{text}");
    }
    let error = doc.descendants().find(|n| n.has_tag_name("error")).unwrap();
    assert_eq!(error.attribute("type"), Some("runtime"));
    assert!(error.text().unwrap().contains("block 0 offset 16"));
    // The correct milestone's unmeasured speed check is a pass with a note, not <skipped/>.
    assert!(
        doc.descendants().all(|n| !n.has_tag_name("skipped")),
        "{xml}"
    );
    let speed = doc
        .descendants()
        .find(|n| n.attribute("name") == Some("speedup n=16777216"))
        .unwrap();
    let note = speed
        .children()
        .find(|n| n.has_tag_name("system-out"))
        .and_then(|n| n.text())
        .unwrap();
    assert!(
        note.contains("PASS, speed not measured") && note.contains("PTX emulator"),
        "{note}"
    );
    let out = doc
        .descendants()
        .find(|n| {
            n.has_tag_name("system-out") && n.parent().is_some_and(|p| p.has_tag_name("testsuite"))
        })
        .unwrap();
    let header = out.text().unwrap();
    assert!(header.contains("Speed was not measured"), "{header}");
    assert!(
        header.contains("milestone status: PASS, speed not measured"),
        "{header}"
    );
}

#[test]
fn junit_survives_hostile_device_output() {
    let r = hostile();
    for xml in [
        junit::to_string(&r),
        junit::cohort_to_string(&[r.clone(), mixed()]),
    ] {
        assert!(!xml.contains('\0') && !xml.contains('\x1b'));
        let doc = roxmltree::Document::parse(&xml).expect("hostile output broke the XML");
        quick_xml_parses(&xml);
        xmllint_validate(&xml);
        let failure = doc
            .descendants()
            .find(|n| n.has_tag_name("failure"))
            .unwrap();
        let text = failure.text().unwrap();
        // The text survives, visibly: a reader learns what the kernel printed.
        for part in [
            "printf: ]] >",
            "\\x00 NUL",
            "red",
            "\\x01",
            "\\u{fffe}",
            "<script>",
            "::error",
        ] {
            assert!(text.contains(part), "lost {part:?}:\n{text}");
        }
        assert!(
            !text.contains("pwned"),
            "OSC title sequence must be dropped"
        );
        let huge = doc.descendants().find(|n| n.has_tag_name("error")).unwrap();
        let huge = huge.text().unwrap();
        assert!(huge.len() < sanitize::DETAILS_CAP + 1024 && huge.contains("[truncated:"));
    }
}

#[test]
fn cohort_junit_names_students() {
    let results = [mixed(), compile_failure()];
    let xml = junit::cohort_to_string(&results);
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let names: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testsuite"))
        .map(|n| n.attribute("name").unwrap().to_string())
        .collect();
    assert_eq!(names.len(), 6);
    assert!(names.contains(&"alice/reduce_shared".to_string()));
    assert!(names.contains(&"bob/reduce_naive".to_string()));
    let case = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase"))
        .unwrap();
    assert!(
        case.attribute("classname")
            .unwrap()
            .starts_with("reduction.alice.")
    );
    xmllint_validate(&xml);
}

#[test]
fn junit_snapshot() {
    let xml = pretty_xml(&junit::to_string(&mixed()));
    let xml = redact(&xml, "timestamp=\"", '"', "[timestamp]");
    let xml = redact(&xml, "hostname=\"", '"', "[hostname]");
    let xml = redact(&xml, "seed: ", '\n', "[seed]");
    assert_snapshot("mixed.junit.xml", &xml);
}

// ---------------------------------------------------------------------------------------------
// Markdown

#[test]
fn markdown_summary_table_has_a_row_per_milestone_plus_total() {
    for (name, r) in all_fixtures() {
        let md = markdown::render(&r);
        let tables = md_tables(&md);
        let summary = &tables[0];
        assert_eq!(summary.len(), 1 + r.milestones.len() + 1, "{name}:\n{md}");
        assert!(
            summary.iter().all(|&cells| cells == 3),
            "{name}: {summary:?}"
        );
    }
}

#[test]
fn markdown_says_what_the_run_could_not_do() {
    let md = markdown::render(&mixed());
    assert!(md.contains("**Speed was not measured:** this run used PTX emulator"));
    assert!(md.contains("**The sandbox was degraded**"));
    let md = markdown::render(&compile_failure());
    assert!(!md.contains("Speed was not measured"));
    assert!(!md.contains("degraded"));
}

/// Flags for the instructor (issue 19): listed in report.md and as rows of the cohort's
/// integrity.csv after the pairs, never touching the score; a message from device code cannot
/// become a spreadsheet formula.
#[test]
fn flags_reach_report_md_and_integrity_csv() {
    let mut r = mixed();
    r.flags = vec![
        cugrade::result::Flag {
            kind: "reads-timer".into(),
            milestone: Some("reduce_shared".into()),
            location: Some("reduce.cu:27".into()),
            message: "reads %globaltimer (the GPU's nanosecond clock)".into(),
        },
        cugrade::result::Flag {
            kind: "large-device-array".into(),
            milestone: None,
            location: None,
            message: "=HYPERLINK(\"x\") declares a 4 MiB __device__ array".into(),
        },
    ];
    let score = r.score;
    let md = markdown::render(&r);
    assert!(md.contains("## Flags for the instructor"), "{md}");
    assert!(
        md.contains("- `reads-timer` (reduce.cu:27): reduce\\_shared: reads %globaltimer"),
        "{md}"
    );
    assert!(!markdown::render(&mixed()).contains("Flags for the instructor"));
    let csv_text = cugrade::report::gradebook::integrity_csv(&[], &[r.clone()]).unwrap();
    let mut rd = csv::Reader::from_reader(csv_text.as_bytes());
    let head: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(
        head.last().map(String::as_str),
        Some("details"),
        "{csv_text}"
    );
    let rows: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 2, "{csv_text}");
    let col = |row: &csv::StringRecord, name: &str| {
        row.get(head.iter().position(|h| h == name).unwrap())
            .unwrap()
            .to_string()
    };
    assert_eq!(col(&rows[0], "student_a"), "alice");
    assert_eq!(col(&rows[0], "flag"), "reads-timer");
    assert_eq!(col(&rows[0], "lines_a"), "reduce.cu:27");
    assert!(col(&rows[0], "details").starts_with("reduce_shared: reads %globaltimer"));
    assert_eq!(col(&rows[1], "flag"), "large-device-array");
    assert!(!col(&rows[1], "details").starts_with('='), "{csv_text}");
    assert_eq!(r.score, score, "a flag never changes a score");
}

#[test]
fn markdown_shows_evidence_and_resources() {
    let md = markdown::render(&mixed());
    for part in [
        "- **Where:** `reduce.cu:42`",
        "- **Case:** `n=1000003`",
        "- **Measured:** 289.5 abs error (threshold 0.5 abs error)",
        "- **Hint:** the last block is partial",
        "<summary>Compile log</summary>",
    ] {
        assert!(md.contains(part), "lacks {part:?}:\n{md}");
    }
    let (code, _) = md_code_and_html(&md);
    assert!(
        code.contains("| 256 | 500001.5 | 0.0 |"),
        "mismatch table must stay verbatim"
    );
    // Summary table, then the kernel resources table: header + one row per kernel.
    let tables = md_tables(&md);
    assert_eq!(tables.len(), 2);
    assert_eq!(tables[1], vec![6, 6, 6]);
    assert!(md.contains("⚠️ 96 B"), "spills must stand out");

    let md = markdown::render(&compile_failure());
    let (code, _) = md_code_and_html(&md);
    assert_eq!(
        code.matches("identifier \"tid\" is undefined").count(),
        1,
        "log shown once"
    );
}

#[test]
fn markdown_hostile_text_stays_in_its_place() {
    let r = hostile();
    let md = markdown::render(&r);
    let (code, html) = md_code_and_html(&md);
    // The only raw HTML is the report's own folding.
    for h in &html {
        let h = h.trim();
        assert!(
            h == "<details>" || h == "</details>" || h.starts_with("<summary>"),
            "student text became HTML: {h:?}"
        );
        assert!(!h.contains("script") && !h.contains("img"));
    }
    // Everything the kernel printed is inside a code block, including its fence and its
    // `</details>`.
    for part in [
        "```` ",
        "</details>",
        "<script>alert(1)</script>",
        "| a | b |",
        "::error",
    ] {
        assert!(code.contains(part), "{part:?} escaped its code block");
    }
    // The table still has its 3 columns despite pipes in the student's name and titles.
    assert!(md_tables(&md)[0].iter().all(|&c| c == 3));
    // No heading, link or image came from student text.
    let headings = md_events(&md)
        .iter()
        .filter(|e| matches!(e, Event::Start(Tag::Heading { .. })))
        .count();
    let expected = 1 + r.milestones.len() + finding_sections(&r) + 2;
    assert_eq!(headings, expected);
    assert!(!md_events(&md).iter().any(|e| matches!(
        e,
        Event::Start(Tag::Link { .. }) | Event::Start(Tag::Image { .. })
    )));
    assert!(!md.contains('\x1b') && !md.contains('\0'));
}

/// report.md's sections of findings: one per finding that did not pass, except a finding an
/// earlier milestone shows word for word (one line there) and a correct milestone's unmeasured
/// speed check (one line: "Speed not measured").
fn finding_sections(r: &GradeResult) -> usize {
    use cugrade::report::findings::{Shared, placed};
    placed(r)
        .iter()
        .flatten()
        .filter(|p| {
            let c = p.finding.check;
            let unmeasured = p.milestone.provisional
                && p.milestone.status == Status::Skipped
                && c.kind == CheckKind::Performance
                && c.status == Status::Skipped;
            c.status != Status::Pass && !unmeasured && !matches!(p.shared, Shared::Repeat { .. })
        })
        .count()
}

#[test]
fn markdown_snapshots() {
    for (name, r) in [("mixed", mixed()), ("compile_failure", compile_failure())] {
        let md = markdown::render(&r);
        let md = redact(&md, "- Seed: ", '\n', "[seed]");
        let md = redact(&md, "- cugrade ", '\n', "[version]");
        assert_snapshot(&format!("{name}.report.md"), &md);
    }
}

// ---------------------------------------------------------------------------------------------
// Terminal and GitHub annotations

#[test]
fn terminal_summary_lists_milestones_failures_and_total() {
    let out = terminal::render(&mixed(), false);
    assert!(!out.contains('\x1b'), "no colour asked for:\n{out}");
    for part in [
        "  PASS  reduce_naive      30 / 30",
        "  FAIL  reduce_shared      0 / 30",
        "  ERROR reduce_shuffle     0 / 40",
        "  PASS  reduce_naive      30 / 30, speed not measured",
        "FAIL: reduce_shared › correctness n=1000003: out[0] is 499712",
        "--> reduce.cu:42",
        "= note: case n=1000003",
        "= help: the last block is partial",
        "note: Speed was not measured",
        "sandbox degraded: landlock",
        "Total: 30 / 100, speed not measured  FAIL",
    ] {
        assert!(out.contains(part), "lacks {part:?}:\n{out}");
    }
    // A correct kernel whose speed was not measured passed: nothing reads SKIP.
    assert!(!out.contains("SKIP") && !out.contains("skipped)"), "{out}");
    let coloured = terminal::render(&mixed(), true);
    assert!(coloured.contains("\x1b["));
}

#[test]
fn terminal_output_cannot_be_driven_by_the_student() {
    let r = hostile();
    for out in [terminal::render(&r, false), terminal::github(&r)] {
        assert!(!out.contains('\x1b') && !out.contains('\0') && !out.contains('\r'));
        for line in out.lines() {
            let t = line.trim_start();
            assert!(
                !t.starts_with("##[")
                    && (!t.starts_with("::")
                        || t.starts_with("::error ")
                        || t.starts_with("::notice ")),
                "student text starts a line: {line:?}"
            );
        }
    }
    let colored = terminal::render(&r, true);
    assert!(
        !colored.contains("\x1b[31mred"),
        "student colours must not pass through"
    );
}

#[test]
fn github_annotations_point_at_the_line() {
    let out = terminal::github(&mixed());
    let annotations: Vec<_> = out.lines().filter(|l| l.starts_with("::")).collect();
    assert_eq!(annotations.len(), 3, "{out}");
    assert!(annotations[0].starts_with(
        "::error file=reduce.cu,line=42,title=reduce_shared › correctness n=1000003::out[0] is 499712"
    ));
    assert!(annotations[0].contains("%0Ahint: the last block"));
    assert!(annotations[1].starts_with("::error file=reduce.cu,line=77,col=9,title="));
    assert!(annotations[2].starts_with("::notice title=speed not measured::"));
    assert!(out.contains("Total: 30 / 100"));
    let nested = terminal::github_in(&mixed(), "submissions/alice/");
    assert!(
        nested.starts_with("::error file=submissions/alice/reduce.cu,line=42,"),
        "{nested}"
    );

    let hostile = terminal::github(&hostile());
    let first = hostile.lines().find(|l| l.starts_with("::error")).unwrap();
    assert!(first.contains("title=reduce_shared › correctness | <n>::"));
    // Newlines in the message were flattened, so the student's text stays inside this command.
    assert!(
        first.contains("::got ]]> and \\x00 and second line ::warning::x | pipe"),
        "{first}"
    );
}

#[test]
fn json_format_is_result_json() {
    let r = mixed();
    let back: GradeResult = serde_json::from_str(&terminal::json(&r)).unwrap();
    assert_eq!(back, r);
}

// ---------------------------------------------------------------------------------------------
// Cohort

#[test]
fn cohort_writes_summary_csv_and_junit() {
    let dir = tempfile::tempdir().unwrap();
    let mut partial = compile_failure();
    partial.student = "carol, \"the\" tester".into();
    partial.milestones.truncate(1);
    partial
        .milestones
        .push(milestone("extra", "Extra", 0.0, 0.0, vec![]));
    let results = vec![mixed(), partial, compile_failure(), hostile()];
    cohort::write_all_with(&results, &[], dir.path()).unwrap();

    let mut csv = csv::Reader::from_path(dir.path().join("grades.csv")).unwrap();
    let header: Vec<String> = csv.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(
        header,
        [
            "student",
            "reduce_naive",
            "reduce_shared",
            "reduce_shuffle",
            "extra",
            "total",
            "max_score",
            "speed_measured",
            "status",
            "entry",
            "id"
        ]
    );
    let rows: Vec<Vec<String>> = csv
        .records()
        .map(|r| r.unwrap().iter().map(String::from).collect())
        .collect();
    assert_eq!(rows.len(), 4);
    let by_name = |n: &str| {
        rows.iter()
            .find(|r| r[0] == n)
            .unwrap_or_else(|| panic!("{n}: {rows:?}"))
    };
    assert_eq!(
        by_name("alice"),
        &[
            "alice", "30", "0", "0", "", "30", "100", "no", "fail", "alice", "alice"
        ]
    );
    assert_eq!(
        &by_name("carol, \"the\" tester")[..6],
        &["carol, \"the\" tester", "0", "", "", "0", "0"]
    );
    // A formula-like name is defused, and survives otherwise intact.
    let h = rows.iter().find(|r| r[0].contains("HYPERLINK")).unwrap();
    assert_eq!(h[0], format!("'{}", hostile().student));

    let summary = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
    let tables = md_tables(&summary);
    assert_eq!(tables[0].len(), 1 + 4, "{summary}");
    assert!(tables[0].iter().all(|&c| c == 1 + 4 + 1), "{summary}");
    assert_eq!(tables[1].len(), 1 + 4);
    assert!(
        summary.contains("4 students: 0 passed everything, 4 failed a check"),
        "{summary}"
    );

    let xml = std::fs::read_to_string(dir.path().join("junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let suites = doc
        .descendants()
        .filter(|n| n.has_tag_name("testsuite"))
        .count();
    assert_eq!(suites, 3 + 2 + 3 + 3);
    xmllint_validate(&xml);
}

#[test]
fn student_files_stay_inside_the_output_dir() {
    let dir = tempfile::tempdir().unwrap();
    for (name, expected) in [
        ("alice", "alice"),
        ("../../etc/passwd", "_._.._etc_passwd"),
        ("..", "_."),
        ("", "_"),
        (".hidden", "_hidden"),
        ("a/b\\c d", "a_b_c_d"),
    ] {
        assert_eq!(cohort::safe_dir_name(name), expected, "{name:?}");
    }
    let mut r = hostile();
    r.student = "../escape".into();
    let written = dir
        .path()
        .join("students")
        .join(cohort::safe_dir_name(r.key()));
    std::fs::create_dir_all(&written).unwrap();
    Outputs::folder(&written)
        .write(&mut r.clone(), false)
        .unwrap();
    assert_eq!(written, dir.path().join("students/_._escape"));
    for f in ["result.json", "report.md", "junit.xml"] {
        assert!(written.join(f).is_file(), "{f} missing");
    }
    assert_eq!(json::read(&written.join("result.json")).unwrap(), r);
    assert!(!dir.path().parent().unwrap().join("escape").exists());
}

// ---------------------------------------------------------------------------------------------
// Random hostile text everywhere

/// Pieces that mean something to XML, Markdown, HTML, terminals or GitHub, plus every control.
fn hostile_piece(rng: &mut impl rand::Rng) -> String {
    const PIECES: &[&str] = &[
        "]]>",
        "<![CDATA[",
        "<!--",
        "-->",
        "<?",
        "?>",
        "&",
        "&amp;",
        "<",
        ">",
        "\"",
        "'",
        "`",
        "```",
        "~~~",
        "|",
        "\\",
        "*",
        "_",
        "[",
        "](",
        ")",
        "!",
        "$",
        "#",
        "- ",
        "1. ",
        "> ",
        "::",
        "::error::",
        "##[",
        "%",
        "%0A",
        ",",
        ":",
        "\x1b[",
        "\x1b]",
        "\x1b[31m",
        "\x07",
        "\r",
        "\n",
        "\r\n",
        "\t",
        " ",
        "a",
        "é",
        "\u{fffe}",
        "\u{ffff}",
        "\u{10ffff}",
        "\u{202e}",
        "\u{feff}",
        "</details>",
        "<details>",
        "<script>",
        "</summary>",
        "<img src=x>",
        "www.example.com",
        "=1+1",
        "\u{85}",
        "\u{9b}",
    ];
    let mut s = String::new();
    for _ in 0..rng.random_range(0..12) {
        if rng.random_bool(0.3) {
            s.push(char::from(rng.random_range(0u8..0x20)));
        } else {
            s.push_str(PIECES[rng.random_range(0..PIECES.len())]);
        }
    }
    s
}

fn random_result(rng: &mut impl rand::Rng) -> GradeResult {
    let mut p = || hostile_piece(rng);
    let mut r = hostile();
    r.student = p();
    r.run.device = p();
    r.run.sandbox.push(format!("{}: DEGRADED ({})", p(), p()));
    r.run.notes.push(p());
    r.notes.push(p());
    let compile = r.compile.as_mut().unwrap();
    compile.log = p();
    compile.kernels[0].name = p();
    for m in &mut r.milestones {
        (m.id, m.title, m.kernel) = (p(), p(), p());
        for c in &mut m.checks {
            c.name = p();
            c.message = p();
            c.hint = Some(p());
            c.location = Some(p());
            c.case = Some(p());
            c.unit = Some(p());
            c.details = Some(p());
        }
    }
    r
}

#[test]
fn random_hostile_text_never_breaks_a_report() {
    use rand::SeedableRng;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let results: Vec<GradeResult> = (0..150).map(|_| random_result(&mut rng)).collect();
    for r in &results {
        let xml = junit::to_string(r);
        let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}: {r:?}"));
        let cases = doc
            .descendants()
            .filter(|n| n.has_tag_name("testcase"))
            .count();
        assert_eq!(
            cases,
            r.milestones.iter().map(|m| m.checks.len()).sum::<usize>()
        );
        quick_xml_parses(&xml);

        let md = markdown::render(r);
        let tables = md_tables(&md);
        assert_eq!(tables[0].len(), r.milestones.len() + 2, "{md}");
        assert!(tables.iter().all(|t| t.iter().all(|&c| c == t[0])), "{md}");
        let (_, html) = md_code_and_html(&md);
        for h in html {
            let h = h.trim();
            assert!(
                h == "<details>" || h == "</details>" || h.starts_with("<summary>"),
                "{h:?}\n{md}"
            );
        }
        let headings = md_events(&md)
            .iter()
            .filter(|e| matches!(e, Event::Start(Tag::Heading { .. })))
            .count();
        assert_eq!(
            headings,
            1 + r.milestones.len() + finding_sections(r) + 2,
            "{md}"
        );

        for out in [terminal::render(r, true), terminal::github(r)] {
            let bad = out.lines().find(|l| l.contains('\0') || l.contains('\r'));
            assert!(bad.is_none(), "{bad:?}");
            for line in out.lines() {
                let t = line.trim_start();
                assert!(!t.starts_with("##["), "{line:?}");
                assert!(
                    !t.starts_with("::") || t.starts_with("::error ") || t.starts_with("::notice "),
                    "{line:?}"
                );
            }
        }
    }
    // One schema validation for the lot (xmllint per document would be slow).
    xmllint_validate(&junit::cohort_to_string(&results));
    let dir = tempfile::tempdir().unwrap();
    cohort::write_all_with(&results, &[], dir.path()).unwrap();
    let mut csv = csv::Reader::from_path(dir.path().join("grades.csv")).unwrap();
    assert_eq!(csv.records().count(), results.len());
    let summary = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
    assert_eq!(md_tables(&summary)[0].len(), 1 + results.len());
}

//! `cugrade grade` over the 50-student fixture cohort (tests/it/cohort_fixture.rs) on the emulator:
//! grades.csv, integrity.csv and three students' Gradescope results.json are pinned in
//! tests/fixtures/cohort/expected/ (run with `UPDATE_SNAPSHOTS=1` to write them after an intended
//! change, then read the diff); every results.json is validated against Gradescope's format;
//! `cugrade merge` of the run split in two equals the run.

use crate::cohort_fixture;
use crate::support::{BIN, cugrade, nvrtc, root, tree};

use std::path::{Path, PathBuf};
use std::process::Command;

fn expected_dir() -> PathBuf {
    root().join("tests/fixtures/cohort/expected")
}

/// Compare `got` with the pinned file (`UPDATE_SNAPSHOTS=1` writes it).
fn pinned(name: &str, got: &str) {
    crate::support::assert_snapshot(&expected_dir().join(name), got);
}

/// results.json with its one timing zeroed and its submission-level output (which must be
/// the student's report.md less its sandbox lines, pinned by the report tests) and the
/// sandbox lines in extra_data replaced by markers.
fn redacted_gradescope(text: &str, report_md: &str, tmp: &Path) -> String {
    let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
    v["execution_time"] = serde_json::json!(0);
    // The sandbox's lines, which differ from host to host, are the instructor's (extra_data).
    let without_sandbox: String = report_md
        .lines()
        .filter(|l| !l.starts_with("- Sandbox: "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        v["output"].as_str(),
        Some(without_sandbox.as_str()),
        "output is report.md without its sandbox lines"
    );
    v["output"] = serde_json::json!("<report.md>");
    if let Some(lines) = v["extra_data"].get_mut("sandbox") {
        assert!(lines.is_array(), "{lines}");
        *lines = serde_json::json!("<sandbox lines>");
    }
    let text = serde_json::to_string_pretty(&v).unwrap() + "\n";
    // A message about an unreadable submission names its path, inside this run's temp dir.
    text.replace(tmp.to_str().unwrap(), "<tmp>")
}

#[test]
fn fifty_students_grade_into_pinned_gradebook_integrity_and_gradescope_files() {
    if !nvrtc() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cohort = tmp.path().join("cohort");
    assert_eq!(cohort_fixture::write(&root(), &cohort), 50);
    let out = tmp.path().join("out");
    let started = std::time::Instant::now();
    let o = cugrade()
        .args(["grade", "--rubric"])
        .arg(root().join("tests/fixtures/cohort/reduction-small.yaml"))
        .arg(&cohort)
        .arg("--out")
        .arg(&out)
        .args(["--backend", "emu", "--seed", "11", "--jobs", "2"])
        .env("CI", "1")
        // Pinned outputs: no speed estimates (their numbers move whenever the cost model is
        // re-fitted; tests/it/estimate.rs covers them and their determinism).
        .env("CUGRADE_ESTIMATE_GPU", "none")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    eprintln!(
        "graded the 50-student fixture cohort in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    // Not a terminal: plain progress lines with the counts, one per student.
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("graded "))
        .collect();
    assert_eq!(lines.len(), 50, "{stderr}");
    assert!(
        lines.iter().all(|l| l.contains("failing so far")),
        "{stderr}"
    );
    assert!(lines.last().unwrap().contains("[50/50, "), "{stderr}");

    // ci/golden.sh keeps the cohort and its outputs, to compare two builds byte for byte.
    if let Some(keep) = std::env::var_os("CUGRADE_KEEP_COHORT") {
        let keep = PathBuf::from(keep);
        for (name, dir) in [("cohort", &cohort), ("out", &out)] {
            for (rel, bytes) in tree(dir) {
                let to = keep.join(name).join(rel);
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::write(to, bytes).unwrap();
            }
        }
    }
    let read = |p: &str| std::fs::read_to_string(out.join(p)).unwrap();
    let grades = read("grades.csv");
    pinned("grades.csv", &grades);
    pinned("integrity.csv", &read("integrity.csv"));

    // The planted duplicates are flagged, identical after normalization.
    let integrity = read("integrity.csv");
    for pair in [
        "s01-optimized,s24-copy-of-s01,1.00,yes",
        "s01-optimized,s25-disguised-s01,1.00,yes",
        "s04-alt-b.tar.gz,s05-single-file.cu,1.00,yes",
    ] {
        assert!(integrity.contains(pair), "{pair} not in\n{integrity}");
    }
    // Starter and reference code are not matches: the one-kernel submissions whose kernel is
    // the reference's own are not paired with each other.
    assert!(
        !integrity.contains("SUM(A1;A2),s16-claims-s02s-id"),
        "{integrity}"
    );

    // grades.csv: keyed by the cohort entry (never by a manifest's id), formula names defused,
    // speed marked as not measured on the emulator.
    let mut csv = csv::Reader::from_reader(grades.as_bytes());
    let header: Vec<String> = csv.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header[0], "student");
    assert_eq!(
        &header[header.len() - 6..],
        [
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
    assert_eq!(rows.len(), 50);
    let keys: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert!(
        !keys.contains(&"S1002"),
        "a manifest's id never keys a row: {keys:?}"
    );
    assert!(keys.contains(&"s02-naive") && keys.contains(&"s16-claims-s02s-id"));
    assert!(keys.contains(&"'=SUM(A1;A2)"), "{keys:?}");
    assert!(rows.iter().all(|r| r[header.len() - 4] == "no"), "{rows:?}");
    // Every row has its own id, and its folder under students/.
    let ids: std::collections::BTreeSet<&str> =
        rows.iter().map(|r| r[header.len() - 1].as_str()).collect();
    assert_eq!(ids.len(), 50);
    for id in &ids {
        assert!(
            out.join("students").join(id).join("result.json").is_file(),
            "{id}"
        );
    }
    // A manifest's `student:` never chooses a row (issue 32): it is only noted.
    let claimed = read("students/s16-claims-s02s-id/result.json");
    assert!(
        claimed.contains("the manifest names the student `S1002`"),
        "{claimed}"
    );
    let summary = read("summary.md");
    assert!(summary.contains("## Duplicates") && summary.contains("## Most common failure causes"));
    assert!(summary.contains("charts/scores.svg"));
    assert!(read("charts/scores.svg").starts_with("<svg"));
    assert!(read("charts/milestones.svg").contains("reduce_shuffle"));

    // Gradescope: every student's results.json in the documented format; three pinned.
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../data/gradescope-results.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut students = 0;
    for e in std::fs::read_dir(out.join("students")).unwrap() {
        let p = e.unwrap().path().join("results.json");
        if !p.is_file() {
            continue;
        }
        students += 1;
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&v)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", p.display());
    }
    assert_eq!(students, 50);
    for s in ["s01-optimized", "s09-off-by-one", "s17-bad-manifest"] {
        pinned(
            &format!("gradescope/{s}.json"),
            &redacted_gradescope(
                &read(&format!("students/{s}/results.json")),
                &read(&format!("students/{s}/report.md")),
                tmp.path(),
            ),
        );
    }

    // merge of the run split in two shards equals the run, byte for byte. Each shard's folder
    // starts as a copy of the whole run, so `--resume` reuses every result; each shard's
    // record (shard.json) lists its own students, and merge takes only those.
    let (a, b) = (tmp.path().join("half-a"), tmp.path().join("half-b"));
    for (k, half) in [(1, &a), (2, &b)] {
        for (rel, bytes) in tree(&out.join("students")) {
            let to = half.join("students").join(rel);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::write(to, bytes).unwrap();
        }
        let o = cugrade()
            .args(["grade", "--rubric"])
            .arg(root().join("tests/fixtures/cohort/reduction-small.yaml"))
            .arg(&cohort)
            .arg("--out")
            .arg(half)
            .args([
                "--backend",
                "emu",
                "--seed",
                "11",
                "--jobs",
                "2",
                "--resume",
            ])
            .arg("--shard")
            .arg(format!("{k}/2"))
            .env("CI", "1")
            .env("CUGRADE_ESTIMATE_GPU", "none")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(1), "{stdout}");
        assert!(stdout.contains(" reused from the previous run"), "{stdout}");
        let record: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(half.join("shard.json")).unwrap())
                .unwrap();
        assert_eq!(
            (&record["shard"], &record["of"], &record["complete"]),
            (
                &serde_json::json!(k),
                &serde_json::json!(2),
                &serde_json::json!(true)
            )
        );
        assert_eq!(record["students"].as_array().unwrap().len(), 25);
    }
    let merged = tmp.path().join("merged");
    let o = cugrade()
        .arg("merge")
        .arg("--out")
        .arg(&merged)
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (want, got) = (tree(&out), tree(&merged));
    assert_eq!(
        want.keys().collect::<Vec<_>>(),
        got.keys().collect::<Vec<_>>()
    );
    // Byte for byte, except when each junit.xml was written (its `timestamp` attributes).
    let stamp = regex::Regex::new(r#"timestamp="[^"]*""#).unwrap();
    let unstamped = |b: &[u8]| {
        stamp
            .replace_all(&String::from_utf8_lossy(b), "")
            .into_owned()
    };
    for (k, v) in &want {
        if k.ends_with("junit.xml") {
            assert_eq!(unstamped(&got[k]), unstamped(v), "{k} differs after merge");
        } else {
            assert!(got[k] == *v, "{k} differs after merge");
        }
    }
}

#[test]
fn merge_refuses_conflicting_shards_and_bad_usage() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |args: &[&Path]| {
        let o = cugrade()
            .arg("merge")
            .arg("--out")
            .args(args)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, err) = run(&[&tmp.path().join("m"), &tmp.path().join("missing")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot read shard output"), "{err}");

    // A folder that no `grade --shard` wrote: no record, so nothing says which shard it is.
    let a = tmp.path().join("a/students/x");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::write(a.join("result.json"), "{not json").unwrap();
    let (code, err) = run(&[&tmp.path().join("m"), &tmp.path().join("a")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("has no shard.json"), "{err}");
    assert!(err.contains("--shard K/N --resume"), "{err}");
}

/// Issue 32: `merge` of 2 of 3 shards wrote a gradebook without a third of the class and said
/// nothing. Shards record K/N (shard.json); merge refuses a missing, repeated, unfinished or
/// foreign shard (exit 2, naming it) and merges a complete set.
#[test]
fn merge_refuses_a_missing_repeated_or_foreign_shard() {
    if !nvrtc() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cohort = tmp.path().join("cohort");
    for (i, ex) in ["naive", "missing_bounds", "compile_error"]
        .iter()
        .enumerate()
    {
        let to = cohort.join(format!("s{i}"));
        std::fs::create_dir_all(&to).unwrap();
        std::fs::copy(
            root()
                .join("submissions-example/reduction")
                .join(ex)
                .join("reduce.cu"),
            to.join("reduce.cu"),
        )
        .unwrap();
    }
    let rubric = root().join("tests/fixtures/cohort/reduction-small.yaml");
    let grade = |rubric: &Path, shard: &str, seed: &str, out: &Path| {
        let o = cugrade()
            .args(["grade", "--rubric"])
            .arg(rubric)
            .arg(&cohort)
            .arg("--out")
            .arg(out)
            .args(["--backend", "emu", "--seed", seed, "--shard", shard])
            .env("CUGRADE_ESTIMATE_GPU", "none")
            .output()
            .unwrap();
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let s = |name: &str| tmp.path().join(name);
    for k in 1..=3 {
        grade(&rubric, &format!("{k}/3"), "5", &s(&format!("k{k}")));
    }
    let merge = |out: &str, shards: &[&str]| {
        let o = cugrade()
            .arg("merge")
            .arg("--out")
            .arg(s(out))
            .args(shards.iter().map(|d| s(d)))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        (o.status.code(), err)
    };
    let refused = |shards: &[&str], says: &[&str]| {
        let (code, err) = merge("refused", shards);
        assert_eq!(code, Some(2), "{shards:?}: {err}");
        for s in says {
            assert!(err.contains(s), "{shards:?}: no `{s}` in {err}");
        }
        assert!(
            !s("refused/grades.csv").exists(),
            "{shards:?}: a gradebook was written"
        );
    };
    // Two of three: the missing shard is named, with the command that grades it.
    refused(
        &["k1", "k3"],
        &[
            "shard 2/3 is missing (given: 1/3, 3/3)",
            "cugrade grade --shard 2/3 --seed 5",
        ],
    );
    refused(&["k2"], &["shards 1/3, 3/3 are missing"]);
    // The same shard twice (a copy of its folder).
    for (rel, bytes) in tree(&s("k1")) {
        let to = s("k1-copy").join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(to, bytes).unwrap();
    }
    refused(
        &["k1", "k1-copy", "k2", "k3"],
        &["shard 1/3 is given more than once"],
    );
    // Another split, another seed, another rubric.
    grade(&rubric, "2/2", "5", &s("n2"));
    refused(&["k1", "n2", "k3"], &["has N = 3", "has 2"]);
    grade(&rubric, "2/3", "6", &s("seed6"));
    refused(&["k1", "seed6", "k3"], &["has seed 5", "has 6"]);
    // The same rubric with other points, in a course folder of its own.
    let other = s("course/rubrics/reduction.yaml");
    std::fs::create_dir_all(s("course/reference-kernels")).unwrap();
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    std::fs::copy(
        root().join("reference-kernels/reduction.cu"),
        s("course/reference-kernels/reduction.cu"),
    )
    .unwrap();
    let text = std::fs::read_to_string(&rubric).unwrap();
    assert!(text.contains("correctness: {points: 20}"));
    std::fs::write(
        &other,
        text.replace("../../../reference-kernels/", "../reference-kernels/")
            .replace("correctness: {points: 20}", "correctness: {points: 25}"),
    )
    .unwrap();
    grade(&other, "2/3", "5", &s("other-rubric"));
    refused(&["k1", "other-rubric", "k3"], &["rubric (sha256)"]);
    // A shard that did not finish (its run was killed: the record stays unfinished).
    let record = s("k2/shard.json");
    let done = std::fs::read_to_string(&record).unwrap();
    std::fs::write(
        &record,
        done.replace("\"complete\": true", "\"complete\": false"),
    )
    .unwrap();
    refused(
        &["k1", "k2", "k3"],
        &["shard 2/3 in", "did not finish grading"],
    );
    std::fs::write(&record, done).unwrap();

    // The complete set merges into the unsharded run's gradebook.
    let (code, err) = merge("merged", &["k3", "k1", "k2"]);
    assert_eq!(code, Some(1), "{err}");
    grade_unsharded(&rubric, &cohort, &s("whole"));
    assert_eq!(
        std::fs::read_to_string(s("merged/grades.csv")).unwrap(),
        std::fs::read_to_string(s("whole/grades.csv")).unwrap()
    );
    assert!(!s("merged/shard.json").exists() && !s("whole/shard.json").exists());
}

fn grade_unsharded(rubric: &Path, cohort: &Path, out: &Path) {
    let o = cugrade()
        .args(["grade", "--rubric"])
        .arg(rubric)
        .arg(cohort)
        .arg("--out")
        .arg(out)
        .args(["--backend", "emu", "--seed", "5"])
        .env("CUGRADE_ESTIMATE_GPU", "none")
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)));
}

/// ci/gradescope/run_autograder in a fake /autograder: a graded submission, and one cugrade
/// cannot read (a malformed manifest, exit 2) still give a results.json in Gradescope's format.
#[test]
fn gradescope_run_autograder_writes_valid_results_even_for_unreadable_submissions() {
    if !nvrtc() {
        return;
    }
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../data/gradescope-results.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for (files, want_score) in [
        (
            vec![("reduce.cu", cohort_fixture::ALT_A)],
            Some(60.0), // correctness of all three on the emulator; speed not measured
        ),
        (
            vec![
                ("reduce.cu", cohort_fixture::ALT_A),
                ("cugrade.yaml", "student: [unclosed\n"),
            ],
            Some(0.0),
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let ag = tmp.path();
        std::fs::create_dir_all(ag.join("source/rubrics")).unwrap();
        std::fs::create_dir_all(ag.join("source/reference-kernels")).unwrap();
        std::fs::create_dir_all(ag.join("submission")).unwrap();
        // The bundle's layout (ci/gradescope/make-bundle.sh): the reference beside rubrics/.
        std::fs::copy(
            root().join("reference-kernels/reduction.cu"),
            ag.join("source/reference-kernels/reduction.cu"),
        )
        .unwrap();
        let rubric =
            std::fs::read_to_string(root().join("tests/fixtures/cohort/reduction-small.yaml"))
                .unwrap()
                .replace(
                    "../../../reference-kernels/reduction.cu",
                    "../reference-kernels/reduction.cu",
                );
        std::fs::write(ag.join("source/rubrics/reduction.yaml"), rubric).unwrap();
        for (n, t) in files {
            std::fs::write(ag.join("submission").join(n), t).unwrap();
        }
        let o = Command::new(root().join("ci/gradescope/run_autograder"))
            .env("AUTOGRADER_ROOT", ag)
            .env("CUGRADE", BIN)
            .env("CUGRADE_BACKEND", "emu")
            .env("CUGRADE_SEED", "3")
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let text = std::fs::read_to_string(ag.join("results/results.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:?}\n{text}");
        assert_eq!(v["score"].as_f64(), want_score, "{text}");
        // The sandbox's layers are for the instructor (extra_data), not the student's page.
        let output = v["output"].as_str().unwrap();
        assert!(!output.contains("Sandbox:"), "{output}");
        if want_score == Some(60.0) {
            assert!(
                v["extra_data"]["sandbox"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty()),
                "{text}"
            );
        }
        if want_score == Some(0.0) {
            assert!(
                v["output"].as_str().unwrap().contains("cugrade.yaml"),
                "{text}"
            );
        }
    }
}

/// summary.md's leaderboard ranks measured speeds without names; failure causes group across
/// students; grades.csv marks who was timed.
#[test]
fn leaderboard_is_anonymous_and_causes_group_across_students() {
    use cugrade::result::{Check, CheckKind, GradeResult, MilestoneResult, RunInfo, Status};
    let student = |name: &str, speedup: Option<f64>, wrong: bool| {
        let mut checks = vec![];
        if wrong {
            checks.push(Check::fail(
                CheckKind::Correctness,
                "correctness n257",
                format!(
                    "wrong results on case n257 (trial 1): out[0] is {}",
                    name.len()
                ),
            ));
        }
        checks.push(match speedup {
            Some(x) => Check::pass(CheckKind::Performance, "speedup", "fast").with_measure(
                x,
                Some(10.0),
                "x",
            ),
            None => Check::skipped(CheckKind::Performance, "speedup", "not measured"),
        });
        GradeResult {
            assignment: "reduction".into(),
            student: name.into(),
            student_id: None,
            id: String::new(),
            entry: String::new(),
            backend: "cuda".into(),
            seed: 1,
            score: 10.0,
            max_score: 20.0,
            milestones: vec![MilestoneResult {
                id: "reduce_shared".into(),
                title: "Shared".into(),
                status: if wrong { Status::Fail } else { Status::Pass },
                score: 10.0,
                max_score: 20.0,
                checks,
                kernel: "reduce_shared".into(),
                provisional: false,
            }],
            submission_sha256: String::new(),
            rubric_sha256: String::new(),
            compile: None,
            run: RunInfo {
                timed: speedup.is_some(),
                ..Default::default()
            },
            notes: vec![],
            flags: vec![],
        }
    };
    let results = vec![
        student("ann", Some(12.5), false),
        student("bob", Some(31.0), true),
        student("cy", None, true),
    ];
    let md = cugrade::report::cohort::summary_md(&results);
    let board = &md[md.find("## Speed leaderboard").expect(&md)..];
    let board = &board[..board.find("## Duplicates").unwrap_or(board.len())];
    assert!(
        board.contains("| 1 | 31x |") && board.contains("| 2 | 12.5x |"),
        "{board}"
    );
    assert!(board.contains("2 students measured"), "{board}");
    for name in ["ann", "bob", "cy"] {
        assert!(!board.contains(name), "{board}");
    }
    let causes = &md[md.find("## Most common failure causes").expect(&md)..];
    assert!(
        causes.contains("| 2 | reduce\\_shared | correctness |"),
        "{causes}"
    );
    let csv = cugrade::report::cohort::grades_csv(&results).unwrap();
    let speed: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(4).unwrap())
        .collect();
    assert_eq!(speed, ["yes", "yes", "no"], "{csv}");
}

/// The rows of the table under `## heading` of a Markdown file, each as its cells' text, as a
/// CommonMark renderer reads them (escapes undone).
fn markdown_table(md: &str, heading: &str) -> Vec<Vec<String>> {
    use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
    let (mut in_heading, mut under, mut in_table, mut rows) = (false, false, false, Vec::new());
    let (mut row, mut cell, mut heading_text) = (Vec::new(), String::new(), String::new());
    for e in Parser::new_ext(md, Options::ENABLE_TABLES) {
        match e {
            Event::Start(Tag::Heading { .. }) => {
                in_heading = true;
                heading_text.clear();
            }
            Event::End(TagEnd::Heading(_)) => {
                in_heading = false;
                under = heading_text == heading;
            }
            Event::Text(t) | Event::Code(t) if in_heading => heading_text.push_str(&t),
            Event::Start(Tag::Table(_)) => in_table = true,
            Event::End(TagEnd::Table) => in_table = false,
            Event::Text(t) | Event::Code(t) if under && in_table => cell.push_str(&t),
            Event::End(TagEnd::TableCell) if under => row.push(std::mem::take(&mut cell)),
            Event::End(TagEnd::TableRow) | Event::End(TagEnd::TableHead) if under => {
                rows.push(std::mem::take(&mut row))
            }
            _ => {}
        }
    }
    rows
}

/// Issue 32: summary.md's "Most common failure causes" counted one student's two compile
/// errors as two rows, cut long messages with "[truncated: N more bytes]", and filed broken
/// archives and empty folders under "compile". Students are counted, once per cause and once
/// among the compile causes; the example is short and clean; unreadable and empty submissions
/// are causes of their own.
#[test]
fn failure_causes_count_students_with_clean_examples() {
    if !nvrtc() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cohort = tmp.path().join("cohort");
    std::fs::create_dir_all(cohort.join("alice")).unwrap();
    std::fs::copy(
        root().join("submissions-example/reduction/naive/reduce.cu"),
        cohort.join("alice/reduce.cu"),
    )
    .unwrap();
    std::fs::create_dir_all(cohort.join("bob-empty")).unwrap();
    std::fs::write(cohort.join("bob-empty/notes.txt"), "todo\n").unwrap();
    std::fs::write(cohort.join("carol.zip"), "not a zip at all").unwrap();
    let long = "undefined_helper_with_a_name_long_enough_to_overflow_any_table_cell".repeat(3);
    // Two errors each, of two kinds: the first an undefined name (another one for each
    // student) as long as a helper's name gets, the second a type mismatch.
    for who in ["dave", "erin"] {
        std::fs::create_dir_all(cohort.join(who)).unwrap();
        std::fs::write(
            cohort.join(who).join("reduce.cu"),
            format!(
                "extern \"C\" __global__ void reduce_naive(const float* in, float* out, int n) {{\n\
                 int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
                 if (i < n) atomicAdd(out, in[i] + {who}_{long});\n\
                 int x = \"not a number\";\n}}\n"
            ),
        )
        .unwrap();
    }
    let out = tmp.path().join("out");
    let o = cugrade()
        .args(["grade", "--rubric"])
        .arg(root().join("tests/fixtures/cohort/reduction-small.yaml"))
        .arg(&cohort)
        .arg("--out")
        .arg(&out)
        .args(["--backend", "emu", "--seed", "3"])
        .env("CUGRADE_ESTIMATE_GPU", "none")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(!summary.contains("truncated"), "{summary}");
    let rows = markdown_table(&summary, "Most common failure causes");
    assert_eq!(
        rows[0],
        ["Students", "Milestone", "Check", "Example message"],
        "{rows:?}"
    );
    let rows = &rows[1..];
    let all = "reduce_naive, reduce_shared, reduce_shuffle";
    let find =
        |check: &str| -> Vec<&Vec<String>> { rows.iter().filter(|r| r[2] == check).collect() };
    // dave and erin: one compile row of two students (under their first errors, which differ
    // only in the name), its example cut clean.
    let compile = find("compile");
    assert_eq!(compile.len(), 1, "{rows:?}");
    assert_eq!((compile[0][0].as_str(), compile[0][1].as_str()), ("2", all));
    let example = &compile[0][3];
    assert!(
        example.starts_with("identifier \"dave_undefined_helper"),
        "{example}"
    );
    assert!(example.ends_with("…\" is undefined"), "{example}");
    assert!(
        example.contains("…") && example.chars().count() < 80,
        "{example}"
    );
    // Each of the others its own cause, one student each.
    for (check, example) in [
        ("submission unreadable", "carol.zip cannot be unpacked"),
        (
            "empty submission",
            "no .cu, .ptx or .py file in the submission",
        ),
    ] {
        let r = find(check);
        assert_eq!(r.len(), 1, "{check}: {rows:?}");
        assert_eq!((r[0][0].as_str(), r[0][1].as_str()), ("1", all), "{rows:?}");
        assert!(r[0][3].starts_with(example), "{check}: {rows:?}");
    }
    // No row counts more students than the class has failing.
    assert!(
        rows.iter().all(|r| r[0].parse::<usize>().unwrap() <= 4),
        "{rows:?}"
    );
    // result.json keeps every occurrence, and the cause key says what the entry was.
    let carol: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("students/carol.zip/result.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(carol["milestones"][0]["checks"][0]["cause"], "unreadable");
    let bob: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("students/bob-empty/result.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(bob["milestones"][0]["checks"][0]["cause"], "empty");
}

//! The adversarial suite: every attack in tests/adversarial/ is graded as one cohort, on the
//! emulator, against the vector-add rubric with short deadlines. Each must get its expected
//! verdict; no output may contain what the attack tried to leak; the control submission `bob`
//! must be unaffected; the grader must exit normally; and nothing outside the output folder may
//! be written. GPU-specific attacks are also run on the H200 (docs/validation/).

use crate::support::{cugrade, nvrtc, root};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(serde::Deserialize)]
struct Expected {
    verdict: String,
    check: String,
    #[serde(default)]
    acceptable: Vec<String>,
    /// Where the emulator legitimately differs from a GPU (memcheck instead of a crash, no
    /// device heap), the verdict it must give instead.
    #[serde(default)]
    emu: Option<Verdict>,
    #[serde(default)]
    must_not_contain: Vec<String>,
    #[serde(default)]
    github_must_not_start_line: Vec<String>,
}

#[derive(serde::Deserialize)]
struct Verdict {
    verdict: String,
    check: String,
    #[serde(default)]
    acceptable: Vec<String>,
}

/// Every file under `dir` with its size and contents hash: what "nothing was written" compares.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    out
}

/// The vector-add rubric with deadlines short enough for a test, its reference copied beside it
/// (a rubric reads files of its own course tree only).
fn short_rubric(dir: &Path) -> PathBuf {
    let src = root().join("rubrics/vector-add.yaml");
    let text = std::fs::read_to_string(&src).expect("rubrics/vector-add.yaml exists");
    std::fs::copy(
        root().join("reference-kernels/vector-add.cu"),
        dir.join("vector-add-reference.cu"),
    )
    .unwrap();
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("reference:") {
            out.push_str("reference: vector-add-reference.cu\n");
        } else if line.starts_with("timeouts:") {
            continue;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str("timeouts: { compile_s: 8, launch_s: 4, milestone_s: 60 }\n");
    let p = dir.join("vector-add-short.yaml");
    std::fs::write(&p, out).unwrap();
    p
}

#[test]
fn every_attack_gets_its_verdict_and_harms_nothing() {
    if !nvrtc() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let cohort = work.path().join("cohort");
    let out = work.path().join("out");
    std::fs::create_dir(&cohort).unwrap();
    let attacks = root().join("tests/adversarial");
    let mut expected: BTreeMap<String, Expected> = BTreeMap::new();
    for e in std::fs::read_dir(&attacks).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(e.path().join("expected.yaml")).unwrap();
        expected.insert(name.clone(), serde_yaml::from_str(&text).unwrap());
        let dest = cohort.join(&name);
        std::fs::create_dir(&dest).unwrap();
        for f in std::fs::read_dir(e.path()).unwrap().flatten() {
            if f.file_name() != "expected.yaml" {
                std::fs::copy(f.path(), dest.join(f.file_name())).unwrap();
            }
        }
    }
    let rubric = short_rubric(work.path());
    let before = snapshot(work.path());
    let started = std::time::Instant::now();
    let o = cugrade()
        .args([
            "grade",
            "--backend",
            "emu",
            "--seed",
            "11",
            "--jobs",
            "2",
            "--rubric",
        ])
        .arg(&rubric)
        .arg(&cohort)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "the grader must exit normally: {:?}\n{stderr}",
        o.status
    );
    assert!(
        started.elapsed().as_secs() < 600,
        "the suite took {:?}",
        started.elapsed()
    );

    // Nothing outside the output folder changed.
    let after = snapshot(work.path());
    for (p, content) in &after {
        if p.starts_with(&out) {
            continue;
        }
        assert_eq!(
            before.get(p),
            Some(content),
            "{} was written or changed",
            p.display()
        );
    }
    assert_eq!(
        before.keys().filter(|p| !after.contains_key(*p)).count(),
        0,
        "a file was removed"
    );

    let mut failures = Vec::new();
    for (name, exp) in &expected {
        let dir = out.join("students").join(name);
        let (check, verdict, acceptable) = match &exp.emu {
            Some(v) => (&v.check, &v.verdict, &v.acceptable),
            None => (&exp.check, &exp.verdict, &exp.acceptable),
        };
        let json = std::fs::read_to_string(dir.join("result.json"))
            .unwrap_or_else(|_| panic!("no result for {name}: {stderr}"));
        let r: cugrade::result::GradeResult = serde_json::from_str(&json).unwrap();
        let statuses: Vec<cugrade::result::Status> = r
            .milestones
            .iter()
            .flat_map(|m| &m.checks)
            .filter(|c| c.kind.as_str() == check)
            .map(|c| c.status)
            .collect();
        let got = if statuses.is_empty() {
            "none".to_string()
        } else {
            cugrade::result::Status::aggregate(statuses)
                .as_str()
                .to_string()
        };
        let ok = &got == verdict || acceptable.contains(&got);
        if !ok {
            failures.push(format!(
                "{name}: `{check}` checks are {got}, expected {verdict} ({acceptable:?})\n{json}"
            ));
        }
        let everything = [
            json.clone(),
            std::fs::read_to_string(dir.join("report.md")).unwrap_or_default(),
            std::fs::read_to_string(dir.join("junit.xml")).unwrap_or_default(),
            stdout.clone(),
            stderr.clone(),
        ];
        for bad in &exp.must_not_contain {
            assert!(
                !everything.iter().any(|t| t.contains(bad.as_str())),
                "{name}: `{bad}` leaked into an output"
            );
        }
        for bad in &exp.github_must_not_start_line {
            // Our own annotations start with `::error file=`; a forged one would not.
            let forged = stdout
                .lines()
                .filter(|l| l.starts_with(bad.as_str()) && !l.starts_with("::error file="))
                .count();
            assert_eq!(
                forged, 0,
                "{name}: a line of the GitHub output starts with `{bad}`:\n{stdout}"
            );
        }
        // Reports stay small whatever the attack printed.
        assert!(
            json.len() < 1 << 20,
            "{name}: result.json is {} bytes",
            json.len()
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));

    // The control is graded the same alone as next to the attacks.
    let alone = cugrade()
        .args([
            "check",
            "--backend",
            "emu",
            "--seed",
            "11",
            "--format",
            "json",
            "--rubric",
        ])
        .arg(&rubric)
        .arg(cohort.join("bob"))
        .output()
        .unwrap();
    let alone: cugrade::result::GradeResult =
        serde_json::from_slice(&alone.stdout).expect("bob alone");
    let together: cugrade::result::GradeResult = serde_json::from_str(
        &std::fs::read_to_string(out.join("students/bob/result.json")).unwrap(),
    )
    .unwrap();
    let verdicts = |r: &cugrade::result::GradeResult| {
        r.milestones
            .iter()
            .map(|m| (m.id.clone(), m.status, m.score))
            .collect::<Vec<_>>()
    };
    assert_eq!(verdicts(&alone), verdicts(&together));
}

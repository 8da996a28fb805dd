//! A lab cugrade has no built-in CPU implementation for (an inclusive scan) gets its CPU
//! baseline from the course's own Python function beside the rubric
//! (`cpu: {python: FILE, function: NAME}`), through the binary on the emulator: `validate`
//! cross-checks the reference kernel against it and says what is wrong with a wrong one, in
//! the course's terms; `calibrate` pins its time under a key that names the function and the
//! file's contents; the speed estimate reads that pin; the function runs sandboxed.

use crate::support::{cugrade, nvrtc, output_text};
use std::path::{Path, PathBuf};

const REFERENCE: &str = r#"extern "C" __global__ void scan_naive(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
    for (int j = 0; j <= i; ++j) s += x[j];
    y[i] = s;
}
"#;

const RUBRIC: &str = r#"assignment: scan
title: "Inclusive scan"
reference: ../reference-kernels/scan.cu
trials: 2
contracts:
  scan:
    cpu: {python: ../cpu/scan.py, function: scan_cpu}
    params:
      - {name: x, type: "f32*", dir: in, len: n, gen: {int: [-8, 9]}}
      - {name: y, type: "f32*", dir: out, len: n}
      - {name: n, type: i32, value: n}
    launch: {block: [128], grid: ["ceil_div(n, 128)"]}
    tolerance: {abs: 0.5}
cases:
  correctness:
    - {name: n1, vars: {n: 1}}
    - {name: n300, vars: {n: 300}}
  performance:
    - {name: n4096, vars: {n: 4096}}
milestones:
  - id: scan_naive
    title: "A thread per element"
    kernel: scan_naive
    contract: scan
    correctness: {points: 50}
    performance:
      - {name: speedup_over_cpu, case: n4096, against: cpu, min: 1, tiers: [{min: 1, points: 50}]}
"#;

const GOOD_CPU: &str = "import numpy as np\n\n\ndef scan_cpu(x, y, n):\n    y[:] = np.cumsum(x[:n], dtype=np.float64)\n";

fn ready() -> bool {
    nvrtc() && cugrade::compile::arrays::numpy().is_ok()
}

/// A course tree in `dir`: rubrics/scan.yaml, reference-kernels/scan.cu, cpu/scan.py.
fn course(dir: &Path, cpu: &str) -> PathBuf {
    for d in ["rubrics", "reference-kernels", "cpu"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    std::fs::write(dir.join("reference-kernels/scan.cu"), REFERENCE).unwrap();
    std::fs::write(dir.join("cpu/scan.py"), cpu).unwrap();
    let rubric = dir.join("rubrics/scan.yaml");
    std::fs::write(&rubric, RUBRIC).unwrap();
    rubric
}

fn run(args: &[&str], rubric: &Path) -> (Option<i32>, String) {
    let o = cugrade()
        .args(args)
        .arg(rubric)
        .args(["--backend", "emu"])
        .output()
        .unwrap();
    (o.status.code(), output_text(&o))
}

#[test]
fn a_course_python_cpu_is_cross_checked_pinned_and_read_by_the_estimate() {
    if !ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let rubric = course(tmp.path(), GOOD_CPU);
    let (code, text) = run(&["validate"], &rubric);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("reference cross-checked against CPU `scan_cpu in ../cpu/scan.py`"),
        "{text}"
    );

    let o = cugrade().arg("calibrate").arg(&rubric).output().unwrap();
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    let pins: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("rubrics/scan.calibration.json")).unwrap(),
    )
    .unwrap();
    let keys: Vec<&String> = pins["baselines"].as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 1, "{pins}");
    assert!(keys[0].starts_with("scan/cpu[scan_cpu@"), "{keys:?}");

    // The estimate's ratio uses the pinned time; the same file edited is no longer pinned.
    let student = tmp.path().join("student");
    std::fs::create_dir_all(&student).unwrap();
    std::fs::write(student.join("scan.cu"), REFERENCE).unwrap();
    let estimate = |what: &str| {
        let json = tmp.path().join(format!("{what}.json"));
        let o = cugrade()
            .args(["check", "--backend", "emu", "--rubric"])
            .arg(&rubric)
            .arg(&student)
            .arg("--json")
            .arg(&json)
            .env_remove("CUGRADE_ESTIMATE_GPU")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let perf = r["milestones"][0]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["kind"] == "performance")
            .cloned()
            .unwrap();
        perf["estimate"].clone()
    };
    let pinned = estimate("pinned");
    assert!(pinned["no_ratio"].is_null(), "{pinned}");
    std::fs::write(
        tmp.path().join("cpu/scan.py"),
        format!("{GOOD_CPU}# edited\n"),
    )
    .unwrap();
    let edited = estimate("edited");
    assert!(
        edited["no_ratio"].as_str().is_some_and(|s| !s.is_empty()),
        "{edited}"
    );
}

#[test]
fn a_wrong_python_cpu_fails_validate_with_what_to_change() {
    if !ready() {
        return;
    }
    let cases: [(&str, &str); 5] = [
        // An exclusive scan: the values disagree with the reference, case by case.
        (
            "import numpy as np\n\n\ndef scan_cpu(x, y, n):\n    y[0] = 0\n    y[1:] = np.cumsum(x[: n - 1])\n",
            "on case n300",
        ),
        // The name rebound instead of the array written.
        (
            "import numpy as np\n\n\ndef scan_cpu(x, y, n):\n    y = np.cumsum(x)\n",
            "write into the array in place (`y[:] = ...`)",
        ),
        (
            "def scan_cpu(x, y, n):\n    raise ValueError('nope')\n",
            "raised at ../cpu/scan.py:2: ValueError: nope",
        ),
        (
            "import numpy as np\nimport no_such_module\n",
            "does not import (../cpu/scan.py:2)",
        ),
        // Sandboxed like any code a course ships: no file of the host's.
        (
            "def scan_cpu(x, y, n):\n    y[:] = len(open('/etc/passwd').read())\n",
            "raised at ../cpu/scan.py:2",
        ),
    ];
    for (cpu, want) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let rubric = course(tmp.path(), cpu);
        let (code, text) = run(&["validate"], &rubric);
        assert_eq!(code, Some(1), "{cpu}\n{text}");
        assert!(text.contains(want), "{cpu}: wanted {want:?}\n{text}");
        assert!(!text.contains("cross-checked"), "{text}");
        assert!(
            !text.contains("cugrade_"),
            "cugrade's own file names leak: {text}"
        );
        assert!(!text.contains("root:"), "{text}");
    }
}

#[test]
fn a_python_cpu_that_is_not_there_is_a_rubric_error_at_its_line() {
    let tmp = tempfile::tempdir().unwrap();
    let rubric = course(tmp.path(), GOOD_CPU);
    for (from, to, want) in [
        ("../cpu/scan.py,", "../cpu/nope.py,", "does not exist"),
        (", function: scan_cpu}", "}", "missing field `function`"),
        (
            ", function: scan_cpu}",
            ", function: scan_cpu, extra: 1}",
            "unknown field `extra`",
        ),
        (
            "function: scan_cpu",
            "function: scan-cpu",
            "not a Python function name",
        ),
    ] {
        std::fs::write(&rubric, RUBRIC.replace(from, to)).unwrap();
        let (code, text) = run(&["validate"], &rubric);
        assert_eq!(code, Some(2), "{text}");
        assert!(text.contains(want), "{want}: {text}");
        assert!(text.contains("scan.yaml:7:"), "{text}");
        // The contract itself is still known: no cascade of "unknown contract".
        assert!(!text.contains("unknown contract"), "{text}");
    }
}

/// The scan course's off-by-one (an exclusive scan where the inclusive one is asked for) is
/// named as such, with its hint, not "less precise than float": its error is one element's
/// size, whatever the tolerance.
#[test]
fn an_exclusive_scan_is_named_shifted_not_imprecise() {
    if !ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let rubric = course(tmp.path(), GOOD_CPU);
    // A tolerance that grows with n and a coarse band (`u`) that an element's size fits in.
    std::fs::write(
        &rubric,
        RUBRIC.replace(
            "tolerance: {abs: 0.5}",
            "tolerance: {abs: \"8 * u * n * 64\"}",
        ),
    )
    .unwrap();
    let student = tmp.path().join("student");
    std::fs::create_dir_all(&student).unwrap();
    std::fs::write(
        student.join("scan.cu"),
        REFERENCE.replace("j <= i", "j < i"),
    )
    .unwrap();
    let json = tmp.path().join("r.json");
    let o = cugrade()
        .args(["check", "--backend", "emu", "--rubric"])
        .arg(&rubric)
        .arg(&student)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let failed: Vec<&serde_json::Value> = r["milestones"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail" && c["case"] == "n300")
        .collect();
    // (On n1 the one element is 0 where x[0] is expected: "all zeros", also right.)
    assert!(!failed.is_empty(), "{r}");
    for c in failed {
        assert_eq!(c["cause"], "shifted", "{c}");
        assert!(
            c["message"]
                .as_str()
                .unwrap()
                .contains("y[i] is what y[i - 1] should be"),
            "{c}"
        );
    }
}

/// `cugrade test COURSE_DIR` over the scan course's examples: each graded by the binary, each
/// line says ok or what differs from its expected.yaml, and the exit code says whether all
/// got what they promise.
#[test]
fn cugrade_test_grades_a_courses_examples_against_their_promises() {
    if !ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    course(tmp.path(), GOOD_CPU);
    let ex = tmp.path().join("submissions-example/scan");
    let example = |name: &str, source: &str, expected: &str| {
        std::fs::create_dir_all(ex.join(name)).unwrap();
        std::fs::write(ex.join(name).join("scan.cu"), source).unwrap();
        std::fs::write(ex.join(name).join("expected.yaml"), expected).unwrap();
    };
    let exclusive = REFERENCE.replace("j <= i", "j < i");
    example("good", REFERENCE, "milestones: {scan_naive: skipped}\n");
    example(
        "exclusive",
        &exclusive,
        "milestones: {scan_naive: fail}\nhint_contains: [\"exclusive\"]\n",
    );
    let run = || {
        let o = cugrade()
            .args(["test", "--backend", "emu"])
            .arg(tmp.path())
            .output()
            .unwrap();
        (o.status.code(), output_text(&o))
    };
    let (code, text) = run();
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("ok    submissions-example/scan/good"),
        "{text}"
    );
    assert!(text.contains("2 of 2 examples"), "{text}");

    // A promise the example does not keep, a rubric named by the example, an unknown
    // milestone and an unreadable expected.yaml: each said on its line, and the run goes on.
    example(
        "broken_promise",
        REFERENCE,
        "milestones: {scan_naive: fail}\n",
    );
    example(
        "elsewhere",
        &exclusive,
        "rubric: ../../../rubrics/scan.yaml\nmilestones: {scan_naive: fail, scan_fast: pass}\n",
    );
    let (code, text) = run();
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("scan_naive: skipped, expected fail"),
        "{text}"
    );
    assert!(
        text.contains("scan_fast: expected.yaml names it, but the rubric has no such milestone"),
        "{text}"
    );
    assert!(text.contains("2 of 4 examples"), "{text}");
    example("typo", REFERENCE, "milestone: {scan_naive: pass}\n");
    let (code, text) = run();
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("ERROR submissions-example/scan/typo"),
        "{text}"
    );
    assert!(text.contains("2 of 5 examples"), "{text}");
}

//! End-to-end tests through the `cugrade` binary on fixture submissions with known verdicts.
//! These need no GPU; they need NVRTC (`ci/with-nvrtc cargo test` provides it) and skip with
//! a message where a test cannot run without it.

use crate::support::{self, nvrtc, root};
use std::path::{Path, PathBuf};
use std::process::Output;

fn fixtures() -> PathBuf {
    root().join("tests/fixtures/mini")
}

fn cugrade(args: &[&str]) -> Output {
    support::cugrade()
        .args(args)
        .output()
        .expect("cugrade runs")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `check --format json` on a fixture; returns (exit code, result.json).
fn check_json(
    rubric: &Path,
    submission: &Path,
    extra: &[&str],
) -> (i32, serde_json::Value, String) {
    let mut args = vec![
        "check",
        "--rubric",
        rubric.to_str().unwrap(),
        submission.to_str().unwrap(),
        "--format",
        "json",
        "--seed",
        "7",
    ];
    args.extend_from_slice(extra);
    let o = cugrade(&args);
    let (out, err) = text(&o);
    let v = serde_json::from_str(&out).unwrap_or(serde_json::Value::Null);
    (o.status.code().unwrap_or(-1), v, err)
}

fn checks(v: &serde_json::Value) -> Vec<serde_json::Value> {
    v["milestones"][0]["checks"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn malformed_rubric_is_exit_2_with_position() {
    let o = cugrade(&[
        "check",
        "--rubric",
        fixtures().join("broken.yaml").to_str().unwrap(),
        fixtures().join("correct").to_str().unwrap(),
    ]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("broken.yaml:1:13"), "{err}");
    assert!(
        err.contains("invalid type: sequence, expected a string"),
        "{err}"
    );
}

#[test]
fn malformed_manifest_is_exit_2_with_position() {
    let o = cugrade(&[
        "check",
        "--rubric",
        fixtures().join("rubric.yaml").to_str().unwrap(),
        fixtures().join("bad_manifest").to_str().unwrap(),
    ]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("cugrade.yaml:5:12"), "{err}");
    assert!(err.contains("cannot parse `ceil_div(n, 128`"), "{err}");
    assert!(err.contains("5 |     grid: [\"ceil_div(n, 128\"]"), "{err}");
}

#[test]
fn missing_driver_is_exit_3_with_the_fix() {
    // This machine (and CI) has no libcuda: asking for the GPU backend must say what to install.
    let has_driver = crate::support::driver();
    if has_driver {
        eprintln!("skipped: a CUDA driver is present here");
        return;
    }
    let o = cugrade(&[
        "check",
        "--backend",
        "cuda",
        "--rubric",
        fixtures().join("rubric.yaml").to_str().unwrap(),
        fixtures().join("correct").to_str().unwrap(),
    ]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("libcuda.so (the NVIDIA driver library) was not found"),
        "{err}"
    );
    assert!(err.contains("fix: install the NVIDIA driver"), "{err}");
}

/// No NVRTC on the system, none in cugrade's cache, and no way to install it: exit 3, saying
/// what to install. (cugrade installs NVRTC from PyPI itself when it can: tests/it/readme_path.rs.)
#[test]
fn missing_nvrtc_is_exit_3_with_the_fix() {
    let cache = tempfile::tempdir().unwrap();
    let run = |extra: &[(&str, &str)]| {
        let mut c = support::cugrade();
        c.args([
            "check",
            "--backend",
            "emu",
            "--rubric",
            fixtures().join("rubric.yaml").to_str().unwrap(),
            fixtures().join("correct").to_str().unwrap(),
        ])
        .env("LD_LIBRARY_PATH", "/nonexistent")
        .env("CUGRADE_NVRTC_CACHE", cache.path());
        for (k, v) in extra {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    // No Python to download it with.
    let o = run(&[("CUGRADE_PYTHON", "/nonexistent/python3")]);
    let (_, err) = text(&o);
    // With a system-wide NVRTC this cannot be provoked.
    if o.status.code() != Some(3) && std::path::Path::new("/usr/local/cuda").exists() {
        return;
    }
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("NVRTC (libnvrtc.so.13) is needed"), "{err}");
    assert!(err.contains("python3-pip"), "{err}");
    assert!(err.contains("CUDA 13.0 toolkit"), "{err}");
    // pip that cannot reach an index: the command to run by hand, with the pin.
    let o = run(&[
        ("PIP_INDEX_URL", "http://127.0.0.1:9/simple"),
        ("PIP_FIND_LINKS", ""),
        ("PIP_RETRIES", "0"),
        ("PIP_TIMEOUT", "2"),
    ]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("nvidia-cuda-nvrtc==13.0.88"), "{err}");
    assert!(err.contains("PyPI must be reachable"), "{err}");
}

#[test]
fn compile_error_is_a_failed_check_with_the_students_line() {
    if !nvrtc() {
        return;
    }
    let (code, v, err) = check_json(
        &fixtures().join("rubric.yaml"),
        &fixtures().join("compile_error"),
        &["--backend", "emu"],
    );
    assert_eq!(code, 1, "{err}");
    let c = checks(&v);
    let compile = c
        .iter()
        .find(|c| c["kind"] == "compile")
        .expect("a compile check");
    assert_eq!(compile["status"], "fail");
    // NVRTC's column: the `i` of `if (i < n)`.
    assert_eq!(compile["location"], "add.cu:4:7");
    assert!(
        compile["message"]
            .as_str()
            .unwrap()
            .contains("identifier \"i\" is undefined"),
        "{compile}"
    );
    assert!(
        v["compile"]["log"].as_str().unwrap().contains("add.cu(4)"),
        "{v}"
    );
    assert_eq!(v["milestones"][0]["status"], "fail");
    assert_eq!(v["score"], 0.0);
    assert_eq!(v["seed"], 7);
}

#[test]
fn missing_kernel_is_a_failed_check_naming_it() {
    if !nvrtc() {
        return;
    }
    let (code, v, err) = check_json(
        &fixtures().join("rubric.yaml"),
        &fixtures().join("missing_kernel"),
        &["--backend", "emu"],
    );
    assert_eq!(code, 1, "{err}");
    let c = checks(&v);
    let k = c
        .iter()
        .find(|c| c["kind"] == "kernel")
        .expect("a kernel check");
    assert_eq!(k["status"], "fail");
    assert_eq!(
        k["message"],
        "kernel `vector_add` not found in the submission"
    );
    assert!(
        k["hint"]
            .as_str()
            .unwrap()
            .contains("extern \"C\" __global__ void vector_add(...)")
    );
}

#[test]
fn compile_bomb_is_stopped_by_the_compile_deadline() {
    if !nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rubric = std::fs::read_to_string(fixtures().join("rubric.yaml"))
        .unwrap()
        .replace("compile_s: 20", "compile_s: 2");
    std::fs::write(dir.path().join("rubric.yaml"), rubric).unwrap();
    std::fs::copy(fixtures().join("ref.cu"), dir.path().join("ref.cu")).unwrap();
    let started = std::time::Instant::now();
    let (code, v, err) = check_json(
        &dir.path().join("rubric.yaml"),
        &fixtures().join("compile_bomb"),
        &["--backend", "emu"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        started.elapsed().as_secs() < 30,
        "took {:?}",
        started.elapsed()
    );
    let c = checks(&v);
    let compile = c
        .iter()
        .find(|c| c["kind"] == "compile")
        .expect("a compile check");
    assert_eq!(compile["status"], "fail", "{compile}");
    assert!(
        compile["message"]
            .as_str()
            .unwrap()
            .contains("did not finish within 2 s"),
        "{compile}"
    );
}

#[test]
fn worker_mode_rejects_garbage_configuration() {
    let o = cugrade(&["__worker", "{not json"]);
    assert_eq!(o.status.code(), Some(3));
}

#[test]
fn bad_usage_is_exit_2() {
    let o = cugrade(&["check", "--backend", "quantum", "--rubric", "x", "y"]);
    assert_eq!(o.status.code(), Some(2));
    let o = cugrade(&[
        "grade", "--rubric", "x", "c", "--out", "o", "--shard", "3/2",
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn validate_schema_only_accepts_good_and_rejects_bad() {
    let o = cugrade(&[
        "validate",
        "--schema-only",
        fixtures().join("rubric.yaml").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let o = cugrade(&[
        "validate",
        "--schema-only",
        fixtures().join("broken.yaml").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
}

/// One worker serves a student's milestones (cugrade keeps it across milestones: on a GPU a
/// context per milestone was a cohort's bottleneck). What one milestone's kernel printed must
/// not show up in the next milestone's findings, and a kernel that hangs is stopped at the
/// correctness deadline derived from the reference (1 s here, not `launch_s`), with a message
/// that says where the deadline came from.
#[test]
fn a_students_worker_carries_no_output_across_milestones_and_a_hang_stops_at_the_derived_deadline()
{
    if !nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("reduce.cu"),
        r#"__device__ volatile int forever = 1;
extern "C" __global__ void reduce_naive(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) printf("FROM-NAIVE\n");
    if (i < n) atomicAdd(out, in[i]);
}
extern "C" __global__ void reduce_shared(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) printf("FROM-SHARED\n");
    if (i < n && i % 2 == 0) atomicAdd(out, in[i]);
}
extern "C" __global__ void reduce_shuffle(const float* in, float* out, int n)
{
    while (forever) { }
}
"#,
    )
    .unwrap();
    let (code, v, err) = check_json(
        &root().join("rubrics/reduction.yaml"),
        dir.path(),
        &["--backend", "emu"],
    );
    assert_eq!(code, 1, "{err}");
    let milestone = |id: &str| {
        v["milestones"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no milestone {id} in {v}"))
    };
    assert_eq!(milestone("reduce_naive")["status"], "pass", "{v}");
    let shared = milestone("reduce_shared");
    let failed = shared["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "correctness" && c["status"] == "fail")
        .unwrap_or_else(|| panic!("no failed correctness check: {shared}"));
    let details = failed["details"].as_str().unwrap_or_default();
    assert!(details.contains("FROM-SHARED"), "{details}");
    assert!(!details.contains("FROM-NAIVE"), "{details}");
    let shuffle = milestone("reduce_shuffle");
    let hung = shuffle["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "runtime")
        .unwrap_or_else(|| panic!("no runtime check: {shuffle}"));
    let msg = hung["message"].as_str().unwrap();
    assert!(
        msg.starts_with("timeout: `reduce_shuffle` did not finish case")
            && msg.contains("within 1.0 s (the least any launch is given"),
        "{msg}"
    );
}

/// `cugrade ARGS` with a generous wall-clock bound: a stall fails the test with what the run
/// printed instead of holding CI for its whole budget. Output goes to files (no pipe to fill).
fn cugrade_within(args: &[&str], secs: u64) -> (Option<i32>, String, String) {
    use wait_timeout::ChildExt;
    let d = tempfile::tempdir().unwrap();
    let (out, err) = (d.path().join("out"), d.path().join("err"));
    let mut child = support::cugrade()
        .args(args)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let status = child
        .wait_timeout(std::time::Duration::from_secs(secs))
        .unwrap();
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let read = |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned();
    assert!(
        status.is_some(),
        "cugrade {args:?} still ran after {secs} s\n{}",
        read(&err)
    );
    (status.and_then(|s| s.code()), read(&out), read(&err))
}

#[test]
fn hostile_manifests_are_exit_2_with_their_position_never_a_crash_or_a_stall() {
    let d = tempfile::tempdir().unwrap();
    let deep = |n: usize| format!("{}n{}", "(".repeat(n), ")".repeat(n));
    let flow = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let cases: Vec<(&str, String, &str, &str)> = vec![
        (
            "parens",
            format!("launch:\n  vector_add:\n    grid: [\"{}\"]\n", deep(10_000)),
            "cugrade.yaml:3:12",
            "at most 1024",
        ),
        (
            "flow-2mib",
            format!(
                "launch:\n  vector_add:\n    grid: {}\n",
                flow((1 << 20) - 40)
            ),
            "cugrade.yaml",
            "a cugrade.yaml may have at most 65536",
        ),
        (
            "flow-60k",
            format!("launch:\n  vector_add:\n    grid: {}\n", flow(30_000)),
            "cugrade.yaml:3:",
            "nest more than",
        ),
        (
            "block",
            format!("student:\n{}x\n", "- ".repeat(5_000)),
            "cugrade.yaml:",
            "nest more than 16 levels",
        ),
    ];
    for (name, manifest, at, why) in cases {
        let sub = d.path().join(name);
        std::fs::create_dir(&sub).unwrap();
        std::fs::copy(fixtures().join("correct/add.cu"), sub.join("add.cu")).unwrap();
        std::fs::write(sub.join("cugrade.yaml"), manifest).unwrap();
        let (code, _, err) = cugrade_within(
            &[
                "check",
                "--rubric",
                fixtures().join("rubric.yaml").to_str().unwrap(),
                sub.to_str().unwrap(),
                "--backend",
                "emu",
            ],
            120,
        );
        assert_eq!(code, Some(2), "{name}: {err}");
        assert!(err.contains(at) && err.contains(why), "{name}: {err}");
        assert!(
            err.len() < 2000,
            "{name}: a short message ({} bytes)",
            err.len()
        );
    }
}

/// A copy of the mini rubric (and its reference) in a temp dir, with `from` replaced by `to`.
fn mini_rubric_with(dir: &Path, from: &str, to: &str) -> PathBuf {
    let text = std::fs::read_to_string(fixtures().join("rubric.yaml")).unwrap();
    assert!(text.contains(from), "{from}");
    std::fs::copy(fixtures().join("ref.cu"), dir.join("ref.cu")).unwrap();
    let p = dir.join("rubric.yaml");
    std::fs::write(&p, text.replace(from, to)).unwrap();
    p
}

#[test]
fn rubric_numbers_that_would_overflow_are_exit_2_at_their_line() {
    for (from, to, at, why) in [
        (
            "uniform: [-1, 1] } }\n      - { name: b",
            "uniform: [-1e308, 1e308] } }\n      - { name: b",
            "rubric.yaml:8:",
            "outside what a `f32` element holds",
        ),
        (
            "points: 10",
            "points: .nan",
            "rubric.yaml:21:",
            "points must be a number",
        ),
        (
            "points: 10",
            "points: 1e308",
            "rubric.yaml:21:",
            "points must be a number",
        ),
    ] {
        let d = tempfile::tempdir().unwrap();
        let rubric = mini_rubric_with(d.path(), from, to);
        for args in [
            vec!["validate", rubric.to_str().unwrap()],
            vec![
                "check",
                "--rubric",
                rubric.to_str().unwrap(),
                fixtures().join("correct").to_str().unwrap(),
                "--backend",
                "emu",
            ],
        ] {
            let (code, _, err) = cugrade_within(&args, 120);
            assert_eq!(code, Some(2), "{to}: {err}");
            assert!(err.contains(at) && err.contains(why), "{to}: {err}");
            assert!(!err.contains("panicked"), "{err}");
        }
    }
}

#[test]
fn rubric_files_outside_the_course_tree_are_refused_unread() {
    let d = tempfile::tempdir().unwrap();
    let course = d.path().join("course");
    std::fs::create_dir(&course).unwrap();
    // A file beside the course tree, as a secret would be.
    std::fs::write(d.path().join("secret.cu"), "root:x:0:0:SECRET\n").unwrap();
    let outside = d.path().join("secret.cu");
    let run = |args: &[&str]| {
        let (code, out, err) = cugrade_within(args, 120);
        assert!(
            !out.contains("SECRET") && !err.contains("SECRET") && !err.contains("root:x"),
            "{args:?} printed the file: {err}"
        );
        (code, err)
    };
    for reference in [
        "../secret.cu".to_string(),
        outside.display().to_string(),
        "/etc/passwd".to_string(),
    ] {
        let dir = course.join("rubrics");
        std::fs::create_dir_all(&dir).unwrap();
        let rubric = mini_rubric_with(
            &dir,
            "reference: ref.cu",
            &format!("reference: {reference}"),
        );
        // rubrics/.. is the course tree: `../secret.cu` from rubrics/ is course/secret.cu, absent.
        let (code, err) = run(&["validate", rubric.to_str().unwrap()]);
        assert_eq!(code, Some(2), "{reference}: {err}");
        assert!(
            err.contains("outside the course tree") || err.contains("does not exist"),
            "{reference}: {err}"
        );
        assert!(err.contains("rubric.yaml:3:"), "{reference}: {err}");
    }
    // A rubric that is a link out of the tree is not read.
    std::os::unix::fs::symlink(&outside, course.join("rubrics/linked.yaml")).unwrap();
    let (code, err) = run(&[
        "check",
        "--rubric",
        course.join("rubrics/linked.yaml").to_str().unwrap(),
        fixtures().join("correct").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("outside the course tree"), "{err}");
    // A manifest's `rubric:` stays in the submission, links resolved; and so do its files.
    let sub = d.path().join("student");
    std::fs::create_dir(&sub).unwrap();
    std::fs::copy(fixtures().join("correct/add.cu"), sub.join("add.cu")).unwrap();
    std::os::unix::fs::symlink(&outside, sub.join("evil.yaml")).unwrap();
    for (value, why) in [
        ("evil.yaml", "outside the submission's folder"),
        ("../secret.cu", "outside the submission's folder"),
        ("mine.yaml", "outside the submission's folder"),
    ] {
        std::fs::write(sub.join("cugrade.yaml"), format!("rubric: {value}\n")).unwrap();
        let text = std::fs::read_to_string(fixtures().join("rubric.yaml"))
            .unwrap()
            .replace("reference: ref.cu", "reference: ../secret.cu");
        std::fs::write(sub.join("mine.yaml"), text).unwrap();
        let (code, err) = run(&["check", sub.to_str().unwrap(), "--backend", "emu"]);
        assert_eq!(code, Some(2), "{value}: {err}");
        assert!(err.contains(why), "{value}: {err}");
    }
}

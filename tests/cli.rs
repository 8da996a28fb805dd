//! End-to-end tests through the `cugrade` binary on fixture submissions with known verdicts.
//! These need no GPU; they need NVRTC (`ci/with-nvrtc cargo test` provides it) and skip with
//! a message where a test cannot run without it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixtures() -> PathBuf {
    root().join("tests/fixtures/mini")
}

fn cugrade(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cugrade"))
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

fn nvrtc() -> bool {
    // SAFETY: only tries to load the library.
    let ok = unsafe { cudarc::nvrtc::sys::is_culib_present() };
    if !ok {
        eprintln!("skipped: libnvrtc.so.13 not found (run through ci/with-nvrtc)");
    }
    ok
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
    let has_driver = unsafe { cudarc::driver::sys::is_culib_present() };
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

#[test]
fn missing_nvrtc_is_exit_3_with_the_fix() {
    let o = Command::new(env!("CARGO_BIN_EXE_cugrade"))
        .args([
            "check",
            "--backend",
            "emu",
            "--rubric",
            fixtures().join("rubric.yaml").to_str().unwrap(),
            fixtures().join("correct").to_str().unwrap(),
        ])
        .env("LD_LIBRARY_PATH", "/nonexistent")
        .output()
        .unwrap();
    let (_, err) = text(&o);
    // With a system-wide NVRTC this cannot be provoked.
    if o.status.code() != Some(3) && std::path::Path::new("/usr/local/cuda").exists() {
        return;
    }
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("nvidia-cuda-nvrtc==13.0.88"), "{err}");
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
        msg.starts_with("timeout") && msg.contains("its deadline was 1.0 s (timeouts.launch_min_s"),
        "{msg}"
    );
}

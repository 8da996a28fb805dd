//! One reference kernel under several contracts (issue 33), through the binary on the
//! emulator, in small course trees of their own:
//!
//! - two milestones whose contracts draw other inputs (uniform bins, one constant bin) name the
//!   same reference kernel: each is checked against the reference's outputs on its own inputs
//!   (they were cached by kernel, case and trial, so the second milestone got the first one's);
//! - a performance check `against: {reference: K}` runs K with the launch of K's own contract,
//!   not the timed milestone's; `validate` says when that launch has fewer threads than K's
//!   output has elements, and refuses a K that milestones grade against with other launches.

use crate::support::{cugrade, nvrtc, output_text};
use std::path::{Path, PathBuf};

/// A course tree in `dir`: `rubrics/NAME.yaml` and `reference-kernels/NAME.cu`.
fn course(dir: &Path, name: &str, rubric: &str, reference: &str) -> PathBuf {
    std::fs::create_dir_all(dir.join("rubrics")).unwrap();
    std::fs::create_dir_all(dir.join("reference-kernels")).unwrap();
    std::fs::write(dir.join(format!("reference-kernels/{name}.cu")), reference).unwrap();
    let path = dir.join(format!("rubrics/{name}.yaml"));
    std::fs::write(&path, rubric).unwrap();
    path
}

/// `cugrade validate [extra] RUBRIC`: exit code and everything printed.
fn validate(rubric: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let o = cugrade()
        .arg("validate")
        .args(extra)
        .arg(rubric)
        .args(["--backend", "emu"])
        .output()
        .unwrap();
    (o.status.code(), output_text(&o))
}

/// `cugrade check --backend emu` of `student` (one `.cu` file's text): exit code, result.json
/// and everything printed.
fn check(rubric: &Path, student: &str, dir: &Path) -> (Option<i32>, serde_json::Value, String) {
    let sub = dir.join("student");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("solution.cu"), student).unwrap();
    let json = dir.join("result.json");
    let o = cugrade()
        .args(["check", "--backend", "emu", "--seed", "5", "--rubric"])
        .arg(rubric)
        .arg(&sub)
        .arg("--json")
        .arg(&json)
        .env_remove("CUGRADE_ESTIMATE_GPU")
        .output()
        .unwrap();
    let text = output_text(&o);
    let v = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| panic!("no result.json: {text}"));
    (o.status.code(), v, text)
}

const HISTOGRAM_RUBRIC: &str = r#"assignment: histogram
reference: ../reference-kernels/histogram.cu
contracts:
  uniform:
    params:
      - {name: data, type: "i32*", dir: in, len: n, gen: {int: [0, 256]}}
      - {name: bins, type: "u32*", dir: out, len: 256, init: 0}
      - {name: n, type: i32, value: n}
    launch: {block: [256], grid: ["ceil_div(n, 256)"]}
  # Every element in one bin: the contention a shared-memory histogram must survive.
  contended:
    params:
      - {name: data, type: "i32*", dir: in, len: n, gen: {constant: 7}}
      - {name: bins, type: "u32*", dir: out, len: 256, init: 0}
      - {name: n, type: i32, value: n}
    launch: {block: [256], grid: ["ceil_div(n, 256)"]}
cases:
  correctness:
    - {name: n1000, vars: {n: 1000}}
    - {name: n4099, vars: {n: 4099}}
milestones:
  - id: hist_shared
    kernel: hist_shared
    contract: uniform
    reference_kernel: hist
    correctness: {points: 10}
  - id: hist_contended
    kernel: hist_contended
    contract: contended
    reference_kernel: hist
    correctness: {points: 10}
"#;

/// A block's histogram in shared memory, added to the global one.
const HIST_SHARED: &str = r#"
extern "C" __global__ void NAME(const int* data, unsigned int* bins, int n)
{
    __shared__ unsigned int local[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&local[data[i]], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x)
        if (local[b] != 0) atomicAdd(&bins[b], local[b]);
}
"#;

fn histogram_kernels() -> String {
    ["hist_shared", "hist_contended"]
        .iter()
        .map(|k| HIST_SHARED.replace("NAME", k))
        .collect()
}

#[test]
fn milestones_sharing_a_reference_kernel_under_two_contracts_get_their_own_expected_outputs() {
    if !nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let reference = format!(
        "extern \"C\" __global__ void hist(const int* data, unsigned int* bins, int n)\n{{\n    \
         int i = blockIdx.x * blockDim.x + threadIdx.x;\n    \
         if (i < n) atomicAdd(&bins[data[i]], 1u);\n}}\n{}",
        histogram_kernels()
    );
    let rubric = course(dir.path(), "histogram", HISTOGRAM_RUBRIC, &reference);

    // The course's own reference kernels pass their rubric.
    let (code, text) = validate(&rubric, &[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(!text.contains("permutation"), "{text}");

    // So does a student's correct solution, milestone by milestone.
    let (code, r, text) = check(&rubric, &histogram_kernels(), dir.path());
    assert_eq!(code, Some(0), "{text}");
    for id in ["hist_shared", "hist_contended"] {
        crate::support::correct(&r, id).unwrap_or_else(|e| panic!("{id}: {e}"));
    }
}

/// A vector scaled by two: one thread per element (the baseline), and a fixed grid whose
/// threads loop over the data (the timed kernel).
const SCALE_REFERENCE: &str = r#"
extern "C" __global__ void scale_plain(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
extern "C" __global__ void scale_strided(const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = 2.0f * x[i];
}
"#;

/// The scale rubric with `PLAIN_LAUNCH` as the baseline's own launch and `EXTRA` appended to
/// the milestones.
const SCALE_RUBRIC: &str = r#"assignment: scale
reference: ../reference-kernels/scale.cu
contracts:
  plain:
    params:
      - {name: x, type: "f32*", dir: in, len: n, gen: {uniform: [-1, 1]}}
      - {name: y, type: "f32*", dir: out, len: n}
      - {name: n, type: i32, value: n}
    launch: PLAIN_LAUNCH
  strided:
    params:
      - {name: x, type: "f32*", dir: in, len: n, gen: {uniform: [-1, 1]}}
      - {name: y, type: "f32*", dir: out, len: n}
      - {name: n, type: i32, value: n}
    launch: {block: [128], grid: [8]}
cases:
  correctness:
    - {name: n1000, vars: {n: 1000}}
  performance:
    - {name: n2p18, vars: {n: 262144}}
milestones:
  - id: plain
    kernel: scale_plain
    contract: plain
    correctness: {points: 10}
  - id: strided
    kernel: scale_strided
    contract: strided
    correctness: {points: 10}
    performance:
      - name: vs_plain
        case: n2p18
        against: {reference: scale_plain}
        tiers: [{min: 1, points: 5}]
EXTRA"#;

fn scale_rubric(plain_launch: &str, extra: &str) -> String {
    SCALE_RUBRIC
        .replace("PLAIN_LAUNCH", plain_launch)
        .replace("EXTRA", extra)
}

#[test]
fn a_reference_baseline_runs_with_its_own_contracts_launch() {
    if !nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let text = scale_rubric(r#"{block: [64], grid: ["ceil_div(n, 64)"]}"#, "");
    let rubric = course(dir.path(), "scale", &text, SCALE_REFERENCE);

    // Sound, and nothing to warn about: the baseline's launch covers its output.
    let (code, out) = validate(&rubric, &["--schema-only"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("warning"), "{out}");

    // The estimate's baseline is `scale_plain` as its contract launches it on the case:
    // 262144 / 64 blocks of 64 threads, not the timed milestone's 8 blocks of 128.
    let (_, r, out) = check(&rubric, SCALE_REFERENCE, dir.path());
    crate::support::correct(&r, "strided").unwrap_or_else(|e| panic!("{e}\n{out}"));
    let perf = crate::support::milestone(&r, "strided")["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "performance")
        .cloned()
        .unwrap_or_else(|| panic!("no performance check: {r}"));
    let base = &perf["estimate"]["baseline"];
    assert_eq!(base["kind"], "reference:scale_plain", "{perf}");
    let profile = &base["profile"];
    assert_eq!(profile["threads_per_block"], 64, "{perf}");
    assert_eq!(profile["blocks"], 262144 / 64, "{perf}");
    // The student's kernel keeps its own contract's launch.
    let own = &perf["estimate"]["profile"];
    assert_eq!(
        (&own["threads_per_block"], &own["blocks"]),
        (&serde_json::json!(128), &serde_json::json!(8)),
        "{perf}"
    );
}

#[test]
fn validate_warns_of_a_baseline_launch_short_of_its_output_and_refuses_two_launches() {
    if !nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // 1024 threads: all of the correctness case, a 256th of the performance case.
    let text = scale_rubric("{block: [128], grid: [8]}", "");
    let rubric = course(dir.path(), "scale", &text, SCALE_REFERENCE);
    let (code, out) = validate(&rubric, &["--schema-only"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("warning: baseline `scale_plain` is launched with 1024 threads")
            && out.contains("fewer than the 262144 elements of its output `y`")
            && out.contains("not grid-stride would process only part of the data"),
        "{out}"
    );
    // At the line that names the baseline.
    let line = text
        .lines()
        .position(|l| l.contains("against: {reference: scale_plain}"))
        .unwrap()
        + 1;
    assert!(out.contains(&format!("scale.yaml:{line}:")), "{out}");

    // A third milestone grading against `scale_plain` with the strided launch: which launch
    // would the baseline run with? A rubric error at the baseline's line.
    let two = scale_rubric(
        r#"{block: [64], grid: ["ceil_div(n, 64)"]}"#,
        "  - id: again\n    kernel: scale_strided\n    contract: strided\n    \
         reference_kernel: scale_plain\n    correctness: {points: 1}\n",
    );
    let rubric = course(dir.path(), "scale", &two, SCALE_REFERENCE);
    let (code, out) = validate(&rubric, &["--schema-only"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains(&format!("scale.yaml:{line}:"))
            && out.contains("milestones `plain` (contract `plain`")
            && out.contains("`again` (contract `strided`")
            && out.contains("different launches"),
        "{out}"
    );
    assert!(!out.contains("panicked"), "{out}");
}

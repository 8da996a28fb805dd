//! `dir: scratch` (issue 33): a kernel's workspace (a multi-block algorithm's partial sums,
//! a counter of finished blocks) starts zeroed before every launch and is never compared, so
//! an instructor no longer declares it an output with a huge tolerance. Through the binary on
//! the emulator, in a course tree of its own.

use crate::support::{cugrade, grade_files, nvrtc, output_text};
use std::path::{Path, PathBuf};

/// `rubrics/sum.yaml` (with `params` for the contract) and `reference-kernels/sum.cu`.
fn course(dir: &Path, params: &str) -> PathBuf {
    std::fs::create_dir_all(dir.join("rubrics")).unwrap();
    std::fs::create_dir_all(dir.join("reference-kernels")).unwrap();
    std::fs::write(
        dir.join("reference-kernels/sum.cu"),
        ["sum_ref", "block_sum"]
            .map(|k| LAST_BLOCK.replace("NAME", k).replace("GARBAGE", ""))
            .concat(),
    )
    .unwrap();
    let path = dir.join("rubrics/sum.yaml");
    std::fs::write(&path, RUBRIC.replace("PARAMS", params)).unwrap();
    path
}

const RUBRIC: &str = r#"assignment: sum
reference: ../reference-kernels/sum.cu
contracts:
  sum:
    params:
PARAMS
    launch: {block: [256], grid: ["ceil_div(n, 256)"]}
cases:
  correctness:
    - {name: n1, vars: {n: 1}}
    - {name: n1000, vars: {n: 1000}}
    - {name: n70000, vars: {n: 70000}}
milestones:
  - id: sum
    kernel: block_sum
    contract: sum
    reference_kernel: sum_ref
    correctness: {points: 10}
"#;

const PARAMS: &str = r#"      - {name: data, type: "i32*", dir: in, len: n, gen: {int: [-8, 9]}}
      - {name: total, type: "i32*", dir: out, len: 1}
      - {name: partial, type: "i32*", dir: scratch, len: "ceil_div(n, 256)"}
      - {name: done, type: "u32*", dir: scratch, len: 1}
      - {name: n, type: i32, value: n}"#;

/// Each block writes its sum to `partial`; the last block to finish (counted in `done`, which
/// must start at zero) adds the partial sums into `total`, which it writes whole (no `init`).
const LAST_BLOCK: &str = r#"
extern "C" __global__ void NAME(const int* data, int* total, int* partial, unsigned int* done, int n)
{
    __shared__ int s[256];
    __shared__ bool last;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? data[i] : 0;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = s[0];
        __threadfence();
        last = atomicAdd(done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (last && threadIdx.x == 0) {
        int t = 0;
        for (unsigned int b = 0; b < gridDim.x; ++b) t += ((volatile int*)partial)[b];
        *total = t;
        GARBAGE
    }
}
"#;

#[test]
fn scratch_buffers_start_zeroed_and_are_never_graded() {
    if !nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rubric = course(dir.path(), PARAMS);
    let o = cugrade()
        .args(["validate", "--backend", "emu"])
        .arg(&rubric)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    // The counter starts at zero on every launch (the reference itself relies on it), and a
    // student who leaves anything in the workspace is graded on `total` alone.
    let student = LAST_BLOCK
        .replace("NAME", "block_sum")
        .replace("GARBAGE", "partial[0] = 12345; *done = 99u;");
    let v = grade_files(&rubric, &[("solution.cu", &student)]);
    assert_eq!(v["score"], 10.0, "{v}");
    let checks = v["milestones"][0]["checks"].as_array().unwrap();
    for c in checks {
        let said = format!("{} {}", c["name"], c["message"]);
        assert!(
            !said.contains("partial") && !said.contains("`done`"),
            "a scratch buffer was graded: {said}"
        );
    }
    // A wrong total still fails.
    let wrong = LAST_BLOCK
        .replace("NAME", "block_sum")
        .replace("GARBAGE", "*total = t + 1;");
    let v = grade_files(&rubric, &[("solution.cu", &wrong)]);
    assert_eq!(v["score"], 0.0, "{v}");
    assert!(v.to_string().contains("`total`"), "{v}");
}

#[test]
fn a_scratch_buffer_with_a_generator_or_a_tolerance_is_refused_at_its_key() {
    let dir = tempfile::tempdir().unwrap();
    for (params, key, words) in [
        (
            PARAMS.replace(
                "dir: scratch, len: 1}",
                "dir: scratch, len: 1, gen: {int: [0, 2]}}",
            ),
            "gen: {int: [0, 2]}",
            "is not generated",
        ),
        (
            PARAMS.replace(
                "dir: scratch, len: 1}",
                "dir: scratch, len: 1, tolerance: {abs: 1}}",
            ),
            "tolerance: {abs: 1}",
            "never compared",
        ),
    ] {
        let rubric = course(dir.path(), &params);
        let o = cugrade()
            .args(["validate", "--backend", "emu"])
            .arg(&rubric)
            .output()
            .unwrap();
        let text = output_text(&o);
        assert_eq!(o.status.code(), Some(2), "{text}");
        // Said at the line of the key it is about, which is shown.
        assert!(
            text.contains(":9:") && text.contains(key) && text.contains(words),
            "{text}"
        );
    }
}

#[test]
fn a_course_lab_gets_a_starter_from_its_rubric() {
    if !nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rubric = course(dir.path(), PARAMS);
    let starter = dir.path().join("starter");
    let o = cugrade()
        .args(["init", "--rubric"])
        .arg(&rubric)
        .arg(&starter)
        .output()
        .unwrap();
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("next: cugrade check --rubric"), "{text}");
    // The stub has the contract's signature, scratch buffers included, and nothing of the
    // course's reference travels with it.
    let stub = std::fs::read_to_string(starter.join("sum.cu")).unwrap();
    assert!(
        stub.contains("void block_sum(") && stub.contains("unsigned int* done"),
        "{stub}"
    );
    for f in ["sum.cu", "README.md", "lab.md", "cugrade.yaml"] {
        let t = std::fs::read_to_string(starter.join(f)).unwrap();
        assert!(
            !t.contains("sum_ref") && !t.contains("atomicAdd"),
            "{f}: {t}"
        );
    }
    // The untouched starter grades as "not implemented yet" against the course's rubric.
    let o = cugrade()
        .args(["check", "--backend", "emu", "--rubric"])
        .arg(&rubric)
        .arg(&starter)
        .output()
        .unwrap();
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("not implemented yet"), "{text}");
    // A built-in lab's name is still checked, with the list.
    let o = cugrade().args(["init", "no-such-lab"]).output().unwrap();
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(
        text.contains("unknown lab `no-such-lab`") && text.contains("reduction"),
        "{text}"
    );
}

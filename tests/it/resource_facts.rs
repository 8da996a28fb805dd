//! Resource facts are the hardware's: registers and spills from ptxas (NVRTC's `-v` log for
//! CUDA C++, nvJitLink for PTX and Numba) or a GPU's driver, never the emulator's count of PTX
//! virtual registers; and `check --profile` without a GPU prints the emulator's counters of
//! every kernel it graded. (issue 18, "true resource facts")

use crate::support::{cugrade, nvrtc, root};

/// `check --backend emu --format json` of `submission` against `rubric`.
fn check(rubric: &str, submission: &str, extra: &[&str]) -> (serde_json::Value, String, String) {
    let o = cugrade()
        .args(["check", "--backend", "emu", "--seed", "2", "--rubric"])
        .arg(root().join(rubric))
        .arg(root().join(submission))
        .args(extra)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let v = serde_json::from_str(&out).unwrap_or(serde_json::Value::Null);
    (v, out, err)
}

/// The resources check's message for each milestone.
fn resources(v: &serde_json::Value) -> Vec<String> {
    v["milestones"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["checks"].as_array().unwrap().iter())
        .filter(|c| c["kind"] == "resources")
        .map(|c| c["message"].as_str().unwrap().to_string())
        .collect()
}

/// The number before "registers per thread".
fn registers(message: &str) -> Option<u32> {
    let (head, _) = message.split_once(" registers per thread")?;
    head.rsplit(' ').next()?.parse().ok()
}

/// A PTX kernel that declares 130 virtual `.f32` registers, which ptxas packs into about ten:
/// the report gives ptxas's count (or says it does not know), never 130-odd.
#[test]
fn a_ptx_kernel_reports_ptxas_registers_not_virtual_ones() {
    if !nvrtc() {
        return;
    }
    let (v, out, err) = check(
        "tests/fixtures/mini/rubric.yaml",
        "tests/fixtures/ptx/many_virtual_regs.ptx",
        &["--format", "json"],
    );
    assert_eq!(v["milestones"][0]["status"], "pass", "{out}\n{err}");
    let msg = &resources(&v)[0];
    match cugrade::compile::jitlink::library() {
        Some(_) => {
            let n = registers(msg).unwrap_or_else(|| panic!("no register count: {msg}"));
            assert!(
                n < 32,
                "ptxas allocates about ten, not the virtual 130+: {msg}"
            );
            assert!(!msg.contains("limited by registers"), "{msg}");
            let k = v["compile"]["kernels"]
                .as_array()
                .unwrap()
                .iter()
                .find(|k| k["name"] == "vector_add")
                .cloned()
                .unwrap_or_else(|| panic!("no ptxas facts: {}", v["compile"]));
            assert_eq!(k["registers"], n);
        }
        None => {
            eprintln!("nvJitLink not installed: the registers must be said to be unknown");
            assert!(msg.contains("registers unknown"), "{msg}");
        }
    }
}

/// CUDA C++ on the emulator: the resources check gives NVRTC's ptxas count for every kernel.
#[test]
fn cuda_cpp_on_the_emulator_reports_ptxas_registers() {
    if !nvrtc() {
        return;
    }
    let (v, out, err) = check(
        "rubrics/reduction.yaml",
        "submissions-example/reduction/optimized",
        &["--format", "json"],
    );
    let kernels = v["compile"]["kernels"]
        .as_array()
        .unwrap_or_else(|| panic!("{out}\n{err}"))
        .clone();
    let msgs = resources(&v);
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    for (m, msg) in v["milestones"].as_array().unwrap().iter().zip(&msgs) {
        let k = kernels
            .iter()
            .find(|k| k["kernel"] == m["kernel"] || k["name"] == m["kernel"]);
        let want = k.unwrap()["registers"].as_u64().unwrap() as u32;
        assert_eq!(registers(msg), Some(want), "{msg}");
    }
}

/// `check --profile` on the emulator prints the counters of every kernel it graded (the rubric
/// has no `metrics:`), on the largest case that ran.
#[test]
fn profile_without_a_gpu_prints_every_kernels_counters() {
    if !nvrtc() {
        return;
    }
    let (_, out, err) = check(
        "tests/fixtures/mini/rubric.yaml",
        "tests/fixtures/mini/correct",
        &["--profile"],
    );
    assert!(
        out.contains("profile of vector_add (PTX emulator counters, case n=1000):"),
        "{out}\n{err}"
    );
    for name in [
        "global_load_efficiency",
        "global_store_efficiency",
        "branch_divergence",
        "warp_instructions",
    ] {
        assert!(out.contains(name), "{name}: {out}");
    }
    assert!(!out.contains("carry the same names"), "{out}");
}

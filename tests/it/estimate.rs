//! The speed estimate on the emulator (docs/estimate.md), through the real binary as a student
//! runs it: every report format shows it, it never grades, it follows the kernel's memory
//! traffic and the modelled GPU, and a bad GPU name is a usage error. At the library level:
//! sampled blocks that wait for a block the sample does not run end with a clear error within
//! the deadline, and blocks that hand out work through atomics are flagged.
//!
//! Accuracy against measured GPU times is a benchmark, not a test:
//! `examples/estimate_bench.rs` with `ci/gpu-estimate-bench.sh` (docs/validation/estimate.md).

use crate::support::{cugrade, nvrtc, root};
use std::path::Path;
use std::process::Output;

fn check(rubric: &str, sub: &Path, extra: &[&str], dir: &Path) -> (Output, serde_json::Value) {
    let json = dir.join("result.json");
    let o = cugrade()
        .args(["check", "--backend", "emu", "--seed", "3", "--rubric"])
        .arg(root().join(rubric))
        .arg(sub)
        .arg("--json")
        .arg(&json)
        .args(extra)
        .env_remove("CUGRADE_ESTIMATE_GPU")
        .output()
        .unwrap();
    let v = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    (o, v)
}

fn perf<'a>(r: &'a serde_json::Value, milestone: &str) -> Vec<&'a serde_json::Value> {
    r["milestones"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["id"] == milestone)
        .flat_map(|m| m["checks"].as_array().unwrap())
        .filter(|c| c["kind"] == "performance")
        .collect()
}

#[test]
fn every_report_format_shows_the_estimate_and_it_never_grades() {
    if !nvrtc() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let sub = root().join("submissions-example/reduction/optimized");
    let (x, md, gs) = (
        tmp.path().join("junit.xml"),
        tmp.path().join("report.md"),
        tmp.path().join("gradescope.json"),
    );
    let (o, r) = check(
        "rubrics/reduction.yaml",
        &sub,
        &[
            "--junit",
            x.to_str().unwrap(),
            "--markdown",
            md.to_str().unwrap(),
            "--gradescope",
            gs.to_str().unwrap(),
        ],
        tmp.path(),
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // result.json: skipped, provisional, with the estimate and its inputs.
    let shared = perf(&r, "reduce_shared");
    let c = shared[0];
    assert_eq!(c["status"], "skipped");
    assert!(c["measured"].is_null(), "an estimate is not a measurement");
    let e = &c["estimate"];
    assert_eq!(e["gpu"], "H100");
    let (ms, lo, hi) = (
        e["ms"].as_f64().unwrap(),
        e["low_ms"].as_f64().unwrap(),
        e["high_ms"].as_f64().unwrap(),
    );
    // 2^24 floats and 65536 atomics on one address: about 0.12 ms on an H100.
    assert!((0.03..0.5).contains(&ms), "{ms}");
    assert!(lo < ms && ms < hi);
    // Against the reference reduce_naive (one atomic per element), estimated by the same
    // model: about 245x on an H100.
    assert_eq!(e["baseline"]["kind"], "reference:reduce_naive");
    assert_eq!(e["baseline"]["estimated"], true);
    let ratio = e["ratio"].as_f64().unwrap();
    assert!((50.0..1000.0).contains(&ratio), "{ratio}");
    assert!(e["profile"]["sampled"].as_u64().unwrap() < e["profile"]["blocks"].as_u64().unwrap());
    assert_eq!(e["needs"].as_f64(), Some(10.0));
    let m = r["milestones"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "reduce_shared")
        .unwrap();
    assert_eq!(m["status"], "skipped");
    assert_eq!(m["provisional"], true);
    // Against a CPU that is not pinned for the course: the kernel's estimate and the bar, no
    // ratio (a CPU timed here would make the report depend on the machine and the run).
    let shuffle = perf(&r, "reduce_shuffle");
    let se = &shuffle[0]["estimate"];
    assert!(se["baseline"].is_null(), "{se}");
    assert!(se["ratio"].is_null(), "{se}");
    assert!(se["ms"].as_f64().unwrap() > 0.0);
    assert!(
        se["no_ratio"]
            .as_str()
            .unwrap()
            .contains("the grading machine's CPU"),
        "{se}"
    );
    // Why, and what to do, once for the run: this rubric is a course's file.
    let notes = r["run"]["notes"].to_string();
    assert!(
        notes.contains(
            "no estimated speed-up against the CPU for reduce_shuffle › speedup_over_cpu"
        ) && notes.contains("`cugrade calibrate`"),
        "{notes}"
    );
    assert!(
        shuffle[0]["message"]
            .as_str()
            .unwrap()
            .contains("needs 100x faster than the single-threaded CPU (no ratio: "),
        "{}",
        shuffle[0]["message"]
    );

    let sentence = c["message"].as_str().unwrap();
    assert!(sentence.starts_with("estimated on an H100: "), "{sentence}");
    assert!(
        sentence.contains("faster than the reference `reduce_naive` (likely ")
            && sentence.contains("x faster; needs 10x faster): likely to meet this bar on a GPU"),
        "{sentence}"
    );
    assert!(sentence.contains("an estimate, not a grade"));
    assert!(sentence.contains("Speed is not measured on the PTX emulator"));

    // The terminal, JUnit (parsed), Markdown and Gradescope say it too.
    assert!(
        stdout.contains("estimate: reduce_shared › speedup_over_naive: estimated on an H100:"),
        "{stdout}"
    );
    let xml = std::fs::read_to_string(&x).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    // A correct kernel's unmeasured speed check is a passed testcase whose system-out says
    // "PASS, speed not measured", with the estimate beside it (never a <skipped/> or a failure).
    let outs: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .filter(|n| {
            !n.children()
                .any(|c| c.has_tag_name("failure") || c.has_tag_name("skipped"))
        })
        .flat_map(|n| n.children().filter(|c| c.has_tag_name("system-out")))
        .filter_map(|n| n.text().map(String::from))
        .collect();
    assert!(
        outs.iter()
            .any(|m| m.contains("speed not measured") && m.contains("estimated on an H100")),
        "{outs:?}"
    );
    let report = std::fs::read_to_string(&md).unwrap();
    // Under the milestone's "Speed not measured" line, each check's estimate.
    assert!(
        report.contains("- **speedup\\_over\\_naive:** estimated on an H100")
            && report.contains("; needs 10x faster)"),
        "{report}"
    );
    let g: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&gs).unwrap()).unwrap();
    assert!(g["tests"].as_array().unwrap().iter().any(|t| {
        t["output"]
            .as_str()
            .unwrap()
            .contains("estimated on an H100")
    }));
    // Deterministic: the same submission and seed give the same report.md and result.json
    // (timings aside, as ci/slurm-test.sh redacts them).
    let tmp2 = tempfile::tempdir().unwrap();
    let md2 = tmp2.path().join("report.md");
    let _ = check(
        "rubrics/reduction.yaml",
        &sub,
        &["--markdown", md2.to_str().unwrap()],
        tmp2.path(),
    );
    let redact = |p: &Path| {
        let t = std::fs::read_to_string(p).unwrap();
        let t = regex::Regex::new(r#""(seconds|[a-z_]+_s)": [0-9.e+-]+"#)
            .unwrap()
            .replace_all(&t, r#""$1": T"#)
            .into_owned();
        regex::Regex::new(r"Compile time = [0-9.]+ ms")
            .unwrap()
            .replace_all(&t, "Compile time = T ms")
            .into_owned()
    };
    assert_eq!(redact(&md), redact(&md2));
    assert_eq!(
        redact(&tmp.path().join("result.json")),
        redact(&tmp2.path().join("result.json"))
    );

    // An estimate is no score: the same total as without one.
    let (_, none) = check(
        "rubrics/reduction.yaml",
        &sub,
        &["--estimate-gpu", "none"],
        tmp.path(),
    );
    assert_eq!(none["score"], r["score"]);
    assert!(perf(&none, "reduce_shared")[0]["estimate"].is_null());
}

#[test]
fn the_estimate_follows_memory_traffic_and_the_gpu() {
    if !nvrtc() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let fx = root().join("tests/fixtures/estimate");
    let rubric = "tests/fixtures/estimate/copy.yaml";
    let ms = |r: &serde_json::Value| perf(r, "copy")[0]["estimate"]["ms"].as_f64().unwrap();
    let (_, h100) = check(rubric, &fx.join("copy.cu"), &[], tmp.path());
    let (_, h200) = check(
        rubric,
        &fx.join("copy.cu"),
        &["--estimate-gpu", "h200"],
        tmp.path(),
    );
    let (_, strided) = check(rubric, &fx.join("copy_strided.cu"), &[], tmp.path());
    let (a, b, s) = (ms(&h100), ms(&h200), ms(&strided));
    // 32 MiB through DRAM: tens of microseconds; faster on the H200's memory.
    assert!((0.005..0.1).contains(&a), "{a}");
    assert!(b < a, "H200 {b} vs H100 {a}");
    assert_eq!(perf(&h200, "copy")[0]["estimate"]["gpu"], "H200");
    // Eight times the sectors for the same bytes: clearly slower.
    assert!(s > 2.0 * a, "strided {s} vs {a}");
    // A percentage of the copy bandwidth, its bar beside it.
    let m = perf(&h100, "copy")[0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        m.contains("% of the device-to-device copy bandwidth (likely ")
            && m.contains(" %; needs 50 %)"),
        "{m}"
    );

    // An unknown GPU is a usage error that lists the known ones.
    let o = cugrade()
        .args([
            "check",
            "--backend",
            "emu",
            "--estimate-gpu",
            "a100",
            "--rubric",
        ])
        .arg(root().join(rubric))
        .arg(fx.join("copy.cu"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("h100") && err.contains("h200"), "{err}");
}

/// Compile `src` with NVRTC and profile `kernel` over `blocks` 256-thread blocks with one
/// zeroed i32 buffer of `words` and the scalar `n`.
fn profile(
    src: &str,
    kernel: &str,
    blocks: u32,
    words: usize,
    deadline_ms: u64,
) -> Result<cugrade::estimate::model::KernelProfile, String> {
    use cugrade::backend::emu::cost::CostConfig;
    use cugrade::backend::{Arg, BufferSpec, LaunchDims, ParamValue};
    use cugrade::compile::{SourceFile, compile, options};
    use cugrade::estimate::sample::{EstimateSpec, run};
    let c = compile(
        &SourceFile {
            name: "k.cu".into(),
            text: src.into(),
        },
        &[],
        &options("sm_90", &[]),
    );
    assert!(c.ok, "{}", c.log);
    let g = cugrade::estimate::gpu::named("h100").unwrap();
    let spec = EstimateSpec {
        kernel: kernel.into(),
        dims: LaunchDims {
            grid: [blocks, 1, 1],
            block: [256, 1, 1],
            shared_bytes: 0,
        },
        args: vec![Arg::Buffer(0), Arg::Value(ParamValue::I32(words as i32))],
        buffers: vec![BufferSpec {
            bytes: words * 4,
            guard: 0,
        }],
        fills: vec![],
        symbols: vec![],
        cost: CostConfig {
            latencies: g.latencies(),
            l1_bytes: 32 << 10,
        },
        budget: 200_000,
        deadline_ms,
    };
    run(&spec, &[c.ptx.into_bytes(), vec![]])
}

#[test]
fn blocks_that_wait_for_unsampled_blocks_end_with_a_clear_error() {
    if !nvrtc() {
        return;
    }
    // Each block waits for the previous one's flag: a sample never runs the block before.
    let src = r#"
extern "C" __global__ void chain(volatile int* flags, int n)
{
    int b = blockIdx.x;
    if (threadIdx.x == 0) {
        if (b > 0) while (flags[b - 1] == 0) { }
        flags[b] = 1;
    }
}"#;
    let t = std::time::Instant::now();
    let e = profile(src, "chain", 100_000, 100_000, 1500).unwrap_err();
    assert!(e.contains("did not finish within 2 s"), "{e}");
    assert!(e.contains("another block's writes"), "{e}");
    assert!(t.elapsed().as_secs_f64() < 20.0, "{:?}", t.elapsed());
}

#[test]
fn blocks_that_take_work_from_an_atomic_counter_are_flagged() {
    if !nvrtc() {
        return;
    }
    // A work queue: each block takes items from a global counter until none are left.
    let src = r#"
extern "C" __global__ void queue(int* data, int n)
{
    __shared__ int item;
    for (;;) {
        if (threadIdx.x == 0) item = atomicAdd(&data[0], 1);
        __syncthreads();
        int i = item;
        __syncthreads();
        if (i >= n / 256 - 1) break;
        data[(i + 1) * 256 + threadIdx.x] = i;
    }
}"#;
    let p = profile(src, "queue", 4096, 1 << 16, 20_000).unwrap();
    assert!(p.communicating, "{p:?}");
    assert!(p.sampled < p.blocks);
    // An accumulation into one address (atomics whose old value is dropped) is not talk.
    let src = r#"
extern "C" __global__ void sum(int* data, int n)
{
    atomicAdd(&data[0], 1);
}"#;
    let p = profile(src, "sum", 4096, 1024, 20_000).unwrap();
    assert!(!p.communicating);
    // 4096 blocks x 256 threads on one address, from a sample.
    let ops = p.hot_atomic_ops;
    assert!((ops - 1_048_576.0).abs() / 1_048_576.0 < 0.01, "{ops}");
}

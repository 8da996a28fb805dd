//! `cugrade check --profile`: a short, explained hardware profile of the student's kernels.
//!
//! On a GPU with NVIDIA Nsight Compute (`ncu`) on PATH, each correct kernel runs once more,
//! alone, on its performance case under `ncu --csv` (in a process ncu starts: see
//! `worker::profiled`), and five metrics are read back per kernel; each comes with one sentence on what
//! its value means for this kernel. The PTX emulator's deterministic counters carry the same
//! names (`global_load_efficiency`, `shared_bank_conflicts`), so a student without a GPU reads
//! the same insight from the emulator's metric checks. docs/profile.md describes the set.

use crate::backend::Metrics;
use crate::pipeline::{KeptKernel, Options};
use crate::result::{CheckKind, Status};
use crate::rubric::LoadedRubric;
use crate::rubric::plan::{CasePlan, MilestonePlan};
use crate::submission::Submission;
use crate::worker::nsight::{NCU_TIMEOUT, NcuRow, find_ncu, kernel_job, run_ncu, tool_root};
use std::fmt::Write as _;
use std::path::Path;

/// The Nsight Compute metrics asked for (`ncu --metrics`).
pub const NCU_METRICS: &[&str] = &[
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio",
];

/// Warp stall reasons: the ncu metric's distinctive part, and what it means.
const STALLS: &[(&str, &str)] = &[
    ("long_scoreboard", "waiting for global memory"),
    ("barrier", "waiting at __syncthreads()"),
    (
        "short_scoreboard",
        "waiting for shared memory or special math",
    ),
    ("mio_throttle", "shared-memory instruction queue full"),
    ("math_pipe_throttle", "arithmetic units busy"),
];

/// One explained metric of a kernel's profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Explained {
    /// The name cugrade uses (the emulator's where it has one).
    pub name: &'static str,
    pub value: String,
    pub meaning: String,
}

/// The explained metric set of `kernel` from ncu's rows.
pub fn from_ncu(rows: &[NcuRow], kernel: &str) -> Vec<Explained> {
    let get = |m: &str| {
        rows.iter()
            .filter(|r| r.kernel == kernel && r.metric == m)
            .map(|r| r.value)
            .next()
    };
    let mut out = Vec::new();
    if let Some(v) = get(NCU_METRICS[0]) {
        out.push(Explained {
            name: "achieved_occupancy",
            value: format!("{v:.1}%"),
            meaning: if v < 40.0 {
                "few warps are resident per SM, so there is little work to hide memory latency \
                 with: check registers and shared memory per block, and the block size"
                    .into()
            } else {
                "enough warps are resident to hide latency; occupancy is not what limits this \
                 kernel"
                    .into()
            },
        });
    }
    if let Some(v) = get(NCU_METRICS[1]) {
        out.push(Explained {
            name: "dram_throughput",
            value: format!("{v:.1}% of peak"),
            meaning: if v >= 60.0 {
                "the kernel streams memory close to the GPU's bandwidth: for a memory-bound \
                 kernel this is as fast as it gets"
                    .into()
            } else {
                "memory bandwidth is far from used up: a memory-bound kernel this far from peak \
                 usually has uncoalesced accesses or too little parallelism"
                    .into()
            },
        });
    }
    if let Some(v) = get(NCU_METRICS[2]) {
        // Bytes used per 32-byte sector, as a percentage: the coalescing of global loads.
        out.push(coalescing(v));
    }
    let ld = get(NCU_METRICS[3]);
    let st = get(NCU_METRICS[4]);
    if ld.is_some() || st.is_some() {
        out.push(bank_conflicts(ld.unwrap_or(0.0) + st.unwrap_or(0.0)));
    }
    let mut stalls: Vec<(f64, &str)> = STALLS
        .iter()
        .filter_map(|(key, what)| {
            let m = NCU_METRICS
                .iter()
                .find(|m| m.contains(&format!("stalled_{key}_")))?;
            get(m).map(|v| (v, *what))
        })
        .collect();
    stalls.sort_by(|a, b| b.0.total_cmp(&a.0));
    if let Some((top, what)) = stalls.first() {
        let list: Vec<String> = stalls.iter().map(|(v, w)| format!("{w} {v:.1}")).collect();
        out.push(Explained {
            name: "warp_stalls",
            value: list.join(", "),
            meaning: format!(
                "warps spend most of their stalled cycles {what} ({top:.1} cycles per issued \
                 instruction): that is the first thing to work on"
            ),
        });
    }
    out
}

fn coalescing(pct: f64) -> Explained {
    Explained {
        name: "global_load_efficiency",
        value: format!("{pct:.1}%"),
        meaning: if pct > 100.5 {
            // The emulator counts bytes asked for against sectors fetched: lanes that read
            // (or update atomically) the same bytes count them once per lane.
            "above 100%: lanes of a warp read the same bytes (a broadcast, or atomics on one \
             address), each fetched sector serving several of them"
                .into()
        } else if pct >= 80.0 {
            "global loads are coalesced: a warp's loads use almost every byte of each 32-byte \
             sector it fetches"
                .into()
        } else {
            format!(
                "only {pct:.0}% of each fetched 32-byte sector is used: consecutive threads \
                 should read consecutive addresses (threadIdx.x on the fastest-varying index)"
            )
        },
    }
}

fn bank_conflicts(n: f64) -> Explained {
    Explained {
        name: "shared_bank_conflicts",
        value: format!("{n:.0}"),
        meaning: if n == 0.0 {
            "no shared-memory bank conflicts: every shared access of a warp is served in one pass"
                .into()
        } else {
            "shared-memory accesses of one warp hit the same bank and are serialised: pad the \
             shared array (e.g. [32][33]) or change which thread touches which word"
                .into()
        },
    }
}

/// The same names from the emulator's deterministic counters (no GPU needed), and the
/// counters only the emulator has (store coalescing, divergence, instructions).
pub fn from_emulator(m: &Metrics) -> Vec<Explained> {
    let mut out = Vec::new();
    if let Some(v) = m.by_name("global_load_efficiency") {
        out.push(coalescing(v));
    }
    if let Some(v) = m.by_name("global_store_efficiency") {
        out.push(Explained {
            name: "global_store_efficiency",
            value: format!("{v:.1}%"),
            meaning: if v >= 80.0 {
                "global stores are coalesced: a warp's stores fill the 32-byte sectors they touch"
                    .into()
            } else {
                format!(
                    "only {v:.0}% of each written 32-byte sector is used: consecutive threads \
                     should write consecutive addresses"
                )
            },
        });
    }
    if let Some(v) = m.by_name("shared_bank_conflicts") {
        out.push(bank_conflicts(v));
    }
    if let Some(v) = m.by_name("branch_divergence") {
        out.push(Explained {
            name: "branch_divergence",
            value: format!("{v:.1}%"),
            meaning: if v < 5.0 {
                "the threads of a warp almost always take the same branch".into()
            } else {
                format!(
                    "{v:.0}% of branches split a warp, which then runs both sides one after \
                     the other: let whole warps take the same path where you can"
                )
            },
        });
    }
    if m.warp_instructions > 0 {
        let per_lane = m.lane_instructions as f64 / m.warp_instructions as f64;
        out.push(Explained {
            name: "warp_instructions",
            value: format!(
                "{} ({per_lane:.1} active lanes per instruction)",
                m.warp_instructions
            ),
            meaning: if per_lane >= 28.0 {
                "nearly every instruction keeps all 32 lanes of its warp busy".into()
            } else {
                "many instructions run with idle lanes (divergence, partial warps or guards): \
                 work done by fewer threads per warp is slower than it looks"
                    .into()
            },
        });
    }
    out
}

/// Render explained metrics under a heading, one metric and its sentence per line.
pub fn render(kernel: &str, source: &str, metrics: &[Explained]) -> String {
    let mut s = format!("profile of {kernel} ({source}):\n");
    for m in metrics {
        let _ = writeln!(s, "  {:<23} {}", m.name, m.value);
        let _ = writeln!(s, "  {:<23} {}", "", m.meaning);
    }
    s
}

/// What to do without ncu.
pub const NO_NCU: &str = "Nsight Compute (ncu) is not on PATH, so no hardware profile was \
     taken. Install NVIDIA Nsight Compute (it comes with the CUDA toolkit, or as the \
     `nsight-compute` package from NVIDIA's apt repository), put `ncu` on PATH, and run \
     `cugrade check --profile` on a machine with a GPU. Without a GPU, the emulator's \
     global_load_efficiency and shared_bank_conflicts (metric checks in the report) measure the \
     same things.";

/// The profile section `check --profile` prints after the summary of result `r`. On a GPU,
/// each milestone kernel in `kept` (what grading kept: see `pipeline::Options::keep_kernels`)
/// that is correct runs once more, alone, under Nsight Compute.
pub fn section(
    r: &crate::result::GradeResult,
    rubric: &LoadedRubric,
    sub: &Submission,
    kept: &[KeptKernel],
    opts: &Options,
) -> String {
    let mut out = String::from("\n");
    if r.backend != "cuda" {
        // The emulator's counters of every kernel it graded, on the largest case it ran.
        let mut shown = 0;
        for k in kept {
            match &k.emulator {
                Some((case, mx)) => {
                    out.push_str(&render(
                        &k.kernel,
                        &format!("PTX emulator counters, case {case}"),
                        &from_emulator(mx),
                    ));
                    shown += 1;
                }
                None => {
                    let _ = writeln!(
                        out,
                        "profile of {}: no counters: the emulator ran no case of it",
                        k.kernel
                    );
                }
            }
        }
        if kept.is_empty() {
            out.push_str("profile: no kernel was run, so there is nothing to profile.\n");
        } else if shown > 0 {
            out.push_str(
                "profile: counted by the PTX emulator (no GPU: Nsight Compute needs \
                 --backend cuda); global_load_efficiency and shared_bank_conflicts carry \
                 Nsight Compute's meaning, the others are the emulator's own.\n",
            );
        }
        return out;
    }
    let Some(ncu) = find_ncu() else {
        out.push_str(&format!("profile: {NO_NCU}\n"));
        return out;
    };
    for k in kept {
        let Some(m) = r.milestones.iter().find(|m| m.id == k.milestone) else {
            continue;
        };
        let ran = m
            .checks
            .iter()
            .any(|c| c.kind == CheckKind::Correctness && c.status == Status::Pass);
        if !ran || !crate::score::nothing_wrong(&m.checks) {
            let _ = writeln!(
                out,
                "profile of {}: not profiled: the kernel is not correct yet",
                k.kernel
            );
            continue;
        }
        match profile_kernel(&ncu, rubric, sub, k, opts) {
            Ok((case, rows)) => {
                let metrics = from_ncu(&rows, &k.kernel);
                if metrics.is_empty() {
                    let _ = writeln!(
                        out,
                        "profile of {}: Nsight Compute measured no launch",
                        k.kernel
                    );
                } else {
                    out.push_str(&render(
                        &k.kernel,
                        &format!("Nsight Compute, case {case}"),
                        &metrics,
                    ));
                }
            }
            Err(e) => {
                let _ = writeln!(
                    out,
                    "profile of {}: Nsight Compute gave no metrics: {e}",
                    k.kernel
                );
            }
        }
    }
    out
}

/// The case a kernel is profiled on: its first performance check's (the size its speed is
/// graded at), else its largest correctness case.
fn profile_case(m: &MilestonePlan) -> Option<&CasePlan> {
    if let Some(c) = m.performance.first().and_then(|p| p.case.as_ref()) {
        return Some(c);
    }
    m.cases.iter().max_by_key(|case| case.elements)
}

/// Profile kernel `k` under Nsight Compute: its inputs are prepared here, as for a correctness
/// run, and one launch runs in `cugrade __profile-kernel` (`worker::profiled`), a process ncu
/// starts itself. Returns the case's name and ncu's rows.
fn profile_kernel(
    ncu: &Path,
    rubric: &LoadedRubric,
    sub: &Submission,
    k: &KeptKernel,
    opts: &Options,
) -> Result<(String, Vec<NcuRow>), String> {
    let plan = crate::pipeline::plan_for(rubric, sub);
    let m = plan
        .milestones
        .iter()
        .find(|m| m.milestone.id == k.milestone)
        .ok_or("no such milestone")?;
    let case = profile_case(m).ok_or("the milestone has no case to run")?;
    // ncu's own files (its injection libraries, its section files) must stay readable.
    let (dir, job_path) = kernel_job(
        m,
        case,
        &k.ptx,
        k.numba.as_ref(),
        opts.seed,
        opts.device,
        tool_root(ncu),
        NCU_TIMEOUT,
    )?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let args: Vec<std::ffi::OsString> = vec!["__profile-kernel".into(), job_path.into_os_string()];
    run_ncu(
        ncu,
        &exe,
        &args,
        std::slice::from_ref(&k.kernel),
        dir.path(),
        NCU_METRICS,
        opts.gpu.as_deref(),
    )
    .map(|rows| (case.name.clone(), rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::nsight::parse_ncu_csv;

    #[test]
    fn a_kernel_is_profiled_where_its_speed_is_graded() {
        let rubric = crate::rubric::load(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/rubrics/reduction.yaml"
        )))
        .unwrap();
        let plan = rubric.plan(&|_, l| l.clone());
        for m in &plan.milestones {
            let case = profile_case(m).unwrap();
            match m.performance.first() {
                Some(p) => assert_eq!(case.name, p.spec.case, "{}", m.milestone.id),
                None => {
                    // The largest correctness case.
                    let largest = m.cases.iter().all(|c| c.elements <= case.elements);
                    assert!(largest, "{}", m.milestone.id);
                }
            }
        }
    }

    /// The shape of `ncu --csv --metrics ...` output (Nsight Compute 2024/2025): progress lines,
    /// the program's own output, then one row per kernel launch and metric.
    const SAMPLE: &str = r#"==PROF== Connected to process 41877 (/work/cugrade)
==PROF== Profiling "matmul_tiled" - 0: 0%....50%....100% - 9 passes
reduction alice (cuda, NVIDIA H200, seed 1)
==PROF== Disconnected from process 41877
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","41877","cugrade","127.0.0.1","matmul_tiled","1","13","(16, 16, 1)","(64, 64, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","23.41"
"0","41877","cugrade","127.0.0.1","matmul_tiled","1","13","(16, 16, 1)","(64, 64, 1)","0","9.0","Command line profiler metrics","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","","1,048,576"
"0","41877","cugrade","127.0.0.1","matmul_tiled","1","13","(16, 16, 1)","(64, 64, 1)","0","9.0","Command line profiler metrics","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum","","0"
"0","41877","cugrade","127.0.0.1","matmul_tiled","1","13","(16, 16, 1)","(64, 64, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","87.12"
"0","41877","cugrade","127.0.0.1","matmul_tiled","1","13","(16, 16, 1)","(64, 64, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","ratio","2.31"
"0","41877","cugrade","127.0.0.1","matmul_tiled","1","13","(16, 16, 1)","(64, 64, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","ratio","0.87"
"0","41877","cugrade","127.0.0.1","matmul_tiled","1","13","(16, 16, 1)","(64, 64, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio","ratio","1.02"
"0","41877","cugrade","127.0.0.1","matmul_tiled","1","13","(16, 16, 1)","(64, 64, 1)","0","9.0","Command line profiler metrics","smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct","%","50"
"#;

    #[test]
    fn parses_ncu_csv_after_progress_and_program_output() {
        let rows = parse_ncu_csv(SAMPLE).unwrap();
        assert_eq!(rows.len(), 8);
        assert!(rows.iter().all(|r| r.kernel == "matmul_tiled"));
        let conflicts = rows
            .iter()
            .find(|r| r.metric.ends_with("op_ld.sum"))
            .unwrap();
        assert_eq!(conflicts.value, 1_048_576.0);
        assert!(parse_ncu_csv("==PROF== error: no kernels were profiled").is_err());
    }

    #[test]
    fn explains_each_metric_in_a_sentence() {
        let rows = parse_ncu_csv(SAMPLE).unwrap();
        let m = from_ncu(&rows, "matmul_tiled");
        let names: Vec<&str> = m.iter().map(|e| e.name).collect();
        assert_eq!(
            names,
            [
                "achieved_occupancy",
                "dram_throughput",
                "global_load_efficiency",
                "shared_bank_conflicts",
                "warp_stalls"
            ]
        );
        assert_eq!(m[0].value, "87.1%");
        assert!(m[2].meaning.contains("50%"), "{}", m[2].meaning);
        assert!(m[3].meaning.contains("pad"), "{}", m[3].meaning);
        assert!(m[4].meaning.contains("__syncthreads"), "{}", m[4].meaning);
        assert!(from_ncu(&rows, "other_kernel").is_empty());
        let text = render("matmul_tiled", "Nsight Compute", &m);
        assert!(text.contains("shared_bank_conflicts   1048576"), "{text}");
    }

    #[test]
    fn the_emulator_speaks_the_same_names() {
        let mx = Metrics {
            global_load_requests: 10,
            global_load_sectors: 40,
            shared_bank_conflicts: 0,
            ..Default::default()
        };
        let names: Vec<&str> = from_emulator(&mx).iter().map(|e| e.name).collect();
        assert!(names.contains(&"shared_bank_conflicts"), "{names:?}");
    }
}

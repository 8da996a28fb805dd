//! NVIDIA's tools around one kernel launch: finding `ncu` and `compute-sanitizer`, the job a
//! `cugrade __profile-kernel` process (`worker::profiled`) runs under them, and `ncu --csv`'s
//! rows. `check --profile` (`profile`) and grading's metric and GPU-sanitizer checks use them.

use super::process::{Output, Process};
use super::profiled::{Job, Launch, write_job};
use super::protocol::RunSpec;
use crate::inputs;
use crate::rubric::convention::Signature;
use crate::rubric::plan::{CasePlan, MilestonePlan};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One row of `ncu --csv` output (the default "details" page).
#[derive(Debug, Clone, PartialEq)]
pub struct NcuRow {
    pub kernel: String,
    pub metric: String,
    pub unit: String,
    pub value: f64,
}

/// Parse `ncu --csv` output. Lines before the CSV header (`==PROF==` progress, the graded
/// program's own output) are skipped; values may carry thousands separators.
pub fn parse_ncu_csv(text: &str) -> Result<Vec<NcuRow>, String> {
    let start = text
        .find("\"ID\",")
        .ok_or("no CSV header (\"ID\",...) in the ncu output")?;
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(&text.as_bytes()[start..]);
    let headers = reader.headers().map_err(|e| e.to_string())?.clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .ok_or(format!("ncu CSV has no column {name:?}"))
    };
    let (k, m, u, v) = (
        col("Kernel Name")?,
        col("Metric Name")?,
        col("Metric Unit")?,
        col("Metric Value")?,
    );
    let mut rows = Vec::new();
    for rec in reader.records() {
        let rec = rec.map_err(|e| e.to_string())?;
        let (Some(kernel), Some(metric), Some(value)) = (rec.get(k), rec.get(m), rec.get(v)) else {
            continue;
        };
        let Ok(value) = value.replace(',', "").trim().parse::<f64>() else {
            continue;
        };
        // Demangled names carry their parameter list: `vector_add(const float *, ...)`.
        let kernel = kernel
            .split('(')
            .next()
            .unwrap_or(kernel)
            .trim()
            .to_string();
        rows.push(NcuRow {
            kernel,
            metric: metric.to_string(),
            unit: rec.get(u).unwrap_or("").to_string(),
            value,
        });
    }
    Ok(rows)
}

/// Find `ncu`: on PATH, else where the CUDA toolkit and Nsight Compute install it.
pub fn find_ncu() -> Option<PathBuf> {
    find_tool("ncu")
}

/// Find an NVIDIA tool (`ncu`, `compute-sanitizer`): on PATH first, then in the CUDA
/// toolkit's and Nsight Compute's usual install folders.
pub fn find_tool(name: &str) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut dirs = on_path;
    for pattern in [
        "/usr/local/cuda/bin",
        "/usr/local/cuda/compute-sanitizer",
        "/opt/nvidia/nsight-compute",
        "/usr/local",
    ] {
        let p = Path::new(pattern);
        dirs.push(p.to_path_buf());
        // Versioned installs: /usr/local/cuda-13.0/bin, /opt/nvidia/nsight-compute/2025.3.1/.
        if let Ok(entries) = std::fs::read_dir(p) {
            let mut sub: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|d| {
                    let n = d.file_name().map(|n| n.to_string_lossy().into_owned());
                    n.is_some_and(|n| {
                        n.starts_with("cuda")
                            || n.starts_with("NVIDIA-Nsight-Compute")
                            || n.chars().next().is_some_and(|c| c.is_ascii_digit())
                    })
                })
                .collect();
            sub.sort();
            for d in sub.into_iter().rev() {
                dirs.push(d.join("bin"));
                dirs.push(d.join("compute-sanitizer"));
                dirs.push(d);
            }
        }
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

/// How long one profiled kernel may take, Nsight Compute's replay passes included.
pub const NCU_TIMEOUT: Duration = Duration::from_secs(180);

/// One launch of the milestone's kernel (named `kernel` in its module) on `case` with the
/// inputs of the case's first trial (what the GPU's correctness run got), with the
/// submission's launch: its spec and its buffers' allocations.
pub fn case_launch(
    plan: &MilestonePlan,
    case: &CasePlan,
    kernel: &str,
    numba: Option<&Signature>,
    seed: u64,
    deadline: Duration,
) -> Result<(RunSpec, Vec<Vec<u8>>), String> {
    let contract = &plan.contract;
    let inv = case
        .args()
        .and_then(|a| inputs::generate(a, inputs::trial_seed(seed, &case.name, 0)))?;
    let inv = match numba {
        Some(sig) => inputs::numba_invocation(&inv, contract, sig)?,
        None => inv,
    };
    let dims = case.launch.clone()?;
    // The milestone's own kernel runs with its later launches (a multi-kernel milestone).
    let then = if kernel == plan.kernel {
        plan.then(case)?
    } else {
        vec![]
    };
    let spec = RunSpec {
        kernel: kernel.to_string(),
        dims,
        then,
        args: inv.args.clone(),
        buffers: inv.specs(),
        symbols: inv.symbols.clone(),
        deadline_ms: deadline.as_millis() as u64,
    };
    Ok((spec, inv.allocations()))
}

/// A job file for `cugrade __profile-kernel` (`worker::profiled`): one launch of the
/// milestone's kernel from `ptx` (a Numba kernel with its `numba` signature) on `case`
/// ([`case_launch`]). The job may read `extra_read` (the tool's own files) besides the
/// system's. Returns the temporary directory (also the run's TMPDIR) and the job's path in it.
#[allow(clippy::too_many_arguments)]
pub fn kernel_job(
    plan: &MilestonePlan,
    case: &CasePlan,
    ptx: &str,
    numba: Option<&Signature>,
    seed: u64,
    device: usize,
    extra_read: Vec<PathBuf>,
    deadline: Duration,
) -> Result<(tempfile::TempDir, PathBuf), String> {
    let (spec, allocations) = case_launch(plan, case, &plan.kernel, numba, seed, deadline)?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let job_path = dir.path().join("job.bin");
    let job = Job {
        device,
        modules: 1,
        launches: vec![Launch { module: 0, spec }],
        extra_read,
        progress: None,
    };
    write_job(&job_path, &job, &[ptx], &[allocations])
        .map_err(|e| format!("cannot write the profile job: {e}"))?;
    Ok((dir, job_path))
}

/// The directory a tool's executable lives in (its injection libraries are beside it).
pub fn tool_root(tool: &Path) -> Vec<PathBuf> {
    std::fs::canonicalize(tool)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .into_iter()
        .collect()
}

/// Comma-separated Nsight Compute metrics to measure besides [`NCU_METRICS`], and a directory
/// to keep ncu's raw CSV in: for calibration runs only (the speed estimate's benchmark,
/// ci/gpu-estimate-bench.sh; docs/estimate.md). Reports show the usual set either way.
pub const NCU_EXTRA_ENV: &str = "CUGRADE_NCU_EXTRA_METRICS";
pub const NCU_KEEP_ENV: &str = "CUGRADE_NCU_KEEP";

/// The `--metrics` argument: `metrics` and any extra ones ([`NCU_EXTRA_ENV`]).
fn metric_list(metrics: &[&str]) -> String {
    let mut list: Vec<String> = metrics.iter().map(|m| m.to_string()).collect();
    let extra = std::env::var(NCU_EXTRA_ENV).unwrap_or_default();
    for m in extra.split(',').map(str::trim) {
        let valid = !m.is_empty()
            && m.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        if valid && !list.iter().any(|x| x == m) {
            list.push(m.to_string());
        }
    }
    list.join(",")
}

/// What one run of an NVIDIA tool left.
pub struct ToolRun {
    /// Its report: the log file it wrote (empty when it wrote none).
    pub log: String,
    /// What it (and the program under it) printed on stderr: the first MiB, or nothing when
    /// that is not UTF-8.
    pub stderr: String,
    pub status: std::process::ExitStatus,
    /// Its deadline ended it (SIGKILL to its process group, the program under it included).
    pub timed_out: bool,
}

/// Run NVIDIA's `tool` (`ncu`, `compute-sanitizer`) with `args` (the tool's own, then the
/// program and its arguments) until it ends or `deadline` passes, with `dir` as its TMPDIR,
/// and read the report it wrote to `log`. The program's stdout goes nowhere and the report
/// goes to its own file, so that nothing the kernel prints can pass for a line of it. The two
/// tools differ in their arguments and in how their reports are read, nothing else.
pub fn run_tool(
    tool: &Path,
    args: Vec<std::ffi::OsString>,
    dir: &Path,
    log: &Path,
    deadline: Duration,
) -> Result<ToolRun, String> {
    let ended = Process::new(tool)
        .args(args)
        .env("TMPDIR", dir)
        .stdout(Output::Null)
        .stderr(Output::Capture)
        .cap(1 << 20)
        .deadline(deadline)
        .grace(Duration::ZERO)
        .run()
        .map_err(|e| format!("cannot run {}: {e}", tool.display()))?;
    Ok(ToolRun {
        log: std::fs::read_to_string(log).unwrap_or_default(),
        stderr: String::from_utf8(ended.stderr.bytes).unwrap_or_default(),
        status: ended.status,
        timed_out: ended.timed_out,
    })
}

/// Run `exe args` under ncu and return the rows it measured for `kernels` (one launch each),
/// holding GPU `gpu`'s timing lock (`measure::lock`).
/// The program's own output is discarded; ncu writes its CSV to a log file in `dir` (also the
/// run's TMPDIR), so that nothing the kernel prints can pass for a metric. Killed after
/// [`NCU_TIMEOUT`].
pub fn run_ncu(
    ncu: &Path,
    exe: &Path,
    args: &[std::ffi::OsString],
    kernels: &[String],
    dir: &Path,
    metrics: &[&str],
    gpu: Option<&str>,
) -> Result<Vec<NcuRow>, String> {
    // The GPU's timing lock, exclusively: the counters are one session's at a time (a second
    // ncu on the GPU fails with no rows), and ncu's replays would disturb timed sections.
    let _held = match gpu.map(|k| crate::measure::lock::timing(k, "ncu")) {
        Some(Err(e)) => return Err(format!("cannot take the GPU's timing lock: {e}")),
        Some(Ok(l)) => Some(l),
        None => None,
    };
    let log = dir.join("ncu.csv");
    let filter = format!("regex:^({})$", kernels.join("|"));
    let mut tool_args: Vec<std::ffi::OsString> = vec![
        "--csv".into(),
        "--log-file".into(),
        log.clone().into(),
        "--kernel-name".into(),
        filter.into(),
        "--launch-count".into(),
        kernels.len().to_string().into(),
        "--metrics".into(),
        metric_list(metrics).into(),
        exe.into(),
    ];
    tool_args.extend(args.iter().cloned());
    let run = run_tool(ncu, tool_args, dir, &log, NCU_TIMEOUT)?;
    if run.timed_out {
        return Err(format!(
            "Nsight Compute did not finish within {} s",
            NCU_TIMEOUT.as_secs()
        ));
    }
    let (status, err, text) = (run.status, run.stderr, run.log);
    if let Some(keep) = std::env::var_os(NCU_KEEP_ENV) {
        // Calibration runs keep ncu's raw rows (see `metric_list`).
        let keep = Path::new(&keep);
        let _ = std::fs::create_dir_all(keep);
        let _ = std::fs::write(keep.join(format!("{}.csv", kernels.join("+"))), &text);
    }
    parse_ncu_csv(&text).map_err(|e| {
        let tail: String = err
            .trim()
            .chars()
            .rev()
            .take(600)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("{e} (ncu exit {:?}: {tail})", status.code())
    })
}

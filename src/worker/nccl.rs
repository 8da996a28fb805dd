//! NCCL's all-reduce timed in a process of its own: `cugrade __nccl-time JSON`, started by the
//! parent under the rank set's GPU timing locks right after the student's timed launches.
//!
//! Why not in the student's rank worker: NCCL needs what the worker's sandbox takes away
//! (sockets for its bootstrap, even in one process, shared memory, the machine's topology under
//! `/sys`). This process runs no student code: cugrade's own host code and NCCL, on buffers of
//! its own of the same size (the values do not change NCCL's speed). Its environment keeps
//! NVLink multicast off (`NCCL_NVLS_ENABLE=0`), and it has a deadline like any child.

use crate::backend::ranks::RankSet;
use crate::worker::process::Process;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// What to time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NcclJob {
    pub gpus: Vec<usize>,
    /// Float32 elements a rank.
    pub count: usize,
    pub reps: usize,
}

/// What it found.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NcclTimes {
    /// Each repetition's seconds (the slowest rank's).
    pub seconds: Vec<f64>,
    /// Which NCCL (version and file).
    pub version: Option<String>,
    /// Why it could not be timed, said plainly.
    pub error: Option<String>,
}

/// `cugrade __nccl-time JSON`: time NCCL, print `NcclTimes` as JSON, exit 0.
pub fn main(job: &str) -> i32 {
    let out = match serde_json::from_str::<NcclJob>(job) {
        Ok(j) => time(&j),
        Err(e) => NcclTimes {
            error: Some(format!("bad job: {e}")),
            ..Default::default()
        },
    };
    println!("{}", serde_json::to_string(&out).unwrap_or_default());
    0
}

fn time(job: &NcclJob) -> NcclTimes {
    let mut out = NcclTimes::default();
    let run = || -> Result<(Vec<f64>, Option<String>), crate::backend::BackendError> {
        let mut set = crate::backend::cuda::ranks::CudaRanks::new(&job.gpus)?;
        let bytes = 4 * job.count.max(1);
        let mut send = Vec::new();
        let mut recv = Vec::new();
        for r in 0..job.gpus.len() {
            let s = set.alloc(r, bytes)?;
            set.write(r, s, &vec![0u8; bytes])?;
            send.push(s);
            recv.push(set.alloc(r, bytes)?);
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        let timer = set.timer().ok_or_else(|| {
            crate::backend::BackendError::Other("the GPUs cannot be timed".into())
        })?;
        // One all-reduce first, untimed: NCCL sets up its channels on the first call.
        timer.nccl_allreduce(&send, &recv, job.count, 1, deadline)?;
        let t = timer.nccl_allreduce(&send, &recv, job.count, job.reps, deadline)?;
        Ok((t, timer.nccl_version()))
    };
    match run() {
        Ok((t, v)) => {
            out.seconds = t;
            out.version = v;
        }
        Err(e) => out.error = Some(e.to_string()),
    }
    out
}

/// Time NCCL on `job`'s GPUs from the parent: the child under the GPUs' timing locks (`locks`,
/// taken in one global order), with a deadline.
pub fn time_nccl(job: &NcclJob, locks: &[String]) -> NcclTimes {
    let failed = |e: String| NcclTimes {
        error: Some(e),
        ..Default::default()
    };
    let exe = match super::parent::worker_exe() {
        Ok(p) => p,
        Err(e) => return failed(e),
    };
    let json = match serde_json::to_string(job) {
        Ok(j) => j,
        Err(e) => return failed(e.to_string()),
    };
    let mut sorted: Vec<&String> = locks.iter().collect();
    sorted.sort();
    sorted.dedup();
    let mut held = Vec::new();
    for k in sorted {
        match crate::measure::lock::timing(k, "nccl") {
            Ok(l) => held.push(l),
            Err(e) => return failed(format!("cannot take GPU {k}'s timing lock: {e}")),
        }
    }
    let (k, v) = crate::backend::cuda::NVLS_OFF;
    let ended = Process::new(exe)
        .arg("__nccl-time")
        .arg(json)
        .env(k, v)
        .capture()
        .deadline(Duration::from_secs(180))
        .run();
    drop(held);
    match ended {
        Err(e) => failed(format!("cannot start NCCL's timing: {e}")),
        Ok(e) if e.timed_out => failed("NCCL's timing ran past 180 s and was stopped".into()),
        Ok(e) => {
            let text = e.stdout.text();
            let line = text
                .lines()
                .rev()
                .find(|l| l.starts_with('{'))
                .unwrap_or("");
            serde_json::from_str(line).unwrap_or_else(|_| {
                failed(format!(
                    "NCCL's timing ended ({}) without an answer: {}",
                    e.status,
                    e.stderr.text().lines().last().unwrap_or("")
                ))
            })
        }
    }
}

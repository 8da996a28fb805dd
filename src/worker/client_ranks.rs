//! The parent's side of a rank worker (`worker::ranks`): one launch on every rank, and a rank
//! set's timed section under every rank's GPU lock, always taken in one global order.

use super::client::{Client, RunError};
use super::protocol::{RanksMeasure, RanksSpec, RanksTimed, Request, Response};
use crate::measure::lock;
use std::time::Duration;

/// What a launch on every rank gave back, as the parent validated it.
pub struct RanRanks {
    /// Every rank's whole allocations (guards included), blob order (`RanksSpec::blob`).
    pub allocations: Vec<Vec<u8>>,
    /// One report a rank.
    pub reports: Vec<crate::backend::LaunchReport>,
}

/// Shared locks on every GPU of `keys`, always taken in one global order (sorted) so that two
/// graders that want overlapping sets cannot deadlock.
fn shared_all(keys: &[String], what: &'static str) -> Vec<lock::GpuLock> {
    let mut sorted: Vec<&String> = keys.iter().collect();
    sorted.sort();
    sorted.dedup();
    sorted
        .into_iter()
        .filter_map(|k| lock::shared(k, what).ok())
        .collect()
}

impl Client {
    /// Launch on every rank of a rank worker and read every buffer back. `gpus`: the lock keys
    /// of its GPUs (none on the emulator).
    pub fn run_ranks(
        &mut self,
        spec: RanksSpec,
        allocations: &[Vec<u8>],
        limit: Duration,
        gpus: &[String],
    ) -> Result<RanRanks, (RunError, Vec<crate::backend::LaunchReport>)> {
        let sizes: Vec<usize> = allocations.iter().map(Vec::len).collect();
        let refs: Vec<&[u8]> = allocations.iter().map(Vec::as_slice).collect();
        let bytes: usize = sizes.iter().sum();
        let slack = Duration::from_secs(5) + Duration::from_millis((bytes / 100_000) as u64);
        let _shared = shared_all(gpus, "run");
        match self.call(&Request::RunRanks(Box::new(spec)), &refs, limit + slack) {
            Ok((
                Response::RanRanks {
                    error: None,
                    reports,
                },
                blobs,
            )) => {
                if blobs.len() != sizes.len()
                    || blobs.iter().zip(&sizes).any(|(b, &n)| b.len() != n)
                {
                    return Err((
                        RunError::Worker(super::parent::WorkerFailure::Protocol(
                            "returned buffers do not match what was sent".into(),
                        )),
                        Vec::new(),
                    ));
                }
                Ok(RanRanks {
                    allocations: blobs,
                    reports,
                })
            }
            Ok((
                Response::RanRanks {
                    error: Some(e),
                    reports,
                },
                _,
            )) => Err((RunError::Backend(e, Box::default()), reports)),
            Ok((other, _)) => Err((RunError::Worker(self.unexpected(&other)), Vec::new())),
            Err(f) => Err((RunError::Worker(f), Vec::new())),
        }
    }

    /// A rank set's timed section: set up under every GPU's shared lock, then every GPU's
    /// timing lock (in one global order), `Go`, the timed launches and NCCL's.
    pub fn measure_ranks(
        &mut self,
        m: RanksMeasure,
        allocations: &[Vec<u8>],
        timeout: Duration,
        gpus: &[String],
    ) -> Result<(RanksTimed, Vec<Vec<u8>>), String> {
        let refs: Vec<&[u8]> = allocations.iter().map(Vec::as_slice).collect();
        let staged = {
            let _shared = shared_all(gpus, "setup");
            self.call(&Request::MeasureRanks(Box::new(m)), &refs, timeout)
        };
        let answer = match staged {
            Ok((Response::Staged, _)) => {
                let mut sorted: Vec<&String> = gpus.iter().collect();
                sorted.sort();
                sorted.dedup();
                let mut held = Vec::new();
                for k in sorted {
                    match lock::timing(k, "timed") {
                        Ok(l) => held.push(l),
                        Err(e) => {
                            self.worker.kill();
                            return Err(format!("cannot take GPU {k}'s timing lock: {e}"));
                        }
                    }
                }
                let answer = self.call(&Request::Go, &[], timeout);
                drop(held);
                answer
            }
            other => other,
        };
        match answer {
            Ok((Response::TimedRanks(t), blobs)) => Ok((*t, blobs)),
            Ok((other, _)) => Err(self.unexpected(&other).to_string()),
            Err(f) => Err(f.to_string()),
        }
    }
}

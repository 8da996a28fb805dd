//! A rank worker: the worker side of a multi-GPU lab (`backend::ranks`). It holds a rank set
//! instead of one backend, and answers `RunRanks` and `MeasureRanks`: every rank's buffers
//! allocated on that rank's device, pointer tables of every rank's buffer written into each
//! rank's memory, the kernel launched on every rank at once, every buffer read back.
//!
//! As for one device, the parent generates every input and computes every verdict from the
//! raw bytes that come back; guard regions around every buffer (where the set wants them) show
//! a write past a peer's buffer.

use super::protocol::{RankArg, RanksMeasure, RanksSpec, RanksTimed, Request, Response};
use crate::backend::ranks::{RankRange, RankSet};
use crate::backend::{BackendError, BackendKind, ParamValue};
use std::time::{Duration, Instant};

/// A rank set for `kind` on `gpus` (emulated: as many devices as `gpus` names).
pub(super) fn make_rank_set(kind: BackendKind, gpus: &[usize]) -> Result<Box<dyn RankSet>, String> {
    match kind {
        BackendKind::Cuda => crate::backend::cuda::ranks::CudaRanks::new(gpus)
            .map(|s| Box::new(s) as Box<dyn RankSet>)
            .map_err(|e| e.to_string()),
        BackendKind::Emu => crate::backend::emu::ranks::EmuRanks::new(gpus.len())
            .map(|s| Box::new(s) as Box<dyn RankSet>)
            .map_err(|e| e.to_string()),
    }
}

/// An answer, its blobs, and whether the worker ends after it (as `child`'s).
type Served = (Response, Vec<Vec<u8>>, bool);

/// A `Failed` answer that leaves the worker running.
fn failed(message: &str) -> Served {
    (
        Response::Failed {
            message: message.to_string(),
        },
        vec![],
        false,
    )
}

/// Answer one request of a rank worker: the module on every rank, a kernel's facts, a launch
/// on every rank, a timed section.
pub(super) fn serve(
    set: &mut dyn RankSet,
    req: Request,
    blobs: Vec<Vec<u8>>,
    gate: &mut dyn FnMut() -> Result<(), BackendError>,
) -> Served {
    match req {
        Request::Load => {
            let ptx = blobs
                .first()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .unwrap_or_default();
            (
                Response::Loaded {
                    error: set.load_module(&ptx).err(),
                },
                vec![],
                false,
            )
        }
        Request::KernelInfo { kernel } => (
            Response::KernelInfo(set.kernel_info(&kernel)),
            vec![],
            false,
        ),
        Request::RunRanks(spec) => serve_run(set, &spec, blobs),
        Request::MeasureRanks(m) => serve_measure(set, &m, &blobs, gate),
        Request::Go => failed("go without a measurement in progress"),
        _ => failed("a rank worker loads modules and runs them on every rank, nothing else"),
    }
}

/// Where `set_up` put every rank's buffers, and each rank's parameters.
struct Placed {
    /// Each allocation's address, `[rank][buffer]`.
    allocs: Vec<Vec<u64>>,
    /// The address the kernel gets for each buffer (past its guard), `[rank][buffer]`.
    payload: Vec<Vec<u64>>,
    params: Vec<Vec<ParamValue>>,
}

impl Placed {
    /// The payload ranges of buffers `which` on every rank.
    fn ranges(&self, spec: &RanksSpec, which: &[usize]) -> Vec<RankRange> {
        let mut out = Vec::new();
        for (r, p) in self.payload.iter().enumerate() {
            for &i in which {
                if let (Some(&a), Some(s)) = (p.get(i), spec.buffers.get(i)) {
                    out.push((r, a, s.bytes));
                }
            }
        }
        out
    }
}

/// Every rank's buffers allocated and filled, pointer tables written, each rank's parameters.
fn set_up(
    set: &mut dyn RankSet,
    spec: &RanksSpec,
    blobs: &[Vec<u8>],
) -> Result<Placed, BackendError> {
    let n = set.ranks();
    if spec.ranks != n
        || blobs.len() != n * spec.buffers.len()
        || (0..n).any(|r| {
            spec.buffers
                .iter()
                .enumerate()
                .any(|(i, s)| blobs[spec.blob(r, i)].len() != s.total())
        })
    {
        return Err(BackendError::Other(
            "request buffers do not match their specs".into(),
        ));
    }
    set.free_all()?;
    let guarded = set.wants_guards();
    let mut allocs = vec![Vec::new(); n];
    let mut payload = vec![Vec::new(); n];
    for (r, (a_r, p_r)) in allocs.iter_mut().zip(&mut payload).enumerate() {
        for (i, s) in spec.buffers.iter().enumerate() {
            let blob = &blobs[spec.blob(r, i)];
            let (a, data, at) = if guarded {
                let a = set.alloc(r, s.total())?;
                (a, &blob[..], a + s.guard as u64)
            } else {
                let a = set.alloc(r, s.bytes)?;
                (a, &blob[s.guard..s.guard + s.bytes], a)
            };
            set.write(r, a, data)?;
            a_r.push(a);
            p_r.push(at);
        }
    }
    let mut params = vec![Vec::new(); n];
    for arg in &spec.args {
        for (r, p) in params.iter_mut().enumerate() {
            let v = match arg {
                RankArg::Own(i) => ParamValue::Ptr(*buffer(&payload[r], *i)?),
                RankArg::Table(i) => {
                    let mut table = Vec::with_capacity(8 * n);
                    for peer in &payload {
                        table.extend_from_slice(&buffer(peer, *i)?.to_le_bytes());
                    }
                    let t = set.alloc(r, table.len())?;
                    set.write(r, t, &table)?;
                    ParamValue::Ptr(t)
                }
                RankArg::Value(v) => *v,
                RankArg::PerRank(vs) => *vs
                    .get(r)
                    .ok_or_else(|| BackendError::Other(format!("no value for rank {r}")))?,
            };
            p.push(v);
        }
    }
    Ok(Placed {
        allocs,
        payload,
        params,
    })
}

fn buffer(addrs: &[u64], i: usize) -> Result<&u64, BackendError> {
    addrs
        .get(i)
        .ok_or_else(|| BackendError::Other(format!("no buffer {i}")))
}

/// Every rank's buffers, whole allocations as sent (guards included: where the set keeps no
/// guards, the sent guard bytes stand in for them).
fn read_back(
    set: &mut dyn RankSet,
    spec: &RanksSpec,
    allocs: &[Vec<u64>],
    blobs: &[Vec<u8>],
) -> Result<Vec<Vec<u8>>, BackendError> {
    let guarded = set.wants_guards();
    let mut out = Vec::with_capacity(blobs.len());
    for (r, a_r) in allocs.iter().enumerate() {
        for (i, (s, &a)) in spec.buffers.iter().zip(a_r).enumerate() {
            if guarded {
                out.push(set.read(r, a, s.total())?);
            } else {
                let mut whole = blobs[spec.blob(r, i)].clone();
                let data = set.read(r, a, s.bytes)?;
                whole[s.guard..s.guard + s.bytes].copy_from_slice(&data);
                out.push(whole);
            }
        }
    }
    Ok(out)
}

/// `RunRanks`: set up, launch on every rank, read back. A fault or a timeout ends the worker
/// (a GPU context that faulted is unusable, and a hung kernel may still run).
pub(super) fn serve_run(set: &mut dyn RankSet, spec: &RanksSpec, blobs: Vec<Vec<u8>>) -> Served {
    let deadline = Instant::now() + Duration::from_millis(spec.deadline_ms);
    let placed = match set_up(set, spec, &blobs) {
        Ok(x) => x,
        Err(e) => return failed_run(e, Vec::new()),
    };
    let reports = match set.launch_all(&spec.kernel, spec.dims, &placed.params, deadline) {
        Ok(r) => r,
        // Where each rank's threads were when the deadline passed, for the timeout's finding.
        Err(e) => {
            let reports = set.failed_launch_report();
            return failed_run(e, reports);
        }
    };
    match read_back(set, spec, &placed.allocs, &blobs) {
        Ok(bufs) => (
            Response::RanRanks {
                error: None,
                reports,
            },
            bufs,
            false,
        ),
        Err(e) => failed_run(e, reports),
    }
}

fn failed_run(e: BackendError, reports: Vec<crate::backend::LaunchReport>) -> Served {
    let fatal = matches!(e, BackendError::Fault(_) | BackendError::Timeout(_));
    (
        Response::RanRanks {
            error: Some(e),
            reports,
        },
        vec![],
        fatal,
    )
}

/// `MeasureRanks`: set up, tell the parent (`gate`: `Staged`, then its `Go` once it holds
/// every rank's GPU timing lock), time the student's launches and NCCL's all-reduce.
pub(super) fn serve_measure(
    set: &mut dyn RankSet,
    m: &RanksMeasure,
    blobs: &[Vec<u8>],
    gate: &mut dyn FnMut() -> Result<(), BackendError>,
) -> Served {
    let mut timed = RanksTimed::default();
    let mut last = Vec::new();
    let fatal = match measure(set, m, blobs, gate, &mut timed, &mut last) {
        Ok(()) => false,
        Err(e) => {
            let fatal = matches!(e, BackendError::Fault(_) | BackendError::Timeout(_));
            timed.error = Some(e);
            fatal
        }
    };
    if !fatal {
        let _ = set.free_all();
    }
    (Response::TimedRanks(Box::new(timed)), last, fatal)
}

fn measure(
    set: &mut dyn RankSet,
    m: &RanksMeasure,
    blobs: &[Vec<u8>],
    gate: &mut dyn FnMut() -> Result<(), BackendError>,
    timed: &mut RanksTimed,
    last: &mut Vec<Vec<u8>>,
) -> Result<(), BackendError> {
    let spec = &m.run;
    let placed = set_up(set, spec, blobs)?;
    let zero = placed.ranges(spec, &m.zero);
    let restore = placed.ranges(spec, &m.restore);
    gate()?;
    // The deadline counts from the parent's go: waiting for the timing locks is not the
    // kernel's time.
    let deadline = Instant::now() + Duration::from_millis(spec.deadline_ms);
    let timer = set
        .timer()
        .ok_or_else(|| BackendError::Other("this rank set cannot time kernels".into()))?;
    timed.devices = timer.facts()?;
    timed.student_s = timer.time_all(
        &spec.kernel,
        spec.dims,
        &placed.params,
        &zero,
        &restore,
        m.reps,
        deadline,
    )?;
    // The last timed launch's buffers, before NCCL writes its own results over them.
    *last = read_back(set, spec, &placed.allocs, blobs)?;
    Ok(())
}

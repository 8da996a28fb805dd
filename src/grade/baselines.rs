//! Baselines a speed is compared with: the CPU implementation, the reference kernel, cuBLAS,
//! or the device's copy bandwidth.

use super::*;
use crate::inputs::Invocation;
use crate::rubric::schema::{Against, Case};
use crate::rubric::{self, case_vars};
use crate::worker::protocol::Request;
use std::collections::HashMap;
use std::time::{Duration, Instant};

impl MilestoneRun<'_> {
    /// The baseline: (value, unit, words). For `x` units `value` is a time in ms (ratio =
    /// value / kernel ms); for `%` it is bytes moved and the copy bandwidth.
    pub(super) fn baseline(
        &mut self,
        against: &Against,
        case: &Case,
        inv: &Invocation,
        reps: u32,
        limit: Duration,
    ) -> Result<(f64, &'static str, String), String> {
        let key = format!("{against:?}/{}", case.name);
        let contract = self.rubric.contract(&self.m.contract).clone();
        match against {
            Against::Cpu | Against::CpuParallel => {
                let threads = if matches!(against, Against::Cpu) {
                    crate::baseline::Threads::Single
                } else {
                    crate::baseline::Threads::Parallel
                };
                let name = contract.cpu.clone().ok_or("no CPU implementation")?;
                let ms = cached(&mut self.reference.baselines, &key, || {
                    cpu_time(&name, inv, case, threads)
                })?;
                let label = if threads == crate::baseline::Threads::Single {
                    "single-threaded CPU"
                } else {
                    "multi-threaded CPU"
                };
                Ok((ms, "x", format!("faster than the {label} ({ms:.3} ms)")))
            }
            Against::Reference(k) => {
                let dims = rubric::eval_launch(&contract.launch, &case_vars(case))?;
                let k = k.clone();
                let reference = &mut *self.reference;
                let ms = match reference.baselines.get(&key) {
                    Some(v) => v.clone(),
                    None => {
                        let v = reference.time(&k, inv, dims, reps, limit * (reps + 4));
                        reference.baselines.insert(key.clone(), v.clone());
                        v
                    }
                }?;
                Ok((
                    ms,
                    "x",
                    format!("faster than the reference `{k}` ({ms:.4} ms)"),
                ))
            }
            Against::Cublas => {
                let g = |v: &str| case.vars.get(v).copied().unwrap_or(0).max(1) as usize;
                let req = Request::Sgemm {
                    m: g("M"),
                    n: g("N"),
                    k: g("K"),
                    reps,
                };
                let ms = match self.reference.baselines.get(&key) {
                    Some(v) => v.clone(),
                    None => {
                        let v = self
                            .reference
                            .measure(req, limit * (reps + 4) + Duration::from_secs(30));
                        self.reference.baselines.insert(key.clone(), v.clone());
                        v
                    }
                }?;
                Ok((ms, "x", format!("of cuBLAS SGEMM's speed ({ms:.4} ms)")))
            }
            Against::CopyBandwidth { bytes } => {
                let b = rubric::expr::Expression::parse(&bytes.source(), rubric::expr::Kind::Int)?
                    .eval_int(&case_vars(case))?
                    .max(1) as f64;
                let copy_bytes = (b as usize / 2).clamp(1 << 20, 1 << 30);
                let gbs = match self.reference.baselines.get("copy_bandwidth") {
                    Some(v) => v.clone(),
                    None => {
                        let v = self.reference.measure(
                            Request::CopyBandwidth { bytes: copy_bytes },
                            Duration::from_secs(60),
                        );
                        self.reference
                            .baselines
                            .insert("copy_bandwidth".into(), v.clone());
                        v
                    }
                }?;
                // measured % = 100 * (bytes / time) / bandwidth: pass bytes/bandwidth as "value".
                Ok((
                    b / gbs,
                    "%",
                    format!("of the device-to-device copy bandwidth ({gbs:.0} GB/s)"),
                ))
            }
        }
    }
}

pub(super) fn cached(
    map: &mut HashMap<String, Result<f64, String>>,
    key: &str,
    f: impl FnOnce() -> Result<f64, String>,
) -> Result<f64, String> {
    if let Some(v) = map.get(key) {
        return v.clone();
    }
    let v = f();
    map.insert(key.to_string(), v.clone());
    v
}

/// Time a CPU implementation on the invocation's inputs: median of several runs.
pub fn cpu_time(
    name: &str,
    inv: &Invocation,
    case: &Case,
    threads: crate::baseline::Threads,
) -> Result<f64, String> {
    let f = crate::baseline::lookup(name)
        .ok_or_else(|| format!("unknown CPU implementation {name}"))?;
    let args = host_args(inv, case);
    let mut times = vec![];
    let deadline = Instant::now() + Duration::from_secs(30);
    for _ in 0..7 {
        let mut a = args.clone();
        let t = Instant::now();
        f(&mut a, threads).map_err(|e| e.to_string())?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        if Instant::now() > deadline && times.len() >= 3 {
            break;
        }
    }
    Ok(crate::measure::median(&times))
}

/// The invocation's buffers and scalars as a CPU implementation sees them.
pub fn host_args(inv: &Invocation, case: &Case) -> crate::baseline::HostArgs {
    use crate::baseline::HostBuffer;
    use crate::rubric::schema::ScalarType as T;
    let mut a = crate::baseline::HostArgs::default();
    for b in &inv.buffers {
        let d = &b.data;
        let hb = match b.elem {
            T::F32 => HostBuffer::F32(
                d.chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default()))
                    .collect(),
            ),
            T::F64 => HostBuffer::F64(
                d.chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()))
                    .collect(),
            ),
            T::I32 => HostBuffer::I32(
                d.chunks_exact(4)
                    .map(|c| i32::from_le_bytes(c.try_into().unwrap_or_default()))
                    .collect(),
            ),
            T::U32 => HostBuffer::U32(
                d.chunks_exact(4)
                    .map(|c| u32::from_le_bytes(c.try_into().unwrap_or_default()))
                    .collect(),
            ),
            T::I64 => HostBuffer::I64(
                d.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default()))
                    .collect(),
            ),
            T::U64 => HostBuffer::U64(
                d.chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
                    .collect(),
            ),
        };
        a.buffers.insert(b.name.clone(), hb);
    }
    for (k, v) in &case.vars {
        a.scalars.insert(k.clone(), *v as f64);
    }
    for (k, v) in &inv.scalars {
        a.scalars.insert(k.clone(), *v);
    }
    a
}

//! A rank set on GPUs (`backend::ranks`): one rank a GPU, each with its primary context, its
//! own copy of the module and a stream of its own. Peer access is enabled between these GPUs
//! only (the worker opens no other), so a student's kernel reaches exactly the memory of the
//! ranks it is graded with.
//!
//! Launches are asynchronous on every rank's stream and waited for by polling their events
//! against the deadline, so a kernel that spins on a flag its peer never sets cannot block the
//! worker: the parent then ends the worker's process, which ends its kernels on every GPU.

use super::nccl::Nccl;
use super::{capability, classify, device_count, launch_on, set_limit};
use crate::backend::ranks::{RankRange, RankSet, RankTimer};
use crate::backend::{
    BackendError, BackendKind, DeviceFacts, KernelInfo, LaunchDims, LaunchReport, ParamValue,
};
use cudarc::driver::result as cu;
use cudarc::driver::sys;
use std::ffi::{CString, c_void};
use std::time::{Duration, Instant};

struct Rank {
    ordinal: usize,
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
    name: String,
    cc: (i32, i32),
    stream: sys::CUstream,
    module: Option<sys::CUmodule>,
    allocs: Vec<sys::CUdeviceptr>,
    /// The module's `__device__` globals: (address, device copy of the value at load, bytes),
    /// put back before every timed launch so that no launch keeps state for a later one.
    globals: Vec<(sys::CUdeviceptr, sys::CUdeviceptr, usize)>,
}

/// N GPUs with peer access between them (see the module's documentation).
pub struct CudaRanks {
    ranks: Vec<Rank>,
    nccl: Option<Nccl>,
}

impl CudaRanks {
    /// Open the GPUs `ordinals` (one rank each, in this order) and enable peer access between
    /// every pair; an error says which pair cannot reach each other.
    pub fn new(ordinals: &[usize]) -> Result<CudaRanks, BackendError> {
        let count = device_count().map_err(BackendError::Other)?;
        let mut ranks = Vec::new();
        for (i, &ordinal) in ordinals.iter().enumerate() {
            if ordinal >= count {
                return Err(BackendError::Other(format!(
                    "no CUDA device {ordinal} (found {count})"
                )));
            }
            if ordinals[..i].contains(&ordinal) {
                return Err(BackendError::Other(format!(
                    "GPU {ordinal} is named twice: each rank needs a GPU of its own"
                )));
            }
            ranks.push(open(ordinal)?);
        }
        let set = CudaRanks { ranks, nccl: None };
        set.enable_peers()?;
        Ok(set)
    }

    fn enable_peers(&self) -> Result<(), BackendError> {
        for a in &self.ranks {
            for b in &self.ranks {
                if a.ordinal == b.ordinal {
                    continue;
                }
                let mut can = 0;
                // SAFETY: both are valid device handles.
                unsafe { sys::cuDeviceCanAccessPeer(&mut can, a.dev, b.dev) }
                    .result()
                    .map_err(|e| classify(e, "cuDeviceCanAccessPeer"))?;
                if can == 0 {
                    return Err(BackendError::Other(format!(
                        "GPU {} cannot access GPU {}'s memory (no peer access between them): \
                         grade this lab on GPUs linked by NVLink or PCIe peer-to-peer",
                        a.ordinal, b.ordinal
                    )));
                }
                a.current()?;
                // SAFETY: b.ctx is a live primary context; flags must be 0.
                let r = unsafe { sys::cuCtxEnablePeerAccess(b.ctx, 0) };
                if r != sys::cudaError_enum::CUDA_SUCCESS
                    && r != sys::cudaError_enum::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
                {
                    return Err(classify(cu::DriverError(r), "cuCtxEnablePeerAccess"));
                }
            }
        }
        Ok(())
    }

    fn rank(&self, r: usize) -> Result<&Rank, BackendError> {
        self.ranks.get(r).ok_or_else(|| {
            BackendError::Other(format!("no rank {r} in a set of {}", self.ranks.len()))
        })
    }

    /// Queue `kernel` on every rank's stream between two events; returns the events.
    fn enqueue_all(
        &self,
        kernel: &str,
        dims: LaunchDims,
        params: &[Vec<ParamValue>],
    ) -> Result<Vec<(sys::CUevent, sys::CUevent)>, BackendError> {
        if params.len() != self.ranks.len() {
            return Err(BackendError::Launch(format!(
                "{} ranks, parameters for {}",
                self.ranks.len(),
                params.len()
            )));
        }
        let mut events = Vec::new();
        for (rank, p) in self.ranks.iter().zip(params) {
            rank.current()?;
            let f = rank.function(kernel)?;
            let start = event()?;
            let done = event()?;
            events.push((start, done));
            // SAFETY: live events and stream of this rank's current context.
            unsafe { cu::event::record(start, rank.stream) }
                .map_err(|e| classify(e, "cuEventRecord"))?;
            launch_on(f, dims, p, rank.stream)?;
            // SAFETY: as above.
            unsafe { cu::event::record(done, rank.stream) }
                .map_err(|e| classify(e, "cuEventRecord"))?;
        }
        Ok(events)
    }

    /// Wait for every rank's `done` event by polling, up to `deadline`; then each rank's
    /// seconds between its two events.
    fn finish(
        &self,
        events: &[(sys::CUevent, sys::CUevent)],
        deadline: Instant,
    ) -> Result<Vec<f64>, BackendError> {
        let mut nap = Duration::from_micros(20);
        for (r, (rank, &(_, done))) in self.ranks.iter().zip(events).enumerate() {
            rank.current()?;
            loop {
                // SAFETY: a live event recorded on this rank's stream.
                match unsafe { sys::cuEventQuery(done) } {
                    sys::cudaError_enum::CUDA_SUCCESS => break,
                    sys::cudaError_enum::CUDA_ERROR_NOT_READY => {}
                    other => {
                        return Err(classify(
                            cu::DriverError(other),
                            &format!("kernel on rank {r} (GPU {})", rank.ordinal),
                        ));
                    }
                }
                if Instant::now() >= deadline {
                    return Err(BackendError::Timeout(format!(
                        "the kernel did not finish on every rank before its deadline (rank {r} on GPU {} was still running: a rank waiting for a flag its peer never sets?)",
                        rank.ordinal
                    )));
                }
                std::thread::sleep(nap);
                nap = (nap * 2).min(Duration::from_millis(2));
            }
        }
        let mut secs = Vec::new();
        for (rank, &(start, done)) in self.ranks.iter().zip(events) {
            rank.current()?;
            // SAFETY: both events were recorded and completed.
            let ms = unsafe { cu::event::elapsed(start, done) }
                .map_err(|e| classify(e, "cuEventElapsedTime"))?;
            secs.push(ms as f64 / 1e3);
        }
        Ok(secs)
    }

    fn synchronize(&self, deadline: Instant) -> Result<(), BackendError> {
        for rank in &self.ranks {
            rank.current()?;
            let e = event()?;
            // SAFETY: live event and stream.
            let r = unsafe { cu::event::record(e, rank.stream) }
                .map_err(|e| classify(e, "cuEventRecord"))
                .and_then(|_| wait_event(e, deadline));
            destroy_event(e);
            r?;
        }
        Ok(())
    }
}

fn open(ordinal: usize) -> Result<Rank, BackendError> {
    let dev = cu::device::get(ordinal as i32).map_err(|e| classify(e, "cuDeviceGet"))?;
    // SAFETY: dev is valid; the primary context stays retained for the process lifetime.
    let ctx = unsafe {
        let ctx =
            cu::primary_ctx::retain(dev).map_err(|e| classify(e, "cuDevicePrimaryCtxRetain"))?;
        cu::ctx::set_current(ctx).map_err(|e| classify(e, "cuCtxSetCurrent"))?;
        ctx
    };
    set_limit(
        sys::CUlimit::CU_LIMIT_MALLOC_HEAP_SIZE,
        super::MALLOC_HEAP_BYTES,
        "cuCtxSetLimit(malloc heap)",
    )?;
    set_limit(
        sys::CUlimit::CU_LIMIT_PRINTF_FIFO_SIZE,
        super::PRINTF_FIFO_BYTES,
        "cuCtxSetLimit(printf fifo)",
    )?;
    let name = cu::device::get_name(dev).map_err(|e| classify(e, "cuDeviceGetName"))?;
    let cc = capability(dev).map_err(|e| classify(e, "cuDeviceGetAttribute"))?;
    let stream = cu::stream::create(cu::stream::StreamKind::NonBlocking)
        .map_err(|e| classify(e, "cuStreamCreate"))?;
    Ok(Rank {
        ordinal,
        dev,
        ctx,
        name,
        cc,
        stream,
        module: None,
        allocs: Vec::new(),
        globals: Vec::new(),
    })
}

impl Rank {
    fn current(&self) -> Result<(), BackendError> {
        // SAFETY: a live primary context.
        unsafe { cu::ctx::set_current(self.ctx) }.map_err(|e| classify(e, "cuCtxSetCurrent"))
    }

    fn function(&self, name: &str) -> Result<sys::CUfunction, BackendError> {
        let module = self
            .module
            .ok_or_else(|| BackendError::Load("no module loaded".into()))?;
        let cname = CString::new(name).map_err(|_| BackendError::NoKernel(name.into()))?;
        // SAFETY: module is loaded and not unloaded while self lives.
        unsafe { cu::module::get_function(module, cname) }.map_err(|e| match e.0 {
            sys::cudaError_enum::CUDA_ERROR_NOT_FOUND => BackendError::NoKernel(name.into()),
            _ => classify(e, "cuModuleGetFunction"),
        })
    }

    /// Keep a device copy of each of the module's globals `names` (after a load).
    fn snapshot_globals(&mut self, names: &[String]) -> Result<(), BackendError> {
        self.drop_globals();
        let Some(module) = self.module else {
            return Ok(());
        };
        for name in names {
            let Ok(cname) = CString::new(name.as_str()) else {
                continue;
            };
            // SAFETY: a loaded module; a name it lacks is an error we skip.
            let Ok((ptr, size)) = (unsafe { cu::module::get_global(module, cname) }) else {
                continue;
            };
            // SAFETY: plain allocation and copy of `size` bytes between our allocations.
            let copy = unsafe { cu::malloc_sync(size.max(1)) }
                .map_err(|e| classify(e, "cuMemAlloc(globals)"))?;
            unsafe { cu::memcpy_dtod_sync(copy, ptr, size) }
                .map_err(|e| classify(e, "cuMemcpyDtoD(globals)"))?;
            self.globals.push((ptr, copy, size));
        }
        Ok(())
    }

    fn drop_globals(&mut self) {
        for (_, copy, _) in self.globals.drain(..) {
            // SAFETY: allocated by snapshot_globals, freed once.
            let _ = unsafe { cu::free_sync(copy) };
        }
    }

    /// Queue: every global back to its value at load.
    fn restore_globals(&self) -> Result<(), BackendError> {
        for &(ptr, copy, size) in &self.globals {
            // SAFETY: both ranges are ours; queued on this rank's stream.
            unsafe { sys::cuMemcpyDtoDAsync_v2(ptr, copy, size, self.stream) }
                .result()
                .map_err(|e| classify(e, "cuMemcpyDtoDAsync(globals)"))?;
        }
        Ok(())
    }

    fn attribute(&self, a: sys::CUdevice_attribute) -> i64 {
        // SAFETY: a valid device handle.
        unsafe { cu::device::get_attribute(self.dev, a) }.map_or(0, i64::from)
    }
}

fn event() -> Result<sys::CUevent, BackendError> {
    cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
        .map_err(|e| classify(e, "cuEventCreate"))
}

fn destroy_event(e: sys::CUevent) {
    // SAFETY: an event of ours, no longer used.
    let _ = unsafe { cu::event::destroy(e) };
}

fn wait_event(e: sys::CUevent, deadline: Instant) -> Result<(), BackendError> {
    let mut nap = Duration::from_micros(20);
    loop {
        // SAFETY: a live recorded event.
        match unsafe { sys::cuEventQuery(e) } {
            sys::cudaError_enum::CUDA_SUCCESS => return Ok(()),
            sys::cudaError_enum::CUDA_ERROR_NOT_READY => {}
            other => return Err(classify(cu::DriverError(other), "stream")),
        }
        if Instant::now() >= deadline {
            return Err(BackendError::Timeout(
                "the GPUs did not finish before the deadline".into(),
            ));
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(2));
    }
}

impl Drop for CudaRanks {
    fn drop(&mut self) {
        self.nccl = None;
        for rank in &mut self.ranks {
            if rank.current().is_err() {
                continue;
            }
            for p in rank.allocs.drain(..) {
                // SAFETY: allocated by us, freed once.
                let _ = unsafe { cu::free_sync(p) };
            }
            rank.drop_globals();
            if let Some(m) = rank.module.take() {
                // SAFETY: loaded by us.
                let _ = unsafe { cu::module::unload(m) };
            }
            // SAFETY: created by us.
            let _ = unsafe { cu::stream::destroy(rank.stream) };
        }
    }
}

impl RankSet for CudaRanks {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn ranks(&self) -> usize {
        self.ranks.len()
    }

    fn device_name(&self) -> String {
        let names: Vec<String> = self
            .ranks
            .iter()
            .map(|r| format!("GPU {}: {} (sm_{}{})", r.ordinal, r.name, r.cc.0, r.cc.1))
            .collect();
        format!(
            "{} ranks with peer access: {}",
            self.ranks.len(),
            names.join(", ")
        )
    }

    fn load_module(&mut self, ptx: &str) -> Result<(), BackendError> {
        let (ptx, names) = crate::backend::ptx_globals(ptx);
        let image = CString::new(ptx)
            .map_err(|_| BackendError::Load("the PTX contains a NUL byte".into()))?;
        for rank in &mut self.ranks {
            rank.current()?;
            // SAFETY: a NUL-terminated PTX string that outlives the call.
            let module = unsafe { cu::module::load_data(image.as_ptr() as *const c_void) }
                .map_err(|e| classify(e, "cuModuleLoadData"))?;
            rank.drop_globals();
            if let Some(old) = rank.module.replace(module) {
                // SAFETY: ours, no longer referenced.
                let _ = unsafe { cu::module::unload(old) };
            }
            rank.snapshot_globals(&names)?;
        }
        Ok(())
    }

    fn kernel_info(&mut self, name: &str) -> Result<KernelInfo, BackendError> {
        use sys::CUfunction_attribute::*;
        let rank = self.rank(0)?;
        rank.current()?;
        let f = rank.function(name)?;
        let attr = |a| {
            // SAFETY: f is a valid function handle.
            unsafe { cu::function::get_function_attribute(f, a) }
                .map_err(|e| classify(e, "cuFuncGetAttribute"))
        };
        let mut sizes = Vec::new();
        for i in 0..256usize {
            let (mut off, mut size) = (0usize, 0usize);
            // SAFETY: f is valid; an index past the last parameter returns an error.
            let r = unsafe { sys::cuFuncGetParamInfo(f, i, &mut off, &mut size) };
            if r != sys::cudaError_enum::CUDA_SUCCESS {
                break;
            }
            sizes.push(size);
        }
        Ok(KernelInfo {
            param_count: sizes.len(),
            param_sizes: sizes,
            max_threads_per_block: attr(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)? as u32,
            static_shared_bytes: attr(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)? as u32,
            registers: attr(CU_FUNC_ATTRIBUTE_NUM_REGS)? as u32,
            local_bytes: attr(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)? as u32,
        })
    }

    fn alloc(&mut self, rank: usize, bytes: usize) -> Result<u64, BackendError> {
        let r = self
            .ranks
            .get_mut(rank)
            .ok_or_else(|| BackendError::Other(format!("no rank {rank}")))?;
        r.current()?;
        // SAFETY: plain allocation, freed in free_all.
        let p = unsafe { cu::malloc_sync(bytes.max(1)) }.map_err(|e| classify(e, "cuMemAlloc"))?;
        r.allocs.push(p);
        Ok(p)
    }

    fn write(&mut self, rank: usize, addr: u64, data: &[u8]) -> Result<(), BackendError> {
        self.rank(rank)?.current()?;
        // SAFETY: addr..addr+len lies in an allocation of ours (the worker computes it).
        unsafe { cu::memcpy_htod_sync(addr, data) }.map_err(|e| classify(e, "cuMemcpyHtoD"))
    }

    fn read(&mut self, rank: usize, addr: u64, len: usize) -> Result<Vec<u8>, BackendError> {
        self.rank(rank)?.current()?;
        let mut out = vec![0u8; len];
        // SAFETY: as in write.
        unsafe { cu::memcpy_dtoh_sync(&mut out, addr) }.map_err(|e| classify(e, "cuMemcpyDtoH"))?;
        Ok(out)
    }

    fn free_all(&mut self) -> Result<(), BackendError> {
        for rank in &mut self.ranks {
            rank.current()?;
            for p in rank.allocs.drain(..) {
                // SAFETY: allocated by alloc, freed once.
                unsafe { cu::free_sync(p) }.map_err(|e| classify(e, "cuMemFree"))?;
            }
        }
        Ok(())
    }

    fn launch_all(
        &mut self,
        kernel: &str,
        dims: LaunchDims,
        params: &[Vec<ParamValue>],
        deadline: Instant,
    ) -> Result<Vec<LaunchReport>, BackendError> {
        // Every launch starts from the module's own `__device__` values.
        for rank in &self.ranks {
            rank.current()?;
            rank.restore_globals()?;
        }
        let events = self.enqueue_all(kernel, dims, params);
        let result = match &events {
            Ok(ev) => self.finish(ev, deadline),
            Err(e) => Err(e.clone()),
        };
        for &(a, b) in events.iter().flatten() {
            destroy_event(a);
            destroy_event(b);
        }
        Ok(result?
            .into_iter()
            .map(|seconds| LaunchReport {
                seconds,
                ..LaunchReport::default()
            })
            .collect())
    }

    fn timer(&mut self) -> Option<&mut dyn RankTimer> {
        Some(self)
    }
}

impl RankTimer for CudaRanks {
    fn nccl_version(&self) -> Option<String> {
        self.nccl.as_ref().map(|n| {
            let v = n.version;
            format!(
                "NCCL {}.{}.{} ({})",
                v / 10000,
                v / 100 % 100,
                v % 100,
                n.path.display()
            )
        })
    }

    fn facts(&mut self) -> Result<Vec<DeviceFacts>, BackendError> {
        use sys::CUdevice_attribute::*;
        let mut out = Vec::new();
        for r in &self.ranks {
            let sms = r.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
            let mem_khz = r.attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
            let bus_bits = r.attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
            out.push(DeviceFacts {
                name: r.name.clone(),
                sms: sms as u32,
                l2_bytes: r.attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE).max(0) as usize,
                peak_gbs: 2.0 * mem_khz as f64 * 1e3 * (bus_bits as f64 / 8.0) / 1e9,
                peak_fp32_gflops: 0.0,
                compute_capability: r.cc,
                pci_bus_id: super::pci_bus_id(r.ordinal).unwrap_or_default(),
            });
        }
        Ok(out)
    }

    fn time_all(
        &mut self,
        kernel: &str,
        dims: LaunchDims,
        params: &[Vec<ParamValue>],
        zero: &[RankRange],
        restore: &[RankRange],
        reps: usize,
        deadline: Instant,
    ) -> Result<Vec<f64>, BackendError> {
        // A device copy of every range to restore, taken now.
        let mut saved = Vec::new();
        for &(rank, addr, len) in restore {
            let copy = self.alloc(rank, len)?;
            self.rank(rank)?.current()?;
            // SAFETY: both ranges are allocations of ours on this rank.
            unsafe { cu::memcpy_dtod_sync(copy, addr, len) }
                .map_err(|e| classify(e, "cuMemcpyDtoD"))?;
            saved.push((rank, addr, copy, len));
        }
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            for &(rank, addr, len) in zero {
                let r = self.rank(rank)?;
                r.current()?;
                // SAFETY: a range of ours; queued on the rank's stream.
                unsafe { sys::cuMemsetD8Async(addr, 0, len, r.stream) }
                    .result()
                    .map_err(|e| classify(e, "cuMemsetD8Async"))?;
            }
            for &(rank, addr, copy, len) in &saved {
                let r = self.rank(rank)?;
                r.current()?;
                // SAFETY: ranges of ours; queued on the rank's stream.
                unsafe { sys::cuMemcpyDtoDAsync_v2(addr, copy, len, r.stream) }
                    .result()
                    .map_err(|e| classify(e, "cuMemcpyDtoDAsync"))?;
            }
            for rank in &self.ranks {
                rank.current()?;
                rank.restore_globals()?;
            }
            // Every rank ready before any starts (its globals, flags and inputs restored):
            // a rank's time is its own kernel's.
            self.synchronize(deadline)?;
            let events = self.enqueue_all(kernel, dims, params);
            let result = match &events {
                Ok(ev) => self.finish(ev, deadline),
                Err(e) => Err(e.clone()),
            };
            for &(a, b) in events.iter().flatten() {
                destroy_event(a);
                destroy_event(b);
            }
            let secs = result?;
            times.push(secs.into_iter().fold(0.0, f64::max));
        }
        Ok(times)
    }

    fn nccl_allreduce(
        &mut self,
        send: &[u64],
        recv: &[u64],
        count: usize,
        reps: usize,
        deadline: Instant,
    ) -> Result<Vec<f64>, BackendError> {
        if send.len() != self.ranks.len() || recv.len() != self.ranks.len() {
            return Err(BackendError::Other(format!(
                "{} buffers for {} ranks",
                send.len().min(recv.len()),
                self.ranks.len()
            )));
        }
        if self.nccl.is_none() {
            let ordinals: Vec<i32> = self.ranks.iter().map(|r| r.ordinal as i32).collect();
            self.nccl = Some(Nccl::init_all(&ordinals)?);
        }
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            self.synchronize(deadline)?;
            let mut events = Vec::new();
            let queued = (|| {
                for rank in &self.ranks {
                    rank.current()?;
                    let (a, b) = (event()?, event()?);
                    events.push((a, b));
                }
                for (rank, &(start, _)) in self.ranks.iter().zip(&events) {
                    rank.current()?;
                    // SAFETY: live event and stream.
                    unsafe { cu::event::record(start, rank.stream) }
                        .map_err(|e| classify(e, "cuEventRecord"))?;
                }
                let streams: Vec<sys::CUstream> = self.ranks.iter().map(|r| r.stream).collect();
                let nccl = self
                    .nccl
                    .as_ref()
                    .ok_or_else(|| BackendError::Other("NCCL was not initialised".into()))?;
                nccl.all_reduce_f32_sum(send, recv, count, &streams)?;
                for (rank, &(_, done)) in self.ranks.iter().zip(&events) {
                    rank.current()?;
                    // SAFETY: live event and stream.
                    unsafe { cu::event::record(done, rank.stream) }
                        .map_err(|e| classify(e, "cuEventRecord"))?;
                }
                Ok::<(), BackendError>(())
            })();
            let result = queued.and_then(|_| self.finish(&events, deadline));
            for &(a, b) in &events {
                destroy_event(a);
                destroy_event(b);
            }
            times.push(result?.into_iter().fold(0.0, f64::max));
        }
        Ok(times)
    }
}

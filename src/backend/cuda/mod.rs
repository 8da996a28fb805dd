//! The CUDA backend: the real driver through cudarc's raw driver layer.
//!
//! The raw layer (rather than cudarc's safe wrappers) because the harness needs exact control:
//! allocations with guard regions addressed by plain device addresses, kernel parameters
//! packed from a contract, and launches that are waited for by polling an event against a
//! deadline (CUDA has no per-launch timeout; the parent kills us if we overrun anyway).

mod nccl;
pub mod ranks;
mod timer;

pub use nccl::NVLS_OFF;

pub use timer::{format_uuid, identify, pci_bus_id};

use super::{
    Backend, BackendError, BackendKind, KernelInfo, LaunchDims, LaunchReport, ParamValue, Slot,
    Timer,
};
use cudarc::driver::result as cu;
use cudarc::driver::sys;
use std::collections::HashMap;
use std::ffi::{CString, c_void};
use std::time::{Duration, Instant};

/// Device-side `malloc` heap: enough for reasonable kernels, small enough that a malloc bomb
/// fails inside the kernel instead of taking the card's memory.
const MALLOC_HEAP_BYTES: usize = 8 << 20;
/// Device printf FIFO; output beyond it is dropped by the driver.
const PRINTF_FIFO_BYTES: usize = 1 << 20;

/// Set a context limit. The driver refuses to change the malloc heap or printf FIFO once a
/// kernel that uses them ran in the (primary) context; a second backend in one process (the
/// worker has only one, tests may have several) accepts the limit already in force when it is
/// ours.
fn set_limit(limit: sys::CUlimit, value: usize, what: &str) -> Result<(), BackendError> {
    match cu::ctx::set_limit(limit, value) {
        Ok(()) => Ok(()),
        Err(e) => match cu::ctx::get_limit(limit) {
            Ok(v) if (value..=2 * value).contains(&v) => Ok(()),
            _ => Err(classify(e, what)),
        },
    }
}

pub struct CudaBackend {
    device: sys::CUdevice,
    name: String,
    cc: (i32, i32),
    module: Option<sys::CUmodule>,
    allocs: Vec<sys::CUdeviceptr>,
    cublas: Option<cudarc::cublas::sys::cublasHandle_t>,
    /// Modules of the other slots (reference, harness) for timed sections.
    slots: HashMap<Slot, sys::CUmodule>,
    /// A digest of each slot's PTX text, so that loading the same text again is free.
    slot_digests: HashMap<Slot, u64>,
    /// The student's `__device__` globals: (address, device copy of the value at load, bytes).
    globals: Vec<(sys::CUdeviceptr, sys::CUdeviceptr, usize)>,
    /// Scratch written to flush L2 (address, bytes), allocated on first use.
    scratch: Option<(sys::CUdeviceptr, usize)>,
    flushes: u32,
    /// Timestamps of a timed section; `next_mark` of them are in use.
    events: Vec<sys::CUevent>,
    next_mark: usize,
}

/// Is the driver library loadable at all? (cudarc panics on first use otherwise.)
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen libcuda.
    unsafe { sys::is_culib_present() }
}

/// Is NVRTC loadable? (From the system, else from cugrade's cache: `compile::nvrtc_lib`.)
pub fn nvrtc_present() -> bool {
    crate::compile::nvrtc_lib::present()
}

/// Number of usable GPUs, or why there are none.
pub fn device_count() -> Result<usize, String> {
    if !driver_present() {
        return Err("libcuda.so (the NVIDIA driver library) was not found".into());
    }
    cu::init().map_err(|e| format!("cuInit failed: {e}"))?;
    let n = cu::device::get_count().map_err(|e| format!("cannot count devices: {e}"))?;
    Ok(n.max(0) as usize)
}

/// Compute capability of device `ordinal` as `sm_XY`.
pub fn device_arch(ordinal: usize) -> Result<(String, String), String> {
    device_count()?;
    let dev = cu::device::get(ordinal as i32).map_err(|e| e.to_string())?;
    let name = cu::device::get_name(dev).map_err(|e| e.to_string())?;
    let (ma, mi) = capability(dev).map_err(|e| e.to_string())?;
    Ok((name, format!("sm_{ma}{mi}")))
}

fn capability(dev: sys::CUdevice) -> Result<(i32, i32), cu::DriverError> {
    use sys::CUdevice_attribute::*;
    // SAFETY: dev is a valid device handle.
    unsafe {
        Ok((
            cu::device::get_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            cu::device::get_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ))
    }
}

/// Map a driver error to what it means for grading.
fn classify(e: cu::DriverError, what: &str) -> BackendError {
    use sys::cudaError_enum::*;
    let msg = format!("{what}: {e}");
    match e.0 {
        CUDA_ERROR_ILLEGAL_ADDRESS
        | CUDA_ERROR_LAUNCH_FAILED
        | CUDA_ERROR_ILLEGAL_INSTRUCTION
        | CUDA_ERROR_MISALIGNED_ADDRESS
        | CUDA_ERROR_HARDWARE_STACK_ERROR
        | CUDA_ERROR_INVALID_ADDRESS_SPACE
        | CUDA_ERROR_INVALID_PC
        | CUDA_ERROR_ASSERT
        | CUDA_ERROR_LAUNCH_TIMEOUT => BackendError::Fault(msg),
        CUDA_ERROR_OUT_OF_MEMORY => BackendError::OutOfMemory(msg),
        CUDA_ERROR_INVALID_VALUE | CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES => BackendError::Launch(msg),
        CUDA_ERROR_NOT_FOUND => BackendError::NoKernel(what.to_string()),
        CUDA_ERROR_INVALID_PTX
        | CUDA_ERROR_INVALID_IMAGE
        | CUDA_ERROR_NO_BINARY_FOR_GPU
        | CUDA_ERROR_JIT_COMPILER_NOT_FOUND
        | CUDA_ERROR_UNSUPPORTED_PTX_VERSION => BackendError::Load(msg),
        _ => BackendError::Other(msg),
    }
}

impl CudaBackend {
    /// Open device `ordinal` and make its primary context current on this thread.
    pub fn new(ordinal: usize) -> Result<CudaBackend, BackendError> {
        let n = device_count().map_err(BackendError::Other)?;
        if ordinal >= n {
            return Err(BackendError::Other(format!(
                "no CUDA device {ordinal} (found {n})"
            )));
        }
        let dev = cu::device::get(ordinal as i32).map_err(|e| classify(e, "cuDeviceGet"))?;
        // SAFETY: dev is valid; the primary context stays retained for the process lifetime.
        unsafe {
            let ctx = cu::primary_ctx::retain(dev)
                .map_err(|e| classify(e, "cuDevicePrimaryCtxRetain"))?;
            cu::ctx::set_current(ctx).map_err(|e| classify(e, "cuCtxSetCurrent"))?;
        }
        set_limit(
            sys::CUlimit::CU_LIMIT_MALLOC_HEAP_SIZE,
            MALLOC_HEAP_BYTES,
            "cuCtxSetLimit(malloc heap)",
        )?;
        set_limit(
            sys::CUlimit::CU_LIMIT_PRINTF_FIFO_SIZE,
            PRINTF_FIFO_BYTES,
            "cuCtxSetLimit(printf fifo)",
        )?;
        // No persisting-L2 carve-out: every kernel gets the whole cache, as the timing protocol
        // assumes (a device may lack the feature; then there is nothing to reset).
        let _ = cu::ctx::set_limit(sys::CUlimit::CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0);
        let name = cu::device::get_name(dev).map_err(|e| classify(e, "cuDeviceGetName"))?;
        let cc = capability(dev).map_err(|e| classify(e, "cuDeviceGetAttribute"))?;
        Ok(CudaBackend {
            device: dev,
            name,
            cc,
            module: None,
            allocs: Vec::new(),
            cublas: None,
            slots: HashMap::new(),
            slot_digests: HashMap::new(),
            globals: Vec::new(),
            scratch: None,
            flushes: 0,
            events: Vec::new(),
            next_mark: 0,
        })
    }

    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.cc.0, self.cc.1)
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

    /// Wait for `event` by polling, so a hung kernel cannot block us past `deadline`.
    fn wait_event(&self, event: sys::CUevent, deadline: Instant) -> Result<(), BackendError> {
        let mut nap = Duration::from_micros(20);
        loop {
            // SAFETY: event is a live event recorded on the null stream.
            match unsafe { sys::cuEventQuery(event) } {
                sys::cudaError_enum::CUDA_SUCCESS => return Ok(()),
                sys::cudaError_enum::CUDA_ERROR_NOT_READY => {}
                other => return Err(classify(cu::DriverError(other), "kernel")),
            }
            if Instant::now() >= deadline {
                return Err(BackendError::Timeout(
                    "the kernel did not finish before its deadline".into(),
                ));
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(2));
        }
    }

    fn launch_raw(
        &self,
        f: sys::CUfunction,
        dims: LaunchDims,
        params: &[ParamValue],
    ) -> Result<(), BackendError> {
        launch_on(f, dims, params, std::ptr::null_mut())
    }

    fn event(&self) -> Result<sys::CUevent, BackendError> {
        cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
            .map_err(|e| classify(e, "cuEventCreate"))
    }
}

/// Launch `f` on `stream` (null: the default stream): the parameters packed as the driver
/// takes them, large dynamic shared memory opted into. One backend or a rank set's ranks.
pub(super) fn launch_on(
    f: sys::CUfunction,
    dims: LaunchDims,
    params: &[ParamValue],
    stream: sys::CUstream,
) -> Result<(), BackendError> {
    let mut storage: Vec<Vec<u8>> = params.iter().map(|p| p.to_bytes()).collect();
    let mut ptrs: Vec<*mut c_void> = storage
        .iter_mut()
        .map(|b| b.as_mut_ptr() as *mut c_void)
        .collect();
    let shared = device_shared_bytes(dims.shared_bytes);
    if shared > 48 * 1024 {
        // Opt in to large dynamic shared memory; the launch still fails if the device lacks it.
        // SAFETY: f is a valid function.
        unsafe {
            sys::cuFuncSetAttribute(
                f,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                shared as i32,
            );
        }
    }
    // SAFETY: params hold exactly the kernel's parameters (checked against the entry's
    // parameter sizes by the worker before launching), and live until the call returns.
    unsafe {
        cu::launch_kernel(
            f,
            (dims.grid[0], dims.grid[1], dims.grid[2]),
            (dims.block[0], dims.block[1], dims.block[2]),
            shared,
            stream,
            &mut ptrs,
        )
    }
    .map_err(|e| classify(e, "cuLaunchKernel"))
}

/// The dynamic shared memory a launch gets on the GPU: what it asks for, rounded up to 16
/// bytes. ptxas may load a whole 16-byte vector of shared memory where the program reads only
/// its first elements (an unrolled loop's remainder as one `LDS.128`: the attention lab's
/// `scores[j]` loop, issue 30). That load stays inside the memory the block physically has
/// (shared memory is allocated in 128-byte units), but runs past the bytes the launch asked
/// for, which compute-sanitizer's memcheck reports as an invalid read of the student's line.
/// The emulator keeps the exact size: it checks the program as written, where every read past
/// what was asked for is the student's.
pub fn device_shared_bytes(asked: u32) -> u32 {
    asked.saturating_add(15) & !15
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        let _ = self.free_all();
        self.drop_globals();
        for e in self.events.drain(..) {
            // SAFETY: events created by us, no longer used.
            let _ = unsafe { cu::event::destroy(e) };
        }
        if let Some((p, _)) = self.scratch.take() {
            // SAFETY: allocated by us.
            let _ = unsafe { cu::free_sync(p) };
        }
        for (_, m) in self.slots.drain() {
            // SAFETY: modules loaded by us.
            let _ = unsafe { cu::module::unload(m) };
        }
        if let Some(h) = self.cublas.take() {
            // SAFETY: handle created by us and not used after this.
            let _ = unsafe { cudarc::cublas::result::destroy_handle(h) };
        }
        if let Some(m) = self.module.take() {
            // SAFETY: module loaded by us.
            let _ = unsafe { cu::module::unload(m) };
        }
    }
}

impl Backend for CudaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn device_name(&self) -> String {
        format!("{} ({})", self.name, self.arch())
    }

    fn load_module(&mut self, ptx: &str) -> Result<(), BackendError> {
        // Globals of internal linkage become visible so that they can be found and reset
        // between launches (linkage changes nothing else in a single-module program).
        let (ptx, names) = super::ptx_globals(ptx);
        let image = CString::new(ptx)
            .map_err(|_| BackendError::Load("the PTX contains a NUL byte".into()))?;
        // SAFETY: image is a NUL-terminated PTX string that outlives the call.
        let module = unsafe { cu::module::load_data(image.as_ptr() as *const c_void) }
            .map_err(|e| classify(e, "cuModuleLoadData"))?;
        self.drop_globals();
        if let Some(old) = self.module.replace(module) {
            // SAFETY: old module is ours and no longer referenced.
            let _ = unsafe { cu::module::unload(old) };
        }
        self.snapshot_globals(module, &names)?;
        let _ = self.device;
        Ok(())
    }

    fn kernel_info(&mut self, name: &str) -> Result<KernelInfo, BackendError> {
        use sys::CUfunction_attribute::*;
        let f = self.function(name)?;
        let attr = |a| {
            // SAFETY: f is a valid function handle.
            unsafe { cu::function::get_function_attribute(f, a) }
                .map_err(|e| classify(e, "cuFuncGetAttribute"))
        };
        let mut sizes = Vec::new();
        for i in 0..256usize {
            let (mut off, mut size) = (0usize, 0usize);
            // SAFETY: f is valid; an out-of-range index returns an error, which ends the scan.
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

    fn alloc(&mut self, bytes: usize) -> Result<u64, BackendError> {
        // SAFETY: plain allocation; freed in free_all.
        let p = unsafe { cu::malloc_sync(bytes.max(1)) }.map_err(|e| classify(e, "cuMemAlloc"))?;
        self.allocs.push(p);
        Ok(p)
    }

    fn free_all(&mut self) -> Result<(), BackendError> {
        for p in self.allocs.drain(..) {
            // SAFETY: p was allocated by alloc and is freed once.
            unsafe { cu::free_sync(p) }.map_err(|e| classify(e, "cuMemFree"))?;
        }
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), BackendError> {
        // SAFETY: addr..addr+len lies in an allocation of ours (the worker computes it).
        unsafe { cu::memcpy_htod_sync(addr, data) }.map_err(|e| classify(e, "cuMemcpyHtoD"))
    }

    fn read(&mut self, addr: u64, len: usize) -> Result<Vec<u8>, BackendError> {
        let mut out = vec![0u8; len];
        // SAFETY: as in write.
        unsafe { cu::memcpy_dtoh_sync(&mut out, addr) }.map_err(|e| classify(e, "cuMemcpyDtoH"))?;
        Ok(out)
    }

    fn set_global(&mut self, name: &str, data: &[u8]) -> Result<(), BackendError> {
        let module = self
            .module
            .ok_or_else(|| BackendError::Load("no module loaded".into()))?;
        let cname = CString::new(name)
            .map_err(|_| BackendError::Other(format!("bad symbol name {name:?}")))?;
        // SAFETY: module is loaded.
        let (ptr, size) =
            unsafe { cu::module::get_global(module, cname) }.map_err(|e| match e.0 {
                sys::cudaError_enum::CUDA_ERROR_NOT_FOUND => {
                    BackendError::NoKernel(format!("{name} (a __constant__ or __device__ symbol)"))
                }
                _ => classify(e, "cuModuleGetGlobal"),
            })?;
        if data.len() > size {
            return Err(BackendError::Other(format!(
                "symbol `{name}` holds {size} bytes; the harness has {}",
                data.len()
            )));
        }
        // SAFETY: ptr..ptr+data.len() is within the symbol.
        unsafe { cu::memcpy_htod_sync(ptr, data) }.map_err(|e| classify(e, "cuMemcpyHtoD(symbol)"))
    }

    fn launch(
        &mut self,
        kernel: &str,
        dims: LaunchDims,
        params: &[ParamValue],
        deadline: Instant,
    ) -> Result<LaunchReport, BackendError> {
        let f = self.function(kernel)?;
        let start = self.event()?;
        let done = match self.event() {
            Ok(e) => e,
            Err(e) => {
                // SAFETY: event no longer used.
                let _ = unsafe { cu::event::destroy(start) };
                return Err(e);
            }
        };
        let ran = (|| {
            // SAFETY: start and done are live events; null stream.
            unsafe { cu::event::record(start, std::ptr::null_mut()) }
                .map_err(|e| classify(e, "cuEventRecord"))?;
            self.launch_raw(f, dims, params)?;
            // SAFETY: as above.
            unsafe { cu::event::record(done, std::ptr::null_mut()) }
                .map_err(|e| classify(e, "cuEventRecord"))?;
            self.wait_event(done, deadline)?;
            // The kernel's own time on the device (module loading on first use excluded).
            // SAFETY: both events were recorded and have completed.
            let ms = unsafe { cu::event::elapsed(start, done) }
                .map_err(|e| classify(e, "cuEventElapsedTime"))?;
            Ok(ms as f64 / 1e3)
        })();
        // SAFETY: events no longer used.
        unsafe {
            let _ = cu::event::destroy(start);
            let _ = cu::event::destroy(done);
        }
        Ok(LaunchReport {
            seconds: ran?,
            ..LaunchReport::default()
        })
    }

    fn timer(&mut self) -> Option<&mut dyn Timer> {
        Some(self)
    }
}

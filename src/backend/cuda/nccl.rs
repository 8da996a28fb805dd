//! NCCL, loaded at run time as cudarc loads CUDA's libraries (libloading, a presence check
//! before any call, never a panic): the all-reduce a student's is measured against.
//!
//! cudarc's own NCCL bindings look only for names such as `libnccl.so`, while NVIDIA's wheel
//! (`nvidia-nccl-cu13`, how the GPU machines have NCCL) ships `libnccl.so.2` inside Python's
//! site-packages, outside the loader's path. So cugrade binds the few entry points it needs
//! itself and looks in both places.
//!
//! NVLink multicast (NVLS) stays off: NCCL is initialised only in a process whose environment
//! says `NCCL_NVLS_ENABLE=0` (the worker's launcher sets it for every worker), since on the
//! lent machines multicast objects can take a shared host's GPUs out of service. cugrade never
//! calls `cuMulticastCreate` itself.

use crate::backend::BackendError;
use cudarc::driver::sys::CUstream;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::{Path, PathBuf};

type Comm = *mut c_void;
type InitAll = unsafe extern "C" fn(*mut Comm, c_int, *const c_int) -> c_int;
type AllReduce =
    unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, Comm, CUstream) -> c_int;
type Group = unsafe extern "C" fn() -> c_int;
type Destroy = unsafe extern "C" fn(Comm) -> c_int;
type ErrorString = unsafe extern "C" fn(c_int) -> *const c_char;
type GetVersion = unsafe extern "C" fn(*mut c_int) -> c_int;

const NCCL_FLOAT32: c_int = 7;
const NCCL_SUM: c_int = 0;

/// The variable and value every process that loads NCCL must have.
pub const NVLS_OFF: (&str, &str) = ("NCCL_NVLS_ENABLE", "0");

/// One communicator per rank of a single process driving all of them (`ncclCommInitAll`).
pub struct Nccl {
    lib: libloading::Library,
    comms: Vec<Comm>,
    pub version: i32,
    pub path: PathBuf,
}

/// Where NCCL may be: the system's loader path, then NVIDIA's wheel in every Python
/// site-packages folder cugrade can see.
fn candidates() -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("libnccl.so.2"), PathBuf::from("libnccl.so")];
    let mut prefixes: Vec<PathBuf> = ["/usr/local/lib", "/usr/lib", "/opt/conda/lib"]
        .iter()
        .map(PathBuf::from)
        .collect();
    if let Some(home) = std::env::var_os("HOME") {
        prefixes.push(Path::new(&home).join(".local/lib"));
    }
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        prefixes.push(Path::new(&venv).join("lib"));
    }
    for prefix in prefixes {
        let Ok(entries) = std::fs::read_dir(&prefix) else {
            continue;
        };
        let mut pythons: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| e.path())
            .collect();
        pythons.sort();
        for py in pythons {
            for packages in ["site-packages", "dist-packages"] {
                let lib = py.join(packages).join("nvidia/nccl/lib/libnccl.so.2");
                if lib.is_file() {
                    out.push(lib);
                }
            }
        }
    }
    out
}

fn symbol<T: Copy>(lib: &libloading::Library, name: &str) -> Result<T, BackendError> {
    // SAFETY: the types above are NCCL's C signatures (nccl.h) for these names.
    unsafe { lib.get::<T>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| BackendError::Other(format!("NCCL has no `{name}`: {e}")))
}

impl Nccl {
    /// Load NCCL and make one communicator per GPU of `ordinals`.
    pub fn init_all(ordinals: &[i32]) -> Result<Nccl, BackendError> {
        if std::env::var(NVLS_OFF.0).as_deref() != Ok(NVLS_OFF.1) {
            return Err(BackendError::Other(format!(
                "NCCL is not started unless {}={} (NVLink multicast stays off)",
                NVLS_OFF.0, NVLS_OFF.1
            )));
        }
        let tried = candidates();
        let mut found = None;
        for c in &tried {
            // SAFETY: loading NCCL runs its initialisers, which only register the library.
            if let Ok(lib) = unsafe { libloading::Library::new(c) } {
                found = Some((lib, c.clone()));
                break;
            }
        }
        let Some((lib, path)) = found else {
            let names: Vec<String> = tried.iter().map(|p| p.display().to_string()).collect();
            return Err(BackendError::Other(format!(
                "NCCL is not installed here (looked for {}): install it with \
                 `pip install nvidia-nccl-cu13`, or grade without the comparison with NCCL",
                names.join(", ")
            )));
        };
        let mut version = 0;
        let get_version: GetVersion = symbol(&lib, "ncclGetVersion")?;
        // SAFETY: a valid out pointer.
        unsafe { get_version(&mut version) };
        let init: InitAll = symbol(&lib, "ncclCommInitAll")?;
        let mut comms = vec![std::ptr::null_mut(); ordinals.len()];
        // SAFETY: comms has room for one communicator per device of `ordinals`.
        let r = unsafe {
            init(
                comms.as_mut_ptr(),
                ordinals.len() as c_int,
                ordinals.as_ptr(),
            )
        };
        let nccl = Nccl {
            lib,
            comms,
            version,
            path,
        };
        nccl.check(r, "ncclCommInitAll")?;
        Ok(nccl)
    }

    fn check(&self, r: c_int, what: &str) -> Result<(), BackendError> {
        if r == 0 {
            return Ok(());
        }
        let text = symbol::<ErrorString>(&self.lib, "ncclGetErrorString")
            .ok()
            // SAFETY: NCCL returns a static NUL-terminated string for any result code.
            .map(|f| {
                unsafe { CStr::from_ptr(f(r)) }
                    .to_string_lossy()
                    .into_owned()
            })
            .unwrap_or_default();
        Err(BackendError::Other(format!("{what} failed ({r}): {text}")))
    }

    /// Queue a float32 sum all-reduce of `count` elements from `send[rank]` into `recv[rank]`
    /// on every rank's stream (one NCCL group).
    pub fn all_reduce_f32_sum(
        &self,
        send: &[u64],
        recv: &[u64],
        count: usize,
        streams: &[CUstream],
    ) -> Result<(), BackendError> {
        let start: Group = symbol(&self.lib, "ncclGroupStart")?;
        let end: Group = symbol(&self.lib, "ncclGroupEnd")?;
        let all_reduce: AllReduce = symbol(&self.lib, "ncclAllReduce")?;
        // SAFETY: no arguments.
        self.check(unsafe { start() }, "ncclGroupStart")?;
        let mut first_err = Ok(());
        for (((&s, &d), &comm), &stream) in send.iter().zip(recv).zip(&self.comms).zip(streams) {
            // SAFETY: s and d are device allocations of `count` floats on this communicator's
            // GPU, and stream belongs to that GPU's context.
            let r = unsafe {
                all_reduce(
                    s as *const c_void,
                    d as *mut c_void,
                    count,
                    NCCL_FLOAT32,
                    NCCL_SUM,
                    comm,
                    stream,
                )
            };
            if first_err.is_ok() {
                first_err = self.check(r, "ncclAllReduce");
            }
        }
        // SAFETY: closes the group opened above.
        let closed = self.check(unsafe { end() }, "ncclGroupEnd");
        first_err.and(closed)
    }
}

impl Drop for Nccl {
    fn drop(&mut self) {
        if let Ok(destroy) = symbol::<Destroy>(&self.lib, "ncclCommDestroy") {
            for c in self.comms.drain(..) {
                if !c.is_null() {
                    // SAFETY: a communicator of ours, destroyed once.
                    unsafe { destroy(c) };
                }
            }
        }
    }
}

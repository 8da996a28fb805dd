//! Finding NVRTC without `LD_LIBRARY_PATH`. cudarc loads `libnvrtc.so.13` by name, and NVRTC
//! loads `libnvrtc-builtins.so.13.0` by name when it compiles, so neither finds cugrade's own
//! cache on its own. When the system has no NVRTC, both libraries are loaded here by absolute
//! path first (`dlopen`, kept for the life of the process): the loader then answers the later
//! loads by name with the libraries already in memory, which it matches by their sonames.
//!
//! The parent loads from the cache ([`super::toolchain::nvrtc_cache_lib_dir`]); a worker, whose
//! `HOME` is its temp dir, is told the folder by the parent (`WorkerConfig::nvrtc_dir`), which
//! also lets its sandbox read that folder (`sandbox::Policy::extra_read`).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// NVRTC's library and the builtins library it opens while compiling, in load order.
const LIBRARIES: [&str; 2] = ["libnvrtc-builtins.so.13.0", "libnvrtc.so.13"];

struct State {
    /// Where a worker was told to load NVRTC from (instead of the cache).
    given: Option<PathBuf>,
    /// The folder NVRTC was loaded from by absolute path, once it was.
    loaded: Option<PathBuf>,
}

static STATE: Mutex<State> = Mutex::new(State {
    given: None,
    loaded: None,
});

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// In a worker: load NVRTC from `dir` when the system has none.
pub fn use_dir(dir: PathBuf) {
    state().given = Some(dir);
}

/// Whether cudarc can load NVRTC, loading it from cugrade's cache (or the folder a worker was
/// given) first when the system's loader cannot find it by name.
pub fn present() -> bool {
    // SAFETY: only tries to dlopen libnvrtc by cudarc's candidate names.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return true;
    }
    let dir = {
        let s = state();
        if s.loaded.is_some() {
            // Loaded, yet cudarc cannot find it: nothing more to try.
            return false;
        }
        s.given
            .clone()
            .unwrap_or_else(super::toolchain::nvrtc_cache_lib_dir)
    };
    if preload(&dir).is_err() {
        return false;
    }
    state().loaded = Some(dir);
    // SAFETY: as above; the soname `libnvrtc.so.13` now names the loaded library.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// The folder NVRTC was loaded from by absolute path (cugrade's cache, usually), if it was:
/// what a worker must be told and allowed to read.
pub fn loaded_dir() -> Option<PathBuf> {
    state().loaded.clone()
}

/// `dlopen` both libraries of `dir` by absolute path, global and now, and keep them loaded.
fn preload(dir: &Path) -> Result<(), String> {
    for name in LIBRARIES {
        let path = dir.join(name);
        if !path.is_file() {
            return Err(format!("{} does not exist", path.display()));
        }
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| format!("{} contains a NUL byte", path.display()))?;
        // SAFETY: a plain dlopen of a NUL-terminated path; the handle is deliberately never
        // closed (cudarc keeps using the library for the life of the process).
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if handle.is_null() {
            // SAFETY: dlerror returns a thread-local message or null.
            let why = unsafe {
                let e = libc::dlerror();
                if e.is_null() {
                    "unknown error".to_string()
                } else {
                    std::ffi::CStr::from_ptr(e).to_string_lossy().into_owned()
                }
            };
            return Err(format!("cannot load {}: {why}", path.display()));
        }
    }
    Ok(())
}

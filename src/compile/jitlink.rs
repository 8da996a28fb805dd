//! Resource facts for PTX without a GPU: NVIDIA's nvJitLink assembles a PTX module for a real
//! architecture (`-arch=sm_90`) with ptxas inside it, and its log says what ptxas allocated:
//! `ptxas info : Used 32 registers, ...` per kernel, the same lines NVRTC's
//! `--ptxas-options=-v` gives for CUDA C++ ([`super::resources`] reads both).
//!
//! PTX submissions and Numba's PTX need it: the emulator only knows PTX's virtual registers
//! (a kernel declaring `.reg .f32 %f<130>` may need 32 real ones), and a wrong register count
//! would send a student after an occupancy problem they do not have. On a GPU the driver
//! reports the real count itself.
//!
//! The library is `libnvJitLink.so.13` from PyPI's `nvidia-nvjitlink` (pinned to CUDA 13.0 like
//! NVRTC; NVIDIA's licence lets us download it, not ship it), installed into cugrade's cache by
//! `cugrade doctor --install` (where Numba or PTX kernels are graded without a GPU), with
//! Numba's first install, or by `ci/with-nvrtc`; or a CUDA toolkit's. It is loaded at run time, inside the sandboxed compile
//! worker (student PTX is hostile input to ptxas too), and only when a PTX module needs it.

use std::ffi::{CString, c_char, c_void};
use std::path::{Path, PathBuf};

/// The wheel, pinned to the CUDA 13.0 of NVRTC (`toolchain::NVRTC_WHEEL`; `ci/with-nvrtc`
/// installs the same pin).
pub const WHEEL: &str = "nvidia-nvjitlink==13.0.88";

const LIB: &str = "libnvJitLink.so.13";

/// Where `cugrade doctor --install` and `ci/with-nvrtc` install the wheel.
pub fn install_dir() -> PathBuf {
    super::toolchain::cache_root().join("nvjitlink")
}

/// `libnvJitLink.so.13`, best first: `$CUGRADE_NVJITLINK` (a file), cugrade's cache, the
/// directories of `LD_LIBRARY_PATH`, a CUDA toolkit. `None`: not installed.
pub fn library() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CUGRADE_NVJITLINK").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let mut dirs = vec![install_dir().join("nvidia/cu13/lib")];
    if let Some(llp) = std::env::var_os("LD_LIBRARY_PATH") {
        dirs.extend(std::env::split_paths(&llp).filter(|d| d.is_absolute()));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    dirs.push(PathBuf::from("/usr/local/cuda-13.0/lib64"));
    dirs.into_iter().map(|d| d.join(LIB)).find(|p| p.is_file())
}

/// What `cugrade doctor` says about it.
pub fn describe() -> (bool, String) {
    match library() {
        Some(p) => (
            true,
            format!(
                "nvJitLink: {} (registers of PTX and Numba kernels without a GPU)",
                p.display()
            ),
        ),
        None => (
            false,
            format!(
                "nvJitLink: not found, so without a GPU the registers of PTX and Numba kernels \
                 are reported as unknown; fix: `cugrade doctor --install` (it installs {WHEEL} \
                 into {}), or install the CUDA 13.0 toolkit",
                install_dir().display()
            ),
        ),
    }
}

type Handle = *mut c_void;
type Create = unsafe extern "C" fn(*mut Handle, u32, *const *const c_char) -> i32;
type Destroy = unsafe extern "C" fn(*mut Handle) -> i32;
type AddData = unsafe extern "C" fn(Handle, i32, *const c_void, usize, *const c_char) -> i32;
type Complete = unsafe extern "C" fn(Handle) -> i32;
type LogSize = unsafe extern "C" fn(Handle, *mut usize) -> i32;
type Log = unsafe extern "C" fn(Handle, *mut c_char) -> i32;

/// `NVJITLINK_INPUT_PTX`.
const INPUT_PTX: i32 = 2;

/// Assemble `ptx` for `arch` (`sm_90`) with the nvJitLink at `library` and return ptxas's
/// verbose log, or what went wrong (the error log when the PTX does not assemble).
pub fn assemble(library: &Path, ptx: &str, arch: &str) -> Result<String, String> {
    let arch = arch.trim();
    if !arch.starts_with("sm_") || !arch[3..].chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "nvJitLink needs a real architecture (sm_NN), not `{arch}`"
        ));
    }
    // SAFETY: loading NVIDIA's library runs its initialisers, as loading libnvrtc does.
    let lib = unsafe { libloading::Library::new(library) }
        .map_err(|e| format!("cannot load {}: {e}", library.display()))?;
    // SAFETY: the signatures are those of nvJitLink.h (CUDA 13.0).
    unsafe {
        let create: libloading::Symbol<Create> = sym(&lib, b"nvJitLinkCreate\0")?;
        let destroy: libloading::Symbol<Destroy> = sym(&lib, b"nvJitLinkDestroy\0")?;
        let add: libloading::Symbol<AddData> = sym(&lib, b"nvJitLinkAddData\0")?;
        let complete: libloading::Symbol<Complete> = sym(&lib, b"nvJitLinkComplete\0")?;
        let info_size: libloading::Symbol<LogSize> = sym(&lib, b"nvJitLinkGetInfoLogSize\0")?;
        let info: libloading::Symbol<Log> = sym(&lib, b"nvJitLinkGetInfoLog\0")?;
        let err_size: libloading::Symbol<LogSize> = sym(&lib, b"nvJitLinkGetErrorLogSize\0")?;
        let err: libloading::Symbol<Log> = sym(&lib, b"nvJitLinkGetErrorLog\0")?;
        let options = [format!("-arch={arch}"), "-verbose".to_string()];
        let options: Vec<CString> = options
            .iter()
            .map(|o| CString::new(o.as_str()).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        let ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let mut h: Handle = std::ptr::null_mut();
        let rc = create(&mut h, ptrs.len() as u32, ptrs.as_ptr());
        if rc != 0 || h.is_null() {
            return Err(format!("nvJitLinkCreate failed ({rc})"));
        }
        let read = |size: &LogSize, get: &Log| -> String {
            let mut n = 0usize;
            if size(h, &mut n) != 0 || n == 0 {
                return String::new();
            }
            let mut buf = vec![0u8; n + 1];
            if get(h, buf.as_mut_ptr().cast()) != 0 {
                return String::new();
            }
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            String::from_utf8_lossy(&buf[..end]).into_owned()
        };
        let name = c"submission.ptx";
        // nvJitLink reads PTX as a C string: it must end in NUL, whatever size it is told
        // (without one it read past the end and refused valid modules now and then).
        let text = CString::new(ptx.replace('\0', " ")).map_err(|e| e.to_string())?;
        let rc = add(
            h,
            INPUT_PTX,
            text.as_ptr().cast(),
            text.as_bytes().len(),
            name.as_ptr(),
        );
        let result = if rc != 0 {
            Err(format!(
                "the PTX was refused ({rc}): {}",
                read(&err_size, &err)
            ))
        } else if complete(h) != 0 {
            Err(format!("ptxas failed: {}", read(&err_size, &err).trim()))
        } else {
            Ok(read(&info_size, &info))
        };
        destroy(&mut h);
        result
    }
}

unsafe fn sym<'l, T>(
    lib: &'l libloading::Library,
    name: &[u8],
) -> Result<libloading::Symbol<'l, T>, String> {
    // SAFETY: the caller names the symbol's real type.
    unsafe { lib.get(name) }.map_err(|e| {
        format!(
            "{} lacks {}: {e}",
            LIB,
            String::from_utf8_lossy(&name[..name.len() - 1])
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel whose PTX declares 130 virtual registers (what the emulator counts), which
    /// ptxas packs into far fewer: the registers a report gives are ptxas's.
    const MANY_VIRTUAL: &str = include_str!("../../tests/fixtures/ptx/many_virtual_regs.ptx");

    #[test]
    fn ptxas_counts_real_registers_when_nvjitlink_is_installed() {
        let Some(lib) = library() else {
            eprintln!("skipped: {LIB} not found ({WHEEL}; ci/with-nvrtc installs it)");
            return;
        };
        let log = assemble(&lib, MANY_VIRTUAL, "sm_90").unwrap();
        let k = super::super::resources(&log);
        let k = k.iter().find(|k| k.name == "many_regs").expect(&log);
        assert!(
            k.registers > 0 && k.registers < 64,
            "ptxas: {} registers\n{log}",
            k.registers
        );
        let bad = assemble(
            &lib,
            ".version 8.8\n.target sm_90\n.entry broken( {\n",
            "sm_90",
        );
        assert!(bad.is_err(), "{bad:?}");
        assert!(assemble(&lib, MANY_VIRTUAL, "compute_90").is_err());
    }

    #[test]
    fn ci_installs_the_same_pin() {
        let script = include_str!("../../ci/with-nvrtc");
        assert!(
            script.contains(WHEEL),
            "ci/with-nvrtc does not install {WHEEL}"
        );
    }
}

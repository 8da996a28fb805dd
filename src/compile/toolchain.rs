//! Where the compilers' side files live: CUDA's own headers for NVRTC, and the Numba toolchain
//! for `.py` submissions. Both are NVIDIA's (and Numba's) wheels from PyPI, installed into
//! cugrade's cache (`$CUGRADE_NVRTC_CACHE`, default `~/.cache/cugrade-nvrtc`) the way
//! `ci/with-nvrtc` installs NVRTC: NVIDIA's licence allows downloading them, not committing
//! them. Workers get these directories read-only; host system headers (`/usr/include`) are
//! never on NVRTC's search path.

use std::path::{Path, PathBuf};
use std::process::Command;

/// CUDA's headers: `cuda_fp16.h`, `cuda_bf16.h`, `cooperative_groups.h`, ... The versions
/// match NVRTC 13.0.88 (CCCL has no 13.0.88 wheel; 13.0.85 is the one CUDA 13.0 shipped).
pub const HEADER_WHEELS: &[&str] = &["nvidia-cuda-runtime==13.0.88", "nvidia-cuda-cccl==13.0.85"];

/// Numba's CUDA target and NVVM, pinned to CUDA 13.0 so that the PTX it emits (ISA 9.0) loads
/// on a driver-580 machine; newer NVVM wheels emit PTX such a driver rejects. NVVM comes from
/// its own wheel (what `nvidia-cuda-nvcc` would pull in, without nvcc's 37 MB); numba-cuda
/// also loads the CUDA runtime and NVRTC while it compiles. NumPy stays below 2.5: numba-cuda
/// 0.30.4 registers `np.row_stack`, which NumPy 2.5 removed, so with 2.5 (what pip picks for
/// Python 3.12+) every kernel fails to compile.
pub const NUMBA_WHEELS: &[&str] = &[
    "numba-cuda==0.30.4",
    "numpy>=1.22,<2.5",
    "nvidia-nvvm==13.0.88",
    "nvidia-cuda-crt==13.0.88",
    "nvidia-cuda-runtime==13.0.88",
    "nvidia-cuda-nvrtc==13.0.88",
];

/// cugrade's cache directory.
pub fn cache_root() -> PathBuf {
    if let Some(c) = std::env::var_os("CUGRADE_NVRTC_CACHE").filter(|c| !c.is_empty()) {
        return PathBuf::from(c);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    home.join(".cache/cugrade-nvrtc")
}

/// Where `ci/with-nvrtc` (or `pip install --target`) puts the header wheels.
pub fn headers_dir() -> PathBuf {
    cache_root().join("headers")
}

/// Where the Numba wheels go.
pub fn numba_dir() -> PathBuf {
    cache_root().join("numba")
}

/// NVRTC's include directories for CUDA's own headers, best first: `$CUGRADE_CUDA_INCLUDE`
/// (a `:`-separated list), the cache's wheels, then a CUDA 13 toolkit's `include` (NVIDIA's
/// headers only: `include/cccl` holds CCCL since CUDA 13). Empty when none is installed.
pub fn cuda_include_dirs() -> Vec<PathBuf> {
    if let Some(list) = std::env::var_os("CUGRADE_CUDA_INCLUDE").filter(|l| !l.is_empty()) {
        return std::env::split_paths(&list)
            .filter(|p| p.is_dir())
            .collect();
    }
    let roots = [
        headers_dir().join("nvidia/cu13/include"),
        PathBuf::from("/usr/local/cuda/include"),
    ];
    for root in roots {
        if root.join("cooperative_groups.h").is_file() {
            let mut dirs = vec![root.clone()];
            if root.join("cccl/cub").is_dir() {
                dirs.push(root.join("cccl"));
            }
            return dirs;
        }
    }
    Vec::new()
}

/// What `cugrade doctor` says about the headers.
pub fn describe_headers() -> (bool, String) {
    let dirs = cuda_include_dirs();
    let has = |f: &str| dirs.iter().any(|d| d.join(f).exists());
    let wanted = [
        "cooperative_groups.h",
        "cuda_fp16.h",
        "cuda_bf16.h",
        "cub/cub.cuh",
        "cuda/std/cstdint",
    ];
    let missing: Vec<&str> = wanted.iter().copied().filter(|f| !has(f)).collect();
    let fix = format!(
        "fix: `python3 -m pip install --target {} {}` (ci/with-nvrtc does this)",
        headers_dir().display(),
        HEADER_WHEELS.join(" ")
    );
    if dirs.is_empty() {
        (
            false,
            format!("CUDA headers (cooperative_groups.h, cuda_fp16.h, CCCL): not found; {fix}"),
        )
    } else if missing.is_empty() {
        (
            true,
            format!(
                "CUDA headers: {} (cooperative_groups, fp16, bf16, CCCL)",
                dirs[0].display()
            ),
        )
    } else {
        (
            false,
            format!(
                "CUDA headers in {}, but without {}; {fix}",
                dirs[0].display(),
                missing.join(", ")
            ),
        )
    }
}

/// A Python with Numba's CUDA target: what the compile worker runs, and what it may read.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NumbaToolchain {
    /// The interpreter (resolved, no links).
    pub python: PathBuf,
    /// The wheels' directory (a site dir: its `.pth` files matter).
    pub site: PathBuf,
    /// `libnvvm.so.4` and the CUDA runtime the wheels brought.
    pub lib_dir: PathBuf,
    /// Everything the worker must read: the interpreter, its standard library, and the wheels.
    pub read_dirs: Vec<PathBuf>,
}

/// The file in the Numba directory that names the pins it was installed with: a cache left
/// by an older cugrade (other pins) is installed anew rather than trusted.
pub const PINS_STAMP: &str = ".cugrade-pins";

/// The stamp's content for the current pins.
pub fn pins_stamp() -> String {
    NUMBA_WHEELS.join(" ") + "\n"
}

fn numba_present(dir: &Path) -> bool {
    dir.join("numba_cuda").is_dir() && dir.join("nvidia/cu13/lib/libnvvm.so.4").is_file()
}

fn numba_installed(dir: &Path) -> bool {
    numba_present(dir)
        && std::fs::read_to_string(dir.join(PINS_STAMP)).is_ok_and(|s| s == pins_stamp())
}

/// The interpreter and its prefixes: `python3` from `$CUGRADE_PYTHON` or `PATH`.
fn python() -> Result<(PathBuf, Vec<PathBuf>), String> {
    let exe = std::env::var_os("CUGRADE_PYTHON")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "python3".into());
    let out = Command::new(&exe)
        .args([
            "-I",
            "-c",
            "import os,sys,sysconfig as c;p=c.get_paths();print(os.path.realpath(sys.executable));print(sys.version_info>=(3,10));print(p['stdlib']);print(p['platstdlib']);print(c.get_config_var('LIBDIR') or '')",
        ])
        .output()
        .map_err(|e| {
            format!(
                "Numba submissions need Python 3.10+ (`{}`: {e}); fix: install python3",
                Path::new(&exe).display()
            )
        })?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    if !out.status.success() || lines.len() < 4 {
        return Err(format!(
            "`{}` did not run: {}",
            Path::new(&exe).display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    if lines[1] != "True" {
        return Err("Numba submissions need Python 3.10 or newer".into());
    }
    // The interpreter, its standard library and `libpython`'s dir: not the whole prefix,
    // which for a system Python is all of /usr.
    let python = PathBuf::from(lines[0]);
    let mut read = vec![python.clone()];
    read.extend(
        lines[2..]
            .iter()
            .filter(|l| !l.is_empty())
            .map(PathBuf::from),
    );
    read.sort();
    read.dedup();
    Ok((python, read))
}

/// The Numba toolchain if it is installed (nothing is downloaded).
pub fn numba() -> Result<NumbaToolchain, String> {
    numba_in(numba_dir())
}

fn numba_in(dir: PathBuf) -> Result<NumbaToolchain, String> {
    if !numba_installed(&dir) {
        let what = if numba_present(&dir) {
            format!(
                "Numba in {} was installed with other pins than this cugrade's",
                dir.display()
            )
        } else {
            format!(
                "Numba (numba-cuda 0.30.4 with NVVM) is not installed in {}",
                dir.display()
            )
        };
        return Err(format!(
            "{what}; cugrade installs it on the first `.py` submission, or run: rm -rf {dir} && python3 -m pip install --target {dir} {pins} && echo '{stamp}' > {dir}/{PINS_STAMP}",
            dir = dir.display(),
            pins = NUMBA_WHEELS
                .iter()
                .map(|p| format!("'{p}'"))
                .collect::<Vec<_>>()
                .join(" "),
            stamp = pins_stamp().trim_end(),
        ));
    }
    let (python, mut read_dirs) = python()?;
    read_dirs.push(dir.clone());
    Ok(NumbaToolchain {
        python,
        lib_dir: dir.join("nvidia/cu13/lib"),
        site: dir,
        read_dirs,
    })
}

/// The Numba toolchain, installed from PyPI into the cache first if it is missing (one time,
/// ~700 MB, mostly NVRTC, NVVM and LLVM). Concurrent installs each use their own staging dir; the
/// first to finish is renamed into place. A failed install is not retried for every
/// submission of a cohort: the first answer stands for the whole run.
pub fn ensure_numba() -> Result<NumbaToolchain, String> {
    static ONCE: std::sync::Mutex<Option<Result<NumbaToolchain, String>>> =
        std::sync::Mutex::new(None);
    let mut once = ONCE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(r) = once.as_ref() {
        return r.clone();
    }
    let r = install_numba();
    *once = Some(r.clone());
    r
}

fn install_numba() -> Result<NumbaToolchain, String> {
    let dir = numba_dir();
    if !numba_installed(&dir) {
        python()?;
        let parent = dir.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        let staging = parent.join(format!("numba.partial-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        eprintln!(
            "cugrade: installing numba-cuda 0.30.4 and NVVM 13.0 into {} (one time)",
            dir.display()
        );
        let exe = std::env::var_os("CUGRADE_PYTHON")
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "python3".into());
        let status = Command::new(exe)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-warn-script-location",
                "--target",
            ])
            .arg(&staging)
            .args(NUMBA_WHEELS)
            .env("PIP_ROOT_USER_ACTION", "ignore")
            .status()
            .map_err(|e| format!("cannot run pip: {e}"))?;
        if !status.success() {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(format!(
                "installing Numba from PyPI failed ({status}); fix: python3 -m pip install --target {} {}",
                dir.display(),
                NUMBA_WHEELS.join(" ")
            ));
        }
        std::fs::write(staging.join(PINS_STAMP), pins_stamp())
            .map_err(|e| format!("cannot write {}: {e}", staging.join(PINS_STAMP).display()))?;
        if numba_present(&dir) {
            // Installed with other pins: move the old install aside, then replace it.
            let old = parent.join(format!("numba.old-{}", std::process::id()));
            if std::fs::rename(&dir, &old).is_ok() {
                let _ = std::fs::remove_dir_all(&old);
            }
        }
        if std::fs::rename(&staging, &dir).is_err() {
            // Another cugrade finished first.
            let _ = std::fs::remove_dir_all(&staging);
        }
    }
    numba()
}

/// What `cugrade doctor` says about Numba.
/// Installed and able to compile: a trivial kernel (cugrade's own, so outside the sandbox) goes
/// through the same driver as a student's.
pub fn describe_numba() -> (bool, String) {
    match numba() {
        Ok(t) => match probe_numba(&t) {
            Ok(()) => (
                true,
                format!(
                    "Numba: numba-cuda 0.30.4 with NVVM in {} (Python {}); a test kernel compiles",
                    t.site.display(),
                    t.python.display()
                ),
            ),
            Err(e) => (
                false,
                format!(
                    "Numba in {} does not compile a test kernel: {}; fix: remove {} and let \
                     cugrade install it again on the next `.py` submission",
                    t.site.display(),
                    e.lines().next().unwrap_or("").trim(),
                    t.site.display()
                ),
            ),
        },
        Err(e) => (false, format!("Numba: {e}")),
    }
}

fn probe_numba(tool: &NumbaToolchain) -> Result<(), String> {
    use super::numba::{NumbaKernel, Signature, compile};
    let temp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = super::SourceFile {
        name: "probe.py".into(),
        text: "from numba import cuda\n\n@cuda.jit\ndef probe(a):\n    a[0] = 1.0\n".into(),
    };
    let kernel = NumbaKernel {
        name: "probe".into(),
        signatures: vec![Signature {
            text: "(float32[::1],)".into(),
            ndims: vec![1],
        }],
        params: vec![],
    };
    let out = compile(
        tool,
        &[file],
        &[kernel],
        "sm_90",
        temp.path(),
        std::time::Duration::from_secs(60),
    )?;
    match out.first() {
        Some(o) if o.ok => Ok(()),
        Some(o) => Err(o.message.clone()),
        None => Err("no answer from the Numba driver".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_numba_install_with_other_pins_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let numba = dir.path().join("numba");
        std::fs::create_dir_all(numba.join("numba_cuda")).unwrap();
        std::fs::create_dir_all(numba.join("nvidia/cu13/lib")).unwrap();
        std::fs::write(numba.join("nvidia/cu13/lib/libnvvm.so.4"), b"").unwrap();
        let err = numba_in(numba.clone()).unwrap_err();
        assert!(err.contains("other pins"), "{err}");
        assert!(err.contains("numpy>=1.22,<2.5"), "{err}");
        std::fs::write(numba.join(PINS_STAMP), "numba-cuda==0.30.4\n").unwrap();
        assert!(numba_in(numba.clone()).unwrap_err().contains("other pins"));
        std::fs::write(numba.join(PINS_STAMP), pins_stamp()).unwrap();
        // Installed with these pins: what remains is finding a Python.
        if let Err(e) = numba_in(numba) {
            assert!(!e.contains("pins"), "{e}");
        }
        let empty = numba_in(dir.path().join("none")).unwrap_err();
        assert!(empty.contains("is not installed"), "{empty}");
    }

    #[test]
    fn ci_stamps_numba_with_the_same_pins_in_the_same_order() {
        let script = include_str!("../../ci/with-nvrtc");
        let start = script
            .find("numba_pins=(")
            .expect("ci/with-nvrtc has numba_pins");
        let body = &script[start..start + script[start..].find(')').unwrap()];
        let pins: Vec<&str> = body.split('"').skip(1).step_by(2).collect();
        assert_eq!(pins, NUMBA_WHEELS);
    }

    #[test]
    fn the_gpu_script_stamps_the_same_pins() {
        let script = include_str!("../../ci/gpu-numba.sh");
        let stamp = format!("pins=\"{}\"", pins_stamp().trim_end());
        assert!(script.contains(&stamp), "ci/gpu-numba.sh lacks {stamp}");
    }

    #[test]
    fn ci_installs_the_same_pins() {
        let script = include_str!("../../ci/with-nvrtc");
        for pin in HEADER_WHEELS.iter().chain(NUMBA_WHEELS) {
            assert!(script.contains(pin), "ci/with-nvrtc lacks {pin}");
        }
    }
}

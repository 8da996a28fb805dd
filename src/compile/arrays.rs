//! The array libraries of Python function labs (docs/labs/preprocess.md): NumPy runs the lab's
//! reference and, without a GPU, stands in for CuPy; CuPy runs the student's pipeline on a GPU.
//!
//! Each is found once per run, best first: the interpreter's own (a GPU machine's CuPy, a
//! system NumPy), then cugrade's cache (NumPy from the Numba toolchain when that is
//! installed), and otherwise installed into the cache on first use, pinned
//! ([`NUMPY_WHEELS`], [`CUPY_WHEELS`]), like the Numba toolchain. Workers get the folders
//! read-only.

use super::toolchain::{PINS_STAMP, cache_root, numba_dir, python_interpreter};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// NumPy for the reference (and the stand-in) where the interpreter has none.
pub const NUMPY_WHEELS: &[&str] = &["numpy>=1.24,<2.5"];

/// CuPy for CUDA 13 with the CUDA parts it loads, pinned to 13.0 like NVRTC (driver 580).
pub const CUPY_WHEELS: &[&str] = &[
    "cupy-cuda13x==14.0.1",
    "numpy>=2.0,<2.5",
    "nvidia-cuda-nvrtc==13.0.88",
    "nvidia-cuda-runtime==13.0.88",
];

/// An interpreter with an array library: what a Python worker runs and may read.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayEnv {
    pub python: PathBuf,
    /// Folders appended to `sys.path`.
    pub sites: Vec<PathBuf>,
    /// Everything the worker must read.
    pub read_dirs: Vec<PathBuf>,
    /// Variables CuPy needs (`CUDA_PATH`).
    pub env: Vec<(String, String)>,
    /// For reports and `doctor`: `NumPy 2.4.6 (~/.cache/cugrade-nvrtc/numba)`.
    pub describe: String,
}

/// Where cugrade installs NumPy and CuPy when the interpreter has neither.
pub fn numpy_dir() -> PathBuf {
    cache_root().join("numpy")
}

pub fn cupy_dir() -> PathBuf {
    cache_root().join("cupy")
}

/// `module`'s version and the folder that holds it, as `python -I` with `sites` sees it.
fn probe(python: &Path, sites: &[PathBuf], module: &str) -> Option<(String, PathBuf)> {
    let code = format!(
        "import os,sys\nsys.path+={:?}\nimport {module} as m\nprint(m.__version__)\n\
         print(os.path.dirname(os.path.dirname(os.path.realpath(m.__file__))))",
        sites
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
    );
    let out = Command::new(python)
        .args(["-I", "-B", "-c", &code])
        .env_remove("PYTHONPATH")
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    match (out.status.success(), lines.next(), lines.next()) {
        (true, Some(v), Some(dir)) => Some((v.trim().to_string(), PathBuf::from(dir.trim()))),
        _ => None,
    }
}

fn stamped(dir: &Path, pins: &[&str]) -> bool {
    std::fs::read_to_string(dir.join(PINS_STAMP)).is_ok_and(|s| s == pins.join(" ") + "\n")
}

/// NumPy as found without installing anything: (sites, version, its folder).
fn find_numpy(python: &Path) -> Option<(Vec<PathBuf>, String, PathBuf)> {
    if let Some((v, d)) = probe(python, &[], "numpy") {
        return Some((vec![], v, d));
    }
    let mut candidates = vec![];
    if numba_dir().join("numpy").is_dir() {
        candidates.push(numba_dir());
    }
    if stamped(&numpy_dir(), NUMPY_WHEELS) {
        candidates.push(numpy_dir());
    }
    candidates.into_iter().find_map(|site| {
        probe(python, std::slice::from_ref(&site), "numpy").map(|(v, d)| (vec![site], v, d))
    })
}

fn env_for(
    python: PathBuf,
    mut read: Vec<PathBuf>,
    sites: Vec<PathBuf>,
    dirs: &[PathBuf],
    describe: String,
) -> ArrayEnv {
    read.extend(sites.iter().cloned());
    read.extend(dirs.iter().cloned());
    read.sort();
    read.dedup();
    ArrayEnv {
        python,
        sites,
        read_dirs: read,
        env: vec![],
        describe,
    }
}

/// NumPy, installed into the cache first when the interpreter and the cache have none.
pub fn numpy() -> Result<ArrayEnv, String> {
    static ONCE: Mutex<Option<Result<ArrayEnv, String>>> = Mutex::new(None);
    let mut once = ONCE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(r) = once.as_ref() {
        return r.clone();
    }
    let r = (|| {
        let (python, read) = python_interpreter()?;
        let found = match find_numpy(&python) {
            Some(f) => f,
            None => {
                super::install::pins_into(
                    &numpy_dir(),
                    NUMPY_WHEELS,
                    "NumPy (for Python function labs)",
                    "~20 MB download, ~60 MB on disk",
                )?;
                find_numpy(&python).ok_or_else(|| {
                    format!(
                        "NumPy was installed into {} but does not import",
                        numpy_dir().display()
                    )
                })?
            }
        };
        let (sites, version, dir) = found;
        let describe = format!("NumPy {version} ({})", dir.display());
        Ok(env_for(python, read, sites, &[dir], describe))
    })();
    *once = Some(r.clone());
    r
}

/// The CUDA toolkit folder CuPy compiles with (`$CUDA_PATH`, else `/usr/local/cuda`).
fn cuda_path() -> Option<PathBuf> {
    std::env::var_os("CUDA_PATH")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/usr/local/cuda")))
        .filter(|p| p.join("include").is_dir())
        .and_then(|p| p.canonicalize().ok())
}

/// CuPy as found without installing anything: (sites, version, the folders it needs).
fn find_cupy(python: &Path) -> Option<(Vec<PathBuf>, String, Vec<PathBuf>)> {
    let found = |sites: Vec<PathBuf>| {
        let (v, d) = probe(python, &sites, "cupy")?;
        let (_, n) = probe(python, &sites, "numpy")?;
        Some((sites, v, vec![d, n]))
    };
    found(vec![]).or_else(|| {
        stamped(&cupy_dir(), CUPY_WHEELS)
            .then(|| found(vec![cupy_dir()]))
            .flatten()
    })
}

/// CuPy for grading on a GPU: the interpreter's own when it has one, else cugrade's cache
/// (installed on first use).
pub fn cupy() -> Result<ArrayEnv, String> {
    static ONCE: Mutex<Option<Result<ArrayEnv, String>>> = Mutex::new(None);
    let mut once = ONCE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(r) = once.as_ref() {
        return r.clone();
    }
    let r = (|| {
        let (python, read) = python_interpreter()?;
        let found = match find_cupy(&python) {
            Some(f) => f,
            None => {
                super::install::pins_into(
                    &cupy_dir(),
                    CUPY_WHEELS,
                    "CuPy 14.0.1 for CUDA 13 (for CuPy pipelines on a GPU)",
                    "~150 MB download, ~500 MB on disk",
                )?;
                find_cupy(&python).ok_or_else(|| {
                    format!(
                        "CuPy was installed into {} but does not import",
                        cupy_dir().display()
                    )
                })?
            }
        };
        let (sites, version, mut dirs) = found;
        let describe = format!("CuPy {version} ({})", dirs[0].display());
        let cuda = cuda_path();
        dirs.extend(cuda.iter().cloned());
        let mut env = env_for(python, read, sites, &dirs, describe);
        env.env
            .extend(cuda.map(|c| ("CUDA_PATH".to_string(), c.to_string_lossy().into_owned())));
        Ok(env)
    })();
    *once = Some(r.clone());
    r
}

/// What `cugrade doctor` says of the array libraries (nothing is installed).
pub fn describe() -> Vec<String> {
    let Ok((python, _)) = python_interpreter() else {
        return vec!["Python function labs: no Python 3.10+ (install python3)".into()];
    };
    let numpy = match find_numpy(&python) {
        Some((_, v, d)) => format!("NumPy {v} ({})", d.display()),
        None => format!(
            "NumPy not found; installed into {} on first use ({})",
            numpy_dir().display(),
            NUMPY_WHEELS.join(" ")
        ),
    };
    let cupy = match find_cupy(&python) {
        Some((sites, v, d)) => format!(
            "CuPy {v} ({}{})",
            d[0].display(),
            if sites.is_empty() {
                ", the interpreter's own"
            } else {
                ", cugrade's cache"
            }
        ),
        None => format!(
            "CuPy not installed: NumPy stands in for it without a GPU; on a GPU it is installed \
             into {} on first use ({})",
            cupy_dir().display(),
            CUPY_WHEELS[0]
        ),
    };
    vec![
        format!("Python function labs: {numpy}"),
        format!("Python function labs: {cupy}"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cupy_pins_cuda_13_0_like_nvrtc() {
        assert!(CUPY_WHEELS.contains(&super::super::toolchain::NVRTC_WHEEL));
        assert!(CUPY_WHEELS[0].starts_with("cupy-cuda13x=="));
    }

    #[test]
    fn a_cache_stamped_with_other_pins_is_not_trusted() {
        let d = tempfile::tempdir().unwrap();
        assert!(!stamped(d.path(), NUMPY_WHEELS));
        std::fs::write(d.path().join(PINS_STAMP), "numpy==1.0\n").unwrap();
        assert!(!stamped(d.path(), NUMPY_WHEELS));
        std::fs::write(d.path().join(PINS_STAMP), NUMPY_WHEELS.join(" ") + "\n").unwrap();
        assert!(stamped(d.path(), NUMPY_WHEELS));
    }
}

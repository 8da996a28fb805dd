//! The array libraries of Python function labs (docs/labs/preprocess.md): NumPy runs the lab's
//! reference and, without a GPU, stands in for CuPy; CuPy runs the student's pipeline on a GPU.
//!
//! Each is found once per run, best first: the interpreter's own (a GPU machine's CuPy, a
//! system NumPy), then cugrade's cache (NumPy from the Numba toolchain when that is
//! installed), and otherwise installed into the cache on first use, pinned
//! ([`NUMPY_WHEELS`], [`CUPY_WHEELS`]), like the Numba toolchain. Workers get the folders
//! read-only.

use super::toolchain::{PINS_STAMP, cache_root, numba_dir, python_interpreter};
use crate::worker::process::Process;
use std::path::{Path, PathBuf};
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

/// What `python -I` (as the user names it: a venv's `python3` stays the venv's) finds of
/// `module` with `sites` appended to its path.
#[derive(Debug, Clone)]
struct Found {
    version: String,
    /// The folder holding the package (a site-packages folder).
    dir: PathBuf,
    /// `sys.executable` as started (not resolved: a venv's interpreter is a link whose venv
    /// is found beside it) and `sys.prefix`.
    executable: PathBuf,
    prefix: PathBuf,
}

fn probe(sites: &[PathBuf], module: &str) -> Option<Found> {
    let code = format!(
        "import os,sys\nsys.path+={:?}\nimport {module} as m\nprint(m.__version__)\n\
         print(os.path.dirname(os.path.dirname(os.path.realpath(m.__file__))))\n\
         print(os.path.abspath(sys.executable))\nprint(sys.prefix)",
        sites
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
    );
    let out = Process::new(super::install::python_exe())
        .args(["-I", "-B", "-c", &code])
        .capture()
        .run()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout.bytes).into_owned();
    let l: Vec<&str> = text.lines().map(str::trim).collect();
    if !out.status.success() || l.len() < 4 {
        return None;
    }
    Some(Found {
        version: l[0].to_string(),
        dir: PathBuf::from(l[1]),
        executable: PathBuf::from(l[2]),
        prefix: PathBuf::from(l[3]),
    })
}

fn stamped(dir: &Path, pins: &[&str]) -> bool {
    std::fs::read_to_string(dir.join(PINS_STAMP)).is_ok_and(|s| s == pins.join(" ") + "\n")
}

/// NumPy as found without installing anything: the sites it needs, and what was found.
fn find_numpy() -> Option<(Vec<PathBuf>, Found)> {
    if let Some(f) = probe(&[], "numpy") {
        return Some((vec![], f));
    }
    let mut candidates = vec![];
    if numba_dir().join("numpy").is_dir() {
        candidates.push(numba_dir());
    }
    if stamped(&numpy_dir(), NUMPY_WHEELS) {
        candidates.push(numpy_dir());
    }
    // CuPy's install brings NumPy along.
    if stamped(&cupy_dir(), CUPY_WHEELS) {
        candidates.push(cupy_dir());
    }
    candidates
        .into_iter()
        .find_map(|site| probe(std::slice::from_ref(&site), "numpy").map(|f| (vec![site], f)))
}

/// The environment of an interpreter that found `dirs` (the packages' folders).
fn env_for(
    found: &Found,
    sites: Vec<PathBuf>,
    dirs: &[PathBuf],
    describe: String,
) -> Result<ArrayEnv, String> {
    let (_, mut read) = python_interpreter()?;
    read.push(found.executable.clone());
    read.push(found.prefix.clone());
    read.extend(sites.iter().cloned());
    read.extend(dirs.iter().cloned());
    read.sort();
    read.dedup();
    Ok(ArrayEnv {
        python: found.executable.clone(),
        sites,
        read_dirs: read,
        env: vec![],
        describe,
    })
}

/// A lookup done once per run: its first answer stands for the whole run (a failed install is
/// not retried for every student of a cohort).
type Once = Mutex<Option<Result<ArrayEnv, String>>>;

fn once(cell: &Once, find: impl FnOnce() -> Result<ArrayEnv, String>) -> Result<ArrayEnv, String> {
    let mut cell = cell
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    cell.get_or_insert_with(find).clone()
}

/// NumPy, installed into the cache first when the interpreter and the cache have none.
pub fn numpy() -> Result<ArrayEnv, String> {
    static ONCE: Once = Mutex::new(None);
    once(&ONCE, || {
        python_interpreter()?;
        let found = match find_numpy() {
            Some(f) => f,
            None => {
                super::install::pins_into(
                    &numpy_dir(),
                    NUMPY_WHEELS,
                    "NumPy (for Python function labs)",
                    "~20 MB download, ~60 MB on disk",
                )?;
                find_numpy().ok_or_else(|| {
                    format!(
                        "NumPy was installed into {} but does not import",
                        numpy_dir().display()
                    )
                })?
            }
        };
        let (sites, f) = found;
        let describe = format!("NumPy {} ({})", f.version, f.dir.display());
        env_for(&f, sites, std::slice::from_ref(&f.dir), describe)
    })
}

/// SciPy, which stands in for `cupyx.scipy` without a GPU (`cupyx_stand_in.py`), for NumPy 2.
pub const SCIPY_WHEELS: &[&str] = &["scipy>=1.13,<1.17", "numpy>=1.24,<2.5"];

pub fn scipy_dir() -> PathBuf {
    cache_root().join("scipy")
}

/// `numpy` with SciPy importable too: the interpreter's own (with NumPy's sites), else
/// cugrade's cache, installed there on first use (only a pipeline that imports
/// `cupyx.scipy` asks).
pub fn with_scipy(numpy: &ArrayEnv) -> Result<ArrayEnv, String> {
    static ONCE: Once = Mutex::new(None);
    once(&ONCE, || {
        let find = || {
            probe(&numpy.sites, "scipy")
                .map(|f| (vec![], f))
                .or_else(|| {
                    let mut sites = numpy.sites.clone();
                    sites.push(scipy_dir());
                    stamped(&scipy_dir(), SCIPY_WHEELS)
                        .then(|| probe(&sites, "scipy"))
                        .flatten()
                        .map(|f| (vec![scipy_dir()], f))
                })
        };
        let (extra, found) = match find() {
            Some(f) => f,
            None => {
                super::install::pins_into(
                    &scipy_dir(),
                    SCIPY_WHEELS,
                    "SciPy (stands in for cupyx.scipy without a GPU)",
                    "~40 MB download, ~120 MB on disk",
                )?;
                find().ok_or_else(|| {
                    format!(
                        "SciPy was installed into {} but does not import",
                        scipy_dir().display()
                    )
                })?
            }
        };
        let mut env = numpy.clone();
        env.sites.extend(extra);
        env.read_dirs.push(found.dir.clone());
        env.read_dirs.extend(env.sites.clone());
        env.read_dirs.sort();
        env.read_dirs.dedup();
        env.describe = format!(
            "{}, SciPy {} ({})",
            numpy.describe,
            found.version,
            found.dir.display()
        );
        Ok(env)
    })
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

/// CuPy as found without installing anything: the sites it needs, CuPy's and NumPy's.
fn find_cupy() -> Option<(Vec<PathBuf>, Found, Found)> {
    let found = |sites: Vec<PathBuf>| {
        let c = probe(&sites, "cupy")?;
        let n = probe(&sites, "numpy")?;
        Some((sites, c, n))
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
    static ONCE: Once = Mutex::new(None);
    once(&ONCE, || {
        python_interpreter()?;
        let found = match find_cupy() {
            Some(f) => f,
            None => {
                super::install::pins_into(
                    &cupy_dir(),
                    CUPY_WHEELS,
                    "CuPy 14.0.1 for CUDA 13 (for CuPy pipelines on a GPU)",
                    "~150 MB download, ~500 MB on disk",
                )?;
                find_cupy().ok_or_else(|| {
                    format!(
                        "CuPy was installed into {} but does not import",
                        cupy_dir().display()
                    )
                })?
            }
        };
        let (sites, c, n) = found;
        let describe = format!("CuPy {} ({})", c.version, c.dir.display());
        let cuda = cuda_path();
        let mut dirs = vec![c.dir.clone(), n.dir.clone()];
        dirs.extend(cuda.iter().cloned());
        let mut env = env_for(&c, sites, &dirs, describe)?;
        env.env
            .extend(cuda.map(|c| ("CUDA_PATH".to_string(), c.to_string_lossy().into_owned())));
        Ok(env)
    })
}

/// What `cugrade doctor` says of the array libraries (nothing is installed).
pub fn describe() -> Vec<String> {
    if python_interpreter().is_err() {
        return vec!["Python function labs: no Python 3.10+ (install python3)".into()];
    }
    let numpy = match find_numpy() {
        Some((_, f)) => format!("NumPy {} ({})", f.version, f.dir.display()),
        None => format!(
            "NumPy not found; installed into {} on first use ({})",
            numpy_dir().display(),
            NUMPY_WHEELS.join(" ")
        ),
    };
    let cupy = match find_cupy() {
        Some((sites, c, _)) => format!(
            "CuPy {} ({}{})",
            c.version,
            c.dir.display(),
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
    fn the_gpu_script_stamps_the_same_pins() {
        let script = include_str!("../../ci/gpu-cupy-cache.sh");
        let stamp = format!("printf '%s\\n' \"{}\"", CUPY_WHEELS.join(" "));
        assert!(
            script.contains(&stamp),
            "ci/gpu-cupy-cache.sh lacks {stamp}"
        );
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

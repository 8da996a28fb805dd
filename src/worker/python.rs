//! Python function labs (docs/labs/preprocess.md): a worker that becomes a Python process.
//!
//! The grader starts a worker of role [`Role::Python`](super::Role), which confines itself like
//! every worker and answers `Ready`; its first request, [`Request::PythonStart`], names the
//! submission's modules and the function. The worker writes them into its temp dir with the
//! harness (`python_harness.py`, see `scripts`) and, where asked, the NumPy stand-in for CuPy
//! (`cupy_stand_in.py`), then `exec`s the interpreter in its own place: the sandbox (namespaces,
//! Landlock, seccomp, rlimits, cgroup) stays, and the channel is the same pair of pipes, now
//! spoken by the harness. Each call is one frame each way, so the parent's clock around a
//! call covers the table going in, the function, the device's work and the features coming
//! back, and nothing in the student's process can stop it early.

use super::scripts;
use crate::compile::SourceFile;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What the worker turns into.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PythonStart {
    /// The interpreter as the user's environment names it (a venv's stays the venv's).
    pub python: PathBuf,
    /// The submission's (or the reference's) Python files.
    pub files: Vec<SourceFile>,
    /// Modules to import, in order: the first that defines `function` is used.
    pub modules: Vec<String>,
    pub function: String,
    /// Folders appended to `sys.path` (cugrade's NumPy or CuPy in its cache).
    pub sites: Vec<PathBuf>,
    /// Whether `import cupy` is the NumPy stand-in (no GPU) rather than a real CuPy.
    pub stand_in: bool,
    /// Whether the code may import `cupy` at all (the reference is plain NumPy).
    pub cupy: bool,
    /// Variables the array library needs (`CUDA_PATH` for CuPy).
    #[serde(default)]
    pub env: Vec<(String, String)>,
}

/// One column of a table: its name, NumPy dtype (`<f4`) and shape; its bytes travel as a blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<usize>,
}

/// A call: the table's columns (blobs in order) and scalar entries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Call {
    pub columns: Vec<Column>,
    pub scalars: std::collections::BTreeMap<String, serde_json::Value>,
    /// The harness alone: take the table, answer an array of this dtype and shape without
    /// calling the function (what moving the data costs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub null: Option<Column>,
    /// A course's CPU implementation (`cpu: {python: ...}`): call the function with the
    /// columns and scalars as keyword arguments, time it in the harness, and answer with the
    /// columns named here (its outputs, written in place).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Vec<String>>,
}

/// Where in the submission something failed, as the harness saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PyError {
    /// `exception`, `import`, `unsupported` (the stand-in cannot do it), `memory`.
    #[serde(default)]
    pub kind: String,
    pub message: String,
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub line: Option<u32>,
    #[serde(default)]
    pub details: String,
}

/// The harness's first answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Started {
    /// The function was found; `backend` says what `cupy` is (a CuPy version, or NumPy
    /// standing in).
    Ready { backend: String },
    /// No module defines the function: why each import failed (empty when they all imported).
    NoFunction(Vec<PyError>),
    /// NumPy or CuPy could not be imported: the machine's fault.
    Machine(PyError),
}

/// What a call returned.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The array: NumPy dtype string, shape and its bytes (C order).
    Array {
        dtype: String,
        shape: Vec<usize>,
        bytes: Vec<u8>,
    },
    Raised(PyError),
}

/// In the worker: write the files, the harness and the stand-in into `temp`, then become the
/// interpreter with `proto` as its answer channel. Returns only when that failed.
pub(crate) fn exec(start: &PythonStart, temp: &Path, proto: std::os::fd::RawFd) -> String {
    let io = |e: std::io::Error| format!("cannot prepare the Python harness: {e}");
    let prepare = || -> Result<super::process::Process, String> {
        let src = temp.join("py-src");
        std::fs::create_dir_all(&src).map_err(io)?;
        crate::compile::write_sources(&start.files, &src).map_err(|e| match e {
            crate::compile::WriteError::Name(m) => m,
            crate::compile::WriteError::Io(e) => io(e),
        })?;
        let stand_in = temp.join("cupy-stand-in");
        if start.stand_in {
            // `cupyx` beside it: cupyx.scipy from SciPy, a few functions, the rest refused.
            scripts::write_stand_in(&stand_in, true).map_err(io)?;
        }
        let request = serde_json::json!({
            "src": src,
            "modules": start.modules,
            "function": start.function,
            "sites": start.sites,
            "stand_in": start.stand_in.then_some(&stand_in),
            "cupy": start.cupy,
        });
        let req = temp.join("python-request.json");
        std::fs::write(&req, request.to_string()).map_err(io)?;
        let python = scripts::script(
            &start.python,
            &["-I", "-B"],
            temp,
            "cugrade_python_harness.py",
            scripts::PYTHON_HARNESS,
            &[&req],
        )
        .map_err(io)?;
        Ok(python
            .envs(start.env.iter().map(|(k, v)| (k, v)))
            .env("CUPY_CACHE_DIR", temp.join("cupy-cache")))
    };
    let python = match prepare() {
        Ok(p) => p,
        Err(e) => return e,
    };
    // SAFETY: dup2 onto fd 1 of a descriptor this process owns.
    if unsafe { libc::dup2(proto, 1) } < 0 {
        return format!(
            "cannot hand the channel to Python: {}",
            std::io::Error::last_os_error()
        );
    }
    let err = python.exec();
    format!("cannot start {}: {err}", start.python.display())
}

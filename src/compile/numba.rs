//! Numba submissions: `@cuda.jit` kernels in `.py` files, compiled to PTX by numba-cuda inside
//! the sandboxed compile worker, then launched with Numba's calling convention.
//!
//! Numba's PTX differs from NVRTC's in three ways, each handled here:
//! - the entry name is mangled (`_ZN6reduce12reduce_naiveB2v1...`): [`rename_entry`] gives it
//!   the Python name, so everything downstream finds the kernel as for CUDA C++;
//! - each array argument is a descriptor of `5 + 2 * ndim` parameters (meminfo, parent,
//!   nitems, itemsize, data, shape..., strides...): `inputs::numba_invocation` builds them
//!   from the contract's buffers, for the emulator and the GPU alike;
//! - `.loc` lines point into the `.py` file (compiled with `lineinfo`), so findings name
//!   `reduce.py:LINE` like they name `reduce.cu:LINE`.
//!
//! The signature comes from the contract: `f32*` is `float32[::1]`, `i32` is `int32`, and a
//! buffer with a `shape` of 2 or 3 entries may be an N-D C-contiguous array instead
//! ([`ArrayStyle`]). Importing student Python runs student code: [`compile`] runs only in the
//! worker, whose sandbox the interpreter inherits.

use super::SourceFile;
use super::toolchain::NumbaToolchain;
use crate::rubric::convention::Signature;
use crate::worker::process::Captured;
use crate::worker::scripts;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

/// One kernel to compile, with the signatures to try in order (see [`signatures`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NumbaKernel {
    pub name: String,
    pub signatures: Vec<Signature>,
    /// The contract's parameter names, for a clear message when the counts differ.
    #[serde(default)]
    pub params: Vec<String>,
}

/// What the driver reported for one kernel.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub kernel: String,
    pub ok: bool,
    /// No `@cuda.jit` function of that name (and no import error to blame).
    pub missing: bool,
    /// Submission-relative `.py` file and line the finding is about.
    pub file: Option<String>,
    pub line: Option<u32>,
    pub message: String,
    pub details: String,
    /// Index into the kernel's signatures of the one that compiled (or failed).
    pub signature: usize,
    #[serde(default, skip_serializing)]
    pub ptx: Option<String>,
}

#[derive(Deserialize)]
struct Answer {
    results: Vec<RawOutcome>,
    #[serde(default)]
    toolchain_error: Option<String>,
}

#[derive(Deserialize)]
struct RawOutcome {
    kernel: String,
    ok: bool,
    missing: bool,
    file: Option<String>,
    line: Option<u32>,
    message: String,
    details: String,
    signature: usize,
    #[serde(default)]
    ptx: Option<String>,
}

/// Give the module's (single) mangled entry the kernel's Python name, and name the `.py` file
/// in `.file` by its submission-relative path.
pub fn rename_entry(ptx: &str, name: &str, file: &str) -> String {
    let entry = regex::Regex::new(r"\.entry\s+([A-Za-z_$][A-Za-z0-9_$]*)").expect("static regex");
    let mut out = match entry.captures(ptx) {
        Some(c) if &c[1] != name => {
            let mangled =
                regex::Regex::new(&format!(r"\b{}([A-Za-z0-9_$]*)", regex::escape(&c[1])))
                    .expect("escaped regex");
            mangled
                .replace_all(ptx, |m: &regex::Captures| format!("{name}{}", &m[1]))
                .into_owned()
        }
        _ => ptx.to_string(),
    };
    let dotfile = regex::Regex::new(r#"(?m)^(\s*\.file\s+\d+\s+)"[^"]*""#).expect("static regex");
    out = dotfile
        .replace_all(&out, |c: &regex::Captures| format!("{}\"{file}\"", &c[1]))
        .into_owned();
    out
}

/// `sm_90` → (9, 0); `sm_100` → (10, 0); `sm_89` → (8, 9).
fn compute_capability(arch: &str) -> (u32, u32) {
    let digits: String = arch.chars().filter(char::is_ascii_digit).collect();
    match digits.len() {
        2.. => {
            let (major, minor) = digits.split_at(digits.len() - 1);
            (major.parse().unwrap_or(9), minor.parse().unwrap_or(0))
        }
        _ => (9, 0),
    }
}

/// `timeouts.import_s` when a request does not say.
pub fn default_import_s() -> f64 {
    10.0
}

/// How long Python may take to import Numba and compile its trivial probe kernel before the
/// student's files are imported (the toolchain's time, not the student's).
pub const STARTUP: Duration = Duration::from_secs(90);

/// In the worker: write the sources, run the driver with the toolchain's interpreter, read
/// its answer. `Err` is a toolchain failure (not the student's), with what Python printed.
/// The student's modules get `import_budget` to import, whatever the number of kernels: the
/// driver marks when the toolchain is up and when the imports are done, and a module that has
/// not finished importing in time stops Python; every kernel then fails with "did not finish
/// importing". (The marks are files the student's code could write too: that only moves it on
/// to the compile phase, which the parent's deadline bounds.)
pub fn compile(
    tool: &NumbaToolchain,
    files: &[SourceFile],
    kernels: &[NumbaKernel],
    arch: &str,
    temp: &Path,
    import_budget: Duration,
) -> Result<Vec<Outcome>, String> {
    let paths = write_request(tool, files, kernels, arch, temp)?;
    let status = match run_driver(tool, temp, &paths, files, kernels, import_budget)? {
        Waited::Ended(status) => status,
        Waited::NotImported(outcomes) => return Ok(outcomes),
    };
    read_answer(temp, &paths, status, files, kernels)
}

/// The files a compile shares with the Numba driver, all in the worker's temp folder.
struct DriverFiles {
    /// Written by the driver once the toolchain is up.
    ready: PathBuf,
    /// The student's file being imported.
    importing: PathBuf,
    /// Written by the driver once the student's modules are imported.
    imported: PathBuf,
    request: PathBuf,
    answer: PathBuf,
    /// What Python printed.
    log: PathBuf,
}

/// The error of a compile that could not be set up.
fn prepare_error(e: std::io::Error) -> String {
    format!("cannot prepare the Numba compile: {e}")
}

/// Write the student's sources (and the `cupy` stand-in) and the driver's request.
fn write_request(
    tool: &NumbaToolchain,
    files: &[SourceFile],
    kernels: &[NumbaKernel],
    arch: &str,
    temp: &Path,
) -> Result<DriverFiles, String> {
    let src = temp.join("numba-src");
    let io = prepare_error;
    std::fs::create_dir_all(&src).map_err(io)?;
    super::write_sources(files, &src).map_err(|e| match e {
        super::WriteError::Name(m) => m,
        super::WriteError::Io(e) => io(e),
    })?;
    // A module that imports `cupy` for its host arrays (CuPy arrays passed to Numba kernels)
    // imports cugrade's stand-in: there is no CuPy in the Numba toolchain.
    if !src.join("cupy").exists() && !src.join("cupy.py").exists() {
        scripts::write_stand_in(&src, false).map_err(io)?;
    }
    let ready = temp.join("numba-ready");
    let importing = temp.join("numba-importing");
    let imported = temp.join("numba-imported");
    let request = serde_json::json!({
        "ready": ready,
        "importing": importing,
        "imported": imported,
        "src": src,
        "site": tool.site,
        "files": files.iter().map(|f| &f.name).collect::<Vec<_>>(),
        "cc": compute_capability(arch),
        "kernels": kernels.iter().map(|k| serde_json::json!({
            "name": k.name,
            "signatures": k.signatures.iter().map(|s| &s.text).collect::<Vec<_>>(),
            "params": k.params,
        })).collect::<Vec<_>>(),
    });
    let req_path = temp.join("numba-request.json");
    std::fs::write(&req_path, request.to_string()).map_err(io)?;
    Ok(DriverFiles {
        ready,
        importing,
        imported,
        request: req_path,
        answer: temp.join("numba-answer.json"),
        log: temp.join("numba-output.txt"),
    })
}

/// How the wait for the driver ended.
enum Waited {
    /// Python exited.
    Ended(ExitStatus),
    /// The student's modules did not finish importing within their budget: every kernel's
    /// outcome.
    NotImported(Vec<Outcome>),
}

/// Run the driver under the toolchain's Python until it exits, stopping it when the toolchain
/// does not start within [`STARTUP`] or the student's modules do not import within
/// `import_budget`.
fn run_driver(
    tool: &NumbaToolchain,
    temp: &Path,
    f: &DriverFiles,
    files: &[SourceFile],
    kernels: &[NumbaKernel],
    import_budget: Duration,
) -> Result<Waited, String> {
    // Isolated (-I: no environment, no user site, no script dir on the path) and without the
    // site module's start-up (-S: none of the host's site-packages, `.pth` files or
    // sitecustomize, which a host may keep outside the worker's view, e.g. in /etc): the
    // interpreter sees its standard library and the pinned wheels, which the driver adds.
    let mut child = scripts::driver(
        &tool.python,
        &["-I", "-S", "-B"],
        temp,
        "cugrade_numba_driver.py",
        scripts::NUMBA_DRIVER,
        &[&f.request, &f.answer],
        &f.log,
    )
    .map_err(prepare_error)?
    .env("LD_LIBRARY_PATH", &tool.lib_dir)
    // The wheels' CUDA tree: without it, numba-cuda's path finder starts a second Python to
    // look for the CUDA runtime (0.2 s of every Numba compile).
    .env("CUDA_HOME", tool.lib_dir.parent().unwrap_or(&tool.lib_dir))
    .env("NUMBA_CACHE_DIR", temp.join("numba-cache"))
    .env("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")
    // Ended at once when its budget is spent, as before the runner (SIGKILL, its group).
    .grace(Duration::ZERO)
    .spawn()
    .map_err(|e| format!("cannot run {}: {e}", tool.python.display()))?;
    let started = std::time::Instant::now();
    let mut ready_at: Option<std::time::Instant> = None;
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Ok(Waited::Ended(s)),
            Ok(None) => {}
            Err(e) => return Err(format!("cannot wait for Python: {e}")),
        }
        if ready_at.is_none() && f.ready.exists() {
            ready_at = Some(std::time::Instant::now());
        }
        match ready_at {
            None if started.elapsed() > STARTUP => {
                child.stop();
                return Err(format!(
                    "Numba did not start within {} s (the toolchain, not the submission):\n{}",
                    STARTUP.as_secs(),
                    read_capped(&f.log, 16 * 1024)
                ));
            }
            Some(at) if !f.imported.exists() && at.elapsed() > import_budget => {
                child.stop();
                let file = importing_file(&f.importing, files);
                return Ok(Waited::NotImported(not_imported(
                    kernels,
                    file,
                    format!(
                        "the module did not finish importing within {:.0} s",
                        import_budget.as_secs_f64()
                    ),
                    read_capped(&f.log, 16 * 1024),
                )));
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The student's file the driver was importing, when it names one of theirs.
fn importing_file(importing: &Path, files: &[SourceFile]) -> Option<String> {
    std::fs::read_to_string(importing)
        .ok()
        .map(|f| f.trim().to_string())
        .filter(|f| files.iter().any(|s| &s.name == f))
}

/// Every kernel's outcome once Python exited with `status`: from the driver's answer, unless
/// the submission filled the scratch or ended Python while it was imported.
fn read_answer(
    temp: &Path,
    f: &DriverFiles,
    status: ExitStatus,
    files: &[SourceFile],
    kernels: &[NumbaKernel],
) -> Result<Vec<Outcome>, String> {
    if let Some(why) = scratch_exhausted(temp) {
        return Ok(kernels
            .iter()
            .map(|k| Outcome {
                kernel: k.name.clone(),
                message: why.clone(),
                ..Outcome::default()
            })
            .collect());
    }
    let printed = read_capped(&f.log, 16 * 1024);
    if f.ready.exists() && !f.imported.exists() && !f.answer.exists() {
        // Python ended while the student's code was importing: `exit()`, `os._exit()`, a
        // crash in an extension it loaded.
        let file = importing_file(&f.importing, files);
        return Ok(not_imported(
            kernels,
            file,
            format!(
                "the module did not finish importing: Python ended while importing it ({status})"
            ),
            printed,
        ));
    }
    let text = match std::fs::read(&f.answer) {
        Ok(b) if b.len() <= 64 << 20 => String::from_utf8_lossy(&b).into_owned(),
        Ok(_) => return Err("the Numba driver's answer is too large".into()),
        Err(_) => {
            return Err(format!(
                "Python exited ({status}) without an answer:\n{printed}"
            ));
        }
    };
    let answer: Answer = serde_json::from_str(&text)
        .map_err(|e| format!("malformed answer from the Numba driver: {e}\n{printed}"))?;
    if let Some(e) = answer.toolchain_error {
        return Err(format!(
            "Numba does not work on this machine (the toolchain, not the submission): {e}\n{printed}"
        ));
    }
    Ok(answer
        .results
        .into_iter()
        .map(|r| Outcome {
            kernel: r.kernel,
            ok: r.ok && r.ptx.is_some(),
            missing: r.missing,
            file: r.file,
            line: r.line,
            message: r.message,
            details: r.details,
            signature: r.signature,
            ptx: r.ptx,
        })
        .collect())
}

/// Every kernel's outcome when the student's modules did not finish importing.
fn not_imported(
    kernels: &[NumbaKernel],
    file: Option<String>,
    message: String,
    printed: String,
) -> Vec<Outcome> {
    kernels
        .iter()
        .map(|k| Outcome {
            kernel: k.name.clone(),
            ok: false,
            missing: false,
            file: file.clone(),
            line: None,
            message: message.clone(),
            details: printed.clone(),
            signature: 0,
            ptx: None,
        })
        .collect()
}

/// When the worker's private scratch (a tmpfs, see `sandbox::mounts`) is all but full after the
/// import, the submission filled it: its fault, said so, even where the compiler's answer
/// could no longer be written (which would otherwise read as a broken toolchain).
fn scratch_exhausted(temp: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(temp.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs fills a valid struct for a valid path.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 || st.f_type != 0x0102_1994 {
        return None;
    }
    let free = st.f_bavail as u64 * st.f_bsize as u64;
    let total = st.f_blocks as u64 * st.f_bsize as u64;
    (free < 16 << 20).then(|| {
        format!(
            "the submission filled its {} MiB of scratch space while it was imported: no room \
             was left for the compiler",
            total >> 20
        )
    })
}

fn read_capped(path: &Path, cap: usize) -> String {
    let c = Captured::from_file(path, cap);
    let s = String::from_utf8_lossy(&c.bytes).into_owned();
    if c.truncated() {
        format!("{s}\n[output truncated: {} bytes]", c.total)
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_takes_the_python_name() {
        let ptx = ".common .global .align 8 .u64 _ZN08NumbaEnv1k6vecaddB2v1E5Arr;\n.visible .entry _ZN1k6vecaddB2v1E5Arr(\n.param .u64 _ZN1k6vecaddB2v1E5Arr_param_0\n)\n{\nld.param.u64 %rd1, [_ZN1k6vecaddB2v1E5Arr_param_0];\n}\n.file 1 \"/tmp/cugrade-worker-x/numba-src/labs/k.py\"\n";
        let out = rename_entry(ptx, "vector_add", "labs/k.py");
        assert_eq!(super::super::ptx_entries(&out), vec!["vector_add"]);
        assert!(out.contains("[vector_add_param_0]"));
        assert!(out.contains("_ZN08NumbaEnv1k6vecaddB2v1E5Arr;"), "{out}");
        assert!(out.contains(".file 1 \"labs/k.py\""));
        assert_eq!(compute_capability("sm_90"), (9, 0));
        assert_eq!(compute_capability("sm_100"), (10, 0));
        assert_eq!(compute_capability("sm_89"), (8, 9));
    }
}

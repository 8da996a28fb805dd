//! `cugrade doctor`: what this machine offers for grading, what is missing with the fix, and
//! whether everything that grading needs here is present (the exit code, so CI can gate on it).
//!
//! What is needed comes from a rubric: `--rubric FILE`, else the rubric the submission's
//! `cugrade.yaml` names (SUBMISSION, default `.`). NVRTC and CUDA's headers are needed by every
//! rubric whose reference or accepted submissions are CUDA C++; Numba by a rubric that accepts
//! `.py` kernels (given with `--rubric`), or by a submission that has them (a `.py` file that
//! imports `numba`, or Python files alone) and whose CUDA C++ or PTX files do not already
//! define every milestone's kernel: a plotting script beside `.cu` kernels needs nothing; a GPU with
//! `--backend cuda`, and then cuBLAS when a threshold is measured against it. Without any
//! rubric, NVRTC and the headers are needed (every built-in lab compiles CUDA C++).
//! `--install` first installs what is needed and missing into cugrade's cache (and nvJitLink
//! where Numba or PTX kernels are graded without a GPU: the registers they report).

use crate::backend::cuda;
use crate::errors::CliError;
use crate::exit;
use crate::rubric::LoadedRubric;
use crate::rubric::schema::{Against, Language};
use crate::setup::BackendChoice;
use std::path::PathBuf;

/// What `cugrade doctor` was asked.
#[derive(Debug, Clone)]
pub struct DoctorOptions {
    pub rubric: Option<PathBuf>,
    pub submission: Option<PathBuf>,
    pub backend: BackendChoice,
    pub install: bool,
}

/// What grading needs on this machine, and for what (for the last line).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Needs {
    pub nvrtc: bool,
    pub headers: bool,
    pub numba: bool,
    /// A Python for reading CuPy kernels.
    pub cupy: bool,
    /// NumPy (and CuPy on a GPU) for a Python function lab (docs/labs/preprocess.md).
    pub arrays: bool,
    /// NumPy for the course's own CPU implementation (`cpu: {python: ...}`).
    pub cpu_python: bool,
    pub gpu: bool,
    pub cublas: bool,
    /// nvJitLink, for ptxas's registers of PTX and Numba kernels without a GPU. Never missing
    /// (without it those registers are said to be unknown), but `--install` installs it.
    pub nvjitlink: bool,
    pub what: String,
}

/// What a rubric needs, with `python` when the submission has `.py` kernels and `accepts_all`
/// when every language the rubric accepts counts (an instructor's `--rubric`).
pub fn needs_of(r: &LoadedRubric, python: bool, accepts_all: bool, gpu: bool) -> Needs {
    let accepts = |l: Language| r.rubric.languages.as_ref().is_none_or(|v| v.contains(&l));
    let reference_cu = r
        .reference_path
        .extension()
        .is_none_or(|e| e != "ptx" && e != "py");
    let arrays = crate::commands::init::is_function_lab(r);
    let nvrtc = reference_cu || (accepts_all && accepts(Language::Cuda));
    let cublas = gpu
        && r.rubric
            .milestones
            .iter()
            .flat_map(|m| &m.performance)
            .any(|p| matches!(p.against, Against::Cublas));
    let cpu_python = r
        .rubric
        .contracts
        .values()
        .any(|c| matches!(c.cpu, Some(crate::rubric::schema::CpuImpl::Python(_))));
    let numba = accepts(Language::Numba) && (python || accepts_all);
    let ptx = accepts_all && accepts(Language::Ptx);
    Needs {
        cpu_python,
        nvrtc,
        headers: nvrtc,
        numba,
        cupy: accepts(Language::Cupy) && accepts_all && !arrays,
        arrays,
        gpu,
        cublas,
        nvjitlink: !gpu && (numba || ptx),
        what: r.rubric.assignment.clone(),
    }
}

/// The needs for this invocation; a bad rubric or manifest is exit 2.
fn needs(o: &DoctorOptions) -> Result<Needs, CliError> {
    let gpu = o.backend == BackendChoice::Cuda;
    let path = o.submission.clone().unwrap_or_else(|| PathBuf::from("."));
    // A folder is read only when it is a submission (has cugrade.yaml) or was named.
    let sub = (o.submission.is_some() || path.join("cugrade.yaml").is_file())
        .then(|| crate::submission::load(&path).ok())
        .flatten();
    let langs = sub.as_ref().map(|s| s.languages()).unwrap_or_default();
    let python = langs.contains(&Language::Numba);
    let cupy = langs.contains(&Language::Cupy);
    let ptx = langs.contains(&Language::Ptx);
    if let Some(r) = &o.rubric {
        let loaded = crate::rubric::load(r)?;
        // Named, the submission decides; else every language the rubric accepts counts (an
        // instructor's machine grades whatever comes).
        let mut n = match sub.as_ref().filter(|_| o.submission.is_some()) {
            Some(s) => needs_of(&loaded, python && !kernels_in_cuda(s, &loaded), false, gpu),
            None => needs_of(&loaded, python, true, gpu),
        };
        n.cupy |= cupy;
        n.nvjitlink |= ptx && !gpu;
        return Ok(n);
    }
    if let Some(s) = sub.as_ref().filter(|s| s.manifest.rubric.is_some()) {
        let r = crate::commands::check::find_rubric(None, s)?;
        let python = python && !kernels_in_cuda(s, &r.loaded);
        let mut n = needs_of(&r.loaded, python, false, gpu);
        n.cupy = cupy
            && r.loaded
                .rubric
                .languages
                .as_ref()
                .is_none_or(|v| v.contains(&Language::Cupy));
        n.nvjitlink |= ptx && !gpu;
        n.what = format!("{} ({})", n.what, s.root.display());
        return Ok(n);
    }
    Ok(Needs {
        nvrtc: true,
        headers: true,
        numba: python,
        cupy,
        arrays: false,
        cpu_python: false,
        gpu,
        cublas: false,
        nvjitlink: (python || ptx) && !gpu,
        what: "CUDA C++ submissions".into(),
    })
}

/// Whether the submission's CUDA C++ or PTX files define every kernel the rubric's milestones
/// name: grading finds those first, so its Python files are never compiled as kernels and
/// Numba is not needed, whatever they import (a benchmark script using `numba`).
fn kernels_in_cuda(sub: &crate::submission::Submission, r: &LoadedRubric) -> bool {
    let in_cuda = |k: &str| {
        sub.sources
            .iter()
            .any(|f| !crate::commands::init::starter::definitions(&f.text, k).is_empty())
            || sub
                .ptx
                .iter()
                .any(|f| crate::compile::ptx_entries(&f.text).iter().any(|e| e == k))
    };
    !crate::commands::init::is_function_lab(r)
        && r.rubric.milestones.iter().all(|m| in_cuda(&m.kernel))
}

/// One line of the report: present, missing and needed, or missing and not needed here.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mark {
    Ok,
    Miss,
    Optional,
}

/// Print the report; exit 0 when everything needed is here, 3 when something is missing.
pub fn run(o: &DoctorOptions) -> Result<i32, CliError> {
    let needs = needs(o)?;
    if o.install {
        install(&needs);
    }
    let mut report = Report::default();
    report.gpus(&needs);
    report.toolchains(&needs);
    report.gpu_tools();
    report.sandbox();
    Ok(report.print(&needs))
}

/// The report's lines, and what is needed here but missing (for the last line).
#[derive(Default)]
struct Report {
    lines: Vec<(Mark, String)>,
    missing: Vec<&'static str>,
}

impl Report {
    /// One line about `what`: present, missing and needed, or missing and not needed here.
    fn add(&mut self, ok: bool, needed: bool, what: &'static str, line: String) {
        let mark = match (ok, needed) {
            (true, _) => Mark::Ok,
            (false, true) => {
                self.missing.push(what);
                Mark::Miss
            }
            (false, false) => Mark::Optional,
        };
        self.lines.push((mark, line));
    }

    /// The driver and every GPU it reports.
    fn gpus(&mut self, needs: &Needs) {
        // Driver and GPUs.
        match cuda::device_count() {
            Ok(0) => self.add(false, needs.gpu, "a GPU", "GPU: the NVIDIA driver is installed but reports no device; grading uses the PTX emulator (no speed checks)".into()),
            Ok(n) => {
                for i in 0..n {
                    match cuda::device_arch(i) {
                        Ok((name, arch)) => self.add(true, needs.gpu, "a GPU", format!("GPU {i}: {name} ({arch})")),
                        Err(e) => self.add(false, needs.gpu, "a GPU", format!("GPU {i}: {e}")),
                    }
                }
            }
            Err(e) => self.add(false, needs.gpu, "a GPU", format!("GPU: {e}; fix: install the NVIDIA driver on a machine with a GPU. Without one, cugrade grades correctness with its PTX emulator and skips speed checks")),
        }
    }

    /// What compiles and reads kernels (NVRTC, CUDA's headers, Numba, a Python for CuPy,
    /// NumPy and CuPy, nvJitLink) and cuBLAS.
    fn toolchains(&mut self, needs: &Needs) {
        // NVRTC: the system's, or cugrade's cache (loaded without LD_LIBRARY_PATH).
        let (ok, line) = describe_nvrtc();
        self.add(ok, needs.nvrtc, "NVRTC", line);
        // CUDA's own headers for NVRTC, and the Numba toolchain for `.py` submissions, each tried
        // in a compile worker as grading runs it (after cugrade opened its own cache to the
        // workers' uids, as grading does when it is root).
        for note in crate::compile::toolchain::share_with_workers() {
            let ok = !note.starts_with("could not");
            let needed = needs.nvrtc || needs.headers || needs.numba;
            self.add(
                ok,
                needed,
                "cugrade's cache",
                format!("toolchain cache: {note}"),
            );
        }
        let (ok, line) = crate::pipeline::probe::headers();
        self.add(ok, needs.headers, "CUDA's headers", line);
        let (ok, line) = crate::pipeline::probe::numba();
        self.add(ok, needs.numba, "Numba", line);
        let (ok, line) = describe_cupy();
        self.add(ok, needs.cupy, "a Python for CuPy kernels", line);
        // NumPy and CuPy for Python function labs (what is found; nothing installed here).
        for (i, line) in crate::compile::arrays::describe().into_iter().enumerate() {
            let found = !line.contains("not found")
                && !line.contains("not installed")
                && !line.contains("no Python");
            // NumPy is needed for a function lab; CuPy only on a GPU.
            let needed = (needs.arrays && (i == 0 || needs.gpu)) || (needs.cpu_python && i == 0);
            self.add(
                found,
                needed,
                "an array library for Python function labs",
                line,
            );
        }
        // ptxas's registers for PTX and Numba kernels without a GPU (never missing: without it the
        // resources check says the registers are unknown; `--install` installs it where needed).
        let (ok, line) = crate::compile::jitlink::describe();
        self.add(ok, false, "nvJitLink", line);
        // cuBLAS (only for matmul thresholds against cuBLAS, on a GPU).
        // SAFETY: only tries to dlopen libcublas.
        if unsafe { cudarc::cublas::sys::is_culib_present() } {
            self.add(
                true,
                needs.cublas,
                "cuBLAS",
                "cuBLAS present (matmul thresholds against cuBLAS can be measured)".into(),
            );
        } else {
            self.add(false, needs.cublas, "cuBLAS", "cuBLAS: libcublas not found; thresholds `against: cublas` will error. fix: install the CUDA toolkit's cuBLAS".into());
        }
    }

    /// Nsight Compute and compute-sanitizer, never required.
    fn gpu_tools(&mut self) {
        // The GPU's own counters and sanitizers (metric checks and the sanitizer pass on
        // `--backend cuda`; `check --profile`). Never required: without them those checks are
        // provisional or the emulator's alone.
        match crate::worker::nsight::find_tool("ncu") {
            Some(p) => self.add(true, false, "Nsight Compute", format!(
                "Nsight Compute: {} (metric checks on --backend cuda read the GPU's counters)",
                p.display()
            )),
            None => self.add(false, false, "Nsight Compute", "Nsight Compute (ncu) not found: on --backend cuda, metric checks are skipped and their points withheld (provisional). fix: install the CUDA toolkit's Nsight Compute and put `ncu` on PATH".into()),
        }
        match crate::worker::nsight::find_tool("compute-sanitizer") {
            Some(p) => self.add(true, false, "compute-sanitizer", format!(
                "compute-sanitizer: {} (the sanitizer pass on --backend cuda runs it on the GPU, besides the PTX emulator's)",
                p.display()
            )),
            None => self.add(false, false, "compute-sanitizer", "compute-sanitizer not found: on --backend cuda only the PTX emulator's sanitizers run. fix: install the CUDA toolkit's compute-sanitizer and put it on PATH".into()),
        }
    }

    /// The sandbox's layers and the worker cgroup, never required.
    fn sandbox(&mut self) {
        // Sandbox: a degraded layer confines less, and grading still works.
        for l in crate::sandbox::probe().layers {
            match l.state {
                crate::sandbox::LayerState::Active if l.detail.is_empty() => self
                    .lines
                    .push((Mark::Ok, format!("sandbox {}: available", l.name))),
                crate::sandbox::LayerState::Active => self
                    .lines
                    .push((Mark::Ok, format!("sandbox {}: {}", l.name, l.detail))),
                crate::sandbox::LayerState::Degraded(why) => self
                    .lines
                    .push((Mark::Optional, format!("sandbox {}: {why}", l.name))),
            }
        }
        // The worker cgroup, made as for a worker (and removed again). Never required: the
        // rlimits, the PID namespace and the scratch's size hold without it.
        let (cgroup, layer) = crate::sandbox::cgroup::WorkerCgroup::create(
            &crate::sandbox::Policy::worker("/", true),
        );
        if let Some(c) = cgroup {
            c.kill();
        }
        match layer.state {
            crate::sandbox::LayerState::Active => {
                // The doctor, unlike a report, may name the host's path.
                let below = match crate::sandbox::cgroup::plan() {
                    Ok(p) => format!(" (below {})", p.base.display()),
                    Err(_) => String::new(),
                };
                let line = format!("sandbox cgroup: {}{below}", layer.detail);
                self.add(true, false, "sandbox cgroup", line);
            }
            crate::sandbox::LayerState::Degraded(why) => {
                self.add(
                    false,
                    false,
                    "sandbox cgroup",
                    format!("sandbox cgroup: {why}"),
                );
            }
        }
    }

    /// Print every line and the verdict; the exit code.
    fn print(mut self, needs: &Needs) -> i32 {
        // Fitted to the terminal as `check`'s summary is (`COLUMNS`, else the terminal's width,
        // else 80 columns), each line's continuation under its text.
        let width = crate::report::output::columns();
        for (mark, line) in &self.lines {
            let tag = match mark {
                Mark::Ok => "ok   ",
                Mark::Miss => "MISS ",
                Mark::Optional => "--   ",
            };
            print!("{}", crate::report::output::hang(tag, line, width));
        }
        if self.missing.is_empty() {
            let last = format!("ready: everything needed for {} is here", needs.what);
            print!("{}", crate::report::output::fit_to(&last, width));
            exit::OK
        } else {
            self.missing.dedup();
            let last = format!(
                "not ready for {}: missing {} (the MISS lines say how to fix it; `cugrade doctor \
                 --install` installs NVRTC, CUDA's headers, Numba and nvJitLink)",
                needs.what,
                self.missing.join(", ")
            );
            print!("{}", crate::report::output::fit_to(&last, width));
            exit::CANNOT_GRADE
        }
    }
}

/// Install what is needed and missing; what fails is said on stderr (the report follows).
fn install(needs: &Needs) {
    use crate::compile::install;
    let report = |r: Result<(), String>| {
        if let Err(e) = r {
            eprintln!("cugrade: {e}");
        }
    };
    if needs.nvrtc {
        report(install::ensure_nvrtc());
    }
    if needs.headers {
        report(install::ensure_headers());
    }
    if needs.numba {
        report(install::ensure_numba().map(|_| ()));
    }
    if needs.nvjitlink {
        report(install::ensure_nvjitlink());
    }
    if needs.arrays || needs.cpu_python {
        report(crate::compile::arrays::numpy().map(|_| ()));
        if needs.arrays && needs.gpu {
            report(crate::compile::arrays::cupy().map(|_| ()));
        }
    }
}

/// CuPy kernels are read by cugrade's `cupy` stand-in under the machine's Python 3.10+.
fn describe_cupy() -> (bool, String) {
    match crate::compile::cupy::interpreter() {
        Ok(i) => (
            true,
            format!(
                "CuPy kernels: read with {} and cugrade's `cupy` stand-in (no CuPy needed); \
                 NumPy for top-level array code: {}",
                i.python.display(),
                match &i.numpy_site {
                    Some(d) => format!("from {}", d.display()),
                    None => "none (installed with Numba)".into(),
                }
            ),
        ),
        Err(e) => (false, format!("CuPy kernels: {e}")),
    }
}

fn describe_nvrtc() -> (bool, String) {
    if !cuda::nvrtc_present() {
        return (
            false,
            format!(
                "NVRTC: libnvrtc.so.13 not found on the system or in {}; fix: `cugrade doctor \
                 --install` (cugrade also installs it from PyPI the first time it compiles), or \
                 install the CUDA 13.0 toolkit",
                crate::compile::toolchain::nvrtc_cache_lib_dir().display()
            ),
        );
    }
    let mut v = (0, 0);
    // SAFETY: the library is present; nvrtcVersion only writes two ints.
    let ok = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut v.0, &mut v.1) }
        == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS;
    let from = match crate::compile::nvrtc_lib::loaded_dir() {
        Some(d) => format!(" from {}", d.display()),
        None => " (the system's)".into(),
    };
    (
        true,
        if ok {
            format!("NVRTC {}.{}{from}", v.0, v.1)
        } else {
            format!("NVRTC present{from}")
        },
    )
}

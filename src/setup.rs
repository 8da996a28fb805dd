//! From what the user asked for (backend, seed, GPUs) to the grading `Options`: pick the
//! backend and device, say what is missing when nothing can grade, and list the folders a
//! worker must not see. Shared by `check`, `grade` and `validate`.

use crate::backend::BackendKind;
use crate::errors::Fatal;
use crate::pipeline::Options;
use clap::ValueEnum;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendChoice {
    /// cuda when a usable GPU is present, else emu.
    Auto,
    Cuda,
    Emu,
}

/// What the user asked for, before a backend is chosen.
#[derive(Debug, Clone)]
pub struct Requested {
    pub backend: BackendChoice,
    pub seed: Option<u64>,
    pub gpus: Vec<usize>,
    /// The GPU the emulator's speed estimates are for (`--estimate-gpu`); `None`: the default.
    pub estimate_gpu: Option<String>,
}

/// Pick the backend and device; say exactly what is missing when nothing can grade.
pub fn resolve(req: &Requested, device: usize, needs_nvrtc: bool) -> Result<Options, Fatal> {
    // Short fresh seeds are easier to read back from a report and type into --seed.
    let seed = req.seed.unwrap_or_else(|| u64::from(rand::random::<u32>()));
    let cuda = || -> Result<(String, String), String> {
        let n = crate::backend::cuda::device_count()?;
        if n == 0 {
            return Err(
                "the NVIDIA driver is installed but reports no GPU (CUDA_ERROR_NO_DEVICE)".into(),
            );
        }
        crate::backend::cuda::device_arch(device)
    };
    let (backend, device_name, arch) = match req.backend {
        BackendChoice::Cuda => match cuda() {
            Ok((name, arch)) => (BackendKind::Cuda, name, arch),
            Err(e) => {
                return Err(Fatal::new(format!(
                    "--backend cuda cannot run: {e}.\nfix: install the NVIDIA driver (libcuda.so.1) on a machine with a GPU, or use --backend emu to grade correctness with the PTX emulator"
                )));
            }
        },
        BackendChoice::Emu => (
            BackendKind::Emu,
            "PTX emulator".to_string(),
            "sm_90".to_string(),
        ),
        BackendChoice::Auto => match cuda() {
            Ok((name, arch)) => (BackendKind::Cuda, name, arch),
            Err(_) => (
                BackendKind::Emu,
                "PTX emulator".to_string(),
                "sm_90".to_string(),
            ),
        },
    };
    // As root, workers run as uids of their own: cugrade's own cache must be open to them.
    for note in crate::compile::toolchain::share_with_workers() {
        eprintln!("cugrade: {note}");
    }
    if needs_nvrtc {
        ensure_compilers()?;
    }
    Ok(Options {
        backend,
        device,
        seed,
        arch,
        device_name,
        gpu: backend
            .caps()
            .device
            .then(|| crate::backend::cuda::pci_bus_id(device).ok())
            .flatten(),
        gpu_record: backend
            .caps()
            .device
            .then(|| crate::backend::cuda::identify(device).ok())
            .flatten(),
        baseline_cache: None,
        protected: Vec::new(),
        keep_kernels: None,
        estimate_gpu: req
            .estimate_gpu
            .clone()
            .unwrap_or_else(|| crate::estimate::gpu::DEFAULT.to_string()),
        ranks: Vec::new(),
        rank_locks: Vec::new(),
    })
}

/// NVRTC and CUDA's headers for CUDA C++ sources: the system's, else cugrade's cache, which
/// is filled from PyPI on first use. Without NVRTC nothing can be graded (exit 3, saying what
/// to install); without the headers grading goes on, and a submission that includes one of
/// them is stopped as the machine's fault (exit 3) rather than scored as a compile error.
pub fn ensure_compilers() -> Result<(), Fatal> {
    crate::compile::install::ensure_nvrtc().map_err(|e| {
        Fatal::new(format!(
            "NVRTC (libnvrtc.so.13) is needed to compile CUDA C++ and could not be had: {e}"
        ))
    })?;
    if let Err(e) = crate::compile::install::ensure_headers() {
        eprintln!(
            "cugrade: warning: CUDA's headers (cooperative_groups.h, cuda_fp16.h, CCCL) are not \
             available: {e}\nA submission that includes one of them cannot be graded on this \
             machine until they are (`cugrade doctor --install`)."
        );
    }
    Ok(())
}

/// The folders around what we read: a worker must not see other students or the rubric's files.
pub fn protected_dirs(paths: &[&Path]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in paths {
        if let Ok(abs) = std::fs::canonicalize(p) {
            let dir = if abs.is_dir() {
                abs.clone()
            } else {
                abs.parent().map(Path::to_path_buf).unwrap_or(abs.clone())
            };
            if let Some(parent) = dir.parent().filter(|p| p.parent().is_some()) {
                out.push(parent.to_path_buf());
            }
            out.push(dir);
        }
    }
    out.sort();
    out.dedup();
    out
}

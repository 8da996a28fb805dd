//! From what the user asked for (backend, seed, GPUs) to the grading `Options`: pick the
//! backend and device, say what is missing when nothing can grade, and list the folders a
//! worker must not see. Shared by `check`, `grade` and `validate`.

use crate::backend::BackendKind;
use crate::errors::Fatal;
use crate::grade::Options;
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
    if needs_nvrtc && !crate::backend::cuda::nvrtc_present() {
        return Err(Fatal::new(
            "NVRTC (libnvrtc.so.13) was not found, so CUDA sources cannot be compiled.\n\
             fix: install the CUDA 13.0 toolkit, or `python3 -m pip install --target ~/.cache/cugrade-nvrtc nvidia-cuda-nvrtc==13.0.88`\n\
             and run with LD_LIBRARY_PATH=~/.cache/cugrade-nvrtc/nvidia/cu13/lib (see README.md)",
        ));
    }
    Ok(Options {
        backend,
        device,
        seed,
        arch,
        device_name,
        gpu: (backend == BackendKind::Cuda)
            .then(|| crate::backend::cuda::pci_bus_id(device).ok())
            .flatten(),
        baseline_cache: None,
        protected: Vec::new(),
        keep_kernels: None,
        estimate_gpu: req
            .estimate_gpu
            .clone()
            .unwrap_or_else(|| crate::estimate::gpu::DEFAULT.to_string()),
    })
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

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
    /// A multi-GPU lab's rank count (`--ranks`); `None`: the rubric's.
    pub ranks: Option<usize>,
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

/// A multi-GPU lab's rank set (`ranks:` in the rubric): `--ranks N`, else the rubric's count;
/// on a GPU the first N of `--gpus`, else GPUs 0 to N-1, each of them present; on the emulator
/// N emulated devices. Says what to do when the machine has too few GPUs. Other labs: nothing
/// (a `--ranks` given for one is said to do nothing).
pub fn ranks(
    opts: &mut Options,
    rubric: &crate::rubric::LoadedRubric,
    req: &Requested,
) -> Result<(), Fatal> {
    let Some(default) = rubric.rubric.ranks else {
        if req.ranks.is_some() {
            eprintln!(
                "cugrade: warning: --ranks is for a multi-GPU lab; `{}` runs on one device",
                rubric.rubric.assignment
            );
        }
        return Ok(());
    };
    let n = req.ranks.unwrap_or(default as usize);
    // `--ranks` is checked against RANKS_ALLOWED by the command line, the rubric's by `load`.
    if !opts.backend.caps().device {
        opts.ranks = (0..n).collect();
        opts.device_name = format!("{n} emulated devices with peer memory (PTX emulator)");
        return Ok(());
    }
    let gpus: Vec<usize> = if req.gpus.is_empty() {
        (0..n).collect()
    } else if req.gpus.len() >= n {
        req.gpus[..n].to_vec()
    } else {
        return Err(Fatal::new(format!(
            "`{}` runs on {n} GPUs (ranks) and --gpus names {}: name {n} GPUs, or set --ranks",
            rubric.rubric.assignment,
            req.gpus.len()
        )));
    };
    let count = crate::backend::cuda::device_count().unwrap_or(0);
    if let Some(missing) = gpus.iter().find(|&&g| g >= count) {
        return Err(Fatal::new(format!(
            "`{}` runs on {n} GPUs (ranks {}), and this machine has {count} (no GPU {missing}).\nfix: grade it on a machine with {n} GPUs, or grade its correctness without them: --backend emu --ranks {n}",
            rubric.rubric.assignment,
            gpus.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    opts.rank_locks = gpus
        .iter()
        .filter_map(|&g| crate::backend::cuda::pci_bus_id(g).ok())
        .collect();
    opts.device = gpus[0];
    opts.gpu = opts.rank_locks.first().cloned();
    let names: Vec<String> = gpus
        .iter()
        .map(|&g| {
            crate::backend::cuda::device_arch(g)
                .map(|(name, _)| format!("GPU {g} ({name})"))
                .unwrap_or_else(|_| format!("GPU {g}"))
        })
        .collect();
    opts.device_name = format!("{n} ranks: {}", names.join(", "));
    opts.ranks = gpus;
    Ok(())
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

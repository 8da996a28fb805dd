//! Where the grading stages get their workers. One place knows how a worker of each role is
//! started: the folders the sandbox keeps out of sight, the backend and device, the GPU's lock,
//! what else the worker may read. A stage asks for a role (`compile`, `run`, `python`, the
//! emulator) and gets a started [`Client`]; none builds a worker's options or spawns one
//! itself (`tests/it/architecture.rs` holds `Client::spawn` to this file).

use super::child::Role;
use super::client::Client;
use super::parent::WorkerOptions;
use crate::backend::BackendKind;
use std::path::PathBuf;

/// How the workers of one grading run are started.
#[derive(Debug, Clone)]
pub struct Workers {
    protected: Vec<PathBuf>,
    backend: BackendKind,
    device: usize,
    gpu_lock: Option<String>,
    /// A multi-GPU lab's rank set: run workers hold every rank (`worker::ranks`).
    ranks: Vec<usize>,
}

impl Workers {
    /// Workers on `backend`'s `device` that never see `protected` (the rubric's folder, the
    /// cohort, the output folder).
    pub fn new(protected: &[PathBuf], backend: BackendKind, device: usize) -> Workers {
        Workers {
            protected: protected.to_vec(),
            backend,
            device,
            gpu_lock: None,
            ranks: Vec::new(),
        }
    }

    /// Run workers of a multi-GPU lab hold these ranks (GPUs, or emulated devices); empty:
    /// one device.
    pub fn with_ranks(mut self, ranks: Vec<usize>) -> Workers {
        self.ranks = ranks;
        self
    }

    /// Workers on the PTX emulator (no GPU) that never see `protected`: the sanitizer pass's
    /// worker, a CPU baseline's Python, the archive unpacker, cugrade's checks of its toolchain.
    pub fn emulator(protected: &[PathBuf]) -> Workers {
        Workers::new(protected, BackendKind::Emu, 0)
    }

    /// Run workers start under this GPU lock's shared side (never beside a timed section).
    pub fn with_gpu_lock(mut self, lock: Option<String>) -> Workers {
        self.gpu_lock = lock;
        self
    }

    /// A worker's options for `role` on this backend, before what the role adds.
    pub fn options(&self, role: Role) -> WorkerOptions {
        let mut o = WorkerOptions::new(role, self.backend, self.device);
        o.protected = self.protected.clone();
        o
    }

    /// A compile worker (NVRTC, ptxas, Numba, CuPy's extraction) that may also read `read`.
    pub fn compile(&self, read: Vec<PathBuf>) -> Result<Client, String> {
        let mut o = self.options(Role::Compile);
        o.extra_read = read;
        Client::spawn(&o)
    }

    /// A worker that runs kernels, with at least `cpu_seconds` of CPU time where given.
    pub fn run(&self, cpu_seconds: Option<u64>) -> Result<Client, String> {
        let mut o = self.options(Role::Run);
        if let Some(s) = cpu_seconds {
            o.cpu_seconds = o.cpu_seconds.max(s);
        }
        o.gpu_lock = self.gpu_lock.clone();
        o.ranks = self.ranks.clone();
        Client::spawn(&o)
    }

    /// A worker that becomes a Python harness, reading `read` (the interpreter, NumPy, CuPy).
    pub fn python(&self, read: &[PathBuf]) -> Result<Client, String> {
        let mut o = self.options(Role::Python);
        o.extra_read.extend(read.iter().cloned());
        Client::spawn(&o)
    }

    /// A worker with options a role needs beyond these (the archive unpacker's limits).
    pub fn start(&self, o: &WorkerOptions) -> Result<Client, String> {
        Client::spawn(o)
    }
}

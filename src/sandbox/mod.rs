//! The OS sandbox around worker processes that run student code.
//!
//! `apply` is called by the worker itself, first thing after it starts and before it reads any
//! untrusted input or starts a thread. Each layer that the kernel lacks degrades with a
//! warning in the returned report; none needs root. See docs/security.md.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What the worker may touch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// The worker's own temp dir: the only place it may write.
    pub temp_dir: PathBuf,
    /// Whether the worker needs the GPU (`/dev/nvidia*` with ioctl).
    pub gpu: bool,
    /// `RLIMIT_DATA` in bytes (not `RLIMIT_AS`: CUDA reserves huge virtual ranges).
    pub data_bytes: u64,
    /// `RLIMIT_CPU` in seconds.
    pub cpu_seconds: u64,
    /// `RLIMIT_FSIZE` in bytes.
    pub file_bytes: u64,
    /// `RLIMIT_NOFILE`.
    pub open_files: u64,
}

/// State of one sandbox layer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LayerState {
    Active,
    /// Not available here; the string says why and what it would take.
    Degraded(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layer {
    pub name: String,
    pub state: LayerState,
}

/// What `apply` achieved, one entry per layer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub layers: Vec<Layer>,
}

impl Report {
    /// One line per layer, for result.json and the reports.
    pub fn lines(&self) -> Vec<String> {
        self.layers
            .iter()
            .map(|l| match &l.state {
                LayerState::Active => format!("{}: active", l.name),
                LayerState::Degraded(why) => format!("{}: DEGRADED ({why})", l.name),
            })
            .collect()
    }
}

/// Confine the calling process. Until the sandbox issue lands this applies nothing and says so.
pub fn apply(_policy: &Policy) -> Report {
    Report {
        layers: vec![Layer {
            name: "sandbox".into(),
            state: LayerState::Degraded("not implemented yet: workers run unconfined".into()),
        }],
    }
}

/// What `doctor` reports: which layers this machine's kernel offers.
pub fn probe() -> Report {
    apply(&Policy::default())
}

/// Prepare the worker's command before spawn (environment, inherited descriptors).
/// Placeholder until the sandbox issue lands: only moves the CUDA JIT cache into the temp dir.
pub fn prepare_command(cmd: &mut std::process::Command, policy: &Policy) {
    cmd.env("CUDA_CACHE_PATH", policy.temp_dir.join("cuda-cache"));
}

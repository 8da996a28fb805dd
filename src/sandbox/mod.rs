//! The OS sandbox around worker processes that run student code.
//!
//! Student code is device code, but it is compiled by NVRTC and run by the driver (or our
//! emulator) inside the worker, so the worker is where an exploit would land. `apply` is
//! called by the worker itself, first thing after it starts and while it is still
//! single-threaded, before it reads untrusted input or loads NVRTC/CUDA. It stacks independent
//! layers (namespaces, capabilities, Landlock, rlimits, seccomp); each layer that the kernel
//! lacks degrades with a warning in the returned [`Report`] instead of failing, so grading
//! still works on old kernels and the reports say how much it was confined. None needs root.
//!
//! The parent's half is [`prepare_command`] (scrubbed environment, no inherited descriptors).
//! `probe` answers `cugrade doctor` without confining the doctor. See docs/security.md.

mod filesystem;
mod limits;
mod namespaces;
mod probe;
mod spawn;
mod syscalls;

pub use probe::probe;
pub use spawn::prepare_command;
pub use syscalls::denied_names;

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What the worker may touch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// The worker's own temp dir: the only place it may write.
    pub temp_dir: PathBuf,
    /// Whether the worker needs the GPU (`/dev/nvidia*` with ioctl).
    pub gpu: bool,
    /// `RLIMIT_DATA` in bytes (not `RLIMIT_AS`: CUDA reserves huge virtual ranges). 0: unset.
    pub data_bytes: u64,
    /// `RLIMIT_CPU` in seconds. 0: unset.
    pub cpu_seconds: u64,
    /// `RLIMIT_FSIZE` in bytes. 0: unset.
    pub file_bytes: u64,
    /// `RLIMIT_NOFILE`. 0: unset.
    pub open_files: u64,
    /// More directories (or files) the worker may read and map, beyond the system library
    /// dirs and `LD_LIBRARY_PATH`: e.g. where the parent found libnvrtc.
    #[serde(default)]
    pub extra_read: Vec<PathBuf>,
    /// Paths that must stay unreadable (the cohort, the rubric, reference outputs, the output
    /// dir). A readable root that contains one of them is dropped from the rules with a
    /// warning, so a library path like `/opt` cannot expose `/opt/course/rubrics`.
    #[serde(default)]
    pub protected: Vec<PathBuf>,
    /// Leave TCP, abstract sockets and signals out of Landlock's rules: only for the process
    /// `check --profile` runs under Nsight Compute, whose injection library reports to `ncu`
    /// from the launching thread.
    #[serde(default)]
    pub keep_ipc: bool,
}

impl Policy {
    /// A worker's policy with the default limits: generous for honest work (an NVRTC compile
    /// of a large kernel, host copies of the biggest rubric inputs), small enough that a
    /// compile bomb or a host-memory bomb dies long before the machine does.
    pub fn worker(temp_dir: impl Into<PathBuf>, gpu: bool) -> Policy {
        Policy {
            temp_dir: temp_dir.into(),
            gpu,
            data_bytes: 8 << 30,
            cpu_seconds: 900,
            file_bytes: 256 << 20,
            open_files: 1024,
            extra_read: Vec::new(),
            protected: Vec::new(),
            keep_ipc: false,
        }
    }
}

/// State of one sandbox layer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LayerState {
    Active,
    /// Not available here (or only in part); the string says why and what it would take.
    Degraded(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layer {
    pub name: String,
    pub state: LayerState,
    /// What the layer covers when active (e.g. `ABI 7: files, TCP, signals`); may be empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl Layer {
    fn active(name: &str, detail: impl Into<String>) -> Layer {
        Layer {
            name: name.into(),
            state: LayerState::Active,
            detail: detail.into(),
        }
    }

    fn degraded(name: &str, why: impl Into<String>) -> Layer {
        Layer {
            name: name.into(),
            state: LayerState::Degraded(why.into()),
            detail: String::new(),
        }
    }
}

/// Layer names, as they appear in reports.
pub mod layer {
    pub const NAMESPACES: &str = "namespaces";
    pub const CAPABILITIES: &str = "capabilities";
    pub const LANDLOCK: &str = "landlock";
    pub const RLIMITS: &str = "rlimits";
    pub const SECCOMP: &str = "seccomp";
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
            .map(|l| match (&l.state, l.detail.is_empty()) {
                (LayerState::Active, true) => format!("{}: active", l.name),
                (LayerState::Active, false) => format!("{}: active ({})", l.name, l.detail),
                (LayerState::Degraded(why), _) => format!("{}: DEGRADED ({why})", l.name),
            })
            .collect()
    }

    /// The layer called `name`, if the report has one.
    pub fn layer(&self, name: &str) -> Option<&Layer> {
        self.layers.iter().find(|l| l.name == name)
    }

    /// Whether the layer called `name` is present and active.
    pub fn is_active(&self, name: &str) -> bool {
        self.layer(name)
            .is_some_and(|l| l.state == LayerState::Active)
    }

    /// Whether every layer is active.
    pub fn fully_active(&self) -> bool {
        !self.layers.is_empty() && self.layers.iter().all(|l| l.state == LayerState::Active)
    }

    /// One warning per degraded layer.
    pub fn warnings(&self) -> Vec<String> {
        self.layers
            .iter()
            .filter_map(|l| match &l.state {
                LayerState::Degraded(why) => Some(format!("sandbox layer {}: {why}", l.name)),
                LayerState::Active => None,
            })
            .collect()
    }
}

/// Confine the calling process, layer by layer, and say what took effect.
///
/// Call it first in the worker, while the process has one thread: unsharing a user namespace
/// needs that, and Landlock (before ABI 8) confines only the calling thread, so threads
/// started earlier would escape it. Threads started afterwards (rayon, CUDA's) inherit
/// every layer. Never panics; a layer that cannot be applied is reported as degraded.
pub fn apply(policy: &Policy) -> Report {
    let threads = thread_count();
    let mut layers = Vec::with_capacity(5);

    // Seccomp and Landlock need no_new_privs; set it once, first, so that no later step can
    // exec something setuid in between.
    let nnp = set_no_new_privs();

    // The namespace must come before Landlock (which forbids writing /proc/self/uid_map) and
    // before seccomp (which forbids unshare).
    layers.push(namespaces::enter(threads));
    layers.push(namespaces::drop_capabilities(threads));
    layers.push(filesystem::restrict(policy, threads));
    layers.push(limits::set(policy));
    layers.push(seccomp(nnp));
    Report { layers }
}

/// Confine a process that already runs other threads: `check --profile`'s kernel runner, which
/// Nsight Compute starts with its injection library loaded and connected. A user namespace can
/// no longer be entered (and a network namespace would cut ncu's connection), so that layer and
/// the capabilities one are reported as not applied. Landlock confines the calling thread,
/// which runs every line of cugrade's host code; rlimits and seccomp the whole process. The
/// student's code here is device code only: PTX, loaded and launched by cugrade.
pub fn apply_after_init(policy: &Policy) -> Report {
    let threads = thread_count();
    let nnp = set_no_new_privs();
    let mut layers = vec![Layer::degraded(
        layer::NAMESPACES,
        "not entered: the profiled process already runs Nsight Compute's threads, and its \
         connection to ncu needs the host's network",
    )];
    layers.push(filesystem::restrict(policy, threads));
    layers.push(limits::set(policy));
    layers.push(seccomp(nnp));
    Report { layers }
}

/// The seccomp layer, which needs no_new_privs (`nnp`: whether setting it worked).
fn seccomp(nnp: std::io::Result<()>) -> Layer {
    match nnp {
        Ok(()) => syscalls::install(),
        Err(e) => Layer::degraded(
            layer::SECCOMP,
            format!("prctl(PR_SET_NO_NEW_PRIVS) failed: {e}; seccomp needs it"),
        ),
    }
}

fn set_no_new_privs() -> std::io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// "1 thread", "3 threads".
fn threads_phrase(n: usize) -> String {
    if n == 1 {
        "1 thread".into()
    } else {
        format!("{n} threads")
    }
}

/// Threads in this process, from `/proc/self/task` (1 if it cannot be read).
fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(1)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_show_detail_and_reason() {
        let r = Report {
            layers: vec![
                Layer::active("landlock", "ABI 7"),
                Layer::active("rlimits", ""),
                Layer::degraded("namespaces", "userns disabled"),
            ],
        };
        assert_eq!(
            r.lines(),
            vec![
                "landlock: active (ABI 7)",
                "rlimits: active",
                "namespaces: DEGRADED (userns disabled)"
            ]
        );
        assert!(!r.fully_active());
        assert!(r.is_active("landlock"));
        assert!(!r.is_active("namespaces"));
        assert!(!r.is_active("seccomp"));
        assert_eq!(
            r.warnings(),
            vec!["sandbox layer namespaces: userns disabled"]
        );
    }

    #[test]
    fn empty_report_is_not_fully_active() {
        assert!(!Report::default().fully_active());
    }

    #[test]
    fn policy_without_new_fields_still_parses() {
        let p: Policy = serde_json::from_str(
            r#"{"temp_dir":"/tmp/x","gpu":false,"data_bytes":1,"cpu_seconds":2,
                "file_bytes":3,"open_files":4}"#,
        )
        .unwrap();
        assert!(p.extra_read.is_empty() && p.protected.is_empty());
    }
}

//! The OS sandbox around worker processes that run student code.
//!
//! Student code is device code, but it is compiled by NVRTC and run by the driver (or our
//! emulator) inside the worker, so the worker is where an exploit would land; a Numba
//! submission's Python runs there at import. `apply` is called by the worker itself, first
//! thing after it starts and while it is still single-threaded, before it reads untrusted input
//! or loads NVRTC/CUDA. It stacks independent layers (namespaces with a supervisor that ends
//! every process the worker starts, the uid it runs as, a private mount view, capabilities,
//! Landlock, rlimits, seccomp); each layer that the kernel lacks degrades with a warning in the
//! returned [`Report`] instead of failing, so grading still works on old kernels and the
//! reports say how much it was confined. None needs root; a grader started as root gives each
//! worker a uid of its own (`identity`).
//!
//! The parent's half is [`prepare_command`] (scrubbed environment, no inherited descriptors).
//! `probe` answers `cugrade doctor` without confining the doctor. See docs/security.md.

pub mod access;
pub mod cgroup;
mod filesystem;
pub mod identity;
mod limits;
mod mounts;
mod namespaces;
mod probe;
pub mod scratch;
mod spawn;
mod supervisor;
mod syscalls;

pub use probe::probe;
pub use spawn::prepare_command;
pub use syscalls::denied_names;

/// `RLIMIT_AS` a worker with `policy` gets: its data limit and room for libraries and
/// reservations, or 0 (none) for a GPU worker (see `limits`).
pub fn address_space_limit(policy: &Policy) -> u64 {
    limits::address_space(policy)
}

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
    /// Most threads and processes the worker may have at once (`RLIMIT_NPROC`, where the kernel
    /// counts it per worker). 0: unset.
    #[serde(default)]
    pub processes: u64,
    /// Size of the worker's private scratch tmpfs in bytes; 0: [`DEFAULT_SCRATCH`].
    #[serde(default)]
    pub scratch: u64,
    /// Leave out the layers a GPU worker was seen to fail under (the private mount view, the
    /// uid of its own): set by the grader after CUDA did not start inside the full sandbox,
    /// and reported as degraded.
    #[serde(default)]
    pub compat: Option<String>,
}

/// Default size of a worker's scratch: room for the sources, Numba's and the driver's caches,
/// and a few files at the `RLIMIT_FSIZE` limit.
pub const DEFAULT_SCRATCH: u64 = 1 << 30;

impl Policy {
    /// The scratch tmpfs's size.
    pub fn scratch_bytes(&self) -> u64 {
        if self.scratch == 0 {
            DEFAULT_SCRATCH
        } else {
            self.scratch
        }
    }
}

/// Threads and processes a worker may have: the emulator's thread pool (one per CPU) and
/// CUDA's threads, with room to spare; a fork bomb stops there.
pub fn default_processes() -> u64 {
    let cpus = std::thread::available_parallelism().map_or(8, |n| n.get()) as u64;
    128 + 2 * cpus
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
            processes: default_processes(),
            scratch: 0,
            compat: None,
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
    /// `name: active (detail)` or `name: DEGRADED (why)`.
    pub fn line(&self) -> String {
        match (&self.state, self.detail.is_empty()) {
            (LayerState::Active, true) => format!("{}: active", self.name),
            (LayerState::Active, false) => format!("{}: active ({})", self.name, self.detail),
            (LayerState::Degraded(why), _) => format!("{}: DEGRADED ({why})", self.name),
        }
    }

    pub(crate) fn active(name: &str, detail: impl Into<String>) -> Layer {
        Layer {
            name: name.into(),
            state: LayerState::Active,
            detail: detail.into(),
        }
    }

    pub(crate) fn degraded(name: &str, why: impl Into<String>) -> Layer {
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
    pub const IDENTITY: &str = "identity";
    pub const MOUNTS: &str = "mounts";
    pub const CAPABILITIES: &str = "capabilities";
    pub const LANDLOCK: &str = "landlock";
    pub const RLIMITS: &str = "rlimits";
    pub const SECCOMP: &str = "seccomp";
    /// Set up by the parent, not by `apply`: see `cgroup`.
    pub const CGROUP: &str = "cgroup";
}

/// What `apply` achieved, one entry per layer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub layers: Vec<Layer>,
}

impl Report {
    /// One line per layer, for result.json and the reports.
    pub fn lines(&self) -> Vec<String> {
        self.layers.iter().map(Layer::line).collect()
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
/// needs that, the supervisor is forked off here (the calling process stays behind as the
/// supervisor and never returns: `apply` returns in the worker, its child), and Landlock
/// (before ABI 8) confines only the calling thread, so threads started earlier would escape
/// it. Threads started afterwards (rayon's, CUDA's) inherit every layer. Never panics; a layer
/// that cannot be applied is reported as degraded.
pub fn apply(policy: &Policy) -> Report {
    let threads = thread_count();
    // Seccomp and Landlock need no_new_privs; set it once, first, so that no later step can
    // exec something setuid in between.
    let nnp = set_no_new_privs();
    let root = identity::is_root();
    // The uid this worker runs as when the grader is root: derived from our pid, which the
    // grader knows too (to kill every process of that uid when the worker ends).
    let own = root.then(|| {
        let uid = identity::worker_uid(std::process::id());
        (uid, identity::worker_gid(uid, policy.gpu))
    });
    if let Some((uid, gid)) = own {
        identity::give_dir(&policy.temp_dir, uid, gid);
    }
    // The OOM killer's first choice, never the grader. Written while still privileged, so
    // that a worker cannot lower it again when the grader is root.
    let _ = std::fs::write("/proc/self/oom_score_adj", "1000");

    // The namespaces: as root directly, else (or when root may not) in a user namespace.
    let mut why_not = vec![];
    let mut dropped_early = false;
    let mut mode = namespaces::Mode::Off;
    if threads > 1 {
        why_not.push(format!(
            "the process already runs {threads} threads and unshare needs a single-threaded \
             caller; call sandbox::apply before starting any thread"
        ));
    } else {
        if root {
            match namespaces::enter_rootful() {
                Ok(()) => mode = namespaces::Mode::Rootful,
                Err(e) => why_not.push(format!("unshare(pid+net+ipc) as root failed: {e}")),
            }
        }
        if mode == namespaces::Mode::Off {
            if let Some((uid, gid)) = own {
                // Root without CAP_SYS_ADMIN (Docker): become the worker's uid first, then try
                // what an unprivileged user may.
                namespaces::drop_bounding_set();
                dropped_early = identity::become_user(uid, gid).is_ok();
            }
            if !root || dropped_early {
                match namespaces::enter_userns() {
                    Ok(()) => mode = namespaces::Mode::Userns,
                    Err(e) => why_not.push(format!("unshare(user+pid+net+ipc) failed: {e}")),
                }
            }
        }
    }
    let ns_layer = namespaces::report(mode, &why_not);
    // The supervisor stays here; the worker goes on in the child.
    let split = if threads == 1 {
        supervisor::split(dropped_early).ok()
    } else {
        None
    };
    let compat = policy.compat.clone().filter(|_| policy.gpu);
    let mounts = match (&compat, mode) {
        (Some(why), _) => Layer::degraded(layer::MOUNTS, why.clone()),
        (None, namespaces::Mode::Off) => Layer::degraded(
            layer::MOUNTS,
            "no mount namespace without the other namespaces; the worker sees the host's \
             files (Landlock still limits what it may open)",
        ),
        (None, _) => mounts::enter(policy, own.filter(|_| mode == namespaces::Mode::Rootful)),
    };
    // Who we are from here on.
    namespaces::drop_bounding_set();
    let identity = match own {
        None => {
            // SAFETY: getuid cannot fail.
            let uid = unsafe { libc::getuid() };
            Layer::active(
                layer::IDENTITY,
                format!("uid {uid}: cugrade's own (it is not root, so it has no other to give)"),
            )
        }
        Some(_) if dropped_early => Layer::active(layer::IDENTITY, identity_detail(own)),
        Some(_) if compat.is_some() && mode != namespaces::Mode::Off => Layer::degraded(
            layer::IDENTITY,
            "root inside the worker's namespaces (compat mode for the GPU); capabilities \
                 dropped",
        ),
        Some((uid, gid)) => match identity::become_user(uid, gid) {
            Ok(()) => Layer::active(layer::IDENTITY, identity_detail(own)),
            Err(e) => Layer::degraded(
                layer::IDENTITY,
                format!("still root: {e}; capabilities are dropped, but files root owns are its"),
            ),
        },
    };
    if let Some(s) = &split {
        // A change of uid clears the parent-death signal.
        s.tie_to_supervisor();
    }
    let own_count =
        (identity.state == LayerState::Active && own.is_some()) || mode == namespaces::Mode::Userns;
    let mut layers = vec![ns_layer, identity, mounts];
    layers.push(namespaces::drop_capabilities(threads));
    layers.push(filesystem::restrict(policy, threads));
    layers.push(limits::set(policy, own_count));
    layers.push(seccomp(nnp, policy));
    if split.is_none() && threads == 1 {
        layers.push(Layer::degraded(
            "supervisor",
            "fork failed: processes the worker starts may outlive it",
        ));
    }
    Report { layers }
}

fn identity_detail(own: Option<(u32, u32)>) -> String {
    match own {
        // The uid differs per worker (it is derived from the pid), so it stays out of the
        // report: reports of the same submission must be identical wherever they were made.
        Some((uid, gid)) if uid == gid => {
            "a uid of the worker's own, owning no host file (cugrade runs as root)".to_string()
        }
        Some((_, gid)) => format!(
            "a uid of the worker's own, owning no host file, and gid {gid} (cugrade runs as \
             root; the group opens the GPU's device files)"
        ),
        None => String::new(),
    }
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
    // Nsight Compute's process is no worker of its own uid or user namespace: no RLIMIT_NPROC.
    let no_nproc = Policy {
        processes: 0,
        ..policy.clone()
    };
    layers.push(limits::set(&no_nproc, false));
    layers.push(seccomp(nnp, policy));
    Report { layers }
}

/// The seccomp layer, which needs no_new_privs (`nnp`: whether setting it worked).
fn seccomp(nnp: std::io::Result<()>, policy: &Policy) -> Layer {
    match nnp {
        Ok(()) => syscalls::install(policy),
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

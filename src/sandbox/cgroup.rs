//! cgroup v2 per worker, where the host lets cugrade make cgroups: `pids.max` and `memory.max`
//! (which count every process and thread of the worker, and memfd, tmpfs and page cache, not
//! one process at a time as rlimits do), and `cgroup.kill` to end everything in it at once.
//!
//! The parent decides once per run ([`plan`]) where worker cgroups go: below its own cgroup
//! (`/proc/self/cgroup`), if it may write there. Controllers can only be enabled for children
//! of a cgroup that holds no process itself (the root cgroup excepted), so a grader that is
//! alone in its cgroup (`systemd-run --scope -p Delegate=yes cugrade ...`, a container whose
//! main process it is) first moves itself into a leaf `cugrade-grader-PID`; a grader that
//! shares its cgroup with other processes (a login shell's scope) cannot, and says so, except
//! as root at the top of a cgroup namespace (a container's own cgroup, shared with its shell
//! or CI steps): there it moves every process of that cgroup into a leaf `cugrade-moved`, as
//! container entrypoints do before they enable controllers (docker's `dind`), since nothing
//! outside the container sees the difference and the container's own limits still hold. Where
//! the memory and pids controllers are not there at all (cgroup v1 holds them, as in a hybrid
//! setup), worker cgroups still give `cgroup.kill`. Every step is best effort: a failure is a
//! degraded layer in the reports, never a worker that does not start. The rlimits, the PID
//! namespace and the scratch's size hold without any of it.
//!
//! Each worker's cgroup, `cugrade-w-PID-N` (PID: the grader's), is made before the worker is
//! spawned; the spawned process enters it itself between fork and exec, so that nothing of the
//! worker ever runs outside it. It is killed and removed when the worker ends; the folders of
//! a grader killed with SIGKILL are removed by the next run.

use super::{Layer, Policy, layer};
use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where worker cgroups go, and what they can limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The cgroup (a directory of the cgroup2 mount) whose children the workers' are.
    pub base: PathBuf,
    /// Controllers enabled for the workers' cgroups: `memory`, `pids`, both or none.
    pub controllers: Vec<String>,
    /// Why a controller is missing (empty when both are there).
    pub missing: String,
}

/// What the parent found about its cgroup, for [`decide`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// The cgroup2 mount point, and our cgroup's directory in it.
    pub mount: Option<PathBuf>,
    pub base: Option<PathBuf>,
    /// Whether we may make cgroups there.
    pub writable: bool,
    /// `cgroup.controllers` and `cgroup.subtree_control` of the base.
    pub controllers: Vec<String>,
    pub subtree: Vec<String>,
    /// Processes in the base (`cgroup.procs`) and whether the base is the hierarchy's root
    /// (which may enable controllers while it holds processes).
    pub procs: Vec<u32>,
    pub is_root: bool,
    /// Whether the base is the top of what this process's cgroup namespace shows (a
    /// container's own cgroup), and whether we are root: then the other processes there may
    /// be moved into a leaf (see [`Decision::MoveAll`]).
    pub ns_top: bool,
    pub root_user: bool,
}

/// What to do with what was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Enable `enable` (possibly none) in the base's `subtree_control`, then use it.
    Use { enable: Vec<String> },
    /// Move this process into a leaf of its own first (it is alone in the base), then enable.
    MoveSelf { enable: Vec<String> },
    /// As root at the top of a cgroup namespace that other processes share: move them into
    /// the leaf [`MOVED`], this process into its own, then enable.
    MoveAll { enable: Vec<String> },
    /// Use the base as it is, without controllers (which cannot be enabled there: why).
    Shared(String),
    /// Worker cgroups cannot be made: why.
    Unavailable(String),
}

const WANTED: [&str; 2] = ["memory", "pids"];

/// The leaf the other processes of a container's cgroup are moved into ([`Decision::MoveAll`]).
pub const MOVED: &str = "cugrade-moved";

/// How the layer's line starts when each worker has a cgroup of its own (with or without
/// controllers): what tests and `doctor` look for.
pub const OWN: &str = "a cgroup of its own per worker";

/// The decision, from what was found (`me`: our pid).
pub fn decide(o: &Observed, me: u32) -> Decision {
    if o.mount.is_none() {
        return Decision::Unavailable("no cgroup v2 hierarchy is mounted".into());
    }
    if o.base.is_none() {
        return Decision::Unavailable(
            "cugrade's own cgroup (/proc/self/cgroup) is not under the cgroup v2 mount".into(),
        );
    }
    if !o.writable {
        return Decision::Unavailable(
            "cugrade may not make cgroups in its own cgroup: the host did not delegate it".into(),
        );
    }
    let enable: Vec<String> = WANTED
        .iter()
        .filter(|c| o.controllers.iter().any(|x| x == *c) && !o.subtree.iter().any(|x| x == *c))
        .map(|c| c.to_string())
        .collect();
    if enable.is_empty() || o.is_root || o.procs.is_empty() {
        Decision::Use { enable }
    } else if o.procs == [me] {
        Decision::MoveSelf { enable }
    } else if o.root_user && o.ns_top {
        Decision::MoveAll { enable }
    } else {
        // Controllers cannot be enabled below a cgroup that holds processes; we may move only
        // ourselves. Worker cgroups still give cgroup.kill (and what is already enabled).
        // The message names no path and no count: it goes into every student's report, which
        // must not differ between two runs (or Slurm shards) of one cohort.
        Decision::Shared(
            "cugrade's cgroup holds other processes too, so no controller can be enabled below \
             it; run cugrade in a cgroup of its own (e.g. `systemd-run --scope -p Delegate=yes \
             cugrade ...`)"
                .into(),
        )
    }
}

fn words(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// The cgroup2 mount point and its root within the hierarchy, from `/proc/self/mountinfo`.
fn cgroup2_mount(mountinfo: &str) -> Option<(PathBuf, String)> {
    mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let f: Vec<&str> = left.split_whitespace().collect();
        Some((PathBuf::from(f.get(4)?), f.get(3)?.to_string()))
    })
}

/// Our cgroup's directory, from `/proc/self/cgroup`'s `0::PATH` line and the mount.
fn own_dir(proc_cgroup: &str, mount: &Path, mount_root: &str) -> Option<PathBuf> {
    let path = proc_cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    let rel = path
        .strip_prefix(mount_root.trim_end_matches('/'))?
        .trim_start_matches('/');
    let dir = if rel.is_empty() {
        mount.to_path_buf()
    } else {
        mount.join(rel)
    };
    dir.is_dir().then_some(dir)
}

fn observe() -> Observed {
    let mut o = Observed::default();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let Some((mount, root)) = cgroup2_mount(&mountinfo) else {
        return o;
    };
    o.mount = Some(mount.clone());
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let Some(base) = own_dir(&own, &mount, &root) else {
        return o;
    };
    let c = CString::new(base.as_os_str().as_encoded_bytes()).unwrap_or_default();
    // SAFETY: access on a valid path.
    o.writable = unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0;
    o.controllers = words(&base.join("cgroup.controllers"));
    o.subtree = words(&base.join("cgroup.subtree_control"));
    o.procs = words(&base.join("cgroup.procs"))
        .iter()
        .filter_map(|p| p.parse().ok())
        .collect();
    // Every cgroup but the hierarchy's root has a `cgroup.type`.
    o.is_root = !base.join("cgroup.type").exists();
    o.ns_top = base == mount && root == "/";
    o.root_user = super::identity::is_root();
    o.base = Some(base);
    o
}

/// Move every process of `base` (but this one) into its leaf [`MOVED`]: a few rounds, since
/// a process may fork while they are moved. Processes that are gone meanwhile do not count.
fn move_others(base: &Path, me: u32) -> io::Result<()> {
    let leaf = base.join(MOVED);
    mkdir(&leaf)?;
    for _ in 0..10 {
        let others: Vec<String> = words(&base.join("cgroup.procs"))
            .into_iter()
            .filter(|p| p.parse::<u32>().ok() != Some(me))
            .collect();
        if others.is_empty() {
            return Ok(());
        }
        for pid in others {
            match std::fs::write(leaf.join("cgroup.procs"), &pid) {
                Err(e) if e.raw_os_error() != Some(libc::ESRCH) => return Err(e),
                _ => {}
            }
        }
    }
    Err(io::Error::other("processes kept appearing in it"))
}

fn enable(base: &Path, which: &[String]) -> io::Result<()> {
    if which.is_empty() {
        return Ok(());
    }
    let line: Vec<String> = which.iter().map(|c| format!("+{c}")).collect();
    std::fs::write(base.join("cgroup.subtree_control"), line.join(" "))
}

/// Decide and act, once per process.
pub fn plan() -> &'static Result<Plan, String> {
    static PLAN: OnceLock<Result<Plan, String>> = OnceLock::new();
    PLAN.get_or_init(|| {
        let o = observe();
        let me = std::process::id();
        let decision = decide(&o, me);
        let base = match (&decision, &o.base) {
            (Decision::Unavailable(why), _) => return Err(why.clone()),
            (_, Some(b)) => b.clone(),
            (_, None) => return Err("no cgroup".into()),
        };
        sweep(&base);
        // Where the others cannot all be moved, worker cgroups still give cgroup.kill.
        let decision = match decision {
            Decision::MoveAll { enable } => match move_others(&base, me) {
                Ok(()) => Decision::MoveAll { enable },
                Err(e) => Decision::Shared(format!(
                    "cugrade's cgroup holds other processes too, which cugrade could not move                      into a leaf ({e}), so no controller can be enabled below it"
                )),
            },
            d => d,
        };
        let mut missing = vec![];
        let none = vec![];
        let want = match &decision {
            Decision::Use { enable }
            | Decision::MoveSelf { enable }
            | Decision::MoveAll { enable } => enable,
            Decision::Shared(why) => {
                missing.push(why.clone());
                &none
            }
            Decision::Unavailable(_) => unreachable!("returned above"),
        };
        if matches!(
            decision,
            Decision::MoveSelf { .. } | Decision::MoveAll { .. }
        ) {
            let leaf = base.join(format!("cugrade-grader-{me}"));
            let moved = mkdir(&leaf)
                .and_then(|()| std::fs::write(leaf.join("cgroup.procs"), me.to_string()));
            if let Err(e) = moved {
                return Err(format!(
                    "could not move cugrade into a leaf cgroup of its own: {e}"
                ));
            }
        }
        if let Err(e) = enable(&base, want) {
            missing.push(format!(
                "enabling {} below cugrade's cgroup failed: {e}",
                want.join(", ")
            ));
        }
        let controllers: Vec<String> = words(&base.join("cgroup.subtree_control"))
            .into_iter()
            .filter(|c| WANTED.contains(&c.as_str()))
            .collect();
        let absent: Vec<&str> = WANTED
            .iter()
            .copied()
            .filter(|c| !controllers.iter().any(|x| x == c))
            .collect();
        if !absent.is_empty() && missing.is_empty() {
            missing.push(format!(
                "no {} controller in cugrade's cgroup (it lists: {}); the host keeps it \
                 elsewhere (cgroup v1) or did not delegate it",
                absent.join(" or "),
                if o.controllers.is_empty() {
                    "none".to_string()
                } else {
                    o.controllers.join(" ")
                }
            ));
        }
        Ok(Plan {
            base,
            controllers,
            missing: missing.join("; "),
        })
    })
}

fn mkdir(p: &Path) -> io::Result<()> {
    match std::fs::create_dir(p) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        r => r,
    }
}

/// Remove the worker cgroups (and leaf cgroups) of graders that are gone.
fn sweep(base: &Path) {
    for e in std::fs::read_dir(base).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix("cugrade-w-")
            .and_then(|r| r.split('-').next())
            .or_else(|| name.strip_prefix("cugrade-grader-"))
            .and_then(|p| p.parse::<i32>().ok());
        let Some(pid) = pid else { continue };
        // SAFETY: signal 0 only asks whether the process exists (EPERM: it does, another
        // user's).
        let alive = pid as u32 == std::process::id()
            || unsafe { libc::kill(pid, 0) } == 0
            || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !alive {
            kill_and_remove(&e.path());
        }
    }
}

/// End every process in the cgroup and remove it (waiting up to a second for them to go).
fn kill_and_remove(dir: &Path) {
    if std::fs::write(dir.join("cgroup.kill"), "1").is_err() {
        // Before Linux 5.14: one by one.
        for p in words(&dir.join("cgroup.procs")) {
            if let Ok(pid) = p.parse::<i32>() {
                // SAFETY: a plain signal to a process of this cgroup.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
    for _ in 0..100 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// One worker's cgroup.
#[derive(Debug)]
pub struct WorkerCgroup {
    dir: PathBuf,
    /// `cgroup.procs`, ready for the spawned process to write itself into.
    procs: CString,
}

impl WorkerCgroup {
    /// Make the cgroup for a worker with `policy` and say what it limits. `None` (and a
    /// degraded layer) where worker cgroups cannot be made.
    pub fn create(policy: &Policy) -> (Option<WorkerCgroup>, Layer) {
        let plan = match plan() {
            Ok(p) => p,
            Err(why) => {
                return (
                    None,
                    Layer::degraded(
                        layer::CGROUP,
                        format!(
                            "{why}; the rlimits, the PID namespace and the scratch's size still hold"
                        ),
                    ),
                );
            }
        };
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = plan
            .base
            .join(format!("cugrade-w-{}-{n}", std::process::id()));
        if let Err(e) = mkdir(&dir) {
            return (
                None,
                Layer::degraded(
                    layer::CGROUP,
                    format!(
                        "could not make a cgroup for the worker: {e}; the rlimits, the PID \
                         namespace and the scratch's size still hold"
                    ),
                ),
            );
        }
        let mut set = vec![];
        let mut failed = vec![];
        let mut write = |file: &str, value: String| match std::fs::write(dir.join(file), &value) {
            Ok(()) => set.push(format!("{file}={value}")),
            Err(e) => failed.push(format!("{file}: {e}")),
        };
        if plan.controllers.iter().any(|c| c == "pids") && policy.processes > 0 {
            // The worker's threads and processes, its supervisor, and a margin.
            write("pids.max", (policy.processes + 8).to_string());
        }
        if plan.controllers.iter().any(|c| c == "memory") && policy.data_bytes > 0 {
            write("memory.max", memory_max(policy).to_string());
            if dir.join("memory.swap.max").exists() {
                write("memory.swap.max", "0".into());
            }
            write("memory.oom.group", "1".into());
        }
        let Ok(procs) = CString::new(dir.join("cgroup.procs").as_os_str().as_encoded_bytes())
        else {
            kill_and_remove(&dir);
            return (None, Layer::degraded(layer::CGROUP, "odd cgroup path"));
        };
        let limits = if set.is_empty() {
            "no limits".to_string()
        } else {
            set.join(" ")
        };
        // No path: the grader's pid is in it, and report lines must not vary between runs.
        let detail = format!("{OWN}: {limits}; cgroup.kill ends everything in it");
        let mut why = vec![];
        if !plan.missing.is_empty() {
            why.push(plan.missing.clone());
        }
        why.extend(failed);
        let layer = if why.is_empty() {
            Layer::active(layer::CGROUP, detail)
        } else {
            Layer::degraded(
                layer::CGROUP,
                format!(
                    "{detail}; but {}; the rlimits and the scratch's size still hold",
                    why.join("; ")
                ),
            )
        };
        (Some(WorkerCgroup { dir, procs }), layer)
    }

    /// What the spawned process needs to enter the cgroup (see [`Entry::enter`]).
    pub fn entry(&self) -> Entry {
        Entry(self.procs.clone())
    }

    /// The cgroup's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether process `pid` (a worker just spawned) is in the cgroup: `None` where its
    /// `/proc/PID/cgroup` cannot be read (it is gone already).
    pub fn holds(&self, pid: u32) -> Option<bool> {
        let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
        let name = self.dir.file_name()?.to_string_lossy();
        Some(path.trim_end().ends_with(&format!("/{name}")))
    }

    /// End everything in the cgroup and remove it.
    pub fn kill(&self) {
        kill_and_remove(&self.dir);
    }
}

/// A worker cgroup's `cgroup.procs`, for the spawned process.
#[derive(Debug, Clone)]
pub struct Entry(CString);

impl Entry {
    /// In the spawned process, between fork and exec: enter the cgroup. Async-signal-safe
    /// (open, write, close); a failure leaves the process where it is.
    pub fn enter(&self) {
        // SAFETY: a valid NUL-terminated path; raw syscalls only.
        unsafe {
            let fd = libc::open(self.0.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd >= 0 {
                libc::write(fd, b"0".as_ptr().cast(), 1);
                libc::close(fd);
            }
        }
    }
}

/// `memory.max` for a worker: its data limit, its scratch tmpfs, and 2 GiB for the page cache
/// of the libraries it maps and the driver's own allocations.
fn memory_max(policy: &Policy) -> u64 {
    policy
        .data_bytes
        .saturating_add(policy.scratch_bytes())
        .saturating_add(2 << 30)
}

/// End everything in a worker cgroup by its directory (an interrupted grader's sweep).
pub fn kill_dir(dir: &Path) {
    kill_and_remove(dir);
}

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;

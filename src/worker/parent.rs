//! The parent side: spawn a worker, talk to it with deadlines, and kill it when it overruns.
//!
//! Each worker is its own session (and so its own process group, and its own scheduler
//! autogroup: a fork bomb in one worker shares one worker's CPU time). A request that is not
//! answered by its deadline ends the worker: SIGTERM to its supervisor (which ends the worker
//! and every process it started, see `sandbox::supervisor`), a short grace, then SIGKILL to
//! the whole group and, when the grader is root, to every process of the worker's uid.
//! The runner (`process`) starts it; everything the worker prints (device printf included)
//! is drained from its stderr by the runner's thread, and kept up to a cap so a flood cannot
//! exhaust memory or stall the worker on a full pipe. Every live worker is registered, so that an interrupted grader ends them all
//! (`end_all`).

use super::child::{Role, WorkerConfig};
pub use super::process::Captured;
use super::process::{Input, Output, Process, running};
use super::protocol::{Request, Response, read_frame, write_frame};
use crate::backend::BackendKind;
use crate::sandbox;
use std::collections::BTreeMap;
use std::io::{BufReader, BufWriter};
use std::path::PathBuf;
use std::process::{Child, ChildStdin};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Output kept from one worker; the rest is counted and dropped.
pub const OUTPUT_CAP: usize = 64 * 1024;

/// Why a request got no valid answer.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerFailure {
    /// No answer before the deadline; the process group was killed.
    Timeout(Duration),
    /// The worker exited or was killed by a signal; the string says how.
    Died(String),
    /// The worker sent something that is not a valid answer.
    Protocol(String),
}

impl std::fmt::Display for WorkerFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkerFailure::Timeout(d) => write!(
                f,
                "no answer within {:.1} s; the worker was killed",
                d.as_secs_f64()
            ),
            WorkerFailure::Died(how) => write!(f, "the worker died: {how}"),
            WorkerFailure::Protocol(m) => write!(f, "the worker broke the protocol: {m}"),
        }
    }
}

type Frame = Result<(Response, Vec<Vec<u8>>), String>;

pub struct Worker {
    child: Child,
    stdin: Option<BufWriter<ChildStdin>>,
    frames: Receiver<Frame>,
    output: Arc<Mutex<Captured>>,
    pub ready: ReadyInfo,
    _temp: tempfile::TempDir,
    dead: bool,
    /// The worker's own uid, when the grader is root (see `sandbox::identity`).
    uid: Option<u32>,
    /// The worker's cgroup, where the host lets cugrade make one (see `sandbox::cgroup`).
    cgroup: Option<sandbox::cgroup::WorkerCgroup>,
}

/// A worker that runs now: its supervisor's pid, with its uid and temp dir.
struct Live {
    uid: Option<u32>,
    temp: PathBuf,
    cgroup: Option<PathBuf>,
}

static LIVE: Mutex<BTreeMap<u32, Live>> = Mutex::new(BTreeMap::new());

/// Set by [`end_all`]: no worker starts after it.
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Why GPU workers run in compat mode (without the private mount view and the uid of their
/// own), once CUDA was seen not to start inside the full sandbox on this machine.
static GPU_COMPAT: Mutex<Option<String>> = Mutex::new(None);

fn live() -> std::sync::MutexGuard<'static, BTreeMap<u32, Live>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// End every live worker and remove its temp dir: what an interrupted grader does before it
/// exits. Each supervisor gets SIGTERM (it ends its worker's processes), then every group gets
/// SIGKILL, and every worker uid too.
pub fn end_all() {
    STOPPING.store(true, std::sync::atomic::Ordering::SeqCst);
    let workers: Vec<(u32, Option<u32>, PathBuf, Option<PathBuf>)> = live()
        .iter()
        .map(|(pid, l)| (*pid, l.uid, l.temp.clone(), l.cgroup.clone()))
        .collect();
    for (pid, _, _, _) in &workers {
        // SAFETY: signalling a child of ours.
        unsafe { libc::kill(*pid as libc::pid_t, libc::SIGTERM) };
    }
    let deadline = std::time::Instant::now() + Duration::from_millis(1500);
    while std::time::Instant::now() < deadline && workers.iter().any(|(pid, _, _, _)| running(*pid))
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    for (pid, uid, temp, cgroup) in &workers {
        // SAFETY: signalling a process group of ours.
        unsafe { libc::kill(-(*pid as libc::pid_t), libc::SIGKILL) };
        if let Some(uid) = uid {
            sandbox::identity::kill_all_of(*uid);
        }
        if let Some(dir) = cgroup {
            sandbox::cgroup::kill_dir(dir);
        }
        let _ = std::fs::remove_dir_all(temp);
    }
}

/// What the worker said when it came up.
#[derive(Debug, Clone, Default)]
pub struct ReadyInfo {
    pub device: String,
    pub arch: String,
    pub sandbox: Vec<String>,
}

/// How to start a worker.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    pub role: Role,
    pub backend: BackendKind,
    pub device: usize,
    /// Whether to confine the worker (student code) or not (trusted reference runs still are,
    /// but may be told otherwise for debugging).
    pub startup_timeout: Duration,
    /// Largest response the parent accepts (blobs), bytes.
    pub max_response_bytes: usize,
    pub max_request_bytes: usize,
    pub data_limit_bytes: u64,
    pub cpu_seconds: u64,
    /// Directories the worker must never see even if a library root contains them: the
    /// rubric's folder, the cohort, the output dir.
    pub protected: Vec<std::path::PathBuf>,
    /// More paths the worker may read: CUDA's headers, the Numba toolchain.
    pub extra_read: Vec<std::path::PathBuf>,
    /// The GPU's lock key (`measure::lock`): a GPU worker starts (creates its context, runs
    /// its first module) under the GPU's shared lock, never beside a timed section.
    pub gpu_lock: Option<String>,
    /// A rank worker's GPUs (`WorkerConfig::ranks`); empty for one device.
    pub ranks: Vec<usize>,
}

impl WorkerOptions {
    pub fn new(role: Role, backend: BackendKind, device: usize) -> Self {
        WorkerOptions {
            role,
            backend,
            device,
            startup_timeout: Duration::from_secs(60),
            max_response_bytes: 1 << 30,
            max_request_bytes: 1 << 30,
            data_limit_bytes: 8 << 30,
            cpu_seconds: 900,
            protected: Vec::new(),
            extra_read: Vec::new(),
            gpu_lock: None,
            ranks: Vec::new(),
        }
    }
}

impl Worker {
    /// Start a worker and wait for its `Ready`. A worker that fails to start is `Err` with the
    /// reason and what it printed.
    pub fn spawn(opts: &WorkerOptions) -> Result<Worker, String> {
        let gpu = opts.backend.caps().device && opts.role == Role::Run;
        // (A Python worker's CUDA starts after `exec`, in CuPy: no retry for it.)
        if !gpu {
            return Worker::spawn_with(opts, None);
        }
        let _shared = opts
            .gpu_lock
            .as_deref()
            .and_then(|k| crate::measure::lock::shared(k, "worker start").ok());
        let compat = GPU_COMPAT.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if compat.is_some() {
            return Worker::spawn_with(opts, compat);
        }
        match Worker::spawn_with(opts, None) {
            Ok(w) => Ok(w),
            Err(full) => {
                // CUDA may need something the private mount view or the worker's own uid
                // takes away on this machine: try once without them, and keep that mode for
                // the run if it works, saying so in every report.
                let why = format!(
                    "CUDA did not start inside the full sandbox on this machine ({}); GPU \
                     workers run without their private mount view and uid",
                    full.lines().next().unwrap_or_default()
                );
                match Worker::spawn_with(opts, Some(why.clone())) {
                    Ok(w) => {
                        eprintln!("cugrade: warning: {why}");
                        *GPU_COMPAT.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
                        Ok(w)
                    }
                    Err(_) => Err(full),
                }
            }
        }
    }

    fn spawn_with(opts: &WorkerOptions, compat: Option<String>) -> Result<Worker, String> {
        if STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
            return Err("grading was interrupted".into());
        }
        let temp = sandbox::scratch::tempdir("worker-")
            .map_err(|e| format!("cannot create a temp dir: {e}"))?;
        let mut policy = sandbox::Policy::worker(
            temp.path(),
            opts.backend.caps().device && matches!(opts.role, Role::Run | Role::Python),
        );
        policy.compat = compat;
        policy.data_bytes = opts.data_limit_bytes;
        policy.cpu_seconds = opts.cpu_seconds;
        policy.protected = opts.protected.clone();
        policy.extra_read = opts.extra_read.clone();
        // NVRTC from cugrade's cache (no system NVRTC): the compile worker loads it from there.
        let nvrtc_dir = (opts.role == Role::Compile && crate::compile::nvrtc_lib::present())
            .then(crate::compile::nvrtc_lib::loaded_dir)
            .flatten();
        policy.extra_read.extend(nvrtc_dir.clone());
        let config = WorkerConfig {
            role: opts.role,
            backend: opts.backend,
            device: opts.device,
            policy: policy.clone(),
            max_request_bytes: opts.max_request_bytes,
            nvrtc_dir,
            ranks: opts.ranks.clone(),
        };
        let exe = worker_exe()?;
        let config = serde_json::to_string(&config).map_err(|e| e.to_string())?;
        let (cgroup, mut cgroup_layer) = sandbox::cgroup::WorkerCgroup::create(&policy);
        // The runner starts it sandboxed, in a session of its own and its cgroup; its life
        // (deadlines, kill, registry) is this file's.
        let spawned = Process::new(exe)
            .arg("__worker")
            .arg(config)
            .stdin(Input::Piped)
            .stdout(Output::Piped)
            .stderr(Output::Capture)
            .cap(OUTPUT_CAP)
            .sandbox(&policy, cgroup.as_ref().map(|c| c.entry()))
            .spawn_child();
        let (mut child, output) = match spawned {
            Ok((c, Some(output))) => (c, output),
            Ok((mut c, None)) => {
                let _ = c.kill();
                return Err("worker has no stderr".into());
            }
            Err(e) => {
                if let Some(c) = &cgroup {
                    c.kill();
                }
                return Err(format!("cannot start a worker: {e}"));
            }
        };
        if let Some(c) = &cgroup
            && c.holds(child.id()) == Some(false)
        {
            // The spawned process could not write itself into the cgroup (and stays where the
            // grader is): say so rather than claim limits that do not hold.
            cgroup_layer = sandbox::Layer::degraded(
                sandbox::layer::CGROUP,
                "the worker could not enter its cgroup; the rlimits, the PID namespace and the \
                 scratch's size still hold",
            );
        }
        let uid = sandbox::identity::is_root().then(|| sandbox::identity::worker_uid(child.id()));
        live().insert(
            child.id(),
            Live {
                uid,
                temp: temp.path().to_path_buf(),
                cgroup: cgroup.as_ref().map(|c| c.dir().to_path_buf()),
            },
        );
        // Pipes of 1 MiB rather than 64 KiB: a function lab's table and features (hundreds of
        // MiB per call) cross them inside the timed section.
        for fd in [
            child.stdin.as_ref().map(std::os::fd::AsRawFd::as_raw_fd),
            child.stdout.as_ref().map(std::os::fd::AsRawFd::as_raw_fd),
        ]
        .into_iter()
        .flatten()
        {
            // SAFETY: fcntl on a pipe this process holds; failure leaves the default size.
            unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, 1 << 20) };
        }
        let stdin = child.stdin.take().map(BufWriter::new);
        let stdout = child.stdout.take().ok_or("worker has no stdout")?;
        let (tx, frames) = channel();
        let max = opts.max_response_bytes;
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let f = match read_frame::<Response>(&mut r, max) {
                    Ok(Some(f)) => Ok(f),
                    Ok(None) => Err("the worker closed its channel".to_string()),
                    Err(e) => Err(e.to_string()),
                };
                let end = f.is_err();
                if tx.send(f).is_err() || end {
                    break;
                }
            }
        });
        let mut w = Worker {
            child,
            stdin,
            frames,
            output,
            ready: ReadyInfo::default(),
            _temp: temp,
            dead: false,
            uid,
            cgroup,
        };
        match w.receive(opts.startup_timeout) {
            Ok((
                Response::Ready {
                    device,
                    arch,
                    sandbox,
                    ..
                },
                _,
            )) => {
                let mut sandbox = sandbox;
                sandbox.push(cgroup_layer.line());
                w.ready = ReadyInfo {
                    device,
                    arch,
                    sandbox,
                };
                Ok(w)
            }
            Ok((Response::Failed { message }, _)) => Err(message),
            Ok((other, _)) => Err(format!("unexpected first message {other:?}")),
            Err(f) => Err(format!("{f}\n{}", w.output().text())),
        }
    }

    /// Send a request and wait up to `timeout` for its answer.
    pub fn call(
        &mut self,
        req: &Request,
        blobs: &[&[u8]],
        timeout: Duration,
    ) -> Result<(Response, Vec<Vec<u8>>), WorkerFailure> {
        if self.dead {
            return Err(WorkerFailure::Died("the worker was already stopped".into()));
        }
        let sent = match self.stdin.as_mut() {
            Some(w) => write_frame(w, req, blobs),
            None => Err(std::io::Error::other("no stdin")),
        };
        if let Err(e) = sent {
            return Err(self.died(format!("could not send the request ({e})")));
        }
        self.receive(timeout)
    }

    fn receive(&mut self, timeout: Duration) -> Result<(Response, Vec<Vec<u8>>), WorkerFailure> {
        match self.frames.recv_timeout(timeout) {
            Ok(Ok(f)) => Ok(f),
            Ok(Err(e)) => Err(self.died(e)),
            Err(RecvTimeoutError::Timeout) => {
                self.kill();
                Err(WorkerFailure::Timeout(timeout))
            }
            Err(RecvTimeoutError::Disconnected) => {
                Err(self.died("the worker closed its channel".into()))
            }
        }
    }

    /// The worker is gone or broke the protocol: find out how, and make sure it is dead.
    fn died(&mut self, context: String) -> WorkerFailure {
        let status = self.child.try_wait().ok().flatten();
        self.kill();
        let status = status.or_else(|| self.child.wait().ok());
        match status {
            Some(s) => {
                use std::os::unix::process::ExitStatusExt;
                let how = match (s.code(), s.signal()) {
                    (_, Some(sig)) => format!("killed by signal {sig} ({})", signal_name(sig)),
                    (Some(c), _) => format!("exited with code {c}"),
                    _ => "ended".into(),
                };
                if context.contains("closed its channel") {
                    WorkerFailure::Died(how)
                } else {
                    WorkerFailure::Protocol(format!("{context}; {how}"))
                }
            }
            None => WorkerFailure::Protocol(context),
        }
    }

    /// Confirm, from the host's side, a worker's report that it was refused toolchain files
    /// (`Response::Unreadable`): the message naming what stops it, with the fix, when the
    /// host's mode bits refuse the worker's uid; `None` when they do not (then the worker's
    /// word is not enough to blame the machine). `roots`: the toolchain's paths it walked.
    pub fn unreadable(
        &self,
        paths: &[sandbox::access::Blocked],
        roots: &[std::path::PathBuf],
    ) -> Option<String> {
        // SAFETY: getuid and getgid cannot fail.
        let (uid, gid) = match self.uid {
            Some(uid) => (uid, sandbox::identity::worker_gid(uid, false)),
            None => unsafe { (libc::getuid(), libc::getgid()) },
        };
        let who = sandbox::access::Reader {
            uid,
            gid,
            view: self
                .ready
                .sandbox
                .iter()
                .any(|l| l.starts_with("mounts: active")),
        };
        let confirmed: Vec<(String, String)> = paths
            .iter()
            .filter(|b| {
                roots
                    .iter()
                    .any(|r| b.path.starts_with(r) || r.starts_with(&b.path))
            })
            .filter_map(|b| {
                let why = sandbox::access::explain(&b.path, who)?;
                Some((why, fix_for(&b.path, roots, who)))
            })
            .collect();
        let (why, fix) = confirmed.first()?;
        let whose = if self.uid.is_some() {
            "cugrade runs as root, so each worker runs as a uid of its own, which owns no file"
        } else {
            "workers run as cugrade's own uid"
        };
        Some(format!(
            "the grading workers cannot read the toolchain: {why} ({whose}).\nfix: {fix}"
        ))
    }

    /// Everything the worker printed so far.
    pub fn output(&self) -> Captured {
        // Give the drain thread a moment to catch up with output written just before an answer.
        std::thread::sleep(Duration::from_millis(5));
        self.output.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Whether the worker still runs and keeps to the protocol.
    pub fn is_alive(&mut self) -> bool {
        !self.dead && matches!(self.child.try_wait(), Ok(None))
    }

    /// Forget what the worker printed so far (a worker that goes on to another milestone:
    /// each milestone's checks show that milestone's output, with the full capture limit).
    pub fn clear_output(&self) {
        // What was written just before the last answer reaches the drain thread first.
        std::thread::sleep(Duration::from_millis(5));
        if let Ok(mut c) = self.output.lock() {
            *c = Captured::default();
        }
    }

    /// End the worker and everything it started: its stdin closed and SIGTERM to its
    /// supervisor, a short grace, then SIGKILL to the whole group and to the worker's uid.
    pub fn kill(&mut self) {
        if self.dead {
            return;
        }
        self.dead = true;
        self.stdin = None;
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(uid) = self.uid {
            sandbox::identity::kill_all_of(uid);
        }
        if let Some(c) = &self.cgroup {
            c.kill();
        }
        live().remove(&self.child.id());
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What to do about a toolchain path a worker may not read: open the toolchain's tree to all
/// users, or, when a directory above it may not be entered (no mount view), that directory.
fn fix_for(
    path: &std::path::Path,
    roots: &[std::path::PathBuf],
    who: sandbox::access::Reader,
) -> String {
    let root = roots
        .iter()
        .filter(|r| path.starts_with(r))
        .max_by_key(|r| r.as_os_str().len())
        .cloned()
        .unwrap_or_else(|| path.to_path_buf());
    match sandbox::access::closed_above(path, who) {
        Some((dir, _)) if !who.view => format!(
            "`chmod o+x {}`, or keep the toolchain where every user may enter (for cugrade's \
             own cache: set CUGRADE_NVRTC_CACHE to such a folder, e.g. /var/cache/cugrade-nvrtc)",
            dir.display()
        ),
        _ if root.is_dir() => format!(
            "`chmod -R a+rX {}` (every user must read the toolchain)",
            root.display()
        ),
        _ => format!(
            "`chmod a+rX {}` (every user must read the toolchain)",
            root.display()
        ),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        24 => "SIGXCPU: CPU time limit",
        25 => "SIGXFSZ: file size limit",
        31 => "SIGSYS: a forbidden system call",
        _ => "signal",
    }
}

/// The binary to re-execute: ourselves. Tests of the library set `CUGRADE_WORKER_EXE` to
/// the built `cugrade` binary, since their own executable has no worker mode.
pub(super) fn worker_exe() -> Result<std::path::PathBuf, String> {
    if let Some(p) = std::env::var_os("CUGRADE_WORKER_EXE") {
        return Ok(p.into());
    }
    std::env::current_exe().map_err(|e| format!("cannot find the cugrade executable: {e}"))
}

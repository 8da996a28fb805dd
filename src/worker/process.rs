//! The runner: every child process cugrade starts goes through [`Process`], and no other file
//! names `std::process::Command` (`tests/it/architecture.rs` checks it). A child gets
//!
//! - its own process group (or, sandboxed, its own session), so that a deadline or an
//!   interrupted grader ends everything it started, not only the process itself;
//! - an optional deadline: on overrun, SIGTERM to the group, a grace period, then SIGKILL to
//!   the group (a grace of zero: SIGKILL at once);
//! - stdout and stderr each drained by a thread and kept up to a byte cap (the rest is
//!   counted and dropped), so that a chatty child can neither block on a full pipe nor
//!   exhaust the grader's memory; or sent to a file, to the grader's own streams, or nowhere;
//! - where asked, the worker's sandbox as `sandbox::prepare_command` sets it up (a scrubbed
//!   environment, the temp dir as working directory, no inherited descriptors), in a session
//!   of its own and, where the host allows one, its cgroup; or a cleared environment with only
//!   the variables the caller names.
//!
//! Every child started here in a group of its own is registered while it runs, so that an
//! interrupted grader ends it too ([`end_all`], called beside `parent::end_all`). A worker is
//! spawned here as well ([`Process::spawn_child`]) but lives on in `parent`, whose protocol,
//! kill (its supervisor first, then its group, its uid and its cgroup) and registry are its
//! own.

use crate::sandbox;
use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a captured stream keeps unless told otherwise ([`Process::cap`]).
pub const CAPTURE_CAP: usize = 1 << 20;

/// How long a child gets between SIGTERM and SIGKILL unless told otherwise.
pub const GRACE: Duration = Duration::from_secs(1);

/// How long, once a child has ended, its captured streams may stay open (held by something it
/// left behind) before what was read so far is kept and the rest abandoned.
const STREAMS_AFTER_EXIT: Duration = Duration::from_secs(2);

/// What a child printed on one stream.
#[derive(Debug, Default, Clone)]
pub struct Captured {
    pub bytes: Vec<u8>,
    /// Total bytes printed, kept or not.
    pub total: u64,
}

impl Captured {
    pub fn truncated(&self) -> bool {
        self.total > self.bytes.len() as u64
    }
    /// The kept text, with a note when some was dropped.
    pub fn text(&self) -> String {
        let mut s = String::from_utf8_lossy(&self.bytes).into_owned();
        if self.truncated() {
            s.push_str(&format!(
                "\n[output truncated: {} of {} bytes shown]",
                self.bytes.len(),
                self.total
            ));
        }
        s
    }
    /// The first `cap` bytes of a file a child wrote its output to, and the file's size.
    pub fn from_file(path: &Path, cap: usize) -> Captured {
        let b = std::fs::read(path).unwrap_or_default();
        Captured {
            total: b.len() as u64,
            bytes: b[..b.len().min(cap)].to_vec(),
        }
    }
}

/// A child's stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// Reads end at once.
    Null,
    /// A pipe the caller writes ([`Process::spawn_child`]).
    Piped,
    /// The grader's own stdin (and, for [`Process::exec`], whatever fd 0 is).
    Inherit,
}

/// Where a child's stdout or stderr goes.
#[derive(Debug)]
pub enum Output {
    /// Nowhere (`/dev/null`).
    Null,
    /// The grader's own stream of the same number.
    Inherit,
    /// The grader's stderr (a tool's chatter on stdout kept off the grader's stdout).
    Stderr,
    /// Drained by a thread, the first [`Process::cap`] bytes kept.
    Capture,
    /// A pipe the caller reads itself ([`Process::spawn_child`]).
    Piped,
    /// A file (give stdout and stderr clones of one file to keep them in one stream).
    File(std::fs::File),
}

/// Which process group a child runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    /// A group of its own, registered for [`end_all`] while it runs.
    Own,
    /// The grader's: a child on the user's terminal (a background group there would be
    /// stopped by SIGTTOU where the terminal has `tostop`), which Ctrl-C reaches directly.
    Grader,
    /// A session of its own (the sandboxed worker).
    Session,
}

/// A child process to start: a builder over `std::process::Command`.
pub struct Process {
    program: OsString,
    args: Vec<OsString>,
    clear_env: bool,
    env: Vec<(OsString, OsString)>,
    dir: Option<PathBuf>,
    stdin: Input,
    stdout: Output,
    stderr: Output,
    cap: usize,
    deadline: Option<Duration>,
    grace: Duration,
    group: Group,
    sandbox: Option<(sandbox::Policy, Option<sandbox::cgroup::Entry>)>,
}

impl Process {
    /// `program` with no arguments, the grader's environment, stdin `/dev/null`, stdout and
    /// stderr the grader's, a group of its own, no deadline.
    pub fn new(program: impl AsRef<OsStr>) -> Process {
        Process {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            clear_env: false,
            env: Vec::new(),
            dir: None,
            stdin: Input::Null,
            stdout: Output::Inherit,
            stderr: Output::Inherit,
            cap: CAPTURE_CAP,
            deadline: None,
            grace: GRACE,
            group: Group::Own,
            sandbox: None,
        }
    }

    pub fn arg(mut self, a: impl AsRef<OsStr>) -> Process {
        self.args.push(a.as_ref().to_owned());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Process
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Set a variable; later settings of the same variable win.
    pub fn env(mut self, k: impl AsRef<OsStr>, v: impl AsRef<OsStr>) -> Process {
        self.env
            .push((k.as_ref().to_owned(), v.as_ref().to_owned()));
        self
    }

    pub fn envs<I, K, V>(mut self, vars: I) -> Process
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        for (k, v) in vars {
            self = self.env(k, v);
        }
        self
    }

    /// Start from an empty environment: the child gets only the variables set with
    /// [`Process::env`] (wherever they are set in the chain).
    pub fn env_clear(mut self) -> Process {
        self.clear_env = true;
        self
    }

    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Process {
        self.dir = Some(dir.as_ref().to_path_buf());
        self
    }

    pub fn stdin(mut self, i: Input) -> Process {
        self.stdin = i;
        self
    }

    pub fn stdout(mut self, o: Output) -> Process {
        self.stdout = o;
        self
    }

    pub fn stderr(mut self, o: Output) -> Process {
        self.stderr = o;
        self
    }

    /// Capture both streams (the first `cap` bytes of each, see [`Process::cap`]).
    pub fn capture(self) -> Process {
        self.stdout(Output::Capture).stderr(Output::Capture)
    }

    /// Bytes kept of each captured stream.
    pub fn cap(mut self, bytes: usize) -> Process {
        self.cap = bytes;
        self
    }

    /// End the child (and its group) if it runs longer than `d` ([`Process::run`],
    /// [`Running::wait`]).
    pub fn deadline(mut self, d: Duration) -> Process {
        self.deadline = Some(d);
        self
    }

    /// Time between SIGTERM and SIGKILL when the child is ended; zero: SIGKILL at once.
    pub fn grace(mut self, d: Duration) -> Process {
        self.grace = d;
        self
    }

    /// Stay in the grader's process group: for a child that shows progress on the user's
    /// terminal. It is not registered for [`end_all`] (Ctrl-C reaches it directly).
    pub fn grader_group(mut self) -> Process {
        self.group = Group::Grader;
        self
    }

    /// Confine the child as a worker: `sandbox::prepare_command` with `policy` (environment,
    /// working directory, descriptors), then, between fork and exec, a session of its own and
    /// the cgroup `entry`. Variables set with [`Process::env`] come on top.
    pub fn sandbox(
        mut self,
        policy: &sandbox::Policy,
        entry: Option<sandbox::cgroup::Entry>,
    ) -> Process {
        self.sandbox = Some((policy.clone(), entry));
        self.group = Group::Session;
        self
    }

    /// The `Command`, and the streams to drain.
    fn command(self) -> (Command, Plan) {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args);
        if let Some((policy, _)) = &self.sandbox {
            sandbox::prepare_command(&mut cmd, policy);
        }
        if self.clear_env {
            cmd.env_clear();
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if let Some(d) = &self.dir {
            cmd.current_dir(d);
        }
        cmd.stdin(match self.stdin {
            Input::Null => Stdio::null(),
            Input::Piped => Stdio::piped(),
            Input::Inherit => Stdio::inherit(),
        });
        let capture = (
            matches!(self.stdout, Output::Capture),
            matches!(self.stderr, Output::Capture),
        );
        cmd.stdout(stdio(self.stdout));
        cmd.stderr(stdio(self.stderr));
        match (self.group, self.sandbox) {
            (Group::Session, Some((_, entry))) => {
                // SAFETY: setsid and the cgroup entry (open, write, close) are
                // async-signal-safe; the closure allocates nothing.
                unsafe {
                    cmd.pre_exec(move || {
                        libc::setsid();
                        if let Some(e) = &entry {
                            e.enter();
                        }
                        Ok(())
                    });
                }
            }
            (Group::Own, _) => {
                cmd.process_group(0);
            }
            _ => {}
        }
        let plan = Plan {
            capture,
            cap: self.cap,
            deadline: self.deadline,
            grace: self.grace,
            own_group: self.group != Group::Grader,
            register: self.group == Group::Own,
        };
        (cmd, plan)
    }

    /// Start the child. `Err`: it could not be started (the program is missing, not
    /// executable), or the grader is being interrupted.
    pub fn spawn(self) -> std::io::Result<Running> {
        if STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(std::io::Error::other("grading was interrupted"));
        }
        let (mut cmd, plan) = self.command();
        let mut child = {
            // Registered under the lock: an interrupt between the spawn and the registration
            // would miss it.
            let mut live = live();
            let child = cmd.spawn()?;
            if plan.register {
                live.insert(child.id());
            }
            child
        };
        // The parent's copies of the child's ends (a file, a pipe) close here.
        drop(cmd);
        let stdout = plan
            .capture
            .0
            .then(|| child.stdout.take().map(|r| drain(r, plan.cap)))
            .flatten();
        let stderr = plan
            .capture
            .1
            .then(|| child.stderr.take().map(|r| drain(r, plan.cap)))
            .flatten();
        Ok(Running {
            child,
            started: Instant::now(),
            stdout,
            stderr,
            plan,
            done: false,
        })
    }

    /// Start the child and wait for it (up to its deadline).
    pub fn run(self) -> std::io::Result<Ended> {
        self.spawn()?.wait()
    }

    /// Start a child whose life the caller manages (a worker: `parent::Worker`): its
    /// `Child`, with the pipes asked for, and the live capture of its stderr if asked for.
    /// It is not registered for [`end_all`]; its deadline and grace are not used.
    pub fn spawn_child(self) -> std::io::Result<(Child, Option<Arc<Mutex<Captured>>>)> {
        let (mut cmd, plan) = self.command();
        let mut child = cmd.spawn()?;
        drop(cmd);
        let stderr = plan
            .capture
            .1
            .then(|| child.stderr.take().map(|r| drain(r, plan.cap).kept))
            .flatten();
        Ok((child, stderr))
    }

    /// Become the program (in this process, which keeps its descriptors, its process group
    /// and its sandbox). Returns only when that failed.
    pub fn exec(self) -> std::io::Error {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args);
        if self.clear_env {
            cmd.env_clear();
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if let Some(d) = &self.dir {
            cmd.current_dir(d);
        }
        cmd.exec()
    }
}

fn stdio(o: Output) -> Stdio {
    match o {
        Output::Null => Stdio::null(),
        Output::Inherit => Stdio::inherit(),
        Output::Stderr => std::io::stderr().into(),
        Output::Capture | Output::Piped => Stdio::piped(),
        Output::File(f) => f.into(),
    }
}

/// What [`Running`] needs of its [`Process`].
struct Plan {
    /// Whether stdout, stderr are captured.
    capture: (bool, bool),
    cap: usize,
    deadline: Option<Duration>,
    grace: Duration,
    /// Whether the child leads a group of its own (ended as a group).
    own_group: bool,
    register: bool,
}

/// A stream being drained: what was kept so far, and word when it closed.
struct Drain {
    kept: Arc<Mutex<Captured>>,
    closed: Receiver<()>,
}

impl Drain {
    /// What was kept, once the stream closed or `until` passed.
    fn take(self, until: Instant) -> Captured {
        let _ = self
            .closed
            .recv_timeout(until.saturating_duration_since(Instant::now()));
        self.kept.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

fn drain(mut r: impl Read + Send + 'static, cap: usize) -> Drain {
    let kept = Arc::new(Mutex::new(Captured::default()));
    let (tx, closed) = channel();
    let out = Arc::clone(&kept);
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if let Ok(mut c) = out.lock() {
                        c.total += n as u64;
                        let room = cap.saturating_sub(c.bytes.len());
                        c.bytes.extend_from_slice(&buf[..n.min(room)]);
                    }
                }
            }
        }
        let _ = tx.send(());
    });
    Drain { kept, closed }
}

/// A child that runs.
pub struct Running {
    child: Child,
    started: Instant,
    stdout: Option<Drain>,
    stderr: Option<Drain>,
    plan: Plan,
    /// Waited for (and unregistered).
    done: bool,
}

/// How a child ended.
#[derive(Debug)]
pub struct Ended {
    pub status: ExitStatus,
    /// It ran past its deadline and was ended.
    pub timed_out: bool,
    /// What it printed, where captured (empty otherwise).
    pub stdout: Captured,
    pub stderr: Captured,
}

impl Running {
    /// The child's pid (its process group's id too, unless it runs in the grader's).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Whether it ended, without waiting.
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        let s = self.child.try_wait()?;
        if s.is_some() {
            self.finish();
        }
        Ok(s)
    }

    /// Wait for the child, ending it (and its group) at its deadline; then collect what it
    /// printed.
    pub fn wait(mut self) -> std::io::Result<Ended> {
        use wait_timeout::ChildExt;
        let (status, timed_out) = match self.plan.deadline {
            Some(d) => {
                let left = d.saturating_sub(self.started.elapsed());
                match self.child.wait_timeout(left)? {
                    Some(s) => (s, false),
                    None => (self.stop(), true),
                }
            }
            None => (self.child.wait()?, false),
        };
        self.finish();
        let until = Instant::now() + STREAMS_AFTER_EXIT;
        Ok(Ended {
            status,
            timed_out,
            stdout: self
                .stdout
                .take()
                .map(|d| d.take(until))
                .unwrap_or_default(),
            stderr: self
                .stderr
                .take()
                .map(|d| d.take(until))
                .unwrap_or_default(),
        })
    }

    /// End the child and its group now: SIGTERM, up to the grace period, then SIGKILL.
    /// Returns how it ended.
    pub fn stop(&mut self) -> ExitStatus {
        let pid = self.child.id() as libc::pid_t;
        let target = if self.plan.own_group { -pid } else { pid };
        if !self.plan.grace.is_zero() {
            // SAFETY: signalling a child (group) of ours.
            unsafe { libc::kill(target, libc::SIGTERM) };
            let until = Instant::now() + self.plan.grace;
            while Instant::now() < until && matches!(self.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // SAFETY: as above; the group may hold processes the child left.
        unsafe { libc::kill(target, libc::SIGKILL) };
        let _ = self.child.kill();
        let status = self.child.wait();
        self.finish();
        // A child that cannot be waited for has been waited for already.
        status.unwrap_or_else(|_| std::os::unix::process::ExitStatusExt::from_raw(0))
    }

    fn finish(&mut self) {
        if !self.done {
            self.done = true;
            live().remove(&self.child.id());
        }
    }
}

impl Drop for Running {
    /// A child nobody waits for any more is ended, not left behind.
    fn drop(&mut self) {
        if !self.done {
            self.stop();
        }
    }
}

/// The children of [`Process::spawn`] that run now, by pid (each leads its group).
static LIVE: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// Set by [`end_all`]: no child starts after it.
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn live() -> std::sync::MutexGuard<'static, BTreeSet<u32>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// End every registered child and its group: what an interrupted grader does before it
/// exits. SIGTERM to each group, up to 1.5 s for them to end, then SIGKILL.
pub fn end_all() {
    STOPPING.store(true, std::sync::atomic::Ordering::SeqCst);
    let pids: Vec<u32> = live().iter().copied().collect();
    for pid in &pids {
        // SAFETY: signalling a process group of ours.
        unsafe { libc::kill(-(*pid as libc::pid_t), libc::SIGTERM) };
    }
    let deadline = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < deadline && pids.iter().any(|pid| running(*pid)) {
        std::thread::sleep(Duration::from_millis(10));
    }
    for pid in &pids {
        // SAFETY: as above.
        unsafe { libc::kill(-(*pid as libc::pid_t), libc::SIGKILL) };
    }
}

/// Whether `pid` still runs (not ended, not a zombie).
pub fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !matches!(
            s.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().next()),
            Some("Z") | Some("X") | None
        ),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Process {
        Process::new("sh").arg("-c").arg(script)
    }

    #[test]
    fn captures_both_streams_and_the_status() {
        let e = sh("printf out; printf err >&2; exit 3")
            .capture()
            .run()
            .unwrap();
        assert_eq!(e.status.code(), Some(3));
        assert!(!e.timed_out);
        assert_eq!(e.stdout.bytes, b"out");
        assert_eq!(e.stderr.bytes, b"err");
    }

    #[test]
    fn a_flood_is_capped_and_counted() {
        let e = sh("head -c 300000 /dev/zero")
            .stdout(Output::Capture)
            .cap(1000)
            .run()
            .unwrap();
        assert_eq!(e.stdout.bytes.len(), 1000);
        assert_eq!(e.stdout.total, 300000);
        assert!(
            e.stdout
                .text()
                .ends_with("[output truncated: 1000 of 300000 bytes shown]")
        );
    }

    #[test]
    fn the_deadline_ends_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        // A grandchild that would outlive its parent, holding the captured stream.
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let t = Instant::now();
        let e = sh(&script)
            .capture()
            .deadline(Duration::from_millis(300))
            .grace(Duration::from_millis(100))
            .run()
            .unwrap();
        assert!(e.timed_out);
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        let pid: u32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert!(!running(pid), "the grandchild {pid} survived");
    }

    #[test]
    fn a_cleared_environment_has_only_the_named_variables() {
        let e = Process::new("/usr/bin/env")
            .env("A", "1")
            .env_clear()
            .env("B", "2")
            .env("A", "3")
            .stdout(Output::Capture)
            .run()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&e.stdout.bytes), "A=3\nB=2\n");
    }

    #[test]
    fn one_file_takes_both_streams_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let f = std::fs::File::create(&log).unwrap();
        let e = sh("echo a; echo b >&2; echo c")
            .stdout(Output::File(f.try_clone().unwrap()))
            .stderr(Output::File(f))
            .run()
            .unwrap();
        assert!(e.status.success());
        let c = Captured::from_file(&log, 4);
        assert_eq!((c.bytes.as_slice(), c.total), (&b"a\nb\n"[..], 6));
    }

    #[test]
    fn a_missing_program_is_an_error_and_the_child_leads_its_group() {
        assert!(Process::new("/nonexistent/cugrade-test").run().is_err());
        // /proc/PID/stat's fifth field is the process group.
        let e = sh("cut -d' ' -f5 /proc/$$/stat; echo $$")
            .stdout(Output::Capture)
            .run()
            .unwrap();
        let text = String::from_utf8_lossy(&e.stdout.bytes).into_owned();
        let v: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(v.len(), 2, "{text}");
        assert_eq!(v[0], v[1], "{text}");
    }
}

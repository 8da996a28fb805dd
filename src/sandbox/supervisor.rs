//! Nothing a worker starts outlives it.
//!
//! The process the grader spawns forks once, after entering the worker's namespaces: the child
//! goes on as the worker (the first process of the new PID namespace, when there is one), and
//! the parent stays behind as a small supervisor that never runs student code. The kernel ends
//! every process of a PID namespace when its first process dies, so a double-forked, `setsid`
//! daemon dies with the worker; the worker dies with the supervisor (`PR_SET_PDEATHSIG`); and
//! the supervisor ends the worker as soon as the grader is gone: the grader holds the only
//! writing end of the worker's stdin, which the supervisor watches for a hang-up, whether the
//! grader closed it, exited or was killed with SIGKILL. (`PR_SET_PDEATHSIG` on the supervisor
//! itself would fire when the grader *thread* that spawned it ends, not the grader.)
//!
//! Without a PID namespace the supervisor is a child subreaper: orphans of the worker become
//! its children instead of init's, and it kills them all before it exits, as it does on
//! SIGTERM. When the worker runs as a uid of its own, `kill(-1)` under that uid ends every
//! process the worker left. The supervisor exits the way the worker did (the same exit code or
//! signal), so the grader's messages ("killed by signal 31 (SIGSYS)") are unchanged.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// What the worker side keeps after the split.
pub(super) struct Split {
    /// Read end of a pipe whose only writer is the supervisor: it hangs up when the supervisor
    /// is gone (checked after each `PR_SET_PDEATHSIG`, which a credential change clears).
    alive: OwnedFd,
}

impl Split {
    /// Ask to be killed when the supervisor dies, and die now if it already has.
    pub(super) fn tie_to_supervisor(&self) {
        // SAFETY: prctl with integer arguments; poll on a valid descriptor.
        unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            );
            let mut pfd = libc::pollfd {
                fd: self.alive.as_raw_fd(),
                events: 0,
                revents: 0,
            };
            if libc::poll(&mut pfd, 1, 0) > 0 && pfd.revents & (libc::POLLHUP | libc::POLLERR) != 0
            {
                libc::_exit(1);
            }
        }
    }
}

/// Fork the worker off. Returns in the worker (the child); the calling process becomes its
/// supervisor and never returns. `Err` (no fork possible) leaves the caller as the worker.
/// `own_uid`: the supervisor already runs as the worker's uid and may `kill(-1)` under it.
pub(super) fn split(own_uid: bool) -> std::io::Result<Split> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors; prctl and fork take plain arguments. The process is
    // single-threaded (the caller checked), so the child may run arbitrary code.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let (r, w) = (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]));
        // Orphans of the worker come back to us, not to init (matters without a PID namespace).
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        let pid = libc::fork();
        if pid < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if pid == 0 {
            drop(w);
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
            let split = Split { alive: r };
            split.tie_to_supervisor();
            return Ok(split);
        }
        drop(r);
        supervise(pid, w, own_uid)
    }
}

static STOP: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop(sig: libc::c_int) {
    STOP.store(sig, Ordering::SeqCst);
}

/// The supervisor's life: wait for the worker, reap orphans, end everything when asked or
/// when the grader is gone, then leave as the worker left.
fn supervise(worker: libc::pid_t, alive: OwnedFd, own_uid: bool) -> ! {
    close_all_but(&[0, 1, 2, alive.as_raw_fd()]);
    // SAFETY: resetting dispositions and the mask, then installing a handler that only stores
    // to an atomic. A supervisor forked from a process with handlers of its own (the doctor's
    // probe) must not run them: they may write to descriptors closed just above.
    unsafe {
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_stop as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    // SAFETY: pidfd_open takes a pid and flags.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, worker, 0) } as RawFd;
    let mut status: Option<libc::c_int> = None;
    loop {
        let mut pfds = [
            libc::pollfd {
                fd: 0,
                events: 0,
                revents: 0,
            },
            libc::pollfd {
                fd: pidfd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let n = if pidfd >= 0 { 2 } else { 1 };
        // SAFETY: valid pollfds.
        unsafe { libc::poll(pfds.as_mut_ptr(), n, 250) };
        reap(worker, &mut status);
        if status.is_some() {
            break;
        }
        let hung_up = pfds[0].revents & (libc::POLLHUP | libc::POLLERR) != 0;
        if hung_up || STOP.load(Ordering::SeqCst) != 0 {
            break;
        }
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(worker, libc::SIGKILL) };
    kill_descendants(worker, &mut status);
    if own_uid {
        // SAFETY: kill(-1) under the worker's own uid: every process of that uid but us.
        unsafe { libc::kill(-1, libc::SIGKILL) };
    }
    if status.is_none() {
        let mut s = 0;
        // SAFETY: waiting for our own child.
        if unsafe { libc::waitpid(worker, &mut s, 0) } == worker {
            status = Some(s);
        }
    }
    drop(alive);
    leave_like(status.unwrap_or(0))
}

/// Reap every child that has ended; note the worker's status.
fn reap(worker: libc::pid_t, status: &mut Option<libc::c_int>) {
    loop {
        let mut s = 0;
        // SAFETY: waitpid on any child, without blocking.
        let pid = unsafe { libc::waitpid(-1, &mut s, libc::WNOHANG) };
        if pid <= 0 {
            return;
        }
        if pid == worker {
            *status = Some(s);
        }
    }
}

/// SIGKILL every child until there is none left (orphans keep arriving while their parents
/// die), for at most two seconds.
fn kill_descendants(worker: libc::pid_t, status: &mut Option<libc::c_int>) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        reap(worker, status);
        let children = children_of(std::process::id() as libc::pid_t);
        if children.is_empty() {
            return;
        }
        for c in children {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(c, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The children of `pid`, from `/proc/PID/task/PID/children` or, where the kernel lacks it,
/// a scan of `/proc/*/stat`.
pub(super) fn children_of(pid: libc::pid_t) -> Vec<libc::pid_t> {
    if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) {
        return text
            .split_whitespace()
            .filter_map(|t| t.parse().ok())
            .collect();
    }
    let mut out = vec![];
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<libc::pid_t>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        // The field after the command (which may hold spaces) and the state is the ppid.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|f| f.parse::<libc::pid_t>().ok());
        if ppid == Some(pid) {
            out.push(p);
        }
    }
    out
}

/// Close every descriptor but `keep`.
fn close_all_but(keep: &[RawFd]) {
    let open: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
                .collect()
        })
        .unwrap_or_default();
    for fd in open {
        if !keep.contains(&fd) {
            // SAFETY: closing a descriptor of ours; the directory handle's fd is already gone.
            unsafe { libc::close(fd) };
        }
    }
}

/// Exit with the worker's wait status: its exit code, or death by the same signal.
fn leave_like(status: libc::c_int) -> ! {
    // SAFETY: plain calls; the process ends here either way.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
        libc::_exit(libc::WEXITSTATUS(status))
    }
}

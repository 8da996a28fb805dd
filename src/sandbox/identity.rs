//! Who a worker runs as.
//!
//! A grader started as root (Gradescope's `run_autograder`, a CI container, Docker) gives each
//! worker a uid of its own from a range that no account uses: the worker then owns no file of
//! the host (no `chmod`, `chown`, `utime` or xattr on them, whatever it can see), cannot signal
//! or trace any other process, and `RLIMIT_NPROC`, which the kernel counts per uid, limits this
//! worker's processes alone. The uid is derived from the worker's pid, which is unique while
//! the worker lives, so two graders on one machine never share one, and the grader can find
//! every process of a worker by its uid to end them all.
//!
//! A grader that is not root keeps its uid (it has no other to give), and the worker's user
//! namespace makes `RLIMIT_NPROC` count per worker instead (see `namespaces`).

use std::io;
use std::path::Path;

/// First uid of the range workers run as: 1,900,000,000 + pid, inside the block
/// 0x70000000..0x7FFFFFFF that systemd's uid conventions leave unassigned, below 2^31 (tools
/// that read uids as signed integers stay correct) and far above any account or container
/// range a distribution hands out.
pub const UID_BASE: u32 = 1_900_000_000;

/// Largest pid the kernel can hand out (`PID_MAX_LIMIT` on 64-bit).
const PID_LIMIT: u32 = 1 << 22;

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The uid (and gid) of the worker whose first process has `pid`: the base plus the pid, moved
/// by whole pid ranges past any uid that `/etc/passwd` or gid that `/etc/group` lists.
pub fn worker_uid(pid: u32) -> u32 {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let group = std::fs::read_to_string("/etc/group").unwrap_or_default();
    let listed = |text: &str, id: u32| {
        text.lines()
            .filter_map(|l| l.split(':').nth(2))
            .any(|f| f.trim().parse::<u32>() == Ok(id))
    };
    let mut uid = UID_BASE + (pid % PID_LIMIT);
    for _ in 0..8 {
        if !listed(&passwd, uid) && !listed(&group, uid) {
            break;
        }
        uid += PID_LIMIT;
    }
    uid
}

/// The gid a worker runs with: its own, unless it needs the GPU and the NVIDIA device files
/// are not open to everyone (`NVreg_DeviceFileMode=0660`, group `video`): then their group.
pub fn worker_gid(uid: u32, gpu: bool) -> u32 {
    use std::os::unix::fs::MetadataExt;
    if gpu
        && let Ok(m) = std::fs::metadata("/dev/nvidiactl")
        && m.mode() & 0o006 != 0o006
        && m.gid() != 0
    {
        return m.gid();
    }
    uid
}

/// Become `uid`/`gid` for good: no supplementary groups, real, effective and saved ids all
/// changed. Afterwards the process is made dumpable again, so that its own `/proc/self` files
/// stay its own (a uid change makes them root's, and `cuInit` writes
/// `/proc/self/task/*/comm`); core dumps stay off through `RLIMIT_CORE`.
pub(super) fn become_user(uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: plain system calls with integer arguments; the process is single-threaded, so
    // the raw calls change the credentials of the whole process.
    unsafe {
        if libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()) != 0 {
            return Err(last("setgroups"));
        }
        if libc::syscall(libc::SYS_setresgid, gid, gid, gid) != 0 {
            return Err(last("setresgid"));
        }
        if libc::syscall(libc::SYS_setresuid, uid, uid, uid) != 0 {
            return Err(last("setresuid"));
        }
        libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
    }
    Ok(())
}

fn last(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Give the worker's temp dir to its uid, so that it can write there when no private scratch
/// can be mounted. Best effort: the scratch mount makes it moot.
pub(super) fn give_dir(dir: &Path, uid: u32, gid: u32) {
    let _ = std::os::unix::fs::chown(dir, Some(uid), Some(gid));
}

/// SIGKILL every process that runs as `uid`, from a process that may (root). A forked child
/// takes the uid and calls `kill(-1, SIGKILL)`, which the kernel applies to every process of
/// that uid at once (a fork racing with it is refused), so a double-forked daemon or a fork
/// bomb of a worker cannot slip out. Never call it with a uid that is not a worker's.
pub fn kill_all_of(uid: u32) {
    if uid < UID_BASE || !is_root() {
        return;
    }
    // SAFETY: the child only makes raw system calls and `_exit`s: async-signal-safe even in a
    // multithreaded parent. The raw setresuid changes only the child's single thread.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            if libc::syscall(libc::SYS_setresuid, uid, uid, uid) == 0 {
                libc::kill(-1, libc::SIGKILL);
            }
            libc::_exit(0);
        }
        if pid > 0 {
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_uids_are_unique_per_pid_and_in_the_range() {
        let a = worker_uid(1);
        let b = worker_uid(4_194_303);
        assert!(a >= UID_BASE && b > a && b < i32::MAX as u32, "{a} {b}");
        assert_ne!(worker_uid(100), worker_uid(101));
    }

    #[test]
    fn killing_a_uid_below_the_range_does_nothing() {
        // Would kill every process of root (or of the caller) if it did not refuse.
        kill_all_of(0);
        kill_all_of(1000);
    }
}

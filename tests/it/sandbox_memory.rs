//! Memory that `RLIMIT_DATA` does not count, inside the real sandbox (issue 31): a shared
//! anonymous mapping (shmem), System V shared memory and message queues, a "stack" made with
//! `MAP_GROWSDOWN`, a shared mapping of `/dev/zero`, POSIX shared memory in `/dev/shm`, memfd.
//! In a worker without a GPU each is refused (seccomp, the mount view, Landlock), and the
//! worker cannot map more than `RLIMIT_AS` allows whatever the mapping. (A GPU worker keeps
//! memfd, which the CUDA driver calls when it starts, and so the rest: its cgroup bounds it;
//! docs/security.md, "Memory".) The attacks run in a sandboxed child of
//! this test binary, the way `sandbox_attacks` runs its own; the same through a worker that
//! runs a student's Python is in `memory_bounds`.

use crate::sandbox_attacks::{Lines, errno_of, expect_layer, run_child, scene};
use cugrade::sandbox::{self, Policy};

const GIB: usize = 1 << 30;

/// mmap `len` bytes with `flags` (and `fd`), touching every page when it works: `ok touched`,
/// or how it was refused.
fn map(len: usize, prot: libc::c_int, flags: libc::c_int, fd: libc::c_int) -> String {
    // SAFETY: a fresh mapping (no MAP_FIXED), written only within its length, then unmapped.
    unsafe {
        let p = libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0);
        if p == libc::MAP_FAILED {
            return errno_of(-1);
        }
        if prot & libc::PROT_WRITE != 0 {
            let bytes = p.cast::<u8>();
            for off in (0..len).step_by(4096) {
                bytes.add(off).write_volatile(1);
            }
        }
        libc::munmap(p, len);
    }
    "ok touched".into()
}

/// The child's side: every way to memory the data limit does not count.
pub(crate) fn attack(policy: &Policy) -> Lines {
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    let anon = libc::MAP_ANONYMOUS;
    let mut v: Lines = vec![
        (
            "shared anonymous 2 GiB".into(),
            map(2 * GIB, rw, libc::MAP_SHARED | anon, -1),
        ),
        (
            "shared-validate anonymous 2 GiB".into(),
            map(2 * GIB, rw, 0x03 | anon, -1),
        ),
        (
            "growsdown 256 MiB".into(),
            map(
                256 << 20,
                rw,
                libc::MAP_PRIVATE | anon | libc::MAP_GROWSDOWN,
                -1,
            ),
        ),
    ];
    // SAFETY: plain system calls with constant arguments.
    let (shm, msg) = unsafe {
        (
            libc::shmget(libc::IPC_PRIVATE, GIB, libc::IPC_CREAT | 0o600) as libc::c_long,
            libc::msgget(libc::IPC_PRIVATE, libc::IPC_CREAT | 0o600) as libc::c_long,
        )
    };
    v.push(("shmget 1 GiB".into(), errno_of(shm)));
    v.push(("msgget".into(), errno_of(msg)));
    // SAFETY: a constant name.
    let memfd = unsafe { libc::memfd_create(c"x".as_ptr(), 0) };
    v.push(("memfd_create".into(), errno_of(memfd as _)));
    v.push((
        "open /dev/zero".into(),
        match std::fs::File::open("/dev/zero") {
            Ok(_) => "ok".into(),
            Err(e) => format!("failed ({e})"),
        },
    ));
    v.push((
        "create in /dev/shm".into(),
        match std::fs::File::create("/dev/shm/cugrade-memory-attack") {
            Ok(_) => "ok".into(),
            Err(e) => format!("failed ({e})"),
        },
    ));
    // More address space than the limit: refused where RLIMIT_AS is set (for a GPU worker,
    // where it is not, a reservation of the data limit and more; PROT_NONE: nothing is
    // touched either way).
    let space = sandbox::address_space_limit(policy).max(policy.data_bytes) as usize + GIB;
    v.push((
        "reserve past the address-space limit".into(),
        map(space, libc::PROT_NONE, libc::MAP_PRIVATE | anon, -1),
    ));
    v
}

fn assert_all_refused(policy: &Policy) {
    assert!(!policy.gpu);
    let out = run_child("memory", policy, "", |_| {});
    out.assert_layers_as_offered();
    if expect_layer("seccomp") {
        for key in [
            "shared anonymous 2 GiB",
            "shared-validate anonymous 2 GiB",
            "growsdown 256 MiB",
            "shmget 1 GiB",
            "msgget",
            "memfd_create",
        ] {
            assert!(
                out.get(key).starts_with("denied EPERM"),
                "`{key}`: {}",
                out.raw
            );
        }
    }
    if expect_layer("landlock") || expect_layer("mounts") {
        out.assert_denied("open /dev/zero");
        out.assert_denied("create in /dev/shm");
    }
    if expect_layer("rlimits") {
        out.assert_denied("reserve past the address-space limit");
    }
}

#[test]
fn memory_no_rlimit_counts_is_refused_in_a_worker_without_a_gpu() {
    let s = scene();
    assert!(!s.policy.gpu);
    assert_all_refused(&s.policy);
}

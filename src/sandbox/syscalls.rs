//! Seccomp: a deny-list of the system calls that an escaped worker would reach for and that
//! neither the loader, NVRTC, the CUDA driver nor the emulator uses.
//!
//! A deny-list, not an allow-list: the closed-source driver's syscall set changes between
//! releases, and a missing entry in an allow-list would break grading on some machines
//! without a clear message. The other layers (namespaces, Landlock, rlimits) confine what
//! the allowed calls can reach.
//!
//! Several filters are stacked; the kernel applies the strictest verdict of all of them.

use super::{Layer, Policy, layer};
use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch, sock_filter,
};
use std::collections::BTreeMap;

/// Calls that only an attacker makes: return EPERM, so that a library probing for a feature
/// degrades instead of the worker dying with an unexplained signal.
fn denied() -> Vec<(i64, &'static str)> {
    let mut v = vec![
        (libc::SYS_ptrace, "ptrace"),
        (libc::SYS_process_vm_readv, "process_vm_readv"),
        (libc::SYS_process_vm_writev, "process_vm_writev"),
        (libc::SYS_process_madvise, "process_madvise"),
        (libc::SYS_pidfd_getfd, "pidfd_getfd"),
        (libc::SYS_kcmp, "kcmp"),
        (libc::SYS_mount, "mount"),
        (libc::SYS_umount2, "umount2"),
        (libc::SYS_pivot_root, "pivot_root"),
        (libc::SYS_chroot, "chroot"),
        (libc::SYS_fsopen, "fsopen"),
        (libc::SYS_fsconfig, "fsconfig"),
        (libc::SYS_fsmount, "fsmount"),
        (libc::SYS_fspick, "fspick"),
        (libc::SYS_move_mount, "move_mount"),
        (libc::SYS_open_tree, "open_tree"),
        (libc::SYS_mount_setattr, "mount_setattr"),
        (libc::SYS_unshare, "unshare"),
        (libc::SYS_setns, "setns"),
        (libc::SYS_bpf, "bpf"),
        (libc::SYS_perf_event_open, "perf_event_open"),
        (libc::SYS_keyctl, "keyctl"),
        (libc::SYS_add_key, "add_key"),
        (libc::SYS_request_key, "request_key"),
        (libc::SYS_io_uring_setup, "io_uring_setup"),
        (libc::SYS_io_uring_enter, "io_uring_enter"),
        (libc::SYS_io_uring_register, "io_uring_register"),
        (libc::SYS_userfaultfd, "userfaultfd"),
        (libc::SYS_open_by_handle_at, "open_by_handle_at"),
        (libc::SYS_name_to_handle_at, "name_to_handle_at"),
        (libc::SYS_fanotify_init, "fanotify_init"),
        (libc::SYS_quotactl, "quotactl"),
        (libc::SYS_quotactl_fd, "quotactl_fd"),
        (libc::SYS_acct, "acct"),
        (libc::SYS_syslog, "syslog"),
        (libc::SYS_vhangup, "vhangup"),
        (libc::SYS_settimeofday, "settimeofday"),
        (libc::SYS_clock_settime, "clock_settime"),
        (libc::SYS_sethostname, "sethostname"),
        (libc::SYS_setdomainname, "setdomainname"),
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        (libc::SYS_uselib, "uselib"),
        (libc::SYS_modify_ldt, "modify_ldt"),
    ]);
    v
}

/// Calls that change a file's mode, owner, times or extended attributes. Landlock does not
/// govern them, and a worker has no use for them (NVRTC, Numba, the loader and the emulator
/// make none: checked with strace); without this rule a worker that could see a host file it
/// owns (a grader running as root sees root's) could make it setuid. `setsid` keeps every
/// process of a worker in the worker's session (one scheduler autogroup: a fork bomb shares
/// the CPU time of one worker), and `memfd_secret` makes memory no limit counts.
fn metadata() -> Vec<(i64, &'static str)> {
    let mut v = vec![
        (libc::SYS_fchmod, "fchmod"),
        (libc::SYS_fchmodat, "fchmodat"),
        (SYS_FCHMODAT2, "fchmodat2"),
        (libc::SYS_fchown, "fchown"),
        (libc::SYS_fchownat, "fchownat"),
        (libc::SYS_utimensat, "utimensat"),
        (libc::SYS_setxattr, "setxattr"),
        (libc::SYS_lsetxattr, "lsetxattr"),
        (libc::SYS_fsetxattr, "fsetxattr"),
        (libc::SYS_removexattr, "removexattr"),
        (libc::SYS_lremovexattr, "lremovexattr"),
        (libc::SYS_fremovexattr, "fremovexattr"),
        (SYS_SETXATTRAT, "setxattrat"),
        (SYS_REMOVEXATTRAT, "removexattrat"),
        (libc::SYS_setsid, "setsid"),
        (SYS_MEMFD_SECRET, "memfd_secret"),
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        (libc::SYS_chmod, "chmod"),
        (libc::SYS_chown, "chown"),
        (libc::SYS_lchown, "lchown"),
        (libc::SYS_utime, "utime"),
        (libc::SYS_utimes, "utimes"),
        (libc::SYS_futimesat, "futimesat"),
    ]);
    v
}

/// System V shared memory and message queues: memory that no rlimit counts. A segment the
/// worker creates, touches and detaches stays in the kernel (charged to no process: three
/// segments of 1 GiB grew the host's Shmem by 3 GiB while the worker's RSS was 34 MB) until
/// the worker's IPC namespace dies with it; a queue holds kernel memory the same way. Nothing a
/// worker without a GPU runs needs them (NVRTC, Numba, CPython, NumPy); `shmat` and `msgsnd`
/// alone would be of no use without a segment or queue to name.
fn sysv_ipc() -> Vec<(i64, &'static str)> {
    vec![
        (libc::SYS_shmget, "shmget"),
        (libc::SYS_shmat, "shmat"),
        (libc::SYS_msgget, "msgget"),
    ]
}

/// Newer calls, numbered alike on every architecture (the libc crate may not name them).
const SYS_FCHMODAT2: i64 = 452;
const SYS_SETXATTRAT: i64 = 463;
const SYS_REMOVEXATTRAT: i64 = 466;
const SYS_MEMFD_SECRET: i64 = 447;

/// Calls with no innocent use in a worker at all: kill the process on sight.
fn fatal() -> Vec<(i64, &'static str)> {
    let mut v = vec![
        (libc::SYS_kexec_load, "kexec_load"),
        (libc::SYS_kexec_file_load, "kexec_file_load"),
        (libc::SYS_init_module, "init_module"),
        (libc::SYS_finit_module, "finit_module"),
        (libc::SYS_delete_module, "delete_module"),
        (libc::SYS_reboot, "reboot"),
        (libc::SYS_swapon, "swapon"),
        (libc::SYS_swapoff, "swapoff"),
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([(libc::SYS_iopl, "iopl"), (libc::SYS_ioperm, "ioperm")]);
    v
}

/// Namespace flags that `clone` must not carry (unshare and setns are denied outright).
const NAMESPACE_FLAGS: [libc::c_int; 7] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

fn target_arch() -> Result<TargetArch, String> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())
}

/// `mmap`'s flags that make memory `RLIMIT_DATA` does not count (it counts private writable
/// mappings only): `MAP_SHARED` with `MAP_ANONYMOUS` (shmem: a 9 GiB mapping touched in full was
/// 9 GiB of RssShmem under an 8 GiB data limit), and `MAP_GROWSDOWN` (a "stack", which no limit
/// counts when it is made, however large). Each entry: (mask, value) on the flags argument.
const MAP_TYPE: u64 = 0x0f;
const MAP_SHARED_VALIDATE: u64 = 0x03;
fn uncounted_mmap_flags() -> [(u64, u64); 3] {
    let anon = libc::MAP_ANONYMOUS as u64;
    let growsdown = libc::MAP_GROWSDOWN as u64;
    [
        (anon | MAP_TYPE, anon | libc::MAP_SHARED as u64),
        (anon | MAP_TYPE, anon | MAP_SHARED_VALIDATE),
        (growsdown, growsdown),
    ]
}

/// Whether the memory rules (memfd, SysV IPC, uncounted mmaps) apply: to every worker without
/// a GPU. Not to a GPU worker: the CUDA driver calls `memfd_create` when it starts (drivers
/// 570 and later fail `cuInit` with error 304 without it: NVIDIA/OpenShell#1696), and with
/// memfd allowed, refusing the other ways to shared memory would only risk breaking the
/// driver for nothing. Not to the process `check --profile` runs under Nsight Compute either,
/// whose injection library is not ours to restrict (both are GPU processes). What bounds a GPU
/// worker's memory is its cgroup (docs/security.md, "Memory").
fn memory_rules(policy: &Policy) -> bool {
    !policy.gpu && !policy.keep_ipc
}

fn deny_filter(arch: TargetArch, policy: &Policy) -> Result<BpfProgram, BackendError> {
    let memory = memory_rules(policy);
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = denied()
        .into_iter()
        .chain(if policy.keep_ipc { vec![] } else { metadata() })
        .chain(if memory { sysv_ipc() } else { vec![] })
        .chain(if memory {
            vec![(libc::SYS_memfd_create, "memfd_create")]
        } else {
            vec![]
        })
        .map(|(nr, _)| (nr, Vec::new()))
        .collect();
    if memory {
        // mmap's flags are its fourth argument on x86_64 and aarch64.
        let mmap_rules = uncounted_mmap_flags()
            .iter()
            .map(|&(mask, value)| {
                SeccompRule::new(vec![SeccompCondition::new(
                    3,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(mask),
                    value,
                )?])
            })
            .collect::<Result<Vec<_>, _>>()?;
        rules.insert(libc::SYS_mmap, mmap_rules);
    }
    // clone with a namespace flag would undo the namespace layer. The flags are clone's
    // first argument on x86_64 and aarch64.
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|&f| {
            let f = f as u64;
            SeccompRule::new(vec![SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(f),
                f,
            )?])
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_clone, clone_rules);
    // Pushing characters into a terminal's input queue runs commands in the grader's shell
    // (when stdio is a tty, e.g. a student running `cugrade check` by hand).
    let tty_rules = [libc::TIOCSTI, libc::TIOCLINUX]
        .iter()
        .map(|&req| {
            SeccompRule::new(vec![SeccompCondition::new(
                1,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                req,
            )?])
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_ioctl, tty_rules);
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?
    .try_into()
}

fn fatal_filter(arch: TargetArch) -> Result<BpfProgram, BackendError> {
    let rules = fatal()
        .into_iter()
        .map(|(nr, _)| (nr, Vec::new()))
        .collect();
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::KillProcess,
        arch,
    )?
    .try_into()
}

/// Sockets: a compile or emulator worker needs none (socketpair stays: the standard library
/// spawns processes with one); a GPU worker only `AF_UNIX` (the driver looks for an MPS
/// server's socket, which the mount view does not show). EAFNOSUPPORT, what a kernel without
/// the family says. Nothing for the process Nsight Compute profiles: its injection talks to
/// `ncu` over TCP.
fn socket_filter(arch: TargetArch, policy: &Policy) -> Result<Option<BpfProgram>, BackendError> {
    if policy.keep_ipc {
        return Ok(None);
    }
    let rule = if policy.gpu {
        vec![SeccompRule::new(vec![SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )?])?]
    } else {
        Vec::new()
    };
    let rules = BTreeMap::from([(libc::SYS_socket, rule)]);
    let f: BpfProgram = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EAFNOSUPPORT as u32),
        arch,
    )?
    .try_into()?;
    Ok(Some(f))
}

/// clone3 passes its flags in memory, where seccomp cannot look; ENOSYS makes glibc fall back
/// to clone, whose flags the deny filter checks.
fn clone3_filter(arch: TargetArch) -> Result<BpfProgram, BackendError> {
    let rules = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )?
    .try_into()
}

/// On x86_64 the x32 ABI reuses the x86_64 audit arch with syscall numbers offset by
/// 0x40000000, which would slip past every number-keyed rule above. seccompiler has no
/// range match, so this filter is written out by hand: deny any x32 call.
#[cfg(target_arch = "x86_64")]
fn x32_filter() -> BpfProgram {
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let stmt = |code, k| sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    vec![
        // seccomp_data.nr is at offset 0. The other filters already kill on a foreign arch.
        stmt(LD_W_ABS, 0),
        sock_filter {
            code: JGE_K,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        stmt(RET_K, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        stmt(RET_K, libc::SECCOMP_RET_ALLOW),
    ]
}

/// Install all filters on every thread of the process (TSYNC).
pub(super) fn install(policy: &Policy) -> Layer {
    let arch = match target_arch() {
        Ok(a) => a,
        Err(e) => {
            return Layer::degraded(
                layer::SECCOMP,
                format!("no seccomp filter for this architecture ({e})"),
            );
        }
    };
    let programs = (|| -> Result<Vec<BpfProgram>, BackendError> {
        #[allow(unused_mut)]
        let mut p = vec![
            deny_filter(arch, policy)?,
            fatal_filter(arch)?,
            clone3_filter(arch)?,
        ];
        p.extend(socket_filter(arch, policy)?);
        #[cfg(target_arch = "x86_64")]
        p.push(x32_filter());
        Ok(p)
    })();
    let programs = match programs {
        Ok(p) => p,
        Err(e) => {
            return Layer::degraded(layer::SECCOMP, format!("could not build the filter: {e}"));
        }
    };
    for prog in &programs {
        if let Err(e) = seccompiler::apply_filter_all_threads(prog) {
            return Layer::degraded(
                layer::SECCOMP,
                format!(
                    "the kernel refused the filter: {e}; system calls are unfiltered. Needs \
                     CONFIG_SECCOMP_FILTER (Linux 3.17+ for TSYNC)"
                ),
            );
        }
    }
    let sockets = if policy.keep_ipc {
        "sockets left to Nsight Compute"
    } else if policy.gpu {
        "no socket but AF_UNIX"
    } else {
        "no sockets"
    };
    let meta = if policy.keep_ipc {
        ""
    } else {
        ", no chmod/chown/utime/xattr or setsid"
    };
    Layer::active(
        layer::SECCOMP,
        format!(
            "{} calls denied, {} fatal, no namespace clones, {sockets}{meta}{}",
            denied().len(),
            fatal().len(),
            if memory_rules(policy) {
                ", no memfd, System V shared memory or shared anonymous mappings"
            } else {
                ""
            }
        ),
    )
}

/// Names of the denied calls, for the docs and `doctor`.
pub fn denied_names() -> Vec<&'static str> {
    denied()
        .into_iter()
        .chain(metadata())
        .chain(sysv_ipc())
        .map(|(_, n)| n)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_compile_for_this_arch() {
        let arch = target_arch().unwrap();
        let p = Policy::default();
        assert!(!deny_filter(arch, &p).unwrap().is_empty());
        assert!(socket_filter(arch, &p).unwrap().is_some());
        assert!(!fatal_filter(arch).unwrap().is_empty());
        assert!(!clone3_filter(arch).unwrap().is_empty());
    }

    #[test]
    fn deny_and_fatal_lists_are_disjoint_and_cover_the_brief() {
        let d = denied_names();
        let f: Vec<_> = fatal().into_iter().map(|(_, n)| n).collect();
        assert!(d.iter().all(|n| !f.contains(n)));
        for must in [
            "ptrace",
            "process_vm_readv",
            "unshare",
            "setns",
            "bpf",
            "io_uring_setup",
        ] {
            assert!(d.contains(&must), "{must} is not denied");
        }
    }
}

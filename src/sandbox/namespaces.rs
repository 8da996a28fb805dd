//! Namespaces and capabilities. A worker lives in a PID namespace of its own (its first
//! process's death ends every process in it), a network namespace with no interface up (no
//! socket reaches the host, the grader or beyond) and an IPC namespace (no System V shared
//! memory or message queue shared with anything). A grader running as root creates them
//! directly; one that is not root creates them inside a user namespace that maps only its own
//! uid. Then every capability is dropped, so that being root inside buys nothing.

use super::{Layer, layer};
use std::io;

/// How the worker's namespaces were made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// By root, without a user namespace: the worker drops to its own uid afterwards.
    Rootful,
    /// Inside a new user namespace that maps the caller's uid only.
    Userns,
    /// None could be made.
    Off,
}

const OUTER: libc::c_int = libc::CLONE_NEWPID | libc::CLONE_NEWNET | libc::CLONE_NEWIPC;

/// Enter the PID, network and IPC namespaces as root (needs CAP_SYS_ADMIN, which a default
/// Docker container does not grant).
pub(super) fn enter_rootful() -> io::Result<()> {
    // SAFETY: unshare with flag arguments only.
    if unsafe { libc::unshare(OUTER) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Enter a new user namespace, keeping our own uid/gid mapped, with the PID, network and IPC
/// namespaces inside it.
pub(super) fn enter_userns() -> io::Result<()> {
    // Before unshare: afterwards, until the maps are written, these read as the overflow id.
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // SAFETY: unshare with flag arguments only.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | OUTER) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // setgroups must be denied before an unprivileged process may write gid_map.
    write_proc("/proc/self/setgroups", "deny")
        .and_then(|()| write_proc("/proc/self/uid_map", &format!("{uid} {uid} 1")))
        .and_then(|()| write_proc("/proc/self/gid_map", &format!("{gid} {gid} 1")))
}

/// The layer's line for what was entered.
pub(super) fn report(mode: Mode, why_not: &[String]) -> Layer {
    match mode {
        Mode::Rootful => Layer::active(
            layer::NAMESPACES,
            "pid+net+ipc: the worker's processes end with it; no network interface is up",
        ),
        Mode::Userns => Layer::active(
            layer::NAMESPACES,
            "user+pid+net+ipc: the worker's processes end with it; no network interface is up",
        ),
        Mode::Off => Layer::degraded(
            layer::NAMESPACES,
            format!(
                "{}; the worker keeps the host network and its processes are ended one by one. \
                 Allow unprivileged user namespaces (sysctl user.max_user_namespaces > 0, \
                 kernel.unprivileged_userns_clone=1, or on Ubuntu \
                 kernel.apparmor_restrict_unprivileged_userns=0), or run as root with \
                 CAP_SYS_ADMIN",
                why_not.join("; ")
            ),
        ),
    }
}

fn write_proc(path: &str, content: &str) -> io::Result<()> {
    std::fs::write(path, content).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))
}

/// Drop every capability: bounding set, ambient, effective, permitted, inheritable.
///
/// After unshare the process holds all capabilities inside its user namespace; an uid-0
/// grader holds them for real. The bounding set matters most: with it empty, even an
/// execve as uid 0 cannot regain anything.
pub(super) fn drop_bounding_set() {
    let last_cap = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse::<libc::c_ulong>().ok())
        .unwrap_or(63);

    // Root-owned binaries would otherwise regain capabilities on exec; lock that too. Fails
    // without CAP_SETPCAP, which then also means there is nothing to lose.
    const SECBITS: libc::c_ulong = 0x2f; // NOROOT(|LOCKED), NO_SETUID_FIXUP(|LOCKED), KEEP_CAPS_LOCKED
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_SECUREBITS, SECBITS, 0, 0, 0);
        for cap in 0..=last_cap {
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        );
    }
}

/// Empty the remaining capability sets and check the result (after [`drop_bounding_set`] and
/// any change of uid, which needs CAP_SETUID).
pub(super) fn drop_capabilities(threads: usize) -> Layer {
    #[repr(C)]
    struct CapHeader {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct CapData {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: header and data are valid, correctly laid out v3 capability structs.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            data.as_ptr(),
        )
    };
    if rc != 0 {
        return Layer::degraded(
            layer::CAPABILITIES,
            format!("capset failed: {}", io::Error::last_os_error()),
        );
    }
    match status_field("CapEff").zip(status_field("CapBnd")) {
        // Capabilities belong to threads: the ones started earlier keep theirs.
        Some((eff, bnd)) if is_zero_hex(&eff) && is_zero_hex(&bnd) && threads > 1 => {
            Layer::degraded(
                layer::CAPABILITIES,
                format!(
                    "dropped on this thread only: {} started before apply keep theirs",
                    super::threads_phrase(threads - 1)
                ),
            )
        }
        Some((eff, bnd)) if is_zero_hex(&eff) && is_zero_hex(&bnd) => {
            Layer::active(layer::CAPABILITIES, "all dropped, bounding set empty")
        }
        Some((eff, bnd)) if is_zero_hex(&eff) => Layer::degraded(
            layer::CAPABILITIES,
            format!(
                "effective set empty, but the bounding set ({bnd}) could not be cleared \
                 (no CAP_SETPCAP); the worker cannot regain them anyway under no_new_privs"
            ),
        ),
        Some((eff, _)) => Layer::degraded(
            layer::CAPABILITIES,
            format!("capabilities still effective after capset: {eff}"),
        ),
        None => Layer::degraded(
            layer::CAPABILITIES,
            "capset succeeded but /proc/self/status could not confirm it",
        ),
    }
}

fn status_field(name: &str) -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == name).then(|| v.trim().to_string())
    })
}

fn is_zero_hex(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c == '0')
}

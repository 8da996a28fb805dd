//! Namespaces and capabilities: a fresh user + network namespace (no network at all), then
//! every capability dropped, so that being root inside the namespace buys nothing.

use super::{Layer, layer};
use std::io;

/// Enter a new user and network namespace, keeping our own uid/gid mapped.
///
/// The new network namespace has only a loopback interface, and it is down: no socket can
/// reach the host, the grader, or anything beyond.
pub(super) fn enter(threads: usize) -> Layer {
    if threads > 1 {
        return Layer::degraded(
            layer::NAMESPACES,
            format!(
                "the process already runs {threads} threads and unshare(CLONE_NEWUSER) needs a \
                 single-threaded caller; call sandbox::apply before starting any thread"
            ),
        );
    }
    // Before unshare: afterwards, until the maps are written, these read as the overflow id.
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // SAFETY: unshare with flag arguments only.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) } != 0 {
        let e = io::Error::last_os_error();
        return Layer::degraded(
            layer::NAMESPACES,
            format!(
                "unshare(user+net) failed: {e}; the worker keeps the host network. Allow \
                 unprivileged user namespaces (sysctl user.max_user_namespaces > 0, \
                 kernel.unprivileged_userns_clone=1, or on Ubuntu \
                 kernel.apparmor_restrict_unprivileged_userns=0)"
            ),
        );
    }
    // setgroups must be denied before an unprivileged process may write gid_map.
    let maps = write_proc("/proc/self/setgroups", "deny")
        .and_then(|()| write_proc("/proc/self/uid_map", &format!("{uid} {uid} 1")))
        .and_then(|()| write_proc("/proc/self/gid_map", &format!("{gid} {gid} 1")));
    match maps {
        Ok(()) => Layer::active(
            layer::NAMESPACES,
            "user+net: no network interface is up, host sockets unreachable",
        ),
        // The namespaces exist (the network is already cut), but files owned by us now look
        // owned by the overflow id; say so rather than pretend all went well.
        Err(e) => Layer::degraded(
            layer::NAMESPACES,
            format!("network cut, but writing the uid/gid map failed: {e}"),
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
pub(super) fn drop_capabilities(threads: usize) -> Layer {
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

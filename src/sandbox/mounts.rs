//! The worker's own view of the file system: a mount namespace whose root is an empty,
//! read-only tmpfs holding only what the worker needs, bind-mounted read-only at the same paths
//! as on the host (the system library dirs, the toolchain, the executable, `/etc/ld.so.cache`),
//! a `/dev` with `null`, `full`, `random`, `urandom` (and `zero` and the NVIDIA device files for a
//! GPU worker), a fresh `/proc` of the worker's PID namespace, `/sys` read-only, and a private,
//! size-limited tmpfs at the worker's temp dir, its only writable place. Then `pivot_root`
//! into it and detach the host's tree.
//!
//! What is not in the view does not exist for the worker: host sockets (`docker.sock`, an
//! ssh-agent, D-Bus), other students' files, the grader's outputs, `/tmp`, `/home`, `/etc`.
//! No file it sees can have its mode, owner, times or xattrs changed: each is on a read-only
//! mount. The scratch tmpfs lives and dies with the worker's mount namespace: nothing the
//! worker wrote (the sources it compiled) is left on the host, whatever kills it.

use super::{Layer, Policy, filesystem, layer};
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Build the view and enter it. `owner`: the uid/gid the scratch belongs to (the worker's own,
/// when root gives it one). On failure nothing has been pivoted: the worker keeps the host's
/// tree (still confined by Landlock), and the layer says why.
pub(super) fn enter(policy: &Policy, owner: Option<(u32, u32)>) -> Layer {
    match build(policy, owner) {
        Ok(notes) => {
            let mut detail = format!(
                "a private root: {} read-only paths, /dev, /proc, /sys; the only writable \
                 place is a {} tmpfs at the temp dir",
                notes.bound,
                size_phrase(policy.scratch_bytes())
            );
            if !notes.warnings.is_empty() {
                detail.push_str(&format!(" ({})", notes.warnings.join("; ")));
            }
            Layer::active(layer::MOUNTS, detail)
        }
        Err(e) => Layer::degraded(
            layer::MOUNTS,
            format!(
                "{e}; the worker sees the host's files (Landlock still limits what it may \
                 open)"
            ),
        ),
    }
}

fn size_phrase(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

struct Notes {
    bound: usize,
    warnings: Vec<String>,
}

fn build(policy: &Policy, owner: Option<(u32, u32)>) -> Result<Notes, String> {
    // The directories and mount points made for the view must be open to the worker's uid
    // whatever umask the grader was started with (a root grader with umask 077 would make
    // them 0700, and the worker, a uid of its own, could reach nothing).
    // SAFETY: umask cannot fail; the worker is single-threaded here.
    let umask = unsafe { libc::umask(0o022) };
    let built = build_view(policy, owner);
    // SAFETY: as above.
    unsafe { libc::umask(umask) };
    built
}

fn build_view(policy: &Policy, owner: Option<(u32, u32)>) -> Result<Notes, String> {
    let temp = &policy.temp_dir;
    if !temp.is_absolute() || !temp.is_dir() {
        return Err(format!(
            "the temp dir {} is not a directory",
            temp.display()
        ));
    }
    // The folders made for the view must be traversable by a worker that root gives a uid of
    // its own, whatever umask the grader was started with (077 made them root's alone, and
    // the worker could load nothing it had not loaded yet, NVRTC included).
    // SAFETY: umask cannot fail.
    unsafe { libc::umask(0o022) };
    // SAFETY: unshare with flag arguments only.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        return Err(format!(
            "unshare(mount) failed: {}",
            io::Error::last_os_error()
        ));
    }
    // A cgroup namespace too, where the kernel has it: /proc/self/cgroup then shows "/".
    // SAFETY: as above.
    unsafe { libc::unshare(libc::CLONE_NEWCGROUP) };
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )
    .map_err(|e| format!("making / private failed: {e}"))?;
    // The new root: an empty tmpfs over the (host) temp dir, which is private to us now.
    let root = temp.clone();
    mount(
        Some(Path::new("tmpfs")),
        &root,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=0755,size=4m,nr_inodes=4096"),
    )
    .map_err(|e| format!("mounting the new root failed: {e}"))?;
    let mut notes = Notes {
        bound: 0,
        warnings: vec![],
    };
    let mut bound: Vec<PathBuf> = vec![];
    for path in read_paths(policy, &mut notes.warnings) {
        match materialize(&root, &path, 0) {
            Ok(real) => {
                if bound.iter().any(|b| real.starts_with(b)) {
                    continue;
                }
                bind(&real, &inside(&root, &real), true, false)
                    .map_err(|e| format!("binding {} failed: {e}", real.display()))?;
                bound.push(real);
                notes.bound += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(format!("preparing {} failed: {e}", path.display()));
            }
        }
    }
    devices(&root, policy.gpu).map_err(|e| format!("/dev: {e}"))?;
    let proc_dir = root.join("proc");
    mkdir(&proc_dir)?;
    if let Err(e) = mount(
        Some(Path::new("proc")),
        &proc_dir,
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    ) {
        bind(Path::new("/proc"), &proc_dir, false, false)
            .map_err(|e2| format!("/proc: a fresh one failed ({e}), the host's too ({e2})"))?;
        notes.warnings.push(format!(
            "/proc is the host's: a fresh one could not be mounted ({e})"
        ));
    }
    let sys = root.join("sys");
    mkdir(&sys)?;
    if let Err(e) = bind(Path::new("/sys"), &sys, true, false) {
        notes.warnings.push(format!("no /sys ({e})"));
    }
    // The scratch, at the temp dir's own path inside the new root.
    let scratch = inside(&root, temp);
    mkdir_all(&scratch)?;
    let mut opts = format!("mode=0700,size={},nr_inodes=16384", policy.scratch_bytes());
    if let Some((uid, gid)) = owner {
        opts.push_str(&format!(",uid={uid},gid={gid}"));
    }
    mount(
        Some(Path::new("tmpfs")),
        &scratch,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        Some(&opts),
    )
    .map_err(|e| format!("mounting the scratch tmpfs failed: {e}"))?;
    // Nothing but the scratch may be written from here on.
    mount(
        None,
        &root,
        None,
        libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
        None,
    )
    .map_err(|e| format!("making the new root read-only failed: {e}"))?;
    pivot(&root, temp)?;
    Ok(notes)
}

/// What the view shows read-only: Landlock's read grants, minus any that would contain the
/// worker's own temp dir (other workers' dirs are its siblings).
fn read_paths(policy: &Policy, warnings: &mut Vec<String>) -> Vec<PathBuf> {
    let run = policy
        .temp_dir
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut paths: Vec<PathBuf> = vec![];
    for p in filesystem::read_roots(policy, warnings) {
        let real = std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
        if run.starts_with(&real) {
            warnings.push(format!(
                "{} not shown: it contains the workers' temp dirs",
                p.display()
            ));
            continue;
        }
        paths.push(p);
    }
    // Parents before children, so that a path under one already bound is skipped.
    paths.sort_by_key(|p| {
        std::fs::canonicalize(p)
            .map(|c| c.as_os_str().len())
            .unwrap_or(usize::MAX)
    });
    paths
}

/// `host` as seen under `root`.
fn inside(root: &Path, host: &Path) -> PathBuf {
    root.join(host.strip_prefix("/").unwrap_or(host))
}

/// Recreate `path`'s directories and symlinks under `root`, leaving a mount point (an empty
/// dir or file) where its target is; return the target's real host path.
fn materialize(root: &Path, path: &Path, depth: usize) -> io::Result<PathBuf> {
    if depth > 16 {
        return Err(io::Error::other("too many symlinks"));
    }
    let comps: Vec<Component> = path.components().collect();
    let mut real = PathBuf::from("/");
    for (i, c) in comps.iter().enumerate() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => continue,
            Component::ParentDir => {
                real.pop();
                continue;
            }
            Component::Normal(name) => {
                let host = real.join(name);
                let meta = std::fs::symlink_metadata(&host)?;
                let rest: PathBuf = comps[i + 1..].iter().collect();
                if meta.file_type().is_symlink() {
                    let target = std::fs::read_link(&host)?;
                    let link = inside(root, &host);
                    if std::fs::symlink_metadata(&link).is_err() {
                        std::os::unix::fs::symlink(&target, &link)?;
                    }
                    let next = if target.is_absolute() {
                        target
                    } else {
                        real.join(target)
                    };
                    return materialize(root, &next.join(rest), depth + 1);
                }
                let here = inside(root, &host);
                let last = comps[i + 1..]
                    .iter()
                    .all(|c| matches!(c, Component::CurDir));
                if !last || meta.is_dir() {
                    if std::fs::symlink_metadata(&here).is_err() {
                        mkdir(&here).map_err(io::Error::other)?;
                    }
                } else if std::fs::symlink_metadata(&here).is_err() {
                    std::fs::File::create(&here)?;
                }
                real = host;
            }
        }
    }
    Ok(real)
}

fn mkdir(p: &Path) -> Result<(), String> {
    match std::fs::create_dir(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("mkdir {}: {e}", p.display())),
    }
}

fn mkdir_all(p: &Path) -> Result<(), String> {
    std::fs::create_dir_all(p).map_err(|e| format!("mkdir {}: {e}", p.display()))
}

/// `/dev` with the harmless character devices and, for a GPU worker, the NVIDIA ones.
fn devices(root: &Path, gpu: bool) -> Result<(), String> {
    let dev = root.join("dev");
    mkdir(&dev)?;
    // `zero` only for a GPU worker: mapped shared, it is memory no rlimit counts (`filesystem`
    // grants it to GPU workers alone too); NVRTC, Numba, CPython and NumPy never open it.
    let mut names: Vec<String> = ["null", "full", "random", "urandom"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if gpu {
        names.push("zero".into());
        let mut nv: Vec<String> = std::fs::read_dir("/dev")
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("nvidia"))
                    .collect()
            })
            .unwrap_or_default();
        nv.sort();
        names.extend(nv);
    }
    for name in names {
        let host = Path::new("/dev").join(&name);
        let Ok(meta) = std::fs::metadata(&host) else {
            continue;
        };
        let here = dev.join(&name);
        if meta.is_dir() {
            mkdir(&here)?;
        } else {
            std::fs::File::create(&here).map_err(|e| format!("{}: {e}", here.display()))?;
        }
        bind(&host, &here, false, true).map_err(|e| format!("{}: {e}", host.display()))?;
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let _ = std::os::unix::fs::symlink(target, dev.join(name));
    }
    Ok(())
}

/// Bind `src` (with what is mounted below it) at `dst`, then make the whole tree nosuid and,
/// as asked, read-only and nodev.
fn bind(src: &Path, dst: &Path, read_only: bool, devices: bool) -> io::Result<()> {
    mount(Some(src), dst, None, libc::MS_BIND | libc::MS_REC, None)?;
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    const MOUNT_ATTR_NOSUID: u64 = 0x2;
    const MOUNT_ATTR_NODEV: u64 = 0x4;
    let mut set = MOUNT_ATTR_NOSUID;
    if read_only {
        set |= MOUNT_ATTR_RDONLY;
    }
    if !devices {
        set |= MOUNT_ATTR_NODEV;
    }
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let c = cstr(dst)?;
    const AT_RECURSIVE: libc::c_uint = 0x8000;
    // SAFETY: a valid path and a mount_attr of the size passed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 {
        return Ok(());
    }
    // Before Linux 5.12: remount the top of the tree, restating the flags it already has
    // (a user namespace may not clear them).
    // SAFETY: statvfs fills a valid struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    let mut flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_NOSUID;
    if read_only {
        flags |= libc::MS_RDONLY;
    }
    if !devices || st.f_flag & libc::ST_NODEV != 0 {
        flags |= libc::MS_NODEV;
    }
    for (st_flag, ms_flag) in [
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if st.f_flag & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    mount(None, dst, None, flags, None)
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other)
}

fn mount(
    src: Option<&Path>,
    dst: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let src = src.map(cstr).transpose()?;
    let fstype = fstype
        .map(CString::new)
        .transpose()
        .map_err(io::Error::other)?;
    let data = data
        .map(CString::new)
        .transpose()
        .map_err(io::Error::other)?;
    let dst = cstr(dst)?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is null or a valid NUL-terminated string.
    let rc = unsafe {
        libc::mount(
            ptr(&src),
            dst.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data).cast(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Make `root` the root of this mount namespace, drop the old one, and go to `cwd`.
fn pivot(root: &Path, cwd: &Path) -> Result<(), String> {
    let r = cstr(root).map_err(|e| e.to_string())?;
    let dot = c".";
    // SAFETY: valid paths; the old root is stacked on the new one by pivot_root(".", ".") and
    // detached right after, as runc does.
    unsafe {
        if libc::chdir(r.as_ptr()) != 0
            || libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()) != 0
        {
            return Err(format!("pivot_root failed: {}", io::Error::last_os_error()));
        }
        if libc::umount2(dot.as_ptr(), libc::MNT_DETACH) != 0 {
            return Err(format!(
                "detaching the host's tree failed: {}",
                io::Error::last_os_error()
            ));
        }
        let c = cstr(cwd).map_err(|e| e.to_string())?;
        if libc::chdir(c.as_ptr()) != 0 {
            return Err(format!(
                "entering the scratch failed: {}",
                io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn materialize_recreates_symlinks_and_returns_the_real_path() {
        let host = tempfile::tempdir().unwrap();
        let h = host.path().canonicalize().unwrap();
        std::fs::create_dir_all(h.join("usr/lib")).unwrap();
        std::fs::write(h.join("usr/lib/libx.so"), "x").unwrap();
        std::os::unix::fs::symlink("usr/lib", h.join("lib")).unwrap();
        let root = tempfile::tempdir().unwrap();
        let real = materialize(root.path(), &h.join("lib/libx.so"), 0).unwrap();
        assert_eq!(real, h.join("usr/lib/libx.so"));
        let link = inside(root.path(), &h.join("lib"));
        assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("usr/lib"));
        assert!(inside(root.path(), &real).is_file());
        assert!(
            materialize(root.path(), &h.join("missing"), 0)
                .unwrap_err()
                .kind()
                == io::ErrorKind::NotFound
        );
    }
}

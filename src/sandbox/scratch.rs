//! Where a grading run keeps its temporary files: one folder per run,
//! `$TMPDIR/cugrade-run-XXXXXX`, holding every worker's temp dir (and a cohort's unpacked
//! archives). The run holds an exclusive `flock` on the folder's `.lock` for as long as it
//! lives, so a later run can tell a folder left by a run that was killed with SIGKILL (the
//! lock is free) from one in use, and removes it. A worker's own files live in a tmpfs of its
//! mount namespace, not here, so even before that sweep a killed run leaves no sources behind
//! where the mount view is active.

use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const PREFIX: &str = "cugrade-run-";

struct RunDir {
    path: PathBuf,
    _lock: std::fs::File,
}

static RUN: OnceLock<Result<RunDir, String>> = OnceLock::new();

/// This run's folder, created (and stale ones of killed runs removed) on first use.
pub fn run_dir() -> io::Result<&'static Path> {
    match RUN.get_or_init(|| create().map_err(|e| e.to_string())) {
        Ok(r) => Ok(&r.path),
        Err(e) => Err(io::Error::other(format!(
            "cannot create the run's temp dir: {e}"
        ))),
    }
}

/// A fresh temp dir inside this run's folder, removed when dropped.
pub fn tempdir(prefix: &str) -> io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(run_dir()?)
}

/// Remove this run's folder and everything in it (at exit, or after an interrupt once the
/// workers are dead). Safe to call when none was made.
pub fn remove_run_dir() {
    if let Some(Ok(r)) = RUN.get() {
        let _ = std::fs::remove_dir_all(&r.path);
    }
}

fn create() -> io::Result<RunDir> {
    let base = std::env::temp_dir();
    sweep(&base);
    // Made under a name the sweep ignores, locked, then renamed: a concurrent sweep never sees
    // this run's folder unlocked.
    let fresh = tempfile::Builder::new()
        .prefix(".cugrade-new-")
        .tempdir_in(&base)?
        .keep();
    let lock = std::fs::File::create(fresh.join(".lock"))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let name = fresh
        .file_name()
        .map(|n| n.to_string_lossy().replace(".cugrade-new-", PREFIX))
        .unwrap_or_else(|| format!("{PREFIX}{}", std::process::id()));
    let path = base.join(name);
    std::fs::rename(&fresh, &path)?;
    // Workers that run as a uid of their own and see the host's tree (no mount namespace) must
    // reach their own dir inside: traverse, never list.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o711))?;
    Ok(RunDir { path, _lock: lock })
}

/// Remove the folders of runs that are gone (their lock is free). Folders of other users, or
/// of runs still alive, are left alone.
pub fn sweep(base: &Path) {
    for e in std::fs::read_dir(base).into_iter().flatten().flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().starts_with(PREFIX) {
            continue;
        }
        let dir = e.path();
        let Ok(lock) = std::fs::File::open(dir.join(".lock")) else {
            continue;
        };
        // SAFETY: flock on a descriptor we own; released when `lock` is closed.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_runs_folder_is_swept_and_a_live_one_kept() {
        let base = tempfile::tempdir().unwrap();
        let dead = base.path().join(format!("{PREFIX}dead"));
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join(".lock"), "").unwrap();
        std::fs::write(dead.join("alice.cu"), "secret").unwrap();
        let live = base.path().join(format!("{PREFIX}live"));
        std::fs::create_dir(&live).unwrap();
        let held = std::fs::File::create(live.join(".lock")).unwrap();
        // A lock held through another open file description, as another run would hold it.
        assert_eq!(
            unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
            0
        );
        let other = base.path().join("unrelated");
        std::fs::create_dir(&other).unwrap();
        sweep(base.path());
        assert!(!dead.exists());
        assert!(live.exists() && other.exists());
    }
}

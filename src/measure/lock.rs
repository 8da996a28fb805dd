//! One GPU, one timer: a reader-writer lock per GPU, held across processes.
//!
//! Timed sections take the lock exclusively; correctness phases (a milestone's cases and
//! trials, taken once per phase) and timed sections' setups take it shared, so any number of
//! them overlap each other (and compilation never takes it) but none runs on a GPU while a
//! kernel on it is being timed. A holder of the shared lock must not take it again (a timer
//! waiting at the turnstile would deadlock with it). `grade --jobs N` may therefore exceed the GPU count without
//! distorting any measurement. A turnstile lock keeps a waiting timer from being starved by a
//! stream of correctness runs. The locks are `flock`s on files under a shared directory, keyed
//! by the GPU's PCI bus id, so processes that number GPUs differently still agree; the kernel
//! releases them when a process dies.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::PathBuf;

/// A held lock; released on drop.
#[derive(Debug)]
pub struct GpuLock {
    _main: File,
}

/// Where the lock files live: `$CUGRADE_LOCK_DIR`, else `/tmp/cugrade-locks`, whatever
/// `TMPDIR` says: every `cugrade` on the machine must meet at the same files (two graders with
/// different `TMPDIR`s timing one GPU would otherwise disturb each other), and the folder
/// outlives every run, so it is no run's temp file.
pub fn dir() -> PathBuf {
    std::env::var_os("CUGRADE_LOCK_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from("/tmp/cugrade-locks"), PathBuf::from)
}

fn open(key: &str, what: &str) -> io::Result<File> {
    let d = dir();
    std::fs::create_dir_all(&d)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Every user on a shared grading machine must be able to take the lock.
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o1777));
    }
    let safe: String = key
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let path = d.join(format!("gpu-{safe}.{what}"));
    match OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
    {
        Ok(f) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                // Open to every user of the machine (a grader as root and one as a user on
                // one GPU must share the lock).
                let _ = f.set_permissions(std::fs::Permissions::from_mode(0o666));
            }
            Ok(f)
        }
        // Made by another user who could not open it to all: `flock` needs no write access.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => File::open(&path),
        Err(e) => Err(e),
    }
}

/// Take the GPU for a timed section (exclusive).
pub fn timing(key: &str) -> io::Result<GpuLock> {
    let turnstile = open(key, "turnstile")?;
    turnstile.lock()?;
    let main = open(key, "lock")?;
    main.lock()?;
    drop(turnstile);
    Ok(GpuLock { _main: main })
}

/// Use the GPU alongside others, but never during a timed section (shared).
pub fn shared(key: &str) -> io::Result<GpuLock> {
    let turnstile = open(key, "turnstile")?;
    turnstile.lock()?;
    let main = open(key, "lock")?;
    main.lock_shared()?;
    drop(turnstile);
    Ok(GpuLock { _main: main })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn timing_excludes_shared_users_and_shared_users_coexist() {
        let d = tempfile::tempdir().unwrap();
        // SAFETY: tests in this module are the only users of the variable.
        unsafe { std::env::set_var("CUGRADE_LOCK_DIR", d.path()) };
        let a = shared("0000:01:00.0").unwrap();
        let b = shared("0000:01:00.0").unwrap();
        let (tx, rx) = mpsc::channel();
        let t = std::thread::spawn(move || {
            let _g = timing("0000:01:00.0").unwrap();
            tx.send(()).unwrap();
        });
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        drop(a);
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        drop(b);
        assert!(rx.recv_timeout(Duration::from_secs(5)).is_ok());
        t.join().unwrap();
        // Another GPU is another lock.
        let _x = timing("0000:02:00.0").unwrap();
        let _y = shared("0000:01:00.0").unwrap();
    }
}

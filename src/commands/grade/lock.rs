//! One writer per output folder: `grade` and `merge` hold an exclusive lock on `--out` for
//! their whole run, so two runs into one folder cannot interleave their files (a grades.csv of
//! one run beside another's result.json). The lock is `flock` on the folder itself: no lock
//! file joins the outputs, and the kernel drops it when the process ends, however it ends.

use crate::errors::CliError;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Held while the run writes into the folder.
#[derive(Debug)]
pub struct OutLock {
    _dir: std::fs::File,
}

/// Lock `out` (created if missing). Another run holding it is a usage error (exit 2) that says
/// so at once; a file system that cannot lock (some network mounts) gets a warning.
pub fn lock(out: &Path, command: &str) -> Result<OutLock, CliError> {
    std::fs::create_dir_all(out).map_err(|e| {
        CliError::Fatal(crate::errors::Fatal::new(format!(
            "cannot create {}: {e}",
            out.display()
        )))
    })?;
    let dir = std::fs::File::open(out).map_err(|e| {
        CliError::Usage(format!(
            "cannot open the output folder {}: {e}",
            out.display()
        ))
    })?;
    // SAFETY: flock on a descriptor we own; it only returns a status.
    let rc = unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(CliError::Usage(format!(
                "another cugrade run is writing into {} (`grade` or `merge` holds its lock): \
                 wait for it to finish, or give this run another --out",
                out.display()
            )));
        }
        eprintln!(
            "warning: cannot lock {} ({e}); cugrade {command} runs into it at the same time \
             would mix their files",
            out.display()
        );
    }
    Ok(OutLock { _dir: dir })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_folder_is_refused_until_the_first_is_dropped() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out");
        let first = lock(&out, "grade").unwrap();
        let e = lock(&out, "grade").unwrap_err();
        assert!(e.to_string().contains("another cugrade run"), "{e}");
        assert_eq!(e.exit_code(), crate::exit::USAGE);
        drop(first);
        lock(&out, "grade").unwrap();
    }
}

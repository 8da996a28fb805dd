//! What scripts and CI read from cugrade, read the way they read it: stdout closed early (a
//! pipe into `head`), `grade --format json` parsed line by line, `--format github` paths
//! resolved from the repository root, `validate` on several broken rubrics at once.
//! (issue 18, "machine-clean outputs")

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cugrade() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cugrade"))
}

fn run(args: &[&str], dir: Option<&Path>) -> Output {
    let mut c = cugrade();
    c.args(args);
    if let Some(d) = dir {
        c.current_dir(d);
    }
    c.output().expect("cugrade runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn nvrtc() -> bool {
    // SAFETY: only tries to load the library.
    let ok = unsafe { cudarc::nvrtc::sys::is_culib_present() };
    if !ok {
        eprintln!("skipped: libnvrtc.so.13 not found (run through ci/with-nvrtc)");
    }
    ok
}

/// `cugrade man | head`: the reader goes away before cugrade has written everything. cugrade
/// ends as `cat` would, killed by SIGPIPE, with nothing on stderr (no "Broken pipe", no
/// panic, not exit 3).
#[test]
fn a_closed_stdout_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    for args in [
        &["man"][..],
        &["init", "--list"],
        &["completions", "bash"],
    ] {
        // A pipe whose read end is closed before cugrade starts: every write fails with EPIPE.
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills two fresh descriptors, each owned once below.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        let (read, write) = unsafe {
            use std::os::fd::FromRawFd;
            (
                std::os::fd::OwnedFd::from_raw_fd(fds[0]),
                std::os::fd::OwnedFd::from_raw_fd(fds[1]),
            )
        };
        drop(read);
        let out = cugrade()
            .args(args)
            .stdout(Stdio::from(write))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(err.is_empty(), "{args:?}: stderr {err:?}");
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {:?}",
            out.status
        );
    }
}

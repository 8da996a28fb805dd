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

/// A copy of the mini rubric in `dir` (with its reference kernel), edited by `edit`.
fn mini_rubric(dir: &Path, name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let fixtures = root().join("tests/fixtures/mini");
    std::fs::copy(fixtures.join("ref.cu"), dir.join("ref.cu")).unwrap();
    let text = std::fs::read_to_string(fixtures.join("rubric.yaml")).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, edit(text)).unwrap();
    p
}

/// `validate a.yaml b.yaml c.yaml` checks every file and reports every mistake, each at its
/// `file:line:column`; one good file among them is still checked (and said to be fine).
#[test]
fn validate_reports_every_mistake_of_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let good = mini_rubric(dir.path(), "good.yaml", |t| t);
    // The milestone's kernel is not in ref.cu: a mistake at the `kernel:` line.
    let a = mini_rubric(dir.path(), "a.yaml", |t| {
        t.replace("    kernel: vector_add", "    kernel: vector_sum")
    });
    // Two mistakes in one file: trials, and an unknown case.
    let b = mini_rubric(dir.path(), "b.yaml", |t| {
        t.replace("assignment: mini", "assignment: mini\ntrials: 1")
            .replace("correctness: { points: 10 }", "correctness: { points: 10, cases: [\"n=7\"] }")
    });
    let c = mini_rubric(dir.path(), "c.yaml", |t| {
        t.replace("contract: add", "contract: plus")
    });
    let paths: Vec<&str> = [&a, &good, &b, &c]
        .iter()
        .map(|p| p.to_str().unwrap())
        .collect();
    let mut args = vec!["validate", "--schema-only"];
    args.extend(&paths);
    let o = run(&args, None);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(out.contains("good.yaml: schema ok"), "{out}");
    for (file, line, what) in [
        ("a.yaml", 19, "kernel `vector_sum` is not in the reference file `ref.cu`"),
        ("b.yaml", 3, "trials must be at least 2"),
        ("b.yaml", 22, "unknown case `n=7`"),
        ("c.yaml", 20, "unknown contract `plus`"),
    ] {
        let at = format!("{file}:{line}:");
        assert!(
            err.lines().any(|l| l.contains(&at)),
            "no mistake at {at}: {err}"
        );
        assert!(err.contains(what), "{what}: {err}");
    }
    assert!(err.contains("4 mistakes in 3 of 4 rubric files"), "{err}");
    // The same kernel mistake stops `check` before anything runs: exit 2 at the line.
    let sub = root().join("tests/fixtures/mini/correct");
    let o = run(
        &["check", "--rubric", paths[0], sub.to_str().unwrap()],
        None,
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("a.yaml:19:13"), "{err}");
}

//! `cugrade check --watch` the way students leave it running: stdout redirected to a file,
//! rapid successive saves, saves that rename a new file over the old one (as many editors
//! do), and Numba `.py` files. Every edit is graded, or superseded by a later edit that is;
//! stale content is never graded after newer content; the last content is the last graded.

use crate::support::{cugrade, nvrtc};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

fn init(lab: &str, lang: &str) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let o = cugrade()
        .args(["init", lab, "starter", "--lang", lang])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let dir = d.path().join("starter");
    (d, dir)
}

/// `check --watch` in `dir` with stdout and stderr going to files beside it.
struct Watching {
    child: Child,
    out: PathBuf,
    err: PathBuf,
}

impl Watching {
    fn start(dir: &Path) -> Watching {
        let out = dir.with_extension("out.txt");
        let err = dir.with_extension("err.txt");
        let child = cugrade()
            .args(["check", "--watch", "--backend", "emu", "--seed", "1"])
            .env("NO_COLOR", "1")
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        Watching { child, out, err }
    }

    fn texts(&self) -> (String, String) {
        (
            std::fs::read_to_string(&self.out).unwrap_or_default(),
            std::fs::read_to_string(&self.err).unwrap_or_default(),
        )
    }

    /// Wait until `done(stdout, stderr)` holds (or a minute passes); whether it did.
    fn wait(&self, done: impl Fn(&str, &str) -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let (o, e) = self.texts();
            if done(&o, &e) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// Finished rounds: every round prints one `Total:` line, then the watcher its line.
    fn rounds(&self) -> usize {
        let (o, e) = self.texts();
        let totals = o.lines().filter(|l| l.starts_with("Total:")).count();
        totals.min(e.matches("watching ").count())
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The edit number each round graded (the `undefined_kN` its compile error names), in order.
fn graded_edits(out: &str) -> Vec<Option<u32>> {
    let re = regex::Regex::new(r"undefined_k(\d+)").unwrap();
    out.split_inclusive("\nTotal:")
        .filter(|block| block.ends_with("Total:"))
        .map(|block| re.captures_iter(block).map(|c| c[1].parse().unwrap()).max())
        .collect()
}

/// Save edit `k` of vector-add.cu: an undefined name NVRTC reports, so the round's output
/// says which edit it graded. Odd edits are written in place, even ones beside the file and
/// renamed over it.
fn save(dir: &Path, k: u32) {
    let p = dir.join("vector-add.cu");
    let text = std::fs::read_to_string(&p).unwrap();
    let re = regex::Regex::new(r"(?s)(int n\)\n\{\n).*?(\n\}\n)").unwrap();
    let body = format!("    undefined_k{k} = c[0] + a[0] + b[0] + n;");
    let new = re.replace(&text, |c: &regex::Captures| {
        format!("{}{body}{}", &c[1], &c[2])
    });
    assert_ne!(new, text, "no kernel body in {text}");
    if k.is_multiple_of(2) {
        let tmp = dir.join(".vector-add.cu.swp");
        std::fs::write(&tmp, new.as_bytes()).unwrap();
        std::fs::rename(&tmp, &p).unwrap();
    } else {
        std::fs::write(&p, new.as_bytes()).unwrap();
    }
}

#[test]
fn watch_with_stdout_in_a_file_grades_every_edit_and_the_last_one_last() {
    if !nvrtc() {
        return;
    }
    let (_d, dir) = init("vector-add", "cuda");
    let w = Watching::start(&dir);
    assert!(w.wait(|_, _| w.rounds() == 1), "{:?}", w.texts());

    // Edits one at a time, each waiting for its round: every one is graded, whether saved in
    // place or renamed over the file.
    for k in 1..=4 {
        save(&dir, k);
        let graded = w.wait(|o, _| graded_edits(o).last() == Some(&Some(k)));
        assert!(graded, "edit {k} was not graded: {:?}", w.texts());
    }
    let rounds_before_burst = w.rounds();

    // A burst: 12 saves 50-150 ms apart, half of them renames, some landing while a round
    // runs. Rounds may fold several saves into one, but never grade an older save after a
    // newer one, and the last save is the last graded.
    for k in 5..=16 {
        save(&dir, k);
        std::thread::sleep(Duration::from_millis(50 + 25 * u64::from(k % 5)));
    }
    let last = w.wait(|o, _| graded_edits(o).last() == Some(&Some(16)));
    // And nothing more: no round is left pending once the last save was graded.
    std::thread::sleep(Duration::from_secs(3));
    let (out, err) = w.texts();
    assert!(last, "the last save was not graded:\n{out}\n{err}");
    let edits: Vec<u32> = graded_edits(&out).into_iter().flatten().collect();
    assert!(
        edits.windows(2).all(|p| p[0] < p[1]),
        "an older save was graded after a newer one: {edits:?}"
    );
    assert_eq!(edits.last(), Some(&16), "{edits:?}");
    assert!(
        w.rounds() > rounds_before_burst && w.rounds() <= rounds_before_burst + 12,
        "{edits:?}"
    );
    assert_eq!(
        graded_edits(&out).len(),
        w.rounds(),
        "a round is unfinished:\n{out}"
    );
    // The watcher says what it graded again for.
    assert!(
        err.contains("vector-add.cu changed; grading again"),
        "{err}"
    );
    // Swap files of editors are not sources.
    assert!(!err.contains(".swp"), "{err}");
}

/// `.py` files count: a Numba starter is graded again when its kernel file is saved.
#[test]
fn watch_grades_a_numba_starter_again_when_the_py_file_changes() {
    let (_d, dir) = init("reduction", "numba");
    let w = Watching::start(&dir);
    assert!(w.wait(|_, _| w.rounds() == 1), "{:?}", w.texts());
    // Still stubs, so nothing is compiled: only the watcher is under test.
    let p = dir.join("reduction.py");
    let s = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, s.replacen("# TODO: your code here.", "# soon", 1)).unwrap();
    assert!(w.wait(|_, _| w.rounds() == 2), "{:?}", w.texts());
    let (out, err) = w.texts();
    assert!(err.contains("reduction.py changed; grading again"), "{err}");
    assert!(out.contains("reduction.py:"), "{out}");
}

//! `check --watch`: run a grading round, then wait for a change to a file a submission is
//! made of (sources, headers, PTX, Python, cugrade.yaml, or the rubric) and run again.
//!
//! What decides whether to grade again is the content: a snapshot (size, mtime and a hash of
//! every such file) taken just before each round is compared with the files as they are now.
//! File-system events (inotify) only wake the comparison up early; a comparison also runs
//! every second without one. So an edit is never missed, however it is saved (in place, or
//! written beside and renamed over the file, as many editors do), however fast edits follow
//! one another, and wherever stdout goes: edits made while a round runs are graded by the next
//! round, a burst of saves is graded once, at its end (the snapshot must hold still for
//! [`SETTLE`]), and the latest content is always the last graded. Where the file system sends
//! no events (some network and VM-shared folders) the once-a-second comparison still sees the
//! edit.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime};

/// A burst of writes is over when the files have held still this long.
const SETTLE: Duration = Duration::from_millis(300);
/// How often the files are compared when no event arrives.
const POLL: Duration = Duration::from_secs(1);
/// Folder levels searched, as the submission loader does.
const MAX_DEPTH: usize = 4;

fn relevant(p: &Path, extra: &[PathBuf]) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name == "cugrade.yaml" || extra.iter().any(|e| e.file_name() == p.file_name()) {
        return true;
    }
    // Editors' swap and backup files (`.x.cu.swp`, `x.cu~`) do not count.
    if name.starts_with('.') || name.ends_with('~') {
        return false;
    }
    matches!(
        p.extension().and_then(|e| e.to_str()),
        Some("cu" | "cuh" | "h" | "hpp" | "inc" | "ptx" | "py")
    )
}

/// What a file was when the snapshot was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    len: u64,
    modified: Option<SystemTime>,
    /// Of the content: an edit that keeps the size within one mtime tick still differs.
    hash: u64,
}

type Snapshot = BTreeMap<PathBuf, Seen>;

fn seen(p: &Path) -> Option<Seen> {
    let meta = std::fs::metadata(p).ok()?;
    if !meta.is_file() {
        return None;
    }
    let bytes = std::fs::read(p).ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    Some(Seen {
        len: meta.len(),
        modified: meta.modified().ok(),
        hash: h.finish(),
    })
}

fn walk(dir: &Path, depth: usize, extra: &[PathBuf], out: &mut Snapshot) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        let Ok(kind) = e.file_type() else { continue };
        let path = e.path();
        if kind.is_dir() {
            let skip = name.starts_with('.')
                || matches!(
                    name.as_ref(),
                    "cugrade-out" | "target" | "__pycache__" | "node_modules"
                );
            if !skip && depth < MAX_DEPTH {
                walk(&path, depth + 1, extra, out);
            }
        } else if relevant(&path, extra)
            && let Some(s) = seen(&path)
        {
            out.insert(path, s);
        }
    }
}

/// The submission's files (and `extra`) as they are now.
fn snapshot(folder: &Path, extra: &[PathBuf]) -> Snapshot {
    let mut out = Snapshot::new();
    walk(folder, 1, extra, &mut out);
    for e in extra {
        if let Some(s) = seen(e) {
            out.insert(e.clone(), s);
        }
    }
    out
}

/// The files that differ between two snapshots, for the "changed" line.
fn changed(before: &Snapshot, after: &Snapshot, folder: &Path) -> Vec<String> {
    let mut names: Vec<String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| {
            let shown = k.strip_prefix(folder).unwrap_or(k).display().to_string();
            if after.contains_key(k) {
                shown
            } else {
                format!("{shown} (removed)")
            }
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The inotify watcher: events wake the comparison up early. `None` (with a warning) where
/// the system cannot watch: the once-a-second comparison still sees every edit.
fn start_watcher(
    folder: &Path,
    extra: &[PathBuf],
    tx: mpsc::Sender<Vec<PathBuf>>,
) -> Option<notify::RecommendedWatcher> {
    use notify::{RecursiveMode, Watcher};
    let watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        // Reading a source (grading does) may update its access time: not an edit.
        if let Ok(ev) = ev
            && !matches!(
                ev.kind,
                notify::EventKind::Access(_)
                    | notify::EventKind::Modify(notify::event::ModifyKind::Metadata(_))
            )
        {
            let _ = tx.send(ev.paths);
        }
    });
    let mut watcher = match watcher {
        Ok(w) => w,
        Err(e) => {
            eprintln!("cugrade: cannot watch for changes ({e}); checking every second instead");
            return None;
        }
    };
    if let Err(e) = watcher.watch(folder, RecursiveMode::Recursive) {
        eprintln!(
            "cugrade: cannot watch {} ({e}); checking every second instead",
            folder.display()
        );
        return None;
    }
    // The rubric's folder, not the file: an editor that saves by renaming a new file over it
    // would leave a watch on the file itself watching the old, deleted one.
    for e in extra {
        let dir = e
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let _ = watcher.watch(dir, RecursiveMode::NonRecursive);
    }
    Some(watcher)
}

/// Run `round` now and after every change to the submission under `folder` (and to `extra`
/// files); returns only if watching becomes impossible.
pub fn run(
    folder: &Path,
    extra: &[PathBuf],
    mut round: impl FnMut() -> i32,
) -> Result<i32, crate::errors::CliError> {
    let (tx, rx) = mpsc::channel();
    let _watcher = start_watcher(folder, extra, tx);
    let mut graded = snapshot(folder, extra);
    loop {
        round();
        // Each round's report is whole in a file or a pipe before the next begins.
        let _ = std::io::stdout().flush();
        eprintln!("watching {} for changes (Ctrl-C stops)", folder.display());
        let mut last = Instant::now();
        let mut now = loop {
            let wait = POLL.saturating_sub(last.elapsed());
            let woke = match rx.recv_timeout(wait) {
                Ok(paths) => paths.iter().any(|p| relevant(p, extra)),
                Err(RecvTimeoutError::Timeout) => true,
                // No watcher: poll at the same pace.
                Err(RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(wait);
                    true
                }
            };
            // Other files' events (a log written beside the sources) do not delay the poll.
            if !woke && last.elapsed() < POLL {
                continue;
            }
            last = Instant::now();
            let now = snapshot(folder, extra);
            if now != graded {
                break now;
            }
        };
        // Let a burst of saves end: grade what holds still (at most ~3 s of waiting).
        for _ in 0..10 {
            std::thread::sleep(SETTLE);
            let again = snapshot(folder, extra);
            if again == now {
                break;
            }
            now = again;
        }
        while rx.try_recv().is_ok() {}
        let what = changed(&graded, &now, folder);
        eprintln!(
            "{} changed; grading again",
            if what.is_empty() {
                "a file".to_string()
            } else {
                what.join(", ")
            }
        );
        graded = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sources_and_the_manifest_count() {
        let none: Vec<PathBuf> = vec![];
        assert!(relevant(Path::new("a/reduce.cu"), &none));
        assert!(relevant(Path::new("a/reduce.py"), &none));
        assert!(relevant(Path::new("a/cugrade.yaml"), &none));
        assert!(relevant(Path::new("a/k.ptx"), &none));
        assert!(!relevant(Path::new("a/result.json"), &none));
        assert!(!relevant(Path::new("a/.reduce.cu.swp"), &none));
        assert!(!relevant(Path::new("a/reduce.cu~"), &none));
        assert!(relevant(
            Path::new("/r/rubric.yaml"),
            &[PathBuf::from("rubric.yaml")]
        ));
    }

    #[test]
    fn snapshots_see_same_size_edits_renames_and_removals() {
        let d = tempfile::tempdir().unwrap();
        let k = d.path().join("k.cu");
        std::fs::write(&k, "aaaa").unwrap();
        std::fs::create_dir_all(d.path().join("cugrade-out")).unwrap();
        std::fs::write(d.path().join("cugrade-out/x.cu"), "ignored").unwrap();
        let a = snapshot(d.path(), &[]);
        assert_eq!(a.len(), 1);
        // Same size, possibly the same mtime tick: the hash differs.
        std::fs::write(&k, "bbbb").unwrap();
        let b = snapshot(d.path(), &[]);
        assert_ne!(a, b);
        assert_eq!(changed(&a, &b, d.path()), ["k.cu"]);
        // Saved by renaming a new file over it.
        std::fs::write(d.path().join("k.cu.tmp~"), "cccc").unwrap();
        std::fs::rename(d.path().join("k.cu.tmp~"), &k).unwrap();
        let c = snapshot(d.path(), &[]);
        assert_ne!(b, c);
        std::fs::remove_file(&k).unwrap();
        std::fs::write(d.path().join("new.py"), "x").unwrap();
        let e = snapshot(d.path(), &[]);
        assert_eq!(changed(&c, &e, d.path()), ["k.cu (removed)", "new.py"]);
    }
}

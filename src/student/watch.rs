//! `check --watch`: run a grading round, then wait for a change to a file a submission is
//! made of (sources, headers, PTX, cugrade.yaml, or the rubric) and run again.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// Changes closer together than this are one edit (editors write a file in several steps).
const SETTLE: Duration = Duration::from_millis(300);

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
        Some("cu" | "cuh" | "h" | "hpp" | "inc" | "ptx")
    )
}

/// Run `round` now and after every relevant change under `folder` (and to `extra` files);
/// returns only if watching becomes impossible.
pub fn run(
    folder: &Path,
    extra: &[PathBuf],
    mut round: impl FnMut() -> i32,
) -> Result<i32, crate::errors::CliError> {
    use notify::{RecursiveMode, Watcher};
    let (tx, rx) = mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        // Reading a source (grading does) may update its access time: a metadata event, not
        // an edit. Counting it graded every submission twice after each change.
        if let Ok(ev) = ev
            && !matches!(
                ev.kind,
                notify::EventKind::Access(_)
                    | notify::EventKind::Modify(notify::event::ModifyKind::Metadata(_))
            )
        {
            let _ = tx.send(ev.paths);
        }
    })
    .map_err(|e| fatal(folder, e))?;
    watcher
        .watch(folder, RecursiveMode::Recursive)
        .map_err(|e| fatal(folder, e))?;
    for e in extra {
        watcher
            .watch(e, RecursiveMode::NonRecursive)
            .map_err(|err| fatal(e, err))?;
    }
    loop {
        round();
        eprintln!("watching {} for changes (Ctrl-C stops)", folder.display());
        loop {
            let paths = rx
                .recv()
                .map_err(|_| crate::errors::Fatal::new("the file watcher stopped"))?;
            if paths.iter().any(|p| relevant(p, extra)) {
                break;
            }
        }
        // Let the edit finish, then drop what it queued.
        std::thread::sleep(SETTLE);
        while rx.try_recv().is_ok() {}
        eprintln!("change seen; grading again");
    }
}

fn fatal(p: &Path, e: notify::Error) -> crate::errors::CliError {
    crate::errors::CliError::Fatal(crate::errors::Fatal::new(format!(
        "cannot watch {}: {e}",
        p.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sources_and_the_manifest_count() {
        let none: Vec<PathBuf> = vec![];
        assert!(relevant(Path::new("a/reduce.cu"), &none));
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
}

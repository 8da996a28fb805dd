//! Whether a worker can read what it needs: the toolchain's files (NVRTC's directory, CUDA's
//! headers, the Python installation, the Numba wheels).
//!
//! Two halves. In the worker, [`blocked`] walks the toolchain's paths as the worker sees them
//! (its uid, its mount view, its Landlock domain) after a compile failed for want of a file,
//! and lists what it was refused. In the parent, [`explain`] confirms each such path from the
//! host's side with the mode bits the worker's uid meets (a grader started as root gives each
//! worker a uid of its own, which owns no file), names the entry that stops it and the fix.
//! Only a confirmed refusal is the machine's fault (exit 3); a worker's word alone is not, since
//! a worker may be running student code.

use serde::{Deserialize, Serialize};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A path the worker was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocked {
    pub path: PathBuf,
    /// The error the worker got (`Permission denied (os error 13)`).
    pub error: String,
}

/// Most entries [`blocked`] visits, and most refusals it lists.
const WALK_LIMIT: usize = 200_000;
const MAX_BLOCKED: usize = 8;

/// Walk `roots` (directories recursively, symlinks not followed) as this process and list the
/// entries it may not open: directories it cannot list, files it cannot open for reading.
/// Only permission refusals count; a path that is not there is not blocked.
pub fn blocked(roots: &[PathBuf]) -> Vec<Blocked> {
    let mut out = vec![];
    let mut budget = WALK_LIMIT;
    for root in roots {
        if out.len() >= MAX_BLOCKED {
            break;
        }
        // A root may be a link (`/usr/bin/python3`): its target is what is read.
        match std::fs::canonicalize(root) {
            Ok(real) => walk(&real, &mut out, &mut budget),
            Err(e) if refused(&e) => out.push(Blocked {
                path: root.clone(),
                error: e.to_string(),
            }),
            Err(_) => {}
        }
    }
    out
}

fn refused(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::PermissionDenied
}

fn walk(path: &Path, out: &mut Vec<Blocked>, budget: &mut usize) {
    if *budget == 0 || out.len() >= MAX_BLOCKED {
        return;
    }
    *budget -= 1;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) => {
            // Refused on the way (a directory above it that may not be entered).
            if refused(&e) {
                out.push(Blocked {
                    path: path.to_path_buf(),
                    error: e.to_string(),
                });
            }
            return;
        }
    };
    if meta.file_type().is_symlink() {
        return;
    }
    if meta.is_dir() {
        match std::fs::read_dir(path) {
            Ok(entries) => {
                let mut names: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
                names.sort();
                for p in names {
                    match std::fs::symlink_metadata(&p) {
                        Ok(m) if m.file_type().is_symlink() => {}
                        Ok(_) => walk(&p, out, budget),
                        Err(e) if refused(&e) => out.push(Blocked {
                            path: p,
                            error: e.to_string(),
                        }),
                        Err(_) => {}
                    }
                    if *budget == 0 || out.len() >= MAX_BLOCKED {
                        return;
                    }
                }
            }
            Err(e) if refused(&e) => out.push(Blocked {
                path: path.to_path_buf(),
                error: e.to_string(),
            }),
            Err(_) => {}
        }
    } else if meta.is_file()
        && let Err(e) = std::fs::File::open(path)
        && refused(&e)
    {
        out.push(Blocked {
            path: path.to_path_buf(),
            error: e.to_string(),
        });
    }
}

/// Who the worker is, for [`explain`]: its uid and gid, and whether it had its private mount
/// view (which recreates the directories above each bound path, open to all, so that only the
/// path's own tree counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reader {
    pub uid: u32,
    pub gid: u32,
    pub view: bool,
}

/// `drwx------ root:root`, for messages.
pub fn describe(meta: &std::fs::Metadata) -> String {
    let kind = if meta.is_dir() { 'd' } else { '-' };
    let m = meta.mode();
    let bits: String = [
        (0o400, 'r'),
        (0o200, 'w'),
        (0o100, 'x'),
        (0o040, 'r'),
        (0o020, 'w'),
        (0o010, 'x'),
        (0o004, 'r'),
        (0o002, 'w'),
        (0o001, 'x'),
    ]
    .iter()
    .map(|(b, c)| if m & b != 0 { *c } else { '-' })
    .collect();
    format!(
        "{kind}{bits} {}:{}",
        name_of(meta.uid()),
        name_of(meta.gid())
    )
}

fn name_of(id: u32) -> String {
    if id == 0 {
        "root".into()
    } else {
        id.to_string()
    }
}

/// The permission bits `who` meets on a file of `meta`: owner's, group's or others'.
fn bits_for(meta: &std::fs::Metadata, who: Reader) -> u32 {
    let m = meta.mode();
    if meta.uid() == who.uid {
        (m >> 6) & 7
    } else if meta.gid() == who.gid {
        (m >> 3) & 7
    } else {
        m & 7
    }
}

/// The outermost directory above `path` that `who` may not enter (search permission), if any.
pub fn closed_above(path: &Path, who: Reader) -> Option<(PathBuf, std::fs::Metadata)> {
    let mut on_the_way: Vec<&Path> = path.ancestors().skip(1).collect();
    on_the_way.reverse();
    on_the_way.into_iter().find_map(|dir| {
        let meta = std::fs::metadata(dir).ok()?;
        (meta.is_dir() && bits_for(&meta, who) & 1 == 0).then(|| (dir.to_path_buf(), meta))
    })
}

/// What stops `who` from reading `path`, seen from the host: a directory above it that may not
/// be entered (when the worker had no mount view), or the path's own mode bits, described.
/// `None` when the mode bits let it read (the refusal, if any, came from elsewhere: then it is
/// not confirmed).
pub fn explain(path: &Path, who: Reader) -> Option<String> {
    if !who.view
        && let Some((dir, meta)) = closed_above(path, who)
    {
        return Some(format!(
            "{} ({}) may not be entered by uid {}, so {} is out of its reach",
            dir.display(),
            describe(&meta),
            who.uid,
            path.display()
        ));
    }
    let meta = std::fs::symlink_metadata(path).ok()?;
    let need = if meta.is_dir() { 5 } else { 4 };
    (bits_for(&meta, who) & need != need).then(|| {
        format!(
            "{} ({}) is not readable by uid {}",
            path.display(),
            describe(&meta),
            who.uid
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn explain_names_the_entry_that_refuses_the_workers_uid() {
        let d = tempfile::tempdir().unwrap();
        let closed = d.path().join("closed");
        let tool = closed.join("tool");
        std::fs::create_dir_all(&tool).unwrap();
        std::fs::write(tool.join("lib.so"), "x").unwrap();
        chmod(&closed, 0o700);
        chmod(&tool, 0o755);
        chmod(d.path(), 0o755);
        let who = Reader {
            uid: 1_900_000_001,
            gid: 1_900_000_001,
            view: true,
        };
        // With the mount view, the closed directory above does not matter.
        assert_eq!(explain(&tool, who), None);
        let no_view = Reader { view: false, ..who };
        let why = explain(&tool, no_view).unwrap();
        assert!(why.contains("closed (drwx------"), "{why}");
        assert!(
            why.contains("may not be entered by uid 1900000001"),
            "{why}"
        );
        chmod(&tool, 0o700);
        let why = explain(&tool, who).unwrap();
        assert!(why.contains("tool (drwx------"), "{why}");
        assert!(why.contains("not readable by uid 1900000001"), "{why}");
        chmod(&tool, 0o755);
        chmod(&tool.join("lib.so"), 0o600);
        assert!(explain(&tool.join("lib.so"), who).is_some());
        // The owner's bits and the group's bits apply to them.
        let owner = Reader {
            uid: std::fs::metadata(&tool).unwrap().uid(),
            gid: 12345,
            view: true,
        };
        assert_eq!(explain(&tool.join("lib.so"), owner), None);
    }

    #[test]
    fn blocked_lists_what_this_process_may_not_open() {
        let d = tempfile::tempdir().unwrap();
        let tree = d.path().join("tree");
        std::fs::create_dir_all(tree.join("sub")).unwrap();
        std::fs::write(tree.join("sub/ok.py"), "").unwrap();
        std::os::unix::fs::symlink("/nonexistent/target", tree.join("dangling")).unwrap();
        // A tree open to us: nothing blocked; a dangling link is no refusal.
        assert!(blocked(std::slice::from_ref(&tree)).is_empty());
        assert!(blocked(&[d.path().join("missing")]).is_empty());
    }
}

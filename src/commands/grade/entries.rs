//! The entries of a cohort folder and their ids.
//!
//! Every immediate subdirectory, `.cu`/`.ptx`/`.py` file and `.zip`/`.tar.gz`/`.tgz` archive is
//! one submission. Its **id** is the entry's own name (`alice`, `alice.cu`, `alice.zip`,
//! `alice.tar.gz`: four entries, four ids) when that name is safe for a folder; a name that had
//! to be changed for that gets `~` and a 64-bit hash of the original (`o_brien~1f2e...` for
//! `o’brien`). No safe name contains `~`, so no entry can be named like another's changed id,
//! and no hash can be matched by a crafted name: ids are unique by construction. An id depends
//! on its entry's name alone: adding or removing other entries (a late submission, a shard)
//! never changes it, so `--resume`, `merge` and a gradebook can rely on it. The
//! student's *name* (`student` in result.json) stays the entry's name without its extension.
//!
//! Entries that are symbolic links are listed (so that the student gets a row saying why) but
//! never followed: `eve.cu -> /etc/passwd` must not put a byte of the target in a report.

use crate::submission::archive::ArchiveKind;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What a cohort entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    /// A `.cu`, `.ptx` or `.py` file.
    File,
    Archive(ArchiveKind),
    /// A symbolic link (refused, never followed).
    Link,
    /// A FIFO, socket or device named like a submission (refused, never opened).
    Special,
}

/// One submission of a cohort.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: PathBuf,
    /// The name as found in the cohort folder.
    pub name: String,
    /// Unique and stable: the folder in `<out>/students/`, the `id` column of grades.csv.
    pub id: String,
    /// The name without its extension: `student` in result.json.
    pub student: String,
    pub kind: Kind,
}

/// The entry's name without the extension that made it a submission.
pub fn stem(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    for ext in [".tar.gz", ".tgz", ".zip", ".cu", ".ptx", ".py"] {
        if lower.ends_with(ext) && lower.len() > ext.len() {
            return name[..name.len() - ext.len()].to_string();
        }
    }
    name.to_string()
}

/// The id of an entry named `name` (see the module's docs).
pub fn id_of(name: &str) -> String {
    let safe = crate::report::cohort::safe_dir_name(name);
    if safe == name {
        return safe;
    }
    let hash: String = Sha256::digest(name.as_bytes())[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut end = safe.len().min(80);
    while !safe.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{CHANGED}{hash}", &safe[..end])
}

/// What joins a changed name to its hash in an id: a character no safe name keeps.
const CHANGED: char = '~';

fn kind_of(name: &str, path: &Path, file_type: std::fs::FileType) -> Option<Kind> {
    let lower = name.to_ascii_lowercase();
    let source = [".cu", ".ptx", ".py"].iter().any(|e| lower.ends_with(e));
    let archive = ArchiveKind::of(name);
    if file_type.is_symlink() {
        // Listed when it would be an entry: by its name, or because it points at a folder
        // (a stat of the target, never a read of it).
        let to_dir = std::fs::metadata(path).is_ok_and(|m| m.is_dir());
        return (source || archive.is_some() || to_dir).then_some(Kind::Link);
    }
    if file_type.is_dir() {
        return Some(Kind::Dir);
    }
    if !file_type.is_file() {
        return (source || archive.is_some()).then_some(Kind::Special);
    }
    match archive {
        Some(a) => Some(Kind::Archive(a)),
        None if source => Some(Kind::File),
        None => None,
    }
}

/// The submissions in `dir`, sorted by name, each with its id.
/// `Err` with the message when `out` is the cohort folder or inside it: its folders would be
/// listed as students (`out/students` graded as a student named `students`), and a later run
/// would grade the earlier run's reports.
pub fn refuse_out_inside(cohort: &Path, out: &Path) -> Result<(), String> {
    let Ok(cohort_real) = std::fs::canonicalize(cohort) else {
        return Ok(()); // `list` says what is wrong with the cohort
    };
    if resolved(out).starts_with(&cohort_real) {
        return Err(format!(
            "--out `{}` is inside the cohort folder `{}`: its folders would be graded as              students. Put the output folder outside the cohort (e.g. `--out {}-results`)",
            out.display(),
            cohort.display(),
            cohort.display()
        ));
    }
    Ok(())
}

/// `path` with its longest existing ancestor's links resolved, the rest appended as written
/// (`--out` may not exist yet).
fn resolved(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut rest = Vec::new();
    let mut base = absolute.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(base) {
            let mut out = real;
            for part in rest.iter().rev() {
                match part {
                    std::path::Component::ParentDir => {
                        out.pop();
                    }
                    std::path::Component::Normal(p) => out.push(p),
                    _ => {}
                }
            }
            return out;
        }
        match (base.parent(), base.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                base = parent;
            }
            _ => return absolute,
        }
    }
}

pub fn list(dir: &Path) -> Result<Vec<Entry>, String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)
        .map_err(|e| format!("cannot list cohort `{}`: {e}", dir.display()))?
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let Ok(file_type) = e.file_type() else {
            continue;
        };
        let path = e.path();
        let Some(kind) = kind_of(&name, &path, file_type) else {
            continue;
        };
        out.push(Entry {
            id: String::new(),
            student: stem(&name),
            name,
            path,
            kind,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    // Unique by construction (see the module's docs): two entries sharing an id would take
    // each other's folder, so that is refused outright, never resolved by order.
    let mut used = BTreeSet::new();
    for e in &mut out {
        e.id = id_of(&e.name);
        if !used.insert(e.id.clone()) {
            return Err(format!(
                "two cohort entries share the id `{}` (a 64-bit hash collision of their                  names): rename one of them",
                e.id
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_stem_entries_get_distinct_stable_ids() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("alice")).unwrap();
        for f in [
            "alice.cu",
            "alice.zip",
            "alice.tar.gz",
            "carol.tgz",
            "notes.txt",
            ".hidden.cu",
        ] {
            std::fs::write(d.path().join(f), "").unwrap();
        }
        std::fs::write(d.path().join("a b.cu"), "").unwrap();
        std::fs::write(d.path().join("a_b.cu"), "").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("eve.cu")).unwrap();
        std::os::unix::fs::symlink("/etc", d.path().join("mallory")).unwrap();
        let fifo = std::ffi::CString::new(
            d.path()
                .join("pipe.cu")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let got: Vec<(String, String, Kind)> = list(d.path())
            .unwrap()
            .into_iter()
            .map(|e| (e.id, e.student, e.kind))
            .collect();
        let ids: Vec<&str> = got.iter().map(|g| g.0.as_str()).collect();
        assert_eq!(ids.len(), 10, "{got:?}");
        assert!(ids.contains(&"a_b.cu"));
        assert!(ids.iter().any(|i| i.starts_with("a_b.cu~")), "{ids:?}");
        for (id, student, kind) in &got {
            match id.as_str() {
                "alice" | "alice.cu" | "alice.zip" | "alice.tar.gz" => {
                    assert_eq!(student, "alice")
                }
                "eve.cu" | "mallory" => assert_eq!(*kind, Kind::Link),
                "pipe.cu" => assert_eq!(*kind, Kind::Special),
                _ => {}
            }
        }
        let unique: BTreeSet<&str> = ids.iter().copied().collect();
        assert_eq!(unique.len(), ids.len());
        // An id depends on its own name only.
        assert_eq!(id_of("a b.cu"), id_of("a b.cu"));
        assert_eq!(id_of("summary.md"), "summary.md");
        assert!(!id_of("../x").contains('/'));
        assert_eq!(stem("Bob.TAR.GZ"), "Bob");
        assert_eq!(stem(".cu"), ".cu");
    }

    /// Issue 31: an entry named like another's changed id (`o_brien-d868887c` beside
    /// `o’brien`) must not take its folder, in whatever order they arrive.
    #[test]
    fn no_entry_can_be_named_like_another_s_id() {
        let victim = "o\u{2019}brien";
        let taken = id_of(victim);
        assert!(taken.starts_with("o_brien~"), "{taken}");
        // The attacker's literal name is changed too (`~` is not kept), so its id differs.
        assert_ne!(id_of(&taken), taken);
        for order in [[victim, taken.as_str()], [taken.as_str(), victim]] {
            let d = tempfile::tempdir().unwrap();
            for name in order {
                std::fs::create_dir(d.path().join(name)).unwrap();
            }
            let ids: Vec<(String, String)> = list(d.path())
                .unwrap()
                .into_iter()
                .map(|e| (e.name, e.id))
                .collect();
            let mine = ids.iter().find(|(n, _)| n == victim).unwrap();
            assert_eq!(mine.1, taken, "{ids:?}");
        }
    }
}

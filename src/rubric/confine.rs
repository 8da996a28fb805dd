//! Which files a rubric may make cugrade read: only files of its course tree.
//!
//! A rubric names its reference kernel (`reference:`), and cugrade reads that file, compiles
//! it and, when it does not compile, prints its lines. A rubric can come from a submission
//! (`rubric: mine.yaml` in a student's `cugrade.yaml`), from a shared folder, or be a symbolic
//! link; so the rubric file and its reference must both lie, once every link is resolved, in
//! the course tree:
//!
//! - the parent of the rubric's folder (the `rubrics/` + `reference-kernels/` layout of this
//!   repository, of a Gradescope bundle and of `cugrade init`'s built-in labs),
//! - or, when it is larger, the git work tree that holds the rubric's folder (a course
//!   repository with rubrics deeper down),
//! - and never the file system's root: a rubric in `/x/` is confined to `/x/` itself;
//! - for a rubric a submission's manifest names, the submission's own folder.

use crate::errors::ConfigError;
use std::path::{Path, PathBuf};

/// The course tree of a rubric in `dir` (a canonical directory): the larger of its parent and
/// the git work tree holding it, never `/`.
pub fn course_root(dir: &Path) -> PathBuf {
    let parent = match dir.parent() {
        Some(p) if p.parent().is_some() => p,
        _ => dir,
    };
    let git = dir
        .ancestors()
        .find(|a| a.parent().is_some() && a.join(".git").exists());
    match git {
        // Both are ancestors of `dir`: the one with fewer components holds the other.
        Some(g) if g.components().count() < parent.components().count() => g.to_path_buf(),
        _ => parent.to_path_buf(),
    }
}

/// The rubric file at `path` resolved, and the tree its files must come from (`within`, or its
/// course tree). A rubric that is a link to a file outside that tree is refused unread: an
/// error about its content would print a line of that file.
pub fn rubric_file(path: &Path, within: Option<&Path>) -> Result<(PathBuf, PathBuf), ConfigError> {
    let unreadable =
        |e: std::io::Error| ConfigError::whole_file(path, format!("cannot read rubric: {e}"));
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let dir = std::fs::canonicalize(dir).map_err(unreadable)?;
    let root = match within {
        Some(w) => std::fs::canonicalize(w).map_err(unreadable)?,
        None => course_root(&dir),
    };
    let real = std::fs::canonicalize(path).map_err(unreadable)?;
    if !real.starts_with(&root) {
        return Err(ConfigError::whole_file(
            path,
            format!(
                "the rubric resolves to `{}`, outside {}; cugrade reads rubrics only from \
                 there (copy the file in rather than linking to it)",
                real.display(),
                tree_name(&root, within.is_some())
            ),
        ));
    }
    Ok((real, root))
}

fn tree_name(root: &Path, submission: bool) -> String {
    if submission {
        format!("the submission's folder `{}`", root.display())
    } else {
        format!(
            "the course tree `{}` (the rubric's folder's parent, or the git work tree holding it)",
            root.display()
        )
    }
}

/// Where `reference` (as the rubric at `rubric_path` writes it) is, once resolved: inside
/// `root`, a regular file. `Err` holds the message for the `reference:` line.
pub fn reference(
    rubric_path: &Path,
    reference: &str,
    root: &Path,
    submission: bool,
) -> Result<PathBuf, String> {
    let dir = match rubric_path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let joined = dir.join(reference);
    let real = match std::fs::canonicalize(&joined) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Say nothing about what exists outside the tree: the path as written only.
            return Err(format!(
                "reference kernel file `{}` does not exist",
                joined.display()
            ));
        }
        Err(e) => return Err(format!("cannot read reference kernel `{reference}`: {e}")),
    };
    if !real.starts_with(root) {
        return Err(format!(
            "reference `{reference}` resolves to `{}`, outside {}; cugrade reads a rubric's \
             files only from there",
            real.display(),
            tree_name(root, submission)
        ));
    }
    if !real.is_file() {
        return Err(format!("reference `{reference}` is not a file"));
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_course_tree_is_the_git_work_tree_else_the_parent_never_the_root() {
        let d = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(d.path()).unwrap();
        let rubrics = base.join("course/rubrics/hw1");
        std::fs::create_dir_all(&rubrics).unwrap();
        assert_eq!(course_root(&rubrics), base.join("course/rubrics"));
        std::fs::create_dir(base.join("course/.git")).unwrap();
        assert_eq!(course_root(&rubrics), base.join("course"));
        // A repository of rubrics alone still reaches its parent's reference-kernels/.
        std::fs::remove_dir(base.join("course/.git")).unwrap();
        std::fs::create_dir(base.join("course/rubrics/hw1/.git")).unwrap();
        assert_eq!(course_root(&rubrics), base.join("course/rubrics"));
        assert_eq!(course_root(Path::new("/etc")), PathBuf::from("/etc"));
    }

    #[test]
    fn references_and_links_outside_the_tree_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(base.join("course/rubrics")).unwrap();
        std::fs::create_dir_all(base.join("course/reference-kernels")).unwrap();
        std::fs::write(base.join("course/reference-kernels/k.cu"), "").unwrap();
        std::fs::write(base.join("secret.cu"), "root:x:0:0").unwrap();
        let rubric = base.join("course/rubrics/r.yaml");
        std::fs::write(&rubric, "").unwrap();
        let (_, root) = rubric_file(&rubric, None).unwrap();
        assert_eq!(root, base.join("course"));
        assert!(reference(&rubric, "../reference-kernels/k.cu", &root, false).is_ok());
        for bad in [
            "../../secret.cu".to_string(),
            base.join("secret.cu").display().to_string(),
            "/etc/passwd".into(),
        ] {
            let e = reference(&rubric, &bad, &root, false).unwrap_err();
            assert!(e.contains("outside the course tree"), "{bad}: {e}");
        }
        std::os::unix::fs::symlink(base.join("secret.cu"), base.join("course/rubrics/l.cu"))
            .unwrap();
        let e = reference(&rubric, "l.cu", &root, false).unwrap_err();
        assert!(e.contains("resolves to"), "{e}");
        // A rubric that is a link out of the tree is refused; one within it is followed.
        let link = base.join("course/rubrics/evil.yaml");
        std::os::unix::fs::symlink("/etc/passwd", &link).unwrap();
        let e = rubric_file(&link, None).unwrap_err().to_string();
        assert!(
            e.contains("outside the course tree") && !e.contains("root:"),
            "{e}"
        );
        let ok = base.join("course/rubrics/current.yaml");
        std::os::unix::fs::symlink(&rubric, &ok).unwrap();
        assert_eq!(rubric_file(&ok, None).unwrap().0, rubric);
    }
}

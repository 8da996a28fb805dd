//! The course's labs, built into the binary: each lab's rubric, reference kernels and lab
//! document. `cugrade init LAB` writes a starter from them, and a submission's `cugrade.yaml`
//! may name a lab (`rubric: reduction`) so that `cugrade check` works from any directory,
//! without a checkout of this repository.

use std::path::{Path, PathBuf};

/// One built-in lab.
#[derive(Debug, Clone, Copy)]
pub struct Lab {
    pub name: &'static str,
    /// `rubrics/NAME.yaml`.
    pub rubric: &'static str,
    /// `reference-kernels/NAME.cu` (`NAME.py` for a Python function lab), which the rubric
    /// names as `../reference-kernels/NAME.cu`.
    pub reference: &'static str,
    /// The reference's extension: `cu`, or `py`.
    pub reference_ext: &'static str,
    /// `docs/labs/NAME.md`.
    pub doc: &'static str,
}

macro_rules! lab {
    ($name:literal) => {
        lab!($name, "cu")
    };
    ($name:literal, $ext:literal) => {
        Lab {
            name: $name,
            rubric: include_str!(concat!("../rubrics/", $name, ".yaml")),
            reference: include_str!(concat!("../reference-kernels/", $name, ".", $ext)),
            reference_ext: $ext,
            doc: include_str!(concat!("../docs/labs/", $name, ".md")),
        }
    };
}

/// Every lab shipped with this version of cugrade.
pub const LABS: &[Lab] = &[
    lab!("vector-add"),
    lab!("reduction"),
    lab!("matmul"),
    lab!("transpose"),
    lab!("softmax"),
    lab!("convolution"),
    lab!("activations"),
    lab!("embedding"),
    lab!("fused-gemm"),
    lab!("attention"),
    lab!("allreduce"),
    lab!("preprocess", "py"),
];

pub fn find(name: &str) -> Option<&'static Lab> {
    LABS.iter().find(|l| l.name == name)
}

/// The lab names, for messages: `vector-add, reduction, ...`.
pub fn names() -> String {
    LABS.iter().map(|l| l.name).collect::<Vec<_>>().join(", ")
}

/// A built-in lab's rubric and reference written to a temporary folder (laid out as in the
/// repository, so the rubric's relative `reference:` path resolves), for `rubric::load`.
/// While it lives, [`shown`] names files in that folder by the lab, never by the temp path.
pub struct Materialized {
    _dir: tempfile::TempDir,
    pub rubric_path: PathBuf,
}

/// The temp folders of the labs materialized now, with each lab's name (for [`shown`]).
static WRITTEN_OUT: std::sync::Mutex<Vec<(PathBuf, &'static str)>> =
    std::sync::Mutex::new(Vec::new());

fn written_out() -> std::sync::MutexGuard<'static, Vec<(PathBuf, &'static str)>> {
    WRITTEN_OUT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Drop for Materialized {
    fn drop(&mut self) {
        let dir = self._dir.path().to_path_buf();
        written_out().retain(|(d, _)| *d != dir);
    }
}

/// The built-in lab `path` was written out for (while it is), if any.
pub fn lab_name(path: &Path) -> Option<&'static str> {
    written_out()
        .iter()
        .find(|(dir, _)| path.starts_with(dir))
        .map(|(_, name)| *name)
}

/// A rubric's path as messages name it: a built-in lab's rubric (or any file written out with
/// it) as "the built-in lab `reduction`" rather than the temporary file it was written to
/// (`cugrade check --rubric reduction -v`, `cugrade validate reduction`); anything else as
/// its path.
pub fn shown(path: &Path) -> String {
    match lab_name(path) {
        Some(name) => format!("the built-in lab `{name}`"),
        None => path.display().to_string(),
    }
}

impl Lab {
    /// A course's own lab, from its loaded rubric (`cugrade init --rubric FILE`): named by the
    /// rubric's file, with the course's lab document (`docs/labs/NAME.md` beside the course's
    /// `rubrics/`) when there is one, else one made from the rubric's milestones. Its texts
    /// live as long as the process (a command's one lab).
    pub fn from_course(r: &crate::rubric::LoadedRubric) -> Result<&'static Lab, String> {
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        let name = r
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("`{}` names no rubric file", r.path.display()))?;
        let read = |p: &Path| {
            std::fs::read_to_string(p).map_err(|e| format!("cannot read `{}`: {e}", p.display()))
        };
        let doc_path = r
            .path
            .parent()
            .and_then(Path::parent)
            .map(|course| course.join("docs/labs").join(format!("{name}.md")));
        let doc = match doc_path.filter(|p| p.is_file()) {
            Some(p) => read(&p)?,
            None => {
                let title = if r.rubric.title.trim().is_empty() {
                    r.rubric.assignment.clone()
                } else {
                    r.rubric.title.replace('\n', " ")
                };
                let mut d = format!("# Lab: {title}\n\n## What you write\n\n");
                for m in &r.rubric.milestones {
                    let what = if m.title.is_empty() {
                        m.hint.as_deref().unwrap_or("")
                    } else {
                        m.title.as_str()
                    };
                    d.push_str(&format!("- `{}` (milestone `{}`) {what}\n", m.kernel, m.id));
                }
                d
            }
        };
        let ext = r
            .reference_path
            .extension()
            .map_or("cu".to_string(), |e| e.to_string_lossy().into_owned());
        Ok(Box::leak(Box::new(Lab {
            name: leak(name),
            rubric: leak(read(&r.path)?),
            reference: leak(read(&r.reference_path)?),
            reference_ext: leak(ext),
            doc: leak(doc),
        })))
    }

    pub fn materialize(&self) -> std::io::Result<Materialized> {
        let dir = tempfile::Builder::new().prefix("cugrade-lab-").tempdir()?;
        let write = |rel: &str, text: &str| -> std::io::Result<PathBuf> {
            let p = dir.path().join(rel);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&p, text)?;
            Ok(p)
        };
        write(
            &format!("reference-kernels/{}.{}", self.name, self.reference_ext),
            self.reference,
        )?;
        let rubric_path = write(&format!("rubrics/{}.yaml", self.name), self.rubric)?;
        // CPU baselines this machine pinned for the lab (`cugrade calibrate LAB`).
        if let Ok(pinned) = std::fs::read_to_string(self.calibration_path()) {
            write(&format!("rubrics/{}.calibration.json", self.name), &pinned)?;
        }
        written_out().push((dir.path().to_path_buf(), self.name));
        Ok(Materialized {
            _dir: dir,
            rubric_path,
        })
    }

    /// Where `cugrade calibrate LAB` pins a built-in lab's CPU baselines on this machine (a
    /// built-in lab has no folder of its own to keep them beside its rubric).
    pub fn calibration_path(&self) -> PathBuf {
        crate::compile::toolchain::cache_root()
            .join("calibration")
            .join(format!("{}.calibration.json", self.name))
    }

    /// Write the lab for a course to start from (`cugrade init LAB DIR --course`): its rubric,
    /// reference and lab document, laid out as in cugrade's repository so that the rubric's
    /// `reference:` path resolves. Nothing is overwritten. Returns the files written.
    pub fn write_course(&self, dir: &Path) -> Result<Vec<PathBuf>, String> {
        let files = [
            (
                format!("reference-kernels/{}.{}", self.name, self.reference_ext),
                self.reference,
            ),
            (format!("rubrics/{}.yaml", self.name), self.rubric),
            (format!("docs/labs/{}.md", self.name), self.doc),
        ];
        if let Some((rel, _)) = files.iter().find(|(rel, _)| dir.join(rel).exists()) {
            return Err(format!(
                "`{}` already exists; nothing was written",
                dir.join(rel).display()
            ));
        }
        let mut out = vec![];
        for (rel, text) in files {
            let p = dir.join(&rel);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("cannot create `{}`: {e}", parent.display()))?;
            }
            std::fs::write(&p, text).map_err(|e| format!("cannot write `{}`: {e}", p.display()))?;
            out.push(p);
        }
        Ok(out)
    }

    /// The prose of the lab document's "What you write" section (code blocks left out: the
    /// starter has the signatures as code).
    pub fn what_you_write(&self) -> String {
        let mut out = Vec::new();
        let mut inside = false;
        let mut code = false;
        for line in self.doc.lines() {
            if line.starts_with("## ") {
                inside = line.trim_start_matches("## ").trim() == "What you write";
                continue;
            }
            if !inside {
                continue;
            }
            if line.trim_start().starts_with("```") {
                code = !code;
                continue;
            }
            if !code {
                out.push(line.trim_end());
            }
        }
        let text = out.join("\n");
        text.trim().to_string()
    }

    /// The lab document's first heading, e.g. "Lab: parallel reduction (`rubrics/reduction.yaml`)".
    pub fn heading(&self) -> &'static str {
        self.doc
            .lines()
            .find_map(|l| l.strip_prefix("# "))
            .unwrap_or(self.name)
    }
}

/// A rubric argument (`--rubric R`, `validate R`, `calibrate R`): the file `R`, or when no
/// such file exists and `R` is a bare name, the built-in lab of that name, written to a
/// temporary folder that lives as long as the returned guard.
pub fn rubric_argument(given: &Path) -> Result<(PathBuf, Option<Materialized>), String> {
    if given.exists() {
        return Ok((given.to_path_buf(), None));
    }
    let bare = given.components().count() == 1 && given.extension().is_none();
    let name = given.to_string_lossy();
    match find(&name).filter(|_| bare) {
        Some(lab) => {
            let m = lab
                .materialize()
                .map_err(|e| format!("cannot unpack the built-in lab `{name}`: {e}"))?;
            Ok((m.rubric_path.clone(), Some(m)))
        }
        None => Ok((given.to_path_buf(), None)),
    }
}

/// Where a manifest's `rubric:` value points: a rubric file (relative to the manifest's
/// folder) when one exists there, else a built-in lab of that name.
pub enum RubricSource {
    File(PathBuf),
    Lab(&'static Lab),
}

pub fn resolve_manifest_rubric(value: &str, manifest_dir: &Path) -> Result<RubricSource, String> {
    let candidate = manifest_dir.join(value);
    // A submission's rubric is the student's file: it must be in their folder, links resolved
    // (`rubric: ../../etc/passwd` would otherwise have a line of that file printed).
    if let Ok(real) = std::fs::canonicalize(&candidate) {
        let inside = std::fs::canonicalize(manifest_dir).is_ok_and(|d| real.starts_with(d));
        if !inside {
            return Err(format!(
                "`rubric: {value}` is outside the submission's folder; name a rubric file in \
                 it, or a lab built into cugrade ({})",
                names()
            ));
        }
    }
    if candidate.is_file() {
        return Ok(RubricSource::File(candidate));
    }
    if let Some(lab) = find(value) {
        return Ok(RubricSource::Lab(lab));
    }
    Err(format!(
        "`rubric: {value}` is neither a rubric file next to cugrade.yaml nor a lab built into cugrade ({})",
        names()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_lab_loads_and_has_its_section() {
        for lab in LABS {
            let m = lab.materialize().unwrap();
            let r =
                crate::rubric::load(&m.rubric_path).unwrap_or_else(|e| panic!("{}: {e}", lab.name));
            assert_eq!(r.rubric.assignment, lab.name, "assignment name = lab name");
            assert!(
                !lab.what_you_write().is_empty(),
                "{} has a `What you write` section",
                lab.name
            );
        }
    }

    #[test]
    fn manifest_rubric_prefers_a_file_then_a_lab() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("mine.yaml"), "x").unwrap();
        assert!(matches!(
            resolve_manifest_rubric("mine.yaml", d.path()),
            Ok(RubricSource::File(_))
        ));
        assert!(matches!(
            resolve_manifest_rubric("reduction", d.path()),
            Ok(RubricSource::Lab(l)) if l.name == "reduction"
        ));
        let e = resolve_manifest_rubric("nope", d.path()).err().unwrap();
        assert!(e.contains("vector-add, reduction"), "{e}");
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("evil.yaml")).unwrap();
        for bad in ["evil.yaml", "../../../../../../etc/passwd", "/etc/passwd"] {
            let e = resolve_manifest_rubric(bad, d.path()).err().unwrap();
            assert!(e.contains("outside the submission's folder"), "{bad}: {e}");
        }
    }
}

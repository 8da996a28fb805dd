//! What a student handed in: a `.cu`/`.ptx`/`.py` file, or a directory of them with an optional
//! `cugrade.yaml` manifest (docs/submissions.md). `.py` files hold Numba `@cuda.jit` kernels or
//! CuPy kernel definitions (`compile::cupy::python_language` tells which). Archives (`.zip`, `.tar.gz`) are unpacked
//! into a temp dir with size limits first, so a zip bomb is a message, not a full disk.

pub mod archive;
pub mod languages;
mod unpack;

use crate::compile::SourceFile;
use crate::errors::ConfigError;
use crate::rubric::expr::Kind;
use crate::rubric::locate::Locations;
use crate::rubric::parse_yaml_within;
use crate::rubric::schema::Expr;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Limits on what one submission may contain.
pub const MAX_FILES: usize = 64;
pub const MAX_FILE_BYTES: u64 = 2 << 20;
pub const MAX_TOTAL_BYTES: u64 = 8 << 20;

/// `cugrade.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    #[serde(default)]
    pub student: Option<String>,
    /// The rubric to grade against when `check` gets no `--rubric`: a rubric file relative to
    /// this manifest's folder, or the name of a lab built into cugrade (`crate::labs`).
    #[serde(default)]
    pub rubric: Option<String>,
    /// Launch overrides by kernel name.
    #[serde(default)]
    pub launch: BTreeMap<String, LaunchOverride>,
    /// The language of every `.py` file (`numba` or `cupy`), instead of reading their imports
    /// (`compile::cupy::python_language`).
    #[serde(default)]
    pub lang: Option<crate::rubric::schema::Language>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchOverride {
    #[serde(default)]
    pub block: Option<Vec<Expr>>,
    #[serde(default)]
    pub grid: Option<Vec<Expr>>,
    #[serde(default)]
    pub shared_bytes: Option<Expr>,
}

/// A loaded submission.
#[derive(Debug, Clone)]
pub struct Submission {
    pub student: String,
    pub root: PathBuf,
    /// CUDA sources, each compiled on its own.
    pub sources: Vec<SourceFile>,
    /// Hand-written or pre-generated PTX modules.
    pub ptx: Vec<SourceFile>,
    /// Headers available to `#include "name"` (by submission-relative path).
    pub headers: Vec<SourceFile>,
    /// Python files with Numba `@cuda.jit` kernels (and the modules they import).
    pub python: Vec<SourceFile>,
    pub manifest: Manifest,
    pub manifest_path: Option<PathBuf>,
    pub sha256: String,
    /// Files that were skipped, with why.
    pub notes: Vec<String>,
    /// The languages the submission is in, decided once (`languages::of`).
    pub languages: Vec<crate::rubric::schema::Language>,
    /// Each `.py` file's language, in `python`'s order.
    pub python_langs: Vec<languages::PyLang>,
}

/// Why a submission could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SubmissionError {
    /// The manifest is malformed (exit 2 for `check`).
    #[error("{0}")]
    Manifest(ConfigError),
    /// Anything else (missing path, too large).
    #[error("{0}")]
    Other(String),
    /// No `.cu`, `.ptx` or `.py` file: an empty submission.
    #[error("{0}")]
    Empty(String),
}

/// Read a submission from a file or directory.
pub fn load(path: &Path) -> Result<Submission, SubmissionError> {
    let meta = std::fs::metadata(path).map_err(|e| {
        SubmissionError::Other(format!("cannot read submission `{}`: {e}", path.display()))
    })?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "student".into());
    let mut sub = Submission {
        student: stem,
        root: if meta.is_dir() {
            path.to_path_buf()
        } else {
            path.parent().unwrap_or(Path::new(".")).to_path_buf()
        },
        sources: vec![],
        ptx: vec![],
        headers: vec![],
        python: vec![],
        manifest: Manifest::default(),
        manifest_path: None,
        sha256: String::new(),
        notes: vec![],
        languages: vec![],
        python_langs: vec![],
    };
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    if meta.is_dir() {
        collect(path, path, &mut files, &mut sub.notes, 0)?;
    } else {
        let name = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        files.push((name, path.to_path_buf()));
    }
    files.sort();
    let mut hasher = Sha256::new();
    let mut total = 0u64;
    for (rel, full) in &files {
        let size = std::fs::metadata(full).map(|m| m.len()).unwrap_or(0);
        let manifest_cap = crate::rubric::bounds::MANIFEST.max_bytes as u64;
        if rel == "cugrade.yaml" && size > manifest_cap {
            return Err(SubmissionError::Manifest(ConfigError::whole_file(
                full,
                format!("the file is {size} bytes; a cugrade.yaml may have at most {manifest_cap}"),
            )));
        }
        if size > MAX_FILE_BYTES {
            return Err(SubmissionError::Other(format!(
                "`{rel}` is {size} bytes; a submission file may have at most {MAX_FILE_BYTES}"
            )));
        }
        total += size;
        if total > MAX_TOTAL_BYTES {
            return Err(SubmissionError::Other(format!(
                "the submission exceeds {MAX_TOTAL_BYTES} bytes"
            )));
        }
        let bytes = read_no_follow(full)
            .map_err(|e| SubmissionError::Other(format!("cannot read `{rel}`: {e}")))?;
        hasher.update(rel.as_bytes());
        hasher.update([0]);
        hasher.update(&bytes);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let file = SourceFile {
            name: rel.clone(),
            text,
        };
        match extension(rel).as_str() {
            "cu" => sub.sources.push(file),
            "ptx" => sub.ptx.push(file),
            "h" | "cuh" | "hpp" | "inc" => sub.headers.push(file),
            "py" => sub.python.push(file),
            _ if rel == "cugrade.yaml" => {
                sub.manifest = parse_manifest(full, &file.text)?;
                sub.manifest_path = Some(full.clone());
            }
            _ => {}
        }
    }
    sub.sha256 = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if let Some(s) = &sub.manifest.student {
        sub.student = s.clone();
    } else if meta.is_dir() {
        sub.student = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or(sub.student);
    }
    if sub.sources.is_empty() && sub.ptx.is_empty() && sub.python.is_empty() {
        return Err(SubmissionError::Empty(format!(
            "no `.cu`, `.ptx` or `.py` file in `{}`",
            path.display()
        )));
    }
    sub.resolve_languages();
    Ok(sub)
}

/// `check FILE` in a folder that `cugrade init` made: the manifest beside the file (its
/// `rubric:`, its launch overrides) applies to the file as it does to the folder. Only `check`
/// asks for it: a cohort's single-file entries never read a `cugrade.yaml` beside them.
pub fn adopt_folder_manifest(sub: &mut Submission, path: &Path) -> Result<(), SubmissionError> {
    if sub.manifest_path.is_some() || !path.is_file() {
        return Ok(());
    }
    let manifest = sub.root.join("cugrade.yaml");
    let Ok(bytes) = read_no_follow(&manifest) else {
        return Ok(());
    };
    let cap = crate::rubric::bounds::MANIFEST.max_bytes;
    if bytes.len() > cap {
        return Err(SubmissionError::Manifest(ConfigError::whole_file(
            &manifest,
            format!(
                "the file is {} bytes; a cugrade.yaml may have at most {cap}",
                bytes.len()
            ),
        )));
    }
    sub.manifest = parse_manifest(&manifest, &String::from_utf8_lossy(&bytes))?;
    sub.manifest_path = Some(manifest);
    sub.resolve_languages();
    Ok(())
}

/// A submission file's bytes, never through a link (a file swapped for one after it was
/// listed is refused, not followed), at most [`MAX_FILE_BYTES`].
fn read_no_follow(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        // Non-blocking: a FIFO swapped in after the listing must not stall the grader.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn extension(name: &str) -> String {
    Path::new(name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default()
}

fn collect(
    root: &Path,
    dir: &Path,
    out: &mut Vec<(String, PathBuf)>,
    notes: &mut Vec<String>,
    depth: usize,
) -> Result<(), SubmissionError> {
    if depth > 4 {
        notes.push(format!(
            "`{}` is nested too deep and was skipped",
            dir.display()
        ));
        return Ok(());
    }
    let entries = std::fs::read_dir(dir)
        .map_err(|e| SubmissionError::Other(format!("cannot list `{}`: {e}", dir.display())))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let p = entry.path();
        // Never follow links: a link could point at another student's files.
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_symlink() {
            notes.push(format!("`{name}` is a symbolic link and was ignored"));
        } else if ft.is_dir() {
            collect(root, &p, out, notes, depth + 1)?;
        } else if ft.is_file() {
            let rel = p
                .strip_prefix(root)
                .unwrap_or(&p)
                .to_string_lossy()
                .into_owned();
            let keep = matches!(
                extension(&rel).as_str(),
                "cu" | "ptx" | "h" | "cuh" | "hpp" | "inc" | "py"
            ) || rel == "cugrade.yaml";
            if keep {
                if out.len() >= MAX_FILES {
                    return Err(SubmissionError::Other(format!(
                        "more than {MAX_FILES} source files"
                    )));
                }
                out.push((rel, p));
            }
        }
    }
    Ok(())
}

/// Parse and check a manifest; every expression must parse (variables are checked when the
/// rubric is known, in [`check_against`]).
pub fn parse_manifest(path: &Path, text: &str) -> Result<Manifest, SubmissionError> {
    let m: Manifest = parse_yaml_within(path, text, &crate::rubric::bounds::MANIFEST)
        .map_err(SubmissionError::Manifest)?;
    let locs = Locations::of(text);
    if let Some(l) = m.lang {
        use crate::rubric::schema::Language;
        if !matches!(l, Language::Numba | Language::Cupy) {
            return Err(SubmissionError::Manifest(ConfigError::new(
                path,
                locs.value("lang"),
                format!(
                    "`lang:` says how `.py` files are read: `numba` or `cupy`, not `{}`",
                    l.as_str()
                ),
                text,
            )));
        }
    }
    for (kernel, o) in &m.launch {
        for (key, list) in [("block", &o.block), ("grid", &o.grid)] {
            if let Some(l) = list {
                if l.is_empty() || l.len() > 3 {
                    return Err(SubmissionError::Manifest(ConfigError::new(
                        path,
                        locs.value(&format!("launch.{kernel}.{key}")),
                        format!("`{key}` takes 1 to 3 entries"),
                        text,
                    )));
                }
                for (i, e) in l.iter().enumerate() {
                    e.parse_as(Kind::Int).map_err(|msg| {
                        SubmissionError::Manifest(ConfigError::new(
                            path,
                            locs.value(&format!("launch.{kernel}.{key}[{i}]")),
                            msg,
                            text,
                        ))
                    })?;
                }
            }
        }
        if let Some(e) = &o.shared_bytes {
            e.parse_as(Kind::Int).map_err(|msg| {
                SubmissionError::Manifest(ConfigError::new(
                    path,
                    locs.value(&format!("launch.{kernel}.shared_bytes")),
                    msg,
                    text,
                ))
            })?;
        }
    }
    Ok(m)
}

/// Check a manifest's overrides against the rubric: known kernels, known variables, and
/// overrides only where the rubric allows them.
pub fn check_against(
    sub: &Submission,
    rubric: &crate::rubric::LoadedRubric,
) -> Result<(), ConfigError> {
    let Some(path) = &sub.manifest_path else {
        return Ok(());
    };
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let locs = Locations::of(&text);
    for (kernel, o) in &sub.manifest.launch {
        let at = |k: &str| locs.key(&format!("launch.{kernel}{k}"));
        let Some(m) = rubric
            .rubric
            .milestones
            .iter()
            .find(|m| &m.kernel == kernel)
        else {
            let known: Vec<&str> = rubric
                .rubric
                .milestones
                .iter()
                .map(|m| m.kernel.as_str())
                .collect();
            return Err(ConfigError::new(
                path,
                at(""),
                format!(
                    "`{kernel}` is not a kernel of this assignment (kernels: {})",
                    known.join(", ")
                ),
                &text,
            ));
        };
        if !rubric.rubric.allow_launch_override {
            return Err(ConfigError::new(
                path,
                at(""),
                format!("this assignment does not allow launch overrides (kernel `{kernel}`)"),
                &text,
            ));
        }
        let mut vars: Vec<String> = crate::rubric::contract_variables(rubric.contract(&m.contract))
            .into_iter()
            .collect();
        vars.extend(
            rubric
                .rubric
                .cases
                .correctness
                .iter()
                .chain(&rubric.rubric.cases.performance)
                .flat_map(|c| c.vars.keys().cloned()),
        );
        let exprs = o
            .block
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, e)| (format!("launch.{kernel}.block[{i}]"), e))
            .chain(
                o.grid
                    .iter()
                    .flatten()
                    .enumerate()
                    .map(|(i, e)| (format!("launch.{kernel}.grid[{i}]"), e)),
            )
            .chain(
                o.shared_bytes
                    .iter()
                    .map(|e| (format!("launch.{kernel}.shared_bytes"), e)),
            );
        for (p, e) in exprs {
            let parsed = e
                .parse_as(Kind::Int)
                .map_err(|m| ConfigError::new(path, locs.value(&p), m, &text))?;
            parsed
                .check_vars(vars.iter().map(String::as_str))
                .map_err(|m| ConfigError::new(path, locs.value(&p), m, &text))?;
        }
    }
    Ok(())
}

/// The launch for `kernel`: the contract's, with the manifest's overrides where given.
pub fn launch_for(
    sub: &Submission,
    kernel: &str,
    default: &crate::rubric::schema::Launch,
) -> crate::rubric::schema::Launch {
    let mut l = default.clone();
    if let Some(o) = sub.manifest.launch.get(kernel) {
        if let Some(b) = &o.block {
            l.block = b.clone();
        }
        if let Some(g) = &o.grid {
            l.grid = g.clone();
        }
        if let Some(s) = &o.shared_bytes {
            l.shared_bytes = Some(s.clone());
        }
    }
    l
}

impl Submission {
    /// The languages the submission is in (decided when it was read: `languages::of`).
    pub fn languages(&self) -> Vec<crate::rubric::schema::Language> {
        self.languages.clone()
    }

    /// How `f`, one of the submission's `.py` files, takes part in grading.
    pub fn python_language(&self, f: &SourceFile) -> languages::PyLang {
        self.python
            .iter()
            .position(|p| p.name == f.name)
            .and_then(|i| self.python_langs.get(i).copied())
            .unwrap_or_else(|| languages::python_language(&f.text, self.manifest.lang))
    }

    /// Decide the languages from the files and the manifest: once when the submission is read,
    /// again when a folder's manifest is adopted.
    fn resolve_languages(&mut self) {
        self.python_langs = self
            .python
            .iter()
            .map(|f| languages::python_language(&f.text, self.manifest.lang))
            .collect();
        self.languages = languages::of(
            !self.sources.is_empty(),
            !self.ptx.is_empty(),
            &self.python_langs,
        );
    }
}

/// Unpack an archive into `into` in a sandboxed worker ([`archive`]); returns the submission's
/// folder.
pub fn unpack(archive: &Path, into: &Path, protected: &[PathBuf]) -> Result<PathBuf, String> {
    unpack::unpack(archive, into, protected)
}

pub use unpack::load_archive;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_with_manifest_and_header() {
        let d = tempfile::tempdir().unwrap();
        let s = d.path().join("alice");
        std::fs::create_dir(&s).unwrap();
        std::fs::write(s.join("k.cu"), "#include \"c.cuh\"\n").unwrap();
        std::fs::write(s.join("c.cuh"), "").unwrap();
        std::fs::write(s.join("notes.txt"), "ignored").unwrap();
        std::fs::write(
            s.join("cugrade.yaml"),
            "student: alice2\nlaunch:\n  k:\n    block: [128]\n",
        )
        .unwrap();
        let sub = load(&s).unwrap();
        assert_eq!(sub.student, "alice2");
        assert_eq!(sub.sources.len(), 1);
        assert_eq!(sub.headers[0].name, "c.cuh");
        assert_eq!(sub.sha256.len(), 64);
        let def = crate::rubric::schema::Launch {
            block: vec![Expr::int(256)],
            grid: vec![Expr::int(1)],
            shared_bytes: None,
        };
        assert_eq!(launch_for(&sub, "k", &def).block, vec![Expr::int(128)]);
    }

    #[test]
    fn manifest_errors_are_positioned() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("k.cu"), "").unwrap();
        std::fs::write(
            d.path().join("cugrade.yaml"),
            "launch:\n  k:\n    grid: [\"ceil_div(n 16)\"]\n",
        )
        .unwrap();
        let SubmissionError::Manifest(e) = load(d.path()).unwrap_err() else {
            panic!("expected a manifest error")
        };
        assert_eq!(e.pos.map(|p| (p.line, p.col)), Some((3, 12)));
        std::fs::write(d.path().join("cugrade.yaml"), "studnet: x\n").unwrap();
        let SubmissionError::Manifest(e) = load(d.path()).unwrap_err() else {
            panic!("expected a manifest error")
        };
        assert!(
            e.message.contains("unknown field `studnet`"),
            "{}",
            e.message
        );
    }

    #[test]
    fn python_files_are_numba_sources() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("lab")).unwrap();
        std::fs::write(d.path().join("lab/reduce.py"), "from numba import cuda\n").unwrap();
        std::fs::write(d.path().join("notes.txt"), "ignored").unwrap();
        let sub = load(d.path()).unwrap();
        assert_eq!(sub.python.len(), 1);
        assert_eq!(sub.python[0].name, "lab/reduce.py");
        assert!(sub.sources.is_empty() && sub.ptx.is_empty());
        assert_eq!(
            sub.languages(),
            vec![crate::rubric::schema::Language::Numba]
        );
        let single = load(&d.path().join("lab/reduce.py")).unwrap();
        assert_eq!(single.python[0].name, "reduce.py");
        let cohort = crate::commands::grade::entries::list(&d.path().join("lab")).unwrap();
        assert_eq!(cohort.len(), 1);
    }

    #[test]
    fn python_files_are_numba_or_cupy() {
        use crate::rubric::schema::Language;
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("k.py"), "import cupy as cp\n").unwrap();
        std::fs::write(d.path().join("util.py"), "X = 1\n").unwrap();
        assert_eq!(load(d.path()).unwrap().languages(), vec![Language::Cupy]);
        std::fs::write(d.path().join("n.py"), "from numba import cuda\n").unwrap();
        assert_eq!(
            load(d.path()).unwrap().languages(),
            vec![Language::Numba, Language::Cupy]
        );
        std::fs::write(d.path().join("cugrade.yaml"), "lang: cupy\n").unwrap();
        assert_eq!(load(d.path()).unwrap().languages(), vec![Language::Cupy]);
        std::fs::write(d.path().join("cugrade.yaml"), "lang: cuda\n").unwrap();
        let SubmissionError::Manifest(e) = load(d.path()).unwrap_err() else {
            panic!("expected a manifest error")
        };
        assert!(e.message.contains("`numba` or `cupy`"), "{}", e.message);
    }

    #[test]
    fn a_script_beside_cuda_sources_is_no_language() {
        use crate::rubric::schema::Language;
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("k.cu"), "__global__ void k() {}\n").unwrap();
        std::fs::write(
            d.path().join("plot.py"),
            "import matplotlib.pyplot as plt\n",
        )
        .unwrap();
        assert_eq!(load(d.path()).unwrap().languages(), vec![Language::Cuda]);
        std::fs::write(d.path().join("n.py"), "from numba import cuda\n").unwrap();
        assert_eq!(
            load(d.path()).unwrap().languages(),
            vec![Language::Cuda, Language::Numba]
        );
    }

    #[test]
    fn empty_directory_is_a_clear_error() {
        let d = tempfile::tempdir().unwrap();
        assert!(
            load(d.path())
                .unwrap_err()
                .to_string()
                .contains("no `.cu`, `.ptx` or `.py` file")
        );
    }
}

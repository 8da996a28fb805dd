//! Student starters: `cugrade init LAB [DIR]` writes stub kernels with the contract's
//! signatures, a `cugrade.yaml` naming the lab and a short README; and `cugrade check` tells a
//! kernel whose body is still empty ("not implemented yet") from a wrong one, so an untouched
//! starter gets one friendly line per milestone instead of a wall of mismatches.

pub use super::common::StarterLang;
use super::cuda::kernel_source;
use crate::labs::Lab;
use crate::result::{Check, CheckKind, GradeResult, MilestoneResult, Status};

use crate::rubric::{self, LoadedRubric};
use crate::submission::Submission;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The check name every "not implemented yet" milestone carries.
pub const NOT_IMPLEMENTED: &str = "implemented";

/// The languages a lab has starters for: CUDA C++ always, Numba where its backend can grade
/// the lab's rubric.
pub fn languages(lab: &Lab) -> Vec<StarterLang> {
    let numba = lab
        .materialize()
        .ok()
        .and_then(|m| rubric::load(&m.rubric_path).ok())
        .is_some_and(|r| super::numba::can_grade(&r));
    let cupy = lab
        .materialize()
        .ok()
        .and_then(|m| rubric::load(&m.rubric_path).ok())
        .is_some_and(|r| super::cupy::can_grade(&r));
    let function = lab
        .materialize()
        .ok()
        .and_then(|m| rubric::load(&m.rubric_path).ok())
        .is_some_and(|r| super::function::is_function_lab(&r));
    if function {
        return vec![StarterLang::Cupy];
    }
    let mut v = vec![StarterLang::Cuda];
    if numba {
        v.push(StarterLang::Numba);
    }
    if cupy {
        v.push(StarterLang::Cupy);
    }
    v
}

/// Write a starter for `lab` in `lang` into `dir` (created if missing; a folder that already
/// has files, such as a fresh clone of the student's repository, is fine as long as none of
/// the starter's files is there). Returns the files written, relative to `dir`.
pub fn init(
    lab: &Lab,
    dir: &Path,
    asked: Option<StarterLang>,
) -> Result<(Vec<String>, StarterLang), String> {
    let m = lab
        .materialize()
        .map_err(|e| format!("cannot unpack the lab: {e}"))?;
    let r = rubric::load(&m.rubric_path).map_err(|e| e.to_string())?;
    write_starter(lab, &r, dir, asked, &manifest(lab))
}

/// Write `lab`'s starter (rubric `r`) into `dir`, with `cugrade.yaml` holding `manifest`.
pub fn write_starter(
    lab: &Lab,
    r: &LoadedRubric,
    dir: &Path,
    asked: Option<StarterLang>,
    manifest: &str,
) -> Result<(Vec<String>, StarterLang), String> {
    let function_lab = super::function::is_function_lab(r);
    if function_lab && matches!(asked, Some(StarterLang::Numba | StarterLang::Cuda)) {
        return Err(format!(
            "the {} lab grades a Python function over CuPy arrays, not kernels: its starter is \
             CuPy (`cugrade init {}`, or `--lang cupy`)",
            lab.name, lab.name
        ));
    }
    // A function lab's starter is CuPy; a kernel lab's is CUDA C++ unless asked otherwise.
    let lang = if function_lab {
        StarterLang::Cupy
    } else {
        asked.unwrap_or(StarterLang::Cuda)
    };
    let (source_name, source) = match lang {
        StarterLang::Cupy if function_lab => {
            (super::cupy::file_name(lab), super::function::source(lab, r))
        }
        StarterLang::Cuda => (format!("{}.cu", lab.name), kernel_source(lab, r)),
        StarterLang::Numba => {
            if !super::numba::can_grade(r) {
                return Err(format!(
                    "the {} lab has no Numba starter: its rubric does not accept Numba kernels \
                     (`cugrade init --list` says which languages each lab has)",
                    lab.name
                ));
            }
            (
                super::numba::file_name(lab),
                super::numba::kernel_source(lab, r),
            )
        }
        StarterLang::Cupy => {
            if !super::cupy::can_grade(r) {
                return Err(format!(
                    "the {} lab has no CuPy starter: its rubric does not accept CuPy kernels \
                     (`cugrade init --list` says which languages each lab has)",
                    lab.name
                ));
            }
            (
                super::cupy::file_name(lab),
                super::cupy::kernel_source(lab, r),
            )
        }
    };
    let files = [
        (source_name.clone(), source),
        ("cugrade.yaml".to_string(), manifest.to_string()),
        (
            "README.md".to_string(),
            if function_lab {
                function_readme(r, &source_name)
            } else {
                readme(r, &source_name, lang)
            },
        ),
        (
            "lab.md".to_string(),
            super::labdoc::lab_md(lab, r, lang, &source_name),
        ),
        (".gitignore".to_string(), "cugrade-out/\n".to_string()),
    ];
    // A README or .gitignore the folder already has is kept; the kernels and cugrade.yaml
    // must not overwrite anything.
    let optional = |n: &str| n == "README.md" || n == ".gitignore";
    if let Some((name, _)) = files
        .iter()
        .find(|(n, _)| !optional(n) && dir.join(n).exists())
    {
        return Err(format!(
            "`{}` already exists; nothing was written (use another folder: cugrade init {} DIR)",
            dir.join(name).display(),
            lab.name
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
    let mut written = Vec::new();
    for (name, text) in &files {
        let p = dir.join(name);
        if optional(name) && p.exists() {
            continue;
        }
        std::fs::write(&p, text).map_err(|e| format!("cannot write `{}`: {e}", p.display()))?;
        written.push(name.clone());
    }
    Ok((written, lang))
}

fn manifest(lab: &Lab) -> String {
    format!(
        "# cugrade reads this file. `rubric:` names the lab built into cugrade (or a rubric\n\
         # file next to this one); `cugrade check` in this folder grades against it.\n\
         rubric: {}\n",
        lab.name
    )
}

fn function_readme(r: &LoadedRubric, source: &str) -> String {
    let mut s = format!(
        "# {}\n\nWrite the function in `{source}`, then grade it from this folder:\n\n\
         ```sh\ncugrade check\n```\n\n\
         On a GPU it runs with CuPy and its speed is measured against the NumPy reference. No\n\
         GPU? NumPy then stands in for CuPy: correctness is graded, speed is not measured.\n\
         cugrade runs it with Python 3.10+ and NumPy (installed into its cache on first use\n\
         when Python has none). `cugrade check --watch` grades again each time you save.\n\n\
         | milestone | function | points |\n| --- | --- | --- |\n",
        r.rubric.title.replace('\n', " ")
    );
    for m in &r.rubric.milestones {
        let _ = writeln!(
            s,
            "| `{}` | `{}` | {} |",
            m.id,
            m.kernel,
            rubric::milestone_max(m)
        );
    }
    let _ = writeln!(s, "\nThe lab's full description is in `lab.md`.");
    s
}

fn readme(r: &LoadedRubric, source: &str, lang: StarterLang) -> String {
    let first_use = match lang {
        StarterLang::Cuda => {
            "The first `cugrade check` that compiles a kernel downloads NVIDIA's CUDA C++\n\
             compiler (NVRTC, ~90 MB, from PyPI) into cugrade's cache, once."
        }
        StarterLang::Numba => {
            "The kernels are Numba `@cuda.jit` functions. The first `cugrade check` that\n\
             compiles one downloads NVRTC and Numba's CUDA toolchain (~700 MB, from PyPI,\n\
             with Python 3.10+) into cugrade's cache, once."
        }
        StarterLang::Cupy => {
            "The kernels are CUDA C++ in a CuPy RawModule: cugrade reads them with Python 3.10+\n\
             (no GPU and no CuPy needed) and compiles them with NVRTC, which the first\n\
             `cugrade check` downloads (~90 MB, from PyPI) into cugrade's cache, once."
        }
    };
    let mut s = format!(
        "# {}\n\nWrite the kernels in `{source}`, then grade them from this folder:\n\n\
         ```sh\ncugrade check\n```\n\n\
         No GPU? cugrade then runs your kernels on its PTX emulator: correctness is graded,\n\
         speed is not measured. `cugrade check --watch` grades again each time you save.\n\
         {first_use}\n\n\
         | milestone | kernel | points |\n| --- | --- | --- |\n",
        r.rubric.title.replace('\n', " ")
    );
    for m in &r.rubric.milestones {
        let _ = writeln!(
            s,
            "| `{}` | `{}` | {} |",
            m.id,
            m.kernel,
            rubric::milestone_max(m)
        );
    }
    let _ = writeln!(s, "\nThe lab's full description is in `lab.md`.");
    s
}

/// Source text with comments and string/char literals blanked out (same length, newlines
/// kept), so that positions still map to lines.
pub(crate) fn blank_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        match (b[i], b.get(i + 1)) {
            (b'/', Some(b'/')) => {
                let end = b[i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(b.len(), |p| i + p);
                blank(&mut out, i, end);
                i = end;
            }
            (b'/', Some(b'*')) => {
                let end = src[i + 2..].find("*/").map_or(b.len(), |p| i + 2 + p + 2);
                blank(&mut out, i, end);
                i = end;
            }
            (q @ (b'"' | b'\''), _) => {
                let mut j = i + 1;
                while j < b.len() && b[j] != q && b[j] != b'\n' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let end = (j + 1).min(b.len());
                blank(&mut out, i + 1, end.saturating_sub(1).max(i + 1));
                i = end;
            }
            _ => i += 1,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Index just past the bracket that closes the one at `open`.
fn matching(text: &[u8], open: usize, (l, r): (u8, u8)) -> Option<usize> {
    let mut depth = 0usize;
    for (i, &c) in text.iter().enumerate().skip(open) {
        if c == l {
            depth += 1;
        } else if c == r {
            depth = depth.checked_sub(1)?;
            if depth == 0 {
                return Some(i + 1);
            }
        }
    }
    None
}

/// Where `kernel` is defined in `src` and whether its body is empty (comments aside).
pub(crate) fn definitions(src: &str, kernel: &str) -> Vec<(usize, bool)> {
    let clean = blank_comments(src);
    let b = clean.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(p) = clean[from..].find(kernel).map(|p| from + p) {
        from = p + kernel.len();
        let before_ok = p == 0 || !(b[p - 1].is_ascii_alphanumeric() || b[p - 1] == b'_');
        let rest = clean[from..].trim_start();
        if !before_ok || !rest.starts_with('(') {
            continue;
        }
        let open = b.len() - rest.len();
        let Some(close) = matching(b, open, (b'(', b')')) else {
            continue;
        };
        let after = clean[close..].trim_start();
        if !after.starts_with('{') {
            continue;
        }
        let brace = b.len() - after.len();
        let Some(end) = matching(b, brace, (b'{', b'}')) else {
            continue;
        };
        let empty = clean[brace + 1..end - 1].trim().is_empty();
        let line = clean[..p].matches('\n').count() + 1;
        out.push((line, empty));
    }
    out
}

/// Kernels of the rubric whose every definition in the submission has an empty body (in CUDA
/// C++ or Numba), with the `file:line` of the (first) definition. PTX is never taken for a
/// stub.
pub fn stubs(sub: &Submission, r: &LoadedRubric) -> BTreeMap<String, String> {
    if super::function::is_function_lab(r) {
        let mut out = BTreeMap::new();
        for m in &r.rubric.milestones {
            // Every file that defines the function still has the stub.
            let head = format!("def {}(", m.kernel);
            let defs: Vec<Option<String>> = sub
                .python
                .iter()
                .filter(|f| f.text.lines().any(|l| l.starts_with(&head)))
                .map(|f| {
                    super::function::stub_line(&f.text, &m.kernel)
                        .map(|line| format!("{}:{line}", f.name))
                })
                .collect();
            if let Some(Some(at)) = defs.first().filter(|_| defs.iter().all(Option::is_some)) {
                out.insert(m.kernel.clone(), at.clone());
            }
        }
        return out;
    }
    // Files in a language the rubric refuses are not its kernels: grading says so instead.
    let accepts = |l: crate::rubric::schema::Language| {
        r.rubric.languages.as_ref().is_none_or(|v| v.contains(&l))
    };
    let cuda: &[crate::compile::SourceFile] = if accepts(crate::rubric::schema::Language::Cuda) {
        &sub.sources
    } else {
        &[]
    };
    let python: &[crate::compile::SourceFile] = if accepts(crate::rubric::schema::Language::Numba) {
        &sub.python
    } else {
        &[]
    };
    let cupy: Vec<&crate::compile::SourceFile> = if accepts(crate::rubric::schema::Language::Cupy) {
        sub.python
            .iter()
            .filter(|f| {
                matches!(
                    sub.python_language(f),
                    crate::compile::cupy::PyLang::Cupy | crate::compile::cupy::PyLang::Both
                )
            })
            .collect()
    } else {
        vec![]
    };
    let mut out = BTreeMap::new();
    for m in &r.rubric.milestones {
        let mut defs = Vec::new();
        for f in cuda.iter().chain(&sub.headers) {
            for (line, empty) in definitions(&f.text, &m.kernel) {
                defs.push((format!("{}:{line}", f.name), empty));
            }
        }
        for f in python {
            for (line, empty) in super::numba::definitions(&f.text, &m.kernel) {
                defs.push((format!("{}:{line}", f.name), empty));
            }
        }
        // CuPy: CUDA C++ in the module's strings (a RawKernel's or RawModule's code); the
        // triple quotes around it are not C++.
        for f in &cupy {
            let text = f.text.replace("'''", "   ").replace("\"\"\"", "   ");
            for (line, empty) in definitions(&text, &m.kernel) {
                defs.push((format!("{}:{line}", f.name), empty));
            }
        }
        if !defs.is_empty() && defs.iter().all(|(_, e)| *e) {
            out.insert(m.kernel.clone(), defs[0].0.clone());
        }
    }
    out
}

fn not_implemented(kernel: &str, at: &str) -> Check {
    Check::fail(
        CheckKind::Kernel,
        NOT_IMPLEMENTED,
        format!("not implemented yet (`{kernel}` has an empty body)"),
    )
    .with_location(Some(at.to_string()))
}

/// Replace the checks of milestones whose kernel is a stub by one "not implemented yet".
pub fn mark(r: &mut GradeResult, stubs: &BTreeMap<String, String>) {
    for m in &mut r.milestones {
        if let Some(at) = stubs.get(&m.kernel) {
            m.checks = vec![not_implemented(&m.kernel, at)];
            m.status = Status::Fail;
            m.score = 0.0;
        }
    }
    r.score = r.milestones.iter().map(|m| m.score).sum();
}

/// The result of a submission none of whose milestones is implemented: nothing is compiled
/// or run.
pub fn untouched(
    rubric: &LoadedRubric,
    sub: &Submission,
    stubs: &BTreeMap<String, String>,
    opts: &crate::pipeline::Options,
) -> GradeResult {
    let milestones = rubric
        .rubric
        .milestones
        .iter()
        .map(|m| MilestoneResult {
            id: m.id.clone(),
            title: m.display_title(),
            status: Status::Fail,
            score: 0.0,
            max_score: rubric::milestone_max(m),
            provisional: false,
            checks: vec![not_implemented(
                &m.kernel,
                stubs.get(&m.kernel).map_or("", String::as_str),
            )],
            kernel: m.kernel.clone(),
        })
        .collect();
    GradeResult {
        assignment: rubric.rubric.assignment.clone(),
        student: sub.student.clone(),
        student_id: None,
        id: String::new(),
        entry: String::new(),
        backend: opts.backend.as_str().to_string(),
        seed: opts.seed,
        score: 0.0,
        max_score: rubric.max_score(),
        milestones,
        submission_sha256: sub.sha256.clone(),
        rubric_sha256: String::new(),
        compile: None,
        run: crate::result::RunInfo {
            device: if super::function::is_function_lab(rubric) && !opts.backend.caps().device {
                format!("{} (no GPU)", crate::report::describe::STAND_IN)
            } else {
                opts.device_name.clone()
            },
            arch: opts.arch.clone(),
            timed: false,
            cugrade_version: env!("CARGO_PKG_VERSION").to_string(),
            ..Default::default()
        },
        notes: vec![if super::function::is_function_lab(rubric) {
            "nothing implemented yet: fill in the function and run `cugrade check` again".into()
        } else {
            "nothing implemented yet: fill in a kernel and run `cugrade check` again".into()
        }],
        flags: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::init::cuda::signature;

    #[test]
    fn empty_bodies_are_stubs_and_comments_do_not_count() {
        let src = "// reduce_naive(x) { y }\n\
                   extern \"C\" __global__ void reduce_naive(const float* in, float* out, int n)\n\
                   {\n    // TODO: your code here. }\n    /* { } */\n}\n\
                   extern \"C\" __global__ void reduce_shared(const float* in, float* out, int n) {\n\
                   \x20   if (n) { out[0] = \"}\"[0]; }\n}\n\
                   __device__ void reduce_shuffle(int);\n";
        assert_eq!(definitions(src, "reduce_naive"), vec![(2, true)]);
        assert_eq!(definitions(src, "reduce_shared"), vec![(7, false)]);
        assert_eq!(definitions(src, "reduce_shuffle"), vec![]);
        assert_eq!(definitions(src, "naive"), vec![]);
    }

    #[test]
    fn every_lab_starter_compiles_to_stubs_with_the_contract_signatures() {
        for lab in crate::labs::LABS {
            if lab.reference_ext == "py" {
                continue; // a Python function's starter: init::function's tests
            }
            let d = tempfile::tempdir().unwrap();
            let dir = d.path().join("s");
            let (files, _) = init(lab, &dir, Some(StarterLang::Cuda)).unwrap();
            assert!(files.contains(&"cugrade.yaml".to_string()));
            let sub = crate::submission::load(&dir).unwrap();
            assert_eq!(sub.manifest.rubric.as_deref(), Some(lab.name));
            let m = lab.materialize().unwrap();
            let r = rubric::load(&m.rubric_path).unwrap();
            let stubs = stubs(&sub, &r);
            for ms in &r.rubric.milestones {
                assert!(
                    stubs.contains_key(&ms.kernel),
                    "{}: {}",
                    lab.name,
                    ms.kernel
                );
            }
            for f in &sub.sources {
                for line in f.text.lines() {
                    assert!(line.chars().count() <= 80, "{}: {line}", lab.name);
                }
            }
            assert!(
                init(lab, &dir, Some(StarterLang::Cuda))
                    .unwrap_err()
                    .contains("already exists")
            );
            // The Numba starter: its stubs are stubs too.
            let py = d.path().join("py");
            let (files, _) = init(lab, &py, Some(StarterLang::Numba)).unwrap();
            assert!(files.iter().any(|f| f.ends_with(".py")), "{files:?}");
            let sub = crate::submission::load(&py).unwrap();
            assert!(sub.sources.is_empty() && sub.python.len() == 1);
            let py_stubs = super::stubs(&sub, &r);
            for ms in &r.rubric.milestones {
                assert!(
                    py_stubs
                        .get(&ms.kernel)
                        .is_some_and(|at| at.contains(".py:")),
                    "{}: {}",
                    lab.name,
                    ms.kernel
                );
            }
        }
    }

    #[test]
    fn reduction_signature_matches_the_lab_document() {
        let lab = crate::labs::find("reduction").unwrap();
        let m = lab.materialize().unwrap();
        let r = rubric::load(&m.rubric_path).unwrap();
        assert_eq!(
            signature("reduce_naive", r.contract("reduce")),
            "extern \"C\" __global__ void reduce_naive(const float* in, float* out, int n)"
        );
    }
}

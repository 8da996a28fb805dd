//! `cugrade grade`: every submission of a cohort, one broken submission never stopping the
//! others (as ripgrep treats a bad file). Each student gets `result.json`, `report.md`,
//! `junit.xml`, Gradescope's `results.json` and the `fingerprints.json` of their sources in
//! their own folder; the cohort gets `summary.md` (and `charts/`), `grades.csv`,
//! `integrity.csv` and a combined `junit.xml`. `merge` combines shards; `progress` reports.

pub mod merge;
pub mod progress;

use crate::errors::{CliError, Fatal};
use crate::exit;
use crate::grade::{self, Reference};
use crate::integrity::{self, Fingerprints};
use crate::report::output::{Format, print_result, write_outputs};
use crate::result::{Check, CheckKind, GradeResult, MilestoneResult, Status};
use crate::rubric::{self, LoadedRubric};
use crate::setup::{Requested, resolve};
use crate::submission;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Debug, Clone)]
pub struct CohortOptions {
    pub jobs: usize,
    /// (K, N), 1-based.
    pub shard: Option<(usize, usize)>,
    pub resume: bool,
    pub format: Format,
    /// Starter code handed to every student (files or directories): excluded from integrity
    /// matches, as the rubric's reference kernels are.
    pub starter: Vec<PathBuf>,
}

/// Source files cugrade reads from a starter path (a file, or a directory's files), as
/// (name, text).
fn starter_sources(paths: &[PathBuf]) -> Result<Vec<(String, String)>, CliError> {
    let mut out = Vec::new();
    for p in paths {
        let files: Vec<PathBuf> = if p.is_dir() {
            let mut v: Vec<PathBuf> = walk(p);
            v.sort();
            v
        } else {
            vec![p.clone()]
        };
        for f in files {
            let text = std::fs::read_to_string(&f).map_err(|e| {
                CliError::Usage(format!("cannot read starter code `{}`: {e}", f.display()))
            })?;
            out.push((f.to_string_lossy().into_owned(), text));
        }
    }
    Ok(out)
}

/// Source-like files below `dir` (`.cu`, `.cuh`, `.h`, `.ptx`, `.py`).
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if p
            .extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| matches!(x, "cu" | "cuh" | "h" | "ptx" | "py"))
        {
            out.push(p);
        }
    }
    out
}

/// What every student was given: the rubric's reference kernels and the starter code.
fn common_hashes(rubric: &LoadedRubric, starter: &[PathBuf]) -> Result<HashSet<u64>, CliError> {
    let mut given = starter_sources(starter)?;
    if let Ok(text) = std::fs::read_to_string(&rubric.reference_path) {
        given.push((rubric.reference_path.to_string_lossy().into_owned(), text));
    }
    let sources: Vec<integrity::Source<'_>> = given
        .iter()
        .map(|(name, text)| integrity::Source { name, text })
        .collect();
    Ok(integrity::common_hashes(&sources))
}

/// A submission's fingerprints (all its source files, headers and PTX).
fn fingerprints_of(sub: &submission::Submission, common: &HashSet<u64>) -> Fingerprints {
    let sources: Vec<integrity::Source<'_>> = sub
        .sources
        .iter()
        .chain(&sub.headers)
        .chain(&sub.ptx)
        .map(|f| integrity::Source {
            name: &f.name,
            text: &f.text,
        })
        .collect();
    integrity::fingerprint(&sources, common)
}

/// The result for a submission that could not be graded at all.
pub fn unreadable(
    rubric: &LoadedRubric,
    student: &str,
    why: &str,
    seed: u64,
    backend: &str,
) -> GradeResult {
    let milestones = rubric
        .rubric
        .milestones
        .iter()
        .map(|m| MilestoneResult {
            id: m.id.clone(),
            title: m.display_title(),
            status: Status::Error,
            score: 0.0,
            max_score: rubric::milestone_max(m),
            provisional: false,
            checks: vec![Check::error(
                CheckKind::Compile,
                "submission",
                format!("the submission could not be read: {why}"),
            )],
            kernel: m.kernel.clone(),
        })
        .collect();
    GradeResult {
        assignment: rubric.rubric.assignment.clone(),
        student: student.to_string(),
        student_id: None,
        backend: backend.to_string(),
        seed,
        score: 0.0,
        max_score: rubric.max_score(),
        milestones,
        submission_sha256: String::new(),
        compile: None,
        run: Default::default(),
        notes: vec![],
        flags: vec![],
    }
}

pub fn run(
    rubric_path: &Path,
    cohort: &Path,
    out: &Path,
    req: &Requested,
    opts: &CohortOptions,
) -> Result<i32, CliError> {
    let rubric = rubric::load(rubric_path)?;
    let mut entries = submission::cohort_entries(cohort).map_err(CliError::Usage)?;
    if let Some((k, n)) = opts.shard {
        entries = entries
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % n == k - 1)
            .map(|(_, e)| e)
            .collect();
    }
    std::fs::create_dir_all(out)
        .map_err(|e| Fatal::new(format!("cannot create {}: {e}", out.display())))?;
    let common = common_hashes(&rubric, &opts.starter)?;
    let progress = progress::Progress::new(entries.len(), progress::wants_bar());
    let unpack_dir = tempfile::tempdir().map_err(|e| Fatal::new(format!("temp dir: {e}")))?;
    let devices = if req.gpus.is_empty() {
        vec![0]
    } else {
        req.gpus.clone()
    };
    let mut base = resolve(req, devices[0], true)?;
    base.protected = crate::setup::protected_dirs(&[rubric_path, cohort, out]);
    // CPU baselines measured for this cohort live beside its outputs: every student, shard and
    // `--resume` of the cohort is compared with the same value (unless the rubric pins one).
    base.baseline_cache = Some(out.join("cpu-baselines.json"));
    let reference = Reference::compile(&rubric, &base).map_err(|e| Fatal::new(e.0.to_string()))?;

    let queue = Mutex::new(entries.into_iter());
    let results: Mutex<Vec<(GradeResult, Fingerprints)>> = Mutex::new(Vec::new());
    let fatal: Mutex<Option<String>> = Mutex::new(None);
    let used_names: Mutex<std::collections::BTreeSet<String>> = Mutex::new(Default::default());
    std::thread::scope(|s| {
        for job in 0..opts.jobs {
            let device = devices[job % devices.len()];
            // One compile of the reference for the cohort; expected outputs computed once.
            let mut reference = reference.share(device, None);
            let (queue, results, fatal, used_names, rubric, base, common, progress) = (
                &queue,
                &results,
                &fatal,
                &used_names,
                &rubric,
                &base,
                &common,
                &progress,
            );
            let unpack = unpack_dir.path();
            s.spawn(move || {
                let mut o = base.clone();
                if o.backend == crate::backend::BackendKind::Cuda && device != base.device {
                    match crate::backend::cuda::device_arch(device) {
                        Ok((name, arch)) => {
                            o.device = device;
                            o.device_name = name;
                            o.arch = arch;
                            o.gpu = crate::backend::cuda::pci_bus_id(device).ok();
                        }
                        Err(e) => {
                            *fatal.lock().unwrap_or_else(|p| p.into_inner()) =
                                Some(format!("GPU {device}: {e}"));
                            return;
                        }
                    }
                }
                reference = reference.share(o.device, o.gpu.clone());
                if o.arch != base.arch {
                    // A GPU of another architecture needs the reference compiled for it.
                    match Reference::compile(rubric, &o) {
                        Ok(r) => reference = r,
                        Err(e) => {
                            *fatal.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.0);
                            return;
                        }
                    }
                }
                loop {
                    if fatal.lock().map(|f| f.is_some()).unwrap_or(true) {
                        return;
                    }
                    let Some(entry) = queue.lock().ok().and_then(|mut q| q.next()) else {
                        return;
                    };
                    match grade_entry(
                        &entry,
                        rubric,
                        &o,
                        &mut reference,
                        unpack,
                        out,
                        opts.resume,
                        used_names,
                        common,
                    ) {
                        Ok(r) => {
                            progress.graded(&r.0);
                            results.lock().unwrap_or_else(|p| p.into_inner()).push(r);
                        }
                        Err(e) => {
                            *fatal.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                            return;
                        }
                    }
                }
            });
        }
    });
    progress.finish();
    if let Some(e) = fatal.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(CliError::Fatal(Fatal::new(format!("grading stopped: {e}"))));
    }
    let mut graded = results.into_inner().unwrap_or_else(|p| p.into_inner());
    graded.sort_by(|a, b| a.0.student.cmp(&b.0.student));
    let prints: Vec<(String, Fingerprints)> = graded
        .iter()
        .map(|(r, f)| (r.student.clone(), f.clone()))
        .collect();
    let pairs = integrity::pairs(&prints);
    let results: Vec<GradeResult> = graded.into_iter().map(|(r, _)| r).collect();
    report::write_cohort(&results, &pairs, out)?;
    if opts.format != Format::Human {
        for r in &results {
            print_result(r, opts.format, None);
        }
    }
    println!(
        "graded {} submissions into {}",
        results.len(),
        out.display()
    );
    Ok(if results.iter().all(GradeResult::all_passed) {
        exit::OK
    } else {
        exit::FAILED
    })
}

mod report {
    use super::*;
    pub fn write_cohort(
        results: &[GradeResult],
        pairs: &[crate::integrity::Pair],
        out: &Path,
    ) -> Result<(), CliError> {
        crate::report::cohort::write_all_with(results, pairs, out).map_err(|e| {
            CliError::Fatal(Fatal::new(format!("cannot write the cohort reports: {e}")))
        })
    }
}

#[allow(clippy::too_many_arguments)]
fn grade_entry(
    entry: &Path,
    rubric: &LoadedRubric,
    o: &grade::Options,
    reference: &mut Reference,
    unpack: &Path,
    out: &Path,
    resume: bool,
    used: &Mutex<std::collections::BTreeSet<String>>,
    common: &HashSet<u64>,
) -> Result<(GradeResult, Fingerprints), String> {
    let name = entry
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let lower = name.to_ascii_lowercase();
    let path: Result<PathBuf, String> =
        if lower.ends_with(".zip") || lower.ends_with(".tar.gz") || lower.ends_with(".tgz") {
            submission::unpack(entry, unpack)
        } else {
            Ok(entry.to_path_buf())
        };
    let fallback_name = name
        .trim_end_matches(".zip")
        .trim_end_matches(".tar.gz")
        .trim_end_matches(".tgz")
        .trim_end_matches(".cu")
        .trim_end_matches(".ptx")
        .to_string();
    let loaded = path.and_then(|p| submission::load(&p).map_err(|e| e.to_string()));
    let loaded = loaded.and_then(|s| {
        submission::check_against(&s, rubric)
            .map(|_| s)
            .map_err(|e| e.to_string())
    });
    // The manifest's name is the student's id for the gradebook (grades.csv refuses an id two
    // submissions claim).
    let claimed_id = loaded
        .as_ref()
        .ok()
        .and_then(|s| s.manifest.student.clone())
        .filter(|id| *id != fallback_name && !id.trim().is_empty());
    // The cohort entry names the student, never the manifest: a student could otherwise
    // claim another's name and take their place in the outputs.
    let loaded = loaded.map(|mut s| {
        if s.student != fallback_name {
            s.notes.push(format!(
                "the manifest names the student `{}`; graded as cohort entry `{fallback_name}`",
                s.student
            ));
            s.student = fallback_name.clone();
        }
        s
    });
    let student = fallback_name;
    let folder = {
        let mut set = used.lock().unwrap_or_else(|p| p.into_inner());
        let base = crate::report::cohort::safe_dir_name(&student);
        let mut f = base.clone();
        let mut i = 2;
        while !set.insert(f.clone()) {
            f = format!("{base}-{i}");
            i += 1;
        }
        out.join(f)
    };
    let mut prints = Fingerprints::default();
    let mut result = match loaded {
        Err(why) => unreadable(rubric, &student, &why, o.seed, o.backend.as_str()),
        Ok(sub) => {
            prints = fingerprints_of(&sub, common);
            let previous = folder.join("result.json");
            let reuse = resume
                .then(|| std::fs::read_to_string(&previous).ok())
                .flatten()
                .and_then(|t| serde_json::from_str::<GradeResult>(&t).ok())
                .filter(|r| {
                    r.submission_sha256 == sub.sha256 && r.assignment == rubric.rubric.assignment
                });
            match reuse {
                Some(r) => r,
                None => grade::grade(rubric, &sub, o, reference).map_err(|e| e.0)?,
            }
        }
    };
    result.student_id = claimed_id;
    std::fs::create_dir_all(&folder)
        .map_err(|e| format!("cannot create {}: {e}", folder.display()))?;
    let write = |name: &str, text: String| {
        std::fs::write(folder.join(name), text)
            .map_err(|e| format!("cannot write {}: {e}", folder.join(name).display()))
    };
    write(
        "results.json",
        crate::report::gradescope::to_string(&result),
    )?;
    write(
        "fingerprints.json",
        serde_json::to_string(&prints).map_err(|e| e.to_string())? + "\n",
    )?;
    write_outputs(
        &result,
        Some(&folder.join("result.json")),
        Some(&folder.join("junit.xml")),
        Some(&folder.join("report.md")),
    )
    .map_err(|e| e.to_string())?;
    Ok((result, prints))
}

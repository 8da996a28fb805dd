//! `cugrade grade`: every submission of a cohort, one broken submission never stopping the
//! others (as ripgrep treats a bad file). Each student gets `result.json`, `report.md` and
//! `junit.xml` in their own folder; the cohort gets `summary.md`, `grades.csv` and a combined
//! `junit.xml`.

use crate::errors::{CliError, Fatal};
use crate::exit;
use crate::grade::{self, Reference};
use crate::report::output::{Format, print_result, write_outputs};
use crate::result::{Check, CheckKind, GradeResult, MilestoneResult, Status};
use crate::rubric::{self, LoadedRubric};
use crate::setup::{Requested, resolve};
use crate::submission;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Debug, Clone)]
pub struct CohortOptions {
    pub jobs: usize,
    /// (K, N), 1-based.
    pub shard: Option<(usize, usize)>,
    pub resume: bool,
    pub format: Format,
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
            title: if m.title.is_empty() {
                m.id.clone()
            } else {
                m.title.clone()
            },
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
        backend: backend.to_string(),
        seed,
        score: 0.0,
        max_score: rubric.max_score(),
        milestones,
        submission_sha256: String::new(),
        compile: None,
        run: Default::default(),
        notes: vec![],
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
    drop(reference);

    let queue = Mutex::new(entries.into_iter());
    let results: Mutex<Vec<GradeResult>> = Mutex::new(Vec::new());
    let fatal: Mutex<Option<String>> = Mutex::new(None);
    let used_names: Mutex<std::collections::BTreeSet<String>> = Mutex::new(Default::default());
    std::thread::scope(|s| {
        for job in 0..opts.jobs {
            let device = devices[job % devices.len()];
            let (queue, results, fatal, used_names, rubric, base) =
                (&queue, &results, &fatal, &used_names, &rubric, &base);
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
                let mut reference = match Reference::compile(rubric, &o) {
                    Ok(r) => r,
                    Err(e) => {
                        *fatal.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.0);
                        return;
                    }
                };
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
                    ) {
                        Ok(r) => {
                            eprintln!(
                                "graded {}: {}/{} ({})",
                                r.student,
                                r.score,
                                r.max_score,
                                r.status().as_str()
                            );
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
    if let Some(e) = fatal.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(CliError::Fatal(Fatal::new(format!("grading stopped: {e}"))));
    }
    let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    results.sort_by(|a, b| a.student.cmp(&b.student));
    report::write_cohort(&results, out)?;
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
    pub fn write_cohort(results: &[GradeResult], out: &Path) -> Result<(), CliError> {
        crate::report::cohort::write_all(results, out).map_err(|e| {
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
) -> Result<GradeResult, String> {
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
    let result = match loaded {
        Err(why) => unreadable(rubric, &student, &why, o.seed, o.backend.as_str()),
        Ok(sub) => {
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
    std::fs::create_dir_all(&folder)
        .map_err(|e| format!("cannot create {}: {e}", folder.display()))?;
    write_outputs(
        &result,
        Some(&folder.join("result.json")),
        Some(&folder.join("junit.xml")),
        Some(&folder.join("report.md")),
    )
    .map_err(|e| e.to_string())?;
    Ok(result)
}

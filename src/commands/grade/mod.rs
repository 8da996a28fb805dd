//! `cugrade grade`: every submission of a cohort, one broken submission never stopping the
//! others (as ripgrep treats a bad file). Each student gets `result.json`, `report.md`,
//! `junit.xml`, Gradescope's `results.json` and the `fingerprints.json` of their sources in
//! their own folder, `<out>/students/<id>/` ([`entries`] says how ids are made); the cohort
//! gets `summary.md` (and `charts/`), `grades.csv`, `integrity.csv` and a combined
//! `junit.xml`, each written atomically. The run holds a [`lock`] on `<out>`. `merge`
//! combines shards; `progress` reports.

mod deferred;
pub mod entries;
pub mod gpus;
mod jobs;
pub mod lock;
pub mod progress;
pub mod shard;
mod student;
mod unread;

pub use unread::{Unread, unreadable};

use crate::errors::{CliError, Fatal};
use crate::exit;
use crate::integrity::{self, Fingerprints};
use crate::pipeline::{self, Reference};
use crate::report::output::{Format, print_result};
use crate::report::outputs::Outputs;
use crate::result::GradeResult;
use crate::rubric::{self, LoadedRubric};
use crate::setup::{Requested, resolve};
use entries::Entry;
use jobs::{Jobs, grade_all};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use student::EntryContext;

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

/// The folder of `<out>` that holds one folder per student: no student's folder can take the
/// name of a class report (`summary.md`, `junit.xml`, `charts`...), whatever the entry is called.
pub const STUDENTS: &str = "students";

/// sha256 of the rubric's text and its reference kernel: what `--resume` compares, so that a
/// result graded against another rubric (or another reference) is graded again.
pub fn rubric_sha256(rubric: &LoadedRubric) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"rubric\0");
    h.update(rubric.source().as_bytes());
    h.update(b"\0reference\0");
    h.update(std::fs::read(&rubric.reference_path).unwrap_or_default());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// How a student's result came about, for the run's closing line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Graded,
    Reused,
    /// `--resume` found a result for this submission, graded under another rubric, reference,
    /// cugrade version or backend.
    Regraded,
}

/// Say so when `out` holds student folders of the layout before `students/` (`<out>/<name>/`):
/// they are not read, and `--resume` grades those students again.
fn note_old_layout(out: &Path) {
    let old = std::fs::read_dir(out)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name() != STUDENTS && e.path().join("result.json").is_file())
        .count();
    if old > 0 {
        eprintln!(
            "note: {} holds {old} student folders of an older layout (<out>/<student>/); students \
             are now in {}/{STUDENTS}/<id>/, and those folders are left as they are",
            out.display(),
            out.display()
        );
    }
}

/// What `cugrade grade` was asked.
struct Asked<'a> {
    rubric_path: &'a Path,
    cohort: &'a Path,
    out: &'a Path,
    req: &'a Requested,
    opts: &'a CohortOptions,
}

/// Grade every submission of `cohort` into `out` against the rubric; the exit code.
pub fn run(
    rubric_path: &Path,
    cohort: &Path,
    out: &Path,
    req: &Requested,
    opts: &CohortOptions,
) -> Result<i32, CliError> {
    entries::refuse_out_inside(cohort, out).map_err(CliError::Usage)?;
    let rubric = rubric::load(rubric_path)?;
    let listed = list_entries(cohort, opts.shard)?;
    let _lock = lock::lock(out, "grade")?;
    let asked = Asked {
        rubric_path,
        cohort,
        out,
        req,
        opts,
    };
    let mut prep = set_up(&asked, &rubric, &listed)?;
    let jobs = Jobs {
        queue: Mutex::new(listed.entries.iter()),
        pool: deferred::Pool::new(
            (0..opts.jobs).map(|job| prep.slots.get(job).map(|(slot, _)| slot.lock.clone())),
        ),
        results: Mutex::new(Vec::new()),
        fatal: Mutex::new(None),
        base: &prep.base,
        progress: &prep.progress,
        ctx: EntryContext {
            rubric: &rubric,
            rubric_hash: &prep.rubric_hash,
            unpack: prep.unpack_dir.path(),
            students: &prep.students,
            resume: opts.resume,
            common: &prep.common,
        },
    };
    grade_all(&jobs, &prep.slots, &prep.reference, opts.jobs);
    prep.progress.finish();
    let fatal = jobs.fatal.into_inner().unwrap_or_else(|p| p.into_inner());
    let graded = jobs.results.into_inner().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = fatal {
        return Err(stopped(&e, &graded, out));
    }
    finish(&asked, graded, prep.record.as_mut())
}

/// This run's entries of the cohort, with what a shard's record says of the whole cohort.
struct Listed {
    /// This shard's (every entry without `--shard`).
    entries: Vec<Entry>,
    /// [`shard::cohort_sha256`] of every entry's id.
    cohort_sha256: String,
    /// How many entries the whole cohort has.
    cohort_entries: usize,
}

/// The cohort's entries (an empty cohort is a usage error), then those of this shard.
fn list_entries(cohort: &Path, shard: Option<(usize, usize)>) -> Result<Listed, CliError> {
    // Ids come from the whole cohort before sharding: a student has the same id in every
    // shard and in an unsharded run.
    let mut entries = entries::list(cohort).map_err(CliError::Usage)?;
    if entries.is_empty() {
        return Err(CliError::Usage(format!(
            "no submissions in `{}`: a cohort holds one entry per student (a folder, a .cu, \
             .ptx or .py file, or a .zip/.tar.gz archive); is this the right folder?",
            cohort.display()
        )));
    }
    let cohort_ids = (
        shard::cohort_sha256(entries.iter().map(|e| e.id.as_str())),
        entries.len(),
    );
    if let Some((k, n)) = shard {
        entries = entries
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % n == k - 1)
            .map(|(_, e)| e)
            .collect();
    }
    Ok(Listed {
        entries,
        cohort_sha256: cohort_ids.0,
        cohort_entries: cohort_ids.1,
    })
}

/// What a run sets up under its lock on `<out>` before its jobs start (fields in the order
/// they are dropped: the reverse of the order they are made).
struct Prepared {
    /// The shard's record (`--shard`).
    record: Option<shard::ShardRecord>,
    reference: Reference,
    /// The GPU of each job, with its compile target (empty on the emulator).
    slots: Vec<(gpus::Slot, String)>,
    /// The options every job starts from.
    base: pipeline::Options,
    unpack_dir: tempfile::TempDir,
    progress: progress::Progress,
    rubric_hash: String,
    common: HashSet<u64>,
    /// `<out>/students`.
    students: PathBuf,
}

/// Set the run up: the students' folder, what every student was given, the jobs' GPUs and
/// options, the reference compiled once, and the shard's record (or none).
fn set_up(asked: &Asked<'_>, rubric: &LoadedRubric, listed: &Listed) -> Result<Prepared, CliError> {
    let (out, opts) = (asked.out, asked.opts);
    note_old_layout(out);
    let students = out.join(STUDENTS);
    std::fs::create_dir_all(&students)
        .map_err(|e| Fatal::new(format!("cannot create {}: {e}", students.display())))?;
    let common = common_hashes(rubric, &opts.starter)?;
    let rubric_hash = rubric_sha256(rubric);
    let progress = progress::Progress::new(listed.entries.len(), progress::wants_bar());
    // In the run's temp folder, which an interrupt or the next run removes.
    let unpack_dir = crate::sandbox::scratch::tempdir("unpack-")
        .map_err(|e| Fatal::new(format!("temp dir: {e}")))?;
    let (mut base, slots) = plan_jobs(asked.req, rubric, opts.jobs)?;
    base.protected = crate::setup::protected_dirs(&[asked.rubric_path, asked.cohort, out]);
    // CPU baselines measured for this cohort live beside its outputs: every student, shard and
    // `--resume` of the cohort is compared with the same value (unless the rubric pins one).
    base.baseline_cache = Some(out.join("cpu-baselines.json"));
    let reference = Reference::compile(rubric, &base).map_err(|e| Fatal::new(e.0.to_string()))?;
    // What `merge` checks: which shard of which run this folder holds, and whether it finished.
    let record = opts.shard.map(|(k, n)| shard::ShardRecord {
        shard: k,
        of: n,
        seed: base.seed,
        assignment: rubric.rubric.assignment.clone(),
        rubric_sha256: rubric_hash.clone(),
        backend: base.backend.as_str().to_string(),
        cohort_sha256: listed.cohort_sha256.clone(),
        cohort_entries: listed.cohort_entries,
        students: listed.entries.iter().map(|e| e.id.clone()).collect(),
        complete: false,
        cugrade_version: env!("CARGO_PKG_VERSION").to_string(),
    });
    match &record {
        Some(r) => shard::write(out, r)?,
        None => shard::remove_stale(out),
    }
    Ok(Prepared {
        record,
        reference,
        slots,
        base,
        unpack_dir,
        progress,
        rubric_hash,
        common,
        students,
    })
}

/// The options every job starts from and the GPU of each job ([`plan_gpus`]), with the
/// timed sections' batches set for each GPU's jobs.
fn plan_jobs(
    req: &Requested,
    rubric: &LoadedRubric,
    jobs: usize,
) -> Result<(pipeline::Options, Vec<(gpus::Slot, String)>), CliError> {
    let devices = if req.gpus.is_empty() {
        vec![0]
    } else {
        req.gpus.clone()
    };
    check_ordinals(req)?;
    let function_lab = crate::commands::init::is_function_lab(rubric);
    let mut base = resolve(req, devices[0], !function_lab)?;
    crate::setup::ranks(&mut base, rubric, req)?;
    if !base.ranks.is_empty() {
        // A multi-GPU lab: every job grades on the one rank set (its correctness runs share
        // the GPUs; its timed sections take every rank's lock in one global order).
        return Ok((base, Vec::new()));
    }
    // The GPU of each job: every student a job takes is graded and timed on it.
    let slots = plan_gpus(req, &base, rubric, &devices, jobs)?;
    // Timed sections gather in batches of half a GPU's jobs (`measure::lock`).
    let mut per_gpu = std::collections::BTreeMap::<&str, usize>::new();
    for (slot, _) in &slots {
        *per_gpu.entry(slot.lock.as_str()).or_default() += 1;
    }
    for (key, jobs) in per_gpu {
        crate::measure::lock::set_jobs(key, jobs);
    }
    Ok((base, slots))
}

/// A student written: their result, their fingerprints, and how the result came about.
type Written = (GradeResult, Fingerprints, Outcome);

/// The error of a run stopped by `e`, after writing the class reports of the students graded
/// before it.
fn stopped(e: &str, graded: &[Written], out: &Path) -> CliError {
    // The machine's fault (a trusted probe confirmed it): what was graded is kept, and the
    // class reports say so, so that `--resume` takes it from there.
    let graded_so_far: Vec<GradeResult> = graded.iter().map(|g| g.0.clone()).collect();
    let kept = match Outputs::write_cohort(&graded_so_far, &[], out) {
        Ok(()) => format!(
            "the {} submissions graded before it stopped are in {} (grades.csv, \
             summary.md); after the fix, run the same command with --resume to grade the \
             rest",
            graded_so_far.len(),
            out.display()
        ),
        Err(w) => format!("the class reports could not be written either: {w}"),
    };
    CliError::Fatal(Fatal::new(format!("grading stopped: {e}\n{kept}")))
}

/// The end of a run that graded every student: the class reports, the shard's record marked
/// complete, the results printed, the closing line; exit 0 when every student passed.
fn finish(
    asked: &Asked<'_>,
    mut graded: Vec<Written>,
    record: Option<&mut shard::ShardRecord>,
) -> Result<i32, CliError> {
    let (out, opts) = (asked.out, asked.opts);
    graded.sort_by(|a, b| (&a.0.student, a.0.key()).cmp(&(&b.0.student, b.0.key())));
    let count = |o: Outcome| graded.iter().filter(|g| g.2 == o).count();
    let (reused, regraded) = (count(Outcome::Reused), count(Outcome::Regraded));
    let prints: Vec<(String, Fingerprints)> = graded
        .iter()
        .map(|(r, f, _)| (r.key().to_string(), f.clone()))
        .collect();
    let pairs = integrity::pairs(&prints);
    let results: Vec<GradeResult> = graded.into_iter().map(|(r, _, _)| r).collect();
    Outputs::write_cohort(&results, &pairs, out)?;
    if let Some(r) = record {
        r.complete = true;
        shard::write(out, r)?;
    }
    print_results(&results, opts.format, asked.cohort);
    let resumed = if opts.resume {
        format!(
            " ({reused} reused from the previous run, {} graded{})",
            results.len() - reused,
            if regraded > 0 {
                format!(
                    ", {regraded} of them again because the rubric, its reference, cugrade or \
                     the backend changed"
                )
            } else {
                String::new()
            }
        )
    } else {
        String::new()
    };
    let summary = format!(
        "graded {} submissions into {}{resumed}",
        results.len(),
        out.display()
    );
    if opts.format == Format::Json {
        eprintln!("{summary}");
    } else {
        println!("{summary}");
    }
    Ok(if results.iter().all(GradeResult::all_passed) {
        exit::OK
    } else {
        exit::FAILED
    })
}

/// Every student's result on stdout, in `format` (nothing for people's format: their
/// reports are in the output folder).
fn print_results(results: &[GradeResult], format: Format, cohort: &Path) {
    match format {
        Format::Human => {}
        // JSON Lines on stdout, one result.json per line; everything for people goes to stderr.
        Format::Json => {
            for r in results {
                println!("{}", crate::report::output::json_line(r));
            }
        }
        Format::Github => {
            for r in results {
                // A folder entry's files are under cohort/<entry>; a single-file entry's
                // location is its own file name, in the cohort folder.
                let folder = cohort.join(&r.entry);
                let dir = if folder.is_dir() {
                    folder
                } else {
                    cohort.to_path_buf()
                };
                print_result(r, format, Some(&dir));
            }
        }
    }
}

/// `--gpus` names GPUs this machine has: an ordinal past the last GPU is a usage error (exit
/// 2), never a silent fall back to the emulator.
fn check_ordinals(req: &Requested) -> Result<(), CliError> {
    if req.gpus.is_empty() || req.backend == crate::setup::BackendChoice::Emu {
        return Ok(());
    }
    if let Ok(n) = crate::backend::cuda::device_count()
        && n > 0
        && let Some(bad) = req.gpus.iter().find(|&&i| i >= n)
    {
        return Err(CliError::Usage(format!(
            "--gpus lists GPU {bad}, but this machine has {n} GPU{} (ordinals 0 to {}); \
             `cugrade doctor` lists them",
            if n == 1 { "" } else { "s" },
            n - 1
        )));
    }
    Ok(())
}

/// The GPU of each job (`gpus::assign`) with its compile target, after checking that the
/// GPUs may time one cohort together (`gpus::check_models`: exit 2 when not). Empty on the
/// emulator, which uses no GPU (a `--gpus` given then is noted and ignored).
fn plan_gpus(
    req: &Requested,
    base: &pipeline::Options,
    rubric: &LoadedRubric,
    devices: &[usize],
    jobs: usize,
) -> Result<Vec<(gpus::Slot, String)>, CliError> {
    if !base.backend.caps().device {
        if !req.gpus.is_empty() {
            eprintln!(
                "note: --gpus {} is not used: grading on the {} ({}), so no GPU runs anything \
                 and speed is not measured; {jobs} job{} correctness on the CPU cores",
                devices
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                base.device_name,
                if req.backend == crate::setup::BackendChoice::Emu {
                    "--backend emu"
                } else {
                    "no usable GPU was found"
                },
                if jobs == 1 { " grades" } else { "s grade" },
            );
        }
        return Ok(Vec::new());
    }
    if let Some(note) = gpus::idle_note(&req.gpus, jobs) {
        eprintln!("{note}");
    }
    let mut known: Vec<(crate::backend::GpuRecord, String)> = Vec::new();
    for &d in devices {
        if known.iter().any(|(g, _)| g.index == d) {
            continue;
        }
        let found = crate::backend::cuda::identify(d)
            .and_then(|g| crate::backend::cuda::device_arch(d).map(|(_, arch)| (g, arch)));
        match found {
            Ok(x) => known.push(x),
            Err(e) => return Err(CliError::Fatal(Fatal::new(format!("GPU {d}: {e}")))),
        }
    }
    let listed: Vec<crate::backend::GpuRecord> = devices
        .iter()
        .filter_map(|d| known.iter().find(|(g, _)| g.index == *d))
        .map(|(g, _)| g.clone())
        .collect();
    let distinct: Vec<crate::backend::GpuRecord> = known.iter().map(|(g, _)| g.clone()).collect();
    gpus::check_models(&distinct, &gpus::absolute_checks(&rubric.rubric.milestones))
        .map_err(CliError::Usage)?;
    Ok(gpus::assign(&listed, jobs)
        .into_iter()
        .map(|s| {
            let arch = known
                .iter()
                .find(|(g, _)| g.index == s.gpu.index)
                .map(|(_, a)| a.clone())
                .unwrap_or_else(|| base.arch.clone());
            (s, arch)
        })
        .collect())
}

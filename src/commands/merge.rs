//! `cugrade merge --out DIR SHARD_DIR...`: the outputs of `cugrade grade --shard K/N` runs
//! combined into one tree that equals an unsharded run of the same cohort with the same seed:
//! each student's folder (`students/<id>/`) is copied as it is, and the class files (summary,
//! charts, grades.csv, integrity.csv, junit.xml) are computed again over everyone, the
//! integrity pairs from the fingerprints each shard saved.
//!
//! Each shard's record (`shard.json`, [`crate::commands::grade::shard`]) says which shard of
//! which run it is: the merge is refused (exit 2, naming the shards) unless every shard of
//! 1..=N is given once, all of one run (N, seed, rubric, backend, cohort), each finished; and
//! only the students a shard's record lists are taken from it.

use crate::commands::grade::shard::{self, ShardRecord};
use crate::errors::{CliError, Fatal};
use crate::exit;
use crate::integrity::Fingerprints;
use crate::report::outputs::Outputs;
use crate::result::GradeResult;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A graded student found in a shard.
struct Found {
    folder: String,
    from: PathBuf,
    result: GradeResult,
    /// The shard's result.json held student text over today's caps (a shard of an older
    /// cugrade): the copy's reports are written again from the capped result.
    recapped: bool,
}

/// The students a shard's record lists, each from `students/<id>/result.json`; folders the
/// record does not list (left from another run into the same folder) are said and left out.
fn students_in(shard: &Path, record: &ShardRecord) -> Result<Vec<Found>, CliError> {
    let dir = shard.join(crate::commands::grade::STUDENTS);
    let mut out = Vec::new();
    for id in &record.students {
        let path = dir.join(id);
        let json = path.join("result.json");
        // Never through a link: grade writes none, and one could point anywhere.
        let is_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
        if !is_dir || !json.is_file() {
            return Err(CliError::Usage(format!(
                "shard {}/{} in `{}` lists the student `{id}`, but `{}` is missing: grade the \
                 shard again with --resume",
                record.shard,
                record.of,
                shard.display(),
                json.display()
            )));
        }
        let mut result = crate::report::json::read(&json).map_err(|e| {
            CliError::Usage(format!(
                "`{}` is not a cugrade result.json: {e}",
                json.display()
            ))
        })?;
        let before = result.clone();
        crate::report::caps::cap_student_text(&mut result);
        out.push(Found {
            folder: id.clone(),
            from: path,
            recapped: result != before,
            result,
        });
    }
    let unlisted = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            !record
                .students
                .iter()
                .any(|id| e.file_name() == id.as_str())
        })
        .count();
    if unlisted > 0 {
        eprintln!(
            "note: `{}` holds {unlisted} student folder{} that shard {}/{} does not grade (from \
             another run into the same folder); left out",
            dir.display(),
            if unlisted == 1 { "" } else { "s" },
            record.shard,
            record.of
        );
    }
    Ok(out)
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let kind = e.file_type()?;
        let target = to.join(e.file_name());
        if kind.is_dir() {
            copy_dir(&e.path(), &target)?;
        } else if kind.is_file() {
            crate::report::atomic::write(&target, std::fs::read(e.path())?)?;
        }
        // Links are not followed: grade never writes any, and one could point anywhere.
    }
    Ok(())
}

/// Read a student's saved fingerprints; a missing or unreadable file means "nothing to compare"
/// (a submission that could not be read has none).
pub fn read_fingerprints(folder: &Path) -> Fingerprints {
    std::fs::read_to_string(folder.join("fingerprints.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// The CPU baselines a `grade` run measured (`cpu-baselines.json` beside its outputs): the
/// first shard's is kept, so that a `grade --resume` into the merged tree compares with the
/// same values. Shards that measured different ones are said to have.
fn carry_baselines(out: &Path, shards: &[PathBuf]) {
    const FILE: &str = "cpu-baselines.json";
    let found: Vec<(PathBuf, Vec<u8>)> = shards
        .iter()
        .filter_map(|s| std::fs::read(s.join(FILE)).ok().map(|b| (s.join(FILE), b)))
        .collect();
    let Some((first, bytes)) = found.first() else {
        return;
    };
    if found.iter().any(|(_, b)| b != bytes) {
        eprintln!(
            "warning: the shards measured their own CPU baselines; keeping {} (pin one for the \
             course with `cugrade calibrate` so every shard compares with the same value)",
            first.display()
        );
    }
    if let Err(e) = crate::report::atomic::write(&out.join(FILE), bytes) {
        eprintln!("warning: cannot write {}: {e}", out.join(FILE).display());
    }
}

pub fn run(out: &Path, shards: &[PathBuf]) -> Result<i32, CliError> {
    if shards.is_empty() {
        return Err(CliError::Usage(
            "merge needs at least one shard output directory: cugrade merge --out DIR SHARD_DIR..."
                .into(),
        ));
    }
    let out_abs = std::fs::canonicalize(out).ok();
    let mut records: Vec<(PathBuf, ShardRecord)> = Vec::new();
    for dir in shards {
        if out_abs.is_some() && std::fs::canonicalize(dir).ok() == out_abs {
            return Err(CliError::Usage(format!(
                "--out `{}` is also a shard: merge into a new directory",
                out.display()
            )));
        }
        records.push((dir.clone(), shard::read(dir).map_err(CliError::Usage)?));
    }
    shard::check_set(&records).map_err(CliError::Usage)?;
    let mut by_folder: BTreeMap<String, Found> = BTreeMap::new();
    for (dir, record) in &records {
        for f in students_in(dir, record)? {
            if let Some(prev) = by_folder.get(&f.folder) {
                // Shards of one run split the cohort's ids: only a forged record repeats one.
                return Err(CliError::Usage(format!(
                    "student folder `{}` is in both `{}` and `{}`: were these shards of one run \
                     (same cohort, same --shard N)?",
                    f.folder,
                    prev.from.display(),
                    f.from.display()
                )));
            }
            by_folder.insert(f.folder.clone(), f);
        }
    }
    let mut seeds: Vec<u64> = by_folder.values().map(|f| f.result.seed).collect();
    seeds.sort_unstable();
    seeds.dedup();
    if seeds.len() > 1 {
        eprintln!(
            "warning: the shards were graded with different seeds ({}): pass one --seed to \
             every shard for results equal to an unsharded run",
            seeds
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let _lock = crate::commands::grade::lock::lock(out, "merge")?;
    let students = out.join(crate::commands::grade::STUDENTS);
    std::fs::create_dir_all(&students)
        .map_err(|e| Fatal::new(format!("cannot create {}: {e}", students.display())))?;
    let mut results = Vec::new();
    let mut prints = Vec::new();
    for (folder, mut f) in by_folder {
        let to = students.join(&folder);
        copy_dir(&f.from, &to).map_err(|e| {
            Fatal::new(format!(
                "cannot copy {} into {}: {e}",
                f.from.display(),
                out.display()
            ))
        })?;
        if f.recapped {
            Outputs::folder(&to)
                .write(&mut f.result, false)
                .map_err(Fatal::new)?;
        }
        prints.push((f.result.key().to_string(), read_fingerprints(&f.from)));
        results.push(f.result);
    }
    carry_baselines(out, shards);
    let pairs = crate::integrity::pairs(&prints);
    Outputs::write_cohort(&results, &pairs, out)?;
    println!(
        "merged {} students from {} shard outputs into {}",
        results.len(),
        shards.len(),
        out.display()
    );
    Ok(if results.iter().all(GradeResult::all_passed) {
        exit::OK
    } else {
        exit::FAILED
    })
}

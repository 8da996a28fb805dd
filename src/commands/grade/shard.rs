//! What a `grade --shard K/N` run records in its output folder (`shard.json`), and the checks
//! `merge` makes on a set of them: every shard of 1..=N present once, all of one run (the same
//! N, seed, rubric, backend and cohort), and each one finished. Without it, `merge` of 2 of 3
//! shards wrote a gradebook that silently lacked a third of the class (issue 32).
//!
//! The record lists the ids the shard grades: `merge` takes exactly those folders of the
//! shard's `students/`, so that a folder reused for another shard (`--resume` into it) never
//! puts a student in the merge twice. An unsharded run writes no record (and removes a stale
//! one), so that its tree still equals the merge of its shards.

use crate::errors::{CliError, Fatal};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The record's file name in a shard's `--out`.
pub const FILE: &str = "shard.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardRecord {
    /// K of `--shard K/N` (1-based).
    pub shard: usize,
    /// N of `--shard K/N`.
    pub of: usize,
    pub seed: u64,
    pub assignment: String,
    /// The rubric's and its reference's hash (`result.json`'s `rubric_sha256`).
    pub rubric_sha256: String,
    pub backend: String,
    /// sha256 of the ids of every cohort entry, before sharding: shards of one cohort agree.
    pub cohort_sha256: String,
    /// Entries of the whole cohort.
    pub cohort_entries: usize,
    /// The ids this shard grades: its `students/<id>/` folders.
    pub students: Vec<String>,
    /// Whether the run finished (a killed or stopped run leaves `false`).
    pub complete: bool,
    pub cugrade_version: String,
}

/// sha256 over the cohort's ids, in order.
pub fn cohort_sha256<'a>(ids: impl Iterator<Item = &'a str>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for id in ids {
        h.update(id.as_bytes());
        h.update([0]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Write the record into `out` (atomically).
pub fn write(out: &Path, record: &ShardRecord) -> Result<(), CliError> {
    let path = out.join(FILE);
    let text = serde_json::to_string_pretty(record).map_err(|e| Fatal::new(e.to_string()))? + "\n";
    crate::report::atomic::write(&path, text)
        .map_err(|e| CliError::Fatal(Fatal::new(format!("cannot write {}: {e}", path.display()))))
}

/// An unsharded run into a folder that held a shard: the record no longer describes it.
pub fn remove_stale(out: &Path) {
    let _ = std::fs::remove_file(out.join(FILE));
}

/// The record of a shard output folder; `Err` says what to do when it has none or a bad one.
pub fn read(dir: &Path) -> Result<ShardRecord, String> {
    let path = dir.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !dir.is_dir() {
                return Err(format!(
                    "cannot read shard output `{}`: it is not a directory",
                    dir.display()
                ));
            }
            return Err(format!(
                "`{}` has no {FILE}: it is not the output of `cugrade grade --shard K/N` (or of a \
                 cugrade older than the shard record); grade that shard again into it with \
                 `--shard K/N --resume` (graded students are reused)",
                dir.display()
            ));
        }
        Err(e) => return Err(format!("cannot read `{}`: {e}", path.display())),
    };
    // A record is small; a huge file is not one of cugrade's.
    if text.len() > 64 << 20 {
        return Err(format!(
            "`{}` is not a cugrade shard record",
            path.display()
        ));
    }
    serde_json::from_str(&text)
        .map_err(|e| format!("`{}` is not a cugrade shard record: {e}", path.display()))
}

/// One value of a record, as a message shows it.
type Shown = dyn Fn(&ShardRecord) -> String;

/// `K/N` for messages.
fn kn(r: &ShardRecord) -> String {
    format!("{}/{}", r.shard, r.of)
}

/// The shards form one complete run: the same N, seed, rubric, backend and cohort; every K of
/// 1..=N exactly once; each finished. The message names the shards at fault and what to do.
pub fn check_set(shards: &[(PathBuf, ShardRecord)]) -> Result<(), String> {
    let Some((first_dir, first)) = shards.first() else {
        return Ok(());
    };
    let differ = |what: &str, show: &Shown| -> Option<String> {
        let other = shards.iter().find(|(_, r)| show(r) != show(first))?;
        Some(format!(
            "the shards are not of one run: `{}` (shard {}) has {what} {}, `{}` (shard {}) has \
             {}; merge the shards of one `--shard K/N` split, graded with one --seed and one \
             rubric",
            first_dir.display(),
            kn(first),
            show(first),
            other.0.display(),
            kn(&other.1),
            show(&other.1)
        ))
    };
    let checks: [(&str, &Shown); 6] = [
        ("N =", &|r| r.of.to_string()),
        ("seed", &|r| r.seed.to_string()),
        ("assignment", &|r| format!("`{}`", r.assignment)),
        ("rubric (sha256)", &|r| {
            r.rubric_sha256.chars().take(12).collect()
        }),
        ("backend", &|r| r.backend.clone()),
        ("cohort (sha256 of its entries)", &|r| {
            format!(
                "{} ({} entries)",
                r.cohort_sha256.chars().take(12).collect::<String>(),
                r.cohort_entries
            )
        }),
    ];
    for (what, show) in checks {
        if let Some(msg) = differ(what, show) {
            return Err(msg);
        }
    }
    let n = first.of;
    for k in 1..=n {
        let with: Vec<&PathBuf> = shards
            .iter()
            .filter(|(_, r)| r.shard == k)
            .map(|(d, _)| d)
            .collect();
        if with.len() > 1 {
            return Err(format!(
                "shard {k}/{n} is given more than once: {}; pass each shard's output once",
                with.iter()
                    .map(|d| format!("`{}`", d.display()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    let missing: Vec<String> = (1..=n)
        .filter(|k| !shards.iter().any(|(_, r)| r.shard == *k))
        .map(|k| format!("{k}/{n}"))
        .collect();
    if !missing.is_empty() {
        let have: Vec<String> = shards.iter().map(|(_, r)| kn(r)).collect();
        let one = missing.len() == 1;
        return Err(format!(
            "shard{} {} {} missing (given: {}): {} students would be absent from the merge; \
             pass every shard's output, or grade {} first ({})",
            if one { "" } else { "s" },
            missing.join(", "),
            if one { "is" } else { "are" },
            have.join(", "),
            if one { "its" } else { "their" },
            if one { "it" } else { "them" },
            missing
                .iter()
                .map(|m| format!("`cugrade grade --shard {m} --seed {} ...`", first.seed))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some((dir, r)) = shards.iter().find(|(_, r)| !r.complete) {
        return Err(format!(
            "shard {} in `{}` did not finish grading: run the same `cugrade grade --shard {} \
             ...` with --resume into it, then merge",
            kn(r),
            dir.display(),
            kn(r)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(k: usize, n: usize) -> (PathBuf, ShardRecord) {
        (
            PathBuf::from(format!("shards/{k}")),
            ShardRecord {
                shard: k,
                of: n,
                seed: 7,
                assignment: "reduction".into(),
                rubric_sha256: "ab".repeat(32),
                backend: "emu".into(),
                cohort_sha256: "cd".repeat(32),
                cohort_entries: 10,
                students: vec![format!("s{k}")],
                complete: true,
                cugrade_version: "0".into(),
            },
        )
    }

    #[test]
    fn a_complete_set_passes_and_each_flaw_is_named() {
        assert_eq!(check_set(&[rec(1, 3), rec(2, 3), rec(3, 3)]), Ok(()));
        let e = check_set(&[rec(1, 3), rec(3, 3)]).unwrap_err();
        assert!(
            e.starts_with("shard 2/3 is missing (given: 1/3, 3/3)"),
            "{e}"
        );
        let e = check_set(&[rec(1, 3), rec(1, 3), rec(2, 3), rec(3, 3)]).unwrap_err();
        assert!(e.starts_with("shard 1/3 is given more than once"), "{e}");
        let e = check_set(&[rec(1, 2), rec(2, 3), rec(3, 3)]).unwrap_err();
        assert!(e.contains("has N = 2") && e.contains("has 3"), "{e}");
        let mut other = rec(2, 2);
        other.1.seed = 8;
        let e = check_set(&[rec(1, 2), other]).unwrap_err();
        assert!(e.contains("seed 7") && e.contains("has 8"), "{e}");
        let mut other = rec(2, 2);
        other.1.rubric_sha256 = "ef".repeat(32);
        let e = check_set(&[rec(1, 2), other]).unwrap_err();
        assert!(e.contains("rubric (sha256)"), "{e}");
        let mut other = rec(2, 2);
        other.1.complete = false;
        let e = check_set(&[rec(1, 2), other]).unwrap_err();
        assert!(e.contains("shard 2/2 in `shards/2` did not finish"), "{e}");
    }
}

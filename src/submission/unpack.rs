//! The parent's side of an archive: read it (never through a link, never past
//! [`MAX_ARCHIVE_BYTES`]), have a sandboxed worker extract it (`archive::extract` runs there),
//! and check and write what the worker kept as if the worker were hostile.

use super::archive::{
    ArchiveKind, Kept, MAX_ARCHIVE_BYTES, WORKER_DATA_BYTES, WORKER_SECONDS, clean_path, hidden,
    wanted,
};
use super::{MAX_FILE_BYTES, MAX_FILES, MAX_TOTAL_BYTES};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Unpack `archive` into a new folder `dest` (parent side): read it, have a sandboxed worker
/// extract it, check and write what it kept. Returns the submission's folder: `dest`, or the
/// archive's single top-level folder. `protected` are the folders no worker may see.
pub fn unpack(archive: &Path, dest: &Path, protected: &[PathBuf]) -> Result<PathBuf, String> {
    let name = archive
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let kind = ArchiveKind::of(&name).ok_or_else(|| format!("{name} is not an archive"))?;
    let bytes = read_archive(archive, &name)?;
    let files = extract_in_worker(kind, &name, bytes, protected).map_err(|e| {
        if e.starts_with(super::archive::NOTHING_TO_GRADE) {
            format!("{name} {e}")
        } else {
            format!("{name} cannot be unpacked: {e}")
        }
    })?;
    write_files(&files, dest).map_err(|e| format!("{name}: {e}"))?;
    // An archive holding a single top-level folder is that folder.
    let entries: Vec<_> = std::fs::read_dir(dest)
        .map_err(|e| e.to_string())?
        .flatten()
        .collect();
    if entries.len() == 1 && entries[0].file_type().is_ok_and(|t| t.is_dir()) {
        return Ok(entries[0].path());
    }
    Ok(dest.to_path_buf())
}

/// The archive's bytes, refused past [`MAX_ARCHIVE_BYTES`]; never through a link.
fn read_archive(archive: &Path, name: &str) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(archive)
        .map_err(|e| format!("cannot open {name}: {e}"))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(format!("{name} is not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_ARCHIVE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {name}: {e}"))?;
    if bytes.len() as u64 > MAX_ARCHIVE_BYTES {
        return Err(format!(
            "{name} is over {MAX_ARCHIVE_BYTES} bytes; an archive may have at most that"
        ));
    }
    Ok(bytes)
}

fn extract_in_worker(
    kind: ArchiveKind,
    name: &str,
    bytes: Vec<u8>,
    protected: &[PathBuf],
) -> Result<Vec<Kept>, String> {
    use crate::worker::Role;
    let workers = crate::worker::pool::Workers::emulator(protected);
    let mut o = workers.options(Role::Unpack);
    o.data_limit_bytes = WORKER_DATA_BYTES;
    o.cpu_seconds = WORKER_SECONDS;
    o.max_request_bytes = MAX_ARCHIVE_BYTES as usize + 4096;
    // Every kept file, plus the JSON header naming them.
    o.max_response_bytes = MAX_TOTAL_BYTES as usize + (1 << 20);
    let mut w = workers
        .start(&o)
        .map_err(|e| format!("the unpacking worker did not start: {e}"))?;
    match w.unpack(kind, name, &bytes, Duration::from_secs(WORKER_SECONDS)) {
        Ok(kept) => kept,
        // A worker over its memory or time limit dies: the archive is what it choked on.
        Err(f) => Err(format!(
            "unpacking it went over the limits ({f}); {}",
            w.output().text().lines().last().unwrap_or("")
        )),
    }
}

/// Write what a worker kept into `dest`, after checking it as if the worker were hostile.
pub(super) fn write_files(files: &[Kept], dest: &Path) -> Result<(), String> {
    use std::io::Write;
    if files.len() > MAX_FILES {
        return Err(format!("more than {MAX_FILES} source files"));
    }
    let mut total = 0u64;
    std::fs::create_dir_all(dest).map_err(|e| e.to_string())?;
    for (raw, bytes) in files {
        let path = clean_path(raw)?;
        if path != *raw || hidden(&path) || !wanted(&path) {
            return Err(format!(
                "the unpacking worker named `{}`",
                crate::rubric::expr::excerpt(raw)
            ));
        }
        total += bytes.len() as u64;
        if bytes.len() as u64 > MAX_FILE_BYTES || total > MAX_TOTAL_BYTES {
            return Err(format!(
                "the sources unpack to more than {MAX_TOTAL_BYTES} bytes"
            ));
        }
        let target = dest.join(&path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("`{path}`: {e}"))?;
        }
        // New files only: a name twice in one archive is refused, not silently replaced.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&target)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => format!("`{path}` is in the archive twice"),
                _ => format!("`{path}`: {e}"),
            })?;
        f.write_all(bytes).map_err(|e| format!("`{path}`: {e}"))?;
    }
    Ok(())
}

/// An archive given to `check` (`cugrade check bob.zip`): unpacked as `grade` unpacks a
/// cohort's archive, into a temporary folder that lives as long as the returned guard, then
/// read as a folder. The student is the archive's name (`bob`), unless its manifest names one.
pub fn load_archive(
    archive: &Path,
    protected: &[PathBuf],
) -> Result<(super::Submission, tempfile::TempDir), super::SubmissionError> {
    use super::SubmissionError;
    let dir = tempfile::Builder::new()
        .prefix("cugrade-archive-")
        .tempdir()
        .map_err(|e| SubmissionError::Other(format!("cannot make a temporary folder: {e}")))?;
    let folder =
        unpack(archive, &dir.path().join("unpacked"), protected).map_err(SubmissionError::Other)?;
    let mut sub = super::load(&folder).map_err(|e| match e {
        SubmissionError::Other(m) => SubmissionError::Other(format!(
            "{}: {m}",
            archive.file_name().unwrap_or_default().to_string_lossy()
        )),
        manifest => manifest,
    })?;
    if sub.manifest.student.is_none() {
        let name = archive
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let lower = name.to_ascii_lowercase();
        let stem = [".tar.gz", ".tgz", ".zip"]
            .iter()
            .find(|x| lower.ends_with(*x))
            .map_or(name.as_str(), |x| &name[..name.len() - x.len()]);
        sub.student = stem.to_string();
    }
    Ok((sub, dir))
}

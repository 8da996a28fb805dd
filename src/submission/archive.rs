//! Archives a student hands in (`.zip`, `.tar.gz`, `.tgz`), unpacked by a sandboxed worker.
//!
//! The grader never parses an archive itself. It reads the archive's bytes (at most
//! [`MAX_ARCHIVE_BYTES`]) and hands them to a worker of role `Unpack`, confined like every
//! worker (namespaces, Landlock: no file outside its temp dir, seccomp, `RLIMIT_DATA` of
//! [`WORKER_DATA_BYTES`], a CPU limit and a wall-clock deadline). The worker walks the archive
//! with [`extract`], which bounds every header before reading it (a GNU long name or a PAX
//! header of 3 GiB is refused from its size field, unread: the `tar` crate would otherwise read
//! it whole into memory), every entry, the expanded total and the kept files, and answers with
//! the source files it kept. The grader checks that answer again ([`clean_path`], the same
//! limits) and writes the files itself, as new regular files in a fresh folder: no link,
//! device node or path out of the folder can come from an archive.

use super::{MAX_FILE_BYTES, MAX_FILES, MAX_TOTAL_BYTES};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::Path;

/// Largest archive file read.
pub const MAX_ARCHIVE_BYTES: u64 = 64 << 20;
/// Most entries (headers) walked in one archive, skipped ones included.
pub const MAX_ENTRIES: usize = 10_000;
/// Longest file name, from a GNU long-name header or a PAX `path`.
pub const MAX_NAME_BYTES: usize = 4096;
/// Largest PAX extended header (a few names and times in practice).
pub const MAX_PAX_BYTES: u64 = 64 << 10;
/// Most bytes decompressed from one archive, skipped entries included.
pub const MAX_EXPANDED_BYTES: u64 = 512 << 20;
/// The unpacking worker's `RLIMIT_DATA`.
pub const WORKER_DATA_BYTES: u64 = 1 << 30;
/// The unpacking worker's wall-clock deadline (its CPU limit is the same).
pub const WORKER_SECONDS: u64 = 60;

/// What kind of archive, from the name's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArchiveKind {
    Zip,
    TarGz,
}

impl ArchiveKind {
    /// `.zip`, `.tar.gz` or `.tgz` (any case), else `None`.
    pub fn of(name: &str) -> Option<ArchiveKind> {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".zip") {
            Some(ArchiveKind::Zip)
        } else if lower.ends_with(".tar.gz") || lower.ends_with(".tgz") {
            Some(ArchiveKind::TarGz)
        } else {
            None
        }
    }
}

/// A file kept from an archive: its path inside the archive (cleaned) and its bytes.
pub type Kept = (String, Vec<u8>);

/// Whether `path` (cleaned) is a file a submission is made of; the rest is skipped unread.
pub(super) fn wanted(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = Path::new(name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    matches!(
        ext.as_str(),
        "cu" | "ptx" | "h" | "cuh" | "hpp" | "inc" | "py"
    ) || name == "cugrade.yaml"
}

/// A path inside an archive as a relative `a/b/c` with no `..`, no absolute start, no empty or
/// hidden component (hidden files are never graded), bounded in length and depth.
pub fn clean_path(raw: &str) -> Result<String, String> {
    let shown = crate::rubric::expr::excerpt(raw);
    if raw.len() > MAX_NAME_BYTES {
        return Err(format!(
            "a file name of {} bytes (at most {MAX_NAME_BYTES})",
            raw.len()
        ));
    }
    if raw.contains('\0') {
        return Err(format!("`{shown}` has a NUL byte in its name"));
    }
    let unified = raw.replace('\\', "/");
    if unified.starts_with('/') {
        return Err(format!(
            "`{shown}` is an absolute path: it escapes the archive"
        ));
    }
    let parts: Vec<&str> = unified
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.contains(&"..") {
        return Err(format!("`{shown}` escapes the archive"));
    }
    if parts.is_empty() || parts.len() > 16 || parts.iter().any(|p| p.len() > 255) {
        return Err(format!("`{shown}` is not a usable file name"));
    }
    Ok(parts.join("/"))
}

pub(super) fn hidden(path: &str) -> bool {
    path.split('/').any(|p| p.starts_with('.'))
}

/// How the message for an archive without a file to grade starts (the worker says it; the
/// grader words it with the archive's name: `NAME holds no file ...`).
pub const NOTHING_TO_GRADE: &str = "holds no file cugrade grades";

/// Names of skipped files an archive without sources lists (the rest are counted).
const SKIPPED_SHOWN: usize = 6;

/// The running tally of what an archive holds, against the limits.
#[derive(Default)]
struct Tally {
    entries: usize,
    kept: Vec<Kept>,
    total: u64,
    /// Files skipped (not sources, or hidden): the first few names, and how many.
    skipped: Vec<String>,
    skipped_count: usize,
}

impl Tally {
    fn entry(&mut self) -> Result<(), String> {
        self.entries += 1;
        if self.entries > MAX_ENTRIES {
            return Err(format!("more than {MAX_ENTRIES} entries"));
        }
        Ok(())
    }

    /// Keep the file at `path` (declared `size` bytes) read from `data`, if it is wanted.
    fn file(&mut self, path: &str, size: u64, data: &mut dyn Read) -> Result<(), String> {
        if hidden(path) || !wanted(path) {
            self.skipped_count += 1;
            if self.skipped.len() < SKIPPED_SHOWN {
                self.skipped.push(crate::rubric::expr::excerpt(path));
            }
            return Ok(());
        }
        if self.kept.len() >= MAX_FILES {
            return Err(format!("more than {MAX_FILES} source files"));
        }
        if size > MAX_FILE_BYTES {
            return Err(format!(
                "`{path}` is {size} bytes; a submission file may have at most {MAX_FILE_BYTES}"
            ));
        }
        let mut bytes = Vec::new();
        data.take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("`{path}`: {e}"))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(format!(
                "`{path}` unpacks to more than {MAX_FILE_BYTES} bytes"
            ));
        }
        self.total += bytes.len() as u64;
        if self.total > MAX_TOTAL_BYTES {
            return Err(format!(
                "the sources unpack to more than {MAX_TOTAL_BYTES} bytes"
            ));
        }
        self.kept.push((path.to_string(), bytes));
        Ok(())
    }
}

/// A reader that fails once more than `left` bytes were read through it: the whole
/// decompressed stream, skipped entries included, is bounded.
struct Capped<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Err(std::io::Error::other(format!(
                "it expands to more than {MAX_EXPANDED_BYTES} bytes"
            )));
        }
        let want = buf.len().min(self.left.min(usize::MAX as u64) as usize);
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

/// The source files of an archive (worker side). `Err` says what is wrong with it, in words
/// for the student.
pub fn extract(kind: ArchiveKind, bytes: &[u8]) -> Result<Vec<Kept>, String> {
    let mut tally = Tally::default();
    match kind {
        ArchiveKind::Zip => zip_files(bytes, &mut tally)?,
        ArchiveKind::TarGz => tar_files(bytes, &mut tally)?,
    }
    if !tally.kept.iter().any(|(p, _)| is_source(p)) {
        return Err(tally.nothing_to_grade());
    }
    Ok(tally.kept)
}

/// A `.cu`, `.ptx` or `.py` file: what a submission needs at least one of.
fn is_source(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    [".cu", ".ptx", ".py"].iter().any(|e| lower.ends_with(e))
}

impl Tally {
    /// "holds no file cugrade grades: it holds `report.pdf` and `notes.txt`; ...": what the
    /// archive held, and what cugrade looks for.
    fn nothing_to_grade(&self) -> String {
        let held = if self.skipped_count == 0 && self.kept.is_empty() {
            "it is empty (folders only, or no entries at all)".to_string()
        } else {
            let mut names: Vec<String> = self
                .kept
                .iter()
                .map(|(p, _)| crate::rubric::expr::excerpt(p))
                .chain(self.skipped.iter().cloned())
                .take(SKIPPED_SHOWN)
                .map(|n| format!("`{n}`"))
                .collect();
            let all = self.kept.len() + self.skipped_count;
            if all > names.len() {
                names.push(format!("{} more", all - names.len()));
            }
            let list = match names.split_last() {
                Some((last, [])) => last.clone(),
                Some((last, init)) => format!("{} and {last}", init.join(", ")),
                None => String::new(),
            };
            format!(
                "it holds {list} ({all} file{})",
                if all == 1 { "" } else { "s" }
            )
        };
        format!(
            "{NOTHING_TO_GRADE}: {held}. cugrade grades the `.cu`, `.ptx` and `.py` files of an \
             archive, in its top level or in any folder of it (with `.h`/`.cuh` headers and a \
             `cugrade.yaml`); files and folders whose names start with `.` are left out. \
             fix: put the kernel's source file in the archive itself (not a document, a \
             notebook or a nested archive)"
        )
    }
}

fn zip_files(bytes: &[u8], tally: &mut Tally) -> Result<(), String> {
    let mut z = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| format!("it is not a valid zip: {e}"))?;
    if z.len() > MAX_ENTRIES {
        return Err(format!("more than {MAX_ENTRIES} entries"));
    }
    let mut expanded = 0u64;
    for i in 0..z.len() {
        tally.entry()?;
        let mut entry = z.by_index(i).map_err(|e| format!("entry {i}: {e}"))?;
        if entry.is_dir() {
            continue;
        }
        if entry.is_symlink() {
            return Err("it contains a symbolic link".into());
        }
        if entry
            .unix_mode()
            .is_some_and(|m| m & 0o170000 != 0 && m & 0o170000 != 0o100000)
        {
            return Err("it contains a special file".into());
        }
        let name = entry
            .name()
            .map_err(|e| format!("entry {i}: {e}"))?
            .into_owned();
        if entry.enclosed_name().is_none() {
            return Err(format!(
                "`{}` escapes the archive",
                crate::rubric::expr::excerpt(&name)
            ));
        }
        let path = clean_path(&name)?;
        expanded = expanded.saturating_add(entry.size());
        if expanded > MAX_EXPANDED_BYTES {
            return Err(format!(
                "it expands to more than {MAX_EXPANDED_BYTES} bytes"
            ));
        }
        let size = entry.size();
        tally.file(&path, size, &mut entry)?;
    }
    Ok(())
}

/// The data of an extension header (GNU long name, PAX), refused from its size field when it
/// is larger than `max`: never read whole into memory first.
fn header_data(entry: &mut dyn Read, size: u64, max: u64, what: &str) -> Result<Vec<u8>, String> {
    if size > max {
        return Err(format!(
            "it has a {what} of {size} bytes (at most {max} are accepted)"
        ));
    }
    let mut v = Vec::with_capacity(size as usize);
    entry
        .take(max)
        .read_to_end(&mut v)
        .map_err(|e| format!("its {what}: {e}"))?;
    Ok(v)
}

fn tar_files(bytes: &[u8], tally: &mut Tally) -> Result<(), String> {
    // Every gzip member, as `tar xzf` reads them (`cat a.tar.gz b.gz` is one valid file).
    let gz = flate2::read::MultiGzDecoder::new(bytes);
    let capped = Capped {
        inner: gz,
        left: MAX_EXPANDED_BYTES,
    };
    let mut archive = tar::Archive::new(capped);
    // Raw: the crate's own handling of GNU long names and PAX headers reads each one whole
    // into memory, whatever size its header claims. They are read here, bounded.
    let entries = archive
        .entries()
        .map_err(|e| format!("it is not a valid .tar.gz: {e}"))?
        .raw(true);
    let (mut long_name, mut pax_path): (Option<Vec<u8>>, Option<String>) = (None, None);
    for entry in entries {
        tally.entry()?;
        let mut entry = entry.map_err(|e| format!("it is not a valid .tar.gz: {e}"))?;
        let header = entry.header();
        let kind = header.entry_type();
        let size = header
            .entry_size()
            .map_err(|e| format!("a bad header: {e}"))?;
        if kind.is_gnu_longname() {
            let mut name = header_data(&mut entry, size, MAX_NAME_BYTES as u64, "GNU long name")?;
            while name.last() == Some(&0) {
                name.pop();
            }
            long_name = Some(name);
            continue;
        }
        if kind.is_gnu_longlink() {
            // Links are refused below; the link target is only bounded here.
            header_data(
                &mut entry,
                size,
                MAX_NAME_BYTES as u64,
                "GNU long link name",
            )?;
            continue;
        }
        if kind.is_pax_local_extensions() {
            let data = header_data(&mut entry, size, MAX_PAX_BYTES, "PAX header")?;
            for ext in tar::PaxExtensions::new(&data) {
                let ext = ext.map_err(|e| format!("a bad PAX header: {e}"))?;
                match ext.key() {
                    Ok("path") => {
                        let v = ext.value().map_err(|_| "a PAX path that is not UTF-8")?;
                        pax_path = Some(v.to_string());
                    }
                    Ok("size") => {
                        // Sizes past the header's 8 GiB field: far over any submission file.
                        return Err("it has a PAX size override (a file over 8 GiB)".into());
                    }
                    _ => {}
                }
            }
            continue;
        }
        if kind.is_pax_global_extensions() {
            header_data(&mut entry, size, MAX_PAX_BYTES, "PAX global header")?;
            continue;
        }
        let raw_name = match (pax_path.take(), long_name.take()) {
            (Some(p), _) => p,
            (None, Some(n)) => String::from_utf8(n).map_err(|_| "a file name that is not UTF-8")?,
            (None, None) => String::from_utf8(header.path_bytes().into_owned())
                .map_err(|_| "a file name that is not UTF-8")?,
        };
        if kind.is_dir() {
            continue;
        }
        if !(kind.is_file() || kind.is_contiguous()) {
            return Err("it contains a link or a special file".into());
        }
        let path = clean_path(&raw_name)?;
        tally.file(&path, size, &mut entry)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::submission::unpack::write_files;

    fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        let mut z = zip::ZipWriter::new(&mut out);
        for (name, data) in files {
            z.start_file(*name, zip::write::SimpleFileOptions::default())
                .unwrap();
            std::io::Write::write_all(&mut z, data).unwrap();
        }
        z.finish().unwrap();
        out.into_inner()
    }

    /// A ustar header block: `name`, `kind` (the type flag) and a declared `size`.
    fn header(name: &str, kind: u8, size: u64) -> [u8; 512] {
        let mut h = tar::Header::new_gnu();
        h.as_mut_bytes()[..name.len()].copy_from_slice(name.as_bytes());
        h.set_mode(0o644);
        h.set_size(size);
        h.set_entry_type(tar::EntryType::new(kind));
        h.set_cksum();
        *h.as_bytes()
    }

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut e, data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn zips_keep_their_sources_and_refuse_escapes_and_links() {
        let z = zip_of(&[
            ("bob/k.cu", b"// hi"),
            ("bob/notes.pdf", b"skipped"),
            ("bob/.hidden.cu", b"skipped"),
            ("__MACOSX/bob/._k.cu", b"skipped"),
            ("bob/cugrade.yaml", b"student: bob\n"),
        ]);
        let kept = extract(ArchiveKind::Zip, &z).unwrap();
        let names: Vec<&str> = kept.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["bob/k.cu", "bob/cugrade.yaml"]);
        let e = extract(ArchiveKind::Zip, &zip_of(&[("../../x.cu", b"")])).unwrap_err();
        assert!(e.contains("escapes"), "{e}");
        let mut out = std::io::Cursor::new(Vec::new());
        let mut z = zip::ZipWriter::new(&mut out);
        z.add_symlink(
            "k.cu",
            "/etc/passwd",
            zip::write::SimpleFileOptions::default(),
        )
        .unwrap();
        z.finish().unwrap();
        let e = extract(ArchiveKind::Zip, &out.into_inner()).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        let e = extract(ArchiveKind::Zip, b"PK not really").unwrap_err();
        assert!(e.contains("not a valid zip"), "{e}");
    }

    /// An archive without a file to grade says what it held and what cugrade looks for
    /// (issue 32), in words the grader puts after the archive's name.
    #[test]
    fn an_archive_without_sources_says_what_it_held() {
        let z = zip_of(&[
            ("bob/report.pdf", b"%PDF"),
            ("bob/kernel.cu.txt", b"// pasted"),
            ("bob/.git/config", b""),
            ("bob/k.cuh", b"// a header alone"),
        ]);
        let e = extract(ArchiveKind::Zip, &z).unwrap_err();
        assert!(e.starts_with(NOTHING_TO_GRADE), "{e}");
        assert!(
            e.contains(
                "it holds `bob/k.cuh`, `bob/report.pdf`, `bob/kernel.cu.txt` and \
                        `bob/.git/config` (4 files)"
            ),
            "{e}"
        );
        assert!(e.contains("`.cu`, `.ptx` and `.py`"), "{e}");
        let many: Vec<(String, &[u8])> =
            (0..9).map(|i| (format!("doc{i}.txt"), &b"x"[..])).collect();
        let refs: Vec<(&str, &[u8])> = many.iter().map(|(n, d)| (n.as_str(), *d)).collect();
        let e = extract(ArchiveKind::Zip, &zip_of(&refs)).unwrap_err();
        assert!(e.contains("`doc5.txt` and 3 more (9 files)"), "{e}");
        let e = extract(ArchiveKind::Zip, &zip_of(&[])).unwrap_err();
        assert!(e.contains("it is empty"), "{e}");
    }

    #[test]
    fn tar_extension_headers_are_bounded_before_they_are_read() {
        // A GNU long name that claims 3 GiB, in an archive of a few KB: refused from the
        // header, no allocation, no read of the payload (there is none).
        let mut t = header("././@LongLink", b'L', 3 << 30).to_vec();
        t.extend_from_slice(&[b'a'; 1024]);
        let e = extract(ArchiveKind::TarGz, &gz(&t)).unwrap_err();
        assert!(e.contains("GNU long name of 3221225472 bytes"), "{e}");
        let mut t = header("PaxHeaders/k.cu", b'x', 3 << 30).to_vec();
        t.extend_from_slice(&[b'a'; 1024]);
        let e = extract(ArchiveKind::TarGz, &gz(&t)).unwrap_err();
        assert!(e.contains("PAX header of 3221225472 bytes"), "{e}");
        // Bounded ones are honoured: a long name and a PAX path name the next file.
        let long = format!("{}/k.cu", "d".repeat(150));
        let mut t = header("././@LongLink", b'L', long.len() as u64 + 1).to_vec();
        let mut name = long.clone().into_bytes();
        name.push(0);
        name.resize(512, 0);
        t.extend_from_slice(&name);
        t.extend_from_slice(&header("short", b'0', 4));
        let mut data = b"// x".to_vec();
        data.resize(512, 0);
        t.extend_from_slice(&data);
        let body = " path=pax/p.cuh\n";
        let record = format!("{}{body}", body.len() + 2);
        assert_eq!(record.len(), body.len() + 2);
        t.extend_from_slice(&header("PaxHeaders/p", b'x', record.len() as u64));
        let mut rec = record.as_bytes().to_vec();
        rec.resize(512, 0);
        t.extend_from_slice(&rec);
        t.extend_from_slice(&header("p", b'0', 0));
        t.extend_from_slice(&[0; 1024]);
        let kept = extract(ArchiveKind::TarGz, &gz(&t)).unwrap();
        let names: Vec<&str> = kept.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, [long.as_str(), "pax/p.cuh"]);
        assert_eq!(kept[0].1, b"// x");
    }

    #[test]
    fn tar_links_devices_and_bombs_are_refused() {
        for kind in [b'1', b'2', b'3', b'4', b'6'] {
            let mut t = header("k.cu", kind, 0).to_vec();
            t.extend_from_slice(&[0; 1024]);
            let e = extract(ArchiveKind::TarGz, &gz(&t)).unwrap_err();
            assert!(
                e.contains("link or a special file"),
                "{}: {e}",
                kind as char
            );
        }
        // A file that claims more than a submission file may have.
        let mut t = header("k.cu", b'0', 3 << 30).to_vec();
        t.extend_from_slice(&[0; 1024]);
        let e = extract(ArchiveKind::TarGz, &gz(&t)).unwrap_err();
        assert!(e.contains("at most 2097152"), "{e}");
        // Skipped content still counts toward what may be expanded.
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut e, &header("big.bin", b'0', 600 << 20)).unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..600 {
            std::io::Write::write_all(&mut e, &zeros).unwrap();
        }
        let bomb = e.finish().unwrap();
        assert!(bomb.len() < 8 << 20, "{}", bomb.len());
        let e = extract(ArchiveKind::TarGz, &bomb).unwrap_err();
        assert!(e.contains("expands to more than"), "{e}");
        let e = extract(ArchiveKind::TarGz, b"\x1f\x8b garbage").unwrap_err();
        assert!(e.contains("not a valid .tar.gz"), "{e}");
    }

    #[test]
    fn clean_paths_stay_inside() {
        assert_eq!(clean_path("a/./b//c.cu").unwrap(), "a/b/c.cu");
        assert_eq!(clean_path("a\\b.cu").unwrap(), "a/b.cu");
        for bad in ["/etc/passwd", "a/../../b", "..", "", "a\0b"] {
            assert!(clean_path(bad).is_err(), "{bad:?}");
        }
        assert!(clean_path(&"x/".repeat(3000)).is_err());
    }

    #[test]
    fn written_files_are_new_regular_files_only() {
        let d = tempfile::tempdir().unwrap();
        let dest = d.path().join("s");
        let twice = vec![
            ("k.cu".to_string(), b"a".to_vec()),
            ("k.cu".to_string(), b"b".to_vec()),
        ];
        assert!(write_files(&twice, &dest).unwrap_err().contains("twice"));
        let hostile = vec![("../k.cu".to_string(), b"a".to_vec())];
        assert!(write_files(&hostile, &d.path().join("t")).is_err());
        let skipped = vec![("notes.txt".to_string(), b"a".to_vec())];
        assert!(write_files(&skipped, &d.path().join("u")).is_err());
    }
}

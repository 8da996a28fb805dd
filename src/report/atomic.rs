//! Every report file is written whole or not at all: into a temporary file in the same folder,
//! flushed to disk, then renamed over the old one. A full disk, a killed run or a reader at the
//! wrong moment sees the previous complete file or the new complete file, never a cut one, and
//! a failed write leaves no temporary file behind.

use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Write `bytes` to `path` atomically (see the module's docs).
pub fn write(path: &Path, bytes: impl AsRef<[u8]>) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".cugrade-tmp-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes.as_ref())?;
    // Temp files are created private; a report is as readable as any file the user writes.
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    // Where the file system reports a full disk only when the data is flushed, it is said
    // here, before the rename: the old file stays.
    tmp.as_file().sync_data()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_and_leaves_no_temp_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("grades.csv");
        write(&p, "old\n").unwrap();
        write(&p, "new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\n");
        let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1);
        // A folder in the way: an error, and the folder is untouched.
        std::fs::create_dir(d.path().join("summary.md")).unwrap();
        assert!(write(&d.path().join("summary.md"), "x").is_err());
        assert!(d.path().join("summary.md").is_dir());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 2);
    }
}

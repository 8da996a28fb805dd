//! `result.json`: the verdict exactly as `SPEC.md` fixes it, for scripts and `--resume`.

use crate::result::GradeResult;
use std::io;
use std::path::Path;

/// The verdict as pretty JSON with a trailing newline.
pub fn to_string(r: &GradeResult) -> String {
    // Serializing plain structs of strings and numbers cannot fail (non-finite floats become
    // `null`), so the fallback is only there to keep this function total.
    let mut s = serde_json::to_string_pretty(r)
        .unwrap_or_else(|e| format!("{{\"error\": \"could not serialize result: {e}\"}}"));
    s.push('\n');
    s
}

/// Read a `result.json` back (for `--resume` and cohort summaries).
pub fn read(path: &Path) -> io::Result<GradeResult> {
    let text = std::fs::read_to_string(path)?;
    serde_json::from_str(&text).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not a cugrade result: {e}", path.display()),
        )
    })
}

//! result.json.
use crate::result::GradeResult;
pub fn write(r: &GradeResult, path: &std::path::Path) -> std::io::Result<()> {
    std::fs::write(
        path,
        serde_json::to_string_pretty(r).map_err(std::io::Error::other)?,
    )
}

//! Cohort outputs (interim).
use crate::result::GradeResult;
pub fn write_all(_r: &[GradeResult], _out: &std::path::Path) -> std::io::Result<()> {
    Ok(())
}

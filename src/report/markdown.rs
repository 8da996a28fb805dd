//! Markdown (interim).
use crate::result::GradeResult;
pub fn render(r: &GradeResult) -> String {
    format!(
        "# {} — {}\n\nScore {}/{}\n",
        r.assignment, r.student, r.score, r.max_score
    )
}

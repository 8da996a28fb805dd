//! Terminal summary (interim).
use crate::result::GradeResult;
pub fn render(r: &GradeResult, _color: bool) -> String {
    let mut s = String::new();
    for m in &r.milestones {
        s.push_str(&format!(
            "{:8} {} {}/{}\n",
            m.status.as_str(),
            m.id,
            m.score,
            m.max_score
        ));
        for c in &m.checks {
            if c.status != crate::result::Status::Pass {
                s.push_str(&format!(
                    "    {} {}: {}\n",
                    c.status.as_str(),
                    c.name,
                    c.message
                ));
            }
        }
    }
    s.push_str(&format!("total {}/{}\n", r.score, r.max_score));
    s
}
pub fn github(r: &GradeResult) -> String {
    render(r, false)
}

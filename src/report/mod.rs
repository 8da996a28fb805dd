//! Reports: result.json, JUnit XML, Markdown feedback and the terminal summary, all rendered
//! from one `GradeResult`; `gradescope` renders Gradescope's results.json; `outputs` writes a
//! student's files for `check`, `grade` and `merge` alike; `cohort`, `gradebook` and `charts`
//! render the class-wide files of `cugrade grade`.
//!
//! Student-controlled text reaches every report, so each one escapes through `sanitize`.
//! docs/reports.md describes every file for users.

pub mod atomic;
pub mod caps;
pub mod causes;
pub mod charts;
pub mod codequality;
pub mod cohort;
pub mod describe;
pub mod devices;
pub mod findings;
pub mod gradebook;
pub mod gradescope;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod output;
pub mod outputs;
pub mod sanitize;
pub mod terminal;

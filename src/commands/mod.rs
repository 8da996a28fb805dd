//! The commands, as the user types them: `check` (one submission, as a student runs it, with
//! `--watch` and `--profile`), `init` (a lab's starter), `grade` (a cohort), `merge` (shards
//! of a cohort), `doctor`, `validate` (a rubric), `calibrate` (a rubric's CPU baselines) and `test` (a course's example
//! submissions against their expected verdicts).
//! `cli` parses the command line and calls one of them; each drives the pipeline
//! (`crate::pipeline`) and the reports.

pub mod calibrate;
pub mod check;
pub mod doctor;
pub mod grade;
pub mod init;
pub mod merge;
pub mod profile;
pub mod test;
pub mod validate;

//! cugrade: an auto-grader for GPU programming courses.
//!
//! A submission flows through the modules in this order: `rubric` (what to check) and
//! `submission` (what was handed in) are loaded; the `worker` runs `compile` and the
//! `backend` in sandboxed child processes (`sandbox`); `inputs` makes seeded data; `check`
//! compares outputs, `measure` times, `score` turns checks into points; `report` writes
//! JSON, JUnit, Markdown and the terminal summary. `grade` drives one submission, `cohort`
//! many; `doctor` and `validate` are the other commands; `setup` turns what the user asked
//! for into grading options; `student` is `check` (one submission, as a student runs it) and
//! `init` (a lab's starter, from the `labs` built into the binary); `cli` only parses and
//! dispatches.

pub mod backend;
pub mod baseline;
pub mod calibrate;
pub mod check;
pub mod cli;
pub mod cohort;
pub mod compile;
pub mod doctor;
pub mod errors;
pub mod estimate;
pub mod exit;
pub mod grade;
pub mod hints;
pub mod inputs;
pub mod integrity;
pub mod labs;
pub mod measure;
pub mod profile;
pub mod report;
pub mod result;
pub mod rubric;
pub mod sandbox;
pub mod score;
pub mod setup;
pub mod student;
pub mod submission;
pub mod validate;
pub mod worker;

/// Run the command line and return the process exit code.
pub fn run() -> i32 {
    cli::main()
}

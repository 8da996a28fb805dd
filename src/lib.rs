//! cugrade: an auto-grader for GPU programming courses.
//!
//! The modules in the order a submission flows through them (docs/architecture.md):
//!
//! - the command line: `cli` parses and dispatches to `commands` (`check`, `init`, `grade`,
//!   `merge`, `doctor`, `validate`, `calibrate`); `setup` turns what the user asked for into
//!   grading options;
//! - what comes in: `rubric` (loaded, checked, then resolved into a `rubric::plan::Plan`),
//!   `submission` (files, archives, the manifest), `labs` (the labs built into the binary);
//! - the parent side: `pipeline` grades one submission stage by stage; `inputs` makes seeded
//!   data, `compare` compares outputs, `measure` decides speed, `estimate` speed without a GPU,
//!   `score` turns checks into points, `integrity` flags, `baseline` the CPU implementations,
//!   `hints` the course's advice;
//! - the boundary: `worker` (a typed protocol, one client, the child's side) and `sandbox`;
//! - inside a worker: `compile` (NVRTC, Numba, CuPy) and `backend` (the CUDA driver and the
//!   PTX emulator);
//! - the data model, imported by all and importing no stage: `result`, `errors`, `exit`, and
//!   `rubric::schema`;
//! - what goes out: `report` (JSON, JUnit, Markdown, Gradescope, the terminal).

pub mod cli;
pub mod commands;
pub mod setup;

pub mod labs;
pub mod rubric;
pub mod submission;

pub mod baseline;
pub mod compare;
pub mod estimate;
pub mod hints;
pub mod inputs;
pub mod integrity;
pub mod measure;
pub mod pipeline;
pub mod score;

pub mod sandbox;
pub mod worker;

pub mod backend;
pub mod compile;

pub mod errors;
pub mod exit;
pub mod model;
pub mod result;

pub mod report;

/// Run the command line and return the process exit code.
pub fn run() -> i32 {
    cli::main()
}

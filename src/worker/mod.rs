//! Worker processes: every compile and every run of student code happens in a child process
//! (the same binary in a hidden mode), talking to the grading parent over pipes with a typed
//! protocol. See `protocol` for the wire format, `child` for the worker, `parent` for the
//! parent's side (deadlines, kills, output capture), `client` for the typed requests the
//! grader makes through it. `process` is the runner every child process of cugrade starts
//! through (workers, NVIDIA's tools, Python, pip); `scripts` is cugrade's own Python.

pub mod child;
pub mod client;
pub mod client_ranks;
pub mod interrupt;
pub mod nccl;
pub mod nsight;
pub mod parent;
pub mod pool;
pub mod process;
pub mod profiled;
pub mod protocol;
pub mod python;
pub mod ranks;
pub mod scripts;

pub use child::Role;
pub use client::Client;
pub use parent::{Worker, WorkerFailure, WorkerOptions, end_all};
pub use process::Captured;

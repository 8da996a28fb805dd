//! Worker processes: every compile and every run of student code happens in a child process
//! (the same binary in a hidden mode), talking to the grading parent over pipes with a typed
//! protocol. See `protocol` for the wire format, `child` for the worker, `parent` for the
//! parent's side (deadlines, kills, output capture).

pub mod child;
pub mod interrupt;
pub mod nsight;
pub mod parent;
pub mod profiled;
pub mod protocol;

pub use child::Role;
pub use parent::{Captured, Worker, WorkerFailure, WorkerOptions, end_all};

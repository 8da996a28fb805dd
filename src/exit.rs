//! Exit codes, as fixed by the external contract (docs/cli.md).

/// Graded, and every check passed or was skipped.
pub const OK: i32 = 0;
/// Graded, and at least one check failed or errored.
pub const FAILED: i32 = 1;
/// Bad usage, or a bad rubric or manifest (the message names `file:line:column`).
pub const USAGE: i32 = 2;
/// Could not grade at all (no backend, internal fault); the message says why and what to do.
pub const CANNOT_GRADE: i32 = 3;

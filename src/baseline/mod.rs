//! CPU implementations of the labs' kernels, in plain Rust.
//!
//! They serve twice: `validate` cross-checks each reference kernel against them, and
//! performance thresholds of the form `against: cpu` time them (single-threaded, as the
//! course measures it) or `against: cpu_parallel` (all cores, through rayon).
//!
//! An implementation reads its inputs by the contract's parameter names and writes its
//! outputs in place; scalar parameters arrive as evaluated values in `scalars`.

use std::collections::BTreeMap;

/// A host-side buffer of one contract parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum HostBuffer {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    I64(Vec<i64>),
    U64(Vec<u64>),
}

/// Everything a CPU implementation sees: buffers and scalars by parameter name.
#[derive(Debug, Clone, Default)]
pub struct HostArgs {
    pub buffers: BTreeMap<String, HostBuffer>,
    /// Scalar parameters (and the case's variables), by name.
    pub scalars: BTreeMap<String, f64>,
}

/// Single-threaded (the course's CPU baseline) or all cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    Single,
    Parallel,
}

/// Why a CPU implementation could not run on the given arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("CPU implementation `{implementation}`: {message}")]
pub struct BaselineError {
    pub implementation: String,
    pub message: String,
}

pub type CpuFn = fn(&mut HostArgs, Threads) -> Result<(), BaselineError>;

/// All built-in implementations, by the name rubrics use in `cpu:`.
pub fn registry() -> &'static [(&'static str, CpuFn)] {
    &[]
}

pub fn lookup(name: &str) -> Option<CpuFn> {
    registry().iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

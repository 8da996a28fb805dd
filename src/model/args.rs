//! A launch's parameters for one case, with the case's expressions evaluated: what `inputs`
//! draws, poisons and passes, in numbers. `rubric::args` makes them when the plan is made.

use crate::rubric::schema::{Direction, ScalarType, Tolerance};
use serde::{Deserialize, Serialize};

/// A generator with its expressions evaluated and checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Draw {
    /// Uniform real in `[lo, hi)`.
    Uniform(f64, f64),
    /// Normal with mean and standard deviation.
    Normal(f64, f64),
    /// Uniform integer in `[lo, hi)`.
    Int(i64, i64),
    Constant(f64),
    /// These values, cycled from the first element of the buffer.
    Values(Vec<f64>),
}

/// One parameter of a launch, in the contract's order.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamArg {
    Buffer(Box<BufferArg>),
    Scalar(ScalarArg),
}

/// A buffer parameter on one case.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferArg {
    pub name: String,
    pub elem: ScalarType,
    pub dir: Direction,
    pub len: usize,
    /// The contract's `shape`, evaluated (its product is `len`).
    pub shape: Option<Vec<usize>>,
    /// How an input's values are drawn (`None`: not drawn, as an output or an input without a
    /// generator).
    pub draw: Option<Draw>,
    /// The share of elements replaced by special values, and those values.
    pub specials: Option<(f64, Vec<f64>)>,
    /// What an output starts as (else poison; scratch starts as zeros).
    pub init: Option<f64>,
    /// Set by symbol rather than passed.
    pub symbol: bool,
    /// A multi-GPU lab's buffer the kernel gets as a table of every rank's copy.
    pub peers: bool,
    pub tolerance: Option<Tolerance>,
}

/// A scalar parameter on one case.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalarArg {
    pub name: String,
    pub ty: ScalarType,
    pub value: f64,
}

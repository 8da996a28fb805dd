//! The measurement stage: how a kernel's speed is measured, and how a speed becomes points.
//!
//! After nvbench: measuring is separate from what is measured. This module holds the pure parts
//! (statistics, the stopping rule, ratios with confidence intervals, the decision at a tier
//! edge) and the records written to result.json; the timing loop that drives a backend lives in
//! [`session`], and [`lock`] keeps timed sections on one GPU from overlapping. The protocol is
//! described for users in docs/measurement.md.

pub mod calibration;
pub mod clocks;
pub mod decide;
pub mod lock;
pub mod session;
pub mod stats;
pub mod stopping;

pub use stats::{median, relative_spread};

pub use crate::model::timing::{BaselineRecord, GpuHold, Measurement, StopReason};

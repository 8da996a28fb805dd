//! The data model's records that every stage shares: what a launch is, the precision a lab
//! computes in, how a speed was measured or estimated, the GPU that timed it. Leaf types: they
//! import nothing but each other and the rubric's schema, so `result`, the rubric's plan and
//! the reports can use them without importing a stage. The stages that fill them
//! (`backend`, `measure`, `estimate`, `compare`) re-export them where they always were.

pub mod args;
pub mod estimate;
pub mod launch;
pub mod precision;
pub mod timing;

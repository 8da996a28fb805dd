//! inputs (being written).

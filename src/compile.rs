//! compile (being written).

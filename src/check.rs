//! check (being written).

//! cohort (being written).

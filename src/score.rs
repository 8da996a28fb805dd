//! score (being written).

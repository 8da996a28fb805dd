//! Worker processes (being written).

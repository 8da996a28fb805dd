//! validate (being written).

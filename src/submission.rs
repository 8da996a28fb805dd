//! submission (being written).

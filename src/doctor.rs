//! doctor (being written).

//! grade (being written).

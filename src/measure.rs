//! measure (being written).

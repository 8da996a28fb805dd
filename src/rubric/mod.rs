//! Rubrics: what an assignment checks. See docs/rubric.md.
pub mod schema;

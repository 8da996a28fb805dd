//! Reports: result.json, JUnit XML, Markdown feedback and the terminal summary, all written
//! from one `GradeResult`. (Interim versions; the report module proper is being merged.)
pub mod cohort;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod terminal;

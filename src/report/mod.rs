//! Reports: result.json, JUnit XML, Markdown feedback and the terminal summary, all written
//! from one `GradeResult`.

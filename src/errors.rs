//! Errors that stop a command (as opposed to verdicts, which are data in `result`).
//!
//! [`ConfigError`] is a user's mistake in a file we read (rubric, manifest): exit 2, rendered
//! with `file:line:col`, the offending line and a caret. [`Fatal`] is "cannot grade at all":
//! exit 3 with what to install or fix.

use std::fmt;
use std::path::{Path, PathBuf};

/// A position in a text file, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

/// A mistake in a rubric or manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    pub pos: Option<Pos>,
    pub message: String,
    /// The source line at `pos`, for the caret display.
    pub source_line: Option<String>,
}

impl ConfigError {
    pub fn new(file: &Path, pos: Option<Pos>, message: impl Into<String>, source: &str) -> Self {
        let source_line = pos.and_then(|p| {
            source
                .lines()
                .nth(p.line.saturating_sub(1))
                .map(str::to_string)
        });
        ConfigError {
            file: file.to_path_buf(),
            pos,
            message: message.into(),
            source_line,
        }
    }

    /// A problem with the file as a whole (unreadable, empty).
    pub fn whole_file(file: &Path, message: impl Into<String>) -> Self {
        ConfigError {
            file: file.to_path_buf(),
            pos: None,
            message: message.into(),
            source_line: None,
        }
    }
}

impl fmt::Display for ConfigError {
    /// ```text
    /// error: unknown field `tolerence`, expected one of `params`, `cpu`, `launch`, `tolerance`
    ///   --> rubrics/x.yaml:12:5
    ///    |
    /// 12 |     tolerence: 1e-5
    ///    |     ^
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "error: {}", self.message)?;
        match (self.pos, &self.source_line) {
            (Some(p), Some(line)) => {
                let num = p.line.to_string();
                let pad = " ".repeat(num.len());
                writeln!(f, "{pad}--> {}:{}:{}", self.file.display(), p.line, p.col)?;
                writeln!(f, "{pad} |")?;
                writeln!(f, "{num} | {line}")?;
                // Columns count characters; tabs stay tabs so the caret lines up.
                let lead: String = line
                    .chars()
                    .take(p.col.saturating_sub(1))
                    .map(|c| if c == '\t' { '\t' } else { ' ' })
                    .collect();
                write!(f, "{pad} | {lead}^")
            }
            (Some(p), None) => write!(f, " --> {}:{}:{}", self.file.display(), p.line, p.col),
            (None, _) => write!(f, " --> {}", self.file.display()),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Grading cannot happen at all: exit 3.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Fatal {
    pub message: String,
}

impl Fatal {
    pub fn new(message: impl Into<String>) -> Self {
        Fatal {
            message: message.into(),
        }
    }
}

/// Any error a command can end with.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("error: {0}")]
    Usage(String),
    #[error("error: {0}")]
    Fatal(#[from] Fatal),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Config(_) | CliError::Usage(_) => crate::exit::USAGE,
            CliError::Fatal(_) => crate::exit::CANNOT_GRADE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_caret_under_column() {
        let src = "a: 1\ncontracts:\n  x: [\n";
        let e = ConfigError::new(
            Path::new("r.yaml"),
            Some(Pos { line: 3, col: 6 }),
            "bad",
            src,
        );
        assert_eq!(
            e.to_string(),
            "error: bad\n --> r.yaml:3:6\n  |\n3 |   x: [\n  |      ^"
        );
    }
}

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
    /// The source line at `pos`, for the caret display: the whole line, or for a long one
    /// (a hostile manifest can be one 2 MiB line) a window around the column.
    pub source_line: Option<String>,
    /// Characters of the line left out before `source_line` starts (0 for a whole line).
    window_start: usize,
}

/// A shown line keeps at most this many characters around the column.
const LINE_WINDOW: usize = 120;

impl ConfigError {
    pub fn new(file: &Path, pos: Option<Pos>, message: impl Into<String>, source: &str) -> Self {
        let line = pos.and_then(|p| source.lines().nth(p.line.saturating_sub(1)));
        let (source_line, window_start) = match (line, pos) {
            (Some(l), Some(p)) => {
                let (text, start) = window(l, p.col);
                (Some(text), start)
            }
            _ => (None, 0),
        };
        ConfigError {
            file: file.to_path_buf(),
            pos,
            message: message.into(),
            source_line,
            window_start,
        }
    }

    /// A problem with the file as a whole (unreadable, empty).
    pub fn whole_file(file: &Path, message: impl Into<String>) -> Self {
        ConfigError {
            file: file.to_path_buf(),
            pos: None,
            message: message.into(),
            source_line: None,
            window_start: 0,
        }
    }
}

impl ConfigError {
    /// The same rendering as a warning: something to look at that does not stop the command
    /// (`validate`'s remarks on a sound rubric).
    pub fn as_warning(&self) -> String {
        self.labelled("warning")
    }

    /// The same rendering as a note: a second place an error involves (the reference kernel
    /// a rubric's contract disagrees with).
    pub fn as_note(&self) -> String {
        self.labelled("note")
    }

    fn labelled(&self, label: &str) -> String {
        let text = self.to_string();
        match text.strip_prefix("error: ") {
            Some(rest) => format!("{label}: {rest}"),
            None => text,
        }
    }
}

/// `line` whole when short, else [`LINE_WINDOW`] characters around column `col` (1-based)
/// with `…` where text was left out; and how many characters were left out before.
fn window(line: &str, col: usize) -> (String, usize) {
    let len = line.chars().count();
    if len <= LINE_WINDOW {
        return (line.to_string(), 0);
    }
    let start = col
        .saturating_sub(1)
        .saturating_sub(LINE_WINDOW / 2)
        .min(len - LINE_WINDOW);
    let mut shown: String = line.chars().skip(start).take(LINE_WINDOW).collect();
    if start + LINE_WINDOW < len {
        shown.push('…');
    }
    if start > 0 {
        // The `…` takes the place of the last character left out.
        let rest: String = shown.chars().skip(1).collect();
        return (format!("…{rest}"), start);
    }
    (shown, 0)
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
                    .take(p.col.saturating_sub(1).saturating_sub(self.window_start))
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

    #[test]
    fn a_long_line_shows_a_window_with_the_caret_under_the_column() {
        let line = format!("grid: [{}x{}]", "(".repeat(5000), ")".repeat(5000));
        let col = 5008; // the `x`
        let e = ConfigError::new(
            Path::new("m.yaml"),
            Some(Pos { line: 1, col }),
            "bad",
            &line,
        );
        let text = e.to_string();
        assert!(text.contains("--> m.yaml:1:5008"), "{text}");
        let lines: Vec<&str> = text.lines().collect();
        let shown = lines[3].trim_start_matches("1 | ");
        assert!(shown.chars().count() <= LINE_WINDOW + 1, "{shown}");
        assert!(shown.starts_with('…') && shown.ends_with('…'), "{shown}");
        let caret = lines[4].trim_start_matches("  | ").chars().count() - 1;
        assert_eq!(shown.chars().nth(caret), Some('x'), "{text}");
        // The start of a long line: no leading ellipsis, caret in place.
        let e = ConfigError::new(
            Path::new("m.yaml"),
            Some(Pos { line: 1, col: 1 }),
            "b",
            &line,
        );
        let text = e.to_string();
        assert!(text.contains("1 | grid: [((("), "{text}");
        assert!(text.ends_with("  | ^"), "{text}");
    }
}

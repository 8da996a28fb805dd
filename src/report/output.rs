//! What a command prints and the per-submission files it writes, in the format asked for.

use crate::errors::{CliError, Fatal};
use crate::report;
use crate::result::GradeResult;
use clap::ValueEnum;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Human,
    /// Human summary plus `::error file=…,line=…::` annotations for GitHub Actions.
    Github,
    /// result.json on standard output.
    Json,
}

/// How much `check` prints in the human format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    /// The total line only.
    Quiet,
    Normal,
    /// The summary plus every check, passing ones too.
    Verbose,
}

/// Terminal output is laid out for this many columns.
pub const COLUMNS: usize = 80;

/// Columns a string takes on a terminal: characters, less ANSI colour sequences.
fn visible_width(s: &str) -> usize {
    let mut n = 0;
    let mut in_escape = false;
    for c in s.chars() {
        if in_escape {
            in_escape = !c.is_ascii_alphabetic();
        } else if c == '\x1b' {
            in_escape = true;
        } else {
            n += 1;
        }
    }
    n
}

/// Fit the human summary to [`COLUMNS`]: prose lines wrap at spaces, continuing under their
/// own indentation plus two; evidence lines (compiler logs, behind `│`) are cut with `…`
/// (`--markdown` and `--json` keep them whole).
pub fn fit(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if visible_width(line) <= COLUMNS {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        if line.contains('│') {
            let mut w = 0;
            let mut in_escape = false;
            for c in line.chars() {
                if in_escape {
                    in_escape = !c.is_ascii_alphabetic();
                } else if c == '\x1b' {
                    in_escape = true;
                } else {
                    w += 1;
                    if w == COLUMNS {
                        out.push('…');
                        break;
                    }
                }
                out.push(c);
            }
            // Close any colour left open by the cut.
            out.push_str(if line.contains('\x1b') {
                "\x1b[0m\n"
            } else {
                "\n"
            });
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let cont = " ".repeat((indent + 2).min(COLUMNS / 2));
        let mut current = line[..indent].to_string();
        let mut width = indent;
        let mut first = true;
        for word in line.trim_start().split(' ') {
            let ww = visible_width(word);
            // GitHub reads a workflow command at the start of any output line, leading spaces
            // trimmed: never start a continuation line with student text that could be one.
            let safe_start = !word.starts_with(':') && !word.starts_with('#');
            if !first && width + 1 + ww > COLUMNS && safe_start {
                out.push_str(&current);
                out.push('\n');
                current = cont.clone();
                width = cont.len();
                first = true;
            }
            if !first {
                current.push(' ');
                width += 1;
            }
            current.push_str(word);
            width += ww;
            first = false;
        }
        out.push_str(&current);
        out.push('\n');
    }
    out
}

fn color_for(format: Format) -> bool {
    format == Format::Human && report::terminal::stdout_wants_color()
}

/// [`print_result`] at a verbosity: quiet keeps only the summary's last line (the total);
/// verbose adds every check with its status. Only the human format changes.
pub fn print_result_at(r: &GradeResult, format: Format, dir: Option<&Path>, v: Verbosity) {
    if format != Format::Human || v == Verbosity::Normal {
        return print_result(r, format, dir);
    }
    let color = color_for(format);
    let text = fit(&report::terminal::render_with(
        r,
        color,
        v == Verbosity::Verbose,
    ));
    match v {
        Verbosity::Quiet => {
            if let Some(last) = text.lines().rev().find(|l| !l.trim().is_empty()) {
                println!("{last}");
            }
        }
        _ => {
            print!("{text}");
            println!("\nEvery check:");
            for m in &r.milestones {
                for c in &m.checks {
                    let line = format!(
                        "  {:<7} {} › {}: {}",
                        c.status.as_str(),
                        m.id,
                        c.name,
                        c.message.lines().next().unwrap_or("")
                    );
                    let line = report::sanitize::one_line(&line);
                    // One line per check, within 80 columns.
                    if line.chars().count() > 80 {
                        let cut: String = line.chars().take(79).collect();
                        println!("{cut}…");
                    } else {
                        println!("{line}");
                    }
                }
            }
        }
    }
}

/// Print a result as `format` asks. `dir` is the submission's folder as the user named it,
/// so GitHub annotations point at files from where the job runs.
pub fn print_result(r: &GradeResult, format: Format, dir: Option<&Path>) {
    match format {
        Format::Human => print!("{}", fit(&report::terminal::render(r, color_for(format)))),
        Format::Github => match dir
            .map(|d| d.to_string_lossy().into_owned())
            .filter(|d| !d.is_empty() && d != ".")
        {
            Some(d) => print!(
                "{}",
                report::terminal::github_in(r, d.trim_end_matches('/'))
            ),
            None => print!("{}", report::terminal::github(r)),
        },
        Format::Json => println!("{}", report::terminal::json(r)),
    }
}

/// Write the per-submission files that were asked for.
pub fn write_outputs(
    r: &GradeResult,
    json: Option<&Path>,
    junit: Option<&Path>,
    markdown: Option<&Path>,
) -> Result<(), CliError> {
    let io = |p: &Path, e: std::io::Error| {
        CliError::Fatal(Fatal::new(format!("cannot write {}: {e}", p.display())))
    };
    if let Some(p) = json {
        report::json::write(r, p).map_err(|e| io(p, e))?;
    }
    if let Some(p) = junit {
        report::atomic::write(p, report::junit::to_string(r)).map_err(|e| io(p, e))?;
    }
    if let Some(p) = markdown {
        report::atomic::write(p, report::markdown::render(r)).map_err(|e| io(p, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_wraps_prose_and_cuts_evidence_at_80_columns() {
        let long = format!("note: {}", "word ".repeat(40));
        let evidence = format!("    │ {}", "x".repeat(120));
        let coloured = format!("\x1b[1mTotal:\x1b[0m {}", "y ".repeat(30));
        let text = fit(&format!("short\n{long}\n{evidence}\n{coloured}\n"));
        for l in text.lines() {
            assert!(visible_width(l) <= COLUMNS, "{l}");
        }
        assert!(text.starts_with("short\nnote: word"));
        assert!(text.contains("\n  word"), "continuation indented: {text}");
        assert_eq!(text.matches("word").count(), 40);
        assert!(text.contains("x…"), "{text}");
        assert_eq!(visible_width("\x1b[31mred\x1b[0m"), 3);
        // No wrapped line starts with what GitHub would read as a workflow command.
        // 39 one-letter words fill 77 columns: `::error` is the word that would wrap.
        let forged = format!("{}::error file=x::owned ##[set-env]", "a ".repeat(39));
        for l in fit(&forged).lines() {
            let t = l.trim_start();
            assert!(!t.starts_with("::") && !t.starts_with("##"), "{l}");
        }
    }
}

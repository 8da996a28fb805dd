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
    let text = report::terminal::render(r, color);
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
        Format::Human => print!("{}", report::terminal::render(r, color_for(format))),
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
        std::fs::write(p, report::junit::to_string(r)).map_err(|e| io(p, e))?;
    }
    if let Some(p) = markdown {
        std::fs::write(p, report::markdown::render(r)).map_err(|e| io(p, e))?;
    }
    Ok(())
}

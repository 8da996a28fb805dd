//! What a command prints and the per-submission files it writes, in the format asked for.

use crate::errors::{CliError, Fatal};
use crate::report;
use crate::result::GradeResult;
use clap::ValueEnum;
use std::io::IsTerminal;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Human,
    /// Human summary plus `::error file=…,line=…::` annotations for GitHub Actions.
    Github,
    /// result.json on standard output.
    Json,
}

fn color_for(format: Format) -> bool {
    format == Format::Human
        && std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none()
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

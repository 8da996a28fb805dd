//! The command line: parse, pick a backend, dispatch. The work lives in the other modules.

use crate::errors::{CliError, Fatal};
use crate::exit;
use crate::grade::{self, Reference};
use crate::report::output::{Format, print_result, write_outputs};
use crate::setup::{BackendChoice, Requested, protected_dirs, resolve};
use crate::{rubric, submission};
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};

#[derive(Parser, Debug)]
#[command(
    name = "cugrade",
    version,
    about = "Auto-grader for GPU programming courses: compiles, runs and checks CUDA kernels"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Debug, Clone)]
struct Common {
    /// Where kernels run.
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendChoice,
    /// Seed for input generation; the default draws a fresh one and records it.
    #[arg(long)]
    seed: Option<u64>,
    /// What the terminal gets.
    #[arg(long, value_enum, default_value = "human")]
    format: Format,
    /// GPU ordinals to use (first one for `check`), e.g. `0,1`.
    #[arg(long, value_delimiter = ',')]
    gpus: Vec<usize>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Grade one submission (a .cu or .ptx file, or a directory) and print a summary.
    Check {
        #[arg(long)]
        rubric: PathBuf,
        submission: PathBuf,
        #[command(flatten)]
        common: Common,
        /// Write result.json here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write JUnit XML here.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Write Markdown feedback here.
        #[arg(long)]
        markdown: Option<PathBuf>,
        /// Also profile the kernels: Nsight Compute on a GPU, the emulator's counters otherwise.
        #[arg(long)]
        profile: bool,
    },
    /// Grade every submission in a cohort directory.
    Grade {
        #[arg(long)]
        rubric: PathBuf,
        cohort: PathBuf,
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        common: Common,
        /// Submissions graded at once (default 1; each still runs in its own workers).
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        /// Grade only shard K of N (1-based), e.g. `2/4`, to spread a cohort over machines.
        #[arg(long)]
        shard: Option<String>,
        /// Skip students whose result.json exists for the same submission and rubric.
        #[arg(long, conflicts_with = "regrade")]
        resume: bool,
        /// Grade everyone again even where results exist.
        #[arg(long)]
        regrade: bool,
    },
    /// Check rubric files, and that each rubric's reference kernels pass their own rubric.
    Validate {
        rubrics: Vec<PathBuf>,
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendChoice,
        /// Only check the files' schema and expressions (no kernels run).
        #[arg(long)]
        schema_only: bool,
    },
    /// Measure each rubric's CPU baselines on this machine and pin them for the course in
    /// `<rubric>.calibration.json` beside the rubric (grading then uses them everywhere).
    Calibrate {
        /// Rubric files (YAML) whose CPU baselines to measure.
        rubrics: Vec<PathBuf>,
    },
    /// Say what this machine offers: driver, GPUs, NVRTC, sandbox layers, and what is missing.
    Doctor,
    #[command(name = "__worker", hide = true)]
    Worker { config: String },
}

/// Parse the command line and run it; returns the exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    exit::OK
                }
                _ => exit::USAGE,
            };
        }
    };
    let result = match cli.command {
        Command::Worker { config } => return crate::worker::child::main(&config),
        Command::Doctor => Ok(crate::doctor::run()),
        Command::Calibrate { rubrics } => crate::calibrate::run(&rubrics),
        Command::Validate {
            rubrics,
            backend,
            schema_only,
        } => crate::validate::run(&rubrics, backend, schema_only),
        Command::Check {
            rubric,
            submission,
            common,
            json,
            junit,
            markdown,
            profile,
        } => check(
            &rubric,
            &submission,
            &common,
            json,
            junit,
            markdown,
            profile,
        ),
        Command::Grade {
            rubric,
            cohort,
            out,
            common,
            jobs,
            shard,
            resume,
            regrade,
        } => match shard.as_deref().map(parse_shard).transpose() {
            Err(e) => Err(CliError::Usage(e)),
            Ok(shard) => {
                let opts = crate::cohort::CohortOptions {
                    jobs: jobs.max(1),
                    shard,
                    resume: resume && !regrade,
                    format: common.format,
                };
                crate::cohort::run(&rubric, &cohort, &out, &common_options(&common), &opts)
            }
        },
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            e.exit_code()
        }
    }
}

fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("--shard takes K/N with 1 <= K <= N, got `{s}`");
    let (k, n) = s.split_once('/').ok_or_else(bad)?;
    let (k, n): (usize, usize) = (
        k.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if k == 0 || n == 0 || k > n {
        return Err(bad());
    }
    Ok((k, n))
}

fn common_options(c: &Common) -> Requested {
    Requested {
        backend: c.backend,
        seed: c.seed,
        gpus: c.gpus.clone(),
    }
}

fn check(
    rubric_path: &Path,
    sub_path: &Path,
    common: &Common,
    json: Option<PathBuf>,
    junit: Option<PathBuf>,
    markdown: Option<PathBuf>,
    profile: bool,
) -> Result<i32, CliError> {
    let rubric = rubric::load(rubric_path)?;
    let sub = submission::load(sub_path).map_err(|e| match e {
        submission::SubmissionError::Manifest(c) => CliError::Config(c),
        submission::SubmissionError::Other(m) => CliError::Usage(m),
    })?;
    submission::check_against(&sub, &rubric)?;
    let device = common.gpus.first().copied().unwrap_or(0);
    let mut opts = resolve(&common_options(common), device, true)?;
    opts.protected = protected_dirs(&[rubric_path, sub_path]);
    let mut reference =
        Reference::compile(&rubric, &opts).map_err(|e| Fatal::new(e.0.to_string()))?;
    let result = grade::grade(&rubric, &sub, &opts, &mut reference)
        .map_err(|e| Fatal::new(e.0.to_string()))?;
    write_outputs(
        &result,
        json.as_deref(),
        junit.as_deref(),
        markdown.as_deref(),
    )?;
    let dir = if sub_path.is_dir() {
        Some(sub_path)
    } else {
        sub_path.parent()
    };
    print_result(&result, common.format, dir);
    if profile {
        let text = crate::profile::section(&result, rubric_path, sub_path);
        // stdout holds exactly result.json under --format json.
        if common.format == Format::Json {
            eprint!("{text}");
        } else {
            print!("{text}");
        }
    }
    Ok(if result.all_passed() {
        exit::OK
    } else {
        exit::FAILED
    })
}

//! The command line: parse and dispatch. The work lives in the other modules.

use crate::errors::CliError;
use crate::exit;
use crate::report::output::{Format, Verbosity};
use crate::setup::{BackendChoice, Requested};
use clap::{CommandFactory, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "cugrade",
    version,
    about = "Auto-grader for GPU programming courses: compiles, runs and checks CUDA kernels \
             (.cu, .ptx, Numba or CuPy .py)",
    long_about = "Auto-grader for GPU programming courses: compiles, runs and checks GPU \
                  kernels (CUDA C++ .cu, PTX .ptx, Numba @cuda.jit or CuPy kernels in .py) against a YAML \
                  rubric, on the GPU or on cugrade's PTX emulator.\n\n\
                  Students: `cugrade init LAB` (or `cugrade init LAB --lang numba`) writes a \
                  starter, `cugrade check` grades it.",
    max_term_width = 80
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Debug, Clone)]
struct Common {
    /// Where kernels run: a GPU (cuda), the PTX emulator (emu), or cuda when usable (auto).
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendChoice,
    /// Seed for input generation; the default draws a fresh one and records it.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// What the terminal gets: a summary (human), the summary plus GitHub Actions
    /// annotations (github), or result.json (json).
    #[arg(long, value_enum, default_value = "human")]
    format: Format,
    /// GPU ordinals to use (first one for `check`), e.g. `0,1`.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    gpus: Vec<usize>,
    /// Without a GPU (emu), estimate each performance check's time on this GPU: h100
    /// (default, or $CUGRADE_ESTIMATE_GPU) or h200; `none` skips the estimates. Never a
    /// grade (docs/estimate.md).
    #[arg(long, value_name = "GPU", value_parser = parse_estimate_gpu)]
    estimate_gpu: Option<String>,
    /// A multi-GPU lab's rank count (2 to 8; default: the rubric's): on a GPU the first N of
    /// --gpus (else GPUs 0 to N-1), on the emulator N emulated devices with peer memory.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=8))]
    ranks: Option<u32>,
}

fn parse_estimate_gpu(s: &str) -> Result<String, String> {
    if s.eq_ignore_ascii_case(crate::estimate::gpu::NONE) {
        return Ok(crate::estimate::gpu::NONE.into());
    }
    crate::estimate::gpu::named(s).map(|g| g.id)
}

#[derive(clap::Args, Debug, Clone)]
pub struct CheckArgs {
    /// Rubric file (YAML), or the name of a lab built into cugrade (`vector-add`). Without it,
    /// the rubric that the submission's cugrade.yaml (or the one beside the file) names.
    #[arg(long, value_name = "FILE")]
    pub rubric: Option<PathBuf>,
    /// The submission: a .cu, .ptx or .py (Numba) file, or a folder of them.
    #[arg(default_value = ".", value_name = "SUBMISSION")]
    pub submission: PathBuf,
    /// Write result.json here (`-`: to stdout, as `--format json`).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write JUnit XML here.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write Markdown feedback here.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Write Gradescope's results.json here (e.g. /autograder/results/results.json).
    #[arg(long, value_name = "FILE")]
    pub gradescope: Option<PathBuf>,
    /// Write GitLab's Code Quality report here (gl-code-quality-report.json): one issue per
    /// failing finding, at its file and line.
    #[arg(long, value_name = "FILE")]
    pub codequality: Option<PathBuf>,
    /// Grade again each time a file of the submission (.cu, .cuh, .h, .ptx, .py,
    /// cugrade.yaml) or the rubric changes (Ctrl-C stops).
    #[arg(long)]
    pub watch: bool,
    /// Print only the total line (GitHub annotations and JSON are unaffected).
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Also print what was chosen (rubric, backend, seed) and every check, passing ones too.
    #[arg(short, long)]
    pub verbose: bool,
    /// Also profile the kernels: Nsight Compute on a GPU, the emulator's counters otherwise.
    #[arg(long)]
    pub profile: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Grade one submission (a .cu, .ptx or .py file, or a folder) and print a summary.
    Check {
        #[command(flatten)]
        args: CheckArgs,
        #[command(flatten)]
        common: Common,
    },
    /// Grade every submission in a cohort folder.
    Grade {
        /// Rubric file (YAML), or the name of a lab built into cugrade.
        #[arg(long, value_name = "FILE")]
        rubric: PathBuf,
        /// Folder of submissions: each subfolder, .cu/.ptx/.py file or .zip/.tar.gz archive is
        /// one student.
        cohort: PathBuf,
        /// Folder for the results (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        #[command(flatten)]
        common: Common,
        /// Submissions graded at once (default: one per GPU in --gpus, else 1; each still runs
        /// in its own workers).
        #[arg(long, value_name = "N")]
        jobs: Option<usize>,
        /// Grade only shard K of N (1-based), e.g. `2/4`, to spread a cohort over machines.
        #[arg(long, value_name = "K/N")]
        shard: Option<String>,
        /// Skip students whose result.json exists for the same submission and rubric.
        #[arg(long, conflicts_with = "regrade")]
        resume: bool,
        /// Grade everyone again even where results exist.
        #[arg(long)]
        regrade: bool,
        /// Starter code every student was given (file or directory; repeatable): excluded from
        /// the integrity matches, as the rubric's reference kernels are.
        #[arg(long)]
        starter: Vec<PathBuf>,
    },
    /// Combine the outputs of `grade --shard K/N` runs into one tree equal to an unsharded run.
    Merge {
        /// Where the combined tree goes (a new directory, not one of the shards).
        #[arg(long)]
        out: PathBuf,
        /// The shards' `--out` directories.
        #[arg(required = true)]
        shards: Vec<PathBuf>,
    },
    /// Check rubric files, and that each rubric's reference kernels pass their own rubric.
    Validate {
        /// Rubric files (YAML), or names of labs built into cugrade.
        #[arg(value_name = "RUBRIC")]
        rubrics: Vec<PathBuf>,
        /// Where the reference kernels run (see `check --backend`).
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendChoice,
        /// Only check the files' schema and expressions (no kernels run).
        #[arg(long)]
        schema_only: bool,
    },
    /// Grade a course's example submissions (each folder with an expected.yaml) and check
    /// each got the verdicts it promises; exit 1 when one did not.
    Test {
        /// The course's folder (rubrics/ and the examples below it).
        #[arg(value_name = "COURSE_DIR", default_value = ".")]
        course: PathBuf,
        /// Where the examples run (see `check --backend`); on a GPU, an expected.yaml's
        /// `gpu:` statuses apply.
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendChoice,
        /// The inputs' seed, the same for every example.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Measure each rubric's CPU baselines on this machine and pin them for the course in
    /// `<rubric>.calibration.json` beside the rubric (grading then uses them everywhere).
    Calibrate {
        /// Rubric files (YAML) whose CPU baselines to measure, or names of labs built into
        /// cugrade (their pins are kept in cugrade's cache on this machine).
        rubrics: Vec<PathBuf>,
    },
    /// Say what this machine offers (driver, GPUs, NVRTC, CUDA headers, Numba, sandbox) and
    /// what is missing; exit 3 when something the rubric needs is missing.
    Doctor {
        /// The rubric whose needs count (NVRTC, headers; Numba if it accepts .py kernels): a
        /// file or a built-in lab's name. Without it, the rubric the submission's cugrade.yaml
        /// names.
        #[arg(long, value_name = "FILE")]
        rubric: Option<PathBuf>,
        /// The submission folder whose cugrade.yaml and files count [default: .]; Numba is
        /// needed when it has .py kernels.
        #[arg(value_name = "SUBMISSION")]
        submission: Option<PathBuf>,
        /// Where kernels will run: with `cuda`, a GPU (and cuBLAS, where the rubric compares
        /// against it) is needed too.
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendChoice,
        /// First install what is needed and missing (NVRTC, CUDA's headers, Numba) from PyPI
        /// into cugrade's cache.
        #[arg(long)]
        install: bool,
    },
    /// Write a student starter for a lab: stub kernels (CUDA C++, Numba with --lang numba,
    /// CuPy with --lang cupy), cugrade.yaml and a README.
    Init {
        /// The lab (`cugrade init --list` lists them).
        #[arg(value_name = "LAB", required_unless_present_any = ["list", "rubric"],
              value_parser = LabName)]
        lab: Option<String>,
        /// Folder for the starter [default: ./LAB]; it may hold other files (a fresh clone),
        /// but not the starter's kernels or cugrade.yaml.
        #[arg(value_name = "DIR")]
        dir: Option<PathBuf>,
        /// List the labs built into this cugrade, with the languages each has starters in,
        /// and exit.
        #[arg(long)]
        list: bool,
        /// For an instructor: write the lab's rubric, reference and lab document into DIR
        /// (`rubrics/`, `reference-kernels/`, `docs/labs/`), to start a course from, instead
        /// of a student's starter.
        #[arg(long, conflicts_with = "lang")]
        course: bool,
        /// For a course's own lab: write the starter from this rubric file (its lab document,
        /// `docs/labs/NAME.md` beside the course's `rubrics/`, when there is one). Then DIR
        /// is the first argument [default: ./NAME].
        #[arg(long, value_name = "FILE", conflicts_with_all = ["list", "course"])]
        rubric: Option<PathBuf>,
        /// The language of the starter's kernels: CUDA C++ (LAB.cu), Numba @cuda.jit
        /// functions in Python (LAB.py), or CUDA C++ in a CuPy RawModule (LAB.py) [default:
        /// cuda; a Python function lab's is cupy].
        #[arg(long, value_enum)]
        lang: Option<crate::commands::init::starter::StarterLang>,
    },
    /// Print a shell completion script, e.g. `cugrade completions bash > ~/.local/share/bash-completion/completions/cugrade`.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), e.g. `cugrade man | man -l -`.
    Man {
        /// Write cugrade.1 and one page per subcommand (cugrade-check.1, ...) into this folder
        /// instead.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    #[command(name = "__worker", hide = true)]
    Worker { config: String },
    /// One launch of a graded kernel, for `check --profile` to run under Nsight Compute.
    #[command(name = "__profile-kernel", hide = true)]
    ProfileKernel { job: String },
    /// NCCL's all-reduce timed for a multi-GPU lab's check (`worker::nccl`).
    #[command(name = "__nccl-time", hide = true)]
    NcclTime { job: String },
}

/// The clap definition, for completions, the man page and tests.
pub fn command() -> clap::Command {
    Cli::command()
}

/// [`command`] as users may type it: without the hidden internal subcommands (`__worker`,
/// `__profile-kernel`). clap_complete's generators list every subcommand, hidden or not
/// (clap_complete 4.6 filters hidden arguments and values, not subcommands), and clap cannot
/// remove a subcommand, so the command is built again from the visible parts.
pub fn public_command() -> clap::Command {
    let full = command();
    let mut public = clap::Command::new("cugrade")
        .version(env!("CARGO_PKG_VERSION"))
        .max_term_width(80);
    if let Some(about) = full.get_about() {
        public = public.about(about.clone());
    }
    if let Some(about) = full.get_long_about() {
        public = public.long_about(about.clone());
    }
    for a in full
        .get_arguments()
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
    {
        public = public.arg(a.clone());
    }
    public.subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
}

/// Parse the command line and run it; returns the exit code.
pub fn main() -> i32 {
    keep_freed_memory();
    quiet_on_broken_pipe();
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
    let command = match cli.command {
        Command::Worker { config } => return crate::worker::child::main(&config),
        Command::ProfileKernel { job } => return crate::worker::profiled::main(&job),
        Command::NcclTime { job } => return crate::worker::nccl::main(&job),
        other => other,
    };
    // Ctrl-C or SIGTERM: end every worker and remove every temp folder before exiting.
    crate::worker::interrupt::install();
    let code = run_command(command);
    crate::worker::interrupt::wait_if_interrupted();
    crate::sandbox::scratch::remove_run_dir();
    code
}

/// glibc's malloc hands freed memory back to the kernel as soon as an arena's top grows past
/// 128 KiB, and serves blocks over 128 KiB (growing its threshold as it goes) with fresh
/// mappings. The emulator allocates and frees each block's registers, local and shared memory
/// per block from rayon's threads, and every launch and trial gets fresh buffers: most of a
/// check's time on the emulator went to the page faults that zero that memory again
/// (issue 29, perf: `exc_page_fault` under `memset`). Fixed thresholds keep freed memory for
/// reuse; allocations over 64 MiB (a large case's buffers) still get their own mapping,
/// returned when freed.
fn keep_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes malloc's tuning; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

/// A rubric argument as a path: the file, or a built-in lab's name written out (kept alive in
/// `keep` for the command's run).
fn rubric_path(
    given: PathBuf,
    keep: &mut Vec<crate::labs::Materialized>,
) -> Result<PathBuf, CliError> {
    let (path, lab) = crate::labs::rubric_argument(&given).map_err(CliError::Usage)?;
    keep.extend(lab);
    Ok(path)
}

/// `cugrade calibrate` of rubric files and built-in labs: a lab's pins go to cugrade's cache
/// (`Lab::calibration_path`), where the lab's rubric finds them.
fn calibrate(rubrics: Vec<PathBuf>) -> Result<i32, CliError> {
    let mut code = exit::OK;
    for r in rubrics {
        let (path, lab) = crate::labs::rubric_argument(&r).map_err(CliError::Usage)?;
        code = code.max(crate::commands::calibrate::run(std::slice::from_ref(
            &path,
        ))?);
        let built_in = lab
            .is_some()
            .then(|| crate::labs::find(&r.to_string_lossy()))
            .flatten();
        if let Some(lab) = built_in {
            let pinned = crate::measure::calibration::pinned_path(&path);
            let to = lab.calibration_path();
            let copied = to
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::copy(&pinned, &to).map(|_| ()));
            match copied {
                Ok(()) => println!(
                    "pinned for the built-in lab `{}` on this machine: {}",
                    lab.name,
                    to.display()
                ),
                Err(e) => {
                    return Err(CliError::Fatal(crate::errors::Fatal::new(format!(
                        "cannot keep the lab's calibration in {}: {e}",
                        to.display()
                    ))));
                }
            }
        }
    }
    Ok(code)
}

fn run_command(cmd: Command) -> i32 {
    // Built-in labs named where a rubric is expected, written out for the command's run.
    let mut keep: Vec<crate::labs::Materialized> = Vec::new();
    let result = run_with(cmd, &mut keep);
    drop(keep);
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            e.exit_code()
        }
    }
}

fn run_with(cmd: Command, keep: &mut Vec<crate::labs::Materialized>) -> Result<i32, CliError> {
    match cmd {
        Command::Doctor {
            rubric,
            submission,
            backend,
            install,
        } => crate::commands::doctor::run(&crate::commands::doctor::DoctorOptions {
            rubric: rubric.map(|r| rubric_path(r, keep)).transpose()?,
            submission,
            backend,
            install,
        }),
        Command::Calibrate { rubrics } => calibrate(rubrics),
        Command::Test {
            course,
            backend,
            seed,
        } => crate::commands::test::run(&crate::commands::test::TestOptions {
            course,
            backend: match backend {
                BackendChoice::Auto => "auto",
                BackendChoice::Cuda => "cuda",
                BackendChoice::Emu => "emu",
            }
            .to_string(),
            seed,
        }),
        Command::Validate {
            rubrics,
            backend,
            schema_only,
        } => {
            let rubrics = rubrics
                .into_iter()
                .map(|r| rubric_path(r, keep))
                .collect::<Result<Vec<_>, _>>()?;
            crate::commands::validate::run(&rubrics, backend, schema_only)
        }
        Command::Check { args, common } => {
            let verbosity = if args.quiet {
                Verbosity::Quiet
            } else if args.verbose {
                Verbosity::Verbose
            } else {
                Verbosity::Normal
            };
            // `--json -`: result.json on stdout, as `--format json` writes it (everything for
            // people then goes to stderr), not a file named `-`.
            let stdout_json = args.json.as_deref() == Some(std::path::Path::new("-"));
            let (json, format) = if stdout_json {
                (None, crate::report::output::Format::Json)
            } else {
                (args.json, common.format)
            };
            let opts = crate::commands::check::CheckOptions {
                rubric: args.rubric.map(|r| rubric_path(r, keep)).transpose()?,
                submission: args.submission,
                json,
                junit: args.junit,
                markdown: args.markdown,
                gradescope: args.gradescope,
                codequality: args.codequality,
                format,
                verbosity,
                requested: common_options(&common),
                profile: args.profile,
            };
            if args.watch {
                crate::commands::check::watch(&opts)
            } else {
                crate::commands::check::check(&opts)
            }
        }
        Command::Init {
            lab,
            dir,
            list: _,
            lang,
            course: _,
            rubric: Some(rubric),
        } => {
            // `cugrade init --rubric FILE DIR`: the one positional is the folder.
            let dir = dir.or(lab.map(PathBuf::from));
            crate::commands::init::run_course_rubric(&rubric, dir, lang)
        }
        Command::Init {
            lab,
            dir,
            list,
            lang,
            course,
            rubric: None,
        } => match (course, lab.as_deref().and_then(crate::labs::find)) {
            (true, Some(lab)) => {
                let dir = dir.unwrap_or_else(|| PathBuf::from("."));
                let written = lab.write_course(&dir).map_err(CliError::Usage)?;
                println!(
                    "wrote the {} lab for a course in {}:",
                    lab.name,
                    dir.display()
                );
                for f in &written {
                    println!("  {}", f.strip_prefix(&dir).unwrap_or(f).display());
                }
                println!(
                    "next: cugrade validate {}",
                    dir.join(format!("rubrics/{}.yaml", lab.name)).display()
                );
                Ok(exit::OK)
            }
            _ => crate::commands::init::run(lab.as_deref(), dir, list, lang),
        },
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut public_command(), "cugrade", &mut script);
            write_stdout(&script).map(|()| exit::OK)
        }
        Command::Man { out } => man(out),
        Command::Merge { out, shards } => crate::commands::merge::run(&out, &shards),
        Command::Grade {
            rubric,
            cohort,
            out,
            common,
            jobs,
            shard,
            resume,
            regrade,
            starter,
        } => match shard.as_deref().map(parse_shard).transpose() {
            Err(e) => Err(CliError::Usage(e)),
            Ok(shard) => {
                let opts = crate::commands::grade::CohortOptions {
                    jobs: jobs
                        .unwrap_or_else(|| crate::commands::grade::gpus::default_jobs(&common.gpus))
                        .max(1),
                    shard,
                    resume: resume && !regrade,
                    format: common.format,
                    starter,
                };
                let rubric = rubric_path(rubric, keep)?;
                crate::commands::grade::run(&rubric, &cohort, &out, &common_options(&common), &opts)
            }
        },
        _ => Ok(exit::USAGE), // the hidden subcommands: answered in `main`
    }
}

fn man(out: Option<PathBuf>) -> Result<i32, CliError> {
    let cmd = command();
    let fatal = |e: std::io::Error| CliError::Fatal(crate::errors::Fatal::new(e.to_string()));
    match out {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut page)
                .map_err(fatal)?;
            write_stdout(&page)?;
        }
        Some(dir) => {
            std::fs::create_dir_all(&dir).map_err(fatal)?;
            clap_mangen::generate_to(cmd, &dir).map_err(fatal)?;
        }
    }
    Ok(exit::OK)
}

/// Write `bytes` to stdout; a reader that went away ends the process as [`broken_pipe`] does.
fn write_stdout(bytes: &[u8]) -> Result<(), CliError> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => broken_pipe(),
        Err(e) => Err(CliError::Fatal(crate::errors::Fatal::new(format!(
            "cannot write to standard output: {e}"
        )))),
    }
}

/// End as a Unix filter does when its reader goes away (`cugrade man | head`): killed by
/// SIGPIPE, silently (the shell reports status 141 and prints nothing).
///
/// Rust ignores SIGPIPE so that a write to a closed pipe is an error instead; cugrade keeps it
/// ignored while it runs, because a worker that dies must not take the grader down with it
/// when the grader writes its next request. Only a write to cugrade's own stdout or stderr
/// ends up here.
pub fn broken_pipe() -> ! {
    // SAFETY: resetting a signal's disposition and raising it; nothing runs after it.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    std::process::exit(141)
}

/// `print!` and `eprint!` panic when their pipe is closed ("failed printing to stdout: Broken
/// pipe"): that one panic ends the process quietly through [`broken_pipe`]; every other panic
/// is reported as usual. Installed once, before anything prints.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if payload.starts_with("failed printing to std") && payload.contains("Broken pipe") {
            broken_pipe();
        }
        default(info);
    }));
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
        ranks: c.ranks.map(|n| n as usize),
        // The environment's default (CUGRADE_ESTIMATE_GPU) where the option is not given; an
        // unknown name there is said once and left for the default.
        estimate_gpu: c.estimate_gpu.clone().or_else(|| {
            let v = std::env::var("CUGRADE_ESTIMATE_GPU").ok()?;
            match parse_estimate_gpu(&v) {
                Ok(g) => Some(g),
                Err(e) => {
                    eprintln!(
                        "warning: CUGRADE_ESTIMATE_GPU={v} is not used: {e}; the default GPU is \
                         estimated instead"
                    );
                    None
                }
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Completions come from this: every visible subcommand with its arguments, the same
    /// top-level text and version, and none of the hidden ones.
    #[test]
    fn the_public_command_is_the_command_without_its_hidden_subcommands() {
        let full = command();
        let public = public_command();
        let names = |c: &clap::Command, hidden: bool| -> Vec<String> {
            c.get_subcommands()
                .filter(|s| hidden || !s.is_hide_set())
                .map(|s| s.get_name().to_string())
                .collect()
        };
        assert_eq!(names(&public, true), names(&full, false));
        assert!(names(&full, true).iter().any(|n| n == "__worker"));
        for s in public.get_subcommands() {
            let f = full.find_subcommand(s.get_name()).unwrap();
            let ids = |c: &clap::Command| -> Vec<String> {
                c.get_arguments().map(|a| a.get_id().to_string()).collect()
            };
            assert_eq!(ids(s), ids(f), "{}", s.get_name());
        }
        assert_eq!(
            public.get_about().map(ToString::to_string),
            full.get_about().map(ToString::to_string)
        );
        assert_eq!(public.get_version(), full.get_version());
        public.debug_assert();
    }

    /// Every argument and option of every subcommand says what it is for.
    #[test]
    fn every_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let builtin = matches!(a.get_id().as_str(), "help" | "version");
                if !builtin && a.get_help().is_none() && !cmd.is_hide_set() {
                    missing.push(format!("{path} {}", a.get_id()));
                }
            }
            for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                if sub.get_about().is_none() && sub.get_name() != "help" {
                    missing.push(format!("{path} {}", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&command(), "cugrade", &mut missing);
        assert!(missing.is_empty(), "no help text: {missing:?}");
        command().debug_assert();
    }
}

/// `cugrade init`'s first argument: a built-in lab's name (completed and listed in the help as
/// such), or with `--rubric`, the folder. An unknown lab is said by `init` with the list.
#[derive(Clone)]
struct LabName;

impl clap::builder::TypedValueParser for LabName {
    type Value = String;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        Ok(value.to_string_lossy().into_owned())
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            crate::labs::LABS
                .iter()
                .map(|l| clap::builder::PossibleValue::new(l.name)),
        ))
    }
}

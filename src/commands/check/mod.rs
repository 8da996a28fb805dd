//! `cugrade check`: one submission as a student runs it (the rubric from `--rubric` or from
//! the submission's `cugrade.yaml`, empty kernels reported as "not implemented yet",
//! `--watch` to grade again on every save).

mod watch;

use crate::commands::init::starter;
use crate::errors::{CliError, ConfigError, Fatal};
use crate::exit;
use crate::labs::{self, RubricSource};
use crate::pipeline::{self, Reference};
use crate::report::output::{Format, Verbosity, print_result_at};
use crate::report::outputs::{Kind, Outputs};
use crate::rubric::{self, LoadedRubric};
use crate::setup::{Requested, protected_dirs, resolve};
use crate::submission::{self, Submission};
use std::path::{Path, PathBuf};

/// What `cugrade check` was asked to do.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    pub rubric: Option<PathBuf>,
    pub submission: PathBuf,
    pub json: Option<PathBuf>,
    pub junit: Option<PathBuf>,
    pub markdown: Option<PathBuf>,
    /// Gradescope's results.json.
    pub gradescope: Option<PathBuf>,
    /// GitLab's Code Quality report.
    pub codequality: Option<PathBuf>,
    pub format: Format,
    pub verbosity: Verbosity,
    pub requested: Requested,
    /// `--profile`: print the kernels' explained profile after the summary.
    pub profile: bool,
}

/// The rubric to grade against, and the temp folder of a built-in lab, kept while grading.
pub(crate) struct Rubric {
    pub(crate) loaded: LoadedRubric,
    path: PathBuf,
    _lab: Option<labs::Materialized>,
}

/// A submission and, for an archive, the temporary folder it was unpacked into (kept while
/// grading).
struct Loaded {
    sub: Submission,
    _unpacked: Option<tempfile::TempDir>,
}

fn load_submission(path: &Path) -> Result<Loaded, CliError> {
    // `cugrade check` in a starter names `.`: the student is the folder's real name.
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let err = |e| match e {
        submission::SubmissionError::Manifest(c) => CliError::Config(c),
        submission::SubmissionError::Other(m) | submission::SubmissionError::Empty(m) => {
            CliError::Usage(m)
        }
    };
    // An archive (`bob.zip`, `bob.tar.gz`) is graded as `grade` grades a cohort's archive:
    // unpacked by a sandboxed worker, then read as a folder.
    let archive = real.is_file()
        && real
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(submission::archive::ArchiveKind::of)
            .is_some();
    if archive {
        let protected = protected_dirs(&[real.as_path()]);
        let (sub, dir) = submission::load_archive(&real, &protected).map_err(err)?;
        return Ok(Loaded {
            sub,
            _unpacked: Some(dir),
        });
    }
    let mut sub = submission::load(&real).map_err(err)?;
    submission::adopt_folder_manifest(&mut sub, &real).map_err(err)?;
    Ok(Loaded {
        sub,
        _unpacked: None,
    })
}

/// `--rubric FILE`, else what `cugrade.yaml` names.
pub(crate) fn find_rubric(given: Option<&Path>, sub: &Submission) -> Result<Rubric, CliError> {
    if let Some(p) = given {
        return Ok(Rubric {
            loaded: rubric::load(p)?,
            path: p.to_path_buf(),
            _lab: None,
        });
    }
    let Some(manifest) = &sub.manifest_path else {
        return Err(CliError::Usage(format!(
            "no --rubric given and `{}` has no cugrade.yaml naming one.\n\
             fix: pass --rubric FILE, or add `rubric: LAB` to cugrade.yaml (labs: {})",
            sub.root.display(),
            labs::names()
        )));
    };
    let Some(value) = &sub.manifest.rubric else {
        return Err(CliError::Usage(format!(
            "no --rubric given and `{}` names no rubric.\n\
             fix: pass --rubric FILE, or add `rubric: LAB` to it (labs: {})",
            manifest.display(),
            labs::names()
        )));
    };
    let dir = manifest.parent().unwrap_or(Path::new("."));
    match labs::resolve_manifest_rubric(value, dir) {
        Ok(RubricSource::File(p)) => Ok(Rubric {
            loaded: rubric::load_within(&p, Some(dir))?,
            path: p,
            _lab: None,
        }),
        Ok(RubricSource::Lab(lab)) => {
            let m = lab
                .materialize()
                .map_err(|e| Fatal::new(format!("cannot unpack the built-in lab: {e}")))?;
            Ok(Rubric {
                loaded: rubric::load(&m.rubric_path)?,
                path: m.rubric_path.clone(),
                _lab: Some(m),
            })
        }
        Err(msg) => {
            let text = std::fs::read_to_string(manifest).unwrap_or_default();
            let pos = rubric::locate::Locations::of(&text).value("rubric");
            Err(CliError::Config(ConfigError::new(
                manifest, pos, msg, &text,
            )))
        }
    }
}

/// The files `check`'s flags ask for. GitLab's Code Quality paths start at the repository's
/// root; a finding without a line goes to the submission's manifest, else its first source file.
fn outputs(o: &CheckOptions, sub: &Submission) -> Outputs {
    let dir = crate::report::output::repo_relative(if o.submission.is_dir() {
        o.submission.as_path()
    } else {
        o.submission.parent().unwrap_or(Path::new("."))
    });
    let fallback = sub
        .manifest_path
        .as_ref()
        .and(Some("cugrade.yaml".to_string()))
        .or_else(|| {
            sub.sources
                .iter()
                .chain(&sub.ptx)
                .chain(&sub.python)
                .map(|f| f.name.clone())
                .next()
        })
        .unwrap_or_default();
    Outputs::given([
        (Kind::Markdown, o.markdown.clone()),
        (Kind::Junit, o.junit.clone()),
        (Kind::Gradescope, o.gradescope.clone()),
        (Kind::CodeQuality { dir, fallback }, o.codequality.clone()),
        (Kind::Json, o.json.clone()),
    ])
}

/// Grade one submission once and print the result; returns the exit code.
pub fn check(o: &CheckOptions) -> Result<i32, CliError> {
    // A malformed rubric given on the command line is reported before the submission is read.
    let early = o.rubric.as_deref().map(rubric::load).transpose()?;
    let loaded = load_submission(&o.submission)?;
    let sub = &loaded.sub;
    let rubric = match early {
        Some(loaded) => Rubric {
            loaded,
            path: o.rubric.clone().unwrap_or_default(),
            _lab: None,
        },
        None => find_rubric(None, sub)?,
    };
    let r = &rubric.loaded;
    submission::check_against(sub, r)?;
    let device = o.requested.gpus.first().copied().unwrap_or(0);
    let stubs = starter::stubs(sub, r);
    let untouched = r
        .rubric
        .milestones
        .iter()
        .all(|m| stubs.contains_key(&m.kernel));
    // A Python function lab compiles nothing: no NVRTC to fetch for it.
    let function_lab = crate::commands::init::is_function_lab(r);
    let mut opts = resolve(&o.requested, device, !untouched && !function_lab)?;
    crate::setup::ranks(&mut opts, r, &o.requested)?;
    if o.verbosity == Verbosity::Verbose {
        // A built-in lab is named by its name (the file it was written to is temporary).
        let shown = labs::shown(&rubric.path);
        let rubric_named = if shown.contains(&format!("`{}`", r.rubric.assignment)) {
            shown
        } else {
            format!("{shown} ({})", r.rubric.assignment)
        };
        eprintln!(
            "rubric: {rubric_named}; submission: {} ({} file{}); backend: {} ({}); seed: {}",
            o.submission.display(),
            sub.sources.len() + sub.ptx.len() + sub.headers.len(),
            if sub.sources.len() + sub.ptx.len() + sub.headers.len() == 1 {
                ""
            } else {
                "s"
            },
            opts.backend.as_str(),
            opts.device_name,
            opts.seed
        );
    }
    let kept: crate::pipeline::Kept = Default::default();
    if o.profile {
        opts.keep_kernels = Some(kept.clone());
    }
    let result = if untouched {
        starter::untouched(r, sub, &stubs, &opts)
    } else {
        opts.protected = protected_dirs(&[rubric.path.as_path(), o.submission.as_path()]);
        let started = std::time::Instant::now();
        let mut reference =
            Reference::compile(r, &opts).map_err(|e| Fatal::new(e.0.to_string()))?;
        let reference_s = started.elapsed().as_secs_f64();
        let mut result = pipeline::grade(r, sub, &opts, &mut reference)
            .map_err(|e| Fatal::new(e.0.to_string()))?;
        // The reference's compile is this run's too (`grade` compiles it once per cohort).
        if let Some(p) = result.run.phases.as_mut() {
            p.compile_s += reference_s;
        }
        if let Some(s) = result.run.seconds.as_mut() {
            *s += reference_s;
        }
        starter::mark(&mut result, &stubs);
        result
    };
    let mut result = result;
    // Every output below shows the same text, cut where the student made it too long.
    crate::report::caps::cap_student_text(&mut result);
    outputs(o, sub)
        .write(&mut result, true)
        .map_err(Fatal::new)?;
    let dir = if o.submission.is_dir() {
        Some(o.submission.as_path())
    } else {
        o.submission.parent()
    };
    print_result_at(&result, o.format, dir, o.verbosity);
    if o.profile {
        let kept = kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let text = crate::commands::profile::section(&result, r, sub, &kept, &opts);
        let text = crate::report::output::fit(&text);
        // stdout holds exactly result.json under --format json.
        if o.format == Format::Json {
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

/// `check --watch`: grade, then grade again after every change to a source file of the
/// submission, until interrupted. A bad rubric or submission is reported and waited out.
pub fn watch(o: &CheckOptions) -> Result<i32, CliError> {
    let folder = if o.submission.is_dir() {
        o.submission.clone()
    } else {
        o.submission
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf()
    };
    let mut extra: Vec<PathBuf> = o.rubric.iter().cloned().collect();
    // A file given by name counts whatever its kind: an archive (`bob.zip`) saved again is
    // graded again too.
    if o.submission.is_file() {
        extra.push(o.submission.clone());
    }
    watch::run(&folder, &extra, || match check(o) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            e.exit_code()
        }
    })
}

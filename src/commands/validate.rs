//! `cugrade validate`: check rubric files, then grade each rubric's own reference kernels
//! against it and cross-check them with the CPU implementations.
//!
//! Every file given is checked, and every mistake found is reported (on stderr, each with its
//! `file:line:column`), not just the first: an instructor fixing a course's rubrics sees them
//! all in one run. Any mistake makes the exit code 2; the reference kernels of the rubrics
//! whose schema is sound still run.

use crate::errors::{CliError, Fatal};
use crate::exit;
use crate::setup::{BackendChoice, Requested, resolve};
use std::path::PathBuf;

pub fn run(paths: &[PathBuf], backend: BackendChoice, schema_only: bool) -> Result<i32, CliError> {
    if paths.is_empty() {
        return Err(CliError::Usage(
            "validate needs at least one rubric file".into(),
        ));
    }
    let mut loaded = Vec::new();
    let mut mistakes = 0usize;
    let mut bad_files = 0usize;
    for p in paths {
        match crate::rubric::load_all(p) {
            Ok(r) => {
                let n = r.rubric.milestones.len();
                println!(
                    "{}: schema ok ({n} milestone{}, {} points)",
                    crate::labs::shown(p),
                    if n == 1 { "" } else { "s" },
                    r.max_score()
                );
                for w in crate::rubric::baseline::warnings(&r) {
                    eprintln!("{}\n", w.as_warning());
                }
                loaded.push((p, r));
            }
            Err(errors) => {
                for e in &errors {
                    eprintln!("{e}\n");
                }
                mistakes += errors.len();
                bad_files += 1;
            }
        }
    }
    let mut ok = true;
    if !schema_only {
        for (p, r) in &loaded {
            let mut opts = resolve(
                &Requested {
                    backend,
                    seed: Some(1),
                    gpus: vec![],
                    estimate_gpu: None,
                },
                0,
                !crate::commands::init::is_function_lab(r),
            )?;
            opts.protected = crate::setup::protected_dirs(&[p.as_path()]);
            ok &= validate_reference(r, &opts).map_err(|e| Fatal::new(e.0.to_string()))?;
        }
    }
    if mistakes > 0 {
        eprintln!(
            "error: {mistakes} mistake{} in {bad_files} of {} rubric file{}",
            if mistakes == 1 { "" } else { "s" },
            paths.len(),
            if paths.len() == 1 { "" } else { "s" }
        );
        return Ok(exit::USAGE);
    }
    Ok(if ok { exit::OK } else { exit::FAILED })
}

/// `validate`: grade the reference file against its own rubric (kernels exist, run clean,
/// meet the speed bars on a GPU), then cross-check every reference output with the CPU
/// implementation where the contract names one. Prints what it finds; `Ok(true)` if clean.
fn validate_reference(
    rubric: &crate::rubric::LoadedRubric,
    opts: &crate::pipeline::Options,
) -> Result<bool, crate::pipeline::Infrastructure> {
    use crate::pipeline::{Infrastructure, Reference};
    use crate::result::Status;
    let sub = crate::submission::load(&rubric.reference_path)
        .map_err(|e| Infrastructure(e.to_string()))?;
    let mut reference = Reference::compile(rubric, opts)?;
    let result = crate::pipeline::grade(rubric, &sub, opts, &mut reference)?;
    let mut ok = result.all_passed();
    for m in &result.milestones {
        println!(
            "  {:<24} {:<8} {}/{}",
            m.id,
            m.status.as_str(),
            m.score,
            m.max_score
        );
        for c in m
            .checks
            .iter()
            .filter(|c| !matches!(c.status, Status::Pass | Status::Skipped))
        {
            println!("      {} {}: {}", c.status.as_str(), c.name, c.message);
        }
    }
    let plan = crate::pipeline::plan_for(rubric, &sub);
    ok &= crate::pipeline::reference_against_cpu(&plan, opts, &mut reference)?;
    Ok(ok)
}

//! `cugrade validate`: check rubric files, then grade each rubric's own reference kernels
//! against it and cross-check them with the CPU implementations.
//!
//! Every file given is checked, and every mistake found is reported (on stderr, each with its
//! `file:line:column`), not just the first: an instructor fixing a course's rubrics sees them
//! all in one run. Any mistake makes the exit code 2; the reference kernels of the rubrics
//! whose schema is sound still run.

use crate::errors::{CliError, ConfigError, Fatal, Pos};
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
            let req = Requested {
                backend,
                seed: Some(1),
                gpus: vec![],
                estimate_gpu: None,
                ranks: None,
            };
            let mut opts = resolve(&req, 0, !crate::commands::init::is_function_lab(r))?;
            crate::setup::ranks(&mut opts, r, &req)?;
            opts.protected = crate::setup::protected_dirs(&[p.as_path()]);
            let (clean, wrong) =
                validate_reference(r, &opts).map_err(|e| Fatal::new(e.0.to_string()))?;
            ok &= clean;
            if !wrong.is_empty() {
                for (e, note) in &wrong {
                    eprintln!("{e}\n{note}\n");
                }
                mistakes += wrong.len();
                bad_files += 1;
            }
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

/// A rubric mistake found by compiling its reference: the error at the rubric's line, and a
/// note at the reference kernel's.
type Mismatch = (ConfigError, String);

/// `validate`: grade the reference file against its own rubric (kernels exist, run clean,
/// meet the speed bars on a GPU), then cross-check every reference output with the CPU
/// implementation where the contract names one. Prints what it finds; `Ok((true, _))` if
/// clean. A reference kernel whose parameters are not its contract's is the rubric's mistake
/// (or the reference's): returned, at the contract's `params:` and the kernel's line, and the
/// cross-check (which would only fail on it) is not run.
fn validate_reference(
    rubric: &crate::rubric::LoadedRubric,
    opts: &crate::pipeline::Options,
) -> Result<(bool, Vec<Mismatch>), crate::pipeline::Infrastructure> {
    use crate::pipeline::{Infrastructure, Reference};
    use crate::result::Status;
    let sub = crate::submission::load(&rubric.reference_path)
        .map_err(|e| Infrastructure(e.to_string()))?;
    let mut reference = Reference::compile(rubric, opts)?;
    let result = crate::pipeline::grade(rubric, &sub, opts, &mut reference)?;
    let wrong = signature_mismatches(rubric, &result);
    if !wrong.is_empty() {
        return Ok((false, wrong));
    }
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
    Ok((ok, vec![]))
}

/// Milestones whose reference kernel failed the signature check (`cause: signature`), once
/// per contract and kernel: at the contract's `params:` in the rubric, with a note at the
/// kernel's definition in the reference file.
fn signature_mismatches(
    rubric: &crate::rubric::LoadedRubric,
    result: &crate::result::GradeResult,
) -> Vec<Mismatch> {
    let reference = std::fs::read_to_string(&rubric.reference_path).unwrap_or_default();
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for (m, r) in rubric.rubric.milestones.iter().zip(&result.milestones) {
        let Some(c) = r
            .checks
            .iter()
            .find(|c| c.cause.as_deref() == Some("signature"))
        else {
            continue;
        };
        let kernel = m.reference_kernel.as_deref().unwrap_or(&m.kernel);
        if !seen.insert((m.contract.clone(), kernel.to_string())) {
            continue;
        }
        let error = rubric.error_at_key(
            &format!("contracts.{}.params", m.contract),
            format!(
                "the reference kernel does not take the parameters of contract `{}`: {}; make \
                 the contract's `params:` match the reference kernel (or fix the reference)",
                m.contract, c.message
            ),
        );
        let note = ConfigError::new(
            &rubric.reference_path,
            definition(&reference, kernel, &rubric.reference_path),
            format!("the reference kernel `{kernel}` is defined here"),
            &reference,
        )
        .as_note();
        out.push((error, note));
    }
    out
}

/// Where `kernel` is defined in a reference file (CUDA C++, PTX or Python), comments aside.
fn definition(source: &str, kernel: &str, path: &std::path::Path) -> Option<Pos> {
    let name = regex::escape(kernel);
    let pattern = match path.extension().and_then(|e| e.to_str()) {
        Some("ptx") => format!(r"\.entry\s+({name})\b"),
        Some("py") => format!(r"(?m)^[ \t]*def[ \t]+({name})\s*\("),
        _ => format!(r"__global__[^;{{}}]*?\b({name})\s*\("),
    };
    let re = regex::Regex::new(&pattern).ok()?;
    // Comments blanked to spaces, so that offsets are the file's.
    let code = crate::commands::init::starter::blank_comments(source);
    let at = re.captures(&code)?.get(1)?.start();
    let before = &source[..at];
    Some(Pos {
        line: before.matches('\n').count() + 1,
        col: before.rsplit('\n').next().unwrap_or("").chars().count() + 1,
    })
}

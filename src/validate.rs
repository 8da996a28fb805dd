//! `cugrade validate`: check rubric files, then grade each rubric's own reference kernels
//! against it and cross-check them with the CPU implementations.

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
    let mut ok = true;
    for p in paths {
        let r = crate::rubric::load(p)?;
        let n = r.rubric.milestones.len();
        println!(
            "{}: schema ok ({n} milestone{}, {} points)",
            p.display(),
            if n == 1 { "" } else { "s" },
            r.max_score()
        );
        if schema_only {
            continue;
        }
        let mut opts = resolve(
            &Requested {
                backend,
                seed: Some(1),
                gpus: vec![],
                estimate_gpu: None,
            },
            0,
            true,
        )?;
        opts.protected = crate::setup::protected_dirs(&[p.as_path()]);
        ok &=
            crate::grade::validate_reference(&r, &opts).map_err(|e| Fatal::new(e.0.to_string()))?;
    }
    Ok(if ok { exit::OK } else { exit::FAILED })
}

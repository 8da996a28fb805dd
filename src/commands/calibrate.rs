//! `cugrade calibrate`: measure a rubric's CPU baselines on this machine and pin them for a
//! course, so that every grading machine and every run uses the same "x times the CPU" bar.
//! Writes `<rubric>.calibration.json` beside the rubric, which grading then reads (see
//! `measure::calibration`); commit it with the course's rubrics.

use crate::errors::{CliError, Fatal};
use crate::exit;
use crate::measure::calibration::{self, BaselineFile};
use crate::rubric::schema::Against;
use crate::rubric::{self, case_vars};
use std::path::PathBuf;

pub fn run(paths: &[PathBuf]) -> Result<i32, CliError> {
    if paths.is_empty() {
        return Err(CliError::Usage(
            "calibrate needs at least one rubric file".into(),
        ));
    }
    for p in paths {
        let r = rubric::load(p)?;
        let mut file = BaselineFile {
            cpu: calibration::cpu_model(),
            cugrade_version: env!("CARGO_PKG_VERSION").to_string(),
            written_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            ..Default::default()
        };
        for m in &r.rubric.milestones {
            let contract = r.contract(&m.contract);
            for perf in &m.performance {
                let (threads, what) = match perf.against {
                    Against::Cpu => (crate::baseline::Threads::Single, "cpu"),
                    Against::CpuParallel => (crate::baseline::Threads::Parallel, "cpu_parallel"),
                    _ => continue,
                };
                let Some(case) = r.performance_case(&perf.case) else {
                    continue;
                };
                let imp = contract.cpu.clone().ok_or_else(|| {
                    Fatal::new(format!(
                        "{}: contract `{}` has no CPU implementation",
                        crate::labs::shown(p),
                        m.contract
                    ))
                })?;
                let what = crate::pipeline::cpu_key_what(what, &imp, p);
                let key = calibration::key(&r.rubric.assignment, &what, &case.name, &case.vars);
                if file.baselines.contains_key(&key) {
                    continue;
                }
                let inv = rubric::args::resolve(&case.contract(contract), &case_vars(case))
                    .and_then(|a| crate::inputs::generate(&a, 1))
                    .map_err(|e| Fatal::new(format!("inputs for case {}: {e}", case.name)))?;
                let mut run = crate::pipeline::CpuRunner::start(&imp, p, threads, &[])
                    .map_err(|e| Fatal::new(format!("{}: {e}", p.display())))?;
                let vars = case_vars(case);
                let b = calibration::measure(|| Ok(run.call(&inv, &vars, threads)?.0))
                    .map_err(|e| Fatal::new(format!("CPU `{imp}` on {}: {e}", case.name)))?;
                println!(
                    "{}: {key}: {:.3} ms (minimum of {} runs, {:.3}..{:.3} ms)",
                    crate::labs::shown(p),
                    b.ms,
                    b.runs_ms.len(),
                    b.ms,
                    b.runs_ms.iter().copied().fold(0.0, f64::max)
                );
                file.baselines.insert(key, b);
            }
        }
        if file.baselines.is_empty() {
            println!("{}: no CPU baselines to calibrate", crate::labs::shown(p));
            continue;
        }
        let target = calibration::pinned_path(p);
        calibration::write(&target, &file).map_err(Fatal::new)?;
        // A built-in lab's pins are kept in cugrade's cache (the caller says where), not in
        // the temporary folder its rubric was written to.
        if crate::labs::shown(p) == p.display().to_string() {
            println!(
                "{}: pinned for {} in {}",
                p.display(),
                file.cpu,
                target.display()
            );
        } else {
            println!("{}: measured on {}", crate::labs::shown(p), file.cpu);
        }
    }
    Ok(exit::OK)
}

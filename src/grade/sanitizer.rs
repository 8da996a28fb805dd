//! Sanitizer checks on every backend. On the emulator they come with every run; on a GPU the
//! kernel may be right by luck (a race the hardware's timing hides, a barrier in divergent code
//! that happens not to hang), so after the GPU's correctness cases the smallest ones run again
//! on the PTX emulator, whose memcheck, racecheck, synccheck and initcheck see every access.
//! The check says which tool was used. docs/sanitizers.md has the table of what runs where.

use super::correctness::sanitizer_check;
use super::run::{RunError, variant};
use super::run::{describe_run_error, run_on};
use super::worker_options;
use crate::backend::{BackendKind, LaunchDims};
use crate::inputs;
use crate::result::{Check, CheckKind};
use crate::rubric::schema::{Case, Milestone};
use crate::rubric::{self, LoadedRubric, case_vars};
use crate::submission::{self, Submission};
use crate::worker::protocol::{Request, Response};
use crate::worker::{Role, Worker};
use std::path::PathBuf;
use std::time::Duration;

/// How many of the smallest correctness cases the emulator re-runs.
pub const CASES: usize = 2;
/// Cases whose buffers hold more elements than this are too slow to interpret; skipped.
pub const MAX_ELEMENTS: usize = 1 << 20;
/// What the report names as the tool that ran.
pub const TOOL: &str = "the PTX emulator's memcheck, racecheck, synccheck and initcheck";

/// The smallest correctness cases of a milestone (by the elements its buffers hold), at most
/// [`CASES`], none over [`MAX_ELEMENTS`].
pub fn smallest_cases<'a>(rubric: &'a LoadedRubric, m: &Milestone) -> Vec<&'a Case> {
    let contract = rubric.contract(&m.contract);
    let mut sized: Vec<(usize, &Case)> = rubric
        .cases_for(m)
        .into_iter()
        .map(|case| (rubric::case_elements(contract, case), case))
        .filter(|(n, _)| *n <= MAX_ELEMENTS)
        .collect();
    sized.sort_by_key(|(n, _)| *n);
    sized.into_iter().take(CASES).map(|(_, c)| c).collect()
}

/// One case's name and the emulator's allocations after it (for the cross-check).
pub type CaseOutputs = (String, Vec<Vec<u8>>);

/// Run milestone `m`'s kernel from `ptx` on the PTX emulator for its smallest correctness cases
/// and turn what the emulator's sanitizers saw into checks: one failing `sanitizer` check per
/// distinct problem (tool and source line), or one passing check naming the tool and cases.
/// The emulator's own limits (an instruction it lacks, a case too slow to interpret) give a
/// skipped check, never a verdict against the student. Also returns each case's output
/// allocations from the emulator (for the cross-check with the GPU's, `grade::cross`).
pub fn on_emulator(
    rubric: &LoadedRubric,
    m: &Milestone,
    sub: &Submission,
    ptx: &str,
    numba: Option<&crate::rubric::convention::Signature>,
    seed: u64,
    protected: &[PathBuf],
) -> (Vec<Check>, Vec<CaseOutputs>) {
    let mut outputs = Vec::new();
    let checks = emulate(rubric, m, sub, ptx, numba, seed, protected, &mut outputs);
    (checks, outputs)
}

/// One list of sanitizer checks from the emulator's pass and compute-sanitizer's (when it
/// ran): a finding both made (same tool and source line) is listed once, saying so.
pub fn merge_findings(emulator: Vec<Check>, gpu: Option<Vec<Check>>) -> Vec<Check> {
    let Some(mut gpu) = gpu else { return emulator };
    for c in emulator {
        let twin = gpu.iter_mut().find(|g| {
            g.status == crate::result::Status::Fail
                && c.status == crate::result::Status::Fail
                && g.name == c.name
        });
        match twin {
            Some(g) => g
                .message
                .push_str("; the PTX emulator's check found it too"),
            None => gpu.push(c),
        }
    }
    gpu
}

#[allow(clippy::too_many_arguments)]
fn emulate(
    rubric: &LoadedRubric,
    m: &Milestone,
    sub: &Submission,
    ptx: &str,
    numba: Option<&crate::rubric::convention::Signature>,
    seed: u64,
    protected: &[PathBuf],
    outputs: &mut Vec<(String, Vec<Vec<u8>>)>,
) -> Vec<Check> {
    let name = "sanitizer (emulator)";
    let cases = smallest_cases(rubric, m);
    if cases.is_empty() {
        return vec![Check::skipped(
            CheckKind::Sanitizer,
            name,
            "no correctness case is small enough to run on the PTX emulator",
        )];
    }
    let mut w = match Worker::spawn(&worker_options(protected, Role::Run, BackendKind::Emu, 0)) {
        Ok(w) => w,
        Err(e) => {
            return vec![Check::skipped(
                CheckKind::Sanitizer,
                name,
                format!("the PTX emulator could not start: {e}"),
            )];
        }
    };
    match w.call(&Request::Load, &[ptx.as_bytes()], Duration::from_secs(60)) {
        Ok((Response::Loaded { error: None }, _)) => {}
        Ok((Response::Loaded { error: Some(e) }, _)) => {
            return vec![Check::skipped(
                CheckKind::Sanitizer,
                name,
                format!("not run: the PTX emulator cannot run this module ({e})"),
            )];
        }
        other => {
            return vec![Check::skipped(
                CheckKind::Sanitizer,
                name,
                format!(
                    "not run: the PTX emulator did not load the module ({})",
                    match other {
                        Ok((r, _)) => variant(&r).to_string(),
                        Err(e) => e.to_string(),
                    }
                ),
            )];
        }
    }
    let contract = rubric.contract(&m.contract);
    let launch = if rubric.rubric.allow_launch_override {
        submission::launch_for(sub, &m.kernel, &contract.launch)
    } else {
        contract.launch.clone()
    };
    // The emulator interprets: give it ten times a GPU launch's deadline.
    let limit = Duration::from_secs_f64(rubric.rubric.timeouts.launch_s * 10.0);
    let mut out: Vec<Check> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut ran: Vec<&str> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    for case in &cases {
        let vars = case_vars(case);
        let dims: LaunchDims = match rubric::eval_launch(&launch, &vars) {
            Ok(d) => d,
            // The GPU run already reported a bad launch.
            Err(_) => continue,
        };
        let inv = match inputs::generate(contract, &vars, inputs::trial_seed(seed, &case.name, 0)) {
            Ok(i) => i,
            Err(e) => {
                skipped.push(format!("{}: {e}", case.name));
                continue;
            }
        };
        // A Numba kernel takes its arrays as Numba's array structs, as on the GPU.
        let inv = match numba {
            None => inv,
            Some(sig) => match inputs::numba_invocation(&inv, contract, sig) {
                Ok(i) => i,
                Err(e) => {
                    skipped.push(format!("{}: Numba arguments: {e}", case.name));
                    continue;
                }
            },
        };
        let report = match run_on(&mut w, &m.kernel, &inv, dims, limit, None) {
            Ok(r) => {
                outputs.push((case.name.clone(), r.allocations));
                r.report
            }
            Err(RunError::Backend(_, report)) if !report.diagnostics.is_empty() => *report,
            Err(e) => {
                // A timeout or fault here is the emulator's (the GPU ran this case): say so,
                // and carry on in a fresh worker if this one is gone.
                skipped.push(format!("{}: {}", case.name, describe_run_error(&e)));
                match Worker::spawn(&worker_options(protected, Role::Run, BackendKind::Emu, 0)) {
                    Ok(fresh) => {
                        w = fresh;
                        if !matches!(
                            w.call(&Request::Load, &[ptx.as_bytes()], Duration::from_secs(60)),
                            Ok((Response::Loaded { error: None }, _))
                        ) {
                            break;
                        }
                    }
                    Err(_) => break,
                }
                continue;
            }
        };
        ran.push(&case.name);
        for d in &report.diagnostics {
            let key = (
                d.tool.clone(),
                d.file.clone(),
                d.line,
                d.instruction.clone(),
            );
            if seen.insert(key) {
                let mut c = sanitizer_check(d, &case.name);
                c.message = format!("{} (on the PTX emulator, after the GPU run)", c.message);
                out.push(c);
            }
        }
    }
    if ran.is_empty() {
        return vec![Check::skipped(
            CheckKind::Sanitizer,
            name,
            format!(
                "not run: the PTX emulator could not run the smallest cases ({})",
                skipped.join("; ")
            ),
        )];
    }
    if out.is_empty() {
        let mut c = Check::pass(
            CheckKind::Sanitizer,
            name,
            format!(
                "{TOOL} found nothing on case{} {}",
                if ran.len() > 1 { "s" } else { "" },
                ran.join(", ")
            ),
        );
        if !skipped.is_empty() {
            c = c.with_details(format!("not run: {}", skipped.join("; ")));
        }
        out.push(c);
    }
    out
}

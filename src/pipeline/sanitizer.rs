//! Sanitizer checks on every backend. On the emulator they come with every run; on a GPU the
//! kernel may be right by luck (a race the hardware's timing hides, a barrier in divergent code
//! that happens not to hang), so after the GPU's correctness cases the smallest ones run again
//! on the PTX emulator, whose memcheck, racecheck, synccheck and initcheck see every access.
//! The check says which tool was used. docs/sanitizers.md has the table of what runs where.

use super::context::{Ctx, Kernel, worker_options};
use super::reference::Reference;
use super::run::{RunError, describe_run_error, run_on};
use super::{cross, gpu_sanitizer};
use crate::backend::BackendKind;
use crate::hints;
use crate::inputs;
use crate::result::{Check, CheckKind, Flag};
use crate::rubric::convention::Signature;
use crate::rubric::plan::{CasePlan, MilestonePlan};
use crate::worker::{Client, Role};
use std::collections::{BTreeSet, HashMap};
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
pub fn smallest_cases(plan: &MilestonePlan) -> Vec<&CasePlan> {
    let mut sized: Vec<&CasePlan> = plan
        .cases
        .iter()
        .filter(|c| c.elements <= MAX_ELEMENTS)
        .collect();
    sized.sort_by_key(|c| c.elements);
    sized.into_iter().take(CASES).collect()
}

/// The sanitizer stage (cuda backend): the smallest cases again on the PTX emulator (its
/// sanitizers see every access), and under compute-sanitizer on the GPU where it is installed;
/// the emulator's outputs are compared with the GPU's on the same inputs (`cross`).
pub(super) fn stage(
    ctx: &Ctx,
    kernel: &Kernel,
    reference: &mut Reference,
    gpu_outputs: &HashMap<String, Vec<Vec<u8>>>,
) -> (Vec<Check>, Vec<Flag>) {
    let (found, emulated) = on_emulator(
        ctx.plan,
        kernel.ptx,
        kernel.numba.as_ref(),
        ctx.opts.seed,
        &ctx.opts.protected,
    );
    let on_gpu = crate::worker::nsight::find_tool("compute-sanitizer")
        .map(|cs| gpu_sanitizer::on_gpu(&cs, ctx, kernel));
    let checks = merge_findings(found, on_gpu);
    (checks, cross::flags(ctx, reference, gpu_outputs, &emulated))
}

/// One case's name and the emulator's allocations after it (for the cross-check).
pub type CaseOutputs = (String, Vec<Vec<u8>>);

/// Run milestone `m`'s kernel from `ptx` on the PTX emulator for its smallest correctness cases
/// and turn what the emulator's sanitizers saw into checks: one failing `sanitizer` check per
/// distinct problem (tool and source line), or one passing check naming the tool and cases.
/// The emulator's own limits (an instruction it lacks, a case too slow to interpret) give a
/// skipped check, never a verdict against the student. Also returns each case's output
/// allocations from the emulator (for the cross-check with the GPU's, `pipeline::cross`).
pub fn on_emulator(
    plan: &MilestonePlan,
    ptx: &str,
    numba: Option<&Signature>,
    seed: u64,
    protected: &[PathBuf],
) -> (Vec<Check>, Vec<CaseOutputs>) {
    let mut outputs = Vec::new();
    let checks = emulate(plan, ptx, numba, seed, protected, &mut outputs);
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
        const TOO: &str = "; the PTX emulator's check found it too";
        match twin {
            // Said once, however many of the emulator's findings are at that line.
            Some(g) if g.message.ends_with(TOO) => {}
            Some(g) => g.message.push_str(TOO),
            None => gpu.push(c),
        }
    }
    gpu
}

const NAME: &str = "sanitizer (emulator)";

fn emulate(
    plan: &MilestonePlan,
    ptx: &str,
    numba: Option<&Signature>,
    seed: u64,
    protected: &[PathBuf],
    outputs: &mut Vec<CaseOutputs>,
) -> Vec<Check> {
    let cases = smallest_cases(plan);
    if cases.is_empty() {
        return vec![Check::skipped(
            CheckKind::Sanitizer,
            NAME,
            "no correctness case is small enough to run on the PTX emulator",
        )];
    }
    let mut w = match emulator(ptx, protected) {
        Ok(w) => w,
        Err(c) => return vec![*c],
    };
    // The emulator interprets: give it ten times a GPU launch's deadline.
    let limit = Duration::from_secs_f64(plan.timeouts.launch_s * 10.0);
    let mut out: Vec<Check> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut ran: Vec<&str> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    for case in &cases {
        // The GPU run already reported a bad launch.
        let Ok(dims) = case.launch.clone() else {
            continue;
        };
        let inv = match case_inputs(plan, case, numba, seed) {
            Ok(i) => i,
            Err(e) => {
                skipped.push(e);
                continue;
            }
        };
        let report = match run_on(&mut w, &plan.kernel, &inv, dims, limit, None) {
            Ok(r) => {
                outputs.push((case.name.clone(), r.allocations));
                r.report
            }
            Err(RunError::Backend(_, report)) if !report.diagnostics.is_empty() => *report,
            Err(e) => {
                // A timeout or fault here is the emulator's (the GPU ran this case): say so,
                // and carry on in a fresh worker if this one is gone.
                skipped.push(format!("{}: {}", case.name, describe_run_error(&e)));
                match emulator(ptx, protected) {
                    Ok(fresh) => w = fresh,
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
    summary(out, &ran, &skipped)
}

/// A case's inputs as the kernel takes them: a Numba kernel its arrays as Numba's array
/// structs, as on the GPU.
fn case_inputs(
    plan: &MilestonePlan,
    case: &CasePlan,
    numba: Option<&Signature>,
    seed: u64,
) -> Result<inputs::Invocation, String> {
    let inv = inputs::generate(
        &plan.contract,
        &case.vars,
        inputs::trial_seed(seed, &case.name, 0),
    )
    .map_err(|e| format!("{}: {e}", case.name))?;
    match numba {
        None => Ok(inv),
        Some(sig) => inputs::numba_invocation(&inv, &plan.contract, sig)
            .map_err(|e| format!("{}: Numba arguments: {e}", case.name)),
    }
}

/// An emulator worker with the module loaded, or the skipped check saying why not.
fn emulator(ptx: &str, protected: &[PathBuf]) -> Result<Client, Box<Check>> {
    let skipped = |why: String| Box::new(Check::skipped(CheckKind::Sanitizer, NAME, why));
    let mut w = Client::spawn(&worker_options(protected, Role::Run, BackendKind::Emu, 0))
        .map_err(|e| skipped(format!("the PTX emulator could not start: {e}")))?;
    match w.load(ptx, Duration::from_secs(60)) {
        Ok(Ok(())) => Ok(w),
        Ok(Err(e)) => Err(skipped(format!(
            "not run: the PTX emulator cannot run this module ({e})"
        ))),
        Err(e) => Err(skipped(format!(
            "not run: the PTX emulator did not load the module ({e})"
        ))),
    }
}

/// The stage's checks: the findings, else one passing check naming the tool and cases (or a
/// skipped one when no case ran).
fn summary(mut out: Vec<Check>, ran: &[&str], skipped: &[String]) -> Vec<Check> {
    if ran.is_empty() {
        return vec![Check::skipped(
            CheckKind::Sanitizer,
            NAME,
            format!(
                "not run: the PTX emulator could not run the smallest cases ({})",
                skipped.join("; ")
            ),
        )];
    }
    if out.is_empty() {
        let mut c = Check::pass(
            CheckKind::Sanitizer,
            NAME,
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

/// A sanitizer finding of the backend (or the emulator after the GPU) as a check.
pub(super) fn sanitizer_check(d: &crate::backend::Diagnostic, case: &str) -> Check {
    let location = match (&d.file, d.line) {
        (Some(f), Some(l)) => Some(format!("{f}:{l}")),
        _ => None,
    };
    let hint = match d.tool.as_str() {
        "racecheck" => hints::RACE,
        "synccheck" => hints::BARRIER_DIVERGENCE,
        "memcheck" => hints::OUT_OF_BOUNDS,
        "initcheck" => {
            "Shared memory is read before any thread wrote it: initialise it, and put a __syncthreads() between the writes and the reads."
        }
        _ => hints::WRONG_RESULTS,
    };
    let more = if d.repeats > 0 {
        format!(" (and {} more times)", d.repeats)
    } else {
        String::new()
    };
    Check::fail(
        CheckKind::Sanitizer,
        format!("{} {}", d.tool, location.clone().unwrap_or_default())
            .trim()
            .to_string(),
        format!(
            "{}: {} at thread ({},{},{}) of block ({},{},{}){more}",
            d.tool,
            d.message,
            d.thread[0],
            d.thread[1],
            d.thread[2],
            d.block[0],
            d.block[1],
            d.block[2]
        ),
    )
    .with_location(location)
    .with_case(case.to_string())
    .with_hint(hint)
    .with_cause(d.tool.clone())
    .with_details(format!("PTX: {}", d.instruction))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_both_made_is_listed_once_and_says_so_once() {
        let fail = |name: &str| Check::fail(CheckKind::Sanitizer, name, "memcheck: invalid read");
        let gpu = vec![fail("memcheck k.cu:3")];
        // The emulator saw the same line on two cases, and another line once.
        let emulator = vec![
            fail("memcheck k.cu:3"),
            fail("memcheck k.cu:3"),
            fail("racecheck k.cu:9"),
        ];
        let merged = merge_findings(emulator, Some(gpu));
        assert_eq!(merged.len(), 2, "{merged:#?}");
        assert_eq!(
            merged[0].message,
            "memcheck: invalid read; the PTX emulator's check found it too"
        );
        assert_eq!(merged[1].name, "racecheck k.cu:9");
        // Without compute-sanitizer, the emulator's findings as they are.
        assert_eq!(merge_findings(vec![fail("x")], None).len(), 1);
    }
}

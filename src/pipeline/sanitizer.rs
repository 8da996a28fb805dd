//! Sanitizer checks on every backend. On the emulator they come with every run; on a GPU the
//! kernel may be right by luck (a race the hardware's timing hides, a barrier in divergent code
//! that happens not to hang), so after the GPU's correctness cases the smallest ones run again
//! on the PTX emulator, whose memcheck, racecheck, synccheck and initcheck see every access.
//! The check says which tool was used. docs/sanitizers.md has the table of what runs where.

use super::context::{Ctx, Kernel};
use super::reference::Reference;
use super::run::{RunError, describe_run_error, run_on};
use super::{cross, timed_phase};
use crate::hints;
use crate::inputs;
use crate::result::{Check, CheckKind, Flag, Phase, Phases};
use crate::rubric::convention::Signature;
use crate::rubric::plan::{CasePlan, MilestonePlan};
use crate::worker::Client;
use crate::worker::pool::Workers;
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
/// sanitizers see every access), beside compute-sanitizer's findings on the GPU (`gpu`, from
/// `gpu_sanitizer`'s batch, when it ran); the emulator's outputs are compared with the GPU's
/// on the same inputs (`cross`).
pub(super) fn stage(
    ctx: &Ctx,
    kernel: &Kernel,
    reference: &mut Reference,
    gpu_outputs: &HashMap<String, Vec<Vec<u8>>>,
    gpu: Option<Vec<Check>>,
    emulator: &mut Option<Client>,
    phases: &mut Phases,
) -> (Vec<Check>, Vec<Flag>) {
    let (found, emulated) = timed_phase(phases, Phase::EmulatorSanitizer, || {
        on_emulator(
            ctx.plan,
            kernel.ptx,
            kernel.numba.as_ref(),
            ctx.opts.seed,
            &ctx.opts.protected,
            emulator,
        )
    });
    let checks = merge_findings(found, gpu);
    let mut flags = timed_phase(phases, Phase::EmulatorSanitizer, || {
        cross::flags(ctx, reference, gpu_outputs, &emulated)
    });
    flags.extend(disagreements(&ctx.plan.milestone.id, &checks));
    (checks, flags)
}

pub use super::cross::CaseOutputs;

/// Run milestone `m`'s kernel from `ptx` on the PTX emulator for its smallest correctness cases
/// and turn what the emulator's sanitizers saw into checks: one failing `sanitizer` check per
/// distinct problem (tool and source line), or one passing check naming the tool and cases.
/// The emulator's own limits (an instruction it lacks, a case too slow to interpret) give a
/// skipped check, never a verdict against the student. Also returns each case's output
/// allocations from the emulator (for the cross-check with the GPU's, `pipeline::cross`).
/// `worker`: the student's emulator worker, kept across milestones (started when needed).
pub fn on_emulator(
    plan: &MilestonePlan,
    ptx: &str,
    numba: Option<&Signature>,
    seed: u64,
    protected: &[PathBuf],
    worker: &mut Option<Client>,
) -> (Vec<Check>, Vec<CaseOutputs>) {
    let mut outputs = Vec::new();
    let checks = emulate(plan, ptx, numba, seed, protected, worker, &mut outputs);
    (checks, outputs)
}

/// One list of sanitizer checks from the emulator's pass and compute-sanitizer's (when it
/// ran): a finding both made (same tool and source line) is listed once, saying so. A finding
/// only one of them made still fails (docs/sanitizers.md, "When the two disagree"): each sees
/// what the other cannot (compute-sanitizer the code the GPU runs, at the GPU's timing; the
/// emulator every access of the program as written, shared-memory initialization included).
/// Its message says what the other saw, so that the student reads both views.
pub fn merge_findings(emulator: Vec<Check>, gpu: Option<Vec<Check>>) -> Vec<Check> {
    use crate::result::Status;
    let Some(mut gpu) = gpu else { return emulator };
    let ran = |checks: &[Check]| checks.iter().any(|c| c.status != Status::Skipped);
    let (emu_ran, gpu_ran) = (ran(&emulator), ran(&gpu));
    const TOO: &str = "; the PTX emulator's check found it too";
    let mut twins = vec![false; gpu.len()];
    let mut only_emulator = Vec::new();
    for c in emulator {
        let twin = gpu
            .iter()
            .position(|g| g.status == Status::Fail && c.status == Status::Fail && g.name == c.name);
        match twin {
            // Said once, however many of the emulator's findings are at that line.
            Some(i) if twins[i] => {}
            Some(i) => {
                twins[i] = true;
                gpu[i].message.push_str(TOO);
            }
            None => only_emulator.push(c),
        }
    }
    for (g, twin) in gpu.iter_mut().zip(&twins) {
        if g.status == Status::Fail && !twin && emu_ran {
            g.message.push_str(
                "; the PTX emulator ran the same case and saw no such access in the program as written (a finding of the GPU's code and timing only)",
            );
        }
    }
    for c in &mut only_emulator {
        if c.status == Status::Fail && gpu_ran {
            c.message.push_str(
                "; compute-sanitizer on the GPU found nothing there (the emulator checks every access of the program as written, which the GPU's tools do not all see)",
            );
        }
    }
    gpu.extend(only_emulator);
    gpu
}

/// Findings only one of the two sanitizers made, as flags for the instructor: the grade stands
/// (a finding fails the milestone either way), but a disagreement is worth a look.
pub fn disagreements(milestone: &str, checks: &[Check]) -> Vec<Flag> {
    checks
        .iter()
        .filter(|c| c.kind == CheckKind::Sanitizer && c.status == crate::result::Status::Fail)
        .filter(|c| {
            c.message
                .contains("the PTX emulator ran the same case and saw no such access")
                || c.message
                    .contains("compute-sanitizer on the GPU found nothing there")
        })
        .map(|c| Flag {
            kind: "sanitizers-disagree".into(),
            milestone: Some(milestone.to_string()),
            location: c.location.clone(),
            message: format!(
                "only one of the two sanitizers reports `{}`: {}",
                c.name, c.message
            ),
        })
        .collect()
}

const NAME: &str = "sanitizer (emulator)";

fn emulate(
    plan: &MilestonePlan,
    ptx: &str,
    numba: Option<&Signature>,
    seed: u64,
    protected: &[PathBuf],
    slot: &mut Option<Client>,
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
    let mut w = match emulator(ptx, protected, slot.take()) {
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
        let Ok(then) = plan.then(case) else {
            continue;
        };
        let report = match run_on(&mut w, &plan.kernel, &inv, dims, &then, limit, None) {
            Ok(r) => {
                outputs.push((case.name.clone(), r.allocations));
                r.report
            }
            // Sanitizer findings before a fault; where a hung kernel was is no finding.
            Err(RunError::Backend(_, report))
                if report
                    .diagnostics
                    .iter()
                    .any(|d| d.tool != crate::backend::HUNG) =>
            {
                *report
            }
            Err(e) => {
                // A timeout or fault here is the emulator's (the GPU ran this case): say so,
                // and carry on in a fresh worker if this one is gone.
                skipped.push(format!("{}: {}", case.name, describe_run_error(&e)));
                match emulator(ptx, protected, None) {
                    Ok(fresh) => w = fresh,
                    Err(_) => break,
                }
                continue;
            }
        };
        ran.push(&case.name);
        for d in report
            .diagnostics
            .iter()
            .filter(|d| d.tool != crate::backend::HUNG)
        {
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
    // The next milestone's pass reuses it (a dead one is replaced then).
    *slot = Some(w);
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
    let inv = case
        .args()
        .and_then(|a| inputs::generate(a, inputs::trial_seed(seed, &case.name, 0)))
        .map_err(|e| format!("{}: {e}", case.name))?;
    match numba {
        None => Ok(inv),
        Some(sig) => inputs::numba_invocation(&inv, &plan.contract, sig)
            .map_err(|e| format!("{}: Numba arguments: {e}", case.name)),
    }
}

/// An emulator worker with the module loaded (`kept`, when it is alive, else a fresh one), or
/// the skipped check saying why not.
pub(super) fn emulator(
    ptx: &str,
    protected: &[PathBuf],
    kept: Option<Client>,
) -> Result<Client, Box<Check>> {
    let skipped = |why: String| Box::new(Check::skipped(CheckKind::Sanitizer, NAME, why));
    let mut w = match kept.and_then(|mut w| w.is_alive().then_some(w)) {
        Some(w) => w,
        None => Workers::emulator(protected)
            .run(None)
            .map_err(|e| skipped(format!("the PTX emulator could not start: {e}")))?,
    };
    if w.holds(ptx) {
        return Ok(w);
    }
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

/// A memcheck finding about a load: compute-sanitizer says "Invalid __shared__ read", the
/// emulator "out-of-bounds global read".
fn is_read(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains(" read") && !m.contains(" write")
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
        "memcheck" if is_read(&d.message) => hints::OUT_OF_BOUNDS_READ,
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
        // The emulator-only finding says what the GPU's tools saw, and is flagged.
        assert!(
            merged[1]
                .message
                .contains("compute-sanitizer on the GPU found nothing there"),
            "{}",
            merged[1].message
        );
        let flags = disagreements("m", &merged);
        assert_eq!(flags.len(), 1);
        assert_eq!(flags[0].kind, "sanitizers-disagree");
        // A GPU-only finding beside a clean emulator pass says so, and still fails.
        let clean = Check::pass(
            CheckKind::Sanitizer,
            "sanitizer (emulator)",
            "found nothing",
        );
        let merged = merge_findings(vec![clean], Some(vec![fail("memcheck k.cu:68")]));
        assert_eq!(merged[0].status, crate::result::Status::Fail);
        assert!(
            merged[0].message.contains("saw no such access"),
            "{}",
            merged[0].message
        );
        // Without compute-sanitizer, the emulator's findings as they are.
        assert_eq!(merge_findings(vec![fail("x")], None).len(), 1);
    }
}

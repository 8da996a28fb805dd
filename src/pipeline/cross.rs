//! The emulator against the GPU (issue 19). On `--backend cuda` the PTX emulator runs the
//! smallest correctness cases again (for its sanitizers, `sanitizer::on_emulator`) on the same
//! inputs as the GPU's first trial, and metric checks read the emulator's counters beside the
//! GPU's. A kernel that behaves one way when emulated and another on the hardware (it read
//! `%globaltimer` or `%smid` to tell them apart) shows up as a disagreement: its outputs are
//! right on one and wrong on the other, or its memory access pattern differs. That is said to
//! the instructor as a flag (result.json `flags`, report.md, integrity.csv), never as a
//! verdict: the GPU's own checks decide the points.

use super::context::{Ctx, Infrastructure};
use super::reference::Reference;
use super::reference::expected_outputs;
use crate::compare::{self, Resolved};
use crate::inputs::{self, Invocation};
use crate::result::Flag;
use crate::rubric::plan::CasePlan;
use std::collections::HashMap;

/// One case's name and the emulator's allocations after it (for the cross-check).
pub type CaseOutputs = (String, Vec<Vec<u8>>);

/// Compare the emulator's outputs (`emulated`: per case, its allocations) with the GPU's on the
/// same inputs (`gpu`, kept by the correctness stage); flag a case where one is right and the
/// other wrong.
pub(super) fn flags(
    ctx: &Ctx,
    reference: &mut Reference,
    gpu: &HashMap<String, Vec<Vec<u8>>>,
    emulated: &[CaseOutputs],
) -> Vec<Flag> {
    let mut out = Vec::new();
    for (case_name, emu) in emulated {
        let Some(gpu) = gpu.get(case_name) else {
            continue;
        };
        let Some(case) = ctx.plan.case(case_name) else {
            continue;
        };
        if gpu == emu {
            continue;
        }
        // The comparison needs the reference; without it there is nothing to say.
        if let Ok(Some(what)) = disagreement(ctx, reference, case, gpu, emu) {
            out.push(Flag {
                kind: "backends-disagree".into(),
                milestone: Some(ctx.plan.milestone.id.clone()),
                location: None,
                message: format!(
                    "`{}` gives different results on the PTX emulator and on the GPU for the same inputs (case {case_name}): {what}; a kernel that checks where it runs (timers, SM ids) behaves like this",
                    ctx.plan.kernel
                ),
            });
        }
    }
    out
}

/// One sentence when exactly one of the two outputs of `case` is right.
fn disagreement(
    ctx: &Ctx,
    reference: &mut Reference,
    case: &CasePlan,
    gpu: &[Vec<u8>],
    emu: &[Vec<u8>],
) -> Result<Option<String>, Infrastructure> {
    let inv = case
        .args()
        .and_then(|a| inputs::generate(a, inputs::trial_seed(ctx.opts.seed, &case.name, 0)))
        .map_err(Infrastructure)?;
    if gpu.len() != inv.buffers.len() || emu.len() != inv.buffers.len() {
        return Ok(None);
    }
    // Both cached since the correctness phase.
    let (expected, magnitude) = expected_outputs(ctx, case, &inv, reference)?;
    Ok((0..inv.buffers.len()).find_map(|i| {
        let mag = magnitude.as_ref().and_then(|m| m.get(i)).map(Vec::as_slice);
        buffer_disagreement(ctx, &inv, i, [&expected.allocations, gpu, emu], mag, case)
    }))
}

/// Buffer `i` right on one backend and wrong on the other: the sentence saying so.
fn buffer_disagreement(
    ctx: &Ctx,
    inv: &Invocation,
    i: usize,
    [expected, gpu, emu]: [&[Vec<u8>]; 3],
    mag: Option<&[f64]>,
    case: &CasePlan,
) -> Option<String> {
    let b = &inv.buffers[i];
    if !b.is_output() {
        return None;
    }
    let s = b.spec();
    let payload = |a: &[Vec<u8>]| {
        a.get(i)
            .and_then(|x| x.get(s.guard..s.guard + s.bytes))
            .map(<[u8]>::to_vec)
    };
    let (e, g, x) = (payload(expected)?, payload(gpu)?, payload(emu)?);
    let t = b
        .tolerance
        .as_ref()
        .or(ctx.plan.tolerance.as_ref())
        .or(Some(&ctx.plan.contract.tolerance));
    let tol_vars = inv.tolerance_vars(&case.vars);
    let tol = Resolved::with_precision(t, b.elem, &tol_vars, ctx.plan.precision).ok()?;
    let each = Resolved::per_element(t, b.elem, &tol_vars, ctx.plan.precision, b.len).ok()?;
    let on_gpu = compare::compare_each(b, &e, &g, mag, tol, each.as_deref());
    let on_emu = compare::compare_each(b, &e, &x, mag, tol, each.as_deref());
    if on_gpu.ok() == on_emu.ok() {
        return None;
    }
    let (right, wrong, c) = if on_gpu.ok() {
        ("GPU", "emulator", &on_emu)
    } else {
        ("emulator", "GPU", &on_gpu)
    };
    Some(format!(
        "`{}` is right on the {right} and wrong on the {wrong} ({} of {} elements differ from the reference there)",
        b.name, c.bad, c.total
    ))
}

/// How far apart the emulator's and the GPU's values of one metric may be before the pair is
/// flagged: the two count the same accesses, but the GPU runs the machine code ptxas made of
/// the PTX (which may merge, drop or split accesses), so only large gaps say something.
pub fn metrics_disagree(metric: &str, emulator: f64, gpu: f64) -> bool {
    if !emulator.is_finite() || !gpu.is_finite() {
        return false;
    }
    match metric {
        "global_load_efficiency" | "global_store_efficiency" | "branch_divergence" => {
            (emulator - gpu).abs() > 30.0
        }
        "shared_bank_conflicts" => {
            let (lo, hi) = (emulator.min(gpu), emulator.max(gpu));
            hi > 64.0 && hi > 4.0 * lo.max(1.0)
        }
        _ => {
            let (lo, hi) = (emulator.min(gpu).max(1e-9), emulator.max(gpu));
            hi / lo > 3.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::metrics_disagree;

    #[test]
    fn only_large_metric_gaps_count() {
        assert!(metrics_disagree("global_store_efficiency", 100.0, 12.5));
        assert!(!metrics_disagree("global_store_efficiency", 100.0, 93.0));
        assert!(metrics_disagree("shared_bank_conflicts", 0.0, 3968.0));
        assert!(!metrics_disagree("shared_bank_conflicts", 0.0, 8.0));
        assert!(!metrics_disagree(
            "global_load_sectors_per_request",
            4.0,
            5.0
        ));
        assert!(metrics_disagree(
            "global_load_sectors_per_request",
            4.0,
            32.0
        ));
        assert!(!metrics_disagree("warp_instructions", f64::NAN, 3.0));
    }
}

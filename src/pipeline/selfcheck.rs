//! `validate`'s self-check of a rubric's reference kernels: every reference output against
//! the contract's CPU implementation (which accumulates in f64), within the reference's half
//! of the tolerance, so that the tolerance leaves an honest float kernel room.

use super::baselines::CpuRunner;
use super::context::{Infrastructure, Options};
use super::reference::{RefRun, Reference};
use crate::baseline::Threads;
use crate::compare::{self, Resolved};
use crate::inputs;
use crate::rubric::plan::{CasePlan, MilestonePlan, Plan};
use std::time::Duration;

/// Cross-check every reference output with the CPU implementation where the contract names
/// one. Prints what it finds; `Ok(true)` if clean.
pub fn reference_against_cpu(
    plan: &Plan,
    opts: &Options,
    reference: &mut Reference,
) -> Result<bool, Infrastructure> {
    let mut ok = true;
    for m in &plan.milestones {
        ok &= milestone_against_cpu(plan, m, opts, reference)?;
    }
    Ok(ok)
}

fn milestone_against_cpu(
    plan: &Plan,
    m: &MilestonePlan,
    opts: &Options,
    reference: &mut Reference,
) -> Result<bool, Infrastructure> {
    let Some(imp) = &m.contract.cpu else {
        return Ok(true);
    };
    let cpu = imp.to_string();
    // The course's Python function failing to start is the rubric's mistake: said, not fatal.
    let mut runner = match CpuRunner::start(imp, &plan.path, Threads::Single, &opts.protected) {
        Ok(r) => r,
        Err(e) => {
            println!("  {}: {e}", m.milestone.id);
            return Ok(false);
        }
    };
    let limit = Duration::from_secs_f64(plan.timeouts.launch_s);
    let mut ok = true;
    let mut used = 0.0f64;
    for case in &m.cases {
        let (u, clean) = case_against_cpu(m, case, (&cpu, &mut runner), opts, reference, limit)?;
        used = used.max(u);
        ok &= clean;
    }
    let id = &m.milestone.id;
    if !ok {
        // What was wrong is printed above.
    } else if used > 0.0 {
        println!(
            "  {id}: reference cross-checked against CPU `{cpu}` (its own error uses at most {:.1} % of its half of the tolerance)",
            100.0 * used
        );
    } else {
        println!("  {id}: reference cross-checked against CPU `{cpu}`");
    }
    Ok(ok)
}

/// One case: the largest share of its half of the tolerance the reference used, and whether
/// everything was right (what is wrong is printed).
fn case_against_cpu(
    m: &MilestonePlan,
    case: &CasePlan,
    (cpu, runner): (&str, &mut CpuRunner),
    opts: &Options,
    reference: &mut Reference,
    limit: Duration,
) -> Result<(f64, bool), Infrastructure> {
    let contract = &m.contract;
    let inv = case
        .args()
        .and_then(|a| inputs::generate(a, inputs::trial_seed(opts.seed, &case.name, 0)))
        .map_err(Infrastructure)?;
    let dims = case.reference_launch.clone().map_err(Infrastructure)?;
    let kernel = &m.reference_kernel;
    let gpu = reference.gpu.clone();
    let then = m.reference_then(case).map_err(Infrastructure)?;
    let run = RefRun::new(kernel, &case.name, &inv, dims, then);
    let expected = reference.expected(&run, limit, gpu.as_deref())?.allocations;
    let args = match runner.call(&inv, &case.vars, Threads::Single) {
        Ok((_, args)) => args,
        Err(e) => {
            println!(
                "  {}: CPU `{cpu}` failed on {}: {e}",
                m.milestone.id, case.name
            );
            return Ok((0.0, false));
        }
    };
    let magnitude = if sums_tolerance(m) {
        Some(reference.magnitude(&run, &expected, limit, gpu.as_deref())?)
    } else {
        None
    };
    let tol_vars = inv.tolerance_vars(&case.vars);
    let mut used = 0.0f64;
    let mut ok = true;
    for (i, b) in inv.buffers.iter().enumerate() {
        let Some(host) = args.buffers.get(&b.name).filter(|_| b.is_output()) else {
            continue;
        };
        let t = b
            .tolerance
            .as_ref()
            .or(m.tolerance.as_ref())
            .or(Some(&contract.tolerance));
        let s = b.spec();
        let mag = magnitude.as_ref().and_then(|m| m.get(i)).map(Vec::as_slice);
        let got = &expected[i][s.guard..s.guard + s.bytes];
        match model_check(b, t, &tol_vars, &host_bytes(host), got, mag) {
            Ok(u) => used = used.max(u),
            Err(why) => {
                ok = false;
                println!(
                    "  {}: reference `{kernel}` against CPU `{cpu}` on case {}:\n    {}",
                    m.milestone.id,
                    case.name,
                    why.replace('\n', "\n    ")
                );
            }
        }
    }
    Ok((used, ok))
}

/// Some output's tolerance scales with its elements' sums of absolute terms.
fn sums_tolerance(m: &MilestonePlan) -> bool {
    let contract = &m.contract;
    contract.tolerance.sum.is_some()
        || contract
            .params
            .iter()
            .any(|p| p.tolerance.as_ref().is_some_and(|t| t.sum.is_some()))
        || m.tolerance.as_ref().is_some_and(|t| t.sum.is_some())
}

/// `validate`'s check of a tolerance's error model on one output: the float reference's own
/// error, against the CPU implementation (which accumulates in f64), must stay within half
/// of the tolerance evaluated for float (`u = eps`): the reference's share of a bound that
/// covers the student's rounding and the reference's. A `sum` tolerance also needs sums
/// of absolute terms that bound the outputs (`S >= |expected|`): a contract that is not a sum
/// of products cannot use it. `Ok(share)`: the largest fraction of its half the reference
/// used.
pub(super) fn model_check(
    b: &inputs::Buffer,
    t: Option<&crate::rubric::schema::Tolerance>,
    vars: &crate::rubric::expr::Vars,
    cpu: &[u8],
    reference: &[u8],
    mag: Option<&[f64]>,
) -> Result<f64, String> {
    let full = Resolved::with_precision(t, b.elem, vars, compare::Precision::Fp32)?;
    let each = Resolved::per_element(t, b.elem, vars, compare::Precision::Fp32, b.len)?;
    if full.exact || !b.elem.is_float() {
        let c = compare::compare_each(b, cpu, reference, None, full, each.as_deref());
        return if c.ok() { Ok(0.0) } else { Err(c.describe()) };
    }
    let half = |r: &Resolved| Resolved {
        abs: r.abs / 2.0,
        rel: r.rel / 2.0,
        sum: r.sum / 2.0,
        coarse: None,
        ..*r
    };
    let share = half(&full);
    let shares: Option<Vec<Resolved>> = each.map(|v| v.iter().map(half).collect());
    let share_at = |i: usize| {
        shares
            .as_ref()
            .and_then(|v| v.get(i))
            .copied()
            .unwrap_or(share)
    };
    let (e, g) = (
        inputs::decode(cpu, b.elem),
        inputs::decode(reference, b.elem),
    );
    let m = mag.unwrap_or_default();
    let at = |i: usize| m.get(i).copied().unwrap_or(0.0);
    if full.sum > 0.0
        && let Some(i) = (0..e.len().min(m.len()))
            .find(|&i| e[i].is_finite() && at(i).is_finite() && at(i) < e[i].abs() * (1.0 - 1e-3))
    {
        return Err(format!(
            "`sum` needs each element's sum of absolute terms, which the reference computes from the inputs' absolute values, to bound the output; at `{}`[{i}] it is {:e} for an output of {:e}: this contract's outputs are not sums of products of its inputs, so use `abs`/`rel` instead",
            b.name,
            at(i),
            e[i]
        ));
    }
    let c = compare::compare_each(b, cpu, reference, mag, share, shares.as_deref());
    if !c.ok() {
        return Err(format!(
            "the reference's own error (against the CPU's f64 result) exceeds its half of the tolerance, so the tolerance leaves an honest float kernel no room: {}",
            c.describe()
        ));
    }
    let used = (0..e.len().min(g.len()))
        .filter(|&i| e[i].is_finite() && g[i].is_finite())
        .map(|i| (g[i] - e[i]).abs() / share_at(i).allowance(e[i], at(i)).max(f64::MIN_POSITIVE))
        .fold(0.0, f64::max);
    Ok(used)
}

pub(super) fn host_bytes(b: &crate::baseline::HostBuffer) -> Vec<u8> {
    b.to_bytes()
}

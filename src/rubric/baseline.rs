//! A performance check `against: {reference: K}` times reference kernel K beside the
//! student's kernel, on the timed milestone's inputs, with the launch of K's own contract: the
//! contract of the milestones whose reference kernel K is. A baseline written for another
//! milestone (a one-thread-per-element kernel beside a grid-stride one) launched with the timed
//! milestone's launch would process a part of the data, and look faster than it is (issue 33).
//!
//! Load time checks that K's contract is one (the milestones that grade against K agree on
//! its launch) and that it takes the timed milestone's parameters; `validate` warns where K's
//! launch for the performance case has fewer threads than its output has elements.

use super::schema::{Against, Contract, Launch, Milestone, PerfSpec, Rubric};
use super::{LoadedRubric, case_vars, eval_launch, eval_len};
use crate::errors::ConfigError;

/// The contract reference kernel `kernel` runs under as a baseline: the first milestone's
/// (in rubric order) whose reference kernel it is, with that milestone's id; `None` when no
/// milestone grades against it (it then runs with the timed milestone's contract). [`check`]
/// makes sure every such milestone gives it the same launch.
pub fn contract_of<'a>(rubric: &'a Rubric, kernel: &str) -> Option<(&'a Milestone, &'a Contract)> {
    graded_against(rubric, kernel).into_iter().next()
}

/// The milestones whose reference kernel is `kernel`, with their contracts (unknown contracts
/// left out: they are errors of their own).
fn graded_against<'a>(rubric: &'a Rubric, kernel: &str) -> Vec<(&'a Milestone, &'a Contract)> {
    rubric
        .milestones
        .iter()
        .filter(|m| m.reference_kernel.as_deref().unwrap_or(&m.kernel) == kernel)
        .filter_map(|m| rubric.contracts.get(&m.contract).map(|c| (m, c)))
        .collect()
}

/// Every performance check against a reference kernel, with its path in the rubric, its
/// milestone and that milestone's contract, the kernel, and the case (when it exists).
fn reference_checks(r: &LoadedRubric) -> Vec<Baseline<'_>> {
    let mut out = Vec::new();
    for (i, m) in r.rubric.milestones.iter().enumerate() {
        let Some(contract) = r.rubric.contracts.get(&m.contract) else {
            continue;
        };
        for (j, p) in m.performance.iter().enumerate() {
            if let Against::Reference(k) = &p.against {
                out.push(Baseline {
                    at: format!("milestones[{i}].performance[{j}]"),
                    milestone: m,
                    contract,
                    perf: p,
                    kernel: k,
                });
            }
        }
    }
    out
}

struct Baseline<'a> {
    at: String,
    milestone: &'a Milestone,
    contract: &'a Contract,
    perf: &'a PerfSpec,
    kernel: &'a str,
}

/// Load-time mistakes of reference baselines: a kernel the milestones grade against under
/// launches that differ (which one would the baseline run with?), and a baseline whose own
/// contract takes other parameters than the timed milestone's (it runs on that milestone's
/// inputs).
pub(super) fn check(r: &LoadedRubric) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    for b in reference_checks(r) {
        let at = format!("{}.against.reference", b.at);
        let owners = graded_against(&r.rubric, b.kernel);
        let Some(&(first, own)) = owners.first() else {
            continue;
        };
        if let Some(&(other, _)) = owners.iter().find(|(_, c)| c.launch != own.launch) {
            errors.push(r.error_at(
                &at,
                format!(
                    "reference kernel `{k}` runs as a baseline with the launch of its own \
                     contract, but milestones `{a}` (contract `{ca}`: {la}) and `{o}` (contract \
                     `{co}`: {lo}) grade against it with different launches: give their \
                     contracts one launch, or time against another kernel",
                    k = b.kernel,
                    a = first.id,
                    ca = first.contract,
                    la = describe(&own.launch),
                    o = other.id,
                    co = other.contract,
                    lo = describe(&r.rubric.contracts[&other.contract].launch),
                ),
            ));
            continue;
        }
        if first.contract == b.milestone.contract {
            continue;
        }
        let vars = r.performance_case(&b.perf.case).map(case_vars);
        if let Some(why) = params_differ(b.contract, own, vars.as_ref()) {
            errors.push(r.error_at(
                &at,
                format!(
                    "reference kernel `{k}` (contract `{ck}`, of milestone `{o}`) runs as a \
                     baseline on the inputs of milestone `{m}` (contract `{cm}`), but {why}: \
                     the two contracts must take the same parameters",
                    k = b.kernel,
                    ck = first.contract,
                    o = first.id,
                    m = b.milestone.id,
                    cm = b.milestone.contract,
                ),
            ));
        }
    }
    errors
}

/// Why a kernel of contract `theirs` cannot run on the arguments of contract `ours`, if it
/// cannot: the parameters, in order, must have the same types, the same symbols, and (for the
/// case's variables, when known) buffers of the same lengths.
fn params_differ(
    ours: &Contract,
    theirs: &Contract,
    vars: Option<&super::expr::Vars>,
) -> Option<String> {
    if ours.params.len() != theirs.params.len() {
        return Some(format!(
            "its contract has {} parameters where the milestone's has {}",
            theirs.params.len(),
            ours.params.len()
        ));
    }
    for (i, (a, b)) in ours.params.iter().zip(&theirs.params).enumerate() {
        let n = i + 1;
        if a.param_type() != b.param_type() {
            return Some(format!(
                "parameter {n} is `{}: {}` in its contract and `{}: {}` in the milestone's",
                b.name, b.ty, a.name, a.ty
            ));
        }
        if a.symbol != b.symbol {
            return Some(format!(
                "parameter {n} (`{}`) is a `symbol` in one contract and an argument in the other",
                b.name
            ));
        }
        if a.symbol && a.name != b.name {
            return Some(format!(
                "symbol parameter {n} is `{}` in its contract and `{}` in the milestone's \
                 (symbols are set by name)",
                b.name, a.name
            ));
        }
        if let (Some(v), Some(_), Some(_)) = (vars, &a.len, &b.len)
            && let (Ok(x), Ok(y)) = (eval_len(a, v), eval_len(b, v))
            && x != y
        {
            return Some(format!(
                "buffer {n} (`{}`) has {y} elements in its contract and {x} in the milestone's \
                 on the performance case",
                b.name
            ));
        }
    }
    None
}

/// A launch as the rubric writes it: "block [256], grid [ceil_div(n, 256)]".
fn describe(l: &Launch) -> String {
    let list =
        |v: &[super::schema::Expr]| v.iter().map(|e| e.source()).collect::<Vec<_>>().join(", ");
    let shared = l
        .shared_bytes
        .as_ref()
        .map_or_else(String::new, |e| format!(", shared_bytes {}", e.source()));
    format!(
        "block [{}], grid [{}]{shared}",
        list(&l.block),
        list(&l.grid)
    )
}

/// `validate`'s warnings (rendered as errors are, with `file:line:col`): a reference baseline
/// whose launch on its performance case has fewer threads than its first output has elements.
/// Only a kernel that loops over its data (grid-stride, or a block per row) computes all of it
/// then, which cannot be known without running it. Where the baseline's own milestones already
/// launch fewer threads than elements on a correctness case (a softmax's block per row of 1000),
/// their kernels must loop to pass, so nothing is said.
pub fn warnings(r: &LoadedRubric) -> Vec<ConfigError> {
    let mut out = Vec::new();
    for b in reference_checks(r) {
        let (owner, contract) = match contract_of(&r.rubric, b.kernel) {
            Some((m, c)) => (Some(m), c),
            None => (None, b.contract),
        };
        let Some(case) = r.performance_case(&b.perf.case) else {
            continue;
        };
        let Some((threads, elements, output)) = coverage(contract, &case_vars(case)) else {
            continue;
        };
        if threads >= elements {
            continue;
        }
        // The baseline's own milestones already launch fewer threads than elements on a
        // correctness case: their kernels pass only if they loop over the data.
        let verified = owner.is_some_and(|m| {
            r.cases_for(m)
                .iter()
                .any(|c| coverage(contract, &case_vars(c)).is_some_and(|(t, e, _)| t < e))
        });
        if verified {
            continue;
        }
        out.push(r.error_at(
            &format!("{}.against.reference", b.at),
            format!(
                "baseline `{k}` is launched with {threads} threads on case `{case}` (its \
                 contract's launch: {launch}), fewer than the {elements} elements of its output \
                 `{output}`: a kernel that is not grid-stride would process only part of the \
                 data, and the speed-up against it would be wrong",
                k = b.kernel,
                case = case.name,
                launch = describe(&contract.launch),
            ),
        ));
    }
    out
}

/// Threads `contract`'s launch starts for `vars`, the elements of its first output, and that
/// output's name; `None` when either cannot be evaluated (other checks say why).
fn coverage(contract: &Contract, vars: &super::expr::Vars) -> Option<(u64, u64, String)> {
    let dims = eval_launch(&contract.launch, vars).ok()?;
    let out = contract
        .params
        .iter()
        .find(|p| p.dir.is_output() && p.len.is_some())?;
    let elements = eval_len(out, vars).ok()? as u64;
    Some((
        dims.blocks().saturating_mul(dims.threads_per_block()),
        elements,
        out.name.clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rubric whose milestone `fast` (contract `fast`) times against `plain`'s reference
    /// kernel; `PLAIN` is the `plain` contract's parameters and launch.
    const RUBRIC: &str = "\
assignment: a
reference: ref.cu
contracts:
  plain:
PLAIN
  fast:
    params:
      - { name: x, type: f32*, len: n, gen: { uniform: [-1, 1] } }
      - { name: y, type: f32*, dir: out, len: n }
      - { name: n, type: i32, value: n }
    launch: { block: [128], grid: [8] }
cases:
  correctness:
    - { name: small, vars: { n: 1000 } }
  performance:
    - { name: big, vars: { n: 65536 } }
milestones:
  - id: plain
    kernel: k_plain
    contract: plain
    correctness: { points: 1 }
  - id: fast
    kernel: k_fast
    contract: fast
    correctness: { points: 1 }
    performance:
      - { name: speed, case: big, against: { reference: k_plain }, min: 1 }
";

    fn load(plain: &str) -> Result<LoadedRubric, String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("ref.cu"),
            "extern \"C\" __global__ void k_plain() {}\nextern \"C\" __global__ void k_fast() {}\n",
        )
        .unwrap();
        let p = dir.path().join("r.yaml");
        std::fs::write(&p, RUBRIC.replace("PLAIN", plain)).unwrap();
        crate::rubric::load(&p).map_err(|e| e.to_string())
    }

    const SAME_PARAMS: &str = "    params:
      - { name: x, type: f32*, len: n, gen: { int: [0, 9] } }
      - { name: y, type: f32*, dir: out, len: n }
      - { name: n, type: i32, value: n }";

    #[test]
    fn a_reference_baseline_gets_its_own_contracts_launch_in_the_plan() {
        let r = load(&format!(
            "{SAME_PARAMS}\n    launch: {{ block: [64], grid: [\"ceil_div(n, 64)\"] }}"
        ))
        .unwrap();
        let (m, _) = contract_of(&r.rubric, "k_plain").unwrap();
        assert_eq!(m.id, "plain");
        assert!(contract_of(&r.rubric, "nobody").is_none());
        let plan = r.plan(&|_, l| l.clone());
        let p = &plan.milestones[1].performance[0];
        let dims = p.baseline_launch.clone().unwrap().unwrap();
        assert_eq!((dims.grid, dims.block), ([1024, 1, 1], [64, 1, 1]));
        // The timed milestone's own reference keeps its contract's launch.
        let own = p.case.as_ref().unwrap().reference_launch.clone().unwrap();
        assert_eq!((own.grid, own.block), ([8, 1, 1], [128, 1, 1]));
        assert!(warnings(&r).is_empty());
    }

    #[test]
    fn a_baseline_contract_with_other_parameters_is_an_error_at_the_baseline() {
        for (params, why) in [
            (
                "    params:\n      - { name: x, type: f64*, len: n, gen: { int: [0, 9] } }\n      - { name: y, type: f32*, dir: out, len: n }\n      - { name: n, type: i32, value: n }",
                "parameter 1 is `x: f64*` in its contract and `x: f32*` in the milestone's",
            ),
            (
                "    params:\n      - { name: x, type: f32*, len: n, gen: { int: [0, 9] } }\n      - { name: y, type: f32*, dir: out, len: \"2 * n\" }\n      - { name: n, type: i32, value: n }",
                "buffer 2 (`y`) has 131072 elements in its contract and 65536",
            ),
            (
                "    params:\n      - { name: x, type: f32*, len: n, gen: { int: [0, 9] } }\n      - { name: n, type: i32, value: n }\n      - { name: y, type: f32*, dir: out, len: n }",
                "parameter 2 is `n: i32`",
            ),
        ] {
            let e = load(&format!(
                "{params}\n    launch: {{ block: [64], grid: [16] }}"
            ))
            .unwrap_err();
            assert!(
                e.contains("r.yaml:31:") && e.contains("runs as a baseline") && e.contains(why),
                "{e}"
            );
        }
    }

    #[test]
    fn a_launch_short_of_the_output_warns_unless_the_milestones_already_loop() {
        // 8 x 128 = 1024 threads: all of `small`, a 64th of `big`.
        let r = load(&format!(
            "{SAME_PARAMS}\n    launch: {{ block: [128], grid: [8] }}"
        ))
        .unwrap();
        let w = warnings(&r);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].message.contains("1024 threads on case `big`")
                && w[0].message.contains("65536 elements of its output `y`"),
            "{}",
            w[0].message
        );
        assert!(w[0].as_warning().starts_with("warning: "), "{}", w[0]);
        // 2 x 128 threads: `small` already has more elements than threads, and passes only
        // if the kernel loops.
        let r = load(&format!(
            "{SAME_PARAMS}\n    launch: {{ block: [128], grid: [2] }}"
        ))
        .unwrap();
        assert!(warnings(&r).is_empty());
    }
}

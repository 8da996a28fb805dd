//! The sizes a rubric asks for, case by case: every buffer length, shape, scalar value and
//! launch that a milestone's cases give its contract is evaluated when the rubric is loaded,
//! so that a case with `n: -5` is the rubric's mistake at its own line (exit 2), never a
//! failing check of every student graded against it. Nothing is allocated: only the
//! expressions are evaluated.

use super::schema::{Case, Contract, Milestone, ParamType};
use super::{LoadedRubric, case_vars, eval_launch, eval_len};
use crate::errors::ConfigError;
use std::collections::BTreeSet;

/// One mistake per case a milestone runs (each case checked once per contract).
pub fn check(r: &LoadedRubric) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    let mut seen = BTreeSet::new();
    for m in &r.rubric.milestones {
        // An unknown contract or case is reported where milestones are checked.
        let Some(contract) = r.rubric.contracts.get(&m.contract) else {
            continue;
        };
        for (group, index) in cases_of(r, m) {
            if !seen.insert((m.contract.as_str(), group, index)) {
                continue;
            }
            let list = match group {
                "correctness" => &r.rubric.cases.correctness,
                _ => &r.rubric.cases.performance,
            };
            let case = &list[index];
            if let Err((var, msg)) = one_case(contract, case) {
                let at = match var {
                    Some(v) => format!("cases.{group}[{index}].vars.{v}"),
                    None => format!("cases.{group}[{index}]"),
                };
                errors.push(r.error_at(
                    &at,
                    format!(
                        "case `{}` (contract `{}`, milestone `{}`): {msg}",
                        case.name, m.contract, m.id
                    ),
                ));
            }
        }
    }
    errors
}

/// The cases milestone `m` runs: (group, index in that group).
fn cases_of(r: &LoadedRubric, m: &Milestone) -> Vec<(&'static str, usize)> {
    let index = |list: &[Case], name: &str| list.iter().position(|c| c.name == name);
    let correctness = &r.rubric.cases.correctness;
    let performance = &r.rubric.cases.performance;
    let mut out: Vec<(&'static str, usize)> = if m.correctness.cases.is_empty() {
        (0..correctness.len()).map(|i| ("correctness", i)).collect()
    } else {
        m.correctness
            .cases
            .iter()
            .filter_map(|n| index(correctness, n))
            .map(|i| ("correctness", i))
            .collect()
    };
    out.extend(
        m.performance
            .iter()
            .filter_map(|p| index(performance, &p.case))
            .map(|i| ("performance", i)),
    );
    out.extend(
        m.metrics
            .iter()
            .filter_map(|x| index(correctness, &x.case))
            .map(|i| ("correctness", i)),
    );
    out
}

/// The first size of `contract` that `case` makes impossible, with the case variable to blame
/// (a negative one the failing expression reads), if one is.
fn one_case(contract: &Contract, case: &Case) -> Result<(), (Option<String>, String)> {
    // A case that lacks a variable the contract reads is reported where milestones are checked.
    if super::contract_variables(contract)
        .iter()
        .any(|v| !case.vars.contains_key(v))
    {
        return Ok(());
    }
    let vars = case_vars(case);
    let blame = |e: &super::schema::Expr| -> Option<String> {
        let parsed = e.parse_as(super::expr::Kind::Real).ok()?;
        parsed
            .variables()
            .into_iter()
            .find(|v| case.vars.get(v).is_some_and(|&x| x < 0))
    };
    for p in &contract.params {
        match p.param_type() {
            Some(ParamType::Buffer(_)) => {
                let Some(len_expr) = &p.len else { continue };
                let len = eval_len(p, &vars).map_err(|e| {
                    (
                        blame(len_expr),
                        format!("{e}; a buffer's length must be at least 0"),
                    )
                })?;
                if len > super::MAX_ELEMENTS {
                    return Err((
                        None,
                        format!(
                            "buffer `{}` would have {len} elements (at most {})",
                            p.name,
                            super::MAX_ELEMENTS
                        ),
                    ));
                }
                let Some(dims) = &p.shape else { continue };
                let mut product: u128 = 1;
                for (j, d) in dims.iter().enumerate() {
                    let v = d.eval_int(&vars).map_err(|e| (blame(d), e))?;
                    if v < 0 {
                        return Err((
                            blame(d),
                            format!(
                                "shape[{j}] of `{}` = `{}` evaluates to {v}; a dimension must be \
                                 at least 0",
                                p.name,
                                d.source()
                            ),
                        ));
                    }
                    product = product.saturating_mul(v as u128);
                }
                if product != len as u128 {
                    return Err((
                        None,
                        format!(
                            "the shape of `{}` multiplies to {product}, not its len {len}",
                            p.name
                        ),
                    ));
                }
            }
            Some(ParamType::Scalar(_)) => {
                let Some(v) = &p.value else { continue };
                let x = v.eval_f64(&vars).map_err(|e| (blame(v), e))?;
                if !x.is_finite() {
                    return Err((
                        None,
                        format!(
                            "scalar `{}` = `{}` evaluates to {x}; give a finite number",
                            p.name,
                            v.source()
                        ),
                    ));
                }
            }
            None => {}
        }
    }
    if contract.is_function() {
        return Ok(());
    }
    for (k, launch) in std::iter::once(&contract.launch)
        .chain(&contract.then)
        .enumerate()
    {
        eval_launch(launch, &vars).map_err(|e| {
            let culprit = launch
                .grid
                .iter()
                .chain(&launch.block)
                .chain(&launch.shared_bytes)
                .find_map(blame);
            let which = if k == 0 {
                "the contract's launch".to_string()
            } else {
                format!("the contract's launch then[{}]", k - 1)
            };
            (culprit, format!("{which}: {e}"))
        })?;
    }
    Ok(())
}

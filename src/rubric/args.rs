//! A case's launch parameters resolved: the contract's lengths, shapes, generators and scalar
//! values evaluated under the case's variables ([`resolve`]), once, when the plan is made. The
//! stages get numbers (`model::args`); none evaluates an expression.

use super::ParamType;
use super::eval_len;
use super::expr::Vars;
use super::schema::{Contract, Direction, Expr, Gen, Param, ScalarType, Tolerance};
use crate::model::args::{BufferArg, Draw, ParamArg, ScalarArg};
use rand_distr::Normal;

/// Every parameter of `contract` under `vars`, in order, or the first one's reason it cannot be
/// evaluated.
pub fn resolve(contract: &Contract, vars: &Vars) -> Result<Vec<ParamArg>, String> {
    contract
        .params
        .iter()
        .map(|p| {
            match p
                .param_type()
                .ok_or_else(|| format!("bad type `{}`", p.ty))?
            {
                ParamType::Buffer(elem) => {
                    buffer(p, elem, vars).map(|b| ParamArg::Buffer(Box::new(b)))
                }
                ParamType::Scalar(ty) => {
                    let e = p
                        .value
                        .as_ref()
                        .ok_or_else(|| format!("scalar `{}` has no value", p.name))?;
                    Ok(ParamArg::Scalar(ScalarArg {
                        name: p.name.clone(),
                        ty,
                        value: e.eval_f64(vars)?,
                    }))
                }
            }
        })
        .collect()
}

fn buffer(p: &Param, elem: ScalarType, vars: &Vars) -> Result<BufferArg, String> {
    let len = eval_len(p, vars)?;
    if len > super::MAX_ELEMENTS {
        return Err(format!(
            "buffer `{}` would have {len} elements (limit {})",
            p.name,
            super::MAX_ELEMENTS
        ));
    }
    let shape = match &p.shape {
        Some(dims) => {
            let d: Vec<usize> = dims
                .iter()
                .map(|e| e.eval_int(vars).map(|v| v.max(0) as usize))
                .collect::<Result<_, _>>()?;
            if d.iter().product::<usize>() != len {
                return Err(format!(
                    "shape of `{}` does not multiply to its len {len}",
                    p.name
                ));
            }
            Some(d)
        }
        None => None,
    };
    let draw = match (&p.generator, p.dir) {
        (Some(g), Direction::In | Direction::InOut) => Some(draw(g, vars)?),
        _ => None,
    };
    Ok(BufferArg {
        name: p.name.clone(),
        elem,
        dir: p.dir,
        len,
        shape,
        draw,
        specials: p.specials.as_ref().map(|s| (s.fraction, s.values.clone())),
        init: p.init,
        symbol: p.symbol,
        peers: p.peers,
        tolerance: p.tolerance.clone(),
    })
}

/// `g` under the case's variables, or why it draws nothing (an empty or infinite range).
pub fn draw(g: &Gen, vars: &Vars) -> Result<Draw, String> {
    let ev = |e: &crate::rubric::schema::Expr| e.eval_f64(vars);
    Ok(match g {
        Gen::Uniform([lo, hi]) => {
            let (lo, hi) = (ev(lo)?, ev(hi)?);
            if !lo.is_finite() || !hi.is_finite() {
                return Err(format!("uniform range [{lo}, {hi}) is not finite"));
            }
            if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
                return Err(format!("uniform range [{lo}, {hi}) is empty"));
            }
            Draw::Uniform(lo, hi)
        }
        Gen::Normal([m, s]) => {
            let (m, s) = (ev(m)?, ev(s)?);
            if !m.is_finite() {
                return Err(format!("normal mean {m} is not finite"));
            }
            Normal::new(m, s).map_err(|e| format!("normal: {e}"))?;
            Draw::Normal(m, s)
        }
        Gen::Int([lo, hi]) => {
            let (lo, hi) = (ev(lo)?.ceil(), ev(hi)?.ceil());
            let range = i64::MIN as f64..=i64::MAX as f64;
            if !range.contains(&lo) || !range.contains(&hi) {
                return Err(format!("int range [{lo}, {hi}) is outside 64-bit integers"));
            }
            let (lo, hi) = (lo as i64, hi as i64);
            if lo >= hi {
                return Err(format!("int range [{lo}, {hi}) is empty"));
            }
            Draw::Int(lo, hi)
        }
        Gen::Constant(c) => Draw::Constant(ev(c)?),
        Gen::Values(v) => Draw::Values(v.clone()),
    })
}

/// A tolerance's given bounds under `vars` (`None` where it gives none).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToleranceBounds {
    pub abs: Option<f64>,
    pub rel: Option<f64>,
    pub sum: Option<f64>,
}

/// `t`'s expressions under `vars` (the case's, `u`, `eps`, the inputs' sums, `i`). A bound
/// that is not a finite number would pass every answer (or none): the rubric's mistake, said
/// as such, never a verdict on the student.
pub fn tolerance_bounds(t: &Tolerance, vars: &Vars) -> Result<ToleranceBounds, String> {
    let ev = |e: &Expr| -> Result<f64, String> {
        let v = e.eval_f64(vars)?;
        if v.is_finite() {
            Ok(v)
        } else {
            Err(format!(
                "the rubric's tolerance `{}` evaluates to {v}, not a finite number",
                e.source()
            ))
        }
    };
    Ok(ToleranceBounds {
        abs: t.abs.as_ref().map(ev).transpose()?,
        rel: t.rel.as_ref().map(ev).transpose()?,
        sum: t.sum.as_ref().map(ev).transpose()?,
    })
}

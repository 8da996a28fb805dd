//! The numbers of a rubric: every score, threshold and count finite and in a range that sums
//! and products cannot overflow, each error at its own line. Data values are different: the
//! `values` a buffer cycles through and its `specials` exist to feed kernels `.inf` and `.nan`,
//! and `init: -.inf` is the honest start of a max-reduction; only `init: .nan` is refused (an
//! unwritten output already reads as NaN, so it would hide a kernel that writes nothing).

use super::LoadedRubric;
use super::expr::Kind;
use super::schema::{Expr, Gen, Literal, Param, ScalarType};
use crate::errors::ConfigError;

/// Most points one score may carry, and the most a whole rubric may award.
pub const MAX_POINTS: f64 = 1e6;
/// Largest threshold a performance or metric check may name.
pub const MAX_THRESHOLD: f64 = 1e15;
/// Largest magnitude of a case variable: every one is exact as an `f64`.
pub const MAX_VAR: u64 = 1 << 53;
/// Most trials per correctness case.
pub const MAX_TRIALS: u32 = 1000;

fn points(r: &LoadedRubric, at: &str, p: f64) -> Result<(), ConfigError> {
    if p.is_finite() && (0.0..=MAX_POINTS).contains(&p) {
        Ok(())
    } else {
        Err(r.error_at(
            at,
            format!(
                "points must be a number between 0 and {}, not {}",
                num(MAX_POINTS),
                num(p)
            ),
        ))
    }
}

fn threshold(r: &LoadedRubric, at: &str, x: f64) -> Result<(), ConfigError> {
    if x.is_finite() && x.abs() <= MAX_THRESHOLD {
        Ok(())
    } else {
        Err(r.error_at(
            at,
            format!(
                "a threshold must be a finite number of at most {}, not {}",
                num(MAX_THRESHOLD),
                num(x)
            ),
        ))
    }
}

/// Scores, thresholds and counts of the whole rubric.
pub fn check(r: &LoadedRubric) -> Result<(), ConfigError> {
    let rb = &r.rubric;
    if rb.trials > MAX_TRIALS {
        return Err(r.error_at(
            "trials",
            format!("trials must be between 2 and {MAX_TRIALS}"),
        ));
    }
    let groups = [
        ("correctness", &rb.cases.correctness),
        ("performance", &rb.cases.performance),
    ];
    for (group, cases) in groups {
        for (i, c) in cases.iter().enumerate() {
            for (name, &v) in &c.vars {
                if v.unsigned_abs() > MAX_VAR {
                    return Err(r.error_at(
                        &format!("cases.{group}[{i}].vars.{name}"),
                        format!(
                            "`{name}` = {v} is too large: case variables must be within \
                             ±2^53 (exact as floating-point numbers)"
                        ),
                    ));
                }
            }
        }
    }
    for (i, m) in rb.milestones.iter().enumerate() {
        let at = format!("milestones[{i}]");
        points(r, &format!("{at}.correctness.points"), m.correctness.points)?;
        for (j, p) in m.performance.iter().enumerate() {
            let pat = format!("{at}.performance[{j}]");
            if let Some(x) = p.points {
                points(r, &format!("{pat}.points"), x)?;
            }
            if let Some(x) = p.min {
                threshold(r, &format!("{pat}.min"), x)?;
            }
            for (k, t) in p.tiers.iter().enumerate() {
                threshold(r, &format!("{pat}.tiers[{k}].min"), t.min)?;
                points(r, &format!("{pat}.tiers[{k}].points"), t.points)?;
            }
        }
        for (j, x) in m.metrics.iter().enumerate() {
            let pat = format!("{at}.metrics[{j}]");
            points(r, &format!("{pat}.points"), x.points)?;
            for (key, v) in [("min", x.min), ("max", x.max)] {
                if let Some(v) = v {
                    threshold(r, &format!("{pat}.{key}"), v)?;
                }
            }
        }
    }
    let total = r.max_score();
    if !(total.is_finite() && total <= MAX_POINTS) {
        return Err(r.error_at(
            "milestones",
            format!(
                "the milestones award {} points in all; at most {}",
                num(total),
                num(MAX_POINTS)
            ),
        ));
    }
    Ok(())
}

/// An expression given as a YAML number must be a finite one (`.inf` and `.nan` are not sizes
/// or bounds).
pub fn finite_literal(r: &LoadedRubric, at: &str, e: &Expr) -> Result<(), ConfigError> {
    match e.literal() {
        Literal::Float(f) if !f.is_finite() => Err(r.error_at(
            at,
            format!("{f} is not a finite number; write a bound or a size as a finite number"),
        )),
        _ => Ok(()),
    }
}

/// An expression that reads no variable must evaluate to a finite number: YAML reads `1e400`
/// as text (too large for a float), which the expression then evaluates to infinity, and an
/// infinite tolerance passes every wrong answer.
pub fn finite_constant(
    r: &LoadedRubric,
    at: &str,
    e: &Expr,
    parsed: &super::expr::Expression,
) -> Result<(), ConfigError> {
    if !parsed.variables().is_empty() {
        return Ok(());
    }
    match parsed.eval_f64(&Default::default()) {
        Ok(v) if !v.is_finite() => Err(r.error_at(
            at,
            format!("`{}` evaluates to {v}; write a finite number", e.source()),
        )),
        _ => Ok(()),
    }
}

/// A number as messages show it: `1e308`, not 309 digits.
fn num(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-4..1e9).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        v.to_string()
    }
}

/// The range a value drawn for an element of `t` must stay in.
fn representable(t: ScalarType) -> (f64, f64) {
    match t {
        ScalarType::F32 => (-f64::from(f32::MAX), f64::from(f32::MAX)),
        ScalarType::F64 => (f64::MIN, f64::MAX),
        ScalarType::I32 => (f64::from(i32::MIN), f64::from(i32::MAX)),
        ScalarType::U32 => (0.0, f64::from(u32::MAX)),
        ScalarType::I64 => (i64::MIN as f64, i64::MAX as f64),
        ScalarType::U64 => (0.0, u64::MAX as f64),
        ScalarType::U8 => (0.0, 255.0),
        ScalarType::I8 => (-128.0, 127.0),
        ScalarType::U16 => (0.0, 65535.0),
        ScalarType::I16 => (-32768.0, 32767.0),
        ScalarType::F16 => (-65504.0, 65504.0),
        ScalarType::BF16 => (-f64::from(half::bf16::MAX), f64::from(half::bf16::MAX)),
    }
}

/// A buffer's `gen`, `specials` and `init`: bounds that are plain numbers are checked here,
/// at their line (bounds over the case's variables are checked when inputs are drawn).
pub fn check_param(
    r: &LoadedRubric,
    pat: &str,
    p: &Param,
    elem: ScalarType,
) -> Result<(), ConfigError> {
    if let Some(init) = p.init
        && init.is_nan()
    {
        return Err(r.error_at(
            &format!("{pat}.init"),
            "init: .nan would hide an output the kernel never writes (unwritten outputs \
             already read as NaN); give a number, or leave init out",
        ));
    }
    if let Some(s) = &p.specials
        && s.values.is_empty()
    {
        return Err(r.error_at(
            &format!("{pat}.specials.values"),
            "`specials` needs at least one value",
        ));
    }
    let Some(g) = &p.generator else {
        return Ok(());
    };
    check_gen(r, &format!("{pat}.gen"), g, elem)
}

/// A generator's plain-number bounds against what an element of `elem` holds; `gen_at` is the
/// path of the `gen` map (a parameter's, or a case's `gen.PARAM`).
pub fn check_gen(
    r: &LoadedRubric,
    gen_at: &str,
    g: &Gen,
    elem: ScalarType,
) -> Result<(), ConfigError> {
    let (key, bounds): (&str, Vec<&Expr>) = match g {
        Gen::Uniform(b) => ("uniform", b.iter().collect()),
        Gen::Normal(b) => ("normal", b.iter().collect()),
        Gen::Int(b) => ("int", b.iter().collect()),
        Gen::Constant(e) => ("constant", vec![e]),
        Gen::Values(_) => return Ok(()),
    };
    let at = |j: usize| {
        if matches!(g, Gen::Constant(_)) {
            format!("{gen_at}.{key}")
        } else {
            format!("{gen_at}.{key}[{j}]")
        }
    };
    let mut values = Vec::new();
    for (j, e) in bounds.iter().enumerate() {
        finite_literal(r, &at(j), e)?;
        let Ok(parsed) = e.parse_as(Kind::Real) else {
            return Ok(()); // reported where expressions are checked
        };
        if !parsed.variables().is_empty() {
            return Ok(());
        }
        let Ok(v) = parsed.eval_f64(&Default::default()) else {
            return Ok(());
        };
        values.push(v);
    }
    let (lo_ok, hi_ok) = representable(elem);
    let fits = |v: f64| v.is_finite() && v >= lo_ok && v <= hi_ok;
    // `int: [lo, hi)` never draws `hi`: an integer type's top value is drawn with one past it
    // (`[0, 256]` for every byte, `[0, 4294967296]` for every u32).
    let fits_upper = |v: f64| {
        fits(v)
            || (matches!(g, Gen::Int(_)) && !elem.is_float() && v.is_finite() && v <= hi_ok + 1.0)
    };
    match (g, values.as_slice()) {
        (Gen::Uniform(_) | Gen::Int(_), [lo, hi]) => {
            for (j, v) in [*lo, *hi].into_iter().enumerate() {
                let ok = if j == 1 { fits_upper(v) } else { fits(v) };
                if !ok {
                    return Err(r.error_at(
                        &at(j),
                        format!(
                            "{} is outside what a `{}` element holds ({} to {})",
                            num(v),
                            elem.name(),
                            num(lo_ok),
                            num(hi_ok)
                        ),
                    ));
                }
            }
            if lo >= hi {
                return Err(r.error_at(
                    &format!("{gen_at}.{key}"),
                    format!(
                        "the range [{}, {}) is empty: the first bound must be lower",
                        num(*lo),
                        num(*hi)
                    ),
                ));
            }
        }
        (Gen::Normal(_), [mean, std]) => {
            if !fits(*mean) {
                return Err(r.error_at(
                    &at(0),
                    format!(
                        "the mean {} is outside what a `{}` element holds",
                        num(*mean),
                        elem.name()
                    ),
                ));
            }
            if !(std.is_finite() && *std >= 0.0 && *std <= hi_ok / 16.0) {
                return Err(r.error_at(
                    &at(1),
                    format!(
                        "the standard deviation must be between 0 and {} for a `{}` buffer, \
                         not {}",
                        num(hi_ok / 16.0),
                        elem.name(),
                        num(*std)
                    ),
                ));
            }
        }
        (Gen::Constant(_), [v]) if !fits(*v) => {
            return Err(r.error_at(
                &at(0),
                format!(
                    "{} is outside what a `{}` element holds ({} to {})",
                    num(*v),
                    elem.name(),
                    num(lo_ok),
                    num(hi_ok)
                ),
            ));
        }
        _ => {}
    }
    Ok(())
}

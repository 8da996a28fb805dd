//! A case's tolerance in numbers: the rubric's bands (absolute, relative, units in the last
//! place, a partial-sum scale) resolved for one element type, and the test of one element
//! against them, in the same arithmetic as the device's comparison.

use super::INDEX_VAR;
use crate::model::precision::Precision;
use crate::rubric::expr::Vars;
use crate::rubric::schema::{ScalarType, Tolerance};

/// A tolerance with its expressions evaluated for one case.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resolved {
    pub abs: f64,
    pub rel: f64,
    pub ulp: Option<u64>,
    pub exact: bool,
    /// Coefficient of the element's partial-sum scale M (`Tolerance::sum`,
    /// [`sum_scale`](super::sum_scale)); 0 if none.
    pub sum: f64,
    /// The same tolerance evaluated with the coarse `u` of [`Precision::coarse_roundoff`],
    /// when that differs: an output outside `self` but inside this is imprecise, not wrong.
    pub coarse: Option<Band>,
    /// The precision the tolerance was evaluated for (what "imprecise" is relative to).
    pub precision: Precision,
}

/// The `abs`, `rel` and `sum` of a tolerance evaluated with another `u`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Band {
    pub abs: f64,
    pub rel: f64,
    pub sum: f64,
}

impl Resolved {
    /// The default for an element type when the rubric says nothing.
    pub fn default_for(elem: ScalarType) -> Resolved {
        match elem {
            ScalarType::F32 => Resolved::band(1e-6, 1e-5),
            ScalarType::F64 => Resolved::band(1e-12, 1e-10),
            // About 4 units in the last place of the type: a value computed in float and
            // rounded once, in any order, stays within it.
            ScalarType::F16 => Resolved::band(1e-5, 4e-3),
            ScalarType::BF16 => Resolved::band(1e-5, 3e-2),
            _ => Resolved {
                exact: true,
                ..Resolved::band(0.0, 0.0)
            },
        }
    }

    /// `|got - expected| <= abs + rel * |expected|`, nothing else.
    pub fn band(abs: f64, rel: f64) -> Resolved {
        Resolved {
            abs,
            rel,
            ulp: None,
            exact: false,
            sum: 0.0,
            coarse: None,
            precision: Precision::Fp32,
        }
    }

    /// Evaluate `t` for a lab computing in `precision`: its expressions read `u` as the
    /// precision's unit roundoff, and once more with the coarse `u` (see [`Band`]).
    pub fn with_precision(
        t: Option<&Tolerance>,
        elem: ScalarType,
        vars: &Vars,
        precision: Precision,
    ) -> Result<Resolved, String> {
        let mut v = vars.clone();
        v.insert("u".into(), precision.unit_roundoff());
        let mut c = vars.clone();
        c.insert("u".into(), precision.coarse_roundoff());
        Resolved::with_bands(t, elem, &v, &c, precision)
    }

    /// [`Resolved::with_precision`] with its two sets of variables made: `fine` reads `u` as
    /// the precision's unit roundoff, `coarse` as its coarse one.
    fn with_bands(
        t: Option<&Tolerance>,
        elem: ScalarType,
        fine_vars: &Vars,
        coarse_vars: &Vars,
        precision: Precision,
    ) -> Result<Resolved, String> {
        let mut fine = Resolved::from(t, elem, fine_vars)?;
        let coarse = Resolved::from(t, elem, coarse_vars)?;
        fine.precision = precision;
        if (coarse.abs, coarse.rel, coarse.sum) != (fine.abs, fine.rel, fine.sum) {
            fine.coarse = Some(Band {
                abs: coarse.abs,
                rel: coarse.rel,
                sum: coarse.sum,
            });
        }
        Ok(fine)
    }

    /// Evaluate `t` (falling back to the element type's default where `t` is silent). `u`
    /// is float's unit roundoff unless `vars` says otherwise ([`Resolved::with_precision`]).
    pub fn from(t: Option<&Tolerance>, elem: ScalarType, vars: &Vars) -> Result<Resolved, String> {
        let d = Resolved::default_for(elem);
        let Some(t) = t else { return Ok(d) };
        let mut vars = std::borrow::Cow::Borrowed(vars);
        if !vars.contains_key("u") {
            vars.to_mut()
                .insert("u".into(), Precision::Fp32.unit_roundoff());
        }
        // A tolerance read for the whole buffer (its description, a timed launch's check) is
        // element 0's; `per_element` gives each element its own.
        if !vars.contains_key(INDEX_VAR) {
            vars.to_mut().insert(INDEX_VAR.into(), 0.0);
        }
        let b = crate::rubric::args::tolerance_bounds(t, &vars)?;
        let given = t.abs.is_some() || t.rel.is_some() || t.ulp.is_some() || t.sum.is_some();
        Ok(Resolved {
            abs: b.abs.unwrap_or(if given { 0.0 } else { d.abs }),
            rel: b.rel.unwrap_or(if given { 0.0 } else { d.rel }),
            ulp: t.ulp,
            exact: t.exact || (!elem.is_float() && !given),
            sum: b.sum.unwrap_or(0.0).max(0.0),
            coarse: None,
            precision: Precision::Fp32,
        })
    }

    /// Whether `t`'s expressions read the element's index `i`.
    pub fn reads_index(t: Option<&Tolerance>) -> bool {
        t.is_some_and(Tolerance::reads_index)
    }

    /// `t` evaluated for elements `0..n` when it reads the element's index (`None` when it
    /// does not: one [`Resolved`] holds for every element).
    pub fn per_element(
        t: Option<&Tolerance>,
        elem: ScalarType,
        vars: &Vars,
        precision: Precision,
        n: usize,
    ) -> Result<Option<Vec<Resolved>>, String> {
        if !Resolved::reads_index(t) {
            return Ok(None);
        }
        // Two sets of variables made once, `i` set in place: no copy per element.
        let mut fine = vars.clone();
        fine.insert("u".into(), precision.unit_roundoff());
        let mut coarse = vars.clone();
        coarse.insert("u".into(), precision.coarse_roundoff());
        (0..n)
            .map(|i| {
                fine.insert(INDEX_VAR.into(), i as f64);
                coarse.insert(INDEX_VAR.into(), i as f64);
                Resolved::with_bands(t, elem, &fine, &coarse, precision)
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// One tolerance for a buffer of `n` elements, at least as wide as each element's where
    /// `t` reads the index (the widest of 65 elements spread over the buffer, the first and
    /// the last included); `t` as it is otherwise. For a timed launch's check on the device,
    /// which takes one tolerance per buffer: correctness compared every element under its own.
    pub fn widest(
        t: Option<&Tolerance>,
        elem: ScalarType,
        vars: &Vars,
        precision: Precision,
        n: usize,
    ) -> Result<Resolved, String> {
        let first = Resolved::with_precision(t, elem, vars, precision)?;
        if !Resolved::reads_index(t) || n <= 1 {
            return Ok(first);
        }
        let mut v = vars.clone();
        let mut w = first;
        for k in 0..=64usize {
            let i = (n - 1) * k / 64;
            v.insert(INDEX_VAR.into(), i as f64);
            let r = Resolved::with_precision(t, elem, &v, precision)?;
            w.abs = w.abs.max(r.abs);
            w.rel = w.rel.max(r.rel);
            w.sum = w.sum.max(r.sum);
            w.coarse = match (w.coarse, r.coarse) {
                (Some(a), Some(b)) => Some(Band {
                    abs: a.abs.max(b.abs),
                    rel: a.rel.max(b.rel),
                    sum: a.sum.max(b.sum),
                }),
                (a, b) => a.or(b),
            };
        }
        Ok(w)
    }

    pub fn describe(&self) -> String {
        if self.exact {
            return "exact".into();
        }
        let mut parts = vec![];
        if self.sum > 0.0 {
            let mut terms = vec![];
            if self.abs > 0.0 {
                terms.push(format!("{:.3e}", self.abs));
            }
            if self.rel > 0.0 {
                terms.push(format!("{:.3e} * |expected|", self.rel));
            }
            terms.push(format!("{:.3e} * M", self.sum));
            parts.push(format!(
                "|got - expected| <= {} (M: the size of the element's partial sums, min(S, |expected| + 4 R), S = sum |term|, R = sqrt(sum term^2) of its terms, e.g. the a*b of a dot product)",
                terms.join(" + ")
            ));
        } else if self.abs > 0.0 || self.rel > 0.0 {
            parts.push(format!(
                "|got - expected| <= {:.3e} + {:.3e} * |expected|",
                self.abs, self.rel
            ));
        }
        if let Some(u) = self.ulp {
            parts.push(format!("<= {u} ulp"));
        }
        if parts.is_empty() {
            "exact".into()
        } else {
            parts.join(" or ")
        }
    }

    /// Is `got` close enough to `expected`? (An element whose partial-sum scale is 0.)
    pub fn accepts(&self, expected: f64, got: f64, elem: ScalarType) -> bool {
        self.accepts_at(expected, got, 0.0, elem)
    }

    /// Is `got` close enough to `expected`, for an element whose partial-sum scale
    /// ([`sum_scale`](super::sum_scale)) is `mag` (ignored when not finite: an overflowed sum
    /// bounds nothing)?
    pub fn accepts_at(&self, expected: f64, got: f64, mag: f64, elem: ScalarType) -> bool {
        within(self.abs, self.rel, self.sum, self, expected, got, mag, elem)
    }

    /// Is `got` within the coarse band (see [`Band`])? Without one, as [`Resolved::accepts_at`].
    pub fn coarse_accepts_at(&self, expected: f64, got: f64, mag: f64, elem: ScalarType) -> bool {
        match self.coarse {
            Some(b) => within(b.abs, b.rel, b.sum, self, expected, got, mag, elem),
            None => self.accepts_at(expected, got, mag, elem),
        }
    }

    /// The allowance `abs + rel * |expected| + sum * mag` at one element.
    pub fn allowance(&self, expected: f64, mag: f64) -> f64 {
        let m = if mag.is_finite() { mag.abs() } else { 0.0 };
        self.abs + self.rel * expected.abs() + self.sum * m
    }
}

/// The rule of [`Resolved::accepts_at`] with the given `abs`, `rel`, `sum` (the same
/// arithmetic, in the same order, as `cugrade_compare` in measure/harness.cu).
#[allow(clippy::too_many_arguments)]
fn within(
    abs: f64,
    rel: f64,
    sum: f64,
    t: &Resolved,
    expected: f64,
    got: f64,
    mag: f64,
    elem: ScalarType,
) -> bool {
    if expected.is_nan() || got.is_nan() {
        return expected.is_nan() && got.is_nan();
    }
    if expected == got {
        return true;
    }
    if t.exact || expected.is_infinite() || got.is_infinite() {
        return false;
    }
    let m = if mag.is_finite() { mag.abs() } else { 0.0 };
    if (got - expected).abs() <= abs + rel * expected.abs() + sum * m {
        return true;
    }
    match t.ulp {
        Some(u) => ulp_distance(expected, got, elem) <= u,
        None => false,
    }
}

/// Units in the last place between two finite values of `elem`.
pub fn ulp_distance(a: f64, b: f64, elem: ScalarType) -> u64 {
    fn ordered32(x: f32) -> i64 {
        let i = x.to_bits() as i32;
        i64::from(if i < 0 { i32::MIN - i } else { i })
    }
    fn ordered64(x: f64) -> i128 {
        let i = x.to_bits() as i64;
        i128::from(if i < 0 { i64::MIN - i } else { i })
    }
    fn ordered16(bits: u16) -> i64 {
        let i = bits as i16;
        i64::from(if i < 0 { i16::MIN - i } else { i })
    }
    match elem {
        ScalarType::F32 => (ordered32(a as f32) - ordered32(b as f32)).unsigned_abs(),
        ScalarType::F16 => (ordered16(half::f16::from_f64(a).to_bits())
            - ordered16(half::f16::from_f64(b).to_bits()))
        .unsigned_abs(),
        ScalarType::BF16 => (ordered16(half::bf16::from_f64(a).to_bits())
            - ordered16(half::bf16::from_f64(b).to_bits()))
        .unsigned_abs(),
        _ => u64::try_from((ordered64(a) - ordered64(b)).unsigned_abs()).unwrap_or(u64::MAX),
    }
}

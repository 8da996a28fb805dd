//! Compare what a kernel produced with what the reference produced.
//!
//! Pure functions on bytes: the parent runs them on raw buffers the worker sent back, so no
//! verdict depends on anything the student's process claims. See docs/rubric.md for the
//! tolerance rules and their numerical reasoning.

pub mod classify;

pub use crate::model::precision::{self, Precision};
pub use classify::{Wrong, classify};

use crate::inputs::{Buffer, GUARD_BYTE, decode};
use crate::rubric::expr::Vars;
use crate::rubric::schema::{ScalarType, Tolerance};
use std::fmt::Write;

pub use crate::rubric::schema::INDEX_VAR;

/// How many mismatches a report lists.
pub const SHOWN_MISMATCHES: usize = 5;

/// A tolerance with its expressions evaluated for one case.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resolved {
    pub abs: f64,
    pub rel: f64,
    pub ulp: Option<u64>,
    pub exact: bool,
    /// Coefficient of the element's partial-sum scale M (`Tolerance::sum`, [`sum_scale`]);
    /// 0 if none.
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
    /// ([`sum_scale`]) is `mag` (ignored when not finite: an overflowed sum bounds nothing)?
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

/// One element that differs.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    pub index: usize,
    pub coords: Option<Vec<usize>>,
    pub expected: f64,
    pub got: f64,
    /// The element's allowance when it depends on the element (`sum`), for the listing.
    pub allowed: Option<f64>,
    /// The element still holds the poison pattern outputs start with, whatever its type.
    pub unwritten: bool,
}

/// The outcome of comparing one output buffer.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub buffer: String,
    pub total: usize,
    pub bad: usize,
    /// Elements still holding the poison value: never written.
    pub unwritten: usize,
    pub first: Vec<Mismatch>,
    pub tolerance: Resolved,
    /// The tolerance depends on the element's index (`tolerance` is element 0's).
    pub per_index: bool,
    pub elem: ScalarType,
}

impl Comparison {
    pub fn ok(&self) -> bool {
        self.bad == 0
    }

    /// A message a student can act on: where, what was expected, what came back.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "`{}`: {} of {} elements wrong",
            self.buffer, self.bad, self.total
        );
        if self.unwritten > 0 {
            let _ = write!(s, " ({} never written)", self.unwritten);
        }
        let _ = write!(s, "; tolerance: {}", self.tolerance.describe());
        if self.per_index {
            s.push_str(" at element 0, growing with the element's index");
        }
        for m in &self.first {
            let at = match &m.coords {
                Some(c) => format!(
                    "[{}] ({})",
                    m.index,
                    c.iter()
                        .map(|x| x.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None => format!("[{}]", m.index),
            };
            let _ = write!(
                s,
                "\n  {}{at}: expected {}, got {}",
                self.buffer,
                fmt_value(m.expected, self.elem),
                if m.unwritten {
                    "the poison value (never written)".to_string()
                } else {
                    fmt_value(m.got, self.elem)
                }
            );
            if let Some(a) = m.allowed.filter(|_| m.got.is_finite()) {
                let _ = write!(
                    s,
                    " (off by {:.3e}; this element allows {a:.3e})",
                    (m.got - m.expected).abs()
                );
            }
        }
        if self.bad > self.first.len() {
            let _ = write!(s, "\n  ... and {} more", self.bad - self.first.len());
        }
        s
    }
}

/// An output element as a student reads it: an integer as an integer (`81`, never
/// `8.100000000e1`), a float as the shortest text that reads back as the same value of its
/// type (`0.1`, `499712.3`, `1.5e-7`: two different values never print alike), NaN and
/// infinities by name.
pub fn fmt_value(v: f64, elem: ScalarType) -> String {
    if !v.is_finite() {
        return if v.is_nan() {
            "NaN".into()
        } else if v > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    if !elem.is_float() || (v.fract() == 0.0 && v.abs() < 1e15) {
        return format!("{v:.0}");
    }
    let small = v != 0.0 && v.abs() < 1e-4;
    let large = v.abs() >= 1e15;
    match (elem, small || large) {
        (ScalarType::F32, false) => format!("{}", v as f32),
        (ScalarType::F32, true) => format!("{:e}", v as f32),
        (_, false) => format!("{v}"),
        (_, true) => format!("{v:e}"),
    }
}

/// Row-major coordinates of `index` in `shape`.
pub fn coords(index: usize, shape: &[usize]) -> Vec<usize> {
    let mut rest = index;
    let mut out = vec![0; shape.len()];
    for (i, &d) in shape.iter().enumerate().rev() {
        let d = d.max(1);
        out[i] = rest % d;
        rest /= d;
    }
    out
}

/// Compare a buffer's payload as returned with the expected payload.
pub fn compare(buf: &Buffer, expected: &[u8], got: &[u8], tol: Resolved) -> Comparison {
    compare_at(buf, expected, got, None, tol)
}

/// The size of each element's partial sums, for a tolerance with `sum` (docs/rubric.md,
/// "Tolerances from an error model"). A float sum's rounding errors are proportional to its
/// partial sums, whatever the order it is computed in. Those never exceed S = Σ|term|, and for
/// terms of mixed sign they stay near |result| + a few R, R = sqrt(Σ term²) (a random walk's
/// excursion): M = min(S, |expected| + 4 R). `abs_terms` holds each element's S (the
/// reference's output on the inputs' absolute values), `squares` each element's R² (on the
/// inputs' squares), both laid out as `expected`. Without R², or where it underflowed or
/// overflowed (R² below 1e-36 or not finite), M = S.
pub fn sum_scale(expected: &[f64], abs_terms: &[f64], squares: Option<&[f64]>) -> Vec<f64> {
    abs_terms
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let r2 = squares.and_then(|q| q.get(i)).copied().unwrap_or(f64::NAN);
            let e = expected.get(i).copied().unwrap_or(f64::NAN).abs();
            if r2.is_finite() && r2 > 1e-36 && e.is_finite() {
                s.min(e + 4.0 * r2.sqrt())
            } else {
                s
            }
        })
        .collect()
}

/// [`compare`], with each element's partial-sum scale in `mag` ([`sum_scale`]) for a
/// tolerance with `sum`.
pub fn compare_at(
    buf: &Buffer,
    expected: &[u8],
    got: &[u8],
    mag: Option<&[f64]>,
    tol: Resolved,
) -> Comparison {
    compare_each(buf, expected, got, mag, tol, None)
}

/// [`compare_at`] with a tolerance per element where the rubric's reads the element's index
/// `i` (`each[i]`, from [`Resolved::per_element`]; `tol` is element 0's).
pub fn compare_each(
    buf: &Buffer,
    expected: &[u8],
    got: &[u8],
    mag: Option<&[f64]>,
    tol: Resolved,
    each: Option<&[Resolved]>,
) -> Comparison {
    let tol_at = |i: usize| each.and_then(|v| v.get(i)).copied().unwrap_or(tol);
    let e = decode(expected, buf.elem);
    let g = decode(got, buf.elem);
    let m = mag.unwrap_or_default();
    let mag_at = |i: usize| m.get(i).copied().unwrap_or(0.0);
    let mut c = Comparison {
        buffer: buf.name.clone(),
        total: e.len(),
        bad: 0,
        unwritten: 0,
        first: vec![],
        tolerance: tol,
        per_index: each.is_some(),
        elem: buf.elem,
    };
    let w = buf.elem.size();
    // 64-bit integers beyond 2^53 share an f64: an exact comparison reads their bits.
    let by_bits = tol.exact && !buf.elem.fits_f64();
    let bits = |b: &[u8], i: usize| b.get(i * w..i * w + w).map(<[u8]>::to_vec);
    for (i, (&ev, &gv)) in e.iter().zip(&g).enumerate() {
        let same = if by_bits {
            bits(expected, i) == bits(got, i)
        } else {
            tol_at(i).accepts_at(ev, gv, mag_at(i), buf.elem)
        };
        if same {
            continue;
        }
        c.bad += 1;
        // Every element type has its poison pattern (float64's is a NaN, 64-bit integers'
        // do not survive the trip through f64): the bytes decide.
        let unwritten = got
            .get(i * w..i * w + w)
            .is_some_and(|b| classify::is_poison(b, buf.elem));
        if unwritten && buf.dir == crate::rubric::schema::Direction::Out {
            c.unwritten += 1;
        }
        if c.first.len() < SHOWN_MISMATCHES {
            c.first.push(Mismatch {
                index: i,
                coords: buf.shape.as_ref().map(|s| coords(i, s)),
                expected: ev,
                got: gv,
                allowed: (tol.sum > 0.0 || each.is_some())
                    .then(|| tol_at(i).allowance(ev, mag_at(i))),
                unwritten,
            });
        }
    }
    if g.len() != e.len() {
        c.bad += e.len().abs_diff(g.len());
    }
    c
}

/// A write outside a buffer, found in its guard regions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrayWrite {
    /// Byte offset relative to the buffer's start (negative: before it).
    pub offset: i64,
    pub bytes: usize,
}

/// Check the guard regions of a returned allocation (`guard` bytes either side of `payload`).
pub fn guards(allocation: &[u8], payload: usize, guard: usize) -> Option<StrayWrite> {
    let before = &allocation[..guard.min(allocation.len())];
    let after = allocation.get(guard + payload..).unwrap_or(&[]);
    let first_before = before.iter().position(|&b| b != GUARD_BYTE);
    let count = |s: &[u8]| s.iter().filter(|&&b| b != GUARD_BYTE).count();
    if let Some(p) = first_before {
        return Some(StrayWrite {
            offset: p as i64 - guard as i64,
            bytes: count(before) + count(after),
        });
    }
    after
        .iter()
        .position(|&b| b != GUARD_BYTE)
        .map(|p| StrayWrite {
            offset: (payload + p) as i64,
            bytes: count(after),
        })
}

/// First element of a read-only input that changed, if any.
pub fn changed_input(buf: &Buffer, got: &[u8]) -> Option<usize> {
    let w = buf.elem.size();
    buf.data
        .chunks(w)
        .zip(got.chunks(w))
        .position(|(a, b)| a != b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_print_as_people_write_them() {
        use ScalarType::*;
        assert_eq!(fmt_value(81.0, F32), "81");
        assert_eq!(fmt_value(81.0, I32), "81");
        assert_eq!(fmt_value(-3.0, F64), "-3");
        assert_eq!(fmt_value(0.0, F32), "0");
        assert_eq!(fmt_value(f64::from(0.1f32), F32), "0.1");
        assert_eq!(fmt_value(499712.25, F32), "499712.25");
        assert_eq!(fmt_value(1.5e-7, F64), "1.5e-7");
        assert_eq!(fmt_value(f64::from(1.5e-7f32), F32), "1.5e-7");
        assert_eq!(fmt_value(3e20, F64), "3e20");
        assert_eq!(fmt_value(f64::NAN, F32), "NaN");
        assert_eq!(fmt_value(f64::NEG_INFINITY, F32), "-inf");
        // Neighbouring floats stay apart.
        let a = 1.0f32;
        let b = f32::from_bits(a.to_bits() + 1);
        assert_ne!(
            fmt_value(f64::from(a + 0.5), F32),
            fmt_value(f64::from(b + 0.5), F32)
        );
        assert_ne!(fmt_value(f64::from(b), F32), fmt_value(1.0, F32));
    }
    use crate::inputs::{GUARD, encode};
    use crate::rubric::schema::Direction;

    fn buf(shape: Option<Vec<usize>>) -> Buffer {
        Buffer {
            name: "C".into(),
            elem: ScalarType::F32,
            dir: Direction::Out,
            len: 6,
            shape,
            data: vec![],
            symbol: false,
            tolerance: None,
            fill: None,
        }
    }

    #[test]
    fn tolerance_rules() {
        let t = Resolved::band(1e-3, 0.0);
        assert!(t.accepts(1.0, 1.0009, ScalarType::F32));
        assert!(!t.accepts(1.0, 1.002, ScalarType::F32));
        assert!(t.accepts(f64::NAN, f64::NAN, ScalarType::F32));
        assert!(!t.accepts(1.0, f64::NAN, ScalarType::F32));
        assert!(!t.accepts(f64::INFINITY, 1e38, ScalarType::F32));
        assert!(t.accepts(f64::INFINITY, f64::INFINITY, ScalarType::F32));
        let u = Resolved {
            ulp: Some(2),
            ..Resolved::band(0.0, 0.0)
        };
        let one_up = f32::from_bits(1.0f32.to_bits() + 2) as f64;
        assert!(u.accepts(1.0, one_up, ScalarType::F32));
        assert!(!u.accepts(
            1.0,
            f32::from_bits(1.0f32.to_bits() + 3) as f64,
            ScalarType::F32
        ));
        assert_eq!(ulp_distance(-0.0, 0.0, ScalarType::F32), 0);
        assert_eq!(
            ulp_distance(
                -f32::MIN_POSITIVE as f64,
                f32::MIN_POSITIVE as f64,
                ScalarType::F32
            ),
            2 * (1 << 23)
        );
        let ints = Resolved::default_for(ScalarType::I32);
        assert!(ints.exact && !ints.accepts(3.0, 4.0, ScalarType::I32));
    }

    #[test]
    fn mismatch_report_names_index_coords_and_poison() {
        let b = buf(Some(vec![2, 3]));
        let exp = encode(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], ScalarType::F32);
        let mut got = encode(&[0.0, 1.0, 2.0, 3.0, 9.0, 5.0], ScalarType::F32);
        got[20..24].copy_from_slice(&crate::inputs::POISON_F32.to_le_bytes());
        let c = compare(&b, &exp, &got, Resolved::default_for(ScalarType::F32));
        assert_eq!((c.bad, c.unwritten), (2, 1));
        let text = c.describe();
        assert!(
            text.starts_with("`C`: 2 of 6 elements wrong (1 never written)"),
            "{text}"
        );
        assert!(text.contains("C[4] (1, 1): expected 4, got 9"), "{text}");
        assert!(
            text.contains("C[5] (1, 2): expected 5, got the poison value (never written)"),
            "{text}"
        );
    }

    /// Elements left as sent are "never written" in every element type, float64 and the
    /// 64-bit integers included (issue 32: a float64 output listed them as `got NaN`).
    #[test]
    fn never_written_elements_are_named_in_every_type() {
        use ScalarType::*;
        for elem in [F32, F64, I32, U32, I64, U64] {
            let mut b = buf(None);
            b.elem = elem;
            b.len = 3;
            let exp = encode(&[1.0, 2.0, 3.0], elem);
            let mut got = exp.clone();
            let w = elem.size();
            let poison = crate::inputs::poison_bytes(1, elem);
            got[w..2 * w].copy_from_slice(&poison);
            let c = compare(&b, &exp, &got, Resolved::default_for(elem));
            assert_eq!((c.bad, c.unwritten), (1, 1), "{elem:?}");
            let text = c.describe();
            assert!(
                text.contains("C[1]: expected 2, got the poison value (never written)"),
                "{elem:?}: {text}"
            );
        }
    }

    #[test]
    fn guards_and_const_inputs() {
        let mut a = vec![GUARD_BYTE; 2 * GUARD + 8];
        assert_eq!(guards(&a, 8, GUARD), None);
        a[GUARD + 8 + 4] = 0;
        assert_eq!(
            guards(&a, 8, GUARD),
            Some(StrayWrite {
                offset: 12,
                bytes: 1
            })
        );
        a[GUARD - 4] = 1;
        assert_eq!(guards(&a, 8, GUARD).unwrap().offset, -4);
        let mut b = buf(None);
        b.data = encode(&[1.0, 2.0], ScalarType::F32);
        assert_eq!(
            changed_input(&b, &encode(&[1.0, 2.0], ScalarType::F32)),
            None
        );
        assert_eq!(
            changed_input(&b, &encode(&[1.0, 3.0], ScalarType::F32)),
            Some(1)
        );
        assert_eq!(coords(7, &[2, 2, 2]), vec![1, 1, 1]);
    }

    fn buffer(elem: ScalarType, len: usize) -> Buffer {
        Buffer {
            name: "y".into(),
            elem,
            dir: crate::rubric::schema::Direction::Out,
            len,
            shape: None,
            data: crate::inputs::poison_bytes(len, elem),
            symbol: false,
            tolerance: None,
            fill: None,
        }
    }

    #[test]
    fn narrow_types_round_trip_and_keep_a_poison_of_their_own() {
        use ScalarType::*;
        let values = [0.0, 1.0, 7.0, 100.0, 127.0];
        for t in [U8, I8, U16, I16, F16, BF16] {
            let bytes = crate::inputs::encode(&values, t);
            assert_eq!(bytes.len(), values.len() * t.size(), "{t:?}");
            assert_eq!(decode(&bytes, t), values, "{t:?}");
            let p = crate::inputs::poison_bytes(1, t);
            assert_eq!(p.len(), t.size());
            assert!(classify::is_poison(&p, t));
        }
        assert_eq!(decode(&crate::inputs::encode(&[-3.0], I8), I8), [-3.0]);
        // Half rounds to nearest even; a NaN poison reads as NaN.
        assert_eq!(
            decode(&crate::inputs::encode(&[2049.0], F16), F16),
            [2048.0]
        );
        assert!(decode(&crate::inputs::poison_bytes(1, F16), F16)[0].is_nan());
        assert!(decode(&crate::inputs::poison_bytes(1, BF16), BF16)[0].is_nan());
        // Units in the last place of the type itself.
        let one_up = f64::from(half::f16::from_bits(half::f16::ONE.to_bits() + 1));
        assert_eq!(ulp_distance(1.0, one_up, F16), 1);
        let bf_up = f64::from(half::bf16::from_bits(half::bf16::ONE.to_bits() + 3));
        assert_eq!(ulp_distance(1.0, bf_up, BF16), 3);
    }

    #[test]
    fn a_64_bit_integer_is_compared_by_its_bits() {
        // 2^53 + 1 and 2^53 are one f64: an exact comparison must still tell them apart.
        let b = buffer(ScalarType::I64, 1);
        let e = ((1i64 << 53) + 1).to_le_bytes();
        let g = (1i64 << 53).to_le_bytes();
        let tol = Resolved::default_for(ScalarType::I64);
        assert!(!compare(&b, &e, &g, tol).ok());
        assert!(compare(&b, &e, &e, tol).ok());
        let u = buffer(ScalarType::U64, 1);
        let e = u64::MAX.to_le_bytes();
        let g = (u64::MAX - 1).to_le_bytes();
        assert!(!compare(&u, &e, &g, Resolved::default_for(ScalarType::U64)).ok());
    }

    #[test]
    fn a_tolerance_per_element_lets_late_elements_err_more() {
        let b = buffer(ScalarType::F32, 4);
        let e = crate::inputs::encode(&[1.0, 2.0, 3.0, 4.0], ScalarType::F32);
        // Element k is off by 0.1 * k: within an allowance of 0.1 * (k + 1) each.
        let g = crate::inputs::encode(&[1.0, 2.1, 3.2, 4.3], ScalarType::F32);
        let base = Resolved::band(0.1 + 1e-6, 0.0);
        let each: Vec<Resolved> = (0..4)
            .map(|k| Resolved::band(0.1 * (k + 1) as f64 + 1e-6, 0.0))
            .collect();
        assert!(!compare(&b, &e, &g, base).ok());
        let c = compare_each(&b, &e, &g, None, base, Some(&each));
        assert!(c.ok(), "{}", c.describe());
        // One element past its own allowance is named with it.
        let g = crate::inputs::encode(&[1.0, 2.1, 3.2, 4.5], ScalarType::F32);
        let c = compare_each(&b, &e, &g, None, base, Some(&each));
        assert_eq!((c.bad, c.first[0].index), (1, 3));
        assert!(
            c.describe().contains("this element allows 4.000e-1"),
            "{}",
            c.describe()
        );
        assert!(c.describe().contains("growing with the element's index"));
    }

    #[test]
    fn an_index_tolerance_is_evaluated_per_element_and_at_its_widest() {
        let t: Tolerance = serde_yaml::from_str("{abs: \"(i + 1) * u\"}").unwrap();
        assert!(Resolved::reads_index(Some(&t)));
        let vars = Vars::new();
        let each = Resolved::per_element(Some(&t), ScalarType::F32, &vars, Precision::Fp32, 4)
            .unwrap()
            .unwrap();
        let u = Precision::Fp32.unit_roundoff();
        let scaled: Vec<f64> = each.iter().map(|r| r.abs / u).collect();
        assert_eq!(scaled, [1.0, 2.0, 3.0, 4.0]);
        let widest =
            Resolved::widest(Some(&t), ScalarType::F32, &vars, Precision::Fp32, 256).unwrap();
        assert_eq!(widest.abs / u, 256.0);
        // Element 0's where one tolerance is read for the whole buffer.
        let first = Resolved::with_precision(Some(&t), ScalarType::F32, &vars, Precision::Fp32);
        assert_eq!(first.unwrap().abs / u, 1.0);
        let plain: Tolerance = serde_yaml::from_str("{abs: 0.5}").unwrap();
        assert!(
            Resolved::per_element(Some(&plain), ScalarType::F32, &vars, Precision::Fp32, 4)
                .unwrap()
                .is_none()
        );
    }
}

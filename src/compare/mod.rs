//! Compare what a kernel produced with what the reference produced.
//!
//! Pure functions on bytes: the parent runs them on raw buffers the worker sent back, so no
//! verdict depends on anything the student's process claims. See docs/rubric.md for the
//! tolerance rules and their numerical reasoning.

pub mod classify;
mod tolerance;

pub use crate::model::precision::{self, Precision};
pub use classify::{Wrong, classify};
pub use tolerance::{Band, Resolved, ulp_distance};

use crate::inputs::{Buffer, GUARD_BYTE, decode};
use crate::rubric::schema::ScalarType;
use std::fmt::Write;

pub use crate::rubric::schema::INDEX_VAR;

/// How many mismatches a report lists.
pub const SHOWN_MISMATCHES: usize = 5;

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
    use crate::rubric::expr::Vars;
    use crate::rubric::schema::{Direction, Tolerance};

    fn buf(shape: Option<Vec<usize>>) -> Buffer {
        Buffer {
            name: "C".into(),
            elem: ScalarType::F32,
            dir: Direction::Out,
            len: 6,
            shape,
            data: vec![],
            symbol: false,
            peers: false,
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
            peers: false,
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

//! What kind of wrong an output is. "3 of 1000 elements wrong" tells a student little; "the
//! output is the transpose of the right answer" or "NaN from element 17 on" tells them where to
//! look. Pure functions on the raw bytes the worker returned, the bytes the reference produced,
//! the bytes the buffer started with, and the shape the contract declares, so they work for any
//! lab's contract, not only the shipped ones.

use super::Resolved;
use crate::inputs::{Buffer, decode};
use crate::rubric::schema::ScalarType;

/// The kinds of wrong output cugrade names, most specific first (the order [`classify`] tries
/// them in). `cause()` is the stable key result.json carries in a check's `cause`.
#[derive(Debug, Clone, PartialEq)]
pub enum Wrong {
    /// The kernel never wrote this output: every element is as it was sent (the poison
    /// pattern, unless the contract initialises the output).
    Untouched { poison: bool },
    /// Some elements were never written; every element that was written is right.
    PartlyUnwritten {
        unwritten: usize,
        first: usize,
        poison: bool,
    },
    /// NaN or Inf where the reference has finite values (elements the kernel wrote).
    NonFinite {
        first: usize,
        count: usize,
        nan: bool,
    },
    /// Every wrong element is within the tolerance evaluated with a much coarser unit
    /// roundoff (`Resolved::coarse`): computed in less than the lab's precision.
    Imprecise {
        count: usize,
        first: usize,
        /// The largest error over what its element allows.
        worst: f64,
        precision: crate::compare::Precision,
    },
    /// Every element holds the expected value of the element `by` places before it (`by` < 0:
    /// after it): an index off by one or two, such as an exclusive scan where an inclusive one
    /// is asked for. Tried before [`Wrong::Imprecise`]: an error of one element's size is not
    /// a precision problem, however loose a tolerance that grows with the size is.
    Shifted { by: isize, wrong: usize },
    /// Every element is zero, where the reference is not all zeros.
    Zeros,
    /// Every element is off by the same constant.
    Offset { by: f64 },
    /// The transpose of the right answer (over the last two dimensions of the shape).
    Transposed,
    /// The right values in the wrong places.
    Permuted,
    /// Right inside, wrong only within `band` elements of the border along some dimension.
    Edges { band: usize, wrong: usize },
    /// None of the above: `wrong` elements differ.
    Values { wrong: usize },
}

impl Wrong {
    /// The stable key of this kind (result.json `cause`; docs/reports.md lists them).
    pub fn cause(&self) -> &'static str {
        match self {
            Wrong::Untouched { .. } => "untouched",
            Wrong::PartlyUnwritten { .. } => "unwritten",
            Wrong::NonFinite { nan: true, .. } => "nan",
            Wrong::NonFinite { nan: false, .. } => "inf",
            Wrong::Imprecise { .. } => "imprecise",
            Wrong::Shifted { .. } => "shifted",
            Wrong::Zeros => "zeros",
            Wrong::Offset { .. } => "offset",
            Wrong::Transposed => "transposed",
            Wrong::Permuted => "permuted",
            Wrong::Edges { .. } => "edges",
            Wrong::Values { .. } => "wrong-values",
        }
    }

    /// One sentence naming the kind of wrong, for buffer `name` of `total` elements.
    pub fn describe(&self, name: &str, total: usize) -> String {
        match self {
            Wrong::Untouched { poison: true } => format!(
                "`{name}` was never written: all {total} elements still hold the poison value \
                 cugrade fills outputs with"
            ),
            Wrong::Untouched { poison: false } => {
                format!("`{name}` was never written: all {total} elements are as they were sent")
            }
            Wrong::PartlyUnwritten {
                unwritten, first, ..
            } => format!(
                "{unwritten} of {total} elements of `{name}` were never written (the first is \
                 {name}[{first}]); every element that was written is right"
            ),
            Wrong::NonFinite { first, count, nan } => format!(
                "`{name}` holds {} where finite values were expected: {count} of {total} \
                 elements, the first at {name}[{first}]",
                if *nan { "NaN" } else { "Inf" }
            ),
            Wrong::Imprecise {
                count,
                first,
                worst,
                precision,
            } => format!(
                "results less precise than {} accumulation allows: {count} of {total} elements \
                 of `{name}` are off by more than {} rounding explains (up to {} times what the \
                 element allows; the first at {name}[{first}]), as from a computation in half \
                 precision, bfloat16 or TF32",
                precision.word(),
                precision.word(),
                fmt_num((worst * 10.0).round() / 10.0)
            ),
            Wrong::Shifted { by, wrong } => format!(
                "`{name}` holds the right values {} place{} {} ({wrong} of {total} elements \
                 wrong): {name}[i] is what {name}[i{}] should be, an index off by {}, such as \
                 an exclusive scan where an inclusive one is asked for",
                by.unsigned_abs(),
                if by.unsigned_abs() == 1 { "" } else { "s" },
                if *by > 0 { "late" } else { "early" },
                if *by > 0 {
                    format!(" - {by}")
                } else {
                    format!(" + {}", -by)
                },
                by.unsigned_abs()
            ),
            Wrong::Zeros => format!("`{name}` is all zeros, where the right answer is not"),
            Wrong::Offset { by } => format!(
                "`{name}` is off by a constant: every element is {} {} than expected",
                fmt_num(by.abs()),
                if *by > 0.0 { "more" } else { "less" }
            ),
            Wrong::Transposed => format!(
                "`{name}` holds the transpose of the right answer: rows and columns are swapped"
            ),
            Wrong::Permuted => format!(
                "`{name}` holds the right values in the wrong places (a permutation of the \
                 expected output): check the index arithmetic of the stores"
            ),
            Wrong::Edges { band, wrong } => format!(
                "`{name}` is right except at the edges: all {wrong} wrong elements lie within \
                 {band} of the border (bounds or padding)"
            ),
            Wrong::Values { wrong } => {
                format!("`{name}` has wrong values: {wrong} of {total} elements")
            }
        }
    }
}

fn fmt_num(x: f64) -> String {
    let s = format!("{x:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Does `bytes` (one element) hold the poison value of `elem`?
pub(crate) fn is_poison(bytes: &[u8], elem: ScalarType) -> bool {
    bytes == crate::inputs::poison_bytes(1, elem).as_slice()
}

/// Classify a wrong output. `initial` is the payload the buffer was sent with (`buf.data`),
/// `expected` the reference's payload, `got` the student's. Call it only for a buffer that
/// has at least one wrong element; on one that is right it answers `Values { wrong: 0 }`.
pub fn classify(buf: &Buffer, initial: &[u8], expected: &[u8], got: &[u8], tol: Resolved) -> Wrong {
    classify_at(buf, initial, expected, got, None, tol)
}

/// [`classify`] with each element's partial-sum scale (`compare::sum_scale`).
pub fn classify_at(
    buf: &Buffer,
    initial: &[u8],
    expected: &[u8],
    got: &[u8],
    mag: Option<&[f64]>,
    tol: Resolved,
) -> Wrong {
    classify_each(buf, initial, expected, got, mag, tol, None)
}

/// [`classify_at`] with a tolerance per element where the rubric's reads the element's index
/// (`each[i]`; `tol` is element 0's).
pub fn classify_each(
    buf: &Buffer,
    initial: &[u8],
    expected: &[u8],
    got: &[u8],
    mag: Option<&[f64]>,
    tol: Resolved,
    each: Option<&[Resolved]>,
) -> Wrong {
    let tol_at = |i: usize| each.and_then(|v| v.get(i)).copied().unwrap_or(tol);
    let elem = buf.elem;
    let w = elem.size();
    let e = decode(expected, elem);
    let g = decode(got, elem);
    let m = mag.unwrap_or_default();
    let mag_at = |i: usize| m.get(i).copied().unwrap_or(0.0);
    // For the structural checks below (transposed, permuted, offset), which pair elements at
    // other positions: the largest sum of absolute terms.
    let mag_max = m
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .fold(0.0, f64::max);
    // With a tolerance per element, the widest of them.
    let (abs_max, rel_max, sum_max) = each
        .unwrap_or_default()
        .iter()
        .fold((tol.abs, tol.rel, tol.sum), |(a, r, s), t| {
            (a.max(t.abs), r.max(t.rel), s.max(t.sum))
        });
    let tol_any = Resolved {
        abs: abs_max + sum_max * mag_max,
        rel: rel_max,
        sum: 0.0,
        coarse: None,
        ..tol
    };
    let n = e.len().min(g.len());
    if n == 0 {
        return Wrong::Values { wrong: 0 };
    }
    let element = |b: &[u8], i: usize| b.get(i * w..i * w + w).map(<[u8]>::to_vec);
    let unwritten_at =
        |i: usize| element(got, i).is_some() && element(got, i) == element(initial, i);
    let poison = initial.get(..w).is_some_and(|b| is_poison(b, elem));
    let ok = |i: usize| tol_at(i).accepts_at(e[i], g[i], mag_at(i), elem);
    let bad: Vec<usize> = (0..n).filter(|&i| !ok(i)).collect();
    if bad.is_empty() {
        return Wrong::Values { wrong: 0 };
    }
    let values = Wrong::Values { wrong: bad.len() };

    // Never written, entirely or partly.
    let unwritten: Vec<usize> = bad.iter().copied().filter(|&i| unwritten_at(i)).collect();
    if unwritten.len() == n && got != expected {
        return Wrong::Untouched { poison };
    }
    if !unwritten.is_empty() && unwritten.len() == bad.len() {
        return Wrong::PartlyUnwritten {
            unwritten: unwritten.len(),
            first: unwritten[0],
            poison,
        };
    }

    // NaN or Inf the kernel produced (not poison it left behind).
    let non_finite: Vec<usize> = bad
        .iter()
        .copied()
        .filter(|&i| !unwritten_at(i) && !g[i].is_finite() && e[i].is_finite())
        .collect();
    if let Some(&first) = non_finite.first() {
        return Wrong::NonFinite {
            first,
            count: non_finite.len(),
            nan: g[first].is_nan(),
        };
    }

    // Off by a constant: the first wrong element's difference explains every element.
    let by = g[bad[0]] - e[bad[0]];
    let offset = by.is_finite()
        && by != 0.0
        && n >= 2
        && (0..n).all(|i| tol_any.accepts(e[i] + by, g[i], elem));
    if let Some(by) = shifted(&e[..n], &g[..n], &bad, |i, j| {
        tol_at(j).accepts_at(e[j], g[i], mag_at(j), elem)
    })
    .filter(|_| !offset)
    {
        return Wrong::Shifted {
            by,
            wrong: bad.len(),
        };
    }

    // Close, but not as close as the lab's precision allows: every wrong element is within
    // the coarse band.
    if tol.coarse.is_some()
        && bad
            .iter()
            .all(|&i| tol_at(i).coarse_accepts_at(e[i], g[i], mag_at(i), elem))
    {
        let worst = bad
            .iter()
            .map(|&i| {
                (g[i] - e[i]).abs() / tol_at(i).allowance(e[i], mag_at(i)).max(f64::MIN_POSITIVE)
            })
            .fold(0.0, f64::max);
        return Wrong::Imprecise {
            count: bad.len(),
            first: bad[0],
            worst,
            precision: tol.precision,
        };
    }

    if g[..n].iter().all(|&x| x == 0.0) && e[..n].iter().any(|&x| x != 0.0) {
        return Wrong::Zeros;
    }

    // The rest only mean something with more than one element.
    if n < 2 {
        return values;
    }

    if offset {
        return Wrong::Offset { by };
    }

    if let Some(shape) = &buf.shape
        && transposed(shape, &e[..n], &g[..n], tol_any, elem)
    {
        return Wrong::Transposed;
    }

    if permuted(&e[..n], &g[..n], tol_any, elem) {
        return Wrong::Permuted;
    }

    if let Some(shape) = &buf.shape
        && let Some(band) = edges(shape, &bad, n)
    {
        return Wrong::Edges {
            band,
            wrong: bad.len(),
        };
    }
    values
}

/// The shift `k` (1, -1, 2, -2) for which every element `i` with `i - k` in range holds what
/// element `i - k` should (`same(i, i - k)`, the lab's own tolerance), where that explains a
/// wrong element: `None` when no shift does. Needs three elements and a wrong one inside the
/// shifted range (outside it, at the ends, anything may stand: a scan's identity, say).
fn shifted(
    e: &[f64],
    g: &[f64],
    bad: &[usize],
    same: impl Fn(usize, usize) -> bool,
) -> Option<isize> {
    let n = e.len().min(g.len());
    if n < 3 {
        return None;
    }
    [1isize, -1, 2, -2].into_iter().find(|&k| {
        let inside = |i: usize| {
            let j = i as isize - k;
            (j >= 0 && (j as usize) < n).then_some(j as usize)
        };
        let covered = (0..n).filter(|&i| inside(i).is_some()).count();
        bad.iter().any(|&i| inside(i).is_some())
            && covered >= 2
            && (0..n).all(|i| inside(i).is_none_or(|j| same(i, j)))
    })
}

/// Is `g` the transpose of `e` over the last two dimensions of `shape` (leading dimensions are
/// a batch)? `e` is row-major `[.., R, C]`; its transpose is row-major `[.., C, R]`.
fn transposed(shape: &[usize], e: &[f64], g: &[f64], tol: Resolved, elem: ScalarType) -> bool {
    if shape.len() < 2 {
        return false;
    }
    let (r, c) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    if r < 2
        || c < 2
        || r.checked_mul(c)
            .is_none_or(|rc| rc == 0 || !e.len().is_multiple_of(rc))
    {
        return false;
    }
    let plane = r * c;
    for b in 0..e.len() / plane {
        for i in 0..r {
            for j in 0..c {
                let want = e[b * plane + i * c + j];
                let got = g[b * plane + j * r + i];
                if !tol.accepts(want, got, elem) {
                    return false;
                }
            }
        }
    }
    true
}

/// Are the values of `g` those of `e`, in another order?
fn permuted(e: &[f64], g: &[f64], tol: Resolved, elem: ScalarType) -> bool {
    let sorted = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        s
    };
    let (se, sg) = (sorted(e), sorted(g));
    // A permutation of a constant buffer is the buffer itself: nothing to say.
    se.first() != se.last() && se.iter().zip(&sg).all(|(a, b)| tol.accepts(*a, *b, elem))
}

/// Do all `bad` elements lie near the border along some dimension of `shape`, with a right
/// interior? Returns the band width. The band is a quarter of the dimension at most, so a
/// kernel that is wrong almost everywhere is not called "right except at the edges".
fn edges(shape: &[usize], bad: &[usize], n: usize) -> Option<usize> {
    if shape.iter().product::<usize>() != n || bad.len() * 2 > n {
        return None;
    }
    let coords: Vec<Vec<usize>> = bad.iter().map(|&i| super::coords(i, shape)).collect();
    let mut best: Option<usize> = None;
    // Per element, its distance from the border along each dimension; an element is an edge
    // element when that distance is under the band in at least one dimension.
    let max_band = shape.iter().map(|&d| d / 4).max().unwrap_or(0);
    for band in 1..=max_band.min(64) {
        let all_at_edge = coords.iter().all(|c| {
            c.iter()
                .zip(shape)
                .any(|(&x, &d)| d >= 4 * band && (x < band || x >= d - band))
        });
        if all_at_edge {
            best = Some(band);
            break;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::{POISON_F32, POISON_F64, POISON_INT, encode};
    use crate::rubric::schema::Direction;

    fn buf(len: usize, shape: Option<Vec<usize>>) -> Buffer {
        Buffer {
            name: "C".into(),
            elem: ScalarType::F32,
            dir: Direction::Out,
            len,
            shape,
            data: POISON_F32.to_le_bytes().repeat(len),
            symbol: false,
            peers: false,
            tolerance: None,
            fill: None,
        }
    }

    fn tol() -> Resolved {
        Resolved::default_for(ScalarType::F32)
    }

    /// Classify `got` against `expected` for a poisoned f32 output of `shape`.
    fn class(expected: &[f64], got: &[f64], shape: Option<Vec<usize>>) -> Wrong {
        let b = buf(expected.len(), shape);
        let e = encode(expected, ScalarType::F32);
        let g = encode(got, ScalarType::F32);
        classify(&b, &b.data.clone(), &e, &g, tol())
    }

    fn ramp(n: usize) -> Vec<f64> {
        (0..n).map(|i| (i as f64) * 0.5 - 7.0).collect()
    }

    #[test]
    fn untouched_output_is_named_as_poison() {
        let e = ramp(12);
        let b = buf(12, None);
        let got = b.data.clone();
        let w = classify(&b, &b.data, &encode(&e, ScalarType::F32), &got, tol());
        assert_eq!(w, Wrong::Untouched { poison: true });
        assert!(w.describe("C", 12).contains("poison"));
        assert_eq!(w.cause(), "untouched");
    }

    #[test]
    fn partly_unwritten_names_the_first_hole() {
        let e = ramp(12);
        let b = buf(12, None);
        let mut got = encode(&e, ScalarType::F32);
        got[40..48].copy_from_slice(&b.data[40..48]);
        let w = classify(&b, &b.data, &encode(&e, ScalarType::F32), &got, tol());
        assert_eq!(
            w,
            Wrong::PartlyUnwritten {
                unwritten: 2,
                first: 10,
                poison: true
            }
        );
    }

    #[test]
    fn nan_and_inf_where_finite_expected() {
        let e = ramp(8);
        let mut g = e.clone();
        g[3] = f64::NAN;
        g[5] = f64::NAN;
        let w = class(&e, &g, None);
        assert_eq!(
            w,
            Wrong::NonFinite {
                first: 3,
                count: 2,
                nan: true
            }
        );
        assert!(
            w.describe("out", 8).contains("NaN"),
            "{}",
            w.describe("out", 8)
        );
        assert!(w.describe("out", 8).contains("out[3]"));
        g[3] = f64::INFINITY;
        g[5] = 1.0;
        assert_eq!(class(&e, &g, None).cause(), "inf");
        // All NaN (not poison: a kernel that computed 0/0 everywhere).
        assert_eq!(class(&e, &[f64::NAN; 8], None).cause(), "nan");
        // A single-element output (a reduction) too.
        assert_eq!(class(&[42.0], &[f64::NAN], None).cause(), "nan");
    }

    #[test]
    fn all_zeros() {
        let e = ramp(16);
        assert_eq!(class(&e, &[0.0; 16], Some(vec![4, 4])), Wrong::Zeros);
        assert_eq!(class(&[5.0], &[0.0], None), Wrong::Zeros);
    }

    #[test]
    fn shifted_by_one_is_named_not_called_imprecise() {
        // An exclusive scan where the inclusive one is asked for, under a tolerance that grows
        // with the index and a coarse band that would call it "imprecise".
        let x: Vec<f64> = (0..64).map(|i| ((i * 7) % 5) as f64 - 2.0).collect();
        let inclusive: Vec<f64> = x
            .iter()
            .scan(0.0, |s, v| {
                *s += v;
                Some(*s)
            })
            .collect();
        let mut exclusive = vec![0.0];
        exclusive.extend_from_slice(&inclusive[..63]);
        let mut loose = tol();
        loose.coarse = Some(crate::compare::Band {
            abs: 10.0,
            rel: 0.0,
            sum: 0.0,
        });
        let b = buf(64, None);
        let w = classify(
            &b,
            &b.data.clone(),
            &encode(&inclusive, ScalarType::F32),
            &encode(&exclusive, ScalarType::F32),
            loose,
        );
        assert!(matches!(w, Wrong::Shifted { by: 1, .. }), "{w:?}");
        let text = w.describe("y", 64);
        assert!(text.contains("y[i] is what y[i - 1] should be"), "{text}");
        // One place early: y[i] holds y[i + 1]'s value.
        let early: Vec<f64> = inclusive[1..].iter().copied().chain([0.0]).collect();
        let w = class(&inclusive, &early, None);
        assert!(matches!(w, Wrong::Shifted { by: -1, .. }), "{w:?}");
        // A ramp shifted is also a constant offset: that is the simpler story, and comes first
        // only where shifting does not explain it; a constant signal cannot be shifted.
        assert_eq!(
            class(&[1.0, 1.0, 1.0, 1.0], &[2.0, 2.0, 2.0, 2.0], None),
            Wrong::Offset { by: 1.0 }
        );
    }

    #[test]
    fn off_by_a_constant() {
        let e = ramp(10);
        let g: Vec<f64> = e.iter().map(|x| x + 3.0).collect();
        let w = class(&e, &g, None);
        assert_eq!(w, Wrong::Offset { by: 3.0 });
        assert!(
            w.describe("c", 10).contains("3 more"),
            "{}",
            w.describe("c", 10)
        );
        // One element: every wrong value is "off by a constant", so nothing is claimed.
        assert_eq!(class(&[1.0], &[4.0], None), Wrong::Values { wrong: 1 });
    }

    #[test]
    fn transposed_square_and_rectangular() {
        // [2, 3] expected; the kernel wrote its transpose, [3, 2] row-major.
        let e = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let g = vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0];
        assert_eq!(class(&e, &g, Some(vec![2, 3])), Wrong::Transposed);
        // Square, with a batch dimension in front.
        let e: Vec<f64> = (0..18).map(f64::from).collect();
        let mut g = vec![0.0; 18];
        for b in 0..2 {
            for i in 0..3 {
                for j in 0..3 {
                    g[b * 9 + j * 3 + i] = e[b * 9 + i * 3 + j];
                }
            }
        }
        let w = class(&e, &g, Some(vec![2, 3, 3]));
        assert_eq!(w, Wrong::Transposed);
        assert!(w.describe("out", 18).contains("transpose"));
        // Without a shape it is still a permutation.
        assert_eq!(class(&e, &g, None), Wrong::Permuted);
    }

    #[test]
    fn permutation() {
        let e = ramp(6);
        let g = vec![e[1], e[0], e[2], e[3], e[5], e[4]];
        assert_eq!(class(&e, &g, Some(vec![6])), Wrong::Permuted);
    }

    #[test]
    fn right_except_at_the_edges() {
        // 8x8, wrong in the first and last row and column (a convolution without padding).
        let e: Vec<f64> = (0..64).map(|i| f64::from(i) + 1.0).collect();
        let mut g = e.clone();
        for i in 0..8 {
            for j in 0..8 {
                if i == 0 || j == 0 || i == 7 || j == 7 {
                    g[i * 8 + j] = -1.0 - f64::from(i as u32 * 8 + j as u32) * 0.37;
                }
            }
        }
        assert_eq!(
            class(&e, &g, Some(vec![8, 8])),
            Wrong::Edges { band: 1, wrong: 28 }
        );
        // Wrong in the middle: not an edge problem.
        let mut g = e.clone();
        g[3 * 8 + 4] = 1e6;
        g[4 * 8 + 3] = -1e6;
        assert_eq!(class(&e, &g, Some(vec![8, 8])), Wrong::Values { wrong: 2 });
    }

    #[test]
    fn plain_wrong_values() {
        let e = ramp(10);
        let mut g = e.clone();
        g[2] = 100.0;
        g[7] = -30.5;
        let w = class(&e, &g, None);
        assert_eq!(w, Wrong::Values { wrong: 2 });
        assert_eq!(
            w.describe("c", 10),
            "`c` has wrong values: 2 of 10 elements"
        );
    }

    #[test]
    fn works_on_integers_and_doubles() {
        let mut b = buf(4, None);
        b.elem = ScalarType::I32;
        b.data = POISON_INT.to_le_bytes().repeat(4);
        let e = encode(&[1.0, 2.0, 3.0, 4.0], ScalarType::I32);
        let g = encode(&[0.0; 4], ScalarType::I32);
        let t = Resolved::default_for(ScalarType::I32);
        assert_eq!(classify(&b, &b.data, &e, &g, t), Wrong::Zeros);
        assert_eq!(
            classify(&b, &b.data, &e, &b.data.clone(), t),
            Wrong::Untouched { poison: true }
        );
        let mut d = buf(3, None);
        d.elem = ScalarType::F64;
        d.data = POISON_F64.to_le_bytes().repeat(3);
        let e = encode(&[1.0, 2.0, 3.0], ScalarType::F64);
        let g = encode(&[1.0, f64::NAN, 3.0], ScalarType::F64);
        let t = Resolved::default_for(ScalarType::F64);
        assert_eq!(classify(&d, &d.data, &e, &g, t).cause(), "nan");
    }

    #[test]
    fn short_or_odd_buffers_do_not_panic() {
        let b = buf(4, Some(vec![0, 4]));
        let e = encode(&[1.0, 2.0, 3.0, 4.0], ScalarType::F32);
        assert_eq!(
            classify(&b, &b.data, &e, &[1, 2, 3], tol()),
            Wrong::Values { wrong: 0 }
        );
        assert_eq!(
            classify(&b, &[], &e, &e[..8], tol()),
            Wrong::Values { wrong: 0 }
        );
        let g = encode(&[4.0, 3.0, 2.0, 1.0], ScalarType::F32);
        assert_eq!(classify(&b, &b.data, &e, &g, tol()), Wrong::Permuted);
    }
}

//! CPU `softmax_rows`: numerically stable row-wise softmax (lab `softmax`), in f64.

use super::{Args, BaselineError, HostArgs, Threads, product, with_output};
use rayon::prelude::*;

const IMP: &str = "softmax_rows";

pub fn softmax_rows(args: &mut HostArgs, threads: Threads) -> Result<(), BaselineError> {
    let a = Args::new(IMP, args);
    let (rows, cols) = (a.size("rows")?, a.size("cols")?);
    let len = product(IMP, &[rows, cols])?;
    with_output(IMP, args, "out", len, |a, out| {
        let input = a.f32("in", len)?;
        if cols == 0 {
            return Ok(());
        }
        let row = |(o, x): (&mut [f32], &[f32])| softmax_row(x, o);
        match threads {
            Threads::Single => out.chunks_mut(cols).zip(input.chunks(cols)).for_each(row),
            Threads::Parallel => out
                .par_chunks_mut(cols)
                .zip(input.par_chunks(cols))
                .for_each(row),
        }
        Ok(())
    })
}

/// `o = softmax(x)`, subtracting the maximum first so that no `exp` overflows.
pub(crate) fn softmax_row(x: &[f32], o: &mut [f32]) {
    let m = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let sum: f64 = x.iter().map(|&v| (v as f64 - m).exp()).sum();
    for (o, &v) in o.iter_mut().zip(x) {
        *o = ((v as f64 - m).exp() / sum) as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::HostBuffer::F32;
    use crate::baseline::testutil::*;

    #[test]
    fn by_hand_and_stable_at_large_logits() {
        // Row 0: [0, ln 3] -> [1/4, 3/4]. Row 1: [100, 100+ln 3], where exp(100) overflows f32
        // but the max-subtracted form does not. Row length 1 is always [1].
        let l3 = 3f32.ln();
        for t in [Threads::Single, Threads::Parallel] {
            let mut a = args(
                vec![
                    ("in", F32(vec![0.0, l3, 100.0, 100.0 + l3])),
                    ("out", F32(vec![0.0; 4])),
                ],
                &[("rows", 2.), ("cols", 2.)],
            );
            softmax_rows(&mut a, t).unwrap();
            assert_close(&out(&a, "out"), &[0.25, 0.75, 0.25, 0.75], 1e-5);

            let mut a = args(
                vec![
                    ("in", F32(vec![-87.0, 1e30, 5.0])),
                    ("out", F32(vec![0.0; 3])),
                ],
                &[("rows", 3.), ("cols", 1.)],
            );
            softmax_rows(&mut a, t).unwrap();
            assert_eq!(out(&a, "out"), vec![1.0, 1.0, 1.0]);
        }
    }
}

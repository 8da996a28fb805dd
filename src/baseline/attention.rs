//! CPU `attention` (lab `attention`): scaled dot-product attention over a padded batch with
//! per-sequence lengths and optional causal masking, in f64.
//!
//! `Q`, `K`, `V`, `O` are `[batch][max_len][d]`. For sequence `b` of length
//! `L = seq_lens[b]` and query row `i < L`:
//! `O[b][i] = sum_j p_j V[b][j]` with `p = softmax_j(Q[b][i] . K[b][j] / sqrt(d))` over keys
//! `j < L` (and `j <= i` when `causal != 0`). Rows `i >= L` are written as zeros.

use super::{Args, BaselineError, HostArgs, Threads, product, with_output};
use rayon::prelude::*;

const IMP: &str = "attention";

pub fn attention(args: &mut HostArgs, threads: Threads) -> Result<(), BaselineError> {
    let a = Args::new(IMP, args);
    let (batch, max_len, d) = (a.size("batch")?, a.size("max_len")?, a.size("d")?);
    let causal = a.int("causal", 0)? != 0;
    let len = product(IMP, &[batch, max_len, d])?;
    with_output(IMP, args, "O", len, |a, o| {
        let (q, k, v) = (a.f32("Q", len)?, a.f32("K", len)?, a.f32("V", len)?);
        let lens = a.i32("seq_lens", batch)?;
        if let Some((b, l)) = lens
            .iter()
            .enumerate()
            .find(|(_, l)| !(0..=max_len as i64).contains(&(**l as i64)))
        {
            return Err(a.err(format!("seq_lens[{b}] = {l} is outside [0, {max_len}]")));
        }
        if d == 0 {
            return Ok(());
        }
        let scale = 1.0 / (d as f64).sqrt();
        // One output row per (b, i), numbered b * max_len + i.
        let row = |(r, o): (usize, &mut [f32])| {
            let (b, i) = (r / max_len, r % max_len);
            let l = lens[b] as usize;
            if i >= l {
                o.fill(0.0);
                return;
            }
            let keys = if causal { i + 1 } else { l };
            let base = b * max_len * d;
            let qi = &q[base + i * d..base + (i + 1) * d];
            let scores: Vec<f64> = (0..keys)
                .map(|j| {
                    let kj = &k[base + j * d..base + (j + 1) * d];
                    qi.iter()
                        .zip(kj)
                        .map(|(&x, &y)| x as f64 * y as f64)
                        .sum::<f64>()
                        * scale
                })
                .collect();
            let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let p: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
            let sum: f64 = p.iter().sum();
            for (c, o) in o.iter_mut().enumerate() {
                let acc: f64 = p
                    .iter()
                    .enumerate()
                    .map(|(j, pj)| pj * v[base + j * d + c] as f64)
                    .sum();
                *o = (acc / sum) as f32;
            }
        };
        match threads {
            Threads::Single => o.chunks_mut(d).enumerate().for_each(row),
            Threads::Parallel => o.par_chunks_mut(d).enumerate().for_each(row),
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::HostBuffer::{F32, I32};
    use crate::baseline::testutil::*;

    fn mk(causal: f64, lens: Vec<i32>) -> HostArgs {
        // batch 1, max_len 3, d 1. Q = K = 0 makes every score equal, so the output is the
        // mean of the visible V rows: that isolates masking and lengths.
        args(
            vec![
                ("Q", F32(vec![0.0; 3])),
                ("K", F32(vec![0.0; 3])),
                ("V", F32(vec![3.0, 6.0, 9.0])),
                ("seq_lens", I32(lens)),
                ("O", F32(vec![f32::NAN; 3])),
            ],
            &[
                ("batch", 1.),
                ("max_len", 3.),
                ("d", 1.),
                ("causal", causal),
            ],
        )
    }

    #[test]
    fn masking_and_lengths_by_hand() {
        for t in [Threads::Single, Threads::Parallel] {
            let mut a = mk(0.0, vec![3]);
            attention(&mut a, t).unwrap();
            assert_close(&out(&a, "O"), &[6.0, 6.0, 6.0], 1e-6);
            let mut a = mk(1.0, vec![3]);
            attention(&mut a, t).unwrap();
            assert_close(&out(&a, "O"), &[3.0, 4.5, 6.0], 1e-6);
            let mut a = mk(0.0, vec![2]);
            attention(&mut a, t).unwrap();
            assert_close(&out(&a, "O"), &[4.5, 4.5, 0.0], 1e-6);
        }
    }

    #[test]
    fn large_scores_do_not_overflow() {
        // Scores of 100 and 0: weight of the first key is 1/(1+e^-100) = 1 to f32.
        let mut a = args(
            vec![
                ("Q", F32(vec![10.0])),
                ("K", F32(vec![10.0, 0.0])),
                ("V", F32(vec![1.0, -1.0])),
                ("seq_lens", I32(vec![1, 2])),
                ("O", F32(vec![f32::NAN; 2])),
            ],
            &[("batch", 1.), ("max_len", 1.), ("d", 1.), ("causal", 0.)],
        );
        // batch 1 with max_len 1: only seq_lens[0] and the first key count.
        attention(&mut a, Threads::Single).unwrap();
        assert_eq!(out(&a, "O")[0], 1.0);
    }

    #[test]
    fn bad_lengths_are_errors() {
        let e = attention(&mut mk(0.0, vec![4]), Threads::Single).unwrap_err();
        assert!(e.message.contains("seq_lens[0]"), "{}", e.message);
    }
}

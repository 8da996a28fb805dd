//! CPU `matmul`: row-major `C[MxN] = A[MxK] * B[KxN]` (lab `matmul`).
//!
//! Loop order i-k-j (streams rows of B, the cache-friendly form of the triple loop), with an
//! f64 accumulator row so that the result is accurate enough to cross-check the reference.

use super::{Args, BaselineError, HostArgs, Threads, product, with_output};
use rayon::prelude::*;

const IMP: &str = "matmul";

pub fn matmul(args: &mut HostArgs, threads: Threads) -> Result<(), BaselineError> {
    let a = Args::new(IMP, args);
    let (m, n, k) = (a.size("M")?, a.size("N")?, a.size("K")?);
    let (mk, kn, mn) = (
        product(IMP, &[m, k])?,
        product(IMP, &[k, n])?,
        product(IMP, &[m, n])?,
    );
    with_output(IMP, args, "C", mn, |a, c| {
        let (am, bm) = (a.f32("A", mk)?, a.f32("B", kn)?);
        gemm_rows(am, bm, c, n, k, threads, |_, v| v as f32);
        Ok(())
    })
}

/// `C = epilogue(col, A*B)` row by row; shared with the fused GEMM lab.
pub(crate) fn gemm_rows(
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    n: usize,
    k: usize,
    threads: Threads,
    epilogue: impl Fn(usize, f64) -> f32 + Sync,
) {
    if n == 0 {
        return;
    }
    let row = |(i, c_row): (usize, &mut [f32])| {
        let mut acc = vec![0.0f64; n];
        for kk in 0..k {
            let aik = a[i * k + kk] as f64;
            for (acc, &bkj) in acc.iter_mut().zip(&b[kk * n..(kk + 1) * n]) {
                *acc += aik * bkj as f64;
            }
        }
        for (j, (c, acc)) in c_row.iter_mut().zip(acc).enumerate() {
            *c = epilogue(j, acc);
        }
    };
    match threads {
        Threads::Single => c.chunks_mut(n).enumerate().for_each(row),
        Threads::Parallel => c.par_chunks_mut(n).enumerate().for_each(row),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::HostBuffer::F32;
    use crate::baseline::testutil::*;

    #[test]
    fn non_square_product_by_hand() {
        // A = [[1,2,3],[4,5,6]] (2x3), B = [[1,0],[0,1],[1,1]] (3x2) => [[4,5],[10,11]].
        for t in [Threads::Single, Threads::Parallel] {
            let mut a = args(
                vec![
                    ("A", F32(vec![1., 2., 3., 4., 5., 6.])),
                    ("B", F32(vec![1., 0., 0., 1., 1., 1.])),
                    ("C", F32(vec![f32::NAN; 4])),
                ],
                &[("M", 2.), ("N", 2.), ("K", 3.)],
            );
            matmul(&mut a, t).unwrap();
            assert_eq!(out(&a, "C"), vec![4., 5., 10., 11.]);
        }
    }

    #[test]
    fn single_and_parallel_agree_and_k_zero_gives_zeros() {
        let (m, n, k) = (7, 5, 9);
        let mk = |t| {
            args(
                vec![
                    ("A", F32(data(m * k, 1))),
                    ("B", F32(data(k * n, 2))),
                    ("C", F32(vec![0.0; m * n])),
                ],
                &[("M", m as f64), ("N", n as f64), ("K", t)],
            )
        };
        let (mut s, mut p) = (mk(k as f64), mk(k as f64));
        matmul(&mut s, Threads::Single).unwrap();
        matmul(&mut p, Threads::Parallel).unwrap();
        assert_eq!(out(&s, "C"), out(&p, "C"));
        let mut z = mk(0.0);
        matmul(&mut z, Threads::Single).unwrap();
        assert!(out(&z, "C").iter().all(|&v| v == 0.0));
    }
}

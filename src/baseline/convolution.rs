//! CPU `conv1d` and `conv2d` (lab `convolution`): correlation with a small filter and zero
//! padding, accumulated in f64.
//!
//! `conv1d`: `out[i] = sum_{k<7} conv1d_filter[k] * in[i + k - 3]`.
//! `conv2d`: `out[r][c] = sum_{dr,dc in -1..=1} conv2d_filter[(dr+1)*3 + dc+1] * in[r+dr][c+dc]`.
//! Input elements outside the array count as 0.

use super::{Args, BaselineError, HostArgs, Threads, product, with_output};
use rayon::prelude::*;

/// 1-D filter length (radius 3).
pub const CONV1D_TAPS: usize = 7;
/// 2-D filter is 3x3.
pub const CONV2D_TAPS: usize = 9;

pub fn conv1d(args: &mut HostArgs, threads: Threads) -> Result<(), BaselineError> {
    const IMP: &str = "conv1d";
    let n = Args::new(IMP, args).size("n")?;
    with_output(IMP, args, "out", n, |a, out| {
        let (x, f) = (a.f32("in", n)?, a.f32("conv1d_filter", CONV1D_TAPS)?);
        let r = CONV1D_TAPS / 2;
        let at = |(i, o): (usize, &mut f32)| {
            let mut acc = 0.0f64;
            for (k, &fk) in f.iter().enumerate() {
                // Index i + k - r, skipping the zero padding on both sides.
                if let Some(&v) = (i + k).checked_sub(r).and_then(|j| x.get(j)) {
                    acc += fk as f64 * v as f64;
                }
            }
            *o = acc as f32;
        };
        match threads {
            Threads::Single => out.iter_mut().enumerate().for_each(at),
            Threads::Parallel => out.par_iter_mut().enumerate().for_each(at),
        }
        Ok(())
    })
}

pub fn conv2d(args: &mut HostArgs, threads: Threads) -> Result<(), BaselineError> {
    const IMP: &str = "conv2d";
    let a = Args::new(IMP, args);
    let (rows, cols) = (a.size("rows")?, a.size("cols")?);
    let len = product(IMP, &[rows, cols])?;
    with_output(IMP, args, "out", len, |a, out| {
        let (x, f) = (a.f32("in", len)?, a.f32("conv2d_filter", CONV2D_TAPS)?);
        if cols == 0 {
            return Ok(());
        }
        let row = |(r, o): (usize, &mut [f32])| {
            for (c, o) in o.iter_mut().enumerate() {
                let mut acc = 0.0f64;
                for dr in 0..3 {
                    for dc in 0..3 {
                        let (rr, cc) = ((r + dr).checked_sub(1), (c + dc).checked_sub(1));
                        if let (Some(rr), Some(cc)) = (rr, cc)
                            && rr < rows
                            && cc < cols
                        {
                            acc += f[dr * 3 + dc] as f64 * x[rr * cols + cc] as f64;
                        }
                    }
                }
                *o = acc as f32;
            }
        };
        match threads {
            Threads::Single => out.chunks_mut(cols).enumerate().for_each(row),
            Threads::Parallel => out.par_chunks_mut(cols).enumerate().for_each(row),
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::HostBuffer::F32;
    use crate::baseline::testutil::*;

    #[test]
    fn conv1d_impulse_reproduces_the_filter_reversed_and_pads_with_zero() {
        // Input is a unit impulse at 3 in length 7: out[i] = f[3 - i + 3] = f[6 - i].
        let f: Vec<f32> = (1..=7).map(|v| v as f32).collect();
        for t in [Threads::Single, Threads::Parallel] {
            let mut x = vec![0.0; 7];
            x[3] = 1.0;
            let mut a = args(
                vec![
                    ("in", F32(x)),
                    ("conv1d_filter", F32(f.clone())),
                    ("out", F32(vec![f32::NAN; 7])),
                ],
                &[("n", 7.)],
            );
            conv1d(&mut a, t).unwrap();
            assert_eq!(out(&a, "out"), vec![7., 6., 5., 4., 3., 2., 1.]);
            // n = 1: only the centre tap sees data.
            let mut a = args(
                vec![
                    ("in", F32(vec![2.0])),
                    ("conv1d_filter", F32(f.clone())),
                    ("out", F32(vec![f32::NAN])),
                ],
                &[("n", 1.)],
            );
            conv1d(&mut a, t).unwrap();
            assert_eq!(out(&a, "out"), vec![8.0]);
        }
    }

    #[test]
    fn conv2d_box_filter_counts_neighbours() {
        // All-ones filter on an all-ones 3x4 image counts in-bounds neighbours.
        for t in [Threads::Single, Threads::Parallel] {
            let mut a = args(
                vec![
                    ("in", F32(vec![1.0; 12])),
                    ("conv2d_filter", F32(vec![1.0; 9])),
                    ("out", F32(vec![f32::NAN; 12])),
                ],
                &[("rows", 3.), ("cols", 4.)],
            );
            conv2d(&mut a, t).unwrap();
            assert_eq!(
                out(&a, "out"),
                vec![4., 6., 6., 4., 6., 9., 9., 6., 4., 6., 6., 4.]
            );
        }
    }
}

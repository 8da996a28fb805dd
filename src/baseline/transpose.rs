//! CPU `transpose`: `out[c*rows + r] = in[r*cols + c]` (lab `transpose`).

use super::{Args, BaselineError, HostArgs, Threads, product, with_output};
use rayon::prelude::*;

const IMP: &str = "transpose";

pub fn transpose(args: &mut HostArgs, threads: Threads) -> Result<(), BaselineError> {
    let a = Args::new(IMP, args);
    let (rows, cols) = (a.size("rows")?, a.size("cols")?);
    let len = product(IMP, &[rows, cols])?;
    with_output(IMP, args, "out", len, |a, out| {
        let input = a.f32("in", len)?;
        if rows == 0 {
            return Ok(());
        }
        // One output row (= one input column) at a time.
        let col = |(c, o): (usize, &mut [f32])| {
            for (r, o) in o.iter_mut().enumerate() {
                *o = input[r * cols + c];
            }
        };
        match threads {
            Threads::Single => out.chunks_mut(rows).enumerate().for_each(col),
            Threads::Parallel => out.par_chunks_mut(rows).enumerate().for_each(col),
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
    fn two_by_three() {
        // [[1,2,3],[4,5,6]] -> [[1,4],[2,5],[3,6]]
        for t in [Threads::Single, Threads::Parallel] {
            let mut a = args(
                vec![
                    ("in", F32(vec![1., 2., 3., 4., 5., 6.])),
                    ("out", F32(vec![0.0; 6])),
                ],
                &[("rows", 2.), ("cols", 3.)],
            );
            transpose(&mut a, t).unwrap();
            assert_eq!(out(&a, "out"), vec![1., 4., 2., 5., 3., 6.]);
        }
    }

    #[test]
    fn transposing_twice_is_identity() {
        let (r, c) = (13, 7);
        let v = data(r * c, 3);
        let mut a = args(
            vec![("in", F32(v.clone())), ("out", F32(vec![0.0; r * c]))],
            &[("rows", r as f64), ("cols", c as f64)],
        );
        transpose(&mut a, Threads::Single).unwrap();
        let mut b = args(
            vec![("in", F32(out(&a, "out"))), ("out", F32(vec![0.0; r * c]))],
            &[("rows", c as f64), ("cols", r as f64)],
        );
        transpose(&mut b, Threads::Parallel).unwrap();
        assert_eq!(out(&b, "out"), v);
    }
}

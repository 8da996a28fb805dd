//! CPU `reduce_sum`: adds the sum of `in[0..n)` to `out[0]` (lab `reduction`).
//!
//! The single-threaded version is the plain loop the course times against (`reduce_shuffle`
//! must beat it 100x). It accumulates in f64, not Kahan: f64 is exact for every correctness
//! case (integer-valued inputs, |sum| < 2^53) and within 2^-29 relative of the true sum for
//! any f32 input up to 2^24 elements, so `validate` can use it to cross-check the reference
//! kernel, whose f32 tree sum is the less accurate of the two. The accumulation is a
//! dependent chain of f64 adds, which the compiler may not reorder, so it does not vectorize:
//! that is the honest one-core baseline.

use super::{Args, BaselineError, HostArgs, Threads, with_output};
use rayon::prelude::*;

const IMP: &str = "reduce_sum";

pub fn reduce_sum(args: &mut HostArgs, threads: Threads) -> Result<(), BaselineError> {
    let n = Args::new(IMP, args).size("n")?;
    with_output(IMP, args, "out", 1, |a, out| {
        let input = a.f32("in", n)?;
        let sum: f64 = match threads {
            Threads::Single => {
                let mut s = 0.0f64;
                for &x in input {
                    s += x as f64;
                }
                s
            }
            Threads::Parallel => input.par_iter().map(|&x| x as f64).sum(),
        };
        // The contract: out[0] starts at 0 (init) and ends as the sum, so add to it.
        out[0] = (out[0] as f64 + sum) as f32;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::HostBuffer::F32;
    use crate::baseline::testutil::*;

    fn run(input: Vec<f32>, n: usize, threads: Threads) -> f32 {
        let mut a = args(
            vec![("in", F32(input)), ("out", F32(vec![0.0]))],
            &[("n", n as f64)],
        );
        reduce_sum(&mut a, threads).unwrap();
        out(&a, "out")[0]
    }

    #[test]
    fn sums_integers_exactly() {
        // 1 + 2 + ... + 1000 = 500500, and only the first n elements count.
        let mut v: Vec<f32> = (1..=1000).map(|i| i as f32).collect();
        v.push(1e9);
        for t in [Threads::Single, Threads::Parallel] {
            assert_eq!(run(v.clone(), 1000, t), 500500.0);
            assert_eq!(run(v.clone(), 1, t), 1.0);
            assert_eq!(run(v.clone(), 0, t), 0.0);
        }
    }

    #[test]
    fn f64_accumulation_beats_naive_f32() {
        // 2^24 + 1 + 1 + ...: an f32 running sum gets stuck at 2^24, f64 does not.
        let mut v = vec![16_777_216.0f32];
        v.extend(std::iter::repeat_n(1.0f32, 64));
        assert_eq!(run(v.clone(), 65, Threads::Single), 16_777_280.0);
        assert_eq!(run(v, 65, Threads::Parallel), 16_777_280.0);
    }

    #[test]
    fn adds_to_the_initial_value() {
        let mut a = args(
            vec![("in", F32(vec![1.0, 2.0])), ("out", F32(vec![10.0]))],
            &[("n", 2.0)],
        );
        reduce_sum(&mut a, Threads::Single).unwrap();
        assert_eq!(out(&a, "out"), vec![13.0]);
    }
}

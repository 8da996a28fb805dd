//! CPU `vector_add`: `c[i] = a[i] + b[i]` (lab `vector-add`).

use super::{Args, BaselineError, HostArgs, Threads, with_output};
use rayon::prelude::*;

const IMP: &str = "vector_add";

pub fn vector_add(args: &mut HostArgs, threads: Threads) -> Result<(), BaselineError> {
    let n = Args::new(IMP, args).size("n")?;
    with_output(IMP, args, "c", n, |a, c| {
        let (x, y) = (a.f32("a", n)?, a.f32("b", n)?);
        match threads {
            Threads::Single => {
                for ((c, x), y) in c.iter_mut().zip(x).zip(y) {
                    *c = x + y;
                }
            }
            Threads::Parallel => c
                .par_iter_mut()
                .zip(x.par_iter().zip(y))
                .for_each(|(c, (x, y))| *c = x + y),
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
    fn adds_elementwise_and_leaves_the_tail_alone() {
        for threads in [Threads::Single, Threads::Parallel] {
            let mut a = args(
                vec![
                    ("a", F32(vec![1.0, 2.5, -3.0, 9.0])),
                    ("b", F32(vec![10.0, 0.5, 3.0, 9.0])),
                    ("c", F32(vec![f32::NAN; 4])),
                ],
                &[("n", 3.0)],
            );
            vector_add(&mut a, threads).unwrap();
            let c = out(&a, "c");
            assert_eq!(&c[..3], &[11.0, 3.0, 0.0]);
            assert!(c[3].is_nan(), "element n must not be written");
        }
    }

    #[test]
    fn n_zero_is_a_no_op() {
        let mut a = args(
            vec![("a", F32(vec![])), ("b", F32(vec![])), ("c", F32(vec![]))],
            &[("n", 0.0)],
        );
        vector_add(&mut a, Threads::Parallel).unwrap();
    }
}

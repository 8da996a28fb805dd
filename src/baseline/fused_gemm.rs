//! CPU `gemm_bias_relu` (lab `fused-gemm`): `C[i][j] = max(0, sum_k A[i][k] B[k][j] + bias[j])`.

use super::{Args, BaselineError, HostArgs, Threads, matmul::gemm_rows, product, with_output};

const IMP: &str = "gemm_bias_relu";

pub fn gemm_bias_relu(args: &mut HostArgs, threads: Threads) -> Result<(), BaselineError> {
    let a = Args::new(IMP, args);
    let (m, n, k) = (a.size("M")?, a.size("N")?, a.size("K")?);
    let (mk, kn, mn) = (
        product(IMP, &[m, k])?,
        product(IMP, &[k, n])?,
        product(IMP, &[m, n])?,
    );
    with_output(IMP, args, "C", mn, |a, c| {
        let (am, bm, bias) = (a.f32("A", mk)?, a.f32("B", kn)?, a.f32("bias", n)?);
        gemm_rows(am, bm, c, n, k, threads, |j, v| {
            (v + bias[j] as f64).max(0.0) as f32
        });
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::HostBuffer::F32;
    use crate::baseline::testutil::*;

    #[test]
    fn bias_then_relu_by_hand() {
        // A = [[1,2],[3,4]], B = I, bias = [-2, 1] => [[max(0,-1), 3], [1, 5]].
        for t in [Threads::Single, Threads::Parallel] {
            let mut a = args(
                vec![
                    ("A", F32(vec![1., 2., 3., 4.])),
                    ("B", F32(vec![1., 0., 0., 1.])),
                    ("bias", F32(vec![-2., 1.])),
                    ("C", F32(vec![f32::NAN; 4])),
                ],
                &[("M", 2.), ("N", 2.), ("K", 2.)],
            );
            gemm_bias_relu(&mut a, t).unwrap();
            assert_eq!(out(&a, "C"), vec![0., 3., 1., 5.]);
        }
    }
}

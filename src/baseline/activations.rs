//! CPU activation functions (lab `activations`), computed in f64 and rounded once.
//!
//! Element-wise contracts read `x`, write `y`, `n` elements. `bias_gelu` reads `x` (rows x
//! cols) and `bias` (cols) and writes `y = gelu(x + bias[col])`.

use super::{Args, BaselineError, HostArgs, Threads, product, with_output};
use rayon::prelude::*;

fn unary(
    imp: &'static str,
    args: &mut HostArgs,
    threads: Threads,
    f: fn(f64) -> f64,
) -> Result<(), BaselineError> {
    let n = Args::new(imp, args).size("n")?;
    with_output(imp, args, "y", n, |a, y| {
        let x = a.f32("x", n)?;
        let at = |(y, &x): (&mut f32, &f32)| *y = f(x as f64) as f32;
        match threads {
            Threads::Single => y.iter_mut().zip(x).for_each(at),
            Threads::Parallel => y.par_iter_mut().zip(x.par_iter()).for_each(at),
        }
        Ok(())
    })
}

pub fn relu(x: f64) -> f64 {
    if x > 0.0 { x } else { 0.0 }
}
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}
/// Exact GELU: `x * Phi(x) = 0.5 x erfc(-x / sqrt 2)` (the erfc form keeps accuracy where
/// `1 + erf` would cancel, for x below about -3).
pub fn gelu(x: f64) -> f64 {
    0.5 * x * erfc(-x / std::f64::consts::SQRT_2)
}
pub fn swish(x: f64) -> f64 {
    x * sigmoid(x)
}
/// `x * tanh(softplus(x))`; `ln_1p(exp(x))` is finite in f64 for every f32 input.
pub fn mish(x: f64) -> f64 {
    x * x.exp().ln_1p().tanh()
}

/// Complementary error function to about 1e-13 absolute, 1e-10 relative (std has no erf):
/// the Taylor series of erf below 2.5, Laplace's continued fraction above.
pub fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    if x < 2.5 {
        // erf(x) = 2/sqrt(pi) * sum (-1)^k x^(2k+1) / (k! (2k+1))
        let (mut term, mut sum) = (x, x);
        for k in 1..200 {
            term *= -x * x / k as f64;
            let t = term / (2 * k + 1) as f64;
            sum += t;
            if t.abs() < 1e-17 * sum.abs() {
                break;
            }
        }
        return 1.0 - sum * std::f64::consts::FRAC_2_SQRT_PI;
    }
    if x > 27.0 {
        return 0.0; // below f64's smallest subnormal
    }
    // erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))),
    // evaluated from the tail; 60 levels converge for x >= 2.5.
    let mut f = x;
    for k in (1..60).rev() {
        f = x + (k as f64 / 2.0) / f;
    }
    (-x * x).exp() / (f * std::f64::consts::PI.sqrt())
}

pub fn act_relu(args: &mut HostArgs, t: Threads) -> Result<(), BaselineError> {
    unary("act_relu", args, t, relu)
}
pub fn act_sigmoid(args: &mut HostArgs, t: Threads) -> Result<(), BaselineError> {
    unary("act_sigmoid", args, t, sigmoid)
}
pub fn act_tanh(args: &mut HostArgs, t: Threads) -> Result<(), BaselineError> {
    unary("act_tanh", args, t, f64::tanh)
}
pub fn act_gelu(args: &mut HostArgs, t: Threads) -> Result<(), BaselineError> {
    unary("act_gelu", args, t, gelu)
}
pub fn act_swish(args: &mut HostArgs, t: Threads) -> Result<(), BaselineError> {
    unary("act_swish", args, t, swish)
}
pub fn act_mish(args: &mut HostArgs, t: Threads) -> Result<(), BaselineError> {
    unary("act_mish", args, t, mish)
}

pub fn bias_gelu(args: &mut HostArgs, threads: Threads) -> Result<(), BaselineError> {
    const IMP: &str = "bias_gelu";
    let a = Args::new(IMP, args);
    let (rows, cols) = (a.size("rows")?, a.size("cols")?);
    let len = product(IMP, &[rows, cols])?;
    with_output(IMP, args, "y", len, |a, y| {
        let (x, bias) = (a.f32("x", len)?, a.f32("bias", cols)?);
        if cols == 0 {
            return Ok(());
        }
        let row = |(y, x): (&mut [f32], &[f32])| {
            for ((y, &x), &b) in y.iter_mut().zip(x).zip(bias) {
                // The bias add happens in f32, as the kernel's `x + bias` does.
                *y = gelu((x + b) as f64) as f32;
            }
        };
        match threads {
            Threads::Single => y.chunks_mut(cols).zip(x.chunks(cols)).for_each(row),
            Threads::Parallel => y.par_chunks_mut(cols).zip(x.par_chunks(cols)).for_each(row),
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
    fn erfc_matches_known_values() {
        // Abramowitz & Stegun table values.
        for (x, want) in [
            (0.0, 1.0),
            (0.5, 0.479_500_122_186_953_5),
            (1.0, 0.157_299_207_050_285_1),
            (2.0, 4.677_734_981_047_266e-3),
            (2.5, 4.069_520_174_449_59e-4),
            (3.0, 2.209_049_699_858_544e-5),
            (5.0, 1.537_459_794_428_035e-12),
            (-1.0, 1.842_700_792_949_715),
        ] {
            let got = erfc(x);
            assert!(
                ((got - want) / want).abs() < 1e-9,
                "erfc({x}) = {got}, want {want}"
            );
        }
        assert_eq!(erfc(30.0), 0.0);
        assert_eq!(erfc(-30.0), 2.0);
    }

    #[test]
    fn activations_by_hand() {
        assert_eq!(relu(-2.0), 0.0);
        assert_eq!(relu(3.0), 3.0);
        assert!((sigmoid(0.0) - 0.5).abs() < 1e-15);
        assert_eq!(sigmoid(-800.0), 0.0);
        assert!((gelu(1.0) - 0.841_344_746_068_542_9).abs() < 1e-12);
        assert!((gelu(-1.0) + 0.158_655_253_931_457_05).abs() < 1e-12);
        assert!(gelu(-10.0) < 0.0 && gelu(-10.0) > -1e-20);
        assert!((swish(1.0) - 0.731_058_578_630_004_9).abs() < 1e-12);
        assert!((mish(1.0) - 0.865_098_388_267_310_3).abs() < 1e-12);
        assert!(
            (mish(100.0) - 100.0).abs() < 1e-12,
            "no overflow at x = 100"
        );
        assert!(mish(-100.0).abs() < 1e-40);
    }

    #[test]
    fn unary_kernels_write_n_elements() {
        for t in [Threads::Single, Threads::Parallel] {
            let mut a = args(
                vec![("x", F32(vec![-1.0, 0.0, 2.0])), ("y", F32(vec![9.0; 3]))],
                &[("n", 2.)],
            );
            act_relu(&mut a, t).unwrap();
            assert_eq!(out(&a, "y"), vec![0.0, 0.0, 9.0]);
        }
    }

    #[test]
    fn bias_gelu_adds_the_column_bias_first() {
        for t in [Threads::Single, Threads::Parallel] {
            let mut a = args(
                vec![
                    ("x", F32(vec![0.0, 1.0, 2.0, 3.0])),
                    ("bias", F32(vec![1.0, -1.0])),
                    ("y", F32(vec![0.0; 4])),
                ],
                &[("rows", 2.), ("cols", 2.)],
            );
            bias_gelu(&mut a, t).unwrap();
            let w = |v: f64| gelu(v) as f32;
            assert_eq!(out(&a, "y"), vec![w(1.0), w(0.0), w(3.0), w(2.0)]);
        }
    }
}

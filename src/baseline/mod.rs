//! CPU implementations of the labs' kernels, in plain Rust.
//!
//! They serve twice: `validate` cross-checks each reference kernel against them, and
//! performance thresholds of the form `against: cpu` time them (single-threaded, as the
//! course measures it) or `against: cpu_parallel` (all cores, through rayon).
//!
//! An implementation reads its inputs by the contract's parameter names and writes its
//! outputs in place; scalar parameters arrive as evaluated values in `scalars`. Arguments
//! come from a rubric someone else wrote, so every lookup and every length is checked and a
//! mismatch is a [`BaselineError`], never a panic.

pub mod activations;
pub mod attention;
pub mod convolution;
pub mod embedding;
pub mod fused_gemm;
pub mod matmul;
pub mod reduction;
pub mod softmax;
pub mod transpose;
pub mod vector_add;

use crate::rubric::schema::ScalarType;
use std::collections::BTreeMap;

/// A host-side buffer of one contract parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum HostBuffer {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    I64(Vec<i64>),
    U64(Vec<u64>),
    /// Bytes of a type no built-in implementation takes (`u8`, `f16`, ...): the course's own
    /// Python function reads them as its NumPy dtype.
    Raw(ScalarType, Vec<u8>),
}

impl HostBuffer {
    fn type_name(&self) -> &'static str {
        match self {
            HostBuffer::F32(_) => "f32",
            HostBuffer::F64(_) => "f64",
            HostBuffer::I32(_) => "i32",
            HostBuffer::U32(_) => "u32",
            HostBuffer::I64(_) => "i64",
            HostBuffer::U64(_) => "u64",
            HostBuffer::Raw(t, _) => t.name(),
        }
    }

    /// A buffer of `t` from its little-endian bytes.
    pub fn from_bytes(t: ScalarType, d: &[u8]) -> HostBuffer {
        fn words<const N: usize, T>(d: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
            d.chunks_exact(N)
                .map(|c| f(c.try_into().unwrap_or([0; N])))
                .collect()
        }
        match t {
            ScalarType::F32 => HostBuffer::F32(words(d, f32::from_le_bytes)),
            ScalarType::F64 => HostBuffer::F64(words(d, f64::from_le_bytes)),
            ScalarType::I32 => HostBuffer::I32(words(d, i32::from_le_bytes)),
            ScalarType::U32 => HostBuffer::U32(words(d, u32::from_le_bytes)),
            ScalarType::I64 => HostBuffer::I64(words(d, i64::from_le_bytes)),
            ScalarType::U64 => HostBuffer::U64(words(d, u64::from_le_bytes)),
            narrow => HostBuffer::Raw(narrow, d.to_vec()),
        }
    }

    /// The little-endian bytes, as a kernel's buffer holds them.
    pub fn to_bytes(&self) -> Vec<u8> {
        use HostBuffer as H;
        match self {
            H::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            H::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            H::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            H::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            H::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            H::U64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            H::Raw(_, d) => d.clone(),
        }
    }
}

/// Everything a CPU implementation sees: buffers and scalars by parameter name.
#[derive(Debug, Clone, Default)]
pub struct HostArgs {
    pub buffers: BTreeMap<String, HostBuffer>,
    /// Scalar parameters (and the case's variables), by name.
    pub scalars: BTreeMap<String, f64>,
}

/// Single-threaded (the course's CPU baseline) or all cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    Single,
    Parallel,
}

/// Why a CPU implementation could not run on the given arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("CPU implementation `{implementation}`: {message}")]
pub struct BaselineError {
    pub implementation: String,
    pub message: String,
}

impl BaselineError {
    pub fn new(implementation: &str, message: impl Into<String>) -> Self {
        BaselineError {
            implementation: implementation.to_string(),
            message: message.into(),
        }
    }
}

pub type CpuFn = fn(&mut HostArgs, Threads) -> Result<(), BaselineError>;

/// All built-in implementations, by the name rubrics use in `cpu:`.
pub fn registry() -> &'static [(&'static str, CpuFn)] {
    &[
        ("vector_add", vector_add::vector_add),
        ("reduce_sum", reduction::reduce_sum),
        ("matmul", matmul::matmul),
        ("transpose", transpose::transpose),
        ("softmax_rows", softmax::softmax_rows),
        ("embedding_lookup", embedding::embedding_lookup),
        ("conv1d", convolution::conv1d),
        ("conv2d", convolution::conv2d),
        ("act_relu", activations::act_relu),
        ("act_sigmoid", activations::act_sigmoid),
        ("act_tanh", activations::act_tanh),
        ("act_gelu", activations::act_gelu),
        ("act_swish", activations::act_swish),
        ("act_mish", activations::act_mish),
        ("bias_gelu", activations::bias_gelu),
        ("gemm_bias_relu", fused_gemm::gemm_bias_relu),
        ("attention", attention::attention),
    ]
}

pub fn lookup(name: &str) -> Option<CpuFn> {
    registry().iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// Checked access to arguments on behalf of one named implementation, so that every error
/// message says which implementation and which parameter.
pub(crate) struct Args<'a> {
    imp: &'static str,
    args: &'a HostArgs,
}

impl<'a> Args<'a> {
    pub(crate) fn new(imp: &'static str, args: &'a HostArgs) -> Self {
        Args { imp, args }
    }

    pub(crate) fn err(&self, message: impl Into<String>) -> BaselineError {
        BaselineError::new(self.imp, message)
    }

    /// A float buffer holding at least `len` elements.
    pub(crate) fn f32(&self, name: &str, len: usize) -> Result<&'a [f32], BaselineError> {
        match self.args.buffers.get(name) {
            Some(HostBuffer::F32(v)) => self.at_least(name, &v[..], len),
            Some(other) => Err(self.err(format!(
                "buffer `{name}` is {}, expected f32",
                other.type_name()
            ))),
            None => Err(self.err(format!("missing buffer `{name}`"))),
        }
    }

    /// An int buffer holding at least `len` elements.
    pub(crate) fn i32(&self, name: &str, len: usize) -> Result<&'a [i32], BaselineError> {
        match self.args.buffers.get(name) {
            Some(HostBuffer::I32(v)) => self.at_least(name, &v[..], len),
            Some(other) => Err(self.err(format!(
                "buffer `{name}` is {}, expected i32",
                other.type_name()
            ))),
            None => Err(self.err(format!("missing buffer `{name}`"))),
        }
    }

    fn at_least<'b, T>(
        &self,
        name: &str,
        v: &'b [T],
        len: usize,
    ) -> Result<&'b [T], BaselineError> {
        v.get(..len).ok_or_else(|| {
            self.err(format!(
                "buffer `{name}` has {} elements, the contract needs {len}",
                v.len()
            ))
        })
    }

    /// A scalar that must be a whole number in `[min, i32::MAX]` (sizes, flags).
    pub(crate) fn int(&self, name: &str, min: i64) -> Result<i64, BaselineError> {
        let v = *self
            .args
            .scalars
            .get(name)
            .ok_or_else(|| self.err(format!("missing scalar `{name}`")))?;
        if v.fract() != 0.0 || !(min as f64..=i32::MAX as f64).contains(&v) {
            return Err(self.err(format!(
                "scalar `{name}` = {v} is not a whole number in [{min}, {}]",
                i32::MAX
            )));
        }
        Ok(v as i64)
    }

    /// A size scalar (>= 0) as `usize`.
    pub(crate) fn size(&self, name: &str) -> Result<usize, BaselineError> {
        Ok(self.int(name, 0)? as usize)
    }
}

/// Multiply sizes, failing instead of overflowing.
pub(crate) fn product(imp: &'static str, dims: &[usize]) -> Result<usize, BaselineError> {
    dims.iter().try_fold(1usize, |acc, &d| {
        acc.checked_mul(d)
            .ok_or_else(|| BaselineError::new(imp, format!("sizes {dims:?} overflow")))
    })
}

/// Run `f` with the f32 output buffer `name` (at least `len` elements) taken out of `args`,
/// so that `f` can read the other buffers while writing this one. The buffer is put back
/// whatever `f` returns.
pub(crate) fn with_output(
    imp: &'static str,
    args: &mut HostArgs,
    name: &str,
    len: usize,
    f: impl FnOnce(&Args<'_>, &mut [f32]) -> Result<(), BaselineError>,
) -> Result<(), BaselineError> {
    let mut out = match args.buffers.remove(name) {
        Some(HostBuffer::F32(v)) => v,
        Some(other) => {
            let t = other.type_name();
            args.buffers.insert(name.to_string(), other);
            return Err(BaselineError::new(
                imp,
                format!("buffer `{name}` is {t}, expected f32"),
            ));
        }
        None => return Err(BaselineError::new(imp, format!("missing buffer `{name}`"))),
    };
    let result = if out.len() < len {
        Err(BaselineError::new(
            imp,
            format!(
                "buffer `{name}` has {} elements, the contract needs {len}",
                out.len()
            ),
        ))
    } else {
        f(&Args::new(imp, args), &mut out[..len])
    };
    args.buffers.insert(name.to_string(), HostBuffer::F32(out));
    result
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;

    /// Build arguments from `(name, buffer)` and `(name, value)` pairs.
    pub fn args(buffers: Vec<(&str, HostBuffer)>, scalars: &[(&str, f64)]) -> HostArgs {
        HostArgs {
            buffers: buffers
                .into_iter()
                .map(|(n, b)| (n.to_string(), b))
                .collect(),
            scalars: scalars.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        }
    }

    pub fn out(args: &HostArgs, name: &str) -> Vec<f32> {
        match &args.buffers[name] {
            HostBuffer::F32(v) => v.clone(),
            other => panic!("{name} is {other:?}"),
        }
    }

    /// A deterministic pseudo-random vector in [-1, 1) (no RNG dependency in unit tests).
    pub fn data(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32) * 2.0 - 1.0
            })
            .collect()
    }

    pub fn assert_close(got: &[f32], want: &[f32], tol: f32) {
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= tol * (1.0 + w.abs()),
                "element {i}: got {g}, want {w}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;

    #[test]
    fn every_registered_name_is_unique_and_found() {
        let names: Vec<_> = registry().iter().map(|(n, _)| *n).collect();
        for n in &names {
            assert_eq!(names.iter().filter(|m| *m == n).count(), 1, "{n}");
            assert!(lookup(n).is_some());
        }
        assert!(lookup("no_such_lab").is_none());
    }

    #[test]
    fn every_implementation_rejects_empty_arguments_without_panicking() {
        for (name, f) in registry() {
            for threads in [Threads::Single, Threads::Parallel] {
                let err = f(&mut HostArgs::default(), threads).unwrap_err();
                assert_eq!(err.implementation, *name);
                assert!(err.message.contains("missing"), "{name}: {}", err.message);
            }
        }
    }

    #[test]
    fn wrong_type_and_short_buffers_are_errors() {
        let mut a = args(
            vec![
                ("a", HostBuffer::I32(vec![1, 2])),
                ("b", HostBuffer::F32(vec![1.0, 2.0])),
                ("c", HostBuffer::F32(vec![0.0; 2])),
            ],
            &[("n", 2.0)],
        );
        let e = vector_add::vector_add(&mut a, Threads::Single).unwrap_err();
        assert!(e.message.contains("expected f32"), "{}", e.message);

        let mut a = args(
            vec![
                ("a", HostBuffer::F32(vec![1.0])),
                ("b", HostBuffer::F32(vec![1.0, 2.0])),
                ("c", HostBuffer::F32(vec![0.0; 2])),
            ],
            &[("n", 2.0)],
        );
        let e = vector_add::vector_add(&mut a, Threads::Single).unwrap_err();
        assert!(e.message.contains("has 1 elements"), "{}", e.message);

        let mut a = args(
            vec![
                ("a", HostBuffer::F32(vec![1.0])),
                ("b", HostBuffer::F32(vec![1.0])),
                ("c", HostBuffer::I32(vec![0])),
            ],
            &[("n", 1.0)],
        );
        let e = vector_add::vector_add(&mut a, Threads::Single).unwrap_err();
        assert!(e.message.contains("expected f32"), "{}", e.message);
        // The output buffer is put back even on error.
        assert!(matches!(a.buffers["c"], HostBuffer::I32(_)));
    }

    #[test]
    fn bad_scalars_are_errors() {
        for n in [-1.0, 1.5, f64::NAN, 1e12] {
            let mut a = args(
                vec![
                    ("a", HostBuffer::F32(vec![1.0])),
                    ("b", HostBuffer::F32(vec![1.0])),
                    ("c", HostBuffer::F32(vec![0.0])),
                ],
                &[("n", n)],
            );
            let e = vector_add::vector_add(&mut a, Threads::Single).unwrap_err();
            assert!(e.message.contains("scalar `n`"), "{n}: {}", e.message);
        }
    }
}

//! Seeded inputs: turn a contract and a case into the buffers and arguments of one launch.
//!
//! Every trial draws fresh values from a ChaCha generator seeded by (run seed, case, trial),
//! so `--seed` reproduces a run exactly, whatever order milestones run in. Outputs start
//! poisoned (NaN / 0xDEADBEEF) unless the contract gives `init`, so an element the kernel
//! never writes cannot pass by accident; every allocation has guard regions on both sides.

use crate::backend::{Arg, BufferSpec};
use crate::backend::{LaunchDims, ParamValue};
pub use crate::model::args::{BufferArg, Draw, ParamArg, ScalarArg};
use crate::rubric::expr::Vars;
use crate::rubric::schema::{Contract, Direction, ScalarType, Tolerance};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Bytes of guard on each side of every buffer (keeps 256-byte alignment on CUDA).
pub const GUARD: usize = 256;
/// The byte guards are filled with: every float read from a guard is NaN (and every int -1),
/// so a kernel that reads past its buffer gets a visibly wrong answer, not a quiet zero.
pub const GUARD_BYTE: u8 = 0xFF;
/// A quiet NaN with a recognisable payload: what an unwritten float output holds.
pub const POISON_F32: u32 = 0x7FC0_DEAD;
pub const POISON_F64: u64 = 0x7FF8_DEAD_DEAD_DEAD;
pub const POISON_INT: u32 = 0xDEAD_BEEF;
/// A quiet NaN with a payload no arithmetic makes, for half and bfloat16 outputs.
pub const POISON_F16: u16 = 0x7E5D;
pub const POISON_BF16: u16 = 0x7FDD;
pub use crate::rubric::MAX_ELEMENTS;

/// One buffer of an invocation.
#[derive(Debug, Clone)]
pub struct Buffer {
    pub name: String,
    pub elem: ScalarType,
    pub dir: Direction,
    pub len: usize,
    pub shape: Option<Vec<usize>>,
    /// The payload as sent (inputs generated, outputs poisoned or initialised).
    pub data: Vec<u8>,
    /// Set by symbol rather than passed.
    pub symbol: bool,
    /// A multi-GPU lab's buffer passed as a table of every rank's copy.
    pub peers: bool,
    pub tolerance: Option<Tolerance>,
    /// An input described rather than drawn ([`generate_described`]): `data` is empty and the
    /// worker draws the values where they are read.
    pub fill: Option<Fill>,
}

impl Buffer {
    pub fn spec(&self) -> BufferSpec {
        BufferSpec {
            bytes: self.bytes(),
            guard: GUARD,
        }
    }

    /// The payload's size in bytes (drawn or described).
    pub fn bytes(&self) -> usize {
        self.len * self.elem.size()
    }

    /// The whole allocation: guard, payload, guard.
    pub fn allocation(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.data.len() + 2 * GUARD);
        v.resize(GUARD, GUARD_BYTE);
        v.extend_from_slice(&self.data);
        v.resize(self.data.len() + 2 * GUARD, GUARD_BYTE);
        v
    }

    pub fn is_output(&self) -> bool {
        self.dir.is_output()
    }
}

/// Everything one launch needs, before it is sent to a worker.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub buffers: Vec<Buffer>,
    /// In parameter order, symbols excluded.
    pub args: Vec<Arg>,
    pub symbols: Vec<(String, usize)>,
    /// Scalars by name (for CPU implementations and tolerance variables).
    pub scalars: Vec<(String, f64)>,
}

impl Invocation {
    pub fn specs(&self) -> Vec<BufferSpec> {
        self.buffers.iter().map(Buffer::spec).collect()
    }
    pub fn allocations(&self) -> Vec<Vec<u8>> {
        self.buffers.iter().map(Buffer::allocation).collect()
    }

    /// The same launch on the squares of the float inputs (as [`Invocation::absolute`]): a
    /// reference that computes sums of products of its inputs computes each element's sum of
    /// squared terms from these (the `R²` of `compare::sum_scale`).
    pub fn squared(&self) -> Invocation {
        let mut inv = self.clone();
        for b in &mut inv.buffers {
            if !b.dir.is_input() || !b.elem.is_float() {
                continue;
            }
            let v: Vec<f64> = decode(&b.data, b.elem).iter().map(|x| x * x).collect();
            b.data = encode(&v, b.elem);
        }
        inv
    }

    /// The same launch on the absolute values of the float inputs (integer buffers, indices
    /// and lengths, unchanged; outputs as they were): a reference kernel that computes sums of
    /// products of its inputs computes each element's sum of absolute terms from these (the
    /// `S` of `compare::sum_scale`).
    pub fn absolute(&self) -> Invocation {
        let mut inv = self.clone();
        for b in &mut inv.buffers {
            if !b.dir.is_input() {
                continue;
            }
            match b.elem {
                ScalarType::F32 => {
                    for c in b.data.chunks_exact_mut(4) {
                        c[3] &= 0x7F;
                    }
                }
                ScalarType::F64 => {
                    for c in b.data.chunks_exact_mut(8) {
                        c[7] &= 0x7F;
                    }
                }
                ScalarType::F16 | ScalarType::BF16 => {
                    for c in b.data.chunks_exact_mut(2) {
                        c[1] &= 0x7F;
                    }
                }
                _ => {}
            }
        }
        inv
    }

    /// Variables a tolerance expression may read: the case's, `eps`, and per float input
    /// buffer `<name>_abs_sum` and `<name>_abs_max`.
    pub fn tolerance_vars(&self, case_vars: &Vars) -> Vars {
        let mut v = case_vars.clone();
        v.insert("eps".into(), f64::from(f32::EPSILON) / 2.0);
        v.insert("eps64".into(), f64::EPSILON / 2.0);
        for b in &self.buffers {
            if !b.dir.is_input() || !b.elem.is_float() {
                continue;
            }
            let vals = decode(&b.data, b.elem);
            let finite = vals.iter().filter(|x| x.is_finite());
            v.insert(
                format!("{}_abs_sum", b.name),
                finite.clone().map(|x| x.abs()).sum(),
            );
            v.insert(
                format!("{}_abs_max", b.name),
                finite.map(|x| x.abs()).fold(0.0, f64::max),
            );
        }
        v
    }
}

/// The seed of one trial, independent of the order trials run in.
pub fn trial_seed(run_seed: u64, case: &str, trial: u32) -> u64 {
    let mut h = Sha256::new();
    h.update(run_seed.to_le_bytes());
    h.update(case.as_bytes());
    h.update(trial.to_le_bytes());
    let d = h.finalize();
    u64::from_le_bytes(d[..8].try_into().unwrap_or([0; 8]))
}

/// Build the invocation of one case and trial from its resolved parameters
/// (`rubric::plan::CasePlan::args`).
pub fn generate(args: &[ParamArg], seed: u64) -> Result<Invocation, String> {
    generate_with(args, seed, false)
}

/// Like [`generate`], with every input described rather than drawn: each input buffer's
/// [`Fill`] draws the same distributions in chunks, each from its own seeded stream (values
/// other than `generate`'s for the same seed), wherever they are needed. For the speed
/// estimate, whose full-size inputs only need to look like a GPU run's and of which a sample
/// of blocks reads a few pages: the worker draws those pages ([`Fill::chunk`]), nothing else.
pub fn generate_described(args: &[ParamArg], seed: u64) -> Result<Invocation, String> {
    generate_with(args, seed, true)
}

fn generate_with(args: &[ParamArg], seed: u64, parallel: bool) -> Result<Invocation, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut inv = Invocation {
        buffers: vec![],
        args: vec![],
        symbols: vec![],
        scalars: vec![],
    };
    for p in args {
        match p {
            ParamArg::Buffer(b) => {
                let stream = parallel.then(|| {
                    seed ^ (inv.buffers.len() as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                });
                let idx = inv.buffers.len();
                if b.symbol {
                    inv.symbols.push((b.name.clone(), idx));
                } else {
                    inv.args.push(Arg::Buffer(idx));
                }
                inv.buffers.push(make_buffer(b, &mut rng, stream));
            }
            ParamArg::Scalar(x) => {
                inv.scalars.push((x.name.clone(), x.value));
                inv.args.push(Arg::Value(scalar(x.ty, x.value)));
            }
        }
    }
    Ok(inv)
}

fn scalar(t: ScalarType, x: f64) -> ParamValue {
    match t {
        ScalarType::I32 => ParamValue::I32(x as i32),
        ScalarType::U32 => ParamValue::U32(x as u32),
        ScalarType::I64 => ParamValue::I64(x as i64),
        ScalarType::U64 => ParamValue::U64(x as u64),
        ScalarType::F32 => ParamValue::F32(x as f32),
        ScalarType::F64 => ParamValue::F64(x),
        ScalarType::U8 => ParamValue::U8(x as u8),
        ScalarType::I8 => ParamValue::I8(x as i8),
        ScalarType::U16 => ParamValue::U16(x as u16),
        ScalarType::I16 => ParamValue::I16(x as i16),
        ScalarType::F16 => ParamValue::Bits16(half::f16::from_f64(x).to_bits()),
        ScalarType::BF16 => ParamValue::Bits16(half::bf16::from_f64(x).to_bits()),
    }
}

/// A buffer; `parallel`: describe its values, drawn in chunks from this stream seed.
fn make_buffer(b: &BufferArg, rng: &mut ChaCha8Rng, parallel: Option<u64>) -> Buffer {
    let buffer = |data: Vec<u8>, fill: Option<Fill>| Buffer {
        name: b.name.clone(),
        elem: b.elem,
        dir: b.dir,
        len: b.len,
        shape: b.shape.clone(),
        data,
        symbol: b.symbol,
        peers: b.peers,
        tolerance: b.tolerance.clone(),
        fill,
    };
    if let (Some(stream), Some(draw)) = (parallel, &b.draw) {
        let fill = Fill {
            draw: draw.clone(),
            specials: b.specials.clone(),
            elem: b.elem,
            stream,
            len: b.len,
        };
        return buffer(vec![], Some(fill));
    }
    let mut values: Vec<f64> = match &b.draw {
        Some(draw) => draw.sample(0, b.len, rng),
        None => vec![],
    };
    if let Some((fraction, specials)) = &b.specials
        && !values.is_empty()
        && !specials.is_empty()
    {
        for v in values.iter_mut() {
            if rng.random::<f64>() < *fraction {
                *v = specials[rng.random_range(0..specials.len())];
            }
        }
    }
    let data = if !values.is_empty() {
        encode(&values, b.elem)
    } else if let Some(init) = b.init {
        encode(&vec![init; b.len], b.elem)
    } else if b.dir == Direction::Scratch {
        encode(&vec![0.0; b.len], b.elem)
    } else {
        poison(b.len, b.elem)
    };
    buffer(data, None)
}

impl Draw {
    /// Elements `start..start + len` (only `Values` depends on `start`).
    fn sample(&self, start: usize, len: usize, rng: &mut ChaCha8Rng) -> Vec<f64> {
        match *self {
            Draw::Uniform(lo, hi) if (hi - lo).is_finite() => {
                (0..len).map(|_| rng.random_range(lo..hi)).collect()
            }
            // A range wider than f64 can hold (`[-1e308, 1e308]`): rand refuses it, so mix the
            // bounds by a uniform fraction instead, which stays finite.
            Draw::Uniform(lo, hi) => (0..len)
                .map(|_| {
                    let t: f64 = rng.random();
                    (lo * (1.0 - t) + hi * t).clamp(lo, hi)
                })
                .collect(),
            Draw::Normal(m, s) => match Normal::new(m, s) {
                Ok(n) => (0..len).map(|_| n.sample(rng)).collect(),
                Err(_) => vec![m; len],
            },
            Draw::Int(lo, hi) => (0..len).map(|_| rng.random_range(lo..hi) as f64).collect(),
            Draw::Constant(c) => vec![c; len],
            Draw::Values(ref v) if v.is_empty() => vec![0.0; len],
            Draw::Values(ref v) => (start..start + len).map(|i| v[i % v.len()]).collect(),
        }
    }
}

/// An input buffer's values, described: drawn in chunks of [`Fill::CHUNK`] elements, each from
/// a stream seeded by `stream` and the chunk's index, so any chunk can be drawn alone, in any
/// order, in any process, and comes out the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fill {
    pub draw: Draw,
    /// The specials' fraction and values.
    pub specials: Option<(f64, Vec<f64>)>,
    pub elem: ScalarType,
    pub stream: u64,
    /// Elements in the buffer.
    pub len: usize,
}

impl Fill {
    /// Elements per chunk.
    pub const CHUNK: usize = 1 << 20;

    /// Chunk `c`'s bytes (the last chunk may be short).
    pub fn chunk(&self, c: usize) -> Vec<u8> {
        let start = c * Self::CHUNK;
        let n = Self::CHUNK.min(self.len.saturating_sub(start));
        let mut rng = ChaCha8Rng::seed_from_u64(self.stream.wrapping_add(c as u64));
        let mut values = self.draw.sample(start, n, &mut rng);
        if let Some((fraction, specials)) = &self.specials
            && !specials.is_empty()
        {
            for v in values.iter_mut() {
                if rng.random::<f64>() < *fraction {
                    *v = specials[rng.random_range(0..specials.len())];
                }
            }
        }
        encode(&values, self.elem)
    }

    /// Every chunk, drawn in parallel.
    pub fn all(&self) -> Vec<u8> {
        use rayon::prelude::*;
        let chunks: Vec<Vec<u8>> = (0..self.len.div_ceil(Self::CHUNK))
            .into_par_iter()
            .map(|c| self.chunk(c))
            .collect();
        chunks.concat()
    }
}

/// Values to little-endian bytes of `elem`.
pub fn encode(values: &[f64], elem: ScalarType) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * elem.size());
    for &v in values {
        match elem {
            ScalarType::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
            ScalarType::F64 => out.extend_from_slice(&v.to_le_bytes()),
            ScalarType::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
            ScalarType::U32 => out.extend_from_slice(&(v as u32).to_le_bytes()),
            ScalarType::I64 => out.extend_from_slice(&(v as i64).to_le_bytes()),
            ScalarType::U64 => out.extend_from_slice(&(v as u64).to_le_bytes()),
            ScalarType::U8 => out.push(v as u8),
            ScalarType::I8 => out.extend_from_slice(&(v as i8).to_le_bytes()),
            ScalarType::U16 => out.extend_from_slice(&(v as u16).to_le_bytes()),
            ScalarType::I16 => out.extend_from_slice(&(v as i16).to_le_bytes()),
            // Rounded to nearest even, as a kernel's `__float2half_rn` does.
            ScalarType::F16 => out.extend_from_slice(&half::f16::from_f64(v).to_le_bytes()),
            ScalarType::BF16 => out.extend_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
        }
    }
    out
}

/// Little-endian bytes of `elem` to values (exact for every type but 64-bit integers beyond
/// 2^53, which round: `compare` compares those by their bits).
pub fn decode(bytes: &[u8], elem: ScalarType) -> Vec<f64> {
    let w = elem.size();
    bytes
        .chunks_exact(w)
        .map(|c| match elem {
            ScalarType::F32 => f32::from_le_bytes(c.try_into().unwrap_or([0; 4])) as f64,
            ScalarType::F64 => f64::from_le_bytes(c.try_into().unwrap_or([0; 8])),
            ScalarType::I32 => i32::from_le_bytes(c.try_into().unwrap_or([0; 4])) as f64,
            ScalarType::U32 => u32::from_le_bytes(c.try_into().unwrap_or([0; 4])) as f64,
            ScalarType::I64 => i64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f64,
            ScalarType::U64 => u64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f64,
            ScalarType::U8 => f64::from(c[0]),
            ScalarType::I8 => f64::from(c[0] as i8),
            ScalarType::U16 => f64::from(u16::from_le_bytes(c.try_into().unwrap_or([0; 2]))),
            ScalarType::I16 => f64::from(i16::from_le_bytes(c.try_into().unwrap_or([0; 2]))),
            ScalarType::F16 => half::f16::from_le_bytes(c.try_into().unwrap_or([0; 2])).to_f64(),
            ScalarType::BF16 => half::bf16::from_le_bytes(c.try_into().unwrap_or([0; 2])).to_f64(),
        })
        .collect()
}

/// `len` elements of `elem`'s poison pattern, as outputs start (tests build outputs with it).
pub fn poison_bytes(len: usize, elem: ScalarType) -> Vec<u8> {
    poison(len, elem)
}

fn poison(len: usize, elem: ScalarType) -> Vec<u8> {
    let one: Vec<u8> = match elem {
        ScalarType::F32 => POISON_F32.to_le_bytes().to_vec(),
        ScalarType::F64 => POISON_F64.to_le_bytes().to_vec(),
        ScalarType::I32 | ScalarType::U32 => POISON_INT.to_le_bytes().to_vec(),
        ScalarType::I64 | ScalarType::U64 => (u64::from(POISON_INT) << 32 | u64::from(POISON_INT))
            .to_le_bytes()
            .to_vec(),
        // Every byte and 16-bit pattern is some value of the narrow integers: poison is the
        // pattern's low bytes (0xEF, 0xBEEF), which a kernel that never wrote leaves behind
        // and `compare` names as "never written" only where it is not the expected value.
        ScalarType::U8 | ScalarType::I8 => vec![POISON_INT as u8],
        ScalarType::U16 | ScalarType::I16 => (POISON_INT as u16).to_le_bytes().to_vec(),
        ScalarType::F16 => POISON_F16.to_le_bytes().to_vec(),
        ScalarType::BF16 => POISON_BF16.to_le_bytes().to_vec(),
    };
    one.repeat(len)
}

/// Launch dims checked against what every CUDA device of compute capability >= 7.5 allows.
pub fn check_limits(d: &LaunchDims, max_threads: u32) -> Result<(), String> {
    let threads = d.threads_per_block();
    if threads > u64::from(max_threads.min(1024)) {
        return Err(format!(
            "block {:?} has {threads} threads; the limit is {}",
            d.block,
            max_threads.min(1024)
        ));
    }
    if d.block[2] > 64 {
        return Err(format!("block z = {} exceeds 64", d.block[2]));
    }
    if d.grid[1] > 65535 || d.grid[2] > 65535 {
        return Err(format!("grid {:?}: y and z may be at most 65535", d.grid));
    }
    if d.grid[0] > i32::MAX as u32 {
        return Err(format!("grid x = {} exceeds 2^31-1", d.grid[0]));
    }
    if d.shared_bytes > 227 * 1024 {
        return Err(format!(
            "{} bytes of dynamic shared memory exceed the 227 KiB a block may have",
            d.shared_bytes
        ));
    }
    Ok(())
}

/// The invocation with Numba's calling convention: each buffer (symbols included: Numba has
/// no `__constant__` symbols to set, so they are passed) becomes its array descriptor.
pub fn numba_invocation(
    inv: &Invocation,
    contract: &Contract,
    sig: &crate::rubric::convention::Signature,
) -> Result<Invocation, String> {
    let mut args = vec![];
    let mut values = inv.args.iter().filter(|a| matches!(a, Arg::Value(_)));
    let mut buffer = 0usize;
    for (p, &ndim) in contract.params.iter().zip(&sig.ndims) {
        match p.param_type() {
            Some(crate::rubric::ParamType::Buffer(t)) => {
                let b = inv
                    .buffers
                    .get(buffer)
                    .ok_or_else(|| format!("no buffer for `{}`", p.name))?;
                let item = t.size() as i64;
                let shape: Vec<i64> = match (&b.shape, ndim) {
                    (_, 1) => vec![b.len as i64],
                    (Some(s), n) if s.len() == n => s.iter().map(|&x| x as i64).collect(),
                    _ => return Err(format!("`{}` has no {ndim}-D shape", p.name)),
                };
                let mut strides = vec![item; shape.len()];
                for i in (0..shape.len().saturating_sub(1)).rev() {
                    strides[i] = strides[i + 1] * shape[i + 1];
                }
                use crate::backend::ParamValue::I64;
                args.push(Arg::Value(I64(0))); // meminfo: no NRT on the device
                args.push(Arg::Value(I64(0))); // parent: no Python object
                args.push(Arg::Value(I64(b.len as i64)));
                args.push(Arg::Value(I64(item)));
                args.push(Arg::Buffer(buffer));
                args.extend(shape.into_iter().map(|x| Arg::Value(I64(x))));
                args.extend(strides.into_iter().map(|x| Arg::Value(I64(x))));
                buffer += 1;
            }
            Some(crate::rubric::ParamType::Scalar(_)) => {
                args.push(
                    values
                        .next()
                        .cloned()
                        .ok_or_else(|| format!("no value for `{}`", p.name))?,
                );
            }
            None => return Err(format!("bad type `{}`", p.ty)),
        }
    }
    let mut out = inv.clone();
    out.args = args;
    out.symbols.clear();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The contract's invocation on `vars` (its parameters resolved as the plan resolves them).
    fn invocation(c: &Contract, vars: &Vars, seed: u64) -> Result<Invocation, String> {
        crate::rubric::args::resolve(c, vars).and_then(|a| generate(&a, seed))
    }
    use crate::rubric::schema::{Expr, Launch};

    fn contract() -> Contract {
        let yaml = r#"
params:
  - { name: a, type: f32*, len: n, gen: { uniform: [-1, 1] } }
  - { name: ids, type: i32*, len: n, gen: { int: [0, vocab] } }
  - { name: c, type: f32*, dir: out, len: n }
  - { name: acc, type: f32*, dir: out, len: 1, init: 0 }
  - { name: n, type: i32, value: n }
launch: { block: [256], grid: ["ceil_div(n, 256)"] }
"#;
        serde_yaml::from_str(yaml).unwrap()
    }

    fn vars() -> Vars {
        [("n".to_string(), 1000.0), ("vocab".to_string(), 7.0)]
            .into_iter()
            .collect()
    }

    #[test]
    fn same_seed_same_inputs_other_seed_other_inputs() {
        let c = contract();
        let a = invocation(&c, &vars(), 1).unwrap();
        let b = invocation(&c, &vars(), 1).unwrap();
        let d = invocation(&c, &vars(), 2).unwrap();
        assert_eq!(a.buffers[0].data, b.buffers[0].data);
        assert_ne!(a.buffers[0].data, d.buffers[0].data);
        assert_ne!(trial_seed(5, "n=1", 0), trial_seed(5, "n=1", 1));
    }

    #[test]
    fn outputs_poisoned_or_initialised_and_ids_in_range() {
        let inv = invocation(&contract(), &vars(), 3).unwrap();
        let c = decode(&inv.buffers[2].data, ScalarType::F32);
        assert!(c.iter().all(|x| x.is_nan()));
        assert_eq!(decode(&inv.buffers[3].data, ScalarType::F32), vec![0.0]);
        let ids = decode(&inv.buffers[1].data, ScalarType::I32);
        assert!(ids.iter().all(|&i| (0.0..7.0).contains(&i)));
        assert!(ids.contains(&0.0) && ids.contains(&6.0));
        assert_eq!(inv.args.len(), 5);
        let alloc = inv.buffers[0].allocation();
        assert_eq!(alloc.len(), 4000 + 2 * GUARD);
        assert!(alloc[..GUARD].iter().all(|&b| b == GUARD_BYTE));
        let tv = inv.tolerance_vars(&vars());
        assert!(tv["a_abs_sum"] > 100.0 && tv["a_abs_max"] <= 1.0 && !tv.contains_key("c_abs_sum"));
    }

    #[test]
    fn extreme_generator_bounds_are_drawn_or_refused_never_a_panic() {
        let with = |g: &str| -> Contract {
            serde_yaml::from_str(&format!(
                "params:\n  - {{ name: a, type: f64*, len: n, gen: {g}, \
                 specials: {{ values: [], fraction: 1 }} }}\n\
                 launch: {{ block: [1], grid: [1] }}\n"
            ))
            .unwrap()
        };
        // Wider than f64 can subtract: drawn by mixing the bounds, all finite and in range.
        let inv = invocation(&with("{ uniform: [-1e308, 1e308] }"), &vars(), 1).unwrap();
        let a = decode(&inv.buffers[0].data, ScalarType::F64);
        assert!(a.iter().all(|x| x.is_finite() && x.abs() <= 1e308));
        assert!(a.iter().any(|&x| x < -1e300) && a.iter().any(|&x| x > 1e300));
        for (g, want) in [
            ("{ uniform: [-1, .inf] }", "not finite"),
            ("{ uniform: [.nan, 1] }", "not finite"),
            ("{ normal: [.inf, 1] }", "not finite"),
            ("{ normal: [0, .inf] }", "normal"),
            ("{ int: [-1e300, 1] }", "outside 64-bit"),
            ("{ int: [.nan, 1] }", "outside 64-bit"),
        ] {
            let e = invocation(&with(g), &vars(), 1).unwrap_err();
            assert!(e.contains(want), "{g}: {e}");
        }
    }

    #[test]
    fn limits() {
        let d = |b: [u32; 3], s| LaunchDims {
            grid: [1, 1, 1],
            block: b,
            shared_bytes: s,
        };
        assert!(check_limits(&d([1024, 1, 1], 0), 1024).is_ok());
        assert!(
            check_limits(&d([1025, 1, 1], 0), 1024)
                .unwrap_err()
                .contains("1025 threads")
        );
        assert!(check_limits(&d([32, 32, 2], 0), 1024).is_err());
        assert!(check_limits(&d([32, 1, 1], 300_000), 1024).is_err());
        let _ = Launch {
            block: vec![Expr::int(1)],
            grid: vec![Expr::int(1)],
            shared_bytes: None,
        };
    }

    const NUMBA_MATMUL: &str = "params:
  - {name: A, type: \"f32*\", dir: in, len: \"M * K\", shape: [M, K]}
  - {name: C, type: \"f32*\", dir: out, len: \"M * K\"}
  - {name: M, type: i32, value: M}
  - {name: K, type: u64, value: K}
launch: {block: [16], grid: [1]}
";

    #[test]
    fn descriptors_carry_shape_and_strides() {
        let c: Contract = serde_yaml::from_str(NUMBA_MATMUL).unwrap();
        let mut vars = crate::rubric::expr::Vars::new();
        vars.insert("M".into(), 3.0);
        vars.insert("K".into(), 5.0);
        let inv = invocation(&c, &vars, 1).unwrap();
        let sig =
            &crate::rubric::convention::signatures(&c, crate::rubric::schema::ArrayStyle::Auto)[1];
        let n = numba_invocation(&inv, &c, sig).unwrap();
        use crate::backend::ParamValue::I64;
        let v = |x| Arg::Value(I64(x));
        assert_eq!(
            n.args[..9],
            [
                v(0),
                v(0),
                v(15),
                v(4),
                Arg::Buffer(0),
                v(3),
                v(5),
                v(20),
                v(4)
            ]
        );
        assert_eq!(
            n.args[9..16],
            [v(0), v(0), v(15), v(4), Arg::Buffer(1), v(15), v(4)]
        );
        assert_eq!(n.args.len(), 18);
    }
}

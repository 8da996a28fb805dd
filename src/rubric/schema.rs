//! The rubric file format, as serde types. `docs/rubric.md` documents every key.
//!
//! Every struct denies unknown fields, so that a typo is an error with a position rather than
//! a silently ignored key. Expressions are kept as source text here and checked by
//! `rubric::validate` against the variables in scope.

use super::expr::{Expression, Kind, Vars};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// An expression as written: a YAML number or a string such as `"ceil_div(n, 256)"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Literal {
    Int(i64),
    Float(f64),
    Text(String),
}

/// An expression of the rubric: its text, and its parse tree, built the first time it is
/// evaluated and kept (a loaded rubric's expressions were all parsed, each with its own
/// [`Kind`], when `rubric::load` checked them).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(from = "Literal", into = "Literal")]
pub struct Expr {
    literal: Literal,
    parsed: std::sync::OnceLock<Result<Expression, String>>,
}

impl PartialEq for Expr {
    fn eq(&self, other: &Self) -> bool {
        self.literal == other.literal
    }
}

impl From<Literal> for Expr {
    fn from(literal: Literal) -> Self {
        Expr {
            literal,
            parsed: std::sync::OnceLock::new(),
        }
    }
}

impl From<Expr> for Literal {
    fn from(e: Expr) -> Self {
        e.literal
    }
}

impl Expr {
    pub fn int(i: i64) -> Expr {
        Literal::Int(i).into()
    }

    pub fn text(s: &str) -> Expr {
        Literal::Text(s.to_string()).into()
    }

    pub fn literal(&self) -> &Literal {
        &self.literal
    }

    pub fn source(&self) -> String {
        match &self.literal {
            Literal::Int(i) => i.to_string(),
            Literal::Float(f) => {
                let s = f.to_string();
                if s.contains('.') || s.contains('e') || s.contains("inf") || s.contains("NaN") {
                    s
                } else {
                    format!("{s}.0")
                }
            }
            Literal::Text(s) => s.clone(),
        }
    }

    /// Parse as an expression of `kind`: how `rubric::load` (and a manifest's launch
    /// override) checks it. The tree kept for evaluation is this one.
    pub fn parse_as(&self, kind: Kind) -> Result<&Expression, String> {
        let kept = self
            .parsed
            .get_or_init(|| Expression::parse(&self.source(), kind))
            .as_ref()
            .map_err(Clone::clone)?;
        if kind == Kind::Int && kept.kind() == Kind::Real {
            // Kept as a real expression: an integer one allows less (no `.`, `^`, `sqrt`).
            Expression::parse(&self.source(), kind)?;
        }
        Ok(kept)
    }

    /// The integer value under `vars` (sizes, lengths, launch dimensions).
    pub fn eval_int(&self, vars: &Vars) -> Result<i64, String> {
        self.parse_as(Kind::Int)?.eval_int(vars)
    }

    /// The real value under `vars` (bounds, tolerances, values).
    pub fn eval_f64(&self, vars: &Vars) -> Result<f64, String> {
        self.parse_as(Kind::Real)?.eval_f64(vars)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rubric {
    /// Assignment id, e.g. `reduction`. Goes into result.json.
    pub assignment: String,
    #[serde(default)]
    pub title: String,
    /// Reference kernel source, relative to the rubric file.
    pub reference: String,
    /// Whether a submission's `cugrade.yaml` may override launch configurations.
    #[serde(default = "yes")]
    pub allow_launch_override: bool,
    /// Trials per correctness case, each on fresh inputs. At least 2 (enforced).
    #[serde(default = "two")]
    pub trials: u32,
    #[serde(default)]
    pub timeouts: Timeouts,
    /// Kernel contracts by name.
    pub contracts: BTreeMap<String, Contract>,
    pub cases: Cases,
    pub milestones: Vec<Milestone>,
    /// Languages a submission may be written in; all of them when absent.
    #[serde(default)]
    pub languages: Option<Vec<Language>>,
    /// How Numba kernels take buffers that declare a `shape` (docs/rubric.md).
    #[serde(default)]
    pub numba_arrays: ArrayStyle,
    /// A multi-GPU lab: its kernels run on this many ranks at once (GPUs with peer access, or
    /// emulated devices), unless `--ranks N` says otherwise. Every case then has the variables
    /// `nranks` (the rank count) and `rank` (each rank's own, in its parameters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<u32>,
}

/// The variables a multi-GPU lab's expressions read besides its cases' own.
pub const RANK_VARS: [&str; 2] = ["nranks", "rank"];

/// The rank counts a multi-GPU lab can run on.
pub const RANKS_ALLOWED: std::ops::RangeInclusive<u32> = 2..=8;

/// A submission language: CUDA C++ (`.cu`), hand-written PTX (`.ptx`), Numba or CuPy (`.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Language {
    Cuda,
    Ptx,
    Numba,
    Cupy,
}

impl Language {
    pub fn as_str(self) -> &'static str {
        match self {
            Language::Cuda => "cuda",
            Language::Ptx => "ptx",
            Language::Numba => "numba",
            Language::Cupy => "cupy",
        }
    }
}

/// Numba array parameters for buffers with a `shape`: `auto` tries flat 1-D arrays
/// (`x[i * K + k]`) and then N-D ones (`x[i, k]`); `flat` and `shaped` allow one only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArrayStyle {
    #[default]
    Auto,
    Flat,
    Shaped,
}

fn yes() -> bool {
    true
}
fn two() -> u32 {
    2
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    /// NVRTC compile of the submission, seconds.
    #[serde(default = "t_compile")]
    pub compile_s: f64,
    /// Importing a Numba submission's `.py` files (the student's code at module level runs
    /// then), seconds: one budget for the whole import, whatever the number of kernels.
    #[serde(default = "t_import")]
    pub import_s: f64,
    /// One kernel launch (correctness), seconds: the most any launch may take.
    #[serde(default = "t_launch")]
    pub launch_s: f64,
    /// A correctness launch also stops after `launch_factor` times the reference kernel's
    /// time on the same case and trial, but never before `launch_min_s` (see
    /// [`Timeouts::correctness_deadline`]): a hung kernel costs a second, not `launch_s`, of
    /// a GPU that timed sections wait for.
    #[serde(default = "t_launch_min")]
    pub launch_min_s: f64,
    #[serde(default = "t_launch_factor")]
    pub launch_factor: f64,
    /// A whole worker (one milestone: load, every case and trial, timing), seconds.
    #[serde(default = "t_worker")]
    pub milestone_s: f64,
}

fn t_compile() -> f64 {
    60.0
}
fn t_launch() -> f64 {
    10.0
}
fn t_import() -> f64 {
    10.0
}
fn t_worker() -> f64 {
    300.0
}
fn t_launch_min() -> f64 {
    1.0
}
fn t_launch_factor() -> f64 {
    1000.0
}

impl Timeouts {
    /// The deadline of one correctness launch whose reference launch took `reference_s`
    /// (seconds, from the launch to the kernel's end), and why it is that long. Only a
    /// deadline scaled from the reference names a measured time (and so differs between
    /// runs); the floor and the cap read the same every time.
    pub fn correctness_deadline(&self, reference_s: f64) -> (f64, String) {
        let scaled = self.launch_factor * reference_s.max(0.0);
        let d = scaled.max(self.launch_min_s).min(self.launch_s);
        let took = if reference_s < 1e-3 {
            format!("{:.0} µs", reference_s * 1e6)
        } else {
            format!("{:.1} ms", reference_s * 1e3)
        };
        // Words for the student who reads them in a timeout's finding, never the rubric's
        // keys (`timeouts.launch_min_s`): docs/rubric.md maps them for the instructor.
        let why = if d >= self.launch_s {
            "the most any launch is given".to_string()
        } else if scaled > self.launch_min_s {
            format!(
                "{}x the reference kernel's {took} on this case",
                self.launch_factor
            )
        } else {
            // No measured time here: the common case's message is the same on every run.
            "the least any launch is given, far more than the reference kernel needs".to_string()
        };
        (d, why)
    }
}

#[cfg(test)]
mod deadline_tests {
    use super::Timeouts;

    #[test]
    fn a_correctness_deadline_is_a_multiple_of_the_reference_between_the_floor_and_the_cap() {
        let t = Timeouts::default();
        // A fast reference: the floor.
        let (d, why) = t.correctness_deadline(20e-6);
        assert_eq!(d, 1.0);
        assert_eq!(
            why,
            "the least any launch is given, far more than the reference kernel needs"
        );
        // A slower one: 1000 times it.
        let (d, why) = t.correctness_deadline(3e-3);
        assert!((d - 3.0).abs() < 1e-9);
        assert_eq!(why, "1000x the reference kernel's 3.0 ms on this case");
        // No rubric key in any of them: a student reads them.
        for r in [20e-6, 3e-3, 0.5] {
            let why = t.correctness_deadline(r).1;
            assert!(!why.contains("timeouts") && !why.contains("_s"), "{why}");
        }
        // Never past launch_s.
        let (d, why) = t.correctness_deadline(0.5);
        assert_eq!(d, 10.0);
        assert_eq!(why, "the most any launch is given");
        // launch_min_s = launch_s: a fixed deadline, as before.
        let fixed = Timeouts {
            launch_min_s: 10.0,
            ..Timeouts::default()
        };
        assert_eq!(fixed.correctness_deadline(1e-6).0, 10.0);
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            compile_s: t_compile(),
            import_s: t_import(),
            launch_s: t_launch(),
            launch_min_s: t_launch_min(),
            launch_factor: t_launch_factor(),
            milestone_s: t_worker(),
        }
    }
}

/// A kernel's signature and how to call it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contract {
    pub params: Vec<Param>,
    /// The CPU implementation, if there is one: a built-in's name (see `baseline::lookup`)
    /// or the course's Python function. `validate` cross-checks the reference against it and
    /// `against: cpu` times it.
    #[serde(default)]
    pub cpu: Option<CpuImpl>,
    /// A Python function lab (docs/labs/preprocess.md): the contract is a function
    /// `f(table)`, not a kernel. Its `in` buffers and scalars are the table's entries, and the
    /// `out` buffer named here is what it returns. Such a contract has no `launch`, and
    /// `against: cpu` times the reference file's own (NumPy) function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returns: Option<String>,
    /// Kernels only.
    #[serde(default)]
    pub launch: Launch,
    /// A multi-kernel contract: the launches of the kernels that run after the first, in
    /// order, each on the same arguments (a scan's block scans, then the scan of their sums,
    /// then the propagation). A milestone on it names those kernels in its own `then`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub then: Vec<Launch>,
    /// Default tolerance for every output buffer of this contract.
    #[serde(default)]
    pub tolerance: Tolerance,
    /// The arithmetic precision the lab asks for (default `fp32`): tolerance expressions read
    /// its unit roundoff as `u`. A lab that teaches half precision or tensor cores declares
    /// `fp16`, `bf16` or `tf32` on purpose; everywhere else a kernel that computes in less
    /// than float fails as "less precise than float accumulation allows".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<crate::model::precision::Precision>,
}

/// A contract's CPU implementation: `cpu: reduce_sum` (built into cugrade) or
/// `cpu: {python: cpu/scan.py, function: scan_cpu}`, the course's own function (NumPy or plain
/// Python, path relative to the rubric), called with the contract's parameters as keyword
/// arguments and writing its outputs in place, like the kernel (`baseline::python`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum CpuImpl {
    Builtin(String),
    Python(PythonCpu),
}

/// `cpu: {python: FILE, function: NAME}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PythonCpu {
    pub python: String,
    pub function: String,
}

// By hand rather than `untagged`: a mistake inside `{python: ..., function: ...}` is then
// reported at its own key (`contracts.NAME.cpu.funtion`), not as the whole contract's.
impl<'de> Deserialize<'de> for CpuImpl {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = CpuImpl;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a built-in CPU implementation's name (such as `reduce_sum`) or the course's own Python function, `{python: FILE.py, function: NAME}`",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<CpuImpl, E> {
                Ok(CpuImpl::Builtin(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<CpuImpl, A::Error> {
                PythonCpu::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(CpuImpl::Python)
            }
        }
        d.deserialize_any(V)
    }
}

impl CpuImpl {
    /// The built-in implementation's name, if it is one.
    pub fn builtin(&self) -> Option<&str> {
        match self {
            CpuImpl::Builtin(n) => Some(n),
            CpuImpl::Python(_) => None,
        }
    }
}

impl std::fmt::Display for CpuImpl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpuImpl::Builtin(n) => write!(f, "{n}"),
            CpuImpl::Python(p) => write!(f, "{} in {}", p.function, p.python),
        }
    }
}

/// Element types a parameter may have. Pointers are written with a trailing `*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub enum ScalarType {
    #[serde(rename = "i32")]
    I32,
    #[serde(rename = "u32")]
    U32,
    #[serde(rename = "i64")]
    I64,
    #[serde(rename = "u64")]
    U64,
    #[serde(rename = "f32")]
    F32,
    #[serde(rename = "f64")]
    F64,
    /// Bytes: images, histograms' inputs, quantised values.
    #[serde(rename = "u8")]
    U8,
    #[serde(rename = "i8")]
    I8,
    #[serde(rename = "u16")]
    U16,
    #[serde(rename = "i16")]
    I16,
    /// IEEE half precision (`__half`).
    #[serde(rename = "f16")]
    F16,
    /// bfloat16 (`__nv_bfloat16`): float's exponent, 8 bits of significand.
    #[serde(rename = "bf16")]
    BF16,
}

impl ScalarType {
    /// Every type, in the order `docs/rubric.md` lists them.
    pub const ALL: [ScalarType; 12] = [
        ScalarType::U8,
        ScalarType::I8,
        ScalarType::U16,
        ScalarType::I16,
        ScalarType::I32,
        ScalarType::U32,
        ScalarType::I64,
        ScalarType::U64,
        ScalarType::F16,
        ScalarType::BF16,
        ScalarType::F32,
        ScalarType::F64,
    ];

    pub fn size(self) -> usize {
        match self {
            ScalarType::U8 | ScalarType::I8 => 1,
            ScalarType::U16 | ScalarType::I16 | ScalarType::F16 | ScalarType::BF16 => 2,
            ScalarType::I32 | ScalarType::U32 | ScalarType::F32 => 4,
            ScalarType::I64 | ScalarType::U64 | ScalarType::F64 => 8,
        }
    }
    pub fn is_float(self) -> bool {
        matches!(
            self,
            ScalarType::F32 | ScalarType::F64 | ScalarType::F16 | ScalarType::BF16
        )
    }
    /// Whether the type's every value is exactly an f64 (not so for 64-bit integers).
    pub fn fits_f64(self) -> bool {
        !matches!(self, ScalarType::I64 | ScalarType::U64)
    }
    pub fn name(self) -> &'static str {
        match self {
            ScalarType::I32 => "i32",
            ScalarType::U32 => "u32",
            ScalarType::I64 => "i64",
            ScalarType::U64 => "u64",
            ScalarType::F32 => "f32",
            ScalarType::F64 => "f64",
            ScalarType::U8 => "u8",
            ScalarType::I8 => "i8",
            ScalarType::U16 => "u16",
            ScalarType::I16 => "i16",
            ScalarType::F16 => "f16",
            ScalarType::BF16 => "bf16",
        }
    }
    /// The CUDA C++ type a kernel declares (`__half` needs `<cuda_fp16.h>`, `__nv_bfloat16`
    /// `<cuda_bf16.h>`: [`ScalarType::cuda_header`]).
    pub fn cuda_name(self) -> &'static str {
        match self {
            ScalarType::I32 => "int",
            ScalarType::U32 => "unsigned int",
            ScalarType::I64 => "long long",
            ScalarType::U64 => "unsigned long long",
            ScalarType::F32 => "float",
            ScalarType::F64 => "double",
            ScalarType::U8 => "unsigned char",
            ScalarType::I8 => "signed char",
            ScalarType::U16 => "unsigned short",
            ScalarType::I16 => "short",
            ScalarType::F16 => "__half",
            ScalarType::BF16 => "__nv_bfloat16",
        }
    }
    /// The header a CUDA C++ source includes for the type, if any.
    pub fn cuda_header(self) -> Option<&'static str> {
        match self {
            ScalarType::F16 => Some("cuda_fp16.h"),
            ScalarType::BF16 => Some("cuda_bf16.h"),
            _ => None,
        }
    }
    /// NumPy's name for the type (Numba and CuPy arrays). NumPy has no bfloat16: a `bf16`
    /// buffer reaches Python as `uint16`, its raw bits.
    pub fn numpy_name(self) -> &'static str {
        match self {
            ScalarType::I32 => "int32",
            ScalarType::U32 => "uint32",
            ScalarType::I64 => "int64",
            ScalarType::U64 => "uint64",
            ScalarType::F32 => "float32",
            ScalarType::F64 => "float64",
            ScalarType::U8 => "uint8",
            ScalarType::I8 => "int8",
            ScalarType::U16 | ScalarType::BF16 => "uint16",
            ScalarType::I16 => "int16",
            ScalarType::F16 => "float16",
        }
    }
    /// NumPy's type string (`<f4`), as a function lab's table columns carry it.
    pub fn numpy_code(self) -> &'static str {
        match self {
            ScalarType::I32 => "<i4",
            ScalarType::U32 => "<u4",
            ScalarType::I64 => "<i8",
            ScalarType::U64 => "<u8",
            ScalarType::F32 => "<f4",
            ScalarType::F64 => "<f8",
            ScalarType::U8 => "|u1",
            ScalarType::I8 => "|i1",
            ScalarType::U16 | ScalarType::BF16 => "<u2",
            ScalarType::I16 => "<i2",
            ScalarType::F16 => "<f2",
        }
    }
    pub fn parse(s: &str) -> Option<ScalarType> {
        Some(match s {
            "i32" | "int" => ScalarType::I32,
            "u32" | "unsigned" => ScalarType::U32,
            "i64" => ScalarType::I64,
            "u64" => ScalarType::U64,
            "f32" | "float" => ScalarType::F32,
            "f64" | "double" => ScalarType::F64,
            "u8" | "uchar" => ScalarType::U8,
            "i8" => ScalarType::I8,
            "u16" => ScalarType::U16,
            "i16" => ScalarType::I16,
            "f16" | "half" => ScalarType::F16,
            "bf16" | "bfloat16" => ScalarType::BF16,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Read-only input: the kernel must not change it (a `memory` check says so if it does).
    #[default]
    In,
    /// Output: poisoned before each launch unless `init` is given.
    Out,
    /// Input and output.
    InOut,
    /// Workspace (a scan's partial sums and flags, a counter): starts zeroed, or at `init`,
    /// before every launch, the timed ones included; never generated and never compared.
    Scratch,
}

impl Direction {
    /// Whether the buffer's contents after the launch are compared with the reference's.
    pub fn is_output(self) -> bool {
        matches!(self, Direction::Out | Direction::InOut)
    }

    /// Whether the buffer's contents before the launch are drawn from its generator.
    pub fn is_input(self) -> bool {
        matches!(self, Direction::In | Direction::InOut)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Param {
    pub name: String,
    /// `f32*`, `i32*`, ... for buffers; `i32`, `f32`, ... for scalars.
    #[serde(rename = "type")]
    pub ty: String,
    /// `ty` parsed, the first time it is asked for (`Param::param_type`).
    #[serde(skip)]
    pub parsed_ty: std::sync::OnceLock<Option<ParamType>>,
    /// Buffers only.
    #[serde(default)]
    pub dir: Direction,
    /// Buffers only: number of elements.
    #[serde(default)]
    pub len: Option<Expr>,
    /// Buffers only: row-major shape used to print 2-D coordinates of mismatches; its
    /// product must equal `len`.
    #[serde(default)]
    pub shape: Option<Vec<Expr>>,
    /// Inputs: how values are drawn.
    #[serde(rename = "gen", default, with = "serde_yaml::with::singleton_map")]
    pub generator: Option<Gen>,
    /// Special values written over a fraction of the generated input.
    #[serde(default)]
    pub specials: Option<Specials>,
    /// Outputs: the value each element starts with (e.g. 0 for an atomic accumulator).
    /// Without it, outputs start poisoned (NaN for floats, 0xDEADBEEF-pattern for ints).
    #[serde(default)]
    pub init: Option<f64>,
    /// Per-buffer tolerance, overriding the contract's.
    #[serde(default)]
    pub tolerance: Option<Tolerance>,
    /// Scalars only: the value, an expression over the case's variables.
    #[serde(default)]
    pub value: Option<Expr>,
    /// A multi-GPU lab's buffer that the kernel gets as a table of every rank's copy (`float*
    /// const*`, one device pointer a rank, in rank order) rather than its own rank's alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub peers: bool,
    /// Set by the harness by symbol (`__constant__` / `__device__` globals) instead of passed
    /// as a kernel argument. Buffers only.
    #[serde(default)]
    pub symbol: bool,
}

impl Contract {
    /// Whether this is a Python function's contract (`returns:`), not a kernel's.
    pub fn is_function(&self) -> bool {
        self.returns.is_some()
    }
}

impl Param {
    /// The parameter's type, `None` for a type the rubric's check refuses.
    pub fn param_type(&self) -> Option<ParamType> {
        *self.parsed_ty.get_or_init(|| ParamType::parse(&self.ty))
    }
}

/// A parameter's type, parsed: a buffer of elements, or a scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    Buffer(ScalarType),
    Scalar(ScalarType),
}

impl ParamType {
    /// `f32*`, `const float*`, `int`, `u64` ...
    pub fn parse(s: &str) -> Option<ParamType> {
        let t = s.trim().trim_start_matches("const ").trim();
        if let Some(elem) = t.strip_suffix('*') {
            ScalarType::parse(elem.trim()).map(ParamType::Buffer)
        } else {
            ScalarType::parse(t).map(ParamType::Scalar)
        }
    }
}

/// How input values are drawn from the seeded generator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Gen {
    /// Uniform real in `[lo, hi)`.
    Uniform([Expr; 2]),
    /// Normal with `[mean, std]`.
    Normal([Expr; 2]),
    /// Uniform integer in `[lo, hi)`; for float buffers the integer is stored as a float
    /// (integer-valued floats make sums exact, see docs/rubric.md).
    Int([Expr; 2]),
    /// The same value everywhere.
    Constant(Expr),
    /// These values, cycled.
    Values(Vec<f64>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Specials {
    /// Values such as `.inf`, `-.inf`, `.nan`, `-0.0`, `1e30`.
    pub values: Vec<f64>,
    /// Fraction of elements replaced, in `[0, 1]`.
    pub fraction: f64,
}

/// When two values are equal enough. All given criteria are combined with OR: a value passes
/// if it is exact, or within `abs + rel*|expected| + sum*S` (S: the element's sum of
/// absolute terms, see [`Tolerance::sum`]), or within `ulp` units in the last place.
/// `abs`, `rel` and `sum` are expressions so they may scale with the problem size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    #[serde(default)]
    pub abs: Option<Expr>,
    #[serde(default)]
    pub rel: Option<Expr>,
    /// Per element, this times the element's sum of absolute terms S (Σ|a·b| of a dot product):
    /// the reference kernel's output on the absolute values of the inputs. For contracts whose
    /// outputs are sums of products of inputs (matrix products, convolutions, reductions),
    /// e.g. `2.5 * sqrt(K) * (u + eps)`: a K-term sum's rounding error in the lab's precision
    /// plus the float reference's own (docs/rubric.md, "Tolerances from an error model").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum: Option<Expr>,
    #[serde(default)]
    pub ulp: Option<u64>,
    /// Bit-exact (the default for integer buffers).
    #[serde(default)]
    pub exact: bool,
}

/// The variable a tolerance expression reads as the element's (flat) index.
pub const INDEX_VAR: &str = "i";

impl Tolerance {
    /// Whether an expression of the tolerance reads the element's index ([`INDEX_VAR`]).
    pub fn reads_index(&self) -> bool {
        [&self.abs, &self.rel, &self.sum]
            .into_iter()
            .flatten()
            .any(|e| {
                e.parse_as(Kind::Real)
                    .is_ok_and(|p| p.variables().iter().any(|v| v == INDEX_VAR))
            })
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    /// 1 to 3 expressions; missing ones are 1.
    pub block: Vec<Expr>,
    pub grid: Vec<Expr>,
    #[serde(default)]
    pub shared_bytes: Option<Expr>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cases {
    pub correctness: Vec<Case>,
    #[serde(default)]
    pub performance: Vec<Case>,
}

/// A named assignment of the size variables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    pub vars: BTreeMap<String, i64>,
    /// Performance cases: the wall-clock ceiling of one performance check's measurement, in
    /// seconds (default 2). A fast kernel meets the noise target well before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_s: Option<f64>,
    /// Performance cases: `cold` (default: L2 flushed before every timed launch) or `warm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheMode>,
    /// Performance cases: floating-point operations of one launch (an expression over the
    /// case's variables, e.g. `2 * M * N * K`), for the roofline's lower bound on time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops: Option<Expr>,
    /// Generators for this case only, by input buffer (`gen: {data: {constant: 7}}`: every
    /// byte in one histogram bin), replacing the contract's.
    #[serde(
        default,
        rename = "gen",
        skip_serializing_if = "BTreeMap::is_empty",
        with = "case_gen"
    )]
    pub generators: BTreeMap<String, Gen>,
}

/// `gen: {PARAM: {int: [0, 4]}}`: each value a singleton map, as a parameter's `gen` is.
mod case_gen {
    use super::Gen;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    #[derive(Serialize, Deserialize)]
    struct One(#[serde(with = "serde_yaml::with::singleton_map")] Gen);

    pub fn serialize<S: Serializer>(m: &BTreeMap<String, Gen>, s: S) -> Result<S::Ok, S::Error> {
        let v: BTreeMap<&String, One> = m.iter().map(|(k, g)| (k, One(g.clone()))).collect();
        v.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, Gen>, D::Error> {
        let v: BTreeMap<String, One> = BTreeMap::deserialize(d)?;
        Ok(v.into_iter().map(|(k, One(g))| (k, g)).collect())
    }
}

impl Case {
    /// `contract` as this case draws its inputs: the case's own generators in place of the
    /// contract's (`Case::generators`).
    pub fn contract<'c>(&self, contract: &'c Contract) -> std::borrow::Cow<'c, Contract> {
        if self.generators.is_empty() {
            return std::borrow::Cow::Borrowed(contract);
        }
        let mut c = contract.clone();
        for p in &mut c.params {
            if let Some(g) = self.generators.get(&p.name) {
                p.generator = Some(g.clone());
            }
        }
        std::borrow::Cow::Owned(c)
    }
}

/// Default time budget of a performance case, seconds.
pub const DEFAULT_BUDGET_S: f64 = 2.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Milestone {
    pub id: String,
    #[serde(default)]
    pub title: String,
    /// The student's entry point.
    pub kernel: String,
    /// Key into `contracts`.
    pub contract: String,
    /// Entry point in the reference file that produces expected outputs (default: `kernel`).
    #[serde(default)]
    pub reference_kernel: Option<String>,
    /// The student's kernels that run after `kernel`, in order, one per launch of the
    /// contract's `then`: the milestone is the whole sequence, graded and timed as one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub then: Vec<String>,
    /// The reference's kernels for `then` (default: the same names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_then: Option<Vec<String>>,
    pub correctness: CorrectnessSpec,
    #[serde(default)]
    pub performance: Vec<PerfSpec>,
    /// Emulator metric thresholds.
    #[serde(default)]
    pub metrics: Vec<MetricSpec>,
    /// Extra hint shown when this milestone's correctness fails.
    #[serde(default)]
    pub hint: Option<String>,
    /// Overrides the contract's `precision` for this milestone (e.g. a tensor-core milestone
    /// of a float lab declares `tf32`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<crate::model::precision::Precision>,
}

impl Milestone {
    /// Every kernel the student writes for this milestone, in launch order.
    pub fn kernels(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.kernel.as_str()).chain(self.then.iter().map(String::as_str))
    }

    /// The reference's kernels after the first, in launch order.
    pub fn reference_then(&self) -> &[String] {
        self.reference_then.as_deref().unwrap_or(&self.then)
    }

    /// The name reports show: the title, or the id where the rubric gives none.
    pub fn display_title(&self) -> String {
        if self.title.is_empty() {
            self.id.clone()
        } else {
            self.title.clone()
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorrectnessSpec {
    pub points: f64,
    /// Names of correctness cases; empty means all of them.
    #[serde(default)]
    pub cases: Vec<String>,
    /// Overrides the contract's tolerance for this milestone.
    #[serde(default)]
    pub tolerance: Option<Tolerance>,
}

/// What a kernel's time is compared with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Against {
    /// The single-threaded CPU implementation: `speedup = cpu_time / kernel_time`.
    Cpu,
    /// The multi-threaded CPU implementation.
    CpuParallel,
    /// Another entry point of the reference file, timed in the same run:
    /// `ratio = reference_time / kernel_time`.
    Reference(String),
    /// cuBLAS SGEMM on the case's `M`, `N`, `K`: `ratio = cublas_time / kernel_time`.
    Cublas,
    /// Device-to-device copy bandwidth measured in the same run: `percent = 100 *
    /// (bytes / kernel_time) / copy_bandwidth`. `bytes` is an expression over the case.
    CopyBandwidth { bytes: Expr },
    /// A multi-GPU lab: NCCL's all-reduce of the same data on the same GPUs, timed in the same
    /// run: `ratio = student's bus bandwidth / NCCL's` (NCCL's tests' bus bandwidth).
    Nccl,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerfSpec {
    pub name: String,
    /// A performance case name.
    pub case: String,
    #[serde(with = "serde_yaml::with::singleton_map")]
    pub against: Against,
    /// Pass bar for the measured ratio (or percent). Defaults to the highest tier's `min`.
    #[serde(default)]
    pub min: Option<f64>,
    /// Partial credit: the points of the highest tier reached.
    #[serde(default)]
    pub tiers: Vec<Tier>,
    /// Points when `min` is reached and there are no tiers.
    #[serde(default)]
    pub points: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tier {
    pub min: f64,
    pub points: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricSpec {
    /// One of `backend::Metrics::NAMES`.
    pub metric: String,
    /// A correctness case name (the emulator runs small cases).
    pub case: String,
    #[serde(default)]
    pub min: Option<f64>,
    #[serde(default)]
    pub max: Option<f64>,
    #[serde(default)]
    pub points: f64,
    /// What a student should change when this check fails (the rubric's own words; without
    /// it, what the metric means and the milestone's `hint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// Whether L2 is flushed before every timed launch (`cold`, the default) or left as the
/// previous launch left it (`warm`: for a case where the hot-cache time is the point).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    #[default]
    Cold,
    Warm,
}

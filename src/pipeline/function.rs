//! Python function labs (docs/labs/preprocess.md): the submission is a function over a table
//! of arrays (`preprocess(table) -> features`), graded against the lab's NumPy reference.
//!
//! Both run in Python workers of their own (`worker::python`): the reference with NumPy, the
//! student's with CuPy on a GPU, or with NumPy standing in for CuPy without one (its speed is
//! then not measured). The parent generates every table (`inputs`), sends the same table to
//! both, and compares the returned arrays itself (`compare`, the contract's tolerance). Speed
//! (`function_timed`) is the parent's wall clock around each call.

use super::context::{Infrastructure, Options, workers};
use super::reference::Reference;
use crate::compare::{self, Resolved};
use crate::compile::SourceFile;
use crate::compile::arrays::{self, ArrayEnv};
use crate::inputs::ParamArg;
use crate::inputs::{self, Invocation};
use crate::result::{Check, CheckKind};
use crate::rubric::plan::{CasePlan, MilestonePlan, Plan};
use crate::rubric::schema::{Direction, ScalarType};
use crate::submission::Submission;
use crate::worker::python::{Answer, Call, Column, PyError, PythonStart, Started};
use crate::worker::{Client, WorkerFailure};
use std::time::Duration;

/// A Python worker running one side of the lab.
pub(super) struct Side {
    pub(super) client: Client,
    /// What `cupy` is there (`CuPy 14.0.1`, `NumPy 2.4.6 standing in for CuPy`).
    pub(super) backend: String,
    /// A call has returned: CuPy compiles its kernels on first use, so the first call gets
    /// the rubric's compile deadline on top of a call's.
    pub(super) warm: bool,
    /// Whether an error the harness calls `unsupported` may be taken for "the NumPy stand-in
    /// cannot run this" (a skipped case) rather than a failure. Decided here, never by the
    /// student's process (whose harness shares its interpreter: it could raise or forge
    /// anything): only a side the grader started with the stand-in, whose source builds a
    /// CuPy kernel, the one thing the stand-in refuses.
    pub(super) may_be_unsupported: bool,
}

/// Why a side could not start.
pub(super) enum NotStarted {
    /// The student's modules: no function, or an import failed (the student's).
    Student(Box<Check>),
    /// The machine (NumPy or CuPy missing, a worker that would not start).
    Machine(String),
}

/// Start a Python worker for `files` and turn it into the harness for `function`.
pub(super) fn start(
    opts: &Options,
    env: &ArrayEnv,
    files: Vec<SourceFile>,
    function: &str,
    student: bool,
    timeout: Duration,
) -> Result<Side, NotStarted> {
    let mut client = workers(opts)
        .python(&env.read_dirs)
        .map_err(NotStarted::Machine)?;
    let modules = modules_for(&files, function);
    let start = PythonStart {
        python: env.python.clone(),
        files,
        modules,
        function: function.to_string(),
        sites: env.sites.clone(),
        stand_in: student && !on_gpu(opts),
        cupy: student,
        env: env.env.clone(),
    };
    let may_be_unsupported = start.stand_in && builds_cupy_kernel(&start.files);
    match client.python_start(&start, timeout) {
        Ok(Started::Ready { backend }) => Ok(Side {
            client,
            backend,
            warm: false,
            may_be_unsupported,
        }),
        // A student's process only claims it (`sides` asks a probe); the course's is believed.
        Ok(Started::Machine(e)) if student => Err(NotStarted::Machine(format!(
            "it reported a failure of the array library: {}",
            e.message
        ))),
        Ok(Started::Machine(e)) => Err(NotStarted::Machine(format!(
            "the Python array library does not import: {}\n{}",
            e.message, e.details
        ))),
        Ok(Started::NoFunction(errors)) if student => Err(NotStarted::Student(Box::new(
            no_function(function, &errors, &start.files),
        ))),
        Ok(Started::NoFunction(errors)) => Err(NotStarted::Machine(format!(
            "the reference file defines no function `{function}`: {}",
            errors.first().map_or("", |e| e.details.as_str())
        ))),
        Err(f) => {
            let out = client.output().text();
            Err(NotStarted::Machine(format!(
                "the Python worker did not start: {f}\n{out}"
            )))
        }
    }
}

/// Whether a Python file of the submission constructs a CuPy kernel (`RawKernel(`,
/// `RawModule(`, `ElementwiseKernel(`, `ReductionKernel(`, a `cupyx.jit.rawkernel`), which the
/// NumPy stand-in defines but cannot run.
pub(super) fn builds_cupy_kernel(files: &[SourceFile]) -> bool {
    static KERNEL: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"\b(RawKernel|RawModule|ElementwiseKernel|ReductionKernel)\s*\(|\bjit\.rawkernel\b",
        )
        .expect("a valid regex")
    });
    files
        .iter()
        .filter(|f| f.name.ends_with(".py"))
        .any(|f| KERNEL.is_match(&f.text))
}

/// Whether a Python file of the submission imports `cupyx.scipy` (`import cupyx.scipy.X`,
/// `from cupyx.scipy import X`, `from cupyx import scipy`).
fn imports_cupyx_scipy(files: &[SourceFile]) -> bool {
    static IMPORT: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"(?m)^[ \t]*(?:import[ \t]+cupyx\.scipy\b|from[ \t]+cupyx\.scipy\b|from[ \t]+cupyx[ \t]+import[^\n]*\bscipy\b|import[ \t]+cupyx\b)",
        )
        .expect("a valid regex")
    });
    files
        .iter()
        .filter(|f| f.name.ends_with(".py"))
        .any(|f| IMPORT.is_match(&f.text) && f.text.contains("scipy"))
}

pub(super) fn on_gpu(opts: &Options) -> bool {
    opts.backend.caps().device
}

/// The modules to import, those whose text defines `def FUNCTION(` first: top-level `.py`
/// files by their stems.
fn defines(function: &str) -> regex::Regex {
    regex::Regex::new(&format!(r"(?m)^def\s+{}\s*\(", regex::escape(function)))
        .expect("escaped regex")
}

fn importable(stem: &str) -> bool {
    stem.chars().next().is_some_and(|c| !c.is_ascii_digit())
        && stem.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn modules_for(files: &[SourceFile], function: &str) -> Vec<String> {
    let def = defines(function);
    let mut mods: Vec<(bool, String)> = files
        .iter()
        .filter(|f| !f.name.contains('/'))
        .filter_map(|f| {
            let stem = f.name.strip_suffix(".py")?;
            importable(stem).then(|| (!def.is_match(&f.text), stem.to_string()))
        })
        .collect();
    mods.sort();
    mods.into_iter().map(|(_, m)| m).collect()
}

/// No module defines the function: what each import said, at its line.
fn no_function(function: &str, errors: &[PyError], files: &[SourceFile]) -> Check {
    let name = format!("function {function}");
    let def = defines(function);
    let unimportable = files.iter().find(|f| {
        def.is_match(&f.text)
            && (f.name.contains('/') || !f.name.strip_suffix(".py").is_some_and(importable))
    });
    if let (None, Some(f)) = (errors.first(), unimportable) {
        return Check::fail(
            CheckKind::Kernel,
            name,
            format!(
                "`{}` defines `{function}`, but cugrade imports the submission's top-level \
                 modules by name and this is not one",
                f.name
            ),
        )
        .with_hint(
            "Put the function in a top-level file whose name is a Python module name (letters, \
             digits and `_`, such as `preprocess.py`)."
                .to_string(),
        );
    }
    match errors.first() {
        Some(e) => Check::fail(
            CheckKind::Compile,
            name,
            format!("importing the submission failed: {}", e.message),
        )
        .with_location(location(e))
        .with_details(e.details.clone())
        .with_cause("import"),
        None => Check::fail(
            CheckKind::Kernel,
            name,
            format!(
                "no module of the submission defines a function `{function}(table)` at its top \
                 level"
            ),
        )
        .with_hint(format!(
            "Define `def {function}(table):` in a `.py` file of the submission (`cugrade init \
             LAB --lang cupy` writes a starter)."
        )),
    }
}

pub(super) fn location(e: &PyError) -> Option<String> {
    Some(format!("{}:{}", e.file.as_deref()?, e.line?))
}

/// NumPy's name for an element type (`<f4`).
pub(super) fn dtype(t: ScalarType) -> &'static str {
    t.numpy_code()
}

/// A case's table for one trial (seeded like a kernel's inputs), the call that sends it, and
/// the returned buffer's description.
pub(super) fn table(case: &CasePlan, seed: u64) -> Result<(Invocation, Call), String> {
    let inv = case.args().and_then(|a| inputs::generate(a, seed))?;
    let mut call = Call::default();
    for b in inv.buffers.iter().filter(|b| b.dir == Direction::In) {
        call.columns.push(Column {
            name: b.name.clone(),
            dtype: dtype(b.elem).into(),
            shape: b.shape.clone().unwrap_or_else(|| vec![b.len]),
        });
    }
    for p in case.args()? {
        if let ParamArg::Scalar(s) = p {
            let value = if s.ty.is_float() {
                serde_json::json!(s.value)
            } else {
                serde_json::json!(s.value as i64)
            };
            call.scalars.insert(s.name.clone(), value);
        }
    }
    Ok((inv, call))
}

/// The same table sent to the harness alone (`Call::null`): an array of the result's dtype
/// and shape comes back without the function running.
pub(super) fn null_call(inv: &Invocation, call: &Call) -> Call {
    let mut c = call.clone();
    c.null = inv
        .buffers
        .iter()
        .find(|b| b.dir == Direction::Out)
        .map(|b| Column {
            name: b.name.clone(),
            dtype: dtype(b.elem).into(),
            shape: b.shape.clone().unwrap_or_else(|| vec![b.len]),
        });
    c
}

/// The columns' bytes, in the call's order.
pub(super) fn columns(inv: &Invocation) -> Vec<&[u8]> {
    inv.buffers
        .iter()
        .filter(|b| b.dir == Direction::In)
        .map(|b| b.data.as_slice())
        .collect()
}

/// What is wrong with the student's answer against the reference's, if anything: a message,
/// its cause and the evidence. `None`: within tolerance.
pub(super) fn wrong(
    plan: &MilestonePlan,
    inv: &Invocation,
    case: &CasePlan,
    expected: &[u8],
    got: &Answer,
) -> Option<(String, &'static str, String)> {
    let Some(out) = inv.buffers.iter().find(|b| b.dir == Direction::Out) else {
        return Some((
            "the contract returns no buffer".into(),
            "rubric",
            String::new(),
        ));
    };
    let (dt, shape, bytes) = match got {
        Answer::Raised(e) => return Some((raised(e), "exception", e.details.clone())),
        Answer::Array {
            dtype,
            shape,
            bytes,
        } => (dtype, shape, bytes),
    };
    let want_shape = out.shape.clone().unwrap_or_else(|| vec![out.len]);
    let t = out
        .tolerance
        .as_ref()
        .or(plan.tolerance.as_ref())
        .or(Some(&plan.contract.tolerance));
    let vars = inv.tolerance_vars(&case.vars);
    let tol = match Resolved::with_precision(t, out.elem, &vars, plan.precision) {
        Ok(t) => t,
        Err(e) => return Some((format!("tolerance: {e}"), "rubric", String::new())),
    };
    let layout = Returned {
        dtype: dt,
        shape,
        bytes,
    };
    if dt.as_str() != dtype(out.elem) {
        return Some((
            format!(
                "returned {} {}; the lab asks for {} ({})",
                numpy_name(dt),
                out.name,
                numpy_name(dtype(out.elem)),
                if dt.ends_with("f8") {
                    "an array made with a float64 default, such as `cp.zeros((n, k))`, or a Python float mixed with a float64 array, upcasts"
                } else {
                    "cast the result with `.astype(...)`"
                }
            ),
            "dtype",
            layout.evidence(plan, out, case, expected, tol),
        ));
    }
    if *shape != want_shape {
        return Some((
            format!("returned shape {shape:?}; the lab asks for {want_shape:?}"),
            "shape",
            layout.evidence(plan, out, case, expected, tol),
        ));
    }
    let each = match Resolved::per_element(t, out.elem, &vars, plan.precision, out.len) {
        Ok(e) => e,
        Err(e) => return Some((format!("tolerance: {e}"), "rubric", String::new())),
    };
    let c = compare::compare_each(out, expected, bytes, None, tol, each.as_deref());
    if c.ok() {
        return None;
    }
    Some((
        format!(
            "wrong results: {} of {} values differ from the reference",
            c.bad, c.total
        ),
        "wrong",
        c.describe(),
    ))
}

/// An array the student's function returned.
struct Returned<'a> {
    dtype: &'a str,
    shape: &'a [usize],
    bytes: &'a [u8],
}

impl Returned<'_> {
    /// The evidence for a result of another dtype or shape than the lab's: what came back,
    /// what the lab asks for, and whether its values, converted to the lab's dtype and read in
    /// row-major order, are right, so that a student learns whether the type (or the layout) is
    /// all that is wrong.
    fn evidence(
        &self,
        plan: &MilestonePlan,
        out: &inputs::Buffer,
        case: &CasePlan,
        expected: &[u8],
        tol: Resolved,
    ) -> String {
        let want = dtype(out.elem);
        let want_shape = out.shape.clone().unwrap_or_else(|| vec![out.len]);
        let n = self.shape.iter().product::<usize>();
        let mut s = format!(
            "returned: a {} array of shape {:?} ({n} values)\nthe lab asks for: a {} array of \
             shape {want_shape:?}{} ({} values)\n",
            numpy_name(self.dtype),
            self.shape,
            numpy_name(want),
            shape_source(plan, out, case),
            out.len
        );
        let elem = scalar_type(self.dtype).filter(|e| self.bytes.len() == n * e.size());
        let Some(elem) = elem.filter(|_| n == out.len) else {
            s.push_str(if n == out.len {
                "its values were not compared: cugrade reads float32, float64 and 32- or 64-bit \
                 integers"
            } else {
                "its values were not compared: it holds another number of values"
            });
            return s;
        };
        let values = inputs::encode(&inputs::decode(self.bytes, elem), out.elem);
        let c = compare::compare(out, expected, &values, tol);
        let (retyped, reshaped) = (self.dtype != want, *self.shape != want_shape);
        let how = match (retyped, reshaped) {
            (true, true) => format!(
                "converted to {} and read in row-major order",
                numpy_name(want)
            ),
            (true, false) => format!("converted to {}", numpy_name(want)),
            _ => "read in row-major order".to_string(),
        };
        if !c.ok() {
            s.push_str(&format!(
                "its values, {how}, also differ from the reference:\n{}",
                c.describe()
            ));
            return s;
        }
        let fix = match (retyped, reshaped) {
            (true, false) => format!(
                "only the dtype is wrong: keep every step in {0}, or return \
                 `result.astype(cp.{0})`",
                numpy_name(want)
            ),
            (false, true) => format!(
                "only the shape is wrong: return `result.reshape({})`",
                want_shape
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => "only the dtype and the shape are wrong".to_string(),
        };
        s.push_str(&format!(
            "its values, {how}, all match the reference (tolerance: {}): {fix}",
            c.tolerance.describe()
        ));
        s
    }
}

/// ` = [rows, 4 + categories] with rows=1, categories=4`: the contract's shape of `out` and
/// the case's sizes, where the contract writes one.
fn shape_source(plan: &MilestonePlan, out: &inputs::Buffer, case: &CasePlan) -> String {
    let Some(dims) = plan
        .contract
        .params
        .iter()
        .find(|p| p.name == out.name)
        .and_then(|p| p.shape.as_ref())
    else {
        return String::new();
    };
    let dims: Vec<String> = dims.iter().map(|e| e.source()).collect();
    let vars: Vec<String> = case
        .vars
        .iter()
        .filter(|(k, _)| dims.iter().any(|d| d.contains(k.as_str())))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if vars.is_empty() {
        format!(" = [{}]", dims.join(", "))
    } else {
        format!(" = [{}] with {}", dims.join(", "), vars.join(", "))
    }
}

/// The element type of NumPy dtype `dt` (`<f8`), where cugrade reads it.
fn scalar_type(dt: &str) -> Option<ScalarType> {
    // `=u1` and `|u1` are the same bytes; a big-endian column is refused.
    let dt = dt.replacen('=', "<", 1).replacen('|', "<", 1);
    ScalarType::ALL
        .into_iter()
        .filter(|t| *t != ScalarType::BF16)
        .find(|t| t.numpy_code().replacen('|', "<", 1) == dt)
}

fn numpy_name(dt: &str) -> String {
    match dt {
        "<f4" => "float32".into(),
        "<f8" => "float64".into(),
        "<f2" => "float16".into(),
        "<i4" => "int32".into(),
        "<i8" => "int64".into(),
        "<u4" => "uint32".into(),
        "<u8" => "uint64".into(),
        other => format!("dtype `{other}`"),
    }
}

fn raised(e: &PyError) -> String {
    match e.kind.as_str() {
        "memory" => format!("ran out of memory: {}", e.message),
        _ => format!("raised {}", e.message),
    }
}

/// The parent's expected array from the reference's answer, or why the reference failed (the
/// machine's problem: the reference is trusted).
pub(super) fn expected(a: Result<Answer, WorkerFailure>) -> Result<Vec<u8>, Infrastructure> {
    match a {
        Ok(Answer::Array { bytes, .. }) => Ok(bytes),
        Ok(Answer::Raised(e)) => Err(Infrastructure(format!(
            "the lab's reference function raised {}\n{}",
            e.message, e.details
        ))),
        Err(f) => Err(Infrastructure(format!(
            "the reference's worker failed: {f}"
        ))),
    }
}

/// The environments of both sides: NumPy for the reference; CuPy (GPU) or NumPy (the
/// stand-in) for the student.
pub(super) fn environments(opts: &Options) -> Result<(ArrayEnv, ArrayEnv), Infrastructure> {
    let numpy = arrays::numpy().map_err(Infrastructure)?;
    let student = if on_gpu(opts) {
        arrays::cupy().map_err(Infrastructure)?
    } else {
        numpy.clone()
    };
    Ok((numpy, student))
}

/// Everything the milestones need, started once per submission.
pub(super) struct Sides {
    pub(super) reference: Side,
    pub(super) student: Result<Side, Box<Check>>,
}

/// Start both sides (the reference's failure is the machine's: `Err`).
pub(super) fn sides(
    plan: &Plan,
    m: &MilestonePlan,
    sub: &Submission,
    opts: &Options,
    reference: &Reference,
) -> Result<Sides, Infrastructure> {
    let (numpy, mut env) = environments(opts)?;
    // Without a GPU, SciPy stands in for cupyx.scipy: found or installed only when asked for.
    if !on_gpu(opts) && imports_cupyx_scipy(&sub.python) {
        env = arrays::with_scipy(&env).map_err(|e| {
            Infrastructure(format!(
                "the submission imports cupyx.scipy, for which SciPy stands in without a GPU, \
                 and SciPy cannot be had here: {e}"
            ))
        })?;
    }
    let startup = Duration::from_secs_f64(plan.timeouts.import_s.max(30.0));
    let mut file = reference
        .python
        .clone()
        .ok_or_else(|| Infrastructure("the rubric's reference is not a Python file".into()))?;
    // Imported as a module whatever the file's own name (`reference-preprocess.py`).
    file.name = "cugrade_reference.py".into();
    let ref_name = m.reference_kernel.clone();
    let reference = match start(opts, &numpy, vec![file], &ref_name, false, startup) {
        Ok(s) => s,
        Err(NotStarted::Machine(m)) => return Err(Infrastructure(m)),
        Err(NotStarted::Student(c)) => return Err(Infrastructure(c.message)),
    };
    let student = match start(opts, &env, sub.python.clone(), &m.kernel, true, startup) {
        Ok(s) => Ok(s),
        Err(NotStarted::Student(c)) => Err(c),
        // The student's process is never trusted about whose fault this is (it may exit,
        // hang, fork, or write a frame that claims a broken NumPy): the same start without
        // the student's files decides.
        Err(NotStarted::Machine(said)) => match probe(opts, &env, &m.kernel, startup) {
            Some(machine) => return Err(Infrastructure(machine)),
            None => Err(Box::new(did_not_start(&m.kernel, &said))),
        },
    };
    Ok(Sides { reference, student })
}

/// The student's side started without the student's files (a module of cugrade's that defines
/// the function), once per run: `Some` says why even that fails (the machine's fault).
fn probe(opts: &Options, env: &ArrayEnv, function: &str, timeout: Duration) -> Option<String> {
    static PROBED: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    PROBED
        .get_or_init(|| {
            let file = SourceFile {
                name: "cugrade_probe.py".into(),
                text: format!("def {function}(table):\n    return None\n"),
            };
            match start(opts, env, vec![file], function, true, timeout) {
                Ok(mut side) => {
                    side.client.kill();
                    None
                }
                Err(NotStarted::Machine(m)) => Some(m),
                Err(NotStarted::Student(c)) => Some(c.message),
            }
        })
        .clone()
}

/// The check of a student whose Python process did not start while cugrade's own module did:
/// what their modules did at import (exit, hang, fork, replace NumPy or CuPy) is theirs.
fn did_not_start(function: &str, said: &str) -> Check {
    let mut said = said.trim().to_string();
    if said.len() > 2000 {
        let mut end = 2000;
        while !said.is_char_boundary(end) {
            end -= 1;
        }
        said.truncate(end);
        said.push_str(" [cut]");
    }
    Check::error(
        CheckKind::Kernel,
        format!("function {function}"),
        "the Python process did not start with the submission's modules, while it starts \
         without them on this machine: something the modules do when imported (exit, loop \
         forever, start processes, or replace a module the harness needs such as numpy or \
         cupy) stops it",
    )
    .with_hint(
        "Keep the module's top level to imports and definitions: no exit(), no endless loop, \
         no processes, and no files of your own named like a library (numpy.py, cupy.py).",
    )
    .with_details(format!("what the submission's process said: {said}"))
}

/// A failed call's check (a timeout or a crash ends the student's worker).
pub(super) fn failed_call(name: String, case: &CasePlan, f: &WorkerFailure) -> Check {
    let msg = match f {
        WorkerFailure::Timeout(d) => format!(
            "did not return within {:.0} s: an endless loop, or far too slow for this case",
            d.as_secs_f64()
        ),
        other => format!("the Python process died: {other}"),
    };
    Check::error(CheckKind::Runtime, name, msg).with_case(case.name.clone())
}

/// How long one call may take: a generous multiple of the reference's own time.
pub(super) fn call_timeout(plan: &Plan, reference_s: f64) -> Duration {
    let s = (reference_s * 50.0).max(plan.timeouts.launch_s.max(10.0));
    Duration::from_secs_f64(s.min(plan.timeouts.milestone_s.max(10.0)))
}

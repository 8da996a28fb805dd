//! A course's own CPU implementation in Python (`cpu: {python: FILE, function: NAME}`), for
//! labs cugrade has no built-in one for: `validate` cross-checks the reference kernel against
//! it, and `against: cpu` (or `cpu_parallel`) times it.
//!
//! It runs like every Python a course ships: in a sandboxed Python worker with cugrade's NumPy
//! (`worker::python`), never in the grader's process. The function is called with the
//! contract's parameters as keyword arguments (buffers as NumPy arrays shaped by their
//! `shape`, else 1-D; scalars as Python ints or floats) and writes its outputs in place, as the
//! kernel does. The harness times the call itself (the arrays' trip through the channel is not
//! the CPU's work). Single-threaded (`cpu`) sets the BLAS and OpenMP thread counts to 1.

use crate::baseline::{HostBuffer, Threads};
use crate::compile::SourceFile;
use crate::inputs::Invocation;
use crate::rubric::schema::{Direction, PythonCpu};
use crate::worker::Client;
use crate::worker::pool::Workers;
use crate::worker::python::{Call, Column, PythonStart, Started};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The name the course's file is imported as, whatever its own name.
const MODULE_FILE: &str = "cugrade_cpu.py";

/// A started worker holding the course's function.
pub struct PythonCpuRunner {
    client: Client,
    /// The file's name as the rubric gives it, for locations in messages.
    file: String,
}

/// The course's file, read relative to the rubric.
pub fn source(rubric: &Path, imp: &PythonCpu) -> Result<SourceFile, String> {
    let path = rubric.parent().unwrap_or(Path::new(".")).join(&imp.python);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "cannot read the CPU implementation {} ({e})",
            path.display()
        )
    })?;
    Ok(SourceFile {
        name: MODULE_FILE.into(),
        text,
    })
}

impl PythonCpuRunner {
    /// Start a Python worker on the course's file (`rubric` names the folder it is relative
    /// to) and find the function in it.
    pub fn start(
        rubric: &Path,
        imp: &PythonCpu,
        threads: Threads,
        protected: &[PathBuf],
    ) -> Result<PythonCpuRunner, String> {
        let label = format!("CPU `{}` in {}", imp.function, imp.python);
        let file = source(rubric, imp)?;
        let numpy = crate::compile::arrays::numpy()?;
        let mut client = Workers::emulator(protected).python(&numpy.read_dirs)?;
        let mut env = numpy.env.clone();
        if threads == Threads::Single {
            for k in [
                "OMP_NUM_THREADS",
                "OPENBLAS_NUM_THREADS",
                "MKL_NUM_THREADS",
                "NUMEXPR_NUM_THREADS",
            ] {
                env.push((k.into(), "1".into()));
            }
        }
        let start = PythonStart {
            python: numpy.python.clone(),
            files: vec![file],
            modules: vec!["cugrade_cpu".into()],
            function: imp.function.clone(),
            sites: numpy.sites.clone(),
            stand_in: false,
            cupy: false,
            env,
        };
        let named = |m: &str| m.replace(MODULE_FILE, &imp.python);
        match client.python_start(&start, Duration::from_secs(60)) {
            Ok(Started::Ready { .. }) => Ok(PythonCpuRunner {
                client,
                file: imp.python.clone(),
            }),
            Ok(Started::Machine(e)) => {
                Err(format!("{label}: NumPy does not import: {}", e.message))
            }
            Ok(Started::NoFunction(errors)) => Err(match errors.first() {
                Some(e) => format!(
                    "{label}: the file does not import{}: {}",
                    e.line
                        .map(|l| format!(" ({}:{l})", imp.python))
                        .unwrap_or_default(),
                    named(&e.message),
                ),
                None => format!("{label}: the file defines no function `{}`", imp.function),
            }),
            Err(f) => Err(format!(
                "{label}: the Python worker did not start: {f}\n{}",
                client.output().text()
            )),
        }
    }

    /// One call on `inv` (its scalars and every buffer): the function's time in ms and every
    /// buffer as the function left it, by name, as a CPU implementation's arguments.
    pub fn call(
        &mut self,
        inv: &Invocation,
        timeout: Duration,
    ) -> Result<(f64, crate::baseline::HostArgs), String> {
        let (call, blobs) = request(inv);
        let refs: Vec<&[u8]> = blobs.iter().map(Vec::as_slice).collect();
        let outputs: Vec<&crate::inputs::Buffer> =
            inv.buffers.iter().filter(|b| b.dir.is_output()).collect();
        let (ms, got) = match self.client.python_cpu_call(&call, &refs, timeout) {
            Ok(Ok(a)) => (a.ms, a.outputs),
            Ok(Err(e)) => {
                let at = match (&e.file, e.line) {
                    (Some(_), Some(l)) => format!(" at {}:{l}", self.file),
                    _ => String::new(),
                };
                return Err(format!(
                    "it raised{at}: {}",
                    e.message.replace(MODULE_FILE, &self.file)
                ));
            }
            Err(f) => return Err(format!("its worker failed: {f}")),
        };
        let mut args = crate::baseline::HostArgs::default();
        for (b, bytes) in outputs.iter().zip(got) {
            // Poison (NaN) in, the same poison out: the function rebound the name.
            let poisoned = || {
                crate::inputs::decode(&bytes, b.elem)
                    .iter()
                    .all(|x| x.is_nan())
            };
            if b.dir == Direction::Out && b.elem.is_float() && !bytes.is_empty() && poisoned() {
                return Err(format!(
                    "it left its output `{}` as it was given (poisoned): write into the array in place (`{}[:] = ...`), not into a new one",
                    b.name, b.name
                ));
            }
            if bytes.len() != b.bytes() {
                return Err(format!(
                    "its output `{}` came back with {} bytes, not {}",
                    b.name,
                    bytes.len(),
                    b.bytes()
                ));
            }
            args.buffers
                .insert(b.name.clone(), HostBuffer::from_bytes(b.elem, &bytes));
        }
        Ok((ms, args))
    }
}

/// The call for `inv`: every buffer a column (its bytes a blob, in order), the scalars, and
/// the outputs to send back.
fn request(inv: &Invocation) -> (Call, Vec<Vec<u8>>) {
    let mut call = Call::default();
    let mut blobs: Vec<Vec<u8>> = Vec::new();
    for b in &inv.buffers {
        call.columns.push(Column {
            name: b.name.clone(),
            dtype: b.elem.numpy_code().into(),
            shape: b.shape.clone().unwrap_or_else(|| vec![b.len]),
        });
        // A described input (the speed estimate's) is drawn in full for the CPU.
        blobs.push(match &b.fill {
            Some(f) if b.data.is_empty() => f.all(),
            _ => b.data.clone(),
        });
    }
    call.cpu = Some(
        inv.buffers
            .iter()
            .filter(|b| b.dir.is_output())
            .map(|b| b.name.clone())
            .collect(),
    );
    // Scalars in parameter order, as the launch passes them: a float stays a float.
    let values = inv.args.iter().filter_map(|a| match a {
        crate::backend::Arg::Value(v) => Some(v),
        _ => None,
    });
    for ((k, v), pv) in inv.scalars.iter().zip(values) {
        use crate::backend::ParamValue as P;
        let value = match pv {
            P::F32(_) | P::F64(_) => serde_json::json!(v),
            _ => serde_json::json!(*v as i64),
        };
        call.scalars.insert(k.clone(), value);
    }
    (call, blobs)
}

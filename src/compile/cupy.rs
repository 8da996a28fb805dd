//! CuPy submissions: kernels defined in `.py` files as `cp.RawKernel` / `cp.RawModule` (CUDA
//! C++ in a string) or `cp.ElementwiseKernel` / `cp.ReductionKernel` (CuPy's own kernel
//! language). They are found by importing the modules in the sandboxed compile worker with
//! cugrade's `cupy` stand-in first on `sys.path` ([`extract`], `worker::scripts`): no GPU and no
//! real CuPy is needed, and student Python never runs in the grader.
//!
//! What was found becomes CUDA C++ with `#line` directives naming the Python file and the line
//! of the string that holds each piece ([`kernel_source`]): a RawKernel's source as it is, an
//! Elementwise or Reduction kernel through the code CuPy's semantics define ([`translate`]),
//! with the contract's parameters. NVRTC then compiles it like a `.cu` file (in the compile
//! worker too), so NVRTC's errors and the PTX's `.loc` lines, and with them every finding,
//! name `vector_add.py:LINE`.
//!
//! Which `.py` files are CuPy and which are Numba ([`python_language`]): a manifest's `lang:`
//! decides for all of them; otherwise a file importing `cupy` (and not `numba`) is CuPy, one
//! importing `numba` (and not `cupy`) is Numba, one importing both is read by both, and one
//! importing neither is a helper module both may import.

pub mod translate;

use super::SourceFile;
use crate::rubric::schema::Contract;
use crate::worker::scripts;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub use crate::submission::languages::{PyLang, python_language};

/// Where a source string sits in the submission: `exact` when line 1 of the string is `line`;
/// `col`, the column (1-based, in characters) where the string's value starts on that line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct At {
    pub file: Option<String>,
    pub line: Option<u32>,
    #[serde(default)]
    pub exact: bool,
    #[serde(default)]
    pub col: Option<u32>,
}

/// One kernel definition the driver recorded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Definition {
    /// `raw_kernel`, `raw_module`, `elementwise` or `reduction`.
    pub kind: String,
    /// The kernel's name argument (a RawKernel's entry, an ElementwiseKernel's `name`).
    #[serde(default)]
    pub name: Option<String>,
    /// Where it was created.
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub line: Option<u32>,
    /// Module-level Python names bound to it (or, for a RawModule, to its functions).
    #[serde(default)]
    pub variables: Vec<String>,
    /// RawModule: Python name of a `get_function` result → the function's name.
    #[serde(default)]
    pub aliases: std::collections::BTreeMap<String, String>,
    /// RawModule: names passed to `get_function`.
    #[serde(default)]
    pub functions: Vec<String>,
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub code_at: Option<At>,
    #[serde(default)]
    pub in_params: Option<String>,
    #[serde(default)]
    pub out_params: Option<String>,
    #[serde(default)]
    pub operation: Option<String>,
    #[serde(default)]
    pub operation_at: Option<At>,
    #[serde(default)]
    pub map_expr: Option<String>,
    #[serde(default)]
    pub map_expr_at: Option<At>,
    #[serde(default)]
    pub reduce_expr: Option<String>,
    #[serde(default)]
    pub reduce_expr_at: Option<At>,
    #[serde(default)]
    pub post_map_expr: Option<String>,
    #[serde(default)]
    pub post_map_expr_at: Option<At>,
    #[serde(default)]
    pub identity: Option<String>,
    #[serde(default)]
    pub reduce_type: Option<String>,
    #[serde(default)]
    pub preamble: Option<String>,
    #[serde(default)]
    pub preamble_at: Option<At>,
    #[serde(default)]
    pub loop_prep: Option<String>,
    #[serde(default)]
    pub loop_prep_at: Option<At>,
    #[serde(default)]
    pub after_loop: Option<String>,
    #[serde(default)]
    pub after_loop_at: Option<At>,
    #[serde(default)]
    pub options: Vec<String>,
}

/// An exception while a module was imported.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ImportError {
    pub file: Option<String>,
    pub line: Option<u32>,
    pub message: String,
    #[serde(default)]
    pub details: String,
    /// Top-level code launched a kernel (or used an array) without a GPU: expected, not the
    /// student's error, unless no kernel was defined before it.
    #[serde(default)]
    pub no_gpu: bool,
}

/// What the driver found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Extracted {
    pub definitions: Vec<Definition>,
    pub errors: Vec<ImportError>,
}

/// The interpreter the worker runs and what it may read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interpreter {
    pub python: PathBuf,
    /// NumPy for top-level array code (the Numba wheels' copy, when installed).
    pub numpy_site: Option<PathBuf>,
    pub read_dirs: Vec<PathBuf>,
}

/// `python3` (or `$CUGRADE_PYTHON`), with NumPy from cugrade's Numba cache when it is there.
pub fn interpreter() -> Result<Interpreter, String> {
    let (python, mut read_dirs) = super::toolchain::python_interpreter()?;
    let numba = super::toolchain::numba_dir();
    let numpy_site = numba.join("numpy").is_dir().then_some(numba);
    read_dirs.extend(numpy_site.iter().cloned());
    Ok(Interpreter {
        python,
        numpy_site,
        read_dirs,
    })
}

/// In the worker: write the sources and the stand-in, run the driver, read its answer. `Err`
/// is a failure of the machinery (not the student's), with what Python printed.
pub fn extract(
    tool: &Interpreter,
    files: &[SourceFile],
    entries: &[String],
    temp: &Path,
) -> Result<Extracted, String> {
    let src = temp.join("cupy-src");
    let stub = temp.join("cupy-stub");
    let io = |e: std::io::Error| format!("cannot prepare the CuPy import: {e}");
    std::fs::create_dir_all(&src).map_err(io)?;
    // `cupyx` beside it: every module imports, `cupyx.jit` kernels are refused at their line.
    scripts::write_stand_in(&stub, true).map_err(io)?;
    super::write_sources(files, &src).map_err(|e| match e {
        super::WriteError::Name(m) => m,
        super::WriteError::Io(e) => io(e),
    })?;
    let request = serde_json::json!({
        "src": src,
        "stub": stub,
        "numpy_site": tool.numpy_site,
        "files": files.iter().map(|f| &f.name).collect::<Vec<_>>(),
        "entries": entries,
    });
    let req_path = temp.join("cupy-request.json");
    std::fs::write(&req_path, request.to_string()).map_err(io)?;
    let answer_path = temp.join("cupy-answer.json");
    let log_path = temp.join("cupy-output.txt");
    let status = scripts::driver(
        &tool.python,
        &["-I", "-B"],
        temp,
        "cugrade_cupy_driver.py",
        scripts::CUPY_DRIVER,
        &[&req_path, &answer_path],
        &log_path,
    )
    .map_err(io)?
    .run()
    .map_err(|e| format!("cannot run {}: {e}", tool.python.display()))?
    .status;
    let printed = String::from_utf8_lossy(
        &crate::worker::process::Captured::from_file(&log_path, 16 * 1024).bytes,
    )
    .into_owned();
    let text = match std::fs::read(&answer_path) {
        Ok(b) if b.len() <= 64 << 20 => String::from_utf8_lossy(&b).into_owned(),
        Ok(_) => return Err("the CuPy driver's answer is too large".into()),
        Err(_) => {
            return Err(format!(
                "Python exited ({status}) without an answer:\n{printed}"
            ));
        }
    };
    serde_json::from_str(&text)
        .map_err(|e| format!("malformed answer from the CuPy driver: {e}\n{printed}"))
}

/// The definition that provides lab kernel `kernel`: by its CUDA or CuPy name first, then by
/// the Python name it is bound to. The `String` is the entry's name in the compiled code.
pub fn find<'a>(defs: &'a [Definition], kernel: &str) -> Option<(&'a Definition, String)> {
    let by_name = defs.iter().find(|d| match d.kind.as_str() {
        "raw_module" => {
            d.functions.iter().any(|f| f == kernel)
                || d.code.as_deref().is_some_and(|c| defines(c, kernel))
        }
        _ => d.name.as_deref() == Some(kernel),
    });
    if let Some(d) = by_name {
        return Some((d, kernel.to_string()));
    }
    defs.iter().find_map(|d| match d.kind.as_str() {
        "raw_module" => d.aliases.get(kernel).map(|f| (d, f.clone())),
        _ if d.variables.iter().any(|v| v == kernel) => {
            Some((d, d.name.clone().unwrap_or_else(|| kernel.to_string())))
        }
        _ => None,
    })
}

/// Whether CUDA source `code` declares a function named `name` (`name(` after `void`).
fn defines(code: &str, name: &str) -> bool {
    let re = regex::Regex::new(&format!(r"\bvoid\s+{}\s*\(", regex::escape(name)))
        .expect("escaped regex");
    re.is_match(code)
}

/// `#line` for a located string (NVRTC's errors and the PTX's `.loc` then name the `.py`).
pub(crate) fn line_directive(at: Option<&At>, fallback: (&Option<String>, Option<u32>)) -> String {
    let (file, line) = match at {
        Some(At {
            file: Some(f),
            line: Some(l),
            ..
        }) => (f.clone(), *l),
        _ => match fallback {
            (Some(f), Some(l)) => (f.clone(), l),
            _ => return String::new(),
        },
    };
    format!(
        "#line {line} \"{}\"\n",
        file.replace(['"', '\\', '\n'], "_")
    )
}

/// [`line_directive`] for a string whose text follows it at the start of a line: with the
/// string's first line moved right to the column it starts at in the `.py` file, so that
/// NVRTC's columns (and the caret under the student's line) are the file's, not the string's
/// (`vector_add = cp.ElementwiseKernel(..., "c = a + bb", ...)`: `bb` is in column 14 of
/// the line, not 9). Most columns a located string may be moved: a line that long is shown cut
/// anyway.
pub(crate) fn located(at: Option<&At>, fallback: (&Option<String>, Option<u32>)) -> String {
    let mut s = line_directive(at, fallback);
    let col = at
        .filter(|a| a.exact && a.file.is_some() && a.line.is_some())
        .and_then(|a| a.col)
        .filter(|&c| c > 1 && c <= 4096);
    if let (Some(c), false) = (col, s.is_empty()) {
        s.push_str(&" ".repeat(c as usize - 1));
    }
    s
}

/// A translation that cannot be done: the student's error, at the Python line.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub file: Option<String>,
    pub line: Option<u32>,
    pub message: String,
}

/// The CUDA C++ that implements lab kernel `kernel` from `def`, named `FILE.py (KERNEL)`.
pub fn kernel_source(
    def: &Definition,
    entry: &str,
    kernel: &str,
    contract: &Contract,
) -> Result<SourceFile, Refused> {
    let file = def.file.clone().unwrap_or_else(|| "cupy".into());
    let text = match def.kind.as_str() {
        "raw_kernel" | "raw_module" => {
            let code = def.code.clone().unwrap_or_default();
            let mut text = String::new();
            if entry != kernel {
                // The Python name is the lab's; the CUDA function has another name.
                text.push_str(&format!("#define {entry} {kernel}\n"));
            }
            text.push_str(&located(def.code_at.as_ref(), (&def.file, def.line)));
            text.push_str(&code);
            text.push('\n');
            text
        }
        "elementwise" => translate::elementwise(def, kernel, contract)?,
        "reduction" => translate::reduction(def, kernel, contract)?,
        other => {
            return Err(Refused {
                file: def.file.clone(),
                line: def.line,
                message: format!("unknown CuPy definition `{other}`"),
            });
        }
    };
    Ok(SourceFile {
        name: format!("{file} ({kernel})"),
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_by_import_and_manifest() {
        use crate::rubric::schema::Language;
        assert_eq!(python_language("import cupy as cp\n", None), PyLang::Cupy);
        assert_eq!(
            python_language("from numba import cuda\n", None),
            PyLang::Numba
        );
        assert_eq!(
            python_language(
                "import numpy as np\nimport cupy\nfrom numba import cuda\n",
                None
            ),
            PyLang::Both
        );
        assert_eq!(
            python_language("# import cupy\nx = 1\n", None),
            PyLang::Neither
        );
        assert_eq!(
            python_language("from numba import cuda\n", Some(Language::Cupy)),
            PyLang::Cupy
        );
    }

    #[test]
    fn kernels_are_found_by_name_then_variable() {
        let defs = vec![
            Definition {
                kind: "raw_kernel".into(),
                name: Some("vadd".into()),
                variables: vec!["vector_add".into()],
                ..Default::default()
            },
            Definition {
                kind: "raw_module".into(),
                code: Some("extern \"C\" __global__ void reduce_naive(float* x) {}".into()),
                aliases: [("shared".to_string(), "reduce_shared".to_string())].into(),
                ..Default::default()
            },
        ];
        assert_eq!(find(&defs, "vector_add").map(|x| x.1), Some("vadd".into()));
        assert_eq!(
            find(&defs, "reduce_naive").map(|x| x.1),
            Some("reduce_naive".into())
        );
        assert_eq!(
            find(&defs, "shared").map(|x| x.1),
            Some("reduce_shared".into())
        );
        assert!(find(&defs, "other").is_none());
    }
}

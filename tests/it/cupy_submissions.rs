//! CuPy submissions end to end through the binary (`cugrade check --backend emu`): the ways a
//! course's CuPy code defines kernels, findings at the Python line, student Python confined
//! by the sandbox while it is imported, and a rubric's `languages`. The lab examples
//! (`submissions-example/*/cupy_*`) are graded by tests/it/labs_examples.rs.
//!
//! Needs NVRTC (ci/with-nvrtc) and `python3`; neither a GPU nor CuPy.

use crate::support::{
    correct, first_failure, grade_files as grade, lab_rubric as rubric, milestone, nvrtc as ready,
};
use serde_json::Value;

fn checks(r: &Value, id: &str) -> Vec<Value> {
    milestone(r, id)["checks"].as_array().unwrap().clone()
}

#[test]
fn course_styles_of_cupy_kernels_grade_as_correct() {
    if !ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let vadd = rubric(d.path(), "vector-add", "");
    let styles: &[(&str, &[(&str, &str)])] = &[
        (
            "RawKernel named otherwise in CUDA, bound to the lab's name in Python",
            &[(
                "k.py",
                "import cupy as cp\nimport numpy as np\n\n\
                 vector_add = cp.RawKernel(r'''\n\
                 extern \"C\" __global__ void vadd(const float* a, const float* b, float* c, int n) {\n\
                 \x20 for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)\n\
                 \x20   c[i] = a[i] + b[i];\n\
                 }\n''', 'vadd')\n",
            )],
        ),
        (
            "source built in a helper module, kernel in a package",
            &[
                ("lab/__init__.py", ""),
                (
                    "lab/source.py",
                    "CODE = '''\nextern \"C\" __global__ void vector_add(const float* a, const float* b, float* c, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) c[i] = a[i] + b[i];\n}\n'''\n",
                ),
                (
                    "lab/kernels.py",
                    "import cupy\nfrom lab.source import CODE\n\nvector_add = cupy.RawKernel(CODE, 'vector_add')\n",
                ),
            ],
        ),
        (
            "ElementwiseKernel with explicit dtypes, a preamble and a raw input",
            &[(
                "ew.py",
                "from cupy import ElementwiseKernel\n\n\
                 vector_add = ElementwiseKernel(\n\
                 \x20   'float32 a, raw float32 b', 'float32 c',\n\
                 \x20   'c = add2(a, b[i])',\n\
                 \x20   'vector_add', preamble='__device__ float add2(float x, float y) { return x + y; }')\n",
            )],
        ),
    ];
    let mut failures = vec![];
    for (what, files) in styles {
        let r = grade(&vadd, files);
        if let Err(e) = correct(&r, "vector_add") {
            failures.push(format!("{what}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn findings_name_the_python_line() {
    if !ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let vadd = rubric(d.path(), "vector-add", "");
    // An output whose dtype is not the contract's: at the line that creates the kernel.
    let r = grade(
        &vadd,
        &[(
            "k.py",
            "import cupy as cp\n\nvector_add = cp.ElementwiseKernel('T a, T b', 'float64 c', 'c = a + b', 'vector_add')\n",
        )],
    );
    let f = first_failure(&r, "vector_add");
    assert_eq!(f["location"], "k.py:3", "{f}");
    assert!(f["message"].as_str().unwrap().contains("float64 c"), "{f}");
    // A syntax error in the module: at its line.
    let r = grade(
        &vadd,
        &[("k.py", "import cupy as cp\n\ndef broken(:\n    pass\n")],
    );
    let f = first_failure(&r, "vector_add");
    assert!(
        f["message"].as_str().unwrap().contains("SyntaxError"),
        "{f}"
    );
    assert_eq!(f["location"], "k.py:3", "{f}");
    // NVRTC's error inside a RawKernel string: at the Python line of the offending CUDA line.
    let r = grade(
        &vadd,
        &[(
            "k.py",
            "import cupy as cp\nvector_add = cp.RawKernel('''\nextern \"C\" __global__ void vector_add(const float* a, const float* b, float* c, int n) {\n  c[0] = undefined_name;\n}''', 'vector_add')\n",
        )],
    );
    let f = first_failure(&r, "vector_add");
    assert!(f["location"].as_str().unwrap().starts_with("k.py:4"), "{f}");
    assert_eq!(f["snippet"]["text"], "  c[0] = undefined_name;", "{f}");
}

/// NVRTC's column inside a kernel string is the column in the `.py` line, wherever the string
/// starts on it (issue 32: an ElementwiseKernel's caret was the operation's own offset): an
/// operation after other arguments and a non-ASCII character, a RawKernel whose code starts on
/// the quote's line, a ReductionKernel's map expression.
#[test]
fn a_compile_errors_column_is_the_python_lines() {
    if !ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let column = |line: &str, word: &str| line[..line.find(word).unwrap()].chars().count() + 1;
    let vadd = rubric(d.path(), "vector-add", "");
    let line = "x = 'é'; vector_add = cp.ElementwiseKernel('float32 a, float32 b', 'float32 c', 'c = a + bb', 'vector_add')";
    let r = grade(
        &vadd,
        &[("k.py", &format!("import cupy as cp\n\n{line}\n"))],
    );
    let f = first_failure(&r, "vector_add");
    assert_eq!(
        f["location"],
        format!("k.py:3:{}", column(line, "bb")),
        "{f}"
    );
    let line = "vector_add = cp.RawKernel(r'''extern \"C\" __global__ void vector_add(const float* a, const float* b, float* c, int n) { c[0] = oops; }''', 'vector_add')";
    let r = grade(&vadd, &[("k.py", &format!("import cupy as cp\n{line}\n"))]);
    let f = first_failure(&r, "vector_add");
    assert_eq!(
        f["location"],
        format!("k.py:2:{}", column(line, "oops")),
        "{f}"
    );
    let red = rubric(d.path(), "reduction", "");
    let line = "reduce_naive = cp.ReductionKernel('float32 x', 'float32 y', 'x * qq', 'a + b', 'y = a', '0', 'reduce_naive')";
    let r = grade(&red, &[("k.py", &format!("import cupy as cp\n{line}\n"))]);
    let f = first_failure(&r, "reduce_naive");
    assert_eq!(
        f["location"],
        format!("k.py:2:{}", column(line, "qq")),
        "{f}"
    );
}

#[test]
fn student_python_is_confined_while_it_is_imported() {
    if !ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let secret = d.path().join("secret.txt");
    std::fs::write(&secret, "TOP-SECRET-42").unwrap();
    let vadd = rubric(d.path(), "vector-add", "");
    let code = format!(
        "import cupy as cp\nimport socket\n\
         leak = open({:?}).read()\n\
         vector_add = cp.RawKernel('extern \"C\" __global__ void vector_add(const float* a, const float* b, float* c, int n) {{}}', leak)\n",
        secret.display().to_string()
    );
    let r = grade(&vadd, &[("k.py", &code)]);
    let text = r.to_string();
    assert!(!text.contains("TOP-SECRET-42"), "the secret leaked: {text}");
    let f = first_failure(&r, "vector_add");
    assert!(
        f["message"].as_str().unwrap().contains("Error"),
        "the import must fail: {f}"
    );
}

#[test]
fn a_rubric_may_refuse_cupy() {
    if !ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let only_cuda = rubric(d.path(), "vector-add", "languages: [cuda, numba]");
    let r = grade(
        &only_cuda,
        &[(
            "k.py",
            "import cupy as cp\nvector_add = cp.ElementwiseKernel('T a, T b', 'T c', 'c = a + b', 'vector_add')\n",
        )],
    );
    let c = checks(&r, "vector_add");
    assert!(
        c.iter()
            .any(|c| c["name"] == "language cupy" && c["status"] == "fail"),
        "{c:?}"
    );
}

#[test]
fn numba_kernels_beside_cupy_host_arrays_still_compile() {
    if !ready() {
        return;
    }
    if let Err(e) = cugrade::compile::toolchain::numba() {
        eprintln!("SKIPPED: {e}");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let vadd = rubric(d.path(), "vector-add", "");
    // A file importing both: Numba compiles the kernel (CuPy's import is cugrade's stand-in),
    // the CuPy driver finds no CuPy kernel in it, and the host code under main never runs.
    let r = grade(
        &vadd,
        &[(
            "k.py",
            "import cupy as cp\nfrom numba import cuda\n\n\
             @cuda.jit\n\
             def vector_add(a, b, c, n):\n\
             \x20   i = cuda.grid(1)\n\
             \x20   if i < n:\n\
             \x20       c[i] = a[i] + b[i]\n\n\
             if __name__ == '__main__':\n\
             \x20   x = cp.arange(4, dtype=cp.float32)\n\
             \x20   vector_add[1, 4](x, x, x, 4)\n",
        )],
    );
    correct(&r, "vector_add").unwrap();
}

/// Issue 32: a CuPy kernel file importing `cupyx.scipy.ndimage` (or another cupyx module) scored
/// 0/100 with a `ModuleNotFoundError` traceback through cugrade's driver. Reading kernel
/// definitions runs nothing on data, so every cupyx module imports; a kernel written with
/// `cupyx.jit` is not graded, and that is said at the student's line, without cugrade's files.
#[test]
fn cupyx_imports_do_not_hide_the_kernels_and_cupyx_jit_is_named() {
    if !ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let vadd = rubric(d.path(), "vector-add", "");
    let raw = std::fs::read_to_string(
        crate::support::root().join("submissions-example/vector-add/cupy_raw/vector_add.py"),
    )
    .unwrap();
    let imports = raw.replacen(
        "import cupy as cp\n",
        "import cupy as cp\nimport cupyx\nimport cupyx.scipy.ndimage as ndi\n\
         from cupyx.scipy import special\nfrom cupyx.profiler import benchmark\n\
         SMOOTH = ndi.uniform_filter\nPINNED = cupyx.zeros_pinned((4,))\n",
        1,
    );
    assert_ne!(raw, imports, "the cupy_raw example changed");
    let r = grade(&vadd, &[("vector_add.py", &imports)]);
    correct(&r, "vector_add").unwrap();

    let jit = "import cupy as cp\nfrom cupyx import jit\n\n\n@jit.rawkernel()\n\
               def vector_add(a, b, c, n):\n    i = jit.grid(1)\n    if i < n:\n        c[i] = a[i] + b[i]\n";
    let r = grade(&vadd, &[("vector_add.py", jit)]);
    let f = first_failure(&r, "vector_add");
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.contains("`vector_add` is a cupyx.jit kernel, which cugrade does not grade"),
        "{f}"
    );
    assert!(msg.contains("cp.RawKernel"), "{f}");
    assert_eq!(f["location"], "vector_add.py:5", "{f}");
    let text = r.to_string();
    for ours in ["cugrade_cupy_driver", "cupy-stub", "<frozen"] {
        assert!(!text.contains(ours), "`{ours}` in {r}");
    }
}

//! CuPy submissions end to end through the binary (`cugrade check --backend emu`): the ways a
//! course's CuPy code defines kernels, findings at the Python line, student Python confined
//! by the sandbox while it is imported, and a rubric's `languages`. The lab examples
//! (`submissions-example/*/cupy_*`) are graded by tests/labs_examples.rs.
//!
//! Needs NVRTC (ci/with-nvrtc) and `python3`; neither a GPU nor CuPy.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn ready() -> bool {
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("SKIPPED: libnvrtc.so.13 not found; run through ci/with-nvrtc");
        return false;
    }
    true
}

/// `rubrics/NAME.yaml` with its reference beside it and `extra` appended.
fn rubric(dir: &Path, name: &str, extra: &str) -> PathBuf {
    let text = std::fs::read_to_string(root().join(format!("rubrics/{name}.yaml"))).unwrap();
    let file = format!("{name}.cu");
    std::fs::copy(
        root().join("reference-kernels").join(&file),
        dir.join(format!("reference-{file}")),
    )
    .unwrap();
    let text = text.replace(
        &format!("../reference-kernels/{file}"),
        &format!("reference-{file}"),
    );
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, format!("{text}\n{extra}\n")).unwrap();
    path
}

fn grade(rubric: &Path, files: &[(&str, &str)]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("student");
    for (name, text) in files {
        let p = sub.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let json = dir.path().join("result.json");
    let out = Command::new(env!("CARGO_BIN_EXE_cugrade"))
        .args(["check", "--backend", "emu", "--seed", "3", "--rubric"])
        .arg(rubric)
        .arg(&sub)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&json).unwrap_or_else(|_| {
        panic!(
            "no result.json: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    serde_json::from_str(&text).unwrap()
}

fn checks(r: &Value, id: &str) -> Vec<Value> {
    r["milestones"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .unwrap()["checks"]
        .as_array()
        .unwrap()
        .clone()
}

fn correct(r: &Value, id: &str) -> Result<(), String> {
    let bad: Vec<String> = checks(r, id)
        .iter()
        .filter(|c| c["kind"] != "performance" && c["status"] != "pass")
        .map(|c| format!("{}: {} {}", c["name"], c["message"], c["details"]))
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(bad.join("\n"))
    }
}

fn first_failure(r: &Value, id: &str) -> Value {
    checks(r, id)
        .into_iter()
        .find(|c| c["status"] == "fail" || c["status"] == "error")
        .unwrap_or_else(|| panic!("no failing check in {id}: {r}"))
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

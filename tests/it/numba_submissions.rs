//! Numba submissions end to end through the binary (`cugrade check --backend emu`): the styles
//! a course's exercises are written in, student Python confined by the sandbox while it is
//! imported, findings at the Python line, and a rubric's `languages`.
//!
//! Numba comes from cugrade's cache (`ci/with-nvrtc` installs it; cugrade would install it on
//! first use). Without NVRTC the tests skip with a message, like the other lab tests.

use crate::support::{
    correct, cugrade, first_failure, grade_files as grade, lab_rubric as rubric, milestone,
    numba as ready, root,
};
use serde_json::Value;

const STYLES: &[(&str, &[(&str, &str)])] = &[
    (
        "explicit signature, grid-stride loop, numpy scalars",
        &[(
            "vadd.py",
            "import numpy as np\nfrom numba import cuda, float32\n\n\
             @cuda.jit('void(float32[:], float32[:], float32[:], int32)')\n\
             def vector_add(a, b, c, n):\n\
             \x20   start = cuda.grid(1)\n\
             \x20   stride = cuda.gridsize(1)\n\
             \x20   for i in range(start, n, stride):\n\
             \x20       c[i] = np.float32(a[i]) + b[i]\n",
        )],
    ),
    (
        "blockIdx/threadIdx, a device function from another module, host code guarded by main",
        &[
            (
                "lab/ops.py",
                "from numba import cuda\n\n@cuda.jit(device=True)\ndef add(x, y):\n    return x + y\n",
            ),
            (
                "lab/kernels.py",
                "from numba import cuda\nfrom lab.ops import add\n\n\
                 @cuda.jit\n\
                 def vector_add(a, b, c, n):\n\
                 \x20   i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x\n\
                 \x20   if i >= n:\n\
                 \x20       return\n\
                 \x20   c[i] = add(a[i], b[i])\n\n\
                 if __name__ == '__main__':\n\
                 \x20   import numpy as np\n\
                 \x20   x = cuda.to_device(np.ones(10, dtype=np.float32))\n",
            ),
            ("lab/__init__.py", ""),
        ],
    ),
    (
        "local arrays, cuda.fma, float64 scratch, an early return",
        &[(
            "vadd.py",
            "from numba import cuda, float32, float64\n\n\
             @cuda.jit(fastmath=False)\n\
             def vector_add(a, b, c, n):\n\
             \x20   i = cuda.grid(1)\n\
             \x20   if i >= n:\n\
             \x20       return\n\
             \x20   pair = cuda.local.array(2, float32)\n\
             \x20   pair[0] = a[i]\n\
             \x20   pair[1] = b[i]\n\
             \x20   wide = float64(pair[0])\n\
             \x20   c[i] = cuda.fma(pair[0], float32(1.0), pair[1]) if wide == wide else 0.0\n",
        )],
    ),
    (
        "a file named like a module the compiler uses",
        &[(
            "math.py",
            "from numba import cuda\n\n@cuda.jit\ndef vector_add(a, b, c, n):\n    i = cuda.grid(1)\n    if i < n:\n        c[i] = a[i] + b[i]\n",
        )],
    ),
    (
        "a notebook export: host code at the top level after the kernel",
        &[(
            "notebook.py",
            "from numba import cuda\nimport numpy as np\n\n\
             @cuda.jit\n\
             def vector_add(a, b, c, n):\n\
             \x20   i = cuda.grid(1)\n\
             \x20   if i < n:\n\
             \x20       c[i] = a[i] + b[i]\n\n\
             a = cuda.to_device(np.arange(4, dtype=np.float32))\n\
             print(a.copy_to_host())\n",
        )],
    ),
];

#[test]
fn course_styles_of_vector_add_are_graded_correct() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let r = rubric(dir.path(), "vector-add", "");
    let mut failures = vec![];
    for (style, files) in STYLES {
        let result = grade(&r, files);
        if let Err(e) = correct(&result, "vector_add") {
            failures.push(format!("{style}:\n{e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn softmax_with_math_shared_memory_and_a_2d_array() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let r = rubric(dir.path(), "softmax", "");
    let kernel = r#"import math
from numba import cuda, float32


@cuda.jit
def softmax_rows(x, y, rows, cols):
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    buf = cuda.shared.array(256, float32)
    m = -math.inf
    for j in range(t, cols, cuda.blockDim.x):
        m = max(m, x[row, j])
    buf[t] = m
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            buf[t] = max(buf[t], buf[t + s])
        cuda.syncthreads()
        s //= 2
    m = buf[0]
    cuda.syncthreads()
    acc = float32(0.0)
    for j in range(t, cols, cuda.blockDim.x):
        acc += math.exp(x[row, j] - m)
    buf[t] = acc
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        cuda.syncthreads()
        s //= 2
    total = buf[0]
    for j in range(t, cols, cuda.blockDim.x):
        y[row, j] = math.exp(x[row, j] - m) / total
"#;
    let result = grade(&r, &[("softmax.py", kernel)]);
    correct(&result, "softmax_rows").unwrap();
}

#[test]
fn student_python_is_confined_while_it_is_imported() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let r = rubric(dir.path(), "vector-add", "");
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "answers").unwrap();
    let attempts = [
        format!("data = open({:?}).read()\n", secret.to_string_lossy()),
        "open('/etc/passwd').read()\n".to_string(),
        "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)\n".to_string(),
        "import subprocess\nsubprocess.run(['/bin/sh', '-c', 'id'], check=True)\n".to_string(),
        "open('/tmp/cugrade-numba-escape', 'w').write('x')\n".to_string(),
    ];
    for attempt in &attempts {
        let text = format!("from numba import cuda\n{attempt}");
        let result = grade(&r, &[("k.py", &text)]);
        let c = first_failure(&result, "vector_add");
        let lines = attempt.lines().count() + 1;
        assert_eq!(c["kind"], "compile", "{attempt}: {c}");
        let at = c["location"].as_str().unwrap_or_default();
        assert!(
            at.starts_with("k.py:") && at[5..].parse::<usize>().unwrap() <= lines,
            "{attempt}: finding at {at}: {c}"
        );
        assert!(
            c["message"].as_str().unwrap().contains("Error"),
            "{attempt}: {c}"
        );
    }
    assert!(!std::path::Path::new("/tmp/cugrade-numba-escape").exists());
}

#[test]
fn typing_errors_point_at_the_python_line() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let r = rubric(dir.path(), "vector-add", "");
    let kernel = "from numba import cuda\n\n\n@cuda.jit\ndef vector_add(a, b, c, n):\n    i = cuda.grid(1)\n    vals = {}\n    vals[i] = a[i]\n    if i < n:\n        c[i] = vals[i] + b[i]\n";
    let result = grade(&r, &[("k.py", kernel)]);
    let c = first_failure(&result, "vector_add");
    assert_eq!(c["kind"], "compile", "{c}");
    assert_eq!(c["location"], "k.py:8", "{c}");
    assert!(c["message"].as_str().unwrap().contains("setitem"), "{c}");
    assert!(
        c["details"]
            .as_str()
            .unwrap()
            .starts_with("k.py:8 │     vals[i] = a[i]"),
        "{c}"
    );
    let syntax = grade(
        &r,
        &[(
            "k.py",
            "from numba import cuda\n\n@cuda.jit\ndef vector_add(a, b, c, n)\n    pass\n",
        )],
    );
    let c = first_failure(&syntax, "vector_add");
    assert_eq!(c["location"], "k.py:4", "{c}");
    assert!(
        c["message"].as_str().unwrap().starts_with("SyntaxError"),
        "{c}"
    );
}

#[test]
fn a_kernel_with_the_wrong_parameters_says_so() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let r = rubric(dir.path(), "vector-add", "");
    let kernel = "from numba import cuda\n\n@cuda.jit\ndef vector_add(a, c, n):\n    i = cuda.grid(1)\n    if i < n:\n        c[i] = a[i]\n";
    let result = grade(&r, &[("k.py", kernel)]);
    let c = first_failure(&result, "vector_add");
    assert_eq!(c["kind"], "compile", "{c}");
    assert_eq!(c["location"], "k.py:4", "{c}");
    assert_eq!(
        c["message"],
        "`vector_add` takes 3 parameters (a, c, n); the assignment passes 4: a, b, c, n",
        "{c}"
    );
}

#[test]
fn an_import_that_never_ends_is_stopped_after_one_budget_whatever_the_kernels() {
    if !ready() {
        return;
    }
    // Seven kernels at 60 s each: the import still gets its one budget (2 s here), not the
    // compile time of every kernel.
    let dir = tempfile::tempdir().unwrap();
    let r = rubric(
        dir.path(),
        "activations",
        "timeouts: {compile_s: 60, import_s: 2}",
    );
    let started = std::time::Instant::now();
    let result = grade(&r, &[("k.py", "while True:\n    pass\n")]);
    let took = started.elapsed().as_secs_f64();
    for id in ["relu", "mish", "bias_gelu"] {
        let c = first_failure(&result, id);
        let msg = c["message"].as_str().unwrap();
        assert!(
            msg.contains("did not finish importing within 2 s"),
            "{id}: {c}"
        );
        assert_eq!(c["location"].as_str(), Some("k.py"), "{c}");
    }
    assert!(took < 60.0, "took {took:.0} s");
    // A module that ends Python while it is imported says so too.
    let result = grade(&r, &[("k.py", "import os\nos._exit(3)\n")]);
    let c = first_failure(&result, "relu");
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains("did not finish importing"),
        "{c}"
    );
}

#[test]
fn a_rubric_may_refuse_numba() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let r = rubric(dir.path(), "vector-add", "languages: [cuda, ptx]");
    let kernel = "from numba import cuda\n@cuda.jit\ndef vector_add(a, b, c, n):\n    pass\n";
    let result = grade(&r, &[("k.py", kernel)]);
    assert_eq!(milestone(&result, "vector_add")["status"], "fail");
    let c = first_failure(&result, "vector_add");
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains("does not accept numba submissions (it accepts: cuda, ptx)"),
        "{c}"
    );
}

/// A Numba installation that imports but cannot compile (what NumPy 2.5 did to numba-cuda
/// 0.30.4: `module 'numpy' has no attribute 'row_stack'` on every kernel): grading stops with
/// exit 3 and says the toolchain is broken, as an error of the grading machine, never as the
/// student's compile error; and the cache's packages come before the interpreter's own.
#[test]
fn a_broken_numba_is_the_toolchains_fault_not_the_students() {
    if !ready() {
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let numba = cache.path().join("numba");
    let files: &[(&str, &str)] = &[
        ("numba/__init__.py", "from . import cuda, types\n"),
        (
            "numba/types.py",
            "class _T:\n    def __getitem__(self, k):\n        return self\n\nfloat32 = _T()\n",
        ),
        (
            "numba/cuda/__init__.py",
            "def jit(*a, **k):\n    return a[0] if a and callable(a[0]) else (lambda f: f)\n\n\
             def compile_ptx(*a, **k):\n    raise AttributeError(\"module 'numpy' has no attribute 'row_stack'\")\n",
        ),
        ("numba/cuda/compiler.py", "get_current_device = None\n"),
        ("numba/cuda/dispatcher.py", "get_current_device = None\n"),
        ("numba_cuda/__init__.py", ""),
        ("nvidia/cu13/lib/libnvvm.so.4", ""),
    ];
    for (name, text) in files {
        let p = numba.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    std::fs::write(
        numba.join(".cugrade-pins"),
        cugrade::compile::toolchain::pins_stamp(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rubric = rubric(dir.path(), "vector-add", "");
    let sub = dir.path().join("student");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(
        sub.join("vadd.py"),
        "from numba import cuda\n\n@cuda.jit\ndef vector_add(a, b, c, n):\n    i = cuda.grid(1)\n    if i < n:\n        c[i] = a[i] + b[i]\n",
    )
    .unwrap();
    // The real headers (the fake cache has none, and none is to be downloaded here).
    std::os::unix::fs::symlink(
        cugrade::compile::toolchain::headers_dir(),
        cache.path().join("headers"),
    )
    .unwrap();
    let json = dir.path().join("result.json");
    let out = cugrade()
        .args(["check", "--backend", "emu", "--seed", "3", "--rubric"])
        .arg(&rubric)
        .arg(&sub)
        .arg("--json")
        .arg(&json)
        .env("CUGRADE_NVRTC_CACHE", cache.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // Exit 3: the grading machine cannot grade; no score is written for the student.
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(!json.exists(), "{err}");
    assert!(
        err.contains("not the submission") && err.contains("row_stack"),
        "{err}"
    );
    assert!(err.contains("cugrade doctor"), "{err}");
}

/// The Python line under every Numba finding: result.json's `snippet`, the terminal and the
/// Markdown report quote `reduce.py`'s line for the racecheck finding of a reduction without
/// its `cuda.syncthreads()`.
#[test]
fn a_numba_racecheck_finding_quotes_the_python_line() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("submissions-example/reduction/numba_missing_syncthreads/reduce.py");
    let text = std::fs::read_to_string(&src).unwrap();
    let rubric = rubric(dir.path(), "reduction", "");
    let sub = dir.path().join("student");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("reduce.py"), &text).unwrap();
    let (json, md) = (dir.path().join("r.json"), dir.path().join("r.md"));
    let out = cugrade()
        .args(["check", "--backend", "emu", "--seed", "3", "--rubric"])
        .arg(&rubric)
        .arg(&sub)
        .arg("--json")
        .arg(&json)
        .arg("--markdown")
        .arg(&md)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let terminal = String::from_utf8_lossy(&out.stdout);
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let races: Vec<&Value> = milestone(&r, "reduce_shared")["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["cause"] == "racecheck"
                || c["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("racecheck"))
        })
        .collect();
    assert!(!races.is_empty(), "no racecheck finding: {r}");
    let lines: Vec<&str> = text.lines().collect();
    for c in &races {
        let loc = c["location"].as_str().unwrap();
        assert!(loc.starts_with("reduce.py:"), "{c}");
        let line: usize = loc.split(':').nth(1).unwrap().parse().unwrap();
        let snippet = &c["snippet"];
        assert_eq!(snippet["line"], line, "{c}");
        assert_eq!(
            snippet["text"].as_str(),
            Some(lines[line - 1].trim_end()),
            "{c}"
        );
        // Shown to the student, with its line number, on the terminal and in Markdown.
        let quoted = lines[line - 1].trim();
        assert!(terminal.contains(quoted), "{quoted}:\n{terminal}");
        let markdown = std::fs::read_to_string(&md).unwrap();
        assert!(markdown.contains(quoted), "{quoted}:\n{markdown}");
    }
}

/// A module that ends the Python process while it is imported leaves the compiler without an
/// answer: cugrade's own kernel still compiles in a fresh worker, so this is the submission's
/// compile finding (exit 1), not the machine's fault (exit 3).
#[test]
fn a_module_that_exits_while_imported_is_the_students_compile_error() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rubric = rubric(dir.path(), "vector-add", "");
    let r = grade(
        &rubric,
        &[(
            "vadd.py",
            "import os\nfrom numba import cuda\n\n@cuda.jit\ndef vector_add(a, b, c, n):\n    i = cuda.grid(1)\n    if i < n:\n        c[i] = a[i] + b[i]\n\nos._exit(0)\n",
        )],
    );
    let c = first_failure(&r, "vector_add");
    assert_eq!(c["status"], "fail", "{c}");
    assert_eq!(c["kind"], "compile", "{c}");
    let message = c["message"].as_str().unwrap();
    assert!(
        message.contains("did not finish importing") || message.contains("stopped the compiler"),
        "{c}"
    );
}

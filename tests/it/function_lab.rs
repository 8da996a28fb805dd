//! Python function labs end to end through the binary (`cugrade check --backend emu`, NumPy
//! standing in for CuPy): what a student's function can do wrong and how it is reported, and
//! that what the function prints never reaches the grader's channel. The lab's examples
//! (`submissions-example/preprocess/`) are graded by tests/it/labs_examples.rs; the sandbox
//! around the function, as root and as nobody, by tests/it/hostile.rs.
//!
//! Needs `python3` with NumPy (cugrade's Numba cache has it under ci/with-nvrtc).

use crate::support::{first_failure, grade_files as grade, lab_rubric, milestone, nvrtc};
use serde_json::Value;

/// The good port from the lab's examples (a correct pipeline).
fn good() -> String {
    std::fs::read_to_string(
        crate::support::root().join("submissions-example/preprocess/cupy_port/preprocess.py"),
    )
    .unwrap()
}

fn checks(r: &Value) -> Vec<Value> {
    milestone(r, "preprocess")["checks"]
        .as_array()
        .unwrap()
        .clone()
}

fn ready() -> bool {
    nvrtc() && cugrade::compile::arrays::numpy().is_ok()
}

#[test]
fn what_the_function_prints_stays_out_of_the_channel() {
    if !ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let rubric = lab_rubric(d.path(), "preprocess", "");
    // A megabyte on stdout and on stderr at every call, and on stdout at import, with bytes
    // that look like the protocol's frames.
    let noisy = good().replace(
        "def preprocess(table):",
        "import sys, os\nprint('CGW2' * 1000)\n\ndef preprocess(table):\n    \
         print('CGW2\\x00\\x01' * 200000)\n    sys.stderr.write('x' * 1000000)\n    \
         os.write(1, b'CGW2' * 1000)",
    );
    let r = grade(&rubric, &[("preprocess.py", &noisy)]);
    let c = checks(&r);
    for check in c.iter().filter(|c| c["kind"] == "correctness") {
        assert_eq!(check["status"], "pass", "{check}");
    }
    assert_eq!(milestone(&r, "preprocess")["score"], 60.0, "{r}");
}

#[test]
fn a_function_that_never_returns_is_stopped_and_reported() {
    if !ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    // A call's deadline is at least 10 s; the first call's also has the compile deadline.
    let rubric = lab_rubric(d.path(), "preprocess", "timeouts: {compile_s: 5}");
    let hang = good().replace(
        "def preprocess(table):",
        "def preprocess(table):\n    while True:\n        pass",
    );
    let started = std::time::Instant::now();
    let r = grade(&rubric, &[("preprocess.py", &hang)]);
    let f = first_failure(&r, "preprocess");
    assert_eq!(f["kind"], "runtime", "{f}");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("did not return within"),
        "{f}"
    );
    // The other cases are not run on a dead worker.
    let skipped = checks(&r)
        .iter()
        .filter(|c| c["status"] == "skipped")
        .count();
    assert!(skipped >= 3, "{r}");
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
}

#[test]
fn a_missing_function_an_import_error_and_a_non_array_are_named() {
    if !ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let rubric = lab_rubric(d.path(), "preprocess", "");
    let none = grade(
        &rubric,
        &[(
            "pipeline.py",
            "import cupy as cp\n\ndef prepare(table):\n    return None\n",
        )],
    );
    let f = first_failure(&none, "preprocess");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("defines a function `preprocess(table)`"),
        "{f}"
    );

    let broken = grade(
        &rubric,
        &[(
            "preprocess.py",
            "import cupy as cp\n\n\ndef preprocess(table)\n    return 1\n",
        )],
    );
    let f = first_failure(&broken, "preprocess");
    assert!(
        f["message"].as_str().unwrap().contains("SyntaxError"),
        "{f}"
    );
    assert_eq!(f["location"], "preprocess.py:4", "{f}");

    let raises = grade(
        &rubric,
        &[(
            "preprocess.py",
            "import cupy as cp\n\ndef preprocess(table):\n    x = cp.asarray(table['amount'])\n    return x[10**9]\n",
        )],
    );
    let f = first_failure(&raises, "preprocess");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .starts_with("raised IndexError"),
        "{f}"
    );
    assert_eq!(f["location"], "preprocess.py:5", "{f}");

    let listed = grade(
        &rubric,
        &[(
            "preprocess.py",
            "import cupy as cp\n\ndef preprocess(table):\n    return [1.0]\n",
        )],
    );
    let f = first_failure(&listed, "preprocess");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("returned list, not an array"),
        "{f}"
    );
}

#[test]
fn cupy_kernels_inside_a_pipeline_wait_for_a_gpu() {
    if !ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let rubric = lab_rubric(d.path(), "preprocess", "");
    let src = "import cupy as cp\n\nclip = cp.ElementwiseKernel('float32 x', 'float32 y', 'y = min(max(x, 18.0f), 90.0f)', 'clip')\n\n\
               def preprocess(table):\n    return clip(cp.asarray(table['age']))\n";
    let r = grade(&rubric, &[("preprocess.py", src)]);
    let c = checks(&r);
    let first = &c[0];
    assert_eq!(first["status"], "skipped", "{first}");
    assert!(
        first["message"]
            .as_str()
            .unwrap()
            .contains("not run without a GPU"),
        "{first}"
    );
    // Nothing wrong was found, and nothing was shown correct: no points yet.
    assert_eq!(milestone(&r, "preprocess")["score"], 0.0, "{r}");
}

/// "Not run without a GPU" is the grader's word, never the student's: an exception named like
/// the stand-in's, or the stand-in's own class raised by hand, fails like any other where the
/// submission builds no CuPy kernel (issue 31).
#[test]
fn a_forged_stand_in_unsupported_is_a_failure() {
    if !ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let rubric = lab_rubric(d.path(), "preprocess", "");
    for raise in [
        "class StandInUnsupported(RuntimeError):\n    pass\n\ndef preprocess(table):\n    \
         raise StandInUnsupported('needs a GPU, honestly')\n",
        "def preprocess(table):\n    raise cp.StandInUnsupported('needs a GPU, honestly')\n",
    ] {
        let r = grade(
            &rubric,
            &[("preprocess.py", &format!("import cupy as cp\n\n{raise}"))],
        );
        let c = checks(&r);
        assert!(
            c.iter().all(|c| c["status"] != "skipped"
                || c["kind"] != "correctness"
                || c["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("not run: an earlier")),
            "a forged signal skipped a case: {r}"
        );
        assert_eq!(c[0]["status"], "fail", "{}", c[0]);
        assert!(
            c[0]["message"]
                .as_str()
                .unwrap()
                .contains("needs a GPU, honestly"),
            "{}",
            c[0]
        );
    }
}

#[test]
fn a_function_in_a_file_that_is_not_a_module_name_is_explained() {
    if !ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let rubric = lab_rubric(d.path(), "preprocess", "");
    let r = grade(&rubric, &[("my-pipeline.py", &good())]);
    let f = first_failure(&r, "preprocess");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("`my-pipeline.py` defines `preprocess`"),
        "{f}"
    );
}

/// The student's first hour, as they walk it: `cugrade init preprocess` in a fresh HOME with
/// an empty cugrade cache, `cugrade check` on the untouched starter, then on a port. NumPy
/// comes from the interpreter, or is installed into the cache on first use (from PyPI).
#[test]
fn init_check_and_a_port_from_a_fresh_home() {
    if !ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let home = d.path().join("home");
    let cache = d.path().join("cache");
    std::fs::create_dir_all(&home).unwrap();
    let run = |args: &[&str], cwd: &std::path::Path| {
        let mut c = crate::support::cugrade();
        c.args(args)
            .current_dir(cwd)
            .env_remove("CUGRADE_PYTHON")
            .env("HOME", &home)
            .env("CUGRADE_NVRTC_CACHE", &cache)
            .env("NO_COLOR", "1");
        c.output().unwrap()
    };
    let o = run(&["init", "preprocess"], &home);
    assert!(o.status.success(), "{}", crate::support::output_text(&o));
    let lab = home.join("preprocess");
    let starter = std::fs::read_to_string(lab.join("preprocess.py")).unwrap();
    assert!(starter.contains("def preprocess(table):"), "{starter}");
    let o = run(&["check"], &lab);
    let text = crate::support::output_text(&o);
    assert!(text.contains("not implemented yet"), "{text}");
    std::fs::write(lab.join("preprocess.py"), good()).unwrap();
    let o = run(&["check", "--format", "json"], &lab);
    let r: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", crate::support::output_text(&o)));
    assert_eq!(milestone(&r, "preprocess")["score"], 60.0, "{r}");
    let notes = r["run"]["notes"].to_string();
    assert!(notes.contains("standing in for CuPy"), "{notes}");
    // NumPy was the interpreter's, or is now in the cache with the pins it was installed with.
    let installed = cache.join("numpy");
    if installed.exists() {
        let stamp = std::fs::read_to_string(installed.join(".cugrade-pins")).unwrap();
        assert_eq!(
            stamp.trim(),
            cugrade::compile::arrays::NUMPY_WHEELS.join(" ")
        );
    }
}

/// A rubric's function contract is checked like a kernel's, at the line of the mistake.
#[test]
fn function_contract_mistakes_are_rubric_errors() {
    let base = std::fs::read_to_string(crate::support::root().join("rubrics/preprocess.yaml"))
        .unwrap()
        .replace("../reference-kernels/preprocess.py", "preprocess.py");
    let load = |text: &str| {
        let d = tempfile::tempdir().unwrap();
        std::fs::copy(
            crate::support::root().join("reference-kernels/preprocess.py"),
            d.path().join("preprocess.py"),
        )
        .unwrap();
        let p = d.path().join("r.yaml");
        std::fs::write(&p, text).unwrap();
        cugrade::rubric::load(&p)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    load(&base).unwrap();
    let cases: &[(&str, &str, &str)] = &[
        (
            "    returns: features\n",
            "    returns: feature\n",
            "`returns: feature` names no parameter",
        ),
        (
            "    returns: features\n",
            "    returns: features\n    launch: {block: [256], grid: [1]}\n",
            "has no launch",
        ),
        (
            "        against: cpu\n",
            "        against: cublas\n",
            "a function lab's speed compares with `cpu`",
        ),
        (
            "{name: age, type: \"f32*\", dir: in,",
            "{name: age, type: \"f32*\", dir: inout,",
            "`age` is neither",
        ),
        (
            "    kernel: preprocess\n",
            "    kernel: prepare\n",
            "function `prepare` is not defined",
        ),
    ];
    for (from, to, want) in cases {
        assert!(base.contains(from), "{from}");
        let err = load(&base.replacen(from, to, 1)).unwrap_err();
        assert!(err.contains(want), "{to}: {err}");
    }
}

/// Issue 32: a pipeline importing `cupyx.scipy.ndimage` scored 0/100 with a
/// `ModuleNotFoundError` traceback through cugrade's harness. Without a GPU, SciPy stands in
/// for cupyx.scipy (found, or installed into cugrade's cache on first use): a correct port
/// that uses it is graded like any other. What has no stand-in (a cupyx.jit kernel) waits for
/// a GPU, said plainly at the student's line; no message or detail shows cugrade's files.
#[test]
fn cupyx_scipy_stands_in_and_what_cannot_is_said_at_the_students_line() {
    if !ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let rubric = lab_rubric(d.path(), "preprocess", "");
    let port = good();
    let from = "l = cp.log1p(amount)";
    assert!(
        port.contains(from),
        "the cupy_port example changed:\n{port}"
    );
    // log1p from cupyx.scipy.special, and ndimage imported (unused), as a course's port might.
    let with_scipy = port
        .replacen(
            "import cupy as cp\n",
            "import cupy as cp\nimport cupyx.scipy.ndimage as ndi  # noqa: F401\nfrom cupyx.scipy import special\n",
            1,
        )
        .replace(from, "l = special.log1p(amount)");
    let r = grade(&rubric, &[("preprocess.py", &with_scipy)]);
    let c = checks(&r);
    let correctness: Vec<&Value> = c.iter().filter(|c| c["kind"] == "correctness").collect();
    assert!(!correctness.is_empty(), "{r}");
    for check in correctness {
        assert_eq!(check["status"], "pass", "{check}");
    }
    assert_eq!(milestone(&r, "preprocess")["score"], 60.0, "{r}");

    // A cupyx.jit kernel inside the pipeline: not run without a GPU (skipped, no points yet).
    let jit = "import cupy as cp\nfrom cupyx import jit\n\n@jit.rawkernel()\ndef clip(x, y, n):\n    \
               i = jit.grid(1)\n    if i < n:\n        y[i] = x[i]\n\n\
               def preprocess(table):\n    x = cp.asarray(table['age'])\n    y = cp.empty_like(x)\n    \
               clip((1,), (256,), (x, y, x.size))\n    return y\n";
    let r = grade(&rubric, &[("preprocess.py", jit)]);
    let first = &checks(&r)[0];
    assert_eq!(first["status"], "skipped", "{first}");
    assert!(
        first["message"]
            .as_str()
            .unwrap()
            .contains("not run without a GPU"),
        "{first}"
    );
    let text = r.to_string();
    for ours in ["cugrade_python_harness", "cupy-stand-in", "<frozen"] {
        assert!(!text.contains(ours), "`{ours}` in {r}");
    }

    // A cupyx name that has no stand-in, used: a failure that names it, at the student's line.
    let benchmark = port.replacen(
        "def preprocess(table):\n",
        "def preprocess(table):\n    import cupyx.profiler\n    cupyx.profiler.benchmark(len, ([],))\n",
        1,
    );
    let r = grade(&rubric, &[("preprocess.py", &benchmark)]);
    let f = first_failure(&r, "preprocess");
    let msg = f["message"].as_str().unwrap();
    assert!(msg.contains("cupyx.profiler.benchmark"), "{f}");
    assert!(msg.contains("without a GPU"), "{f}");
    let line = benchmark
        .lines()
        .position(|l| l.contains("cupyx.profiler.benchmark("))
        .unwrap()
        + 1;
    assert_eq!(f["location"], format!("preprocess.py:{line}"), "{f}");
    let text = r.to_string();
    for ours in ["cugrade_python_harness", "cupy-stand-in", "<frozen"] {
        assert!(!text.contains(ours), "`{ours}` in {r}");
    }
}

/// A result of another dtype or shape than the lab's says what came back, what the lab asks
/// for, and whether its values are right once converted (issue 32: a float64 result showed an
/// empty detail block).
#[test]
fn a_result_of_another_dtype_or_shape_says_whether_its_values_are_right() {
    if !ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let rubric = lab_rubric(d.path(), "preprocess", "");
    let returning = |expr: &str| {
        let text = good().replace("    return out\n", &format!("    return {expr}\n"));
        assert!(text.contains(expr), "the example changed: {text}");
        let r = grade(&rubric, &[("preprocess.py", &text)]);
        let f = first_failure(&r, "preprocess");
        (
            f["cause"].clone(),
            f["details"].as_str().unwrap_or("").to_string(),
        )
    };
    let (cause, details) = returning("out.astype(cp.float64)");
    assert_eq!(cause, "dtype", "{details}");
    assert!(
        details.contains("returned: a float64 array of shape [1, 8]")
            && details.contains(
                "the lab asks for: a float32 array of shape [1, 8] = [rows, 4 + categories]"
            )
            && details.contains("its values, converted to float32, all match the reference")
            && details.contains("only the dtype is wrong"),
        "{details}"
    );
    let (cause, details) = returning("out.astype(cp.float64) * 2");
    assert_eq!(cause, "dtype", "{details}");
    assert!(
        details.contains("converted to float32, also differ from the reference")
            && details.contains("`features`: ")
            && details.contains(": expected "),
        "{details}"
    );
    let (cause, details) = returning("out.reshape(-1)");
    assert_eq!(cause, "shape", "{details}");
    assert!(
        details.contains("returned: a float32 array of shape [8]")
            && details.contains("only the shape is wrong: return `result.reshape(1, 8)`"),
        "{details}"
    );
}

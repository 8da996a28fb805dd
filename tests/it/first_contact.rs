//! The machine's fault is never the student's, and a student's first hour works: a CUDA header
//! missing on the grading machine is exit 3 naming the fix (never a 0/100 compile error),
//! `doctor`'s exit code says whether what a rubric needs is here, and every lab's Numba
//! starter is graded as "not implemented yet".

use crate::support::{self, nvrtc, output_text as text, root};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

fn cugrade(args: &[&str], cwd: &Path, env: &[(&str, &Path)]) -> Output {
    let mut c = support::cugrade();
    c.args(args).current_dir(cwd).env("NO_COLOR", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

const WITH_CG: &str = "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n\
extern \"C\" __global__ void vector_add(const float* a, const float* b, float* c, int n)\n{\n\
    int i = blockIdx.x * blockDim.x + cg::this_thread_block().thread_rank();\n\
    if (i < n) c[i] = a[i] + b[i];\n}\n";

fn submission(dir: &Path, kernel: &str) -> PathBuf {
    let sub = dir.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("cugrade.yaml"), "rubric: vector-add\n").unwrap();
    std::fs::write(sub.join("vadd.cu"), kernel).unwrap();
    sub
}

#[test]
fn a_cuda_header_the_machine_lacks_is_exit_3_not_the_students_compile_error() {
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let empty = d.path().join("no-headers");
    std::fs::create_dir_all(&empty).unwrap();
    let sub = submission(d.path(), WITH_CG);
    let json = d.path().join("result.json");
    // The machine's CUDA headers are an empty folder: nothing is installed beside it.
    let hide = [("CUGRADE_CUDA_INCLUDE", empty.as_path())];
    let o = cugrade(
        &[
            "check",
            "--backend",
            "emu",
            "--json",
            json.to_str().unwrap(),
        ],
        &sub,
        &hide,
    );
    let out = text(&o);
    assert_eq!(o.status.code(), Some(3), "{out}");
    assert!(out.contains("cooperative_groups.h"), "{out}");
    assert!(out.contains("not the submission's"), "{out}");
    assert!(out.contains("cugrade doctor --install"), "{out}");
    assert!(!json.exists(), "no score is written for the student: {out}");
    // Whose fault it is comes from compiling cugrade's own kernel with CUDA's headers, never
    // from the name the submission asked for: with the headers missing, a typo meets the
    // same broken machine.
    let typo = submission(
        &d.path().join("typo"),
        &WITH_CG.replace("cooperative_groups.h", "cooperative_group.h"),
    );
    let o = cugrade(&["check", "--backend", "emu"], &typo, &hide);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    // With the headers, the same submission is correct, and the typo is the student's
    // compile error.
    let o = cugrade(&["check", "--backend", "emu"], &sub, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = cugrade(&["check", "--backend", "emu"], &typo, &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("cooperative_group.h"), "{out}");
}

#[test]
fn doctor_exits_3_when_something_the_rubric_needs_is_missing() {
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    // An empty cache (no headers, no Numba) and the real headers given by path.
    let cache = d.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let headers = cugrade::compile::toolchain::cuda_include_dirs();
    assert!(
        !headers.is_empty(),
        "run through ci/with-nvrtc (it installs CUDA's headers)"
    );
    let with_headers = std::env::join_paths(&headers).unwrap();
    let env = [
        ("CUGRADE_NVRTC_CACHE", cache.as_path()),
        ("CUGRADE_CUDA_INCLUDE", Path::new(&with_headers)),
    ];
    let doctor = |args: &[&str], cwd: &Path, env: &[(&str, &Path)]| {
        let mut all = vec!["doctor"];
        all.extend_from_slice(args);
        let o = cugrade(&all, cwd, env);
        (o.status.code(), text(&o))
    };
    // A CUDA starter: NVRTC and the headers are needed and here; Numba is not needed.
    cugrade(&["init", "reduction", "cu"], d.path(), &[]);
    let (code, out) = doctor(&[], &d.path().join("cu"), &env);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("ready: everything needed for reduction"),
        "{out}"
    );
    assert!(out.lines().any(|l| l.starts_with("--   Numba")), "{out}");
    // Issue 32: a plotting script in a CUDA repository, or a benchmark that uses Numba on the
    // CPU while every kernel is in the .cu file, needs no Numba either (it was `MISS Numba`,
    // and `doctor --install` fetched 700 MB).
    std::fs::write(
        d.path().join("cu/plot.py"),
        "import matplotlib.pyplot as plt\nplt.plot([1, 2], [3, 4])\nplt.savefig('t.png')\n",
    )
    .unwrap();
    std::fs::write(
        d.path().join("cu/bench.py"),
        "from numba import njit\n\n@njit\ndef cpu_sum(a):\n    return a.sum()\n",
    )
    .unwrap();
    for args in [&[][..], &["."][..]] {
        let (code, out) = doctor(args, &d.path().join("cu"), &env);
        assert_eq!(code, Some(0), "{args:?}: {out}");
        assert!(out.lines().any(|l| l.starts_with("--   Numba")), "{out}");
    }
    // A Numba kernel for a milestone the .cu file lacks does need it.
    let cu = d.path().join("cu/reduction.cu");
    let text = std::fs::read_to_string(&cu).unwrap();
    let without = text.replace("reduce_shuffle(", "reduce_shuffle_unused(");
    assert_ne!(text, without);
    std::fs::write(&cu, without).unwrap();
    std::fs::write(
        d.path().join("cu/shuffle.py"),
        "from numba import cuda\n\n@cuda.jit\ndef reduce_shuffle(in_, out, n):\n    pass\n",
    )
    .unwrap();
    let (code, out) = doctor(&[], &d.path().join("cu"), &env);
    assert_eq!(code, Some(3), "{out}");
    assert!(out.lines().any(|l| l.starts_with("MISS Numba")), "{out}");
    std::fs::write(&cu, text).unwrap();
    std::fs::remove_file(d.path().join("cu/shuffle.py")).unwrap();
    // A Numba starter needs Numba, which this cache lacks.
    cugrade(
        &["init", "reduction", "py", "--lang", "numba"],
        d.path(),
        &[],
    );
    let (code, out) = doctor(&[], &d.path().join("py"), &env);
    assert_eq!(code, Some(3), "{out}");
    assert!(out.lines().any(|l| l.starts_with("MISS Numba")), "{out}");
    assert!(out.contains("not ready for reduction"), "{out}");
    // --rubric decides: a rubric that accepts Numba needs it, one limited to CUDA does not.
    // The rubric in a course tree of its own, its reference kernel beside it (cugrade reads a
    // rubric's files only from its course tree).
    let course = d.path().join("course");
    std::fs::create_dir_all(course.join("rubrics")).unwrap();
    std::fs::create_dir_all(course.join("reference-kernels")).unwrap();
    std::fs::copy(
        root().join("reference-kernels/vector-add.cu"),
        course.join("reference-kernels/vector-add.cu"),
    )
    .unwrap();
    let rubric_of = |extra: &str| {
        let text = std::fs::read_to_string(root().join("rubrics/vector-add.yaml")).unwrap();
        let p = course.join(format!("rubrics/vadd{}.yaml", extra.len()));
        std::fs::write(&p, format!("{text}\n{extra}\n")).unwrap();
        p
    };
    let any = rubric_of("");
    let (code, out) = doctor(&["--rubric", any.to_str().unwrap()], d.path(), &env);
    assert_eq!(code, Some(3), "{out}");
    let cuda_only = rubric_of("languages: [cuda, ptx]");
    let (code, out) = doctor(&["--rubric", cuda_only.to_str().unwrap()], d.path(), &env);
    assert_eq!(code, Some(0), "{out}");
    // Without the headers, CUDA C++ is not ready (and nothing may be installed: no Python).
    let no_python = [
        ("CUGRADE_NVRTC_CACHE", cache.as_path()),
        ("CUGRADE_PYTHON", Path::new("/nonexistent/python3")),
    ];
    if !Path::new("/usr/local/cuda/include/cooperative_groups.h").exists() {
        let (code, out) = doctor(&[], &d.path().join("cu"), &no_python);
        assert_eq!(code, Some(3), "{out}");
        assert!(
            out.lines().any(|l| l.starts_with("MISS CUDA headers")),
            "{out}"
        );
        // --install says why it could not install them, and doctor still reports.
        let (code, out) = doctor(&["--install"], &d.path().join("cu"), &no_python);
        assert_eq!(code, Some(3), "{out}");
        assert!(out.contains("python3-pip"), "{out}");
    }
    // --backend cuda needs a GPU.
    if !cugrade::backend::cuda::device_count().is_ok_and(|n| n > 0) {
        let (code, out) = doctor(&["--backend", "cuda"], &d.path().join("cu"), &env);
        assert_eq!(code, Some(3), "{out}");
        assert!(out.lines().any(|l| l.starts_with("MISS GPU")), "{out}");
    }
    // A bad rubric is exit 2.
    let bad = d.path().join("bad.yaml");
    std::fs::write(&bad, "assignment: [\n").unwrap();
    let (code, out) = doctor(&["--rubric", bad.to_str().unwrap()], d.path(), &env);
    assert_eq!(code, Some(2), "{out}");
}

/// Every lab whose rubric Numba can grade has a Numba starter (`init --list` says so), and
/// that starter, untouched, is one "not implemented yet" per milestone at its `.py` line, with
/// nothing compiled (no NVRTC, no Numba needed).
#[test]
fn every_numba_starter_is_graded_as_not_implemented_yet() {
    let d = tempfile::tempdir().unwrap();
    let list = text(&cugrade(&["init", "--list"], d.path(), &[]));
    let labs: Vec<&str> = list
        .lines()
        .skip(1)
        .filter(|l| l.contains("numba"))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    // Every lab but the Python function labs, whose starter is CuPy only.
    let kernel_labs = cugrade::labs::LABS
        .iter()
        .filter(|l| l.reference_ext != "py")
        .count();
    assert_eq!(labs.len(), kernel_labs, "{list}");
    assert!(
        list.lines()
            .any(|l| l.starts_with("preprocess") && l.contains("cupy")),
        "{list}"
    );
    for lab in labs {
        let o = cugrade(&["init", lab, lab, "--lang", "numba"], d.path(), &[]);
        assert!(o.status.success(), "{lab}: {}", text(&o));
        let dir = d.path().join(lab);
        let py = format!("{}.py", lab.replace('-', "_"));
        assert!(dir.join(&py).is_file(), "{lab}");
        assert!(!dir.join(format!("{lab}.cu")).exists(), "{lab}");
        let json = dir.join("result.json");
        let o = cugrade(
            &[
                "check",
                "--backend",
                "emu",
                "--json",
                json.to_str().unwrap(),
            ],
            &dir,
            &[],
        );
        assert_eq!(o.status.code(), Some(1), "{lab}: {}", text(&o));
        let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        for m in r["milestones"].as_array().unwrap() {
            let checks = m["checks"].as_array().unwrap();
            assert_eq!(checks.len(), 1, "{lab}: {m}");
            assert!(
                checks[0]["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("not implemented yet"),
                "{lab}: {m}"
            );
            assert!(
                checks[0]["location"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("{py}:")),
                "{lab}: {m}"
            );
        }
    }
}

/// Issue 32: a student checks one file of the folder `cugrade init` made, or names a built-in
/// lab where a rubric is expected; an instructor writes a lab out to start a course from.
#[test]
fn a_starter_s_file_and_a_lab_s_name_grade_and_a_lab_writes_out_for_a_course() {
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let o = cugrade(&["init", "vector-add", "starter"], d.path(), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let starter = d.path().join("starter");
    // The file alone, in the starter's folder: its cugrade.yaml names the rubric.
    let o = cugrade(
        &["check", "--backend", "emu", "vector-add.cu"],
        &starter,
        &[],
    );
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("not implemented yet"), "{out}");
    // A built-in lab's name as `--rubric`, and to `validate`.
    let o = cugrade(
        &[
            "check",
            "--backend",
            "emu",
            "--rubric",
            "vector-add",
            "vector-add.cu",
        ],
        &starter,
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let o = cugrade(&["validate", "--schema-only", "reduction"], d.path(), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // An unknown name is still a file that does not exist.
    let o = cugrade(&["validate", "--schema-only", "no-such-lab"], d.path(), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // The lab for a course: its rubric validates where it was written.
    let o = cugrade(&["init", "reduction", "course", "--course"], d.path(), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let rubric = d.path().join("course/rubrics/reduction.yaml");
    assert!(
        d.path()
            .join("course/reference-kernels/reduction.cu")
            .is_file()
    );
    assert!(d.path().join("course/docs/labs/reduction.md").is_file());
    let o = cugrade(
        &["validate", "--schema-only", &rubric.to_string_lossy()],
        d.path(),
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Written once: a second time overwrites nothing.
    let o = cugrade(&["init", "reduction", "course", "--course"], d.path(), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

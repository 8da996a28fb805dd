//! One student never stops a cohort (issue 31): a student's input that looks like a fault of
//! the grading machine (a header typo, an `#error` imitating NVRTC, a Python module that exits,
//! loops forever, forks without end, forges the harness's "NumPy is broken" frame or ships its
//! own `numpy.py`) gets an error row, and the honest students before and after it are graded.
//! Only a trusted probe, run without the student's files, may call a fault the machine's.
//! Through the binary, on the emulator, as root and (when the tests run as root) as nobody.

use crate::hostile::{Leg, Scene, legs, scene_of};
use crate::support::{nvrtc, root};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// `cugrade grade` of the scene's submissions on the emulator: exit code, stderr, and
/// grades.csv's rows by id; the results are under `out`.
fn grade(scene: &Scene, out: &Path) -> (i32, String, BTreeMap<String, String>) {
    use wait_timeout::ChildExt;
    let cohort = scene.dir.join("subs");
    let mut child = scene
        .command(&[
            "grade",
            "--rubric",
            &scene.rubric.to_string_lossy(),
            &cohort.to_string_lossy(),
            "--out",
            &out.to_string_lossy(),
            "--backend",
            "emu",
            "--seed",
            "3",
            "--jobs",
            "2",
        ])
        .env("CI", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let drain = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let status = child.wait_timeout(Duration::from_secs(600)).unwrap();
    if status.is_none() {
        let _ = child.kill();
    }
    let err = drain.join().unwrap();
    let code = status.and_then(|s| s.code()).unwrap_or(-1);
    let rows = std::fs::read_to_string(out.join("grades.csv"))
        .map(|t| {
            t.lines()
                .skip(1)
                .filter_map(|l| Some((l.split(',').next()?.to_string(), l.to_string())))
                .collect()
        })
        .unwrap_or_default();
    (code, err, rows)
}

fn result(out: &Path, id: &str) -> serde_json::Value {
    let p = out.join("students").join(id).join("result.json");
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

#[test]
fn a_header_typo_or_an_error_imitating_nvrtc_never_stops_a_cohort() {
    if !nvrtc() {
        return;
    }
    let good =
        std::fs::read_to_string(root().join("submissions-example/reduction/optimized/reduce.cu"))
            .unwrap();
    for leg in legs() {
        let scene = scene_of(leg, "reduction", "cu", "");
        let put = |name: &str, text: String| {
            scene.submission(name, "reduce.cu", &text);
        };
        put("a_honest", good.clone());
        put("b_typo", format!("#include <cub/cub.hpp>\n{good}"));
        put(
            "c_thrust",
            format!("#include <thrust/no_such_header.h>\n{good}"),
        );
        put(
            "d_forged",
            format!("#error \"cannot open source file \\\"cuda/std/missing\\\"\"\n{good}"),
        );
        put("e_honest", good.clone());
        let out = scene.home.join("out");
        let (code, err, rows) = grade(&scene, &out);
        assert_eq!(
            code, 1,
            "{leg:?}: the cohort must be graded, not stopped:\n{err}"
        );
        assert_eq!(rows.len(), 5, "{leg:?}: {rows:?}\n{err}");
        for honest in ["a_honest", "e_honest"] {
            assert!(rows[honest].contains(",100,"), "{leg:?}: {}", rows[honest]);
        }
        let typo = result(&out, "b_typo").to_string();
        assert!(
            typo.contains("cub/cub.cuh"),
            "{leg:?}: the hint names CUB's header: {typo}"
        );
        for bad in ["c_thrust", "d_forged"] {
            let r = result(&out, bad);
            assert_eq!(r["score"], 0.0, "{leg:?}: {r}");
            assert!(
                r.to_string().contains("\"kind\":\"compile\""),
                "{leg:?}: {r}"
            );
        }
    }
}

#[test]
fn a_function_lab_student_that_breaks_its_own_python_never_stops_a_cohort() {
    if !(nvrtc() && cugrade::compile::arrays::numpy().is_ok()) {
        return;
    }
    let good = std::fs::read_to_string(
        root().join("submissions-example/preprocess/cupy_port/preprocess.py"),
    )
    .unwrap();
    // The harness's own `send`, as the student's module can reach it: a frame that claims the
    // machine's NumPy is broken.
    let forged = "import __main__, os\n__main__.send({'ready': False, 'machine': True, \
                  'error': {'kind': 'exception', 'message': 'NumPy is broken on this machine', \
                  'file': None, 'line': None, 'details': ''}})\nos._exit(0)\n";
    let fork_bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        \
                     pass\n";
    for leg in legs() {
        let scene = scene_of(leg, "preprocess", "py", "");
        let put = |name: &str, text: String| {
            scene.submission(name, "preprocess.py", &text);
        };
        put("a_honest", good.clone());
        put("b_exits", format!("import os\nos._exit(3)\n{good}"));
        put("c_forges", format!("{forged}{good}"));
        let own = scene.submission("d_own_numpy", "preprocess.py", &good);
        std::fs::write(
            own.join("numpy.py"),
            "raise ImportError('this is not NumPy')\n",
        )
        .unwrap();
        put("e_loops", format!("while True:\n    pass\n{good}"));
        put("f_forks", format!("{fork_bomb}{good}"));
        put("g_honest", good.clone());
        let out = scene.home.join("out");
        let (code, err, rows) = grade(&scene, &out);
        assert_eq!(
            code, 1,
            "{leg:?}: the cohort must be graded, not stopped:\n{err}"
        );
        assert_eq!(rows.len(), 7, "{leg:?}: {rows:?}\n{err}");
        let honest = result(&out, "a_honest")["score"].clone();
        assert!(honest.as_f64().unwrap() > 0.0, "{leg:?}: {honest}");
        assert_eq!(result(&out, "g_honest")["score"], honest, "{leg:?}");
        for bad in ["b_exits", "c_forges", "e_loops", "f_forks"] {
            let r = result(&out, bad);
            assert_eq!(r["score"], 0.0, "{leg:?}: {r}");
            let text = r.to_string();
            assert!(
                text.contains("did not start with the submission's modules"),
                "{leg:?} {bad}: {text}"
            );
            // The forged text is shown as the student's process's, never as the grader's.
            assert!(!text.contains("does not import"), "{leg:?} {bad}: {text}");
        }
        // A `numpy.py` of the student's own does not replace NumPy in the harness: graded as
        // the honest ones.
        assert_eq!(result(&out, "d_own_numpy")["score"], honest, "{leg:?}");
        if leg == Leg::Nobody {
            scene.assert_clean("a cohort with hostile Python students");
        }
    }
}

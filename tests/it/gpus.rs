//! `grade --gpus LIST` on a machine without a GPU: the list is noted and not used, correctness
//! spreads over `--jobs` (one job per listed GPU by default), the grades are those of a run
//! without `--gpus`, and nothing claims a GPU. The spreading decisions themselves (jobs to
//! GPUs, one lock per GPU, refusing mixed models) are unit tests in `cohort::gpus`.

use crate::support::{self, cugrade, root};
use std::path::Path;
use std::process::Output;

/// NVRTC is needed to compile; a driver means `auto` would grade on a GPU: not this test.
fn runnable() -> bool {
    if support::driver() {
        eprintln!("SKIPPED: an NVIDIA driver is present, `auto` would grade on the GPU");
        return false;
    }
    support::nvrtc()
}

fn cohort(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for s in ["naive", "off_by_one", "optimized"] {
        let src = root()
            .join("submissions-example/reduction")
            .join(s)
            .join("reduce.cu");
        std::fs::copy(src, dir.join(format!("{s}.cu"))).unwrap();
    }
}

fn grade(cohort: &Path, out: &Path, args: &[&str]) -> Output {
    cugrade()
        .args(["grade", "--rubric"])
        .arg(root().join("tests/fixtures/cohort/reduction-small.yaml"))
        .arg(cohort)
        .arg("--out")
        .arg(out)
        .args(["--seed", "5"])
        .args(args)
        .env("CI", "1")
        .output()
        .unwrap()
}

#[test]
fn gpus_without_a_gpu_are_noted_and_grades_match_a_run_without_them() {
    if !runnable() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let c = tmp.path().join("cohort");
    cohort(&c);
    let plain = tmp.path().join("plain");
    let o = grade(&c, &plain, &["--backend", "emu", "--jobs", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("--gpus"), "{err}");

    // --backend emu: said plainly, and the default --jobs is one per listed GPU.
    let two = tmp.path().join("two");
    let o = grade(&c, &two, &["--backend", "emu", "--gpus", "0,1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "note: --gpus 0,1 is not used: grading on the PTX emulator (--backend emu), so no \
             GPU runs anything and speed is not measured; 2 jobs grade correctness on the CPU \
             cores"
        ),
        "{err}"
    );
    // auto without a GPU: the same, with the reason.
    let auto = tmp.path().join("auto");
    let o = grade(&c, &auto, &["--gpus", "0,0", "--jobs", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("(no usable GPU was found)") && err.contains("1 job grades correctness"),
        "{err}"
    );
    let read = |d: &Path, f: &str| std::fs::read_to_string(d.join(f)).unwrap();
    for d in [&two, &auto] {
        assert_eq!(read(d, "grades.csv"), read(&plain, "grades.csv"));
        assert!(!read(d, "summary.md").contains("## GPUs"));
        let r: serde_json::Value =
            serde_json::from_str(&read(d, "students/naive.cu/result.json")).unwrap();
        assert_eq!(r["backend"], "emu");
        assert!(r["run"].get("gpu").is_none(), "{r}");
    }

    // --backend cuda without a GPU: cannot grade (exit 3), and says what to do.
    let o = grade(
        &c,
        &tmp.path().join("cuda"),
        &["--backend", "cuda", "--gpus", "0,1"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("--backend cuda cannot run"), "{err}");
    assert!(err.contains("--backend emu"), "{err}");
}

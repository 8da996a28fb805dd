//! GPU tests: run only with `CUGRADE_GPU_TESTS=1` on a machine with an NVIDIA GPU.
//! They grade the pipeline fixtures, every lab's example submissions and the GPU-specific
//! attacks with `--backend cuda` and check the verdicts. Logs of runs on the H200 are in
//! docs/validation/. `CUGRADE_BIN` may name the cugrade binary (the test binary is built on
//! one machine and run on another).

use crate::support::{self, BIN};
use std::path::{Path, PathBuf};
use std::process::Command;

fn enabled() -> bool {
    let on = std::env::var("CUGRADE_GPU_TESTS").is_ok_and(|v| v == "1");
    if !on {
        eprintln!("skipped: set CUGRADE_GPU_TESTS=1 on a GPU machine");
    }
    on
}

fn root() -> PathBuf {
    std::env::var_os("CUGRADE_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(support::root)
}

fn bin() -> PathBuf {
    std::env::var_os("CUGRADE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(BIN))
}

fn grade(rubric: &Path, sub: &Path) -> (i32, cugrade::result::GradeResult, String) {
    let o = Command::new(bin())
        .args([
            "check",
            "--backend",
            "cuda",
            "--seed",
            "5",
            "--format",
            "json",
            "--rubric",
        ])
        .arg(rubric)
        .arg(sub)
        .output()
        .expect("cugrade runs");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let r = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("no result for {}: {e}\n{err}", sub.display()));
    (o.status.code().unwrap_or(-1), r, err)
}

fn kinds(r: &cugrade::result::GradeResult, kind: &str) -> Vec<cugrade::result::Status> {
    r.milestones
        .iter()
        .flat_map(|m| &m.checks)
        .filter(|c| c.kind.as_str() == kind)
        .map(|c| c.status)
        .collect()
}

#[test]
fn pipeline_fixtures_on_the_gpu() {
    if !enabled() {
        return;
    }
    use cugrade::result::Status::*;
    let f = root().join("tests/fixtures/mini");
    let rubric = f.join("rubric.yaml");
    let (code, r, err) = grade(&rubric, &f.join("correct"));
    assert_eq!((code, r.milestones[0].status), (0, Pass), "{err}");
    assert_eq!(r.backend, "cuda");
    let (_, r, _) = grade(&rubric, &f.join("no_bounds"));
    assert!(kinds(&r, "memory").contains(&Fail), "{r:?}");
    let started = std::time::Instant::now();
    let (code, r, _) = grade(&rubric, &f.join("hang"));
    assert_eq!(code, 1);
    assert!(kinds(&r, "runtime").contains(&Error), "{r:?}");
    assert!(
        r.milestones[0]
            .checks
            .iter()
            .any(|c| c.message.contains("timeout")),
        "{r:?}"
    );
    assert!(started.elapsed().as_secs() < 60);
    let (_, r, _) = grade(&rubric, &f.join("trap"));
    assert!(kinds(&r, "runtime").contains(&Error), "{r:?}");
}

#[test]
fn gpu_specific_attacks_are_contained() {
    if !enabled() {
        return;
    }
    let rubric = root().join("rubrics/vector-add.yaml");
    for (attack, kind, want) in [
        ("illegal_address", "runtime", "error"),
        ("trap", "runtime", "error"),
        ("infinite_loop", "runtime", "error"),
        ("malloc_bomb", "correctness", "pass|error"),
        // On the H200 the flood outlasts the launch deadline: a clean timeout, output capped.
        ("printf_flood", "milestone", "pass|error"),
        ("bob", "correctness", "pass"),
    ] {
        let (code, r, err) = grade(&rubric, &root().join("tests/adversarial").join(attack));
        assert!(matches!(code, 0 | 1), "{attack}: exit {code}\n{err}");
        let got = if kind == "milestone" {
            r.milestones[0].status
        } else {
            cugrade::result::Status::aggregate(kinds(&r, kind))
        };
        if attack == "printf_flood" {
            let details: String = r.milestones[0]
                .checks
                .iter()
                .filter_map(|c| c.details.as_deref())
                .collect();
            assert!(
                details.len() <= 4 * 65536 + 4096 && !err.contains("panicked"),
                "printf_flood: {} bytes of output kept",
                details.len()
            );
        }
        assert!(
            want.split('|').any(|w| w == got.as_str()),
            "{attack}: {kind} is {}, want {want}\n{r:?}",
            got.as_str()
        );
        eprintln!("{attack}: {kind} {}", got.as_str());
    }
}

#[test]
fn lab_examples_on_the_gpu() {
    if !enabled() {
        return;
    }
    #[derive(serde::Deserialize)]
    struct Expected {
        milestones: std::collections::BTreeMap<String, String>,
        #[serde(default)]
        gpu: std::collections::BTreeMap<String, String>,
    }
    let mut failures = vec![];
    for lab in std::fs::read_dir(root().join("submissions-example"))
        .unwrap()
        .flatten()
    {
        let lab_name = lab.file_name().to_string_lossy().into_owned();
        let rubric = root().join("rubrics").join(format!("{lab_name}.yaml"));
        for sub in std::fs::read_dir(lab.path()).unwrap().flatten() {
            let Ok(text) = std::fs::read_to_string(sub.path().join("expected.yaml")) else {
                continue;
            };
            let exp: Expected = serde_yaml::from_str(&text).unwrap();
            let sub_name = sub.file_name().to_string_lossy().into_owned();
            // CUGRADE_GPU_RESULTS: check the result.json files ci/gpu-run.sh wrote on the GPU
            // machine (`LAB-EXAMPLE.json`) instead of grading again.
            let (r, err) = match std::env::var_os("CUGRADE_GPU_RESULTS") {
                Some(dir) => {
                    let p = Path::new(&dir).join(format!("{lab_name}-{sub_name}.json"));
                    let text = std::fs::read_to_string(&p)
                        .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                    let r: cugrade::result::GradeResult = serde_json::from_str(&text).unwrap();
                    assert_eq!(r.backend, "cuda", "{}", p.display());
                    (r, String::new())
                }
                None => {
                    let (_, r, err) = grade(&rubric, &sub.path());
                    (r, err)
                }
            };
            for m in &r.milestones {
                let want = exp.gpu.get(&m.id).or(exp.milestones.get(&m.id));
                let got = m.status.as_str();
                let line = format!(
                    "{lab_name}/{sub_name}: {} = {got} (expected {want:?})",
                    m.id
                );
                eprintln!("{line}");
                // Performance can pass or fail on a GPU where the emulator skips it.
                let ok = match want.map(String::as_str) {
                    Some("skipped") => matches!(got, "pass" | "fail" | "skipped"),
                    Some(w) => w.split('|').any(|w| w == got),
                    None => true,
                };
                if !ok {
                    failures.push(format!("{line}\n{err}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The measurement protocol's anti-cheat rules and budgets (docs/measurement.md): timing cheats
/// get no speed points and a message that names them; an honest kernel that uses a __device__
/// counter correctly keeps its points; a printf-from-every-thread kernel and a kernel about a
/// thousand times too slow finish their performance checks within twice the budget.
#[test]
fn timing_cheats_and_slow_kernels() {
    if !enabled() {
        return;
    }
    use cugrade::result::Status;
    let rubric = root().join("rubrics/reduction.yaml");
    let fixtures = root().join("tests/fixtures/timing");
    let perf = |r: &cugrade::result::GradeResult, milestone: &str| {
        r.milestones
            .iter()
            .find(|m| m.id == milestone)
            .and_then(|m| m.checks.iter().find(|c| c.kind.as_str() == "performance"))
            .cloned()
            .expect("a performance check")
    };
    for cheat in ["counter_skip", "replay"] {
        let (_, r, err) = grade(&rubric, &fixtures.join(cheat));
        let c = perf(&r, "reduce_shuffle");
        assert_eq!(c.status, Status::Fail, "{cheat}: {c:?}\n{err}");
        assert_eq!(c.points, Some(0.0), "{cheat}");
        assert!(
            c.message.contains("state it kept from an earlier launch"),
            "{cheat}: {}",
            c.message
        );
    }
    let (_, r, err) = grade(&rubric, &fixtures.join("honest"));
    let c = perf(&r, "reduce_shuffle");
    assert_eq!(c.status, Status::Pass, "{c:?}\n{err}");
    let t = c.timing.expect("timing record");
    assert!(
        t.launches_verified as usize > t.samples && t.samples >= 10,
        "{t:?}"
    );
    for slow in ["printf_flood", "slow_serial"] {
        let (_, r, _) = grade(&rubric, &fixtures.join(slow));
        let c = perf(&r, "reduce_shuffle");
        assert_eq!(c.points.unwrap_or(0.0), 0.0, "{slow}: {c:?}");
        let seconds = c.seconds.unwrap_or(f64::INFINITY);
        assert!(
            seconds <= 2.0 * 2.0 + 2.0,
            "{slow}: the check took {seconds} s"
        );
    }
}

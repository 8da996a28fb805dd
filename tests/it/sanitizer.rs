//! The sanitizer pass `--backend cuda` runs after the GPU's correctness cases, run here without
//! a GPU: the example submissions' kernels, compiled by NVRTC, go through
//! `grade::sanitizer::on_emulator` exactly as the cuda backend calls it. The racy and the
//! divergent-barrier reductions fail it at their source lines; the correct one passes, and the
//! check says which tool ran. ci/gpu-sanitizer.sh checks the same through the binary on a GPU.

use crate::support::{nvrtc, root, worker_exe};
use cugrade::compile::{self, SourceFile};
use cugrade::pipeline::sanitizer;
use cugrade::result::{CheckKind, Status};

/// Sanitizer checks of milestone `milestone` of the reduction lab for example `example`, or
/// `None` where this machine has no NVRTC.
fn sanitize(example: &str, milestone: &str) -> Option<Vec<cugrade::result::Check>> {
    if !nvrtc() {
        return None;
    }
    worker_exe();
    let rubric = cugrade::rubric::load(&root().join("rubrics/reduction.yaml")).unwrap();
    let dir = root().join("submissions-example/reduction").join(example);
    let sub = cugrade::submission::load(&dir).unwrap();
    let src: &SourceFile = &sub.sources[0];
    let compiled = compile::compile(src, &sub.headers, &compile::options("sm_90", &[]));
    assert!(compiled.ok, "{}", compiled.log);
    let plan = cugrade::pipeline::plan_for(&rubric, &sub);
    let m = plan
        .milestones
        .iter()
        .find(|m| m.milestone.id == milestone)
        .unwrap();
    Some(sanitizer::on_emulator(m, &compiled.ptx, None, 7, &[], &mut None).0)
}

/// The same for a Numba example: compiled by Numba, its arrays passed as Numba's array structs
/// (what the GPU run does). `None` without NVRTC.
fn sanitize_numba(example: &str, milestone: &str) -> Option<Vec<cugrade::result::Check>> {
    use cugrade::compile::numba;
    if !nvrtc() {
        return None;
    }
    let tool = compile::toolchain::numba()
        .unwrap_or_else(|e| panic!("{e}\n(ci/with-nvrtc installs Numba into cugrade's cache)"));
    worker_exe();
    let rubric = cugrade::rubric::load(&root().join("rubrics/reduction.yaml")).unwrap();
    let dir = root().join("submissions-example/reduction").join(example);
    let sub = cugrade::submission::load(&dir).unwrap();
    let plan = cugrade::pipeline::plan_for(&rubric, &sub);
    let m = plan
        .milestones
        .iter()
        .find(|m| m.milestone.id == milestone)
        .unwrap();
    let kernel = numba::NumbaKernel {
        name: m.kernel.clone(),
        signatures: m.numba_signatures.clone(),
        params: vec![],
    };
    let temp = tempfile::tempdir().unwrap();
    let out = numba::compile(
        &tool,
        &sub.python,
        std::slice::from_ref(&kernel),
        "sm_90",
        temp.path(),
        std::time::Duration::from_secs_f64(numba::default_import_s()),
    )
    .unwrap();
    assert!(out[0].ok, "{:?}", out[0]);
    let sig = &kernel.signatures[out[0].signature];
    // As grading does: the entry gets the Python name, the PTX names the `.py` file.
    let ptx = numba::rename_entry(out[0].ptx.as_deref().unwrap(), &m.kernel, "reduce.py");
    Some(sanitizer::on_emulator(m, &ptx, Some(sig), 7, &[], &mut None).0)
}

#[test]
fn numba_kernels_run_on_the_emulator_after_the_gpu() {
    let Some(checks) = sanitize_numba("numba_naive", "reduce_shared") else {
        return;
    };
    assert!(
        checks.len() == 1 && checks[0].status == Status::Pass,
        "{checks:#?}"
    );
    let Some(checks) = sanitize_numba("numba_missing_syncthreads", "reduce_shared") else {
        return;
    };
    assert!(
        checks.iter().any(|c| c.status == Status::Fail
            && c.location
                .as_deref()
                .is_some_and(|l| l.starts_with("reduce.py:"))),
        "{checks:#?}"
    );
}

#[test]
fn the_smallest_cases_are_chosen() {
    let rubric = cugrade::rubric::load(&root().join("rubrics/reduction.yaml")).unwrap();
    let plan = rubric.plan(&|_, l| l.clone());
    let names: Vec<&str> = sanitizer::smallest_cases(&plan.milestones[1])
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["n1", "n31"]);
}

#[test]
fn a_race_fails_at_the_students_line() {
    let Some(checks) = sanitize("missing_syncthreads", "reduce_shared") else {
        return;
    };
    let races: Vec<_> = checks
        .iter()
        .filter(|c| c.kind == CheckKind::Sanitizer && c.status == Status::Fail)
        .collect();
    assert!(
        races.iter().any(|c| c.cause.as_deref() == Some("racecheck")
            && c.location.as_deref() == Some("reduce.cu:14")),
        "{checks:#?}"
    );
    assert!(races.iter().all(|c| c.message.contains("PTX emulator")));
}

#[test]
fn a_divergent_barrier_fails_synccheck() {
    let Some(checks) = sanitize("syncthreads_in_branch", "reduce_shared") else {
        return;
    };
    assert!(
        checks.iter().any(|c| c.status == Status::Fail
            && c.cause.as_deref() == Some("synccheck")
            && c.location
                .as_deref()
                .is_some_and(|l| l.starts_with("reduce.cu:"))),
        "{checks:#?}"
    );
}

#[test]
fn a_correct_kernel_passes_and_the_tool_is_named() {
    let Some(checks) = sanitize("optimized", "reduce_shared") else {
        return;
    };
    assert_eq!(checks.len(), 1, "{checks:#?}");
    assert_eq!(checks[0].status, Status::Pass);
    assert!(
        checks[0].message.contains("PTX emulator") && checks[0].message.contains("racecheck"),
        "{}",
        checks[0].message
    );
    assert!(
        checks[0].message.contains("n1, n31"),
        "{}",
        checks[0].message
    );
}

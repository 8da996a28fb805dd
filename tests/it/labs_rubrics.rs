//! The shipped lab rubrics parse with the real schema and hang together: every name they
//! mention exists (contracts, cases, CPU implementations, metrics, reference files and
//! entries), tiers make sense, and every example submission's `expected.yaml` agrees with
//! its rubric. The grader's own `validate` checks expressions; this checks the lab content.

use crate::labs_common::*;
use cugrade::backend::Metrics;
use cugrade::rubric::schema::{Against, Expr, Literal, Rubric};
use std::collections::{BTreeMap, BTreeSet};

const LABS: &[&str] = &[
    "vector-add",
    "reduction",
    "matmul",
    "transpose",
    "softmax",
    "embedding",
    "convolution",
    "activations",
    "fused-gemm",
    "attention",
];

#[test]
fn every_rubric_passes_the_loaders_static_checks() {
    // Schema, every expression against the variables in scope, and every cross-reference,
    // as `cugrade validate` checks them before running anything.
    for (path, _) in rubrics() {
        if let Err(e) = cugrade::rubric::load(&path) {
            panic!("{}: {e:?}", path.display());
        }
    }
}

#[test]
fn every_lab_has_a_rubric_a_reference_and_a_doc() {
    let rubrics = rubrics();
    let names: BTreeSet<_> = rubrics.iter().map(|(p, _)| lab_name(p)).collect();
    for lab in LABS {
        assert!(names.contains(*lab), "missing rubrics/{lab}.yaml");
        let doc = root().join(format!("docs/labs/{lab}.md"));
        let text = std::fs::read_to_string(&doc).unwrap_or_else(|e| panic!("{doc:?}: {e}"));
        assert!(
            text.contains("Measured thresholds (H200)"),
            "{lab}.md lacks the measured-thresholds section"
        );
    }
    for (path, r) in &rubrics {
        assert_eq!(
            r.assignment,
            lab_name(path),
            "{path:?}: assignment = file name"
        );
        assert!(r.trials >= 2, "{path:?}: trials");
        assert!(reference_path(path, r).is_file(), "{path:?}: reference");
    }
}

fn var_names(r: &Rubric) -> BTreeSet<String> {
    r.cases.correctness[0].vars.keys().cloned().collect()
}

/// Identifiers an expression mentions (good enough to catch a misspelt variable).
fn idents(e: &Expr) -> Vec<String> {
    let Literal::Text(s) = e.literal() else {
        return vec![];
    };
    s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| {
            w.chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn rubric_cross_references_resolve() {
    const FUNCS: &[&str] = &["ceil_div", "min", "max", "sqrt", "eps", "u"];
    for (path, r) in &rubrics() {
        let p = path.display();
        let vars = var_names(r);
        for c in r.cases.correctness.iter().chain(&r.cases.performance) {
            let keys: BTreeSet<_> = c.vars.keys().cloned().collect();
            assert_eq!(
                keys, vars,
                "{p}: case `{}` defines different variables",
                c.name
            );
        }
        let corr: BTreeSet<_> = r.cases.correctness.iter().map(|c| &c.name).collect();
        let perf: BTreeSet<_> = r.cases.performance.iter().map(|c| &c.name).collect();
        assert_eq!(
            corr.len(),
            r.cases.correctness.len(),
            "{p}: duplicate case name"
        );

        for (name, c) in &r.contracts {
            if let Some(cpu) = &c.cpu {
                assert!(
                    cpu.builtin()
                        .is_some_and(|n| cugrade::baseline::lookup(n).is_some()),
                    "{p}: contract `{name}` names unknown CPU implementation `{cpu}`"
                );
            }
            // Expressions may use the case variables, scalar parameters, eps, u (the declared
            // precision's unit roundoff), functions and
            // `<float buffer>_abs_sum` / `_abs_max`.
            let mut known: BTreeSet<String> = vars.clone();
            known.extend(FUNCS.iter().map(|s| s.to_string()));
            for prm in &c.params {
                known.insert(prm.name.clone());
                if prm.ty.starts_with("f32") {
                    known.insert(format!("{}_abs_sum", prm.name));
                    known.insert(format!("{}_abs_max", prm.name));
                }
            }
            let mut exprs: Vec<&Expr> = c.launch.block.iter().chain(&c.launch.grid).collect();
            exprs.extend(c.launch.shared_bytes.iter());
            for t in std::iter::once(&c.tolerance)
                .chain(c.params.iter().filter_map(|p| p.tolerance.as_ref()))
            {
                exprs.extend(t.abs.iter().chain(t.rel.iter()).chain(t.sum.iter()));
            }
            for prm in &c.params {
                exprs.extend(prm.len.iter().chain(prm.value.iter()));
                exprs.extend(prm.shape.iter().flatten());
                if prm.ty.ends_with('*') {
                    assert!(prm.len.is_some(), "{p}: buffer `{}` has no len", prm.name);
                } else {
                    assert!(
                        prm.value.is_some(),
                        "{p}: scalar `{}` has no value",
                        prm.name
                    );
                }
            }
            for e in exprs {
                for id in idents(e) {
                    assert!(
                        known.contains(&id),
                        "{p}: contract `{name}`: unknown name `{id}` in {e:?}"
                    );
                }
            }
        }

        let mut ids = BTreeSet::new();
        for m in &r.milestones {
            assert!(ids.insert(&m.id), "{p}: duplicate milestone {}", m.id);
            assert!(
                r.contracts.contains_key(&m.contract),
                "{p}: {}: contract",
                m.id
            );
            for c in &m.correctness.cases {
                assert!(corr.contains(c), "{p}: {}: unknown case {c}", m.id);
            }
            for s in &m.performance {
                assert!(
                    perf.contains(&s.case),
                    "{p}: {}: unknown perf case {}",
                    m.id,
                    s.case
                );
                if let Against::Cublas = s.against {
                    assert!(
                        ["M", "N", "K"].iter().all(|v| vars.contains(*v)),
                        "{p}: cublas needs M, N, K"
                    );
                }
                let mins: Vec<f64> = s.tiers.iter().map(|t| t.min).collect();
                let pts: Vec<f64> = s.tiers.iter().map(|t| t.points).collect();
                assert!(
                    mins.windows(2).all(|w| w[0] < w[1]),
                    "{p}: {}: tier mins ascend",
                    s.name
                );
                assert!(
                    pts.windows(2).all(|w| w[0] < w[1]),
                    "{p}: {}: tier points ascend",
                    s.name
                );
                // The pass bar may sit below the top tier where the H200 measurements put it
                // there (docs/labs/*.md); it must never sit above what any tier rewards.
                if let (Some(min), Some(last)) = (s.min, mins.last()) {
                    assert!(
                        min <= *last,
                        "{p}: {}: min {min} above the top tier {last}",
                        s.name
                    );
                    assert!(
                        mins.contains(&min),
                        "{p}: {}: min {min} is not one of the tiers",
                        s.name
                    );
                }
                assert!(
                    !s.tiers.is_empty() || s.points.is_some(),
                    "{p}: {}: no points",
                    s.name
                );
            }
            for mt in &m.metrics {
                assert!(
                    Metrics::NAMES.contains(&mt.metric.as_str()),
                    "{p}: metric {}",
                    mt.metric
                );
                assert!(corr.contains(&mt.case), "{p}: metric case {}", mt.case);
                assert!(mt.min.is_some() || mt.max.is_some(), "{p}: metric bound");
            }
        }

        // Every entry the grader will look up in the reference is defined there.
        let src = std::fs::read_to_string(reference_path(path, r)).unwrap();
        let python = reference_path(path, r)
            .extension()
            .is_some_and(|e| e == "py");
        for entry in reference_entries(r).keys() {
            let def = if python {
                format!("\ndef {entry}(table):")
            } else {
                format!("extern \"C\" __global__ void {entry}(")
            };
            assert!(
                src.contains(&def),
                "{p}: reference does not define `{entry}`"
            );
        }
    }
}

#[test]
fn example_expectations_match_their_rubrics() {
    let rubrics: BTreeMap<String, Rubric> = rubrics()
        .into_iter()
        .map(|(p, r)| (lab_name(&p), r))
        .collect();
    let examples = examples();
    let mut correct_per_lab: BTreeMap<&str, usize> = BTreeMap::new();
    for ex in &examples {
        let name = ex.name();
        let r = &rubrics[&ex.lab];
        let ids: BTreeSet<_> = r.milestones.iter().map(|m| m.id.clone()).collect();
        let listed: BTreeSet<_> = ex.expected.milestones.keys().cloned().collect();
        assert_eq!(
            listed, ids,
            "{name}: expected.yaml must list every milestone"
        );
        for k in ex.expected.gpu.keys() {
            assert!(ids.contains(k), "{name}: gpu: unknown milestone {k}");
        }
        for m in &r.milestones {
            let emu = ex.expected.milestones[&m.id];
            // The emulator cannot time, so a milestone with performance checks is at best
            // `skipped` there; one without cannot be skipped when everything ran.
            if !m.performance.is_empty() {
                assert_ne!(
                    emu,
                    Status::Pass,
                    "{name}: {} has perf checks: skipped on emu",
                    m.id
                );
            } else {
                assert_ne!(emu, Status::Skipped, "{name}: {} has no perf checks", m.id);
            }
            if let Some(g) = ex.expected.gpu.get(&m.id) {
                assert_ne!(*g, Status::Skipped, "{name}: nothing is skipped on the GPU");
                assert_ne!(*g, emu, "{name}: gpu lists only differences");
            }
        }
        if ex
            .expected
            .milestones
            .values()
            .all(|s| matches!(s, Status::Pass | Status::Skipped))
        {
            *correct_per_lab.entry(ex.lab.as_str()).or_default() += 1;
        }
        if !ex.expected.hint_contains.is_empty() {
            assert!(
                ex.expected
                    .milestones
                    .values()
                    .any(|s| matches!(s, Status::Fail | Status::Error)),
                "{name}: hints are only shown for failures"
            );
        }
        let manifest = ex.dir.join("cugrade.yaml");
        if manifest.exists() {
            check_manifest(&name, &manifest, r);
        }
    }
    for lab in LABS {
        assert!(
            correct_per_lab.get(lab).copied().unwrap_or(0) >= 2,
            "{lab}: needs a correct naive and a correct optimized example"
        );
    }
}

fn check_manifest(name: &str, path: &std::path::Path, r: &Rubric) {
    let text = std::fs::read_to_string(path).unwrap();
    let v: serde_yaml::Mapping = serde_yaml::from_str(&text).unwrap();
    for (k, val) in &v {
        match k.as_str() {
            Some("student") => {}
            Some("launch") => {
                assert!(
                    r.allow_launch_override,
                    "{name}: rubric forbids launch overrides"
                );
                let kernels: BTreeSet<_> = r.milestones.iter().map(|m| m.kernel.as_str()).collect();
                for (kernel, l) in val.as_mapping().unwrap() {
                    let kernel = kernel.as_str().unwrap();
                    assert!(
                        kernels.contains(kernel),
                        "{name}: override for unknown kernel {kernel}"
                    );
                    let l = l.as_mapping().unwrap();
                    for key in l.keys() {
                        assert!(
                            ["block", "grid", "shared_bytes"].contains(&key.as_str().unwrap()),
                            "{name}: launch key {key:?}"
                        );
                    }
                }
            }
            other => panic!("{name}: unknown manifest key {other:?}"),
        }
    }
}

/// The classic mistakes the course promises example verdicts for, each present at least once.
#[test]
fn the_classic_mistakes_all_have_examples() {
    let names: BTreeSet<String> = examples().iter().map(|e| e.name()).collect();
    for needed in [
        "vector-add/missing_bounds",
        "vector-add/off_by_one",
        "vector-add/uncoalesced",
        "vector-add/compile_error",
        "vector-add/infinite_loop",
        "vector-add/missing_kernel",
        "reduction/missing_bounds",
        "reduction/missing_syncthreads",
        "reduction/syncthreads_in_branch",
        "reduction/off_by_one",
        "reduction/compile_error",
        "reduction/infinite_loop",
        "matmul/transposed_operand",
        "softmax/unstable",
        "transpose/naive_for_both",
    ] {
        assert!(names.contains(needed), "missing example {needed}");
    }
}

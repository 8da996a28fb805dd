//! The cohort summary's section on the GPUs that timed it (`grade --gpus`): one line per GPU
//! with its students, and a warning where a student's checks ran on more than one GPU or where
//! GPUs of several models timed checks with an absolute bar (merged shards from unlike nodes).

use super::markdown::inline;
use crate::backend::GpuRecord;
use crate::result::GradeResult;
use std::fmt::Write as _;

/// The GPUs a student's performance checks were timed on (each check's `timing.device`),
/// without repeats, in check order.
pub fn check_gpus(r: &GradeResult) -> Vec<&GpuRecord> {
    let mut out: Vec<&GpuRecord> = Vec::new();
    for c in r.milestones.iter().flat_map(|m| &m.checks) {
        if let Some(g) = c.timing.as_ref().and_then(|t| t.device.as_ref())
            && !out.iter().any(|o| same_gpu(o, g))
        {
            out.push(g);
        }
    }
    out
}

/// One physical GPU: the same UUID where both have one, else the same ordinal, model and bus.
fn same_gpu(a: &GpuRecord, b: &GpuRecord) -> bool {
    match (&a.uuid, &b.uuid) {
        (Some(x), Some(y)) => x == y,
        _ => a.index == b.index && a.name == b.name && a.pci_bus_id == b.pci_bus_id,
    }
}

/// The number of performance checks in `results` whose bar is absolute (a baseline not timed
/// on the student's GPU: the CPU).
fn absolute_checks(results: &[GradeResult]) -> usize {
    results
        .iter()
        .flat_map(|r| r.milestones.iter().flat_map(|m| &m.checks))
        .filter_map(|c| c.timing.as_ref()?.baseline.as_ref())
        .filter(|b| !b.paired)
        .count()
}

/// `## GPUs` for summary.md; nothing when no result names a GPU (the emulator).
pub fn section(out: &mut String, results: &[GradeResult]) {
    let mut gpus: Vec<(&GpuRecord, usize)> = Vec::new();
    for g in results.iter().filter_map(|r| r.run.gpu.as_ref()) {
        match gpus.iter_mut().find(|(k, _)| same_gpu(k, g)) {
            Some((_, n)) => *n += 1,
            None => gpus.push((g, 1)),
        }
    }
    if gpus.is_empty() {
        return;
    }
    gpus.sort_by(|a, b| (a.0.index, &a.0.uuid).cmp(&(b.0.index, &b.0.uuid)));
    let mut models: Vec<&str> = gpus.iter().map(|(g, _)| g.name.as_str()).collect();
    models.sort_unstable();
    models.dedup();
    let _ = writeln!(
        out,
        "\n## GPUs\n\nGraded on {} GPU{} ({}). Each student's performance checks, and the \
         baselines paired with them, were timed on that student's one GPU (`run.gpu` and each \
         check's `timing.device` in result.json).\n",
        gpus.len(),
        if gpus.len() == 1 { "" } else { "s" },
        models
            .iter()
            .map(|m| inline(m))
            .collect::<Vec<_>>()
            .join(", ")
    );
    out.push_str(
        "| GPU | Model | UUID | PCI bus id | Students |\n| ---: | --- | --- | --- | ---: |\n",
    );
    for (g, n) in &gpus {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {n} |",
            g.index,
            inline(&g.name),
            inline(g.uuid.as_deref().unwrap_or("-")),
            inline(g.pci_bus_id.as_deref().unwrap_or("-")),
        );
    }
    let split: Vec<String> = results
        .iter()
        .filter(|r| check_gpus(r).len() > 1)
        .map(|r| format!("`{}`", inline(r.key())))
        .collect();
    if !split.is_empty() {
        let _ = writeln!(
            out,
            "\n> [!CAUTION]\n> The performance checks of {} were timed on more than one GPU: \
             their speed points are not comparable with each other. Grade them again.",
            split.join(", ")
        );
    }
    let absolute = absolute_checks(results);
    if models.len() > 1 && absolute > 0 {
        let _ = writeln!(
            out,
            "\n> [!WARNING]\n> Students were timed on GPUs of {} models, and {absolute} \
             performance checks compare with an absolute bar (the CPU): the same kernel scores \
             higher on the faster model. `grade --gpus` refuses this mix; it can only come from \
             shards graded on unlike machines. Grade the cohort on one model \
             (docs/cluster.md#several-gpus).",
            models.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{BaselineRecord, Measurement, StopReason};
    use crate::result::{Check, CheckKind, MilestoneResult, RunInfo, Status};
    use crate::rubric::schema::CacheMode;

    fn gpu(index: usize, name: &str) -> GpuRecord {
        GpuRecord {
            index,
            name: name.into(),
            uuid: Some(format!("GPU-{index}")),
            pci_bus_id: Some(format!("0000:0{index}:00.0")),
        }
    }

    fn timed(on: &GpuRecord, paired: bool) -> Check {
        let mut c = Check::pass(CheckKind::Performance, "speed", "fast");
        c.timing = Some(Box::new(Measurement {
            samples: 1,
            median_ms: 1.0,
            min_ms: 1.0,
            noise: 0.0,
            noise_target: 0.01,
            target_met: true,
            stop: StopReason::NoiseTarget,
            budget_s: 2.0,
            cache: CacheMode::Cold,
            probe_ms: 1.0,
            launches_verified: 1,
            samples_ms: vec![1.0],
            baseline: Some(BaselineRecord {
                kind: if paired { "reference:r" } else { "cpu" }.into(),
                median_ms: 2.0,
                paired,
                source: None,
                cpu: None,
            }),
            ratio: None,
            near_edge: None,
            clocks: None,
            gpu: None,
            lower_bound_ms: None,
            device: Some(on.clone()),
        }));
        c
    }

    fn student(name: &str, on: &GpuRecord, checks: Vec<Check>) -> GradeResult {
        GradeResult {
            assignment: "a".into(),
            student: name.into(),
            student_id: None,
            id: name.into(),
            entry: name.into(),
            flags: vec![],
            backend: "cuda".into(),
            seed: 1,
            score: 1.0,
            max_score: 1.0,
            milestones: vec![MilestoneResult {
                id: "m".into(),
                title: "m".into(),
                status: Status::Pass,
                score: 1.0,
                max_score: 1.0,
                checks,
                kernel: "k".into(),
                provisional: false,
            }],
            submission_sha256: String::new(),
            rubric_sha256: String::new(),
            compile: None,
            run: RunInfo {
                gpu: Some(on.clone()),
                ..Default::default()
            },
            notes: vec![],
        }
    }

    #[test]
    fn one_line_per_gpu_with_its_students() {
        let (a, b) = (gpu(0, "NVIDIA H200"), gpu(1, "NVIDIA H200"));
        let results = vec![
            student("ann", &a, vec![timed(&a, false)]),
            student("bob", &b, vec![timed(&b, false)]),
            student("cy", &a, vec![timed(&a, false), timed(&a, false)]),
        ];
        let mut s = String::new();
        section(&mut s, &results);
        assert!(s.contains("Graded on 2 GPUs (NVIDIA H200)"), "{s}");
        assert!(
            s.contains("| 0 | NVIDIA H200 | GPU-0 | 0000:00:00.0 | 2 |"),
            "{s}"
        );
        assert!(
            s.contains("| 1 | NVIDIA H200 | GPU-1 | 0000:01:00.0 | 1 |"),
            "{s}"
        );
        assert!(!s.contains("CAUTION") && !s.contains("WARNING"), "{s}");
        // The emulator: no section.
        let mut none = String::new();
        let mut emu = results[0].clone();
        emu.run.gpu = None;
        section(&mut none, &[emu]);
        assert!(none.is_empty());
    }

    #[test]
    fn split_students_and_mixed_models_with_absolute_bars_are_flagged() {
        let (a, b) = (gpu(0, "NVIDIA H100 80GB HBM3"), gpu(1, "NVIDIA H200"));
        let split = student("ann", &a, vec![timed(&a, true), timed(&b, true)]);
        assert_eq!(check_gpus(&split).len(), 2);
        let mut s = String::new();
        section(&mut s, &[split, student("bob", &b, vec![timed(&b, true)])]);
        assert!(s.contains("CAUTION") && s.contains("`ann`"), "{s}");
        // Two models, paired ratios only: no warning.
        assert!(!s.contains("WARNING"), "{s}");
        let mut s = String::new();
        let results = vec![
            student("ann", &a, vec![timed(&a, false)]),
            student("bob", &b, vec![timed(&b, false)]),
        ];
        section(&mut s, &results);
        assert!(
            s.contains("GPUs of 2 models, and 2 performance checks"),
            "{s}"
        );
        assert!(!s.contains("CAUTION"), "{s}");
    }
}

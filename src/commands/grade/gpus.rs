//! `grade --gpus LIST --jobs N`: which job grades on which GPU, and whether a cohort may be
//! timed on GPUs of more than one model.
//!
//! Job `j` grades on the `j`-th entry of the list, round robin, and keeps that GPU for every
//! student it takes from the queue: a student is graded (correctness and every performance
//! check, baselines included) on one GPU. A GPU's timing lock is keyed by the GPU itself (its
//! PCI bus id), so a GPU listed twice (`--gpus 0,0`) has one lock and twice the jobs. These
//! functions take the GPUs as data, so the decisions are tested without a GPU.

use crate::backend::GpuRecord;
use crate::rubric::schema::{Against, Milestone};

/// A job of `grade --jobs N` and the GPU it grades on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub job: usize,
    pub gpu: GpuRecord,
    /// The GPU's timing-lock key (`measure::lock`).
    pub lock: String,
}

/// The key of a GPU's timing lock: its PCI bus id, else its UUID, else its ordinal (the same
/// GPU, listed twice, always gets the same key).
pub fn lock_key(g: &GpuRecord) -> String {
    g.pci_bus_id
        .clone()
        .or_else(|| g.uuid.clone())
        .unwrap_or_else(|| format!("cuda-ordinal-{}", g.index))
}

/// The job slots: job `j` on `gpus[j % gpus.len()]`. Empty when `gpus` is.
pub fn assign(gpus: &[GpuRecord], jobs: usize) -> Vec<Slot> {
    if gpus.is_empty() {
        return Vec::new();
    }
    (0..jobs.max(1))
        .map(|job| {
            let gpu = gpus[job % gpus.len()].clone();
            Slot {
                job,
                lock: lock_key(&gpu),
                gpu,
            }
        })
        .collect()
}

/// The number of distinct GPUs in a `--gpus` list (`0,0,1` is two).
pub fn distinct(list: &[usize]) -> usize {
    let mut v = list.to_vec();
    v.sort_unstable();
    v.dedup();
    v.len()
}

/// The default `--jobs` for a `--gpus` list: one job per distinct GPU (at least 1).
pub fn default_jobs(list: &[usize]) -> usize {
    distinct(list).max(1)
}

/// A note when fewer jobs than distinct GPUs leave some GPUs idle.
pub fn idle_note(list: &[usize], jobs: usize) -> Option<String> {
    let n = distinct(list);
    (jobs < n).then(|| {
        format!(
            "note: --jobs {jobs} with {n} GPUs in --gpus {}: only {} of them will grade; give \
             --jobs {n} or more to use every GPU",
            join(list),
            jobs
        )
    })
}

fn join(list: &[usize]) -> String {
    list.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// A performance check whose bar does not move with the GPU that timed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbsoluteCheck {
    pub milestone: String,
    pub check: String,
    /// `cpu` or `cpu_parallel`.
    pub against: &'static str,
}

/// Whether a check's ratio is against an absolute bar: the CPU's time is the same whichever
/// GPU timed the student, so the ratio grows with the GPU's speed. A reference kernel, cuBLAS
/// and the copy bandwidth are timed on the student's own GPU, launch for launch (paired).
pub fn absolute(against: &Against) -> Option<&'static str> {
    match against {
        Against::Cpu => Some("cpu"),
        Against::CpuParallel => Some("cpu_parallel"),
        Against::Reference(_) | Against::Cublas | Against::CopyBandwidth { .. } | Against::Nccl => {
            None
        }
    }
}

/// The rubric's performance checks with an absolute bar.
pub fn absolute_checks(milestones: &[Milestone]) -> Vec<AbsoluteCheck> {
    milestones
        .iter()
        .flat_map(|m| {
            m.performance.iter().filter_map(move |p| {
                absolute(&p.against).map(|against| AbsoluteCheck {
                    milestone: m.id.clone(),
                    check: p.name.clone(),
                    against,
                })
            })
        })
        .collect()
}

/// May these GPUs time one cohort? Yes when they are all of one model, or when no check has
/// an absolute bar (every ratio is paired on the student's own GPU). `Err` is the message for
/// the user (exit 2): the models, the checks, and the fix.
pub fn check_models(gpus: &[GpuRecord], absolute: &[AbsoluteCheck]) -> Result<(), String> {
    let mut models: Vec<&str> = gpus.iter().map(|g| g.name.as_str()).collect();
    models.sort_unstable();
    models.dedup();
    if models.len() <= 1 || absolute.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = gpus
        .iter()
        .map(|g| format!("GPU {} is an {}", g.index, g.name))
        .collect();
    let mut checks: Vec<String> = absolute
        .iter()
        .take(3)
        .map(|c| format!("{} `{}` (against {})", c.milestone, c.check, c.against))
        .collect();
    if absolute.len() > 3 {
        checks.push(format!("{} more", absolute.len() - 3));
    }
    let one_model: Vec<String> = models
        .iter()
        .map(|m| {
            let of: Vec<usize> = gpus
                .iter()
                .filter(|g| g.name == *m)
                .map(|g| g.index)
                .collect();
            format!("--gpus {}", join(&of))
        })
        .collect();
    Err(format!(
        "--gpus mixes {} GPU models ({}), and the rubric compares speed with an absolute bar in \
         {} performance check{} ({}): the same kernel would score higher on the faster model, \
         so a student's grade would depend on the GPU that timed them. cugrade does not mix \
         models for such a rubric.\nfix: list GPUs of one model ({}), or compare those checks \
         with a baseline timed on the student's own GPU (`against: {{reference: KERNEL}}`, \
         `cublas` or `copy_bandwidth`); docs/cluster.md#several-gpus says which checks are \
         absolute",
        models.len(),
        listed.join(", "),
        absolute.len(),
        if absolute.len() == 1 { "" } else { "s" },
        checks.join(", "),
        one_model.join(" or "),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: usize, name: &str, pci: Option<&str>) -> GpuRecord {
        GpuRecord {
            index,
            name: name.into(),
            uuid: Some(format!("GPU-{index:08x}-0000-0000-0000-000000000000")),
            pci_bus_id: pci.map(str::to_string),
        }
    }

    #[test]
    fn jobs_spread_round_robin_and_a_gpu_listed_twice_has_one_lock() {
        let g0 = gpu(0, "NVIDIA H200", Some("0000:17:00.0"));
        let g1 = gpu(1, "NVIDIA H200", Some("0000:2a:00.0"));
        let slots = assign(&[g0.clone(), g1.clone()], 16);
        assert_eq!(slots.len(), 16);
        let on = |g: &GpuRecord| slots.iter().filter(|s| &s.gpu == g).count();
        assert_eq!((on(&g0), on(&g1)), (8, 8));
        // Odd jobs: the counts differ by one at most.
        let slots = assign(&[g0.clone(), g1.clone()], 5);
        let idx: Vec<usize> = slots.iter().map(|s| s.gpu.index).collect();
        assert_eq!(idx, [0, 1, 0, 1, 0]);
        // Each GPU its own lock; `--gpus 0,0`: two slots, one GPU, one lock.
        assert_ne!(slots[0].lock, slots[1].lock);
        let twice = assign(&[g0.clone(), g0.clone()], 4);
        assert!(
            twice
                .iter()
                .all(|s| s.lock == "0000:17:00.0" && s.gpu == g0)
        );
        // Without a PCI bus id the UUID names the GPU, then the ordinal: never no lock.
        let bare = GpuRecord {
            uuid: None,
            ..gpu(3, "X", None)
        };
        assert_eq!(
            lock_key(&gpu(2, "X", None)),
            gpu(2, "X", None).uuid.unwrap()
        );
        assert_eq!(lock_key(&bare), "cuda-ordinal-3");
        assert!(assign(&[], 4).is_empty());
        assert_eq!(assign(&[g1], 0).len(), 1);
    }

    #[test]
    fn default_jobs_use_every_distinct_gpu_and_fewer_jobs_are_noted() {
        assert_eq!(default_jobs(&[]), 1);
        assert_eq!(default_jobs(&[0, 1]), 2);
        assert_eq!(default_jobs(&[0, 0]), 1);
        assert_eq!(default_jobs(&[1, 0, 1, 2]), 3);
        assert!(idle_note(&[0, 1], 2).is_none());
        assert!(idle_note(&[0, 0], 1).is_none());
        let n = idle_note(&[0, 1, 2], 2).unwrap();
        assert!(n.contains("--jobs 2") && n.contains("--gpus 0,1,2") && n.contains("--jobs 3"));
    }

    fn rubric() -> Vec<Milestone> {
        let yaml = |against: &str| {
            format!(
                "id: m\nkernel: k\ncontract: c\ncorrectness: {{points: 1}}\nperformance:\n  \
                 - {{name: speed, case: big, against: {against}, min: 2, points: 1}}\n"
            )
        };
        [
            "cpu",
            "cpu_parallel",
            "{reference: ref}",
            "cublas",
            "{copy_bandwidth: {bytes: n}}",
        ]
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let mut m: Milestone = serde_yaml::from_str(&yaml(a)).unwrap();
            m.id = format!("m{i}");
            m
        })
        .collect()
    }

    #[test]
    fn only_cpu_bars_are_absolute() {
        let abs = absolute_checks(&rubric());
        let found: Vec<(&str, &str)> = abs
            .iter()
            .map(|c| (c.milestone.as_str(), c.against))
            .collect();
        assert_eq!(found, [("m0", "cpu"), ("m1", "cpu_parallel")]);
    }

    #[test]
    fn models_mix_only_when_every_ratio_is_paired() {
        let h100 = gpu(0, "NVIDIA H100 80GB HBM3", Some("0000:17:00.0"));
        let h200 = gpu(1, "NVIDIA H200", Some("0000:2a:00.0"));
        let h200b = gpu(2, "NVIDIA H200", Some("0000:3b:00.0"));
        let all = rubric();
        let abs = absolute_checks(&all);
        let paired = absolute_checks(&all[2..]);
        assert!(paired.is_empty());
        // One model: always fine.
        assert!(check_models(&[h200.clone(), h200b.clone()], &abs).is_ok());
        assert!(check_models(&[h100.clone(), h100.clone()], &abs).is_ok());
        // Two models, paired ratios only: fine.
        assert!(check_models(&[h100.clone(), h200.clone()], &paired).is_ok());
        // Two models and an absolute bar: refused, naming both models, the checks and the fix.
        let e = check_models(&[h100, h200, h200b], &abs).unwrap_err();
        for want in [
            "2 GPU models",
            "GPU 0 is an NVIDIA H100 80GB HBM3",
            "GPU 1 is an NVIDIA H200",
            "m0 `speed` (against cpu)",
            "m1 `speed` (against cpu_parallel)",
            "fix: list GPUs of one model (--gpus 0 or --gpus 1,2)",
        ] {
            assert!(e.contains(want), "{want:?} not in {e}");
        }
    }
}

//! NVIDIA's compute-sanitizer on the GPU (issue 19; one process per tool, issue 29): on
//! `--backend cuda`, where `compute-sanitizer` is installed, every milestone's kernel runs once
//! more per tool (memcheck, racecheck, synccheck, initcheck) on its smallest correctness
//! cases. All of a student's launches go into one `cugrade __profile-kernel` process per tool
//! (`worker::profiled`), the four tools side by side, while the student's grading goes on:
//! a compute-sanitizer process costs most of a second to start whatever it runs, so one per
//! case, tool and milestone made a student's check 24 processes and 17 s.
//!
//! Each launch's copy of its module names the kernel `cugrade_m<milestone>_c<case>`, so a
//! finding says which milestone and case it came from. A launch that fails ends its process
//! (the context is unusable after a fault): the launches after it run again in a fresh one.
//! The tools hold the GPU's shared lock throughout: they never run beside another student's
//! timed section. Each tool's report goes to a log file in the run's own folder, never
//! through the kernel's stdout, so nothing the kernel prints can pass for a finding or hide
//! one. The PTX emulator's pass (`sanitizer::on_emulator`) runs as well: each finding says
//! which one saw it. docs/sanitizers.md has the table.

use super::context::{Infrastructure, Options};
use super::sanitizer;
use crate::result::{Check, CheckKind};
use crate::rubric::convention::Signature;
use crate::rubric::plan::MilestonePlan;
use crate::worker::nsight::case_launch;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

mod batch;
mod report;

use batch::Batch;

/// The tools run, in order.
pub const TOOLS: [&str; 4] = ["memcheck", "racecheck", "synccheck", "initcheck"];
/// How long one launch may take under a tool (racecheck is the slowest, about 100x).
const LAUNCH_DEADLINE: Duration = Duration::from_secs(30);
/// How long one tool's process may take: its start, and each launch's deadline.
fn process_timeout(launches: usize) -> Duration {
    Duration::from_secs(30) + LAUNCH_DEADLINE * launches.max(1) as u32
}
/// What the report names as the tool that ran.
pub const TOOL: &str =
    "compute-sanitizer's memcheck, racecheck, synccheck and initcheck on the GPU";

/// A milestone's kernel to check: its position among the plan's milestones, its plan, its
/// module and, for Numba, its signature.
pub(super) struct Target<'a> {
    pub(super) milestone: usize,
    pub(super) plan: &'a MilestonePlan,
    pub(super) ptx: &'a str,
    pub(super) numba: Option<&'a Signature>,
}

/// The name a launch's copy of the module gives the kernel: the student's tag in its batch,
/// the milestone, the case.
fn entry(tag: usize, milestone: usize, case: usize) -> String {
    format!("cugrade_s{tag}_m{milestone}_c{case}")
}

/// `ptx` with the entry `from` declared as `to`. Only the declaration changes: a kernel's name
/// can be a file's too (`attention` in `.file 1 "attention.cu"`), and nothing else in a module
/// names an entry. `None` when the module declares no such entry.
pub fn rename_kernel(ptx: &str, from: &str, to: &str) -> Option<String> {
    let declared =
        regex::Regex::new(&format!(r"(\.entry\s+){}(\s*\()", regex::escape(from))).ok()?;
    declared.is_match(ptx).then(|| {
        declared
            .replace(ptx, format!("${{1}}{to}${{2}}"))
            .into_owned()
    })
}

/// One launch of a batch: whose it is, and what it sends.
struct Planned {
    /// The student's part in the batch.
    part: usize,
    milestone: usize,
    /// The kernel's own name (the launch's is `spec.kernel`).
    kernel: String,
    case: String,
    spec: crate::worker::protocol::RunSpec,
    buffers: Vec<Vec<u8>>,
}

/// One launch of a part: its milestone, kernel, case, module (renamed when the batch runs),
/// spec and buffers.
type PartLaunch = (
    usize,
    String,
    String,
    String,
    crate::worker::protocol::RunSpec,
    Vec<Vec<u8>>,
);

/// The launches a tool's process ended (`profiled::ended`), by index in the batch.
type Ended = BTreeMap<usize, Result<(), String>>;

/// One student's launches for compute-sanitizer, planned and owned: a batch runs one or more
/// students' parts in one process per tool (`grade` batches a job's students: a CUDA context
/// per tool per student made context creation, which the driver serialises, a cohort's
/// bottleneck).
#[derive(Default)]
pub struct Part {
    launches: Vec<PartLaunch>,
    /// Why a milestone's cases could not be planned.
    problems: BTreeMap<usize, Vec<String>>,
    /// The milestones checked.
    milestones: BTreeSet<usize>,
}

impl Part {
    /// The milestones whose kernels the part checks.
    pub fn milestones(&self) -> &BTreeSet<usize> {
        &self.milestones
    }
}

/// Plan `targets`' launches: each target's smallest correctness cases.
pub(super) fn plan(targets: &[Target], seed: u64) -> Part {
    let mut part = Part {
        launches: Vec::new(),
        problems: BTreeMap::new(),
        milestones: targets.iter().map(|t| t.milestone).collect(),
    };
    for t in targets {
        let cases = sanitizer::smallest_cases(t.plan);
        if cases.is_empty() {
            part.problems
                .entry(t.milestone)
                .or_default()
                .push("no correctness case is small enough for compute-sanitizer".into());
        }
        for case in cases {
            match case_launch(t.plan, case, &t.plan.kernel, t.numba, seed, LAUNCH_DEADLINE) {
                Ok((spec, buffers)) => part.launches.push((
                    t.milestone,
                    t.plan.kernel.clone(),
                    case.name.clone(),
                    t.ptx.to_string(),
                    spec,
                    buffers,
                )),
                Err(e) => part
                    .problems
                    .entry(t.milestone)
                    .or_default()
                    .push(format!("{}: {e}", case.name)),
            }
        }
    }
    part
}

/// compute-sanitizer's findings for one student, by milestone, once its tools have run (see
/// [`start`]).
pub(super) struct Pending {
    thread: Option<std::thread::JoinHandle<Outcome>>,
    done: Option<Outcome>,
    /// Milestones whose kernel is checked.
    targets: BTreeSet<usize>,
}

/// What the tools found: per part, per milestone, its checks; and the seconds the batch took
/// and waited for the GPU's lock.
pub struct Outcome {
    pub checks: Vec<BTreeMap<usize, Vec<Check>>>,
    pub seconds: f64,
    pub waited: f64,
}

impl Pending {
    /// The milestone's compute-sanitizer checks (waiting for the tools the first time, whose
    /// wall time and lock wait then go to `phases`), or `None` when its kernel was not in the
    /// batch.
    pub(super) fn take(
        &mut self,
        milestone: usize,
        phases: &mut crate::result::Phases,
    ) -> Option<Vec<Check>> {
        if let Some(t) = self.thread.take() {
            let o = t.join().unwrap_or_else(|_| Outcome {
                checks: Vec::new(),
                seconds: 0.0,
                waited: 0.0,
            });
            phases.add(crate::result::Phase::GpuSanitizer, o.seconds, o.waited);
            self.done = Some(o);
        }
        if !self.targets.contains(&milestone) {
            return None;
        }
        let found = self
            .done
            .as_mut()
            .and_then(|o| o.checks.first_mut())
            .and_then(|c| c.remove(&milestone))
            .unwrap_or_else(|| vec![missing()]);
        Some(found)
    }
}

/// The check of a kernel the batch has no result for (its thread ended early).
pub fn missing() -> Check {
    Check::skipped(
        CheckKind::Sanitizer,
        NAME,
        "compute-sanitizer's pass ended without a result for this kernel; the PTX emulator's pass still ran",
    )
}

/// Start compute-sanitizer `cs`'s tools on every target's smallest correctness cases, beside
/// the caller: one process per tool, all launches in it, under the GPU's shared lock.
pub(super) fn start(
    cs: &Path,
    targets: &[Target],
    opts: &Options,
) -> Result<Pending, Infrastructure> {
    let part = plan(targets, opts.seed);
    let milestones = part.milestones.clone();
    let batch = Batch::new(cs, opts.device, opts.gpu.clone(), vec![part]);
    let thread = std::thread::Builder::new()
        .name("compute-sanitizer".into())
        .spawn(move || batch.run())
        .map_err(|e| Infrastructure(format!("cannot start compute-sanitizer's thread: {e}")))?;
    Ok(Pending {
        thread: Some(thread),
        done: None,
        targets: milestones,
    })
}

/// Run compute-sanitizer `cs`'s tools over several students' parts at once, on GPU `device`
/// (lock key `gpu`): one process per tool for all of them.
pub fn run_parts(cs: &Path, device: usize, gpu: Option<String>, parts: Vec<Part>) -> Outcome {
    Batch::new(cs, device, gpu, parts).run()
}

const NAME: &str = "sanitizer (GPU)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_s_copy_renames_the_entry_alone() {
        let ptx = ".version 8.0\n.file 1 \"attention.cu\"\n.visible .entry attention(\n.param .u64 attention_param_0\n)\n{\nld.param.u64 %rd1, [attention_param_0];\n}\n";
        let out = rename_kernel(ptx, "attention", "cugrade_m0_c1").unwrap();
        assert!(out.contains(".entry cugrade_m0_c1(\n"), "{out}");
        // The file keeps its name; the parameters keep theirs.
        assert!(out.contains(".file 1 \"attention.cu\""), "{out}");
        assert!(out.contains("[attention_param_0]"), "{out}");
        assert_eq!(rename_kernel(ptx, "attn", "x"), None);
        assert_eq!(rename_kernel(ptx, "attention_param_0", "x"), None);
    }
}

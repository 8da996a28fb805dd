//! One milestone, stage by stage, in two halves. The first ([`front`]): locate the kernel,
//! load it, correctness. The second ([`rest`]): the sanitizers (on a GPU), performance (or
//! the estimate without one), metrics. `pipeline::grade` runs every milestone's first half,
//! then starts compute-sanitizer on all of the student's kernels at once (`gpu_sanitizer`),
//! then runs the second halves while it works. A stage that stops the milestone (no kernel, a
//! module that does not load) ends it with the checks so far; a timeout or fault ends the
//! student's worker (the next milestone gets a fresh one), never the grading.

use super::build::Built;
use super::context::{Ctx, Infrastructure, Kernel, Student};
use super::correctness::Correctness;
use super::gpu_sanitizer::Target;
use super::reference::Reference;
use super::{correctness, cupy, load, locate, metrics, numba, performance, sanitizer, timed_phase};
use crate::result::{Check, Flag, Phase, Phases};
use crate::score;
use std::time::Instant;

/// What a milestone found: its checks, and flags for the instructor.
pub(super) struct Done {
    pub(super) checks: Vec<Check>,
    pub(super) flags: Vec<Flag>,
    /// The checks speak Numba (`numba::speak_numba`).
    pub(super) numba: bool,
}

/// The first half of a milestone, kept for the second.
pub(super) struct Front<'b> {
    checks: Vec<Check>,
    /// The kernel is (or should have been) a Numba kernel: its hints speak Numba.
    numba_source: bool,
    /// The loaded kernel and what its correctness cases found, when it got that far.
    ran: Option<(Kernel<'b>, Correctness)>,
    /// The kernel hung on the GPU (a timeout or a deadlock).
    hung: bool,
}

impl<'b> Front<'b> {
    /// The kernel for compute-sanitizer, when it ran and did not hang: a kernel that hung
    /// would only wait out the tools' deadlines too, and its runtime finding already says
    /// what is wrong. (A crash still goes to the sanitizers, which name the line.)
    pub(super) fn sanitizer_target<'a>(
        &'a self,
        ctx: &Ctx<'a>,
        milestone: usize,
    ) -> Option<Target<'a>> {
        let (kernel, _) = self.ran.as_ref()?;
        (!self.hung).then_some(Target {
            milestone,
            plan: ctx.plan,
            ptx: kernel.ptx,
            numba: kernel.numba.as_ref(),
        })
    }
}

/// Locate, load, correctness.
pub(super) fn front<'b>(
    ctx: &Ctx,
    built: &'b Built,
    reference: &mut Reference,
    student: &mut Student,
    sandbox: &mut Vec<String>,
    phases: &mut Phases,
) -> Result<Front<'b>, Infrastructure> {
    let started = Instant::now();
    if let Some(w) = &student.worker {
        // What the last milestone's kernel printed stays with that milestone.
        w.clear_output();
    }
    let (found, numba_source) = locate::stage(ctx, built);
    let mut front = Front {
        checks: found.checks,
        numba_source,
        ran: None,
        hung: false,
    };
    let Some(found) = found.next else {
        return Ok(front);
    };
    locate::keep(ctx, &found);
    let loaded = timed_phase(phases, Phase::Load, || {
        load::stage(ctx, found, student, sandbox)
    })?;
    front.checks.extend(loaded.checks);
    let Some(kernel) = loaded.next else {
        return Ok(front);
    };
    let mut ran = timed_phase(phases, Phase::Correctness, || {
        correctness::stage(ctx, &kernel, reference, student, started)
    })?;
    front.checks.append(&mut ran.checks);
    correctness::keep_emulator_counters(ctx, &ran.metrics);
    correctness::mark_small_cases_only(ctx, &mut front.checks);
    front.hung = correctness::hung(&front.checks);
    front.ran = Some((kernel, ran));
    Ok(front)
}

/// The sanitizers (with compute-sanitizer's findings `gpu`, when it ran), performance,
/// metrics; then the checks in the submission's language.
pub(super) fn rest(
    ctx: &Ctx,
    built: &Built,
    front: Front,
    reference: &mut Reference,
    student: &mut Student,
    gpu: Option<Vec<Check>>,
    phases: &mut Phases,
) -> Result<Done, Infrastructure> {
    let Front {
        mut checks,
        numba_source,
        ran,
        hung,
    } = front;
    let mut flags = Vec::new();
    if let Some((kernel, ran)) = ran {
        if ctx.caps().device_sanitizer && !hung {
            let (found, cross) = sanitizer::stage(
                ctx,
                &kernel,
                reference,
                &ran.gpu_outputs,
                gpu,
                &mut student.emulator,
                phases,
            );
            checks.extend(found);
            flags = cross;
        }
        let correct = score::nothing_wrong(&checks);
        let phase = if ctx.caps().timed {
            Phase::Timed
        } else {
            Phase::Estimate
        };
        checks.extend(timed_phase(phases, phase, || {
            if correct && ctx.caps().timed && !ctx.plan.performance.is_empty() {
                // Another milestone's module may be loaded since (or its fault ended the
                // worker): this one's, for the timed section.
                load::reload(ctx, &kernel, student);
            }
            performance::stage(ctx, &kernel, reference, student, correct)
        })?);
        let correct = score::nothing_wrong(&checks);
        let (found, metric_flags) = timed_phase(phases, Phase::Metrics, || {
            metrics::stage(ctx, &kernel, &ran.metrics, correct, &mut student.emulator)
        });
        checks.extend(found);
        flags.extend(metric_flags);
    }
    if numba_source {
        for c in &mut checks {
            numba::speak_numba(c, ctx.sub);
        }
    } else if built.cupy_only {
        for c in &mut checks {
            cupy::speak_cupy(c, &ctx.plan.kernel);
        }
    }
    Ok(Done {
        checks,
        flags,
        numba: numba_source,
    })
}

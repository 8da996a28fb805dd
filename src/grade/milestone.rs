//! One milestone, stage by stage: locate the kernel, load it, correctness, the sanitizers (on a
//! GPU), performance (or the estimate without one), metrics. A stage that stops the milestone
//! (no kernel, a module that does not load) ends it with the checks so far; a timeout or fault
//! ends the student's worker (the next milestone gets a fresh one), never the grading.

use super::build::Built;
use super::context::{Ctx, Infrastructure, Student};
use super::reference::Reference;
use super::{correctness, cupy, load, locate, metrics, numba, performance, sanitizer};
use crate::hints;
use crate::result::{Check, CheckKind, Flag};
use crate::score;
use std::time::Instant;

/// What a milestone found: its checks, and flags for the instructor.
pub(super) struct Done {
    pub(super) checks: Vec<Check>,
    pub(super) flags: Vec<Flag>,
}

pub(super) fn grade(
    ctx: &Ctx,
    built: &Built,
    reference: &mut Reference,
    student: &mut Student,
    sandbox: &mut Vec<String>,
) -> Result<Done, Infrastructure> {
    let started = Instant::now();
    if let Some(w) = &student.worker {
        // What the last milestone's kernel printed stays with that milestone.
        w.clear_output();
    }
    let (found, numba_source) = locate::stage(ctx, built);
    let mut checks = found.checks;
    let mut flags = Vec::new();
    if let Some(found) = found.next {
        locate::keep(ctx, &found);
        let loaded = load::stage(ctx, found, student, sandbox)?;
        checks.extend(loaded.checks);
        if let Some(kernel) = loaded.next {
            let ran = correctness::stage(ctx, &kernel, reference, student, started)?;
            checks.extend(ran.checks);
            correctness::keep_emulator_counters(ctx, &ran.metrics);
            correctness::mark_small_cases_only(ctx, &mut checks);
            // A kernel that hung on the GPU (a timeout or a deadlock) would only wait out the
            // emulator's ten-times-longer deadline there too, on every small case: its
            // runtime finding already says what is wrong. (A crash still goes to the
            // emulator, whose memcheck names the line.)
            let hung = checks.iter().any(|c| {
                c.kind == CheckKind::Runtime && c.hint.as_deref() == Some(hints::DEADLOCK)
            });
            if ctx.on_gpu() && !hung {
                let (found, cross) = sanitizer::stage(ctx, &kernel, reference, &ran.gpu_outputs);
                checks.extend(found);
                flags = cross;
            }
            let correct = score::nothing_wrong(&checks);
            checks.extend(performance::stage(
                ctx, &kernel, reference, student, correct,
            )?);
            let correct = score::nothing_wrong(&checks);
            let (found, metric_flags) = metrics::stage(ctx, &kernel, &ran.metrics, correct);
            checks.extend(found);
            flags.extend(metric_flags);
        }
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
    Ok(Done { checks, flags })
}

//! The run's jobs side by side: each takes the next student from a shared queue on its GPU,
//! holds those that wait for compute-sanitizer's pass, and writes each student once graded;
//! the first fatal error stops every job from taking another.

use super::deferred;
use super::entries::Entry;
use super::gpus;
use super::progress;
use super::student::{EntryContext, Held, grade_entry, write_entry};
use super::{Outcome, Written};
use crate::pipeline::{self, Reference};
use std::sync::Mutex;

/// What the jobs of a run share.
pub(super) struct Jobs<'a> {
    /// The students no job has taken yet.
    pub(super) queue: Mutex<std::slice::Iter<'a, Entry>>,
    pub(super) pool: deferred::Pool<(Held<'a>, pipeline::Graded)>,
    pub(super) results: Mutex<Vec<Written>>,
    /// The first fatal error (the machine's fault): no job takes another student.
    pub(super) fatal: Mutex<Option<String>>,
    pub(super) base: &'a pipeline::Options,
    pub(super) progress: &'a progress::Progress,
    pub(super) ctx: EntryContext<'a>,
}

impl<'a> Jobs<'a> {
    /// The next student to grade; none once the queue is empty or the run has failed.
    fn next(&self) -> Option<&'a Entry> {
        let stop = self.fatal.lock().map(|f| f.is_some()).unwrap_or(true);
        if stop {
            None
        } else {
            self.queue.lock().ok().and_then(|mut q| q.next())
        }
    }

    /// Keep `e` as the run's fatal error unless it has one already.
    fn fail(&self, e: String) {
        let mut f = self.fatal.lock().unwrap_or_else(|p| p.into_inner());
        f.get_or_insert(e);
    }

    /// Write students graded in full, each counted in the progress and the results.
    fn write(&self, held: Vec<Held<'a>>, graded: Vec<pipeline::Graded>) -> Result<(), String> {
        for (h, g) in held.into_iter().zip(graded) {
            let r = write_entry(h.entry, &self.ctx, g.result, h.prints, h.outcome)?;
            self.progress.graded(&r.0, r.2 == Outcome::Reused);
            self.results
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(r);
        }
        Ok(())
    }
}

/// Run `n` jobs side by side until every student is written (or the run fails), each on its
/// GPU of `slots`.
pub(super) fn grade_all(
    jobs: &Jobs<'_>,
    slots: &[(gpus::Slot, String)],
    reference: &Reference,
    n: usize,
) {
    std::thread::scope(|s| {
        for job in 0..n {
            let mut o = jobs.base.clone();
            if let Some((slot, arch)) = slots.get(job) {
                o.device = slot.gpu.index;
                o.device_name = slot.gpu.name.clone();
                o.arch = arch.clone();
                o.gpu = Some(slot.lock.clone());
                o.gpu_record = Some(slot.gpu.clone());
            }
            // One compile of the reference for the cohort; expected outputs computed once.
            let reference = reference.share(o.device, o.gpu.clone());
            s.spawn(move || run_job(jobs, o, reference));
        }
    });
}

/// One job: grade students from the queue on `o`'s GPU, then finish and write those held for
/// compute-sanitizer's pass.
fn run_job(jobs: &Jobs<'_>, o: pipeline::Options, mut reference: Reference) {
    // Counts this job out of its GPU's grading however it ends (a panic too), so
    // the others' passes never wait for it.
    let grading = jobs.pool.grading(o.gpu.clone());
    if o.arch != jobs.base.arch {
        // A GPU of another architecture needs the reference compiled for it.
        match Reference::compile(jobs.ctx.rubric, &o) {
            Ok(r) => reference = r,
            Err(e) => {
                *jobs.fatal.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.0);
                return;
            }
        }
    }
    // A student graded but for compute-sanitizer's pass waits in the pool; the
    // passes run once every job on this GPU has timed its last student
    // (`deferred`). Then they are written.
    let key = o.gpu.clone();
    grade_students(jobs, &o, &mut reference, &key);
    // Every student held is still finished and written, after a fatal error too.
    if let Some(n) = grading.finish() {
        jobs.progress.note(&format!(
            "compute-sanitizer's pass over {n} student{} (after every timed section)",
            if n == 1 { "" } else { "s" }
        ));
    }
    while let Some(batch) = jobs.pool.next_batch(&key) {
        let (held, mut graded): (Vec<Held>, Vec<pipeline::Graded>) = batch.into_iter().unzip();
        pipeline::deferred::finish(&mut graded, o.device, o.gpu.clone());
        jobs.pool.batch_done(&key);
        if let Err(e) = jobs.write(held, graded) {
            jobs.fail(e);
        }
    }
}

/// Grade students until the queue is empty or the run fails: each is written at once, or
/// held in the pool under `key` for compute-sanitizer's pass.
fn grade_students(
    jobs: &Jobs<'_>,
    o: &pipeline::Options,
    reference: &mut Reference,
    key: &Option<String>,
) {
    while let Some(entry) = jobs.next() {
        match grade_entry(entry, &jobs.ctx, o, reference) {
            Ok(mut h) if h.graded.as_ref().is_some_and(|g| g.deferred.is_some()) => {
                if let Some(g) = h.graded.take() {
                    jobs.pool.hold(key, (h, g));
                }
            }
            Ok(mut h) => {
                let graded: Vec<_> = h.graded.take().into_iter().collect();
                if let Err(e) = jobs.write(vec![h], graded) {
                    jobs.fail(e);
                    break;
                }
            }
            Err(e) => {
                jobs.fail(e);
                break;
            }
        }
    }
}

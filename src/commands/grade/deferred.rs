//! compute-sanitizer's passes of a cohort, after its timed sections (issue 29).
//!
//! A student's pass runs every tool over their kernels (`pipeline::deferred`). It runs on the
//! GPU and holds the GPU's shared lock for all of it, and a pass over several students under
//! load takes tens of seconds: every timed section that wanted the GPU meanwhile waited for it
//! to end (on an H200 with `--jobs 16`, two thirds of the cohort's wall time were timed
//! sections waiting for passes and other shared users to drain). So the jobs grade their
//! students in full but for that pass, and the passes run once every job on the GPU has
//! timed its last student: then nothing waits for them, and they run side by side, in
//! batches (one process per tool per batch) spread over the GPU's jobs. Only then are those
//! students' results final and written; a student with no pass to run (a compile error, the
//! emulator) is written at once.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex};

/// Students waiting for their pass, per GPU (by lock key; `None` without a GPU).
pub(super) struct Pool<T> {
    state: Mutex<BTreeMap<Option<String>, Gpu<T>>>,
    turn: Condvar,
}

struct Gpu<T> {
    /// Jobs on this GPU still grading students.
    grading: usize,
    jobs: usize,
    waiting: Vec<T>,
    /// The batch size, fixed when the passes begin.
    batch: Option<usize>,
    /// Batches being run.
    running: usize,
}

/// At most this many students in one batch: a launch that ends a tool's process starts a
/// fresh one for the rest, so a large batch with several faulting students runs long.
const MOST: usize = 16;

impl<T> Pool<T> {
    /// A pool for jobs on GPUs `keys` (one entry per job).
    pub(super) fn new(keys: impl IntoIterator<Item = Option<String>>) -> Pool<T> {
        let mut gpus: BTreeMap<Option<String>, Gpu<T>> = BTreeMap::new();
        for k in keys {
            let g = gpus.entry(k).or_insert(Gpu {
                grading: 0,
                jobs: 0,
                waiting: Vec::new(),
                batch: None,
                running: 0,
            });
            g.grading += 1;
            g.jobs += 1;
        }
        Pool {
            state: Mutex::new(gpus),
            turn: Condvar::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, BTreeMap<Option<String>, Gpu<T>>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A student graded but for the pass, to wait for it.
    pub(super) fn hold(&self, key: &Option<String>, held: T) {
        if let Some(g) = self.state().get_mut(key) {
            g.waiting.push(held);
        }
    }

    /// A job grading on GPU `key`: dropped or [`Grading::finish`]ed, it counts out of the
    /// GPU's grading jobs (exactly once, also when the job's thread panics).
    pub(super) fn grading(&self, key: Option<String>) -> Grading<'_, T> {
        Grading {
            pool: self,
            key,
            done: false,
        }
    }

    /// This job has graded its last student: the passes on its GPU start when every job there
    /// has. Returns how many students wait, when this job was the last.
    fn done_grading(&self, key: &Option<String>) -> Option<usize> {
        let mut st = self.state();
        let g = st.get_mut(key)?;
        g.grading = g.grading.saturating_sub(1);
        self.turn.notify_all();
        (g.grading == 0 && !g.waiting.is_empty()).then_some(g.waiting.len())
    }

    /// The next batch of students to run the pass over on GPU `key`, once every job there has
    /// finished grading; `None` when none are left. Batches are spread over half of the GPU's
    /// jobs (each batch starts four processes, one per tool), at most [`MOST`] students each.
    pub(super) fn next_batch(&self, key: &Option<String>) -> Option<Vec<T>> {
        let mut st = self.state();
        loop {
            let g = st.get_mut(key)?;
            if g.waiting.is_empty() {
                return None;
            }
            if g.grading == 0 {
                let at_once = (g.jobs / 2).max(1);
                let size = *g
                    .batch
                    .get_or_insert_with(|| g.waiting.len().div_ceil(at_once).clamp(1, MOST));
                if g.running < at_once {
                    g.running += 1;
                    let n = size.min(g.waiting.len());
                    return Some(g.waiting.drain(..n).collect());
                }
            }
            st = self.turn.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// A batch from [`Pool::next_batch`] is done.
    pub(super) fn batch_done(&self, key: &Option<String>) {
        if let Some(g) = self.state().get_mut(key) {
            g.running = g.running.saturating_sub(1);
        }
        self.turn.notify_all();
    }
}

/// One job's place among its GPU's grading jobs (see [`Pool::grading`]).
pub(super) struct Grading<'p, T> {
    pool: &'p Pool<T>,
    key: Option<String>,
    done: bool,
}

impl<T> Grading<'_, T> {
    /// The job has graded its last student: how many students wait for their passes, when it
    /// was the GPU's last grading job.
    pub(super) fn finish(mut self) -> Option<usize> {
        self.done = true;
        self.pool.done_grading(&self.key)
    }
}

impl<T> Drop for Grading<'_, T> {
    fn drop(&mut self) {
        if !self.done {
            self.pool.done_grading(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn passes_wait_for_every_job_of_their_gpu_then_run_in_batches_over_half_its_jobs() {
        let a = Some("gpu-a".to_string());
        let b = Some("gpu-b".to_string());
        // Four jobs on GPU a, one on GPU b.
        let pool: Pool<usize> = Pool::new([a.clone(), a.clone(), a.clone(), a.clone(), b.clone()]);
        // Nothing waits on b: its only job finds no batch, at once, whatever a's jobs do.
        assert_eq!(pool.grading(b.clone()).finish(), None);
        assert!(pool.next_batch(&b).is_none());
        for i in 0..5 {
            pool.hold(&a, i);
        }
        std::thread::scope(|s| {
            let pool = &pool;
            let (tx, rx) = std::sync::mpsc::channel();
            // Jobs that finished grading wait for the others on their GPU.
            for _ in 0..3 {
                let (a, tx) = (a.clone(), tx.clone());
                assert_eq!(pool.grading(a.clone()).finish(), None);
                s.spawn(move || {
                    while let Some(batch) = pool.next_batch(&a) {
                        tx.send(batch).unwrap();
                        std::thread::sleep(Duration::from_millis(100));
                        pool.batch_done(&a);
                    }
                });
            }
            assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
            // The last job's end opens the passes, a panic's too (its guard is dropped): 5
            // students over 2 batches at once (half of 4 jobs), 3 and 2; the third job finds
            // nothing left.
            let last = pool.grading(a.clone());
            let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                let _last = last;
                panic!("a job's thread panics");
            }));
            assert!(unwound.is_err());
            let mut got: Vec<Vec<usize>> = (0..2)
                .map(|_| rx.recv_timeout(Duration::from_secs(5)).unwrap())
                .collect();
            got.sort_by_key(|b| b.len());
            assert_eq!(got, vec![vec![3, 4], vec![0, 1, 2]]);
            drop(tx);
        });
        assert!(pool.next_batch(&a).is_none());
    }
}

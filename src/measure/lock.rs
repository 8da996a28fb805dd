//! One GPU, one timer: a reader-writer lock per GPU, held across processes.
//!
//! Timed sections take the lock exclusively; correctness phases (a milestone's cases and
//! trials, taken once per phase) and timed sections' setups take it shared, so any number of
//! them overlap each other (and compilation never takes it) but none runs on a GPU while a
//! kernel on it is being timed. A thread that holds the shared lock gets it again at once (a
//! second wait at the turnstile, behind a timer waiting for the first, would deadlock); a
//! holder of the shared lock must not ask for the timing lock. The timed sections of one
//! process pass the timing lock along while more of them wait (`Baton`): taking it means
//! waiting for every shared user to finish, and a batch pays that once. `grade --jobs N` may
//! therefore exceed the GPU count without distorting any measurement. A turnstile lock keeps a waiting timer from being starved by a
//! stream of correctness runs. The locks are `flock`s on files under a shared directory, keyed
//! by the GPU's PCI bus id, so processes that number GPUs differently still agree; the kernel
//! releases them when a process dies.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::PathBuf;

/// A held lock; released on drop.
#[derive(Debug)]
pub struct GpuLock {
    hold: Hold,
    /// For `CUGRADE_GPU_TRACE`: what held it, and when it was asked for and got.
    traced: Option<Traced>,
}

#[derive(Debug)]
struct Traced {
    what: &'static str,
    key: String,
    asked: std::time::SystemTime,
    got: std::time::SystemTime,
}

#[derive(Debug)]
enum Hold {
    /// The shared lock, and the GPU it is for (this thread holds it until drop).
    Shared { _file: File, key: String },
    /// A shared lock this thread already held (see [`shared`]): nothing to release.
    Nested,
    /// A turn of this process's timing baton for the GPU (see [`timing`]).
    Timing(std::sync::Arc<Baton>),
}

impl Drop for GpuLock {
    fn drop(&mut self) {
        if let Some(t) = self.traced.take() {
            let kind = match self.hold {
                Hold::Timing(_) => "timing",
                _ => "shared",
            };
            trace(kind, &t);
        }
        match &self.hold {
            Hold::Shared { key, .. } => HELD.with(|h| {
                let mut h = h.borrow_mut();
                if let Some(i) = h.iter().position(|x| x == key) {
                    h.remove(i);
                }
            }),
            Hold::Nested => {}
            Hold::Timing(baton) => baton.pass(),
        }
        // A file's own drop releases its flock.
    }
}

/// The timing lock of one GPU as this process holds it: handed from one timed section to the
/// next while more of this process's timed sections wait, so that a batch of them pays once
/// for what taking the lock costs, waiting for every correctness run, compute-sanitizer pass
/// and worker start on the GPU to end (issue 29). A batch ends after [`BATCH_SECTIONS`]
/// sections or [`BATCH_TIME`], so other processes and the shared users get their turn.
#[derive(Debug, Default)]
struct Baton {
    state: std::sync::Mutex<BatonState>,
    turn: std::sync::Condvar,
}

#[derive(Debug, Default)]
struct BatonState {
    /// The lock file, held exclusively for the batch.
    file: Option<File>,
    /// A timed section holds the baton (or is taking the lock).
    busy: bool,
    /// Timed sections waiting for the baton.
    waiting: usize,
    /// The batch so far: sections, and when it began.
    sections: usize,
    began: Option<std::time::Instant>,
}

/// Timed sections one batch may hold the GPU for, at most.
const BATCH_SECTIONS: usize = 32;
/// How long one batch may hold the GPU, at most (a section that starts before it ends runs).
const BATCH_TIME: std::time::Duration = std::time::Duration::from_secs(10);
/// How long a section waits for others to join its batch, at most (see [`Baton::take`]).
const GATHER: std::time::Duration = std::time::Duration::from_secs(2);

/// Jobs of this process that grade on each GPU (`grade --jobs`): by lock key.
static JOBS: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<String, usize>>> =
    std::sync::LazyLock::new(Default::default);

/// Say how many of this process's jobs grade on GPU `key` (a batch of timed sections waits
/// for half of them; unset, one).
pub fn set_jobs(key: &str, jobs: usize) {
    JOBS.lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key.to_string(), jobs);
}

fn jobs_on(key: &str) -> usize {
    JOBS.lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(key)
        .copied()
        .unwrap_or(1)
}

impl Baton {
    fn of(key: &str) -> std::sync::Arc<Baton> {
        static ALL: std::sync::LazyLock<
            std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<Baton>>>,
        > = std::sync::LazyLock::new(Default::default);
        ALL.lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.to_string())
            .or_default()
            .clone()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, BatonState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait for the baton; take the lock file when the batch has none. A batch starts once
    /// half of the process's jobs on this GPU wait to be timed, or [`GATHER`] after the first
    /// asked: taking the lock means draining the GPU of every shared user (and blocking new
    /// ones meanwhile), so that cost is paid for several sections at once. `check` (one job)
    /// starts at once.
    fn take(self: &std::sync::Arc<Self>, key: &str) -> io::Result<()> {
        let asked = std::time::Instant::now();
        let want = jobs_on(key).div_ceil(2).clamp(1, BATCH_SECTIONS);
        let mut st = self.state();
        st.waiting += 1;
        // A gathering section counts the newcomer.
        self.turn.notify_all();
        loop {
            if st.busy {
                st = self.turn.wait(st).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            let left = GATHER.saturating_sub(asked.elapsed());
            if st.file.is_some() || st.waiting >= want || left.is_zero() {
                break;
            }
            st = self
                .turn
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        st.waiting -= 1;
        st.busy = true;
        if st.file.is_none() {
            drop(st);
            let file = flock(key, true);
            st = self.state();
            match file {
                Ok(f) => {
                    st.file = Some(f);
                    st.sections = 0;
                    st.began = Some(std::time::Instant::now());
                }
                Err(e) => {
                    st.busy = false;
                    self.turn.notify_all();
                    return Err(e);
                }
            }
        }
        st.sections += 1;
        Ok(())
    }

    /// The section is done: the next waiting one gets the baton, with the lock still held
    /// unless the batch is over.
    fn pass(&self) {
        let mut st = self.state();
        st.busy = false;
        let young = st
            .began
            .is_some_and(|b| b.elapsed() < BATCH_TIME && st.sections < BATCH_SECTIONS);
        if st.waiting == 0 || !young {
            st.file = None;
        }
        self.turn.notify_all();
    }
}

/// Where the lock files live: `$CUGRADE_LOCK_DIR`, else `/tmp/cugrade-locks`, whatever
/// `TMPDIR` says: every `cugrade` on the machine must meet at the same files (two graders with
/// different `TMPDIR`s timing one GPU would otherwise disturb each other), and the folder
/// outlives every run, so it is no run's temp file.
pub fn dir() -> PathBuf {
    std::env::var_os("CUGRADE_LOCK_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from("/tmp/cugrade-locks"), PathBuf::from)
}

fn open(key: &str, what: &str) -> io::Result<File> {
    let d = dir();
    std::fs::create_dir_all(&d)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Every user on a shared grading machine must be able to take the lock.
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o1777));
    }
    let safe: String = key
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let path = d.join(format!("gpu-{safe}.{what}"));
    match OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
    {
        Ok(f) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                // Open to every user of the machine (a grader as root and one as a user on
                // one GPU must share the lock).
                let _ = f.set_permissions(std::fs::Permissions::from_mode(0o666));
            }
            Ok(f)
        }
        // Made by another user who could not open it to all: `flock` needs no write access.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => File::open(&path),
        Err(e) => Err(e),
    }
}

thread_local! {
    /// Seconds this thread has waited for GPU locks (`result::Phases::gpu_wait_s`).
    static WAITED: std::cell::Cell<f64> = const { std::cell::Cell::new(0.0) };
    /// Shared locks this thread holds, by GPU: taking one again is free.
    static HELD: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Seconds this thread has spent waiting for GPU locks so far: a phase's wait is the
/// difference across it.
pub fn waited_here() -> f64 {
    WAITED.with(std::cell::Cell::get)
}

/// Take the lock file of GPU `key` (through the turnstile), exclusively or shared.
fn flock(key: &str, exclusive: bool) -> io::Result<File> {
    let turnstile = open(key, "turnstile")?;
    turnstile.lock()?;
    let main = open(key, "lock")?;
    if exclusive {
        main.lock()?;
    } else {
        main.lock_shared()?;
    }
    drop(turnstile);
    Ok(main)
}

/// Count the seconds since `asked` as this thread's wait for a GPU lock.
fn waited_since(asked: std::time::Instant) {
    WAITED.with(|w| w.set(w.get() + asked.elapsed().as_secs_f64()));
}

/// Take the GPU for a timed section (exclusive). Timed sections of this process pass the
/// lock from one to the next while any of them wait (a batch; see `Baton`).
/// `what` names the user in `CUGRADE_GPU_TRACE`.
pub fn timing(key: &str, what: &'static str) -> io::Result<GpuLock> {
    let asked = std::time::Instant::now();
    let asked_at = std::time::SystemTime::now();
    let baton = Baton::of(key);
    baton.take(key)?;
    waited_since(asked);
    Ok(GpuLock {
        hold: Hold::Timing(baton),
        traced: traced(what, key, asked_at),
    })
}

/// Use the GPU alongside others, but never during a timed section (shared). A thread that
/// holds it already gets it again at once: so a worker's start or a reference run inside a
/// correctness phase can take it without a thought for who holds what. `what` names the user
/// in `CUGRADE_GPU_TRACE`.
pub fn shared(key: &str, what: &'static str) -> io::Result<GpuLock> {
    if HELD.with(|h| h.borrow().iter().any(|k| k == key)) {
        // Already held by this thread: waiting at the turnstile behind a timer that waits for
        // this very lock would deadlock.
        return Ok(GpuLock {
            hold: Hold::Nested,
            traced: None,
        });
    }
    let asked = std::time::Instant::now();
    let asked_at = std::time::SystemTime::now();
    let file = flock(key, false)?;
    waited_since(asked);
    HELD.with(|h| h.borrow_mut().push(key.to_string()));
    Ok(GpuLock {
        hold: Hold::Shared {
            _file: file,
            key: key.to_string(),
        },
        traced: traced(what, key, asked_at),
    })
}

/// `CUGRADE_GPU_TRACE=FILE` (for `ci/gpu-timeline.py`, a benchmark's view of who held each
/// GPU when): every hold of a GPU lock is appended to FILE as one line,
/// `KIND WHAT GPU ASKED GOT RELEASED PID:THREAD`, KIND `shared` or `timing`, times in seconds
/// since the Unix epoch; a `held` line (RELEASED `-`) when it is taken. Unset (always, in grading), nothing is recorded.
static TRACE: std::sync::LazyLock<Option<std::sync::Mutex<File>>> =
    std::sync::LazyLock::new(|| {
        let path = std::env::var_os("CUGRADE_GPU_TRACE").filter(|p| !p.is_empty())?;
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()
            .map(std::sync::Mutex::new)
    });

fn traced(what: &'static str, key: &str, asked: std::time::SystemTime) -> Option<Traced> {
    TRACE.as_ref()?;
    let t = Traced {
        what,
        key: key.to_string(),
        asked,
        got: std::time::SystemTime::now(),
    };
    // A hold still open when the run ends (or is killed) shows as its `held` line alone.
    trace_line("held", &t, None);
    Some(t)
}

fn trace(kind: &str, t: &Traced) {
    trace_line(kind, t, Some(std::time::SystemTime::now()));
}

fn trace_line(kind: &str, t: &Traced, released: Option<std::time::SystemTime>) {
    use std::io::Write;
    let Some(file) = TRACE.as_ref() else {
        return;
    };
    let secs = |s: std::time::SystemTime| {
        s.duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    let safe = |s: &str| s.replace(char::is_whitespace, "-");
    let thread = format!("{:?}", std::thread::current().id());
    let thread: String = thread.chars().filter(char::is_ascii_digit).collect();
    let line = format!(
        "{kind} {} {} {:.6} {:.6} {} {}:{thread}\n",
        safe(t.what),
        safe(&t.key),
        secs(t.asked),
        secs(t.got),
        released.map_or_else(|| "-".to_string(), |r| format!("{:.6}", secs(r))),
        std::process::id()
    );
    let mut f = file.lock().unwrap_or_else(|p| p.into_inner());
    let _ = f.write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn timing_excludes_shared_users_and_timed_sections_of_a_process_run_in_batches() {
        let d = tempfile::tempdir().unwrap();
        // SAFETY: this test is the only user of the variable.
        unsafe { std::env::set_var("CUGRADE_LOCK_DIR", d.path()) };
        const GPU: &str = "0000:01:00.0";
        // Shared users of two threads coexist; a thread taking it again gets it at once.
        let a = shared(GPU, "test").unwrap();
        let again = shared(GPU, "test").unwrap();
        let (btx, brx) = mpsc::channel();
        let (bdone, bwait) = mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            let _b = shared(GPU, "test").unwrap();
            btx.send(()).unwrap();
            bwait.recv().unwrap();
        });
        brx.recv_timeout(Duration::from_secs(5)).unwrap();
        let (tx, rx) = mpsc::channel();
        let t1 = std::thread::spawn(move || {
            let g = timing(GPU, "test").unwrap();
            tx.send(1).unwrap();
            std::thread::sleep(Duration::from_millis(300));
            drop(g);
        });
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        drop(again);
        drop(a);
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        bdone.send(()).unwrap();
        other.join().unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(1));
        // While the first timed section runs, a second one and a shared user ask: the second
        // gets the lock straight from the first, before the shared user.
        let (stx, srx) = mpsc::channel();
        let (ttx, trx) = mpsc::channel();
        let t2 = std::thread::spawn(move || {
            let _g = timing(GPU, "test").unwrap();
            ttx.send(std::time::Instant::now()).unwrap();
            std::thread::sleep(Duration::from_millis(200));
        });
        std::thread::sleep(Duration::from_millis(50));
        let s = std::thread::spawn(move || {
            let _g = shared(GPU, "test").unwrap();
            stx.send(std::time::Instant::now()).unwrap();
        });
        let second = trx.recv_timeout(Duration::from_secs(5)).unwrap();
        let shared_at = srx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(shared_at > second + Duration::from_millis(150));
        for t in [t1, t2, s] {
            t.join().unwrap();
        }
        // Another GPU is another lock.
        let _x = timing("0000:02:00.0", "test").unwrap();
        let _y = shared(GPU, "test").unwrap();
        drop(_x);
        drop(_y);
        // With 4 jobs on a GPU a batch waits for 2 timed sections (at most GATHER): the first
        // one waits for the second, and both then run in the same batch.
        const G: &str = "0000:03:00.0";
        set_jobs(G, 4);
        let (tx, rx) = mpsc::channel();
        let tx2 = tx.clone();
        let first = std::thread::spawn(move || {
            let g = timing(G, "test").unwrap();
            tx.send((1, std::time::Instant::now())).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            drop(g);
        });
        assert!(rx.recv_timeout(Duration::from_millis(500)).is_err());
        let asked = std::time::Instant::now();
        let second = std::thread::spawn(move || {
            let _g = timing(G, "test").unwrap();
            tx2.send((2, std::time::Instant::now())).unwrap();
        });
        // Both run at once in one batch (in either order), well before GATHER had passed.
        let mut got: Vec<(i32, std::time::Instant)> = (0..2)
            .map(|_| rx.recv_timeout(Duration::from_secs(5)).unwrap())
            .collect();
        got.sort_by_key(|g| g.0);
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [1, 2]);
        assert!(
            got.iter().all(|g| g.1 - asked < GATHER),
            "the batch did not start when the second section asked"
        );
        first.join().unwrap();
        second.join().unwrap();
    }
}

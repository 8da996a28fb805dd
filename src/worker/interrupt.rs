//! Ctrl-C, SIGTERM and a closed terminal end every worker (and every other child the runner
//! started in a group of its own) and remove every temp folder before the grader exits (with
//! 128 + the signal's number, as a shell reports a death by signal).
//!
//! The signals are blocked in the grader's threads (which inherit the mask of the thread that
//! installs this, so it runs first) and waited for by one thread of their own, where the
//! cleanup may take locks and allocate. Workers start with an empty mask (the standard
//! library resets it in every child).

use nix::sys::signal::{SigSet, Signal};
use std::sync::atomic::{AtomicI32, Ordering};

/// The signal being handled, 0 while none.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

/// Called by the main thread when the command is done: if an interrupt is being handled (the
/// grading may have stopped *because* its workers were ended), wait for the handler, which
/// exits with 128 + the signal, instead of exiting with the command's own code.
pub fn wait_if_interrupted() {
    if RECEIVED.load(Ordering::SeqCst) != 0 {
        loop {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// Install the handler thread. Call it before any other thread starts.
pub fn install() {
    let mut set = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(s);
    }
    if set.thread_block().is_err() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("cugrade-signals".into())
        .spawn(move || {
            if let Ok(sig) = set.wait() {
                RECEIVED.store(sig as i32, Ordering::SeqCst);
                super::parent::end_all();
                super::process::end_all();
                crate::sandbox::scratch::remove_run_dir();
                eprintln!(
                    "\ncugrade: {sig}: stopped every worker and removed the temporary files; \
                     results already written are kept (`grade --resume` goes on from them)"
                );
                // SAFETY: leaving without running other threads' destructors or atexit
                // handlers, which could wait on a thread that is blocked.
                unsafe { libc::_exit(128 + sig as i32) };
            }
        });
    if spawned.is_err() {
        let _ = set.thread_unblock();
    }
}

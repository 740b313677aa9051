//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod alloc;

use std::sync::Arc;
use std::time::{Duration, Instant};

/// Polls `cond` until it holds or `limit` passes, and returns its last
/// answer: for waiting on a background thread (the sweeper, idle workers).
/// Tests assert on the condition itself, never on how long it took.
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let give_up = Instant::now() + limit;
    while Instant::now() < give_up {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    cond()
}

/// Runs `body` on its own thread and fails the test if it has not finished
/// within `limit`: a threaded test that deadlocks fails instead of hanging
/// the suite. A panic in `body` fails the test as usual.
pub fn run_with_deadline(limit: Duration, body: impl FnOnce() + Send + 'static) {
    let (done, finished) = std::sync::mpsc::channel();
    let runner = std::thread::spawn(move || {
        body();
        let _ = done.send(());
    });
    match finished.recv_timeout(limit) {
        // Finished, or panicked (the sender dropped): `join` tells which.
        Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(panic) = runner.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("the test did not finish within {limit:?}: a deadlock?")
        }
    }
}

/// Makes this thread hold a `thread_local` id (the crate stashpool keys
/// its per-thread stashes with) until it exits, so that a thread spawned
/// and joined meanwhile cannot hand its id, and its stashes, to this one.
/// Tests of what an exiting thread leaves behind need that: a test thread
/// that took the exited thread's id would find its stash and pass without
/// any flush.
pub fn hold_thread_id() {
    static IDS: thread_local::ThreadLocal<()> = thread_local::ThreadLocal::new();
    IDS.get_or(|| ());
}

/// Whether this thread holds the `thread_local` id that the thread that
/// called `mark_thread_id(tag)` last held (the ids of exited threads are
/// given to new ones). Takes an id if this thread has none.
pub fn inherited_thread_id(tag: usize) -> bool {
    MARKS.get_or(|| std::cell::Cell::new(0)).get() == tag
}

/// Marks this thread's `thread_local` id with `tag` (see
/// `inherited_thread_id`).
pub fn mark_thread_id(tag: usize) {
    MARKS.get_or(|| std::cell::Cell::new(0)).set(tag);
}

static MARKS: thread_local::ThreadLocal<std::cell::Cell<usize>> = thread_local::ThreadLocal::new();

/// This process's resident set in bytes (Linux); `None` elsewhere.
pub fn rss() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// The primitives `ledger.rs` is written against: std's here, loom's in
/// `loom-tests`.
mod sync {
    pub use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    pub use std::sync::Arc;
}

mod ledger;

pub use ledger::{Ledger, Tracked};

impl Ledger {
    /// A new object counted here (`Ledger::track`, as a method).
    pub fn make(self: &Arc<Self>) -> Tracked {
        Ledger::track(self)
    }
}

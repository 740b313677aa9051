//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod alloc;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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

/// This process's resident set in bytes (Linux); `None` elsewhere.
pub fn rss() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Counts how many `Tracked` objects were made and dropped, and catches an
/// object handed to two holders at once or dropped twice.
#[derive(Default, Debug)]
pub struct Ledger {
    pub made: AtomicUsize,
    pub dropped: AtomicUsize,
}

impl Ledger {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn make(self: &Arc<Self>) -> Tracked {
        let id = self.made.fetch_add(1, Ordering::Relaxed);
        Tracked {
            id,
            ledger: Arc::clone(self),
            in_use: Arc::new(AtomicBool::new(false)),
        }
    }

    pub fn made(&self) -> usize {
        self.made.load(Ordering::SeqCst)
    }

    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }

    /// Objects made and not yet dropped.
    pub fn live(&self) -> usize {
        self.made() - self.dropped()
    }
}

/// An object that knows whether someone holds it.
#[derive(Debug)]
pub struct Tracked {
    pub id: usize,
    ledger: Arc<Ledger>,
    in_use: Arc<AtomicBool>,
}

impl Tracked {
    /// Marks the object held; panics if it already was (two holders).
    pub fn acquire(&self) {
        assert!(
            !self.in_use.swap(true, Ordering::SeqCst),
            "object {} handed to two holders at once",
            self.id
        );
    }

    /// Marks the object free again.
    pub fn release(&self) {
        assert!(self.in_use.swap(false, Ordering::SeqCst));
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        assert!(
            !self.in_use.load(Ordering::SeqCst),
            "object {} dropped while held",
            self.id
        );
        let dropped = self.ledger.dropped.fetch_add(1, Ordering::SeqCst) + 1;
        assert!(dropped <= self.ledger.made(), "more drops than objects");
    }
}

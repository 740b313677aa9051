//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod alloc;
pub mod io;

use std::sync::Arc;
use std::time::{Duration, Instant};

/// Lets this thread's stash in `pool` keep up to `n` objects, and leaves
/// the pool empty: a stash keeps nothing until its thread first takes an
/// object, and then doubles what it keeps each time a get finds it empty
/// after it passed objects on, so rounds of holding `n` and returning them
/// grow it. Costs `n` objects made, returned and cleared.
pub fn grow_stash<T: Send + 'static, R: stashpool::Recycle<T>>(
    pool: &stashpool::LocalPool<T, R>,
    n: usize,
) {
    for _ in 0..=n.max(1).ilog2() + 1 {
        let held: Vec<_> = (0..n.max(1)).map(|_| pool.get()).collect();
        drop(held);
    }
    pool.clear();
}

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

/// Makes this thread hold a stashpool thread id until it exits (it uses a
/// pool), so that a thread spawned and joined meanwhile cannot hand its id,
/// and its stashes, to this one. Tests of what an exiting thread leaves
/// behind need that: a test thread that took the exited thread's id would
/// find its stash and pass without any flush.
pub fn hold_thread_id() {
    static IDS: stashpool::LocalPool<u8> = stashpool::LocalPool::new(|| 0);
    IDS.with(|_| ());
}

/// Tells whether a thread was given the stashpool thread id (and with it the
/// stashes) of a thread that exited, by what it finds in a stash: the marked
/// thread leaves a tag in its stash in a pool whose overflow is full, so
/// that its exit flush cannot move it, and only the next owner of that
/// stash gets the tag back.
pub struct IdMarker(stashpool::LocalPool<usize, fn() -> usize>);

impl IdMarker {
    /// A marker whose pool's overflow is full; call on a thread that holds
    /// its own id (`hold_thread_id`) and keeps it while the marker is used.
    pub fn new() -> Self {
        // A stash of one, with room for one whatever the number of stashes
        // (up to four threads use it), beside an overflow of four.
        let pool = stashpool::LocalPool::builder((|| 0) as fn() -> usize)
            .max_stashed(1)
            .max_idle(4)
            .manual_sweep()
            .build();
        // Fill this thread's stash, then the overflow, until it rejects.
        while pool.stats().rejected == 0 {
            pool.put(0);
        }
        Self(pool)
    }

    /// Leaves `tag` (not 0) in this thread's stash, for good.
    pub fn mark(&self, tag: usize) {
        assert_ne!(tag, 0);
        // Taken from the full overflow, so this thread's stash keeps one;
        // the object put meanwhile fills the stash, and the tag's return
        // spills that object to the overflow, which is full again.
        let mut got = self.0.get();
        *got = tag;
        self.0.put(0);
        drop(got);
    }

    /// Whether this thread owns the stash that the thread that called
    /// `mark(tag)` left (it took no object from the pool before).
    pub fn inherited(&self, tag: usize) -> bool {
        *self.0.get() == tag
    }
}

/// This process's resident set in bytes (Linux); `None` elsewhere.
pub fn rss() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// The primitives `ledger.rs` is written against: std's here, loom's in
/// `loom-tests`.
mod sync {
    pub use std::sync::Arc;
    pub use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
}

mod ledger;

pub use ledger::{Ledger, Tracked};

impl Ledger {
    /// A new object counted here (`Ledger::track`, as a method).
    pub fn make(self: &Arc<Self>) -> Tracked {
        Ledger::track(self)
    }
}

/// Runs `threads` threads in `rounds` rounds that pass objects between
/// them: in each round thread `me` runs `work(me, round, senders,
/// received)` (`senders[i]` reaches thread `i`, `received` is its own
/// end), then every thread waits at a barrier while this thread runs
/// `check(round)`: a quiescent point, with no get or return in progress.
pub fn in_rounds<O: Send>(
    threads: usize,
    rounds: usize,
    work: impl Fn(usize, usize, &[std::sync::mpsc::Sender<O>], &std::sync::mpsc::Receiver<O>) + Sync,
    mut check: impl FnMut(usize),
) {
    use std::sync::Barrier;
    let (senders, receivers): (Vec<_>, Vec<_>) =
        (0..threads).map(|_| std::sync::mpsc::channel()).unzip();
    let (round, checked) = (Barrier::new(threads + 1), Barrier::new(threads + 1));
    std::thread::scope(|s| {
        for (me, received) in receivers.into_iter().enumerate() {
            let (senders, work) = (senders.clone(), &work);
            let (round, checked) = (&round, &checked);
            s.spawn(move || {
                for r in 0..rounds {
                    work(me, r, &senders, &received);
                    round.wait();
                    checked.wait();
                }
            });
        }
        drop(senders);
        for r in 0..rounds {
            round.wait();
            check(r);
            checked.wait();
        }
    });
}

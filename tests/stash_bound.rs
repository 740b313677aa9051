//! The bound on stashes: at most 8 threads per core keep a stash in a pool
//! at once, and the others pool through the overflow.
//!
//! A test binary of its own: its many threads use one pool at once.

mod common;

use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::Duration;

use stashpool::LocalPool;

/// How long the test may take before it counts as a deadlock.
const DEADLINE: Duration = Duration::from_secs(120);

/// A program with many more threads than cores, each using a pool now and
/// then (a thread per connection, say), keeps objects for the threads that
/// hold the pool's stashes (8 per core, the first to use it), not for every
/// thread: the others share their objects through the overflow. Threads
/// that take turns therefore make one object per stash and one for all the
/// others, where a stash per thread would keep one per thread.
#[test]
fn threads_past_the_stash_bound_share_their_objects() {
    common::run_with_deadline(DEADLINE, || {
        let cores = thread::available_parallelism().map_or(1, usize::from);
        let bound = 8 * cores;
        let threads = bound + if cfg!(miri) { 4 } else { 32 };
        let pool = LocalPool::builder(|| vec![0u8; 2048])
            .manual_sweep()
            .build();
        let turn = Mutex::new(());
        let all_used = Barrier::new(threads);
        thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    {
                        let _turn = turn.lock().unwrap();
                        pool.with(|buf| buf[0] = 1);
                    }
                    // All alive until each has used the pool: no thread
                    // gives its stash's place back within the run.
                    all_used.wait();
                });
            }
        });
        // One object made by each of the first `bound` threads (its stash
        // keeps it), and one for all the others: fewer would mean fewer
        // stashes than 8 a core.
        let stats = pool.stats();
        assert_eq!(
            stats.created,
            bound as u64 + 1,
            "{threads} threads, {bound} stashes: {stats:?}"
        );
        assert_eq!(stats.idle as u64, stats.created, "{stats:?}");
        assert_eq!(stats.returned, threads as u64, "{stats:?}");
    });
}

//! A pool-wide `max_idle` keeps the memory that many threads leave in a pool
//! bounded, where without it every thread's stash keeps its buffers until
//! two sweeps pass. One test in this binary, so the allocator's count is
//! ours.

mod common;

use std::sync::Barrier;

use common::alloc::{Counting, heap};
use stashpool::LocalPool;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// What the idle objects of 64 threads that each returned 50 buffers of 64
/// KiB hold after one sweep: all of them without a bound, `max_idle` of them
/// with one.
fn held_after_one_sweep(max_idle: Option<usize>) -> (usize, isize) {
    const THREADS: usize = 64;
    const EACH: usize = 50;
    const SIZE: usize = 64 << 10;
    let builder = LocalPool::builder(|| vec![1u8; SIZE]).manual_sweep();
    let pool = match max_idle {
        Some(n) => builder.max_idle(n),
        None => builder,
    }
    .build();
    let before = heap();
    let (got, returned, swept) = (
        Barrier::new(THREADS),
        Barrier::new(THREADS + 1),
        Barrier::new(THREADS + 1),
    );
    let mut held = (0, 0);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                let bufs: Vec<_> = (0..EACH).map(|_| pool.get()).collect();
                got.wait();
                drop(bufs);
                returned.wait();
                swept.wait(); // alive, stash and all, while the pool is measured
            });
        }
        returned.wait();
        pool.sweep();
        held = (pool.stats().idle, heap() - before);
        swept.wait();
    });
    held
}

#[test]
fn max_idle_bounds_the_memory_many_threads_keep() {
    const SIZE: isize = 64 << 10;
    let (idle, bytes) = held_after_one_sweep(None);
    assert_eq!(
        idle,
        64 * 50,
        "without a bound, every buffer survives one sweep"
    );
    assert!(bytes >= 64 * 50 * SIZE, "{bytes} bytes");
    let (idle, bytes) = held_after_one_sweep(Some(256));
    assert!(idle <= 256, "{idle} idle");
    // The buffers, plus a little bookkeeping (stashes, batch buffers).
    assert!(bytes <= 256 * SIZE + (1 << 20), "{bytes} bytes held");
    eprintln!(
        "64 threads x 50 buffers of 64 KiB, max_idle(256): {idle} idle, {bytes} bytes held after one sweep"
    );
}

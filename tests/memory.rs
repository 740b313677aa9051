//! Memory comes back: after a burst and two idle sweeps a pool holds nothing,
//! the heap bytes its objects used are freed, and the process's resident set
//! shrinks again. One test in this binary, so the allocator's count is ours.

mod common;

use std::sync::Barrier;

use common::alloc::{Counting, heap};
use common::rss;
use stashpool::LocalPool;

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn burst_then_two_sweeps_frees_the_memory() {
    const THREADS: usize = 4;
    const HELD: usize = 16;
    const SIZE: usize = 1 << 20; // 1 MiB: large enough that free() unmaps

    let pool = LocalPool::builder(|| vec![1u8; SIZE])
        .manual_sweep()
        .build();
    // No large buffer is made and freed before the burst: glibc would then
    // raise its mmap threshold and serve the burst from arenas it keeps.
    let heap_before = heap();
    let rss_before = rss();

    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                let held: Vec<_> = (0..HELD).map(|_| pool.get()).collect();
                barrier.wait(); // all held at once: the peak
                drop(held);
            });
        }
    });
    let peak_objects = (THREADS * HELD) as isize;
    let grown = heap() - heap_before;
    assert!(
        grown >= peak_objects * SIZE as isize,
        "the burst's buffers are pooled: {grown} bytes"
    );
    assert_eq!(pool.stats().idle, THREADS * HELD);
    let rss_peak = rss();

    pool.sweep();
    assert_eq!(pool.stats().idle, THREADS * HELD, "one sweep keeps them");
    pool.sweep();
    assert_eq!(pool.stats().idle, 0, "the second drops them");

    let left = heap() - heap_before;
    assert!(
        left < SIZE as isize,
        "the buffers' memory is freed; {left} bytes of bookkeeping remain"
    );
    if let (Some(before), Some(peak), Some(after)) = (rss_before, rss_peak, rss()) {
        assert!(
            peak > before + 32 * SIZE,
            "the burst was resident: {before} -> {peak}"
        );
        assert!(
            after < peak - 32 * SIZE,
            "resident memory comes back down: {before} -> {peak} -> {after}"
        );
    }
}

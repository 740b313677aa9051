//! Once warm, objects move between a thread's stash, the overflow and other
//! threads without a single allocation, also in a pool whose stashes have
//! no room (`max_stashed(0)`, or a `max_idle` share of 0), where every
//! object goes through the overflow alone. One test in this binary, so the
//! allocator's count is ours.

mod common;

use common::alloc::{Counting, allocations};
use stashpool::LocalPool;

#[global_allocator]
static GLOBAL: Counting = Counting;

fn new_buf() -> Vec<u8> {
    Vec::with_capacity(64)
}

#[test]
fn warm_pools_allocate_nothing() {
    let roomy = LocalPool::builder(new_buf as fn() -> Vec<u8>)
        .manual_sweep()
        .build();
    let stashless = LocalPool::builder(new_buf as fn() -> Vec<u8>)
        .max_stashed(0)
        .manual_sweep()
        .build();
    let round = |pool: &LocalPool<Vec<u8>>, hold: usize| {
        let held: Vec<_> = (0..hold).map(|_| pool.get()).collect();
        drop(held);
        pool.with(|buf| buf.clear());
    };
    // The roomy pool's thread holds more than its stash keeps, so spills and
    // steals happen too; through the overflow alone, objects go one by one,
    // a few at a time, as a server's requests take them.
    for (pool, hold) in [(&roomy, 300), (&stashless, 4)] {
        let round = |pool| round(pool, hold);
        // Warm: the objects, the stash (which doubles what it keeps each
        // round until it keeps `max_stashed`), the overflow's blocks, spare
        // buffers.
        for _ in 0..12 {
            round(pool);
        }
        let before = allocations();
        for _ in 0..10 {
            round(pool);
        }
        let made = allocations() - before;
        // `round` allocates its own `Vec` of guards: 1 per round. The pool
        // allocates none of its own, but the overflow (a
        // `crossbeam_deque::Injector`) takes a new block of slots every 63
        // pushes: without a stash every return is a push, and a full stash
        // spills what it holds past `DEFAULT_MAX_STASHED` in batches of at
        // least half of it.
        let half = stashpool::DEFAULT_MAX_STASHED / 2;
        let pushes = if hold == 4 {
            10 * (hold + 1)
        } else {
            10 * hold.saturating_sub(2 * half).div_ceil(half)
        };
        let blocks = pushes.div_ceil(63) as isize;
        assert!(
            made <= 10 + blocks,
            "{made} allocations in 10 rounds of {hold} (at most {blocks} blocks)"
        );
    }
}

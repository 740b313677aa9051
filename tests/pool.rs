//! Behaviour of `LocalPool` on one thread: reuse, recycling, bounds, stats,
//! guards, panics and the victim rule.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::Ledger;
use stashpool::{LocalPool, Pooled, PooledOwned, Recycle, Stats};

fn manual<T: Send + 'static>(make: fn() -> T) -> LocalPool<T> {
    LocalPool::builder(make).manual_sweep().build()
}

#[test]
fn new_pool_is_empty_and_makes_on_first_get() {
    let pool = manual(|| vec![0u8; 4]);
    assert_eq!(pool.stats(), Stats::default());
    let buf = pool.get();
    assert_eq!(*buf, [0, 0, 0, 0]);
    assert_eq!(pool.stats().created, 1);
    assert_eq!(pool.stats().idle, 0);
}

#[test]
fn returned_object_is_reused() {
    let pool = manual(Vec::<u8>::new);
    let mut buf = pool.get();
    buf.reserve(1000);
    let ptr = buf.as_ptr();
    drop(buf);
    let buf = pool.get();
    assert_eq!(buf.as_ptr(), ptr, "the same allocation comes back");
    assert!(buf.capacity() >= 1000);
    let stats = pool.stats();
    assert_eq!((stats.created, stats.reused, stats.returned), (1, 1, 1));
}

#[test]
fn stash_is_lifo() {
    let pool = manual(|| 0u32);
    pool.put(1);
    pool.put(2);
    pool.put(3);
    let (a, b, c) = (pool.get(), pool.get(), pool.get());
    assert_eq!((*a, *b, *c), (3, 2, 1));
}

#[test]
fn pools_used_in_turn_keep_their_own_objects() {
    let a = manual(|| 'a');
    let b = manual(|| 'b');
    a.put('A');
    b.put('B');
    for _ in 0..3 {
        let (x, y) = (a.get(), b.get());
        assert_eq!((*x, *y), ('A', 'B'));
        drop(x);
        // A guard of one pool dropped after the other pool was used last.
        let z = a.get();
        drop(y);
        assert_eq!(*z, 'A');
        b.with(|y| assert_eq!(*y, 'B'));
    }
    assert_eq!(a.stats().created + b.stats().created, 0);
}

#[test]
fn more_pools_in_turn_than_the_stash_cache_holds() {
    let pools: Vec<LocalPool<usize>> = (0..5).map(|_| manual(|| usize::MAX)).collect();
    for (i, pool) in pools.iter().enumerate() {
        pool.put(i);
    }
    for round in 0..4 {
        // Forwards, then backwards: every pool is reached after two others.
        let order: Vec<usize> = if round % 2 == 0 {
            (0..5).collect()
        } else {
            (0..5).rev().collect()
        };
        for i in order {
            pools[i].with(|n| assert_eq!(*n, i));
            assert_eq!(*pools[i].get(), i);
        }
    }
    assert!(pools.iter().all(|pool| pool.stats().created == 0));
}

#[test]
fn a_new_pool_never_sees_a_dropped_pools_stash() {
    // Made and dropped in turn, these pools are likely to share an address.
    for round in 0..8 {
        let pool = Box::new(LocalPool::builder(move || round).manual_sweep().build());
        assert_eq!(*pool.get(), round, "made fresh, not found in a stash");
        pool.put(100 + round);
        assert_eq!(*pool.get(), 100 + round);
        assert_eq!(pool.stats().created, 1);
    }
}

#[test]
fn with_returns_the_closures_value_and_the_object() {
    let pool = manual(String::new);
    let len = pool.with(|s| {
        s.push_str("hello");
        s.len()
    });
    assert_eq!(len, 5);
    assert_eq!(pool.stats().idle, 1);
    // Not reset by a plain closure recycler: the next user sees it.
    pool.with(|s| assert_eq!(s, "hello"));
}

#[test]
fn with_nests() {
    let pool = manual(|| 0u8);
    let total = pool.with(|a| {
        *a = 1;
        pool.with(|b| {
            *b = 2;
            pool.with(|c| *a + *b + *c)
        })
    });
    assert_eq!(total, 3);
    assert_eq!(pool.stats().created, 3);
    assert_eq!(pool.stats().idle, 3);
}

struct Resetting;

impl Recycle<Vec<u8>> for Resetting {
    fn create(&self) -> Vec<u8> {
        Vec::with_capacity(16)
    }

    fn recycle(&self, buf: &mut Vec<u8>) -> bool {
        buf.clear();
        buf.capacity() <= 64
    }
}

#[test]
fn recycle_resets_and_discards() {
    let pool = LocalPool::builder(Resetting).manual_sweep().build();
    pool.with(|buf| buf.extend_from_slice(b"secret"));
    pool.with(|buf| assert!(buf.is_empty(), "reset on return"));
    pool.with(|buf| buf.extend_from_slice(&[0; 1000])); // grows past 64
    let stats = pool.stats();
    // Dropped by the recycler's rule, not for want of room.
    assert_eq!((stats.discarded, stats.rejected), (1, 0));
    assert_eq!(stats.returned, 2);
    assert_eq!(stats.idle, 0);
    assert!(pool.get().capacity() <= 64, "the big buffer was not kept");
}

#[test]
fn put_passes_through_recycle() {
    let pool = LocalPool::builder(Resetting).manual_sweep().build();
    pool.put(b"left over".to_vec());
    assert!(pool.get().is_empty());
    pool.put(vec![1; 100]);
    let stats = pool.stats();
    assert_eq!((stats.discarded, stats.rejected), (1, 0));
}

#[test]
fn into_inner_keeps_the_object_out_of_the_pool() {
    let ledger = Ledger::new();
    let l = Arc::clone(&ledger);
    let pool = LocalPool::builder(move || l.make()).manual_sweep().build();
    let kept = Pooled::into_inner(pool.get());
    assert_eq!(pool.stats().idle, 0);
    assert_eq!(pool.stats().returned, 0);
    assert_eq!(ledger.dropped(), 0);
    drop(kept);
    assert_eq!(ledger.dropped(), 1);
}

#[test]
fn owned_guard_is_static_and_send() {
    fn assert_static_send<X: Send + 'static>(_: &X) {}
    let pool = Arc::new(manual(|| vec![1u8; 8]));
    let guard = pool.get_owned();
    assert_static_send(&guard);
    let len = std::thread::spawn(move || guard.len()).join().unwrap();
    assert_eq!(len, 8);
    // Dropped on the other thread, into that thread's stash, which was
    // handed to the overflow when that thread exited.
    assert_eq!(pool.stats().returned, 1);
    assert_eq!(pool.stats().idle, 1);
    let kept = PooledOwned::into_inner(pool.get_owned());
    assert_eq!(kept, vec![1u8; 8]);
    assert_eq!(pool.stats().reused, 1);
    assert_eq!(Arc::strong_count(&pool), 1, "into_inner released the pool");
}

#[test]
fn max_stashed_bounds_the_stash_and_spills_to_the_overflow() {
    // `max_idle` larger than `max_stashed`: the stash keeps 4, the
    // overflow takes at most 6, the rest are refused.
    let pool = LocalPool::builder(|| 0u32)
        .max_stashed(4)
        .max_idle(6)
        .manual_sweep()
        .build();
    common::grow_stash(&pool, 4);
    let base = pool.stats();
    for i in 0..13 {
        pool.put(i);
    }
    let stats = pool.stats();
    assert_eq!(stats.idle, 10, "4 in the stash + 6 in the overflow");
    assert_eq!(stats.returned - base.returned, 10);
    assert_eq!(
        (stats.rejected - base.rejected, stats.discarded),
        (3, 0),
        "refused for room"
    );
    let mut got: Vec<u32> = (0..10).map(|_| Pooled::into_inner(pool.get())).collect();
    got.sort_unstable();
    assert_eq!(pool.stats().created, base.created);
    assert_eq!(got.len(), 10);
    got.dedup();
    assert_eq!(got.len(), 10, "no object handed out twice");
}

#[test]
fn zero_max_stashed_shares_everything() {
    let pool = LocalPool::builder(|| 7u8)
        .max_stashed(0)
        .manual_sweep()
        .build();
    pool.put(1);
    pool.put(2);
    assert_eq!(pool.stats().idle, 2);
    let got = std::thread::scope(|s| {
        s.spawn(|| {
            (
                Pooled::into_inner(pool.get()),
                Pooled::into_inner(pool.get()),
            )
        })
        .join()
        .unwrap()
    });
    assert_eq!(
        got,
        (2, 1),
        "newest first, as from a stash, and reachable from any thread"
    );
}

#[test]
fn zero_max_idle_keeps_nothing() {
    let pool = LocalPool::builder(|| 0u8)
        .max_stashed(2)
        .max_idle(0)
        .manual_sweep()
        .build();
    for i in 0..5 {
        pool.put(i);
    }
    let stats = pool.stats();
    assert_eq!((stats.idle, stats.rejected, stats.discarded), (0, 5, 0));
}

#[test]
fn zero_capacity_everywhere_rejects_every_return() {
    let ledger = Ledger::new();
    let l = Arc::clone(&ledger);
    let pool = LocalPool::builder(move || l.make())
        .max_stashed(0)
        .max_idle(0)
        .manual_sweep()
        .build();
    pool.with(|_| ());
    pool.with(|_| ());
    let stats = pool.stats();
    assert_eq!(
        (stats.created, stats.rejected, stats.discarded, stats.idle),
        (2, 2, 0, 0)
    );
    assert_eq!(ledger.dropped(), 2);
}

#[test]
fn zero_sized_objects() {
    // A stash that has had no get keeps nothing, so each put goes over as
    // a single: more than the singles' stack and ring hold, so that their
    // spill queue takes some too; fewer under Miri, which interprets each.
    let n = if cfg!(miri) { 150 } else { 1000 };
    let pool = manual(|| ());
    for _ in 0..n {
        pool.put(());
    }
    pool.with(|unit| *unit = ());
    let stats = pool.stats();
    assert_eq!(stats.returned, n + 1);
    assert_eq!(stats.idle as u64, n);
}

#[test]
fn victim_rule_one_sweep_survives_two_drop() {
    let ledger = Ledger::new();
    let l = Arc::clone(&ledger);
    let pool = LocalPool::builder(move || l.make()).manual_sweep().build();
    pool.with(|_| ());
    pool.sweep();
    assert_eq!(pool.stats().idle, 1, "survives one sweep");
    assert_eq!(ledger.dropped(), 0);
    pool.sweep();
    assert_eq!(pool.stats().idle, 0, "dropped by the second");
    assert_eq!(pool.stats().trimmed, 1);
    assert_eq!(ledger.dropped(), 1, "dropped before sweep returned");
}

#[test]
fn victim_rule_use_renews_an_object() {
    let ledger = Ledger::new();
    let l = Arc::clone(&ledger);
    let pool = LocalPool::builder(move || l.make()).manual_sweep().build();
    pool.with(|_| ());
    for _ in 0..5 {
        pool.sweep();
        pool.with(|_| ()); // taken and returned between sweeps: stays
    }
    assert_eq!((pool.stats().created, ledger.dropped()), (1, 0));
    pool.sweep();
    pool.sweep();
    assert_eq!(ledger.dropped(), 1);
}

#[test]
fn victim_rule_holds_in_the_overflow() {
    // Go's TestPool: put many so they spill to the shared part, one GC keeps
    // them (victim cache), the second drops them.
    let ledger = Ledger::new();
    let l = Arc::clone(&ledger);
    let pool = LocalPool::builder(move || l.make())
        .max_stashed(8)
        .manual_sweep()
        .build();
    for _ in 0..100 {
        pool.put(ledger.make());
    }
    assert_eq!(pool.stats().idle, 100);
    pool.sweep();
    assert_eq!(pool.stats().idle, 100);
    let got = pool.get();
    assert_eq!(
        pool.stats().created,
        0,
        "served from the victims after one sweep"
    );
    drop(got);
    pool.sweep();
    pool.sweep();
    assert_eq!(pool.stats().idle, 0);
    assert_eq!(ledger.live(), 0);
    assert!(
        Pooled::into_inner(pool.get()).id >= 100,
        "a new object after two sweeps"
    );
}

#[test]
fn victims_that_spill_keep_their_age() {
    let ledger = Ledger::new();
    let l = Arc::clone(&ledger);
    let pool = LocalPool::builder(move || l.make())
        .max_stashed(4)
        .manual_sweep()
        .build();
    for _ in 0..4 {
        pool.put(ledger.make());
    }
    pool.sweep(); // 4 victims in the stash
    for _ in 0..4 {
        pool.put(ledger.make()); // spills the victims to the overflow
    }
    assert_eq!(pool.stats().idle, 8);
    pool.sweep();
    assert_eq!(
        pool.stats().idle,
        4,
        "the old four died at their second sweep"
    );
    pool.sweep();
    assert_eq!(pool.stats().idle, 0);
    assert_eq!(ledger.live(), 0);
}

#[test]
fn sweep_of_an_unused_pool_is_harmless() {
    let pool: LocalPool<u8> = manual(|| 0);
    pool.sweep();
    pool.sweep();
    assert_eq!(pool.stats(), Stats::default());
}

#[test]
fn dropping_the_pool_drops_every_object() {
    let ledger = Ledger::new();
    let l = Arc::clone(&ledger);
    let pool = LocalPool::builder(move || l.make())
        .max_stashed(2)
        .manual_sweep()
        .build();
    for _ in 0..10 {
        pool.put(ledger.make());
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..3 {
                pool.put(ledger.make());
            }
        });
    });
    assert_eq!(ledger.live(), 13);
    drop(pool);
    assert_eq!(ledger.live(), 0);
}

#[test]
fn create_panic_leaves_the_pool_usable() {
    let calls = AtomicUsize::new(0);
    let pool = LocalPool::builder(|| {
        if calls.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("first create fails");
        }
        5u8
    })
    .manual_sweep()
    .build();
    assert!(catch_unwind(AssertUnwindSafe(|| pool.get())).is_err());
    assert_eq!(pool.stats().created, 0);
    assert_eq!(*pool.get(), 5);
    assert_eq!(pool.stats().created, 1);
}

struct PanicsOnRecycle;

impl Recycle<common::Tracked> for PanicsOnRecycle {
    fn create(&self) -> common::Tracked {
        unreachable!()
    }

    fn recycle(&self, value: &mut common::Tracked) -> bool {
        if value.id.is_multiple_of(2) {
            panic!("recycle panics on even ids");
        }
        true
    }
}

#[test]
fn recycle_panic_drops_the_object_and_counts_it_discarded() {
    let ledger = Ledger::new();
    let pool = LocalPool::builder(PanicsOnRecycle).manual_sweep().build();
    let even = ledger.make();
    let odd = ledger.make();
    assert!(catch_unwind(AssertUnwindSafe(|| pool.put(even))).is_err());
    assert_eq!(ledger.dropped(), 1);
    pool.put(odd);
    let stats = pool.stats();
    assert_eq!(
        (stats.discarded, stats.rejected, stats.returned, stats.idle),
        (1, 0, 1, 1)
    );
    drop(pool);
    assert_eq!(ledger.live(), 0);
}

#[test]
fn with_panic_drops_the_object_and_keeps_the_pool_usable() {
    let ledger = Ledger::new();
    let l = Arc::clone(&ledger);
    let pool = LocalPool::builder(move || l.make()).manual_sweep().build();
    pool.with(|_| ());
    let result = catch_unwind(AssertUnwindSafe(|| {
        pool.with(|_| panic!("user code fails"))
    }));
    assert!(result.is_err());
    assert_eq!(ledger.dropped(), 1, "the object in use was dropped");
    let stats = pool.stats();
    assert_eq!((stats.discarded, stats.rejected, stats.idle), (1, 0, 0));
    pool.with(|_| ());
    assert_eq!(pool.stats().idle, 1);
}

#[test]
fn guard_dropped_while_panicking_is_not_pooled() {
    let ledger = Ledger::new();
    let l = Arc::clone(&ledger);
    let pool = LocalPool::builder(move || l.make()).manual_sweep().build();
    let result = catch_unwind(AssertUnwindSafe(|| {
        let _guard = pool.get();
        panic!("while holding a guard");
    }));
    assert!(result.is_err());
    assert_eq!(ledger.dropped(), 1);
    let stats = pool.stats();
    assert_eq!(
        (stats.discarded, stats.rejected, stats.returned, stats.idle),
        (1, 0, 0, 0)
    );
}

/// Keeps odd numbers, refuses even ones.
struct KeepsOdd;

impl Recycle<u32> for KeepsOdd {
    fn create(&self) -> u32 {
        1
    }

    fn recycle(&self, value: &mut u32) -> bool {
        *value % 2 == 1
    }
}

#[test]
fn a_refusal_by_recycle_is_discarded_and_a_full_pool_rejects() {
    let pool = LocalPool::builder(KeepsOdd)
        .max_stashed(1)
        .max_idle(1)
        .manual_sweep()
        .build();
    common::grow_stash(&pool, 1);
    let base = pool.stats();
    pool.put(2); // refused by `recycle` while there is room
    assert_eq!((pool.stats().discarded, pool.stats().rejected), (1, 0));
    pool.put(1); // the stash
    pool.put(3); // spilled to the overflow
    pool.put(5); // neither has room
    let stats = pool.stats();
    assert_eq!(
        (
            stats.returned - base.returned,
            stats.discarded,
            stats.rejected,
            stats.idle
        ),
        (2, 1, 1, 2),
        "{stats:?}"
    );
    pool.put(4); // refused by `recycle` while the pool is full
    let stats = pool.stats();
    assert_eq!((stats.discarded, stats.rejected), (2, 1), "{stats:?}");
}

#[test]
fn a_thread_without_a_slot_counts_refusals_and_a_full_pool_apart() {
    // `max_idle(1)`: one slot, taken by this thread; the other thread
    // returns straight to the overflow, which has room for one.
    let pool = LocalPool::builder(KeepsOdd)
        .max_idle(1)
        .manual_sweep()
        .build();
    common::grow_stash(&pool, 1);
    let base = pool.stats();
    pool.put(1);
    std::thread::scope(|s| {
        s.spawn(|| {
            pool.put(2); // refused by `recycle`
            pool.put(3); // into the overflow
            pool.put(5); // no room
        });
    });
    let stats = pool.stats();
    assert_eq!(
        (
            stats.returned - base.returned,
            stats.discarded,
            stats.rejected
        ),
        (2, 1, 1),
        "{stats:?}"
    );
}

#[test]
fn stats_add_up() {
    let pool = LocalPool::builder(|| 0u64)
        .max_stashed(3)
        .max_idle(2)
        .manual_sweep()
        .build();
    let held: Vec<_> = (0..8).map(|_| pool.get()).collect();
    drop(held);
    pool.with(|_| ());
    pool.sweep();
    pool.sweep();
    let s = pool.stats();
    assert_eq!(s.created, 8);
    assert_eq!(s.reused, 1);
    assert_eq!(s.returned + s.rejected, 9);
    assert_eq!(s.discarded, 0, "every drop was for want of room");
    assert_eq!(s.idle, 0);
    assert!((s.hit_rate() - 1.0 / 9.0).abs() < 1e-9);
}

static STATIC_POOL: LocalPool<Vec<u8>> = LocalPool::new(|| Vec::with_capacity(128));

#[test]
fn static_pool_works_from_many_threads() {
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..100 {
                    STATIC_POOL.with(|buf| {
                        buf.clear();
                        buf.push(1);
                    });
                }
            });
        }
    });
    let stats = STATIC_POOL.stats();
    assert_eq!(stats.created + stats.reused, 400);
    assert!(stats.created <= 4, "each thread reuses its own: {stats:?}");
}

#[test]
fn debug_output_is_informative() {
    let pool = LocalPool::builder(|| 1u8)
        .max_stashed(9)
        .manual_sweep()
        .build();
    let guard = pool.get();
    assert_eq!(format!("{guard:?}"), "1");
    let text = format!("{pool:?}");
    assert!(text.contains("max_stashed: 9"), "{text}");
    assert!(text.contains("stats"), "{text}");
    let builder = LocalPool::builder(|| 1u8).max_idle(3);
    assert!(format!("{builder:?}").contains("max_idle: 3"));
}

#[test]
#[should_panic(expected = "sweep interval must be non-zero")]
fn zero_sweep_interval_is_refused() {
    let _ = LocalPool::builder(|| 0u8).sweep_every(std::time::Duration::ZERO);
}

#[test]
fn default_pool_uses_default() {
    let pool: LocalPool<String> = LocalPool::default();
    assert_eq!(*pool.get(), "");
}

/// A pool without stashes shrinks to what light traffic uses: after a burst
/// leaves five idle objects, a trickle of gets and returns takes the most
/// recently returned object each time, so the others go untouched and age
/// out in two sweeps, as they would in a stash. (Handed out oldest first,
/// the trickle would touch every idle object between two sweeps, and none
/// would ever age.)
#[test]
fn a_pool_without_stashes_shrinks_under_light_traffic() {
    let pool = LocalPool::builder(Vec::<u8>::new as fn() -> Vec<u8>)
        .max_stashed(0)
        .manual_sweep()
        .build();
    let burst: Vec<_> = (0..5).map(|_| pool.get()).collect();
    drop(burst);
    assert_eq!(pool.stats().idle, 5);
    for _ in 0..3 {
        for _ in 0..5 {
            pool.with(|buf| buf.push(1));
        }
        pool.sweep();
    }
    let stats = pool.stats();
    assert_eq!((stats.idle, stats.created), (1, 5), "{stats:?}");
}

#[test]
fn a_ready_made_pool_in_an_arc_lends_owned_guards_that_keep_it_alive() {
    use stashpool::SizedGuard;
    use stashpool::bytes::{BytePool, BytePools};

    let pool = Arc::new(BytePool::builder(64).manual_sweep().build());
    let mut guard = pool.get_owned();
    let weak = Arc::downgrade(&pool);
    drop(pool);
    assert!(weak.upgrade().is_some(), "the guard keeps its pool alive");
    guard.extend_from_slice(b"from another thread");
    let pool = Arc::clone(PooledOwned::pool(&guard));
    std::thread::spawn(move || drop(guard)).join().unwrap();
    let stats = pool.stats();
    assert_eq!((stats.returned, stats.idle), (1, 1));
    assert!(pool.get().is_empty(), "cleared on its way back");
    drop(pool);
    assert!(weak.upgrade().is_none(), "no guard left: the pool is gone");

    let classes = Arc::new(BytePools::builder(64, 1024).manual_sweep().build());
    let sized = classes.get_owned(100);
    assert!(SizedGuard::is_pooled(&sized));
    std::thread::spawn(move || drop(sized)).join().unwrap();
    assert_eq!(classes.class_stats(100).unwrap().idle, 1);
    let kept: Vec<u8> = SizedGuard::into_inner(classes.get_owned(100));
    assert_eq!(kept.capacity(), 112);
    assert_eq!(classes.stats().idle, 0);
}

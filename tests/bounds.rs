//! The pool-wide `max_idle` bound, `try_get` and `clear`, across threads.

mod common;

use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Barrier, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use common::{Ledger, Tracked, in_rounds, run_with_deadline};
use stashpool::{LocalPool, Pool};

type Maker = Box<dyn Fn() -> Tracked + Send + Sync>;

fn tracked_pool(ledger: &Arc<Ledger>, max_idle: Option<usize>) -> LocalPool<Tracked, Maker> {
    let ledger = Arc::clone(ledger);
    let make: Maker = Box::new(move || ledger.make());
    let builder = LocalPool::builder(make).manual_sweep();
    match max_idle {
        Some(n) => builder.max_idle(n),
        None => builder,
    }
    .build()
}

const DEADLINE: Duration = Duration::from_secs(60);

/// Taken by the tests whose threads must have stashes of their own, and by
/// the one that keeps 64 threads alive: a pool makes stashes for at most 8
/// threads per core, by stashpool thread id, so while those 64 threads hold
/// their ids the threads of a test running beside them may be past the
/// bound, and share their objects through the overflow instead.
static OWN_STASHES: Mutex<()> = Mutex::new(());

fn own_stashes() -> MutexGuard<'static, ()> {
    OWN_STASHES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[test]
fn max_idle_bounds_every_stash_and_the_overflow_together() {
    let _own = own_stashes();
    run_with_deadline(DEADLINE, || {
        const THREADS: usize = 64;
        const EACH: usize = 50;
        const MAX_IDLE: usize = 256;
        let ledger = Ledger::new();
        let pool = tracked_pool(&ledger, Some(MAX_IDLE));
        // Every thread returns its objects, then stays alive (its stash
        // with it) while the main thread checks and sweeps.
        // All threads hold their objects before any returns one, so every
        // get makes a new object and every stash exists before the returns.
        let got = Barrier::new(THREADS);
        let returned = Barrier::new(THREADS + 1);
        let swept = Barrier::new(THREADS + 1);
        thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    let held: Vec<_> = (0..EACH).map(|_| pool.get()).collect();
                    got.wait();
                    drop(held);
                    returned.wait();
                    swept.wait();
                });
            }
            returned.wait();
            let before = pool.stats();
            assert_eq!(before.created, (THREADS * EACH) as u64);
            assert_eq!(
                before.idle as u64 + before.rejected,
                (THREADS * EACH) as u64,
                "every return either pooled or rejected: {before:?}"
            );
            pool.sweep();
            let after = pool.stats();
            assert!(after.idle <= MAX_IDLE, "after one sweep: {after:?}");
            assert_eq!(ledger.live(), after.idle, "the rest were dropped");
            swept.wait();
        });
        drop(pool);
        assert_eq!(ledger.made(), THREADS * EACH);
        assert_eq!(ledger.dropped(), ledger.made(), "each dropped exactly once");
    });
}

/// Threads that each give back the objects of all the others (so each
/// gathers them, for several takers, into batches within its share): at
/// every quiescent point every return was pooled or rejected, a sweep
/// brings the pool within `max_idle`, and every object drops once.
#[test]
fn objects_gathered_for_several_takers_keep_within_max_idle() {
    let _own = own_stashes();
    run_with_deadline(DEADLINE, || {
        const THREADS: usize = 4;
        const EACH: usize = 24;
        const ROUNDS: usize = 30;
        const MAX_IDLE: usize = 20;
        let ledger = Ledger::new();
        let pool = tracked_pool(&ledger, Some(MAX_IDLE));
        let work = |me: usize, _, senders: &[Sender<_>], received: &Receiver<_>| {
            // Each object goes to another thread, round-robin.
            for i in 0..EACH {
                let to = (me + 1 + i % (THREADS - 1)) % THREADS;
                senders[to].send(pool.get()).unwrap();
            }
            for _ in 0..EACH {
                drop(received.recv().unwrap());
            }
        };
        in_rounds(THREADS, ROUNDS, work, |_| {
            let before = pool.stats();
            assert_eq!(before.gets, before.returned + before.rejected, "{before:?}");
            pool.sweep();
            let after = pool.stats();
            assert!(after.idle <= MAX_IDLE, "after a sweep: {after:?}");
            assert_eq!(
                ledger.live(),
                after.idle,
                "the rest were dropped: {after:?}"
            );
        });
        drop(pool);
        assert_eq!(ledger.dropped(), ledger.made(), "each dropped exactly once");
    });
}

#[test]
fn a_thread_keeps_at_most_its_share() {
    let _own = own_stashes();
    let ledger = Ledger::new();
    // Two stashes (the main thread's and one other): a share of 8 each.
    let pool = tracked_pool(&ledger, Some(16));
    drop(pool.get());
    thread::scope(|s| {
        s.spawn(|| {
            common::grow_stash(&pool, 8);
            let base = pool.stats();
            let held: Vec<_> = (0..40).map(|_| pool.get()).collect();
            drop(held);
            let stats = pool.stats();
            // 8 in its stash, at most 16 in the overflow, the rest refused.
            assert_eq!(stats.idle, 8 + 16, "{stats:?}");
            assert_eq!(stats.rejected - base.rejected, 40 - 8 - 16, "{stats:?}");
        });
    });
    pool.sweep();
    assert!(pool.stats().idle <= 16);
    drop(pool);
    assert_eq!(ledger.live(), 0);
}

#[test]
fn a_new_thread_shrinks_the_shares_of_the_others() {
    let _own = own_stashes();
    let ledger = Ledger::new();
    let pool = tracked_pool(&ledger, Some(8));
    // Alone, the main thread's share is all 8.
    let held: Vec<_> = (0..8).map(|_| pool.get()).collect();
    drop(held);
    assert_eq!(pool.stats().idle, 8);
    assert_eq!(pool.stats().rejected, 0);
    // A second thread's stash halves it: 4 of the 8 move to the overflow,
    // where the second thread finds them.
    thread::scope(|s| {
        s.spawn(|| {
            let got: Vec<_> = (0..4).map(|_| pool.get()).collect();
            assert_eq!(pool.stats().created, 8, "the 4 moved objects were reused");
            drop(got);
        });
    });
    drop(pool);
    assert_eq!(ledger.live(), 0);
}

#[test]
fn max_idle_zero_keeps_nothing() {
    let ledger = Ledger::new();
    let pool = tracked_pool(&ledger, Some(0));
    for _ in 0..3 {
        drop(pool.get());
    }
    pool.put(ledger.make());
    let stats = pool.stats();
    assert_eq!(
        (stats.created, stats.rejected, stats.discarded, stats.idle),
        (3, 4, 0, 0)
    );
    assert_eq!(ledger.live(), 0, "every return was dropped");
    assert!(pool.try_get().is_none());
}

#[test]
fn unbounded_pools_keep_what_their_threads_return() {
    let ledger = Ledger::new();
    let pool = tracked_pool(&ledger, None);
    let held: Vec<_> = (0..500).map(|_| pool.get()).collect();
    drop(held);
    assert_eq!(pool.stats().idle, 500);
    assert_eq!(pool.stats().rejected, 0);
}

#[test]
fn try_get_never_creates() {
    let ledger = Ledger::new();
    let pool = tracked_pool(&ledger, None);
    assert!(pool.try_get().is_none(), "a pool that made nothing");
    let held = pool.get();
    assert!(pool.try_get().is_none(), "its only object is lent out");
    drop(held);
    let again = pool.try_get().expect("the returned object");
    assert!(pool.try_get().is_none());
    drop(again);
    let stats = pool.stats();
    assert_eq!((stats.created, stats.reused, stats.idle), (1, 1, 1));
}

#[test]
fn try_get_takes_what_other_threads_returned() {
    let _own = own_stashes();
    let ledger = Ledger::new();
    let pool = tracked_pool(&ledger, None);
    // The main thread makes its stash first, so the spawned thread's stash
    // is its own and its exit moves the objects to the overflow.
    assert!(pool.try_get().is_none());
    let pool = Arc::new(pool);
    let (other, made) = (Arc::clone(&pool), Arc::clone(&ledger));
    // Joined, not scoped: `join` returns after the thread's exit hooks ran.
    thread::spawn(move || {
        for _ in 0..3 {
            other.put(made.make());
        }
    })
    .join()
    .unwrap();
    let got: Vec<_> = (0..3)
        .map(|_| pool.try_get().expect("an object the other thread put"))
        .collect();
    assert!(pool.try_get().is_none());
    assert_eq!(pool.stats().created, 0);
    drop(got);
    drop(Arc::into_inner(pool).expect("the only handle"));
    assert_eq!(ledger.live(), 0);
}

#[test]
fn clear_drops_every_idle_object_of_every_thread() {
    let _own = own_stashes();
    run_with_deadline(DEADLINE, || {
        const THREADS: usize = 4;
        let ledger = Ledger::new();
        let pool = tracked_pool(&ledger, None);
        let held = pool.get();
        held.acquire();
        let got = Barrier::new(THREADS);
        let returned = Barrier::new(THREADS + 1);
        let cleared = Barrier::new(THREADS + 1);
        thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    let mine: Vec<_> = (0..10).map(|_| pool.get()).collect();
                    // All made before any comes back: 10 a thread.
                    got.wait();
                    drop(mine);
                    returned.wait();
                    cleared.wait();
                    // The pool works on after a clear.
                    pool.with(|obj| {
                        obj.acquire();
                        obj.release();
                    });
                });
            }
            returned.wait();
            assert_eq!(pool.stats().idle, THREADS * 10);
            pool.clear();
            let stats = pool.stats();
            assert_eq!(stats.idle, 0, "{stats:?}");
            assert_eq!(stats.trimmed, (THREADS * 10) as u64);
            // Only the object in use is alive.
            assert_eq!(ledger.live(), 1);
            cleared.wait();
        });
        held.release();
        drop(held);
        assert!(pool.stats().idle >= 1, "the object in use came back");
        drop(pool);
        assert_eq!(ledger.live(), 0);
    });
}

#[test]
fn clear_on_an_unused_pool_does_nothing() {
    let pool = LocalPool::new(String::new);
    pool.clear();
    assert_eq!(pool.stats(), Default::default());
}

#[test]
fn pools_of_different_types_behind_one_trait() {
    let strings = LocalPool::new(String::new);
    let numbers = LocalPool::builder(|| 0u64).manual_sweep().build();
    strings.put(String::from("kept"));
    numbers.put(7);
    let pools: Vec<&dyn Pool> = vec![&strings, &numbers];
    assert_eq!(pools.iter().map(|p| p.stats().idle).sum::<usize>(), 2);
    pools.iter().for_each(|p| p.sweep());
    assert_eq!(pools.iter().map(|p| p.stats().trimmed).sum::<u64>(), 0);
    pools.iter().for_each(|p| p.clear());
    assert_eq!(pools.iter().map(|p| p.stats().idle).sum::<usize>(), 0);
}

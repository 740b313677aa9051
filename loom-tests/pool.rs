//! loom models of the `LocalPool` protocol.
//!
//! Run with `./loom.sh`, or:
//!
//! ```text
//! RUSTFLAGS="--cfg stashpool_loom" LOOM_MAX_PREEMPTIONS=2 \
//!     cargo test --release -p stashpool-loom-tests --test loom_pool \
//!     --target-dir target/loom
//! ```
//!
//! Under `--cfg stashpool_loom` the pool's per-thread table, overflow queue,
//! atomics, locks and cells are loom's (see `src/sync.rs`), so these models
//! run the pool's real code: the stash handshake, spill and steal, sweeps,
//! thread exit and pool drop.
//!
//! Every model uses the tests' own tracked objects (`tests/common/ledger.rs`,
//! built on loom's atomics here): a holder marks an object held for as long
//! as it uses it, so a model fails if an object is handed to two holders at
//! once (also on one thread), dropped while held, dropped twice, or never
//! dropped.
#![cfg(stashpool_loom)]

use loom::sync::Arc;
use loom::thread;
use stashpool::LocalPool;

/// The primitives `ledger.rs` is written against: loom's here.
mod sync {
    pub use loom::sync::Arc;
    pub use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
}

#[path = "../tests/common/ledger.rs"]
#[allow(dead_code)]
mod ledger;

use ledger::{Ledger, Tracked as Obj};

type Maker = Box<dyn Fn() -> Obj + Send + Sync>;

fn pool(ledger: &Arc<Ledger>, max_stashed: usize) -> LocalPool<Obj, Maker> {
    let ledger = Arc::clone(ledger);
    let make: Maker = Box::new(move || Ledger::track(&ledger));
    LocalPool::builder(make)
        .max_stashed(max_stashed)
        .manual_sweep()
        .build()
}

/// A pool that keeps at most `max_idle` idle objects after each sweep.
fn bounded(ledger: &Arc<Ledger>, max_stashed: usize, max_idle: usize) -> LocalPool<Obj, Maker> {
    let ledger = Arc::clone(ledger);
    let make: Maker = Box::new(move || Ledger::track(&ledger));
    LocalPool::builder(make)
        .max_stashed(max_stashed)
        .max_idle(max_idle)
        .manual_sweep()
        .build()
}

/// Drops the pool and checks that every object was dropped exactly once.
fn drop_and_check(pool: LocalPool<Obj, Maker>, ledger: &Ledger) {
    let stats = pool.stats();
    assert_eq!(
        stats.idle,
        ledger.live(),
        "stats agree with the objects: {stats:?}"
    );
    drop(pool);
    assert_eq!(ledger.live(), 0, "every object dropped exactly once");
}

/// An owner that returns one object, then uses one.
fn spawn_owner(pool: &Arc<LocalPool<Obj, Maker>>, ledger: &Arc<Ledger>) -> thread::JoinHandle<()> {
    let (pool, ledger) = (Arc::clone(pool), Arc::clone(ledger));
    thread::spawn(move || {
        pool.put(Ledger::track(&ledger));
        pool.with(|obj| obj.hold(|_| ()));
    })
}

/// Two threads race to use a new pool first, so both make its shared state
/// and race to publish it: one state wins, the other is dropped unseen, and
/// both threads' objects end up pooled in the winner.
#[test]
fn first_uses_race_to_make_the_shared_state() {
    loom::model(|| {
        let ledger = Ledger::new();
        let pool = Arc::new(pool(&ledger, 1));
        let other = {
            let (pool, ledger) = (Arc::clone(&pool), Arc::clone(&ledger));
            thread::spawn(move || pool.put(Ledger::track(&ledger)))
        };
        pool.put(Ledger::track(&ledger));
        other.join().unwrap();
        let stats = pool.stats();
        assert_eq!((stats.returned, stats.idle), (2, 2), "{stats:?}");
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// Two threads get, use and return while objects sit in the overflow: each
/// object has one holder at a time, and the counts come out exact.
#[test]
fn get_and_return_on_two_threads() {
    loom::model(|| {
        let ledger = Ledger::new();
        let pool = Arc::new(pool(&ledger, 1));
        pool.put(Ledger::track(&ledger));
        pool.put(Ledger::track(&ledger)); // both to the overflow
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || pool.with(|obj| obj.hold(|_| ())))
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        let stats = pool.stats();
        assert_eq!(stats.created + stats.reused, 2);
        assert_eq!(stats.created as usize + 2, ledger.made());
        drop_and_check(pool, &ledger);
    });
}

/// One thread spills into the overflow while another steals from it.
#[test]
fn spill_races_steal() {
    loom::model(|| {
        let ledger = Ledger::new();
        let pool = Arc::new(pool(&ledger, 3));
        // This thread's stash keeps three, so its fourth put spills two.
        grow_to(&pool, 3);
        let stealer = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                // Both held at once: one object handed out twice fails.
                let a = pool.get();
                a.acquire();
                let b = pool.get();
                b.acquire();
                a.release();
                b.release();
            })
        };
        for _ in 0..4 {
            pool.put(Ledger::track(&ledger));
        }
        stealer.join().unwrap();
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// A sweep races an owner's get and return: nothing held is dropped, nothing
/// is handed out twice, and two more sweeps leave the pool empty.
#[test]
fn sweep_races_owner() {
    loom::model(|| {
        let ledger = Ledger::new();
        let pool = Arc::new(pool(&ledger, 2));
        let owner = spawn_owner(&pool, &ledger);
        let sweeper = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.sweep())
        };
        owner.join().unwrap();
        sweeper.join().unwrap();
        // Whatever the interleaving, the object was returned after or during
        // that sweep: it survives one more and is dropped by the next.
        pool.sweep();
        assert!(ledger.live() <= 1);
        pool.sweep();
        assert_eq!(ledger.live(), 0, "dropped by its second sweep");
        assert_eq!(pool.stats().idle, 0);
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// The victim rule with a busy neighbour: an object put before two sweeps
/// and never taken is gone after them, whatever another thread does to the
/// pool meanwhile.
#[test]
fn victim_rule_with_a_busy_neighbour() {
    loom::model(|| {
        let ledger = Ledger::new();
        let pool = Arc::new(pool(&ledger, 2));
        let idle = Ledger::new();
        // In this thread's stash, out of the neighbour's reach.
        grow_to(&pool, 1);
        pool.put(Ledger::track(&idle));
        let neighbour = {
            let (pool, ledger) = (Arc::clone(&pool), Arc::clone(&ledger));
            thread::spawn(move || {
                pool.with(|obj| obj.hold(|_| ()));
                pool.put(Ledger::track(&ledger));
            })
        };
        pool.sweep();
        assert_eq!(idle.live(), 1, "survives the first sweep");
        pool.sweep();
        assert_eq!(idle.live(), 0, "dropped by the second");
        neighbour.join().unwrap();
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        drop(pool);
        assert_eq!(ledger.live(), 0);
    });
}

/// Two owners and a sweeper at once. The sweep runs on the model's main
/// thread: three threads instead of four keep the search within reach at
/// three preemptions, and the race is the same.
#[test]
fn two_owners_and_a_sweeper() {
    loom::model(|| {
        let ledger = Ledger::new();
        let pool = Arc::new(pool(&ledger, 1));
        pool.put(Ledger::track(&ledger));
        let owners: Vec<_> = (0..2)
            .map(|_| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || pool.with(|obj| obj.hold(|_| ())))
            })
            .collect();
        pool.sweep();
        for t in owners {
            t.join().unwrap();
        }
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// A stash's limit changes while another thread steals what it spilled
/// and a sweep runs: the owner's first get lets its stash keep one, a put
/// spills that one as a batch, and a get that then finds the stash empty
/// doubles the limit and steals (the batch, unless the other thread took
/// it) or makes an object; the sweep halves the limit of a stash that did
/// not underflow since the last one and sheds what it holds beyond it.
/// No object is handed out twice, lost, or dropped while held.
#[test]
fn a_limit_change_races_a_steal_and_a_sweep() {
    loom::model(|| {
        let ledger = Ledger::new();
        let pool = Arc::new(pool(&ledger, 2));
        let owner = {
            let (pool, ledger) = (Arc::clone(&pool), Arc::clone(&ledger));
            thread::spawn(move || {
                pool.with(|obj| obj.hold(|_| ()));
                pool.put(Ledger::track(&ledger));
                let a = pool.get();
                a.acquire();
                let b = pool.get();
                b.acquire();
                a.release();
                b.release();
                drop((a, b));
            })
        };
        let stealer = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.with(|obj| obj.hold(|_| ())))
        };
        pool.sweep();
        owner.join().unwrap();
        stealer.join().unwrap();
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// An idle object, waiting for one to appear: loom's `join` returns when
/// the thread's closure does, before its thread-locals (the exit hooks) are
/// dropped, unlike std's, so a flush on exit lands some time after it. A
/// flush that never lands makes this spin until loom gives up on the model.
fn wait_for_one(pool: &LocalPool<Obj, Maker>) -> stashpool::Pooled<'_, Obj, Maker> {
    loop {
        if let Some(obj) = pool.try_get() {
            return obj;
        }
        thread::yield_now();
    }
}

/// Makes this thread hold a thread id of its own (through another pool),
/// so that it cannot inherit the stash of a thread that exits meanwhile.
fn hold_thread_id() {
    let ledger = Ledger::new();
    let anchor = pool(&ledger, 1);
    // A pool made and dropped here: the thread keeps the id it took.
    drop(anchor.get());
    drop(anchor);
}

/// A thread exits with a full stash while another sweeps: its exit hook
/// hands both objects to the overflow (one sweep drops nothing), where a
/// thread with an id of its own finds them.
#[test]
fn thread_exit_with_a_full_stash() {
    loom::model(|| {
        hold_thread_id();
        let ledger = Ledger::new();
        let pool = Arc::new(pool(&ledger, 2));
        let exiting = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                // Two made, and returned: the stash keeps one (its limit
                // after one get) and spills the other.
                let (a, b) = (pool.get(), pool.get());
                drop((a, b));
            })
        };
        let sweeper = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.sweep())
        };
        exiting.join().unwrap();
        sweeper.join().unwrap();
        assert_eq!(ledger.live(), 2, "one sweep drops nothing just returned");
        let made = pool.stats().created;
        // One batch per age: a get may come between the two.
        let a = wait_for_one(&pool);
        a.acquire();
        let b = wait_for_one(&pool);
        b.acquire();
        assert_eq!(pool.stats().created, made, "both were found, none made");
        a.release();
        b.release();
        drop((a, b));
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// A thread given an exited thread's id inherits its stash in every pool;
/// what it puts there is flushed when it exits too, although it did not
/// make that stash.
#[test]
fn a_thread_that_inherits_a_stash_flushes_it_on_exit() {
    loom::model(|| {
        let ledger = Ledger::new();
        let pool = Arc::new(pool(&ledger, 2));
        let other = Arc::new(self::pool(&ledger, 2));
        pool.put(Ledger::track(&ledger)); // this thread's id and stash
        {
            let (pool, ledger) = (Arc::clone(&pool), Arc::clone(&ledger));
            thread::spawn(move || pool.put(Ledger::track(&ledger)))
                .join()
                .unwrap();
        }
        // Both idle objects out (the second once the exited thread's hook
        // has flushed it): the pool is empty. The next thread is given the
        // exited thread's id if its hooks have given it back by then (loom
        // also runs the interleavings where they have not).
        let held = (pool.get(), wait_for_one(&pool));
        held.0.acquire();
        held.1.acquire();
        let seven = {
            let (pool, other) = (Arc::clone(&pool), Arc::clone(&other));
            // Given the exited thread's id: first a hook for another pool,
            // then the exited thread's stash in this one.
            thread::spawn(move || {
                drop(other.get());
                // Made (the pool's objects are held) and returned: the
                // inherited stash keeps it.
                pool.with(|obj| obj.id)
            })
            .join()
            .unwrap()
        };
        let got = wait_for_one(&pool);
        assert_eq!(got.id, seven, "flushed when the inheriting thread exited");
        held.0.release();
        held.1.release();
        drop((held, got));
        let other = Arc::try_unwrap(other).ok().unwrap();
        drop(other);
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// A thread gives back objects taken on two others (this thread, and one
/// that has exited, whose id and stash it may inherit, slotless), so it
/// gathers them for a batch (two under loom), while this thread sweeps;
/// then it exits with the batch part-filled, and its exit flush hands what
/// it gathered over. Every object is found again or dropped, once.
#[test]
fn gathered_objects_race_a_sweep_and_their_gatherers_exit() {
    loom::model(|| {
        hold_thread_id();
        let ledger = Ledger::new();
        // A std `Arc`: guards that own their pool hold one.
        let pool = std::sync::Arc::new(pool(&ledger, 4));
        let mine = std::sync::Arc::clone(&pool).get_owned();
        let theirs = {
            let pool = std::sync::Arc::clone(&pool);
            thread::spawn(move || pool.get_owned()).join().unwrap()
        };
        let gatherer = thread::spawn(move || {
            drop(mine);
            drop(theirs);
        });
        pool.sweep();
        gatherer.join().unwrap();
        // Both come back: the one given back first as any return, the one
        // gathered with the exit flush (which lands after `join`).
        let made = pool.stats().created;
        let (a, b) = (wait_for_one(&pool), wait_for_one(&pool));
        a.acquire();
        b.acquire();
        assert_eq!(pool.stats().created, made, "both were found, none made");
        a.release();
        b.release();
        drop((a, b));
        let pool = std::sync::Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// Lets this thread's stash keep `n` objects, as rounds of its own use
/// would (a stash keeps none until its thread takes one, and doubles what
/// it keeps when a get finds it empty after it spilled), then empties the
/// pool. Before any other thread starts, so it adds no interleavings.
fn grow_to(pool: &LocalPool<Obj, Maker>, n: usize) {
    for _ in 0..=n.ilog2() + 1 {
        let held: Vec<_> = (0..n).map(|_| pool.get()).collect();
        drop(held);
    }
    pool.clear();
}

/// An owner spills into the overflow while a sweep of a bounded pool trims
/// the overflow to the bound: every object ends up pooled or dropped, once.
#[test]
fn spill_races_a_bounded_sweep() {
    loom::model(|| {
        let ledger = Ledger::new();
        let pool = Arc::new(bounded(&ledger, 1, 2));
        grow_to(&pool, 1);
        pool.put(Ledger::track(&ledger));
        pool.sweep(); // the first object is a victim now
        let base = pool.stats();
        let sweeper = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.sweep())
        };
        pool.put(Ledger::track(&ledger)); // spills
        pool.put(Ledger::track(&ledger)); // spills
        sweeper.join().unwrap();
        let stats = pool.stats();
        assert_eq!(stats.idle, ledger.live(), "{stats:?}");
        // Pooled, or refused for room: the bound's two may be the first
        // object, still in transit to the overflow when the sweep ran, and
        // a put the sweep shed from the stash.
        let returned = stats.returned - base.returned;
        let rejected = stats.rejected - base.rejected;
        assert_eq!(returned + rejected, 2, "{stats:?}");
        // The bound holds after the next sweep, whatever the order.
        pool.sweep();
        assert!(pool.stats().idle <= 2, "{:?}", pool.stats());
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// An owner spills a batch of two into the overflow while a sweep of a
/// bounded pool cuts the overflow down to the bound: a batch cut in part
/// goes back to the overflow with the rest, and the counts stay exact.
#[test]
fn spill_races_an_overflow_cut() {
    loom::model(|| {
        let ledger = Ledger::new();
        // One stash: its share is the whole bound, three; a spill moves two.
        let pool = Arc::new(bounded(&ledger, 3, 3));
        grow_to(&pool, 3);
        let base = pool.stats();
        let sweeper = {
            let pool = Arc::clone(&pool);
            // Four idle, bound three: cuts one of the spilled two.
            thread::spawn(move || pool.sweep())
        };
        for _ in 0..4 {
            pool.put(Ledger::track(&ledger)); // the fourth spills two
        }
        sweeper.join().unwrap();
        let stats = pool.stats();
        assert_eq!(stats.idle, ledger.live(), "{stats:?}");
        assert_eq!(stats.returned - base.returned, 4, "{stats:?}");
        pool.sweep();
        assert!(pool.stats().idle <= 3, "{:?}", pool.stats());
        assert_eq!(pool.stats().idle, ledger.live());
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// Puts two new objects into this thread's stash, as its own use would
/// have them there: a stash keeps none until its thread takes one, and two
/// once a get found it empty after it spilled (`Local::limit`). Before any
/// other thread starts, so it adds no interleavings.
fn stash_two(pool: &LocalPool<Obj, Maker>, ledger: &Arc<Ledger>) {
    pool.put(Ledger::track(ledger));
    pool.put(Ledger::track(ledger));
    for _ in 0..2 {
        let (a, b) = (pool.get(), pool.get());
        drop((a, b));
    }
}

/// A pool bounded by `max_idle`: a new stash rebalances every stash's share
/// (moving what a stash holds beyond it to the overflow) while its owner
/// returns objects and a sweep enforces the bound.
#[test]
fn rebalance_races_a_return() {
    loom::model(|| {
        let ledger = Ledger::new();
        let pool = Arc::new(bounded(&ledger, 4, 2));
        // This thread's stash takes its share, the whole bound: two.
        stash_two(&pool, &ledger);
        let newcomer = {
            let (pool, ledger) = (Arc::clone(&pool), Arc::clone(&ledger));
            // Its stash halves every share.
            thread::spawn(move || pool.put(Ledger::track(&ledger)))
        };
        let sweeper = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.sweep())
        };
        // This thread's own get and return race the rebalance.
        let got = pool.get();
        got.hold(|_| ());
        drop(got);
        newcomer.join().unwrap();
        sweeper.join().unwrap();
        let stats = pool.stats();
        assert_eq!(stats.idle, ledger.live(), "{stats:?}");
        assert_eq!(ledger.made(), 3, "nothing made: an object was idle");
        pool.sweep();
        assert!(pool.stats().idle <= 2, "the bound, after a sweep");
        assert_eq!(pool.stats().idle, ledger.live());
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// `clear` races a get and a return on another thread: what was idle when
/// the clear reached it is dropped, the object in use is not, and it is
/// pooled again after.
#[test]
fn clear_races_a_get() {
    loom::model(|| {
        let ledger = Ledger::new();
        let pool = Arc::new(pool(&ledger, 1));
        pool.put(Ledger::track(&ledger));
        pool.put(Ledger::track(&ledger)); // one spills to the overflow
        let user = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                let got = pool.get();
                got.hold(|_| ());
                got.id
            })
        };
        pool.clear();
        let used = user.join().unwrap();
        let stats = pool.stats();
        assert_eq!(stats.idle, ledger.live(), "{stats:?}");
        // The user got an object (old or new) and returned it after or
        // during the clear; at most that one is left.
        assert!(ledger.live() <= 1, "{stats:?}");
        if ledger.live() == 1 {
            // In the user's stash until its exit hook flushes it.
            assert_eq!(wait_for_one(&pool).id, used, "the one left is the one used");
        }
        pool.clear();
        assert_eq!(ledger.live(), 0);
        assert_eq!(pool.stats().idle, 0);
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// Dropping the pool after its threads are done drops every object, in
/// every stash and in the overflow, exactly once.
#[test]
fn pool_drop_after_threads() {
    loom::model(|| {
        let ledger = Ledger::new();
        let pool = Arc::new(pool(&ledger, 1));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let pool = Arc::clone(&pool);
                // Made, or the main thread's, and kept in this thread's
                // stash, which its exit flushes.
                thread::spawn(move || pool.with(|obj| obj.hold(|_| ())))
            })
            .collect();
        pool.put(Ledger::track(&ledger));
        for t in threads {
            t.join().unwrap();
        }
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        assert!((1..=3).contains(&ledger.made()), "{}", ledger.made());
        drop_and_check(pool, &ledger);
    });
}

/// An owned guard got on one thread is dropped on another, into that
/// thread's stash, while the first thread keeps using the pool.
#[test]
fn owned_guard_dropped_on_another_thread() {
    loom::model(|| {
        let ledger = Ledger::new();
        let pool = std::sync::Arc::new(pool(&ledger, 1));
        let guard = pool.get_owned();
        let other = thread::spawn(move || {
            guard.hold(|_| ());
            drop(guard);
        });
        pool.with(|obj| obj.hold(|_| ()));
        other.join().unwrap();
        let pool = std::sync::Arc::try_unwrap(pool).ok().unwrap();
        assert_eq!(pool.stats().returned, 2);
        drop_and_check(pool, &ledger);
    });
}

/// The background sweeper sweeps a pool, through a strong reference it got
/// by upgrading its weak one, while the pool drops: every object is dropped
/// exactly once, by the sweep that took it or by the pool's drop, and the
/// last strong reference may be the sweeper's.
#[test]
fn pool_drop_races_a_sweep() {
    loom::model(|| {
        let ledger = Ledger::new();
        let pool = pool(&ledger, 1);
        pool.put(Ledger::track(&ledger));
        pool.put(Ledger::track(&ledger)); // spills to the overflow
        pool.sweep(); // both are victims: the racing sweep drops them
        pool.put(Ledger::track(&ledger)); // fresh: only pool drop drops it
        let sweep = pool.loom_background_sweep();
        let sweeper = thread::spawn(sweep);
        drop(pool);
        sweeper.join().unwrap();
        assert_eq!(ledger.made(), 3);
        assert_eq!(ledger.live(), 0, "every object dropped exactly once");
    });
}

/// A guard returned by a thread without a stash (late in its teardown, its
/// thread id given back) goes straight to the overflow while a sweep of a
/// bounded pool ages and trims it: the return is counted, stamped with the
/// sweep count it lands in (so that one sweep does not drop it), found by
/// the next get, and every object is dropped exactly once.
#[test]
fn stashless_return_races_a_sweep() {
    loom::model(|| {
        let ledger = Ledger::new();
        let pool = std::sync::Arc::new(bounded(&ledger, 1, 2));
        grow_to(&pool, 1);
        let base = pool.stats();
        pool.put(Ledger::track(&ledger));
        pool.put(Ledger::track(&ledger)); // spills to the overflow
        pool.sweep(); // two victims: one is lent, the racing sweep drops the other
        let guard = pool.get_owned();
        guard.acquire();
        let lent = guard.id;
        let returner = thread::spawn(move || {
            LocalPool::<Obj, Maker>::loom_end_thread_id();
            guard.release();
            drop(guard); // no stash here: straight to the overflow
        });
        pool.sweep();
        returner.join().unwrap();
        let stats = pool.stats();
        assert_eq!(
            stats.returned - base.returned,
            3,
            "the stashless return is counted: {stats:?}"
        );
        assert_eq!(stats.idle, ledger.live(), "{stats:?}");
        assert_eq!(
            ledger.live(),
            1,
            "the other victim dropped, the lent one kept: {stats:?}"
        );
        let got = pool.try_get().expect("the stashless return is pooled");
        assert_eq!(got.id, lent);
        drop(got);
        let pool = std::sync::Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// A pool with one slot, which the main thread holds: a second thread has
/// no stash. Its get takes the object the main thread spilled (or
/// makes one while the sweep holds that batch), and its return goes to the
/// overflow's singles, stamped without the sweep lock, while a sweep ages
/// the pool: the return is counted, survives that sweep, goes within two
/// more, and every object is dropped exactly once.
#[test]
fn a_thread_without_a_slot_races_a_sweep() {
    loom::model(|| {
        let ledger = Ledger::new();
        let make: Maker = {
            let ledger = Arc::clone(&ledger);
            Box::new(move || Ledger::track(&ledger))
        };
        let pool = Arc::new(
            LocalPool::builder(make)
                .max_stashed(1)
                .manual_sweep()
                .loom_max_stashes(1)
                .build(),
        );
        pool.put(Ledger::track(&ledger)); // the main thread's stash
        pool.put(Ledger::track(&ledger)); // spills one to the overflow
        let other = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                // No stash: from the overflow, and back to it.
                pool.with(|obj| obj.hold(|_| ()));
            })
        };
        pool.sweep();
        other.join().unwrap();
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        let stats = pool.stats();
        // The get found the spilled object, or (while the sweep held its
        // batch) made one.
        assert_eq!(stats.created + stats.reused, 1, "{stats:?}");
        assert_eq!((stats.returned, stats.trimmed), (3, 0), "{stats:?}");
        assert_eq!(stats.idle, 2 + stats.created as usize, "{stats:?}");
        assert_eq!(stats.idle, ledger.live(), "{stats:?}");
        // The main thread's object was a victim of the racing sweep and
        // goes at the next; the returned one is stamped with the count
        // before or after the racing sweep, so it goes at the next or the
        // one after.
        pool.sweep();
        assert!(ledger.live() <= 1, "{:?}", pool.stats());
        pool.sweep();
        assert_eq!(ledger.live(), 0, "{:?}", pool.stats());
        drop_and_check(pool, &ledger);
    });
}

/// A pool with one slot.
fn one_slot(ledger: &Arc<Ledger>, max_stashed: usize) -> LocalPool<Obj, Maker> {
    let ledger = Arc::clone(ledger);
    let make: Maker = Box::new(move || Ledger::track(&ledger));
    LocalPool::builder(make)
        .max_stashed(max_stashed)
        .manual_sweep()
        .loom_max_stashes(1)
        .build()
}

/// The main thread holds the only slot and has not used the pool since the
/// last sweep, and another thread found no slot free; a sweep that takes
/// the slot back races the main thread's next get and return, which either
/// comes first (and keeps the slot) or finds its slot gone and takes it
/// again (it is free). No object is lost or handed out twice, and the slot
/// is held once at most.
#[test]
fn taking_an_idle_slot_back_races_its_owners_get() {
    loom::model(|| {
        let ledger = Ledger::new();
        let pool = Arc::new(one_slot(&ledger, 2));
        pool.put(Ledger::track(&ledger));
        pool.sweep(); // the owner's count, as of now
        {
            // Wants a slot, finds none: goes through the overflow.
            let (pool, ledger) = (Arc::clone(&pool), Arc::clone(&ledger));
            thread::spawn(move || pool.put(Ledger::track(&ledger)))
                .join()
                .unwrap();
        }
        let sweeper = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.sweep())
        };
        pool.with(|obj| obj.hold(|_| ()));
        sweeper.join().unwrap();
        assert!(pool.loom_slots_held() <= 1);
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// Two threads new to a pool with one slot (`max_idle(1)`) race for it:
/// one gets it, the other goes through the overflow, and the pool keeps at
/// most one idle object after a sweep.
#[test]
fn newcomers_race_for_the_last_slot() {
    loom::model(|| {
        let ledger = Ledger::new();
        let pool = Arc::new(bounded(&ledger, 2, 1));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (pool, ledger) = (Arc::clone(&pool), Arc::clone(&ledger));
                thread::spawn(move || {
                    pool.with(|obj| obj.hold(|_| ()));
                    pool.put(Ledger::track(&ledger));
                    assert!(pool.loom_slots_held() <= 1);
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        pool.sweep();
        assert!(pool.stats().idle <= 1, "{:?}", pool.stats());
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// A thread that holds the only slot and stops using the pool (blocked, as
/// far as the pool can tell) while another thread wants one loses it to the
/// second of two sweeps; a newcomer takes it while the blocked thread comes
/// back and returns an object, which goes to the overflow or into its stash
/// with the slot taken back again, whichever comes first.
#[test]
fn a_blocked_threads_slot_goes_to_a_newcomer() {
    loom::model(|| {
        let ledger = Ledger::new();
        let pool = Arc::new(one_slot(&ledger, 1));
        pool.put(Ledger::track(&ledger)); // the main thread's slot
        pool.sweep();
        {
            // Wants a slot, finds none.
            let (pool, ledger) = (Arc::clone(&pool), Arc::clone(&ledger));
            thread::spawn(move || pool.put(Ledger::track(&ledger)))
                .join()
                .unwrap();
        }
        pool.sweep(); // idle since the last one: the slot goes back
        assert_eq!(pool.loom_slots_held(), 0);
        let newcomer = {
            let (pool, ledger) = (Arc::clone(&pool), Arc::clone(&ledger));
            thread::spawn(move || pool.put(Ledger::track(&ledger)))
        };
        pool.put(Ledger::track(&ledger));
        newcomer.join().unwrap();
        assert!(pool.loom_slots_held() <= 1);
        let stats = pool.stats();
        assert_eq!(
            (stats.returned, stats.discarded, stats.rejected),
            (4, 0, 0),
            "{stats:?}"
        );
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// Waits until owners use compiler fences: the sweeps that used a fence,
/// which include the exit flushes of threads already joined (loom's `join`
/// returns before the thread's exit hooks run), are done, and the last of
/// them (or the registration) switched the owners. A switch that never
/// comes makes this spin until loom gives up on the model.
fn wait_for_the_switch() {
    while !LocalPool::<Obj, Maker>::loom_owners_switched() {
        thread::yield_now();
    }
}

/// The end of a switch model: once the owners have switched, a use on
/// compiler fences, then every object accounted for.
fn use_after_the_switch(pool: Arc<LocalPool<Obj, Maker>>, ledger: &Ledger) {
    wait_for_the_switch();
    pool.with(|obj| obj.hold(|_| ())); // on compiler fences
    let pool = Arc::try_unwrap(pool).ok().unwrap();
    drop_and_check(pool, ledger);
}

/// An owner gets and returns while a sweeper sweeps, registers the process
/// for `membarrier` and sweeps again: the owner's critical sections use
/// either barrier, and the one sweep that used a fence is done before any
/// owner moves to compiler fences (the barriers check it, under loom, at
/// every owner-side barrier after the switch). The victim rule holds
/// across the switch.
#[test]
fn owners_switch_barriers_between_two_sweeps() {
    loom::model(|| {
        LocalPool::<Obj, Maker>::loom_model_gate();
        let ledger = Ledger::new();
        let pool = Arc::new(pool(&ledger, 2));
        pool.put(Ledger::track(&ledger)); // something to sweep
        let owner = spawn_owner(&pool, &ledger);
        pool.sweep();
        LocalPool::<Obj, Maker>::loom_register();
        pool.sweep();
        owner.join().unwrap();
        use_after_the_switch(pool, &ledger);
    });
}

/// The registration races a sweep that uses a fence, and an owner races
/// both: whichever of the registration and that sweep comes last switches
/// the owners, never while the sweep is in flight.
#[test]
fn registration_races_a_sweep() {
    loom::model(|| {
        LocalPool::<Obj, Maker>::loom_model_gate();
        let ledger = Ledger::new();
        let pool = Arc::new(pool(&ledger, 2));
        pool.put(Ledger::track(&ledger)); // something to sweep
        let owner = spawn_owner(&pool, &ledger);
        let sweeper = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.sweep())
        };
        LocalPool::<Obj, Maker>::loom_register();
        sweeper.join().unwrap();
        owner.join().unwrap();
        use_after_the_switch(pool, &ledger);
    });
}

// === loan books ===

/// A pool whose calling thread keeps a loan book, and one object it made
/// and lent, entered there: a guard to give back on another thread.
fn lent_from_a_book(
    ledger: &Arc<Ledger>,
) -> (
    std::sync::Arc<LocalPool<Obj, Maker>>,
    stashpool::PooledOwned<Obj, Maker>,
) {
    let pool = std::sync::Arc::new(pool(ledger, 2));
    pool.loom_keep_book();
    let lent = pool.get_owned();
    (pool, lent)
}

/// A loan given back on another thread (marked back in its node) races its
/// taker's next get, which looks at the book, and a sweep, which collects
/// the book: the object has one holder at a time, is neither lost nor
/// dropped by one sweep, and the taker finds it afterwards without making
/// one.
#[test]
fn loan_given_back_races_its_takers_get_and_a_sweep() {
    loom::model(|| {
        let ledger = Ledger::new();
        let (pool, lent) = lent_from_a_book(&ledger);
        let returner = thread::spawn(move || {
            lent.hold(|_| ());
            drop(lent);
        });
        let sweeper = {
            let pool = std::sync::Arc::clone(&pool);
            thread::spawn(move || pool.sweep())
        };
        let got = pool.get();
        got.hold(|_| ());
        drop(got);
        returner.join().unwrap();
        sweeper.join().unwrap();
        // One or two made (the get may have come before the object was
        // back): every one of them is idle, and found.
        let made = ledger.made();
        assert_eq!(pool.stats().idle, made, "{:?}", pool.stats());
        let found: Vec<_> = (0..made).map(|_| pool.get()).collect();
        found.iter().for_each(|obj| obj.acquire());
        assert_eq!(ledger.made(), made, "all found, none made");
        found.iter().for_each(|obj| obj.release());
        drop(found);
        let pool = std::sync::Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// A loan given back on another thread while its taker exits: the exit
/// closes the book, and either collects the object or the returning
/// thread finds the book closed and collects it itself, into the overflow;
/// a get then finds it, on a thread with an id of its own, without making
/// one. (Were neither to happen, the object would wait in a closed book for
/// the next sweep, and `wait_for_one` would spin until loom gave up on the
/// model.)
#[test]
fn loan_given_back_races_its_takers_exit() {
    loom::model(|| {
        hold_thread_id();
        let ledger = Ledger::new();
        let pool = std::sync::Arc::new(pool(&ledger, 2));
        let (send, receive) = loom::sync::mpsc::channel();
        let taker = {
            let pool = std::sync::Arc::clone(&pool);
            thread::spawn(move || {
                pool.loom_keep_book();
                send.send(pool.get_owned()).unwrap();
            })
        };
        let lent = receive.recv().unwrap();
        lent.hold(|_| ());
        drop(lent);
        taker.join().unwrap();
        // loom's `join` returns before the thread's exit hooks have run:
        // until the flush lands, the object may wait in the open book.
        let got = wait_for_one(&pool);
        got.hold(|_| ());
        assert_eq!(ledger.made(), 1, "found, not made");
        drop(got);
        let pool = std::sync::Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// A loan kept on another thread (`into_inner`: its object leaves the
/// pool, its node stays in the book as an empty shell) races a sweep that
/// collects the book: the object is dropped once, by its keeper, and the
/// shell is freed once, by the sweep or by the taker's next get.
#[test]
fn loan_kept_elsewhere_races_a_sweep() {
    loom::model(|| {
        let ledger = Ledger::new();
        let (pool, lent) = lent_from_a_book(&ledger);
        let keeper = thread::spawn(move || {
            let kept = stashpool::PooledOwned::into_inner(lent);
            kept.hold(|_| ());
        });
        pool.sweep();
        keeper.join().unwrap();
        assert_eq!(ledger.live(), 0, "kept, then dropped by its keeper");
        let got = pool.get();
        got.hold(|_| ());
        drop(got);
        let pool = std::sync::Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

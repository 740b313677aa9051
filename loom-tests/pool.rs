//! loom models of the `LocalPool` protocol.
//!
//! Run with `./loom.sh` (or `RUSTFLAGS="--cfg stashpool_loom" LOOM_MAX_PREEMPTIONS=2
//! cargo test --release --test loom_pool`). Under `--cfg stashpool_loom` the pool's
//! per-thread table, overflow queue, atomics, locks and cells are loom's (see
//! `src/sync.rs`), so these models run the pool's real code: the stash
//! handshake, spill and steal, sweeps, thread exit and pool drop.
//!
//! Every model uses objects that count their drops and mark themselves held,
//! so a model fails if an object is handed to two holders at once, dropped
//! while held, dropped twice, or never dropped.
#![cfg(stashpool_loom)]

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use stashpool::{LocalPool, Pooled};

/// Counts objects made and dropped.
#[derive(Default)]
struct Ledger {
    made: AtomicUsize,
    dropped: AtomicUsize,
}

impl Ledger {
    fn make(this: &Arc<Self>) -> Obj {
        this.made.fetch_add(1, Ordering::SeqCst);
        Obj {
            ledger: Arc::clone(this),
            held: AtomicBool::new(false),
        }
    }

    fn live(&self) -> usize {
        self.made.load(Ordering::SeqCst) - self.dropped.load(Ordering::SeqCst)
    }
}

struct Obj {
    ledger: Arc<Ledger>,
    held: AtomicBool,
}

impl Obj {
    /// Uses the object as its holder would; fails if someone else holds it.
    fn hold(&self) {
        assert!(
            !self.held.swap(true, Ordering::SeqCst),
            "two holders at once"
        );
        self.held.store(false, Ordering::SeqCst);
    }
}

impl Drop for Obj {
    fn drop(&mut self) {
        assert!(!self.held.load(Ordering::SeqCst), "dropped while held");
        self.ledger.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

type Maker = Box<dyn Fn() -> Obj + Send + Sync>;

fn pool(ledger: &Arc<Ledger>, local_capacity: usize) -> LocalPool<Obj, Maker> {
    let ledger = Arc::clone(ledger);
    let make: Maker = Box::new(move || Ledger::make(&ledger));
    LocalPool::builder(make)
        .local_capacity(local_capacity)
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

/// Two threads get, use and return while objects sit in the overflow: each
/// object has one holder at a time, and the counts come out exact.
#[test]
fn get_and_return_on_two_threads() {
    loom::model(|| {
        let ledger = Arc::new(Ledger::default());
        let pool = Arc::new(pool(&ledger, 1));
        pool.put(Ledger::make(&ledger));
        pool.put(Ledger::make(&ledger)); // spills one to the overflow
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || pool.with(|obj| obj.hold()))
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        let stats = pool.stats();
        assert_eq!(stats.created + stats.reused, 2);
        assert_eq!(
            stats.created as usize + 2,
            ledger.made.load(Ordering::SeqCst)
        );
        drop_and_check(pool, &ledger);
    });
}

/// One thread spills into the overflow while another steals from it.
#[test]
fn spill_races_steal() {
    loom::model(|| {
        let ledger = Arc::new(Ledger::default());
        let pool = Arc::new(pool(&ledger, 1));
        let spiller = {
            let (pool, ledger) = (Arc::clone(&pool), Arc::clone(&ledger));
            thread::spawn(move || {
                for _ in 0..3 {
                    pool.put(Ledger::make(&ledger)); // the second and third spill
                }
            })
        };
        let stealer = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                let a = pool.get();
                let b = pool.get();
                a.hold();
                b.hold();
            })
        };
        spiller.join().unwrap();
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
        let ledger = Arc::new(Ledger::default());
        let pool = Arc::new(pool(&ledger, 2));
        let owner = {
            let (pool, ledger) = (Arc::clone(&pool), Arc::clone(&ledger));
            thread::spawn(move || {
                pool.put(Ledger::make(&ledger));
                pool.with(|obj| obj.hold());
            })
        };
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
        let ledger = Arc::new(Ledger::default());
        let pool = Arc::new(pool(&ledger, 2));
        let idle = Arc::new(Ledger::default());
        pool.put(Ledger::make(&idle));
        let neighbour = {
            let (pool, ledger) = (Arc::clone(&pool), Arc::clone(&ledger));
            thread::spawn(move || {
                pool.with(|obj| obj.hold());
                pool.put(Ledger::make(&ledger));
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

/// Two owners and a sweeper at once.
#[test]
fn two_owners_and_a_sweeper() {
    loom::model(|| {
        let ledger = Arc::new(Ledger::default());
        let pool = Arc::new(pool(&ledger, 1));
        pool.put(Ledger::make(&ledger));
        let owners: Vec<_> = (0..2)
            .map(|_| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || pool.with(|obj| obj.hold()))
            })
            .collect();
        let sweeper = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.sweep())
        };
        for t in owners {
            t.join().unwrap();
        }
        sweeper.join().unwrap();
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// A thread exits with a full stash while another sweeps: its objects are
/// handed to the overflow or aged in place, reused or freed, never leaked.
#[test]
fn thread_exit_with_a_full_stash() {
    loom::model(|| {
        let ledger = Arc::new(Ledger::default());
        let pool = Arc::new(pool(&ledger, 2));
        let exiting = {
            let (pool, ledger) = (Arc::clone(&pool), Arc::clone(&ledger));
            thread::spawn(move || {
                pool.put(Ledger::make(&ledger));
                pool.put(Ledger::make(&ledger));
            })
        };
        let sweeper = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.sweep())
        };
        exiting.join().unwrap();
        sweeper.join().unwrap();
        // The exited thread's objects are reachable: taken, or swept away.
        let got = Pooled::into_inner(pool.get());
        got.hold();
        drop(got);
        pool.sweep();
        pool.sweep();
        assert_eq!(ledger.live(), 0);
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        drop_and_check(pool, &ledger);
    });
}

/// Dropping the pool after its threads are done drops every object, in
/// every stash and in the overflow, exactly once.
#[test]
fn pool_drop_after_threads() {
    loom::model(|| {
        let ledger = Arc::new(Ledger::default());
        let pool = Arc::new(pool(&ledger, 1));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (pool, ledger) = (Arc::clone(&pool), Arc::clone(&ledger));
                thread::spawn(move || {
                    pool.put(Ledger::make(&ledger));
                    pool.put(Ledger::make(&ledger)); // one spills
                })
            })
            .collect();
        pool.put(Ledger::make(&ledger));
        for t in threads {
            t.join().unwrap();
        }
        let pool = Arc::try_unwrap(pool).ok().unwrap();
        assert_eq!(ledger.made.load(Ordering::SeqCst), 5);
        drop_and_check(pool, &ledger);
    });
}

/// An owned guard got on one thread is dropped on another, into that
/// thread's stash, while the first thread keeps using the pool.
#[test]
fn owned_guard_dropped_on_another_thread() {
    loom::model(|| {
        let ledger = Arc::new(Ledger::default());
        let pool = std::sync::Arc::new(pool(&ledger, 1));
        let guard = pool.get_owned();
        let other = thread::spawn(move || {
            guard.hold();
            drop(guard);
        });
        pool.with(|obj| obj.hold());
        other.join().unwrap();
        let pool = std::sync::Arc::try_unwrap(pool).ok().unwrap();
        assert_eq!(pool.stats().returned, 2);
        drop_and_check(pool, &ledger);
    });
}

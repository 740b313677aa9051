//! `LocalPool` across threads: hand-off through the overflow, sweeps that
//! reach every thread's stash, thread exit, background sweeping, and a stress
//! run that checks no object is lost or shared.

mod common;

use std::cell::RefCell;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, mpsc};
use std::thread;
use std::time::Duration;

use common::{Ledger, Tracked, eventually};

/// How long a threaded test may take before it counts as a deadlock.
const DEADLINE: Duration = Duration::from_secs(120);
use stashpool::{LocalPool, Pooled, PooledOwned};

fn tracked_pool(ledger: &Arc<Ledger>) -> LocalPool<Tracked, impl Fn() -> Tracked + use<>> {
    let l = Arc::clone(ledger);
    LocalPool::builder(move || l.make()).manual_sweep().build()
}

#[test]
fn put_on_a_joined_thread_is_got_on_another() {
    common::run_with_deadline(DEADLINE, || {
        // This thread keeps its own id: it cannot inherit the other's stash.
        common::hold_thread_id();
        let ledger = Ledger::new();
        let pool = Arc::new(tracked_pool(&ledger));
        let p = Arc::clone(&pool);
        let l = Arc::clone(&ledger);
        thread::spawn(move || p.put(l.make())).join().unwrap();
        // The exiting thread handed its stash to the overflow.
        let got = pool.get();
        assert_eq!(got.id, 0);
        assert_eq!(pool.stats().created, 0);
        assert_eq!(pool.stats().reused, 1);
    });
}

/// Guards dropped on another thread go back to the thread that took them
/// (its stash's loan book), not to the dropping thread's stash or the
/// overflow: the first such return (a stray, which goes the way of any
/// return) tells the taking thread's stash to keep a book, and from then on
/// the taking thread reuses its one object and the returning thread finds
/// nothing of what it gave back.
#[test]
fn a_guard_dropped_on_another_thread_goes_back_to_the_thread_that_took_it() {
    common::run_with_deadline(DEADLINE, || {
        let ledger = Ledger::new();
        let pool = tracked_pool(&ledger);
        let pool = &pool;
        thread::scope(|s| {
            let (to_b, from_a) = mpsc::sync_channel(0);
            let (to_a, from_b) = mpsc::sync_channel(0);
            s.spawn(move || {
                for guard in from_a {
                    drop(guard);
                    to_a.send(()).unwrap();
                }
                // What it gave back is not here, nor in the overflow.
                assert!(pool.try_get().is_none());
            });
            for round in 0..50 {
                let guard = pool.get();
                assert_eq!(guard.id, 0, "round {round}");
                to_b.send(guard).unwrap();
                from_b.recv().unwrap();
            }
        });
        let stats = pool.stats();
        assert_eq!((stats.created, stats.reused), (1, 49), "{stats:?}");
        assert_eq!(pool.get().id, 0, "in the taking thread's book");
    });
}

/// Thread-local destructors run in the reverse order of their registration:
/// a guard returns straight to its stash only while its thread's exit hooks
/// have not run, and that is sound because the hooks (registered after the
/// thread takes its id) run before the id is given back. The
/// targets are those on which stashpool relies on it (`owner::SHORTCUTS`).
#[cfg(any(
    target_os = "linux",
    target_vendor = "apple",
    all(windows, target_env = "msvc"),
    target_os = "freebsd",
    target_os = "netbsd",
))]
#[test]
fn thread_local_destructors_run_in_reverse_order() {
    struct Named(&'static str, Arc<std::sync::Mutex<Vec<&'static str>>>);
    impl Drop for Named {
        fn drop(&mut self) {
            self.1.lock().unwrap().push(self.0);
        }
    }
    thread_local! {
        static FIRST: RefCell<Option<Named>> = const { RefCell::new(None) };
        static SECOND: RefCell<Option<Named>> = const { RefCell::new(None) };
    }
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let o = Arc::clone(&order);
    thread::spawn(move || {
        FIRST.with(|n| *n.borrow_mut() = Some(Named("first", Arc::clone(&o))));
        SECOND.with(|n| *n.borrow_mut() = Some(Named("second", o)));
    })
    .join()
    .unwrap();
    assert_eq!(*order.lock().unwrap(), ["second", "first"]);
}

#[test]
fn sweeps_reach_exited_threads() {
    common::run_with_deadline(DEADLINE, || {
        // Go's TestPoolRelease shape: objects returned on many threads that are
        // gone are all dropped by two sweeps.
        let ledger = Ledger::new();
        let pool = tracked_pool(&ledger);
        thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let held: Vec<_> = (0..20).map(|_| pool.get()).collect();
                    drop(held);
                });
            }
        });
        assert_eq!(pool.stats().idle, ledger.live());
        assert!(ledger.live() > 0);
        pool.sweep();
        pool.sweep();
        assert_eq!(ledger.live(), 0);
        assert_eq!(pool.stats().idle, 0);
    });
}

#[test]
fn sweeps_reach_blocked_threads() {
    common::run_with_deadline(DEADLINE, || {
        let ledger = Ledger::new();
        let pool = tracked_pool(&ledger);
        let (stashed_tx, stashed_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let pool = &pool;
        thread::scope(|s| {
            let worker = s.spawn(move || {
                let held: Vec<_> = (0..10).map(|_| pool.get()).collect();
                drop(held); // 10 objects in this thread's private stash
                stashed_tx.send(()).unwrap();
                go_rx.recv().unwrap(); // blocked while main sweeps
                // Its stash was emptied: a get now makes a new object.
                let fresh = pool.get();
                fresh.id
            });
            stashed_rx.recv().unwrap();
            assert_eq!(ledger.live(), 10);
            pool.sweep();
            assert_eq!(ledger.live(), 10, "survive one sweep");
            pool.sweep();
            assert_eq!(
                ledger.live(),
                0,
                "dropped by the second, thread still blocked"
            );
            go_tx.send(()).unwrap();
            assert_eq!(worker.join().unwrap(), 10);
        });
    });
}

#[test]
fn objects_flow_from_returning_threads_to_getting_threads() {
    common::run_with_deadline(DEADLINE, || {
        const ROUND: usize = 8;
        const ROUNDS: usize = if cfg!(miri) { 5 } else { 500 };
        // One thread only gets, the other only returns (a pipeline), in
        // rounds: the getter takes ROUND buffers and sends them, the
        // returner receives them all, drops them and says so, then the
        // next round. A
        // thread that only returns keeps nothing in its stash (it never
        // finds it empty), so each round finds the last round's buffers in
        // the overflow: the first round makes every buffer and no later
        // round makes one. (A stash that kept what its thread returned, up
        // to `max_stashed`, would have held them from the getter.) The
        // rounds do not overlap, so no get races a return and the count is
        // exact.
        let pool = Arc::new(
            LocalPool::builder((|| vec![0u8; 1024]) as fn() -> Vec<u8>)
                .max_stashed(16)
                .manual_sweep()
                .build(),
        );
        let (tx, rx) = mpsc::channel::<PooledOwned<Vec<u8>, fn() -> Vec<u8>>>();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let producer = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                for round in 0..ROUNDS {
                    for i in 0..ROUND {
                        let mut buf = pool.get_owned();
                        buf[0] = (round * ROUND + i) as u8;
                        tx.send(buf).unwrap();
                    }
                    done_rx.recv().unwrap();
                }
            })
        };
        let consumer = thread::spawn(move || {
            let mut n = 0;
            for _ in 0..ROUNDS {
                // The whole round first: the getter is done with it.
                let round: Vec<_> = rx.iter().take(ROUND).collect();
                for buf in round {
                    n += usize::from(buf[0] == (n as u8));
                    drop(buf);
                }
                done_tx.send(()).unwrap();
            }
            n
        });
        producer.join().unwrap();
        assert_eq!(
            consumer.join().unwrap(),
            ROUND * ROUNDS,
            "in order, each once"
        );
        let stats = pool.stats();
        assert_eq!(
            (stats.created, stats.reused),
            (ROUND as u64, (ROUND * (ROUNDS - 1)) as u64),
            "the returner's buffers went to the getter: {stats:?}"
        );
        assert_eq!(stats.idle as u64, stats.created, "all back in the pool");
    });
}

#[test]
fn dropping_the_pool_drops_objects_of_exited_and_live_threads() {
    common::run_with_deadline(DEADLINE, || {
        let ledger = Ledger::new();
        let pool = tracked_pool(&ledger);
        let (stashed_tx, stashed_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let pool = Arc::new(pool);
        let live = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                pool.with(|_| ());
                // Let go of the pool before saying so: the main thread
                // unwraps it as soon as it hears.
                drop(pool);
                stashed_tx.send(()).unwrap();
                go_rx.recv().unwrap();
            })
        };
        {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.with(|_| ())).join().unwrap();
        }
        stashed_rx.recv().unwrap();
        pool.with(|_| ());
        assert!(ledger.live() >= 2);
        let Ok(pool) = Arc::try_unwrap(pool) else {
            panic!("the live thread let go of the pool");
        };
        drop(pool);
        assert_eq!(ledger.live(), 0);
        go_tx.send(()).unwrap();
        live.join().unwrap();
    });
}

#[test]
fn background_sweeper_trims_an_idle_pool() {
    common::run_with_deadline(DEADLINE, || {
        let ledger = Ledger::new();
        let l = Arc::clone(&ledger);
        let pool = LocalPool::builder(move || l.make())
            .sweep_every(Duration::from_millis(5))
            .build();
        let held: Vec<_> = (0..50).map(|_| pool.get()).collect();
        drop(held);
        // (A sweep may already have run: only the returns are certain here.)
        assert_eq!(pool.stats().returned, 50);
        assert!(
            eventually(Duration::from_secs(20), || ledger.live() == 0),
            "the sweeper emptied the idle pool: {:?}",
            pool.stats()
        );
        assert_eq!(pool.stats().trimmed, 50);
        assert_eq!(pool.stats().idle, 0);
    });
}

#[test]
fn background_sweeper_serves_many_pools_and_forgets_dropped_ones() {
    common::run_with_deadline(DEADLINE, || {
        let ledgers: Vec<_> = (0..10).map(|_| Ledger::new()).collect();
        let mut pools: Vec<_> = ledgers
            .iter()
            .map(|ledger| {
                let l = Arc::clone(ledger);
                LocalPool::builder(move || l.make())
                    .sweep_every(Duration::from_millis(3))
                    .build()
            })
            .collect();
        for pool in &pools {
            pool.with(|_| ());
        }
        pools.truncate(5); // dropped pools leave the sweeper's list...
        for ledger in &ledgers[5..] {
            assert_eq!(ledger.live(), 0, "...and drop their objects at once");
        }
        // The others are emptied by the sweeper.
        assert!(eventually(Duration::from_secs(20), || ledgers
            .iter()
            .all(|ledger| ledger.live() == 0)));
        assert!(pools.iter().all(|p| p.stats().trimmed == 1));
    });
}

type BoxedMaker = Box<dyn Fn() -> Tracked + Send + Sync>;

thread_local! {
    static HELD: RefCell<Option<PooledOwned<Tracked, BoxedMaker>>> = const { RefCell::new(None) };
}

/// A pool whose guards can be kept in `HELD`.
fn held_pool(ledger: &Arc<Ledger>) -> Arc<LocalPool<Tracked, BoxedMaker>> {
    let l = Arc::clone(ledger);
    let make: BoxedMaker = Box::new(move || l.make());
    Arc::new(LocalPool::builder(make).manual_sweep().build())
}

#[test]
fn guards_dropped_before_the_exit_hooks_go_back_to_the_stash() {
    common::run_with_deadline(DEADLINE, || {
        common::hold_thread_id();
        let ledger = Ledger::new();
        let pool = held_pool(&ledger);
        let p = Arc::clone(&pool);
        thread::spawn(move || {
            // The pool's thread-locals are registered by this first use, so
            // `HELD`, registered after them, is destroyed before them: its guard
            // goes back to the stash it came from, and the exit hook then hands
            // it to the overflow.
            drop(p.get_owned());
            HELD.with(|held| *held.borrow_mut() = Some(p.get_owned()));
        })
        .join()
        .unwrap();
        assert_eq!(pool.stats().returned, 2);
        assert_eq!(pool.get_owned().id, 0, "found in the overflow");
        assert_eq!(pool.stats().created, 1);
    });
}

/// A guard dropped after its thread gave up its thread id must not
/// go back to the stash it came from (another thread may own it by then):
/// the exit hooks end the thread's claim, and the guard goes to the
/// overflow.
#[test]
fn a_guard_dropped_after_its_threads_id_is_released_goes_to_the_overflow() {
    common::run_with_deadline(DEADLINE, || {
        common::hold_thread_id();
        let ledger = Ledger::new();
        let pool = held_pool(&ledger);
        let p = Arc::clone(&pool);
        thread::spawn(move || {
            // `HELD` is registered first, before this thread takes its id (with
            // the pool's first use, inside), so it is destroyed last: after the
            // exit hooks and after the id is released.
            HELD.with(|held| *held.borrow_mut() = Some(p.get_owned()));
        })
        .join()
        .unwrap();
        assert_eq!(pool.stats().created, 1);
        // Found in the overflow by this thread, which holds another id.
        let (a, b) = (pool.get_owned(), pool.get_owned());
        assert_eq!(pool.stats().created, 2, "one of the two was the parked one");
        assert_eq!(a.id.min(b.id), 0);
    });
}

/// A thread given the id of an exited thread inherits that thread's stash
/// in every pool; what it puts there must still be flushed when it exits.
#[test]
fn a_thread_that_inherits_a_stash_flushes_it_when_it_exits() {
    common::run_with_deadline(DEADLINE, || {
        common::hold_thread_id();
        let mut inherited = 0;
        // The id of a joined thread goes to the next thread that asks, unless
        // a thread of another test takes it first: try until it happened.
        for attempt in 1..=50 {
            let pool: Arc<LocalPool<usize>> = Arc::new(
                LocalPool::builder((|| 0) as fn() -> usize)
                    .manual_sweep()
                    .build(),
            );
            let other: Arc<LocalPool<usize>> = Arc::new(
                LocalPool::builder((|| 0) as fn() -> usize)
                    .manual_sweep()
                    .build(),
            );
            let marker = Arc::new(common::IdMarker::new());
            pool.put(1);
            let (p, m) = (Arc::clone(&pool), Arc::clone(&marker));
            thread::spawn(move || {
                m.mark(attempt);
                p.put(2);
            })
            .join()
            .unwrap();
            // Both idle objects out of the pool (the other thread's flushed).
            let held = (pool.get(), pool.get());
            let mut both = [*held.0, *held.1];
            both.sort_unstable();
            assert_eq!(both, [1, 2]);
            let (p, o, m) = (Arc::clone(&pool), Arc::clone(&other), marker);
            let reused = thread::spawn(move || {
                let reused = m.inherited(attempt);
                // A hook for the other pool first: this thread is no newcomer.
                drop(o.get());
                // Made here (the pool's two objects are held) and kept in
                // the inherited stash: taken and returned.
                p.with(|v| *v = 7);
                reused
            })
            .join()
            .unwrap();
            assert_eq!(*pool.get(), 7, "flushed when the thread exited");
            assert_eq!(pool.stats().created, 1, "the inheriting thread's");
            drop(held);
            inherited += usize::from(reused);
            if inherited == 3 {
                break;
            }
        }
        assert!(
            inherited > 0,
            "no thread ever inherited an id: nothing tested"
        );
    });
}

#[test]
fn guards_dropped_by_thread_local_destructors_are_handled() {
    common::run_with_deadline(DEADLINE, || {
        let ledger = Ledger::new();
        let pool = held_pool(&ledger);
        for _ in 0..4 {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                // `HELD` is registered before the pool's own thread-locals, so
                // it is destroyed after them: its guard is returned while the
                // thread is being torn down.
                HELD.with(|held| *held.borrow_mut() = Some(pool.get_owned()));
            })
            .join()
            .unwrap();
        }
        let stats = pool.stats();
        assert_eq!(stats.created + stats.reused, 4);
        // Returned to the overflow even though the thread was being torn down,
        // so the next thread could reuse it.
        assert_eq!(stats.returned, 4, "{stats:?}");
        assert!(stats.reused >= 1, "{stats:?}");
        assert_eq!(stats.idle, ledger.live());
        drop(Arc::try_unwrap(pool).ok().unwrap());
        assert_eq!(ledger.live(), 0);
    });
}

#[test]
fn stress_nothing_lost_nothing_shared() {
    common::run_with_deadline(DEADLINE, || {
        const THREADS: usize = 4;
        const ROUNDS: usize = if cfg!(miri) { 3 } else { 6 };
        let ops = if cfg!(miri) {
            100
        } else if cfg!(debug_assertions) {
            20_000
        } else {
            100_000
        };
        let ledger = Ledger::new();
        let l = Arc::clone(&ledger);
        let pool = LocalPool::builder(move || l.make())
            .max_stashed(8)
            .max_idle(64)
            .manual_sweep()
            .build();
        let stop = AtomicBool::new(false);
        let sweeps = AtomicUsize::new(0);
        thread::scope(|s| {
            // A sweeper racing every round.
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    pool.sweep();
                    sweeps.fetch_add(1, Ordering::Relaxed);
                    thread::yield_now();
                }
            });
            // Threads come and go: each round starts fresh threads.
            for round in 0..ROUNDS {
                let barrier = Barrier::new(THREADS);
                thread::scope(|s| {
                    for t in 0..THREADS {
                        let (pool, barrier) = (&pool, &barrier);
                        s.spawn(move || {
                            barrier.wait();
                            let mut rng = (round * 31 + t) as u64 | 1;
                            let mut held: Vec<Pooled<'_, Tracked, _>> = Vec::new();
                            for _ in 0..ops {
                                rng ^= rng << 13;
                                rng ^= rng >> 7;
                                rng ^= rng << 17;
                                match rng % 6 {
                                    0 | 1 => {
                                        let g = pool.get();
                                        g.acquire();
                                        held.push(g);
                                    }
                                    2 | 3 => {
                                        if let Some(g) = held.pop() {
                                            g.release();
                                        }
                                    }
                                    4 => pool.with(|obj| {
                                        obj.acquire();
                                        obj.release();
                                    }),
                                    _ => {
                                        if let Some(g) = held.pop() {
                                            g.release();
                                            drop(Pooled::into_inner(g));
                                        }
                                    }
                                }
                            }
                            for g in held {
                                g.release();
                            }
                        });
                    }
                });
            }
            stop.store(true, Ordering::Relaxed);
        });
        assert!(sweeps.load(Ordering::Relaxed) > 0);
        let stats = pool.stats();
        assert_eq!(stats.created as usize, ledger.made(), "{stats:?}");
        assert_eq!(
            stats.idle,
            ledger.live(),
            "every live object is pooled: {stats:?}"
        );
        drop(pool);
        assert_eq!(ledger.live(), 0, "every object dropped exactly once");
    });
}

/// A connection whose `Drop` deregisters it from a global registry, under
/// the registry's lock: user code that a sweep runs on the sweeper's thread.
struct Conn {
    registry: Arc<std::sync::Mutex<usize>>,
    dropping: mpsc::Sender<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        let _ = self.dropping.send(());
        *self.registry.lock().unwrap() -= 1;
    }
}

#[test]
fn dropping_a_pool_does_not_wait_for_the_sweepers_drops() {
    common::run_with_deadline(Duration::from_secs(60), || {
        let registry = Arc::new(std::sync::Mutex::new(0usize));
        let (dropping_tx, dropping) = mpsc::channel();
        let pool = LocalPool::builder({
            let registry = Arc::clone(&registry);
            move || {
                *registry.lock().unwrap() += 1;
                Conn {
                    registry: Arc::clone(&registry),
                    dropping: dropping_tx.clone(),
                }
            }
        })
        .sweep_every(Duration::from_millis(1))
        .build();
        pool.with(|_| ());
        // Hold the registry while the sweeper trims the one connection: its
        // `Conn::drop` blocks on this lock, on the sweeper's thread.
        let guard = registry.lock().unwrap();
        dropping.recv().unwrap();
        // The pool holds nothing now (the sweep took its one object), so
        // dropping it runs no `Drop` here: it must return although the
        // sweeper's `Conn::drop` waits for the lock this thread holds.
        drop(pool);
        assert_eq!(*guard, 1, "the sweeper's drop is still waiting");
        drop(guard);
        assert!(
            common::eventually(Duration::from_secs(20), || *registry.lock().unwrap() == 0),
            "and then finishes"
        );
    });
}

/// Forks, runs `child` in the child process (which exits with status 0 if
/// it returns true, 1 if it returns false or panics) and returns whether
/// the child succeeded; a child still running after `limit` is killed and
/// counts as failed (a hang).
#[cfg(all(target_os = "linux", not(miri)))]
fn in_a_forked_child(limit: Duration, child: impl FnOnce() -> bool) -> bool {
    // SAFETY: `fork` has no preconditions; the child only runs `child` and
    // `_exit`s, never returning into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = std::panic::catch_unwind(AssertUnwindSafe(child)).unwrap_or(false);
        // SAFETY: ends the child at once, running no parent-owned cleanup.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let give_up = std::time::Instant::now() + limit;
    let mut status = 0;
    loop {
        // SAFETY: `pid` is our child; `status` is a valid out-pointer.
        let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if done == pid {
            return libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
        }
        if std::time::Instant::now() > give_up {
            // SAFETY: as above; the child is reaped after the kill.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return false;
        }
        thread::sleep(Duration::from_millis(1));
    }
}

/// A forked child can use a pool whatever the parent's sweeps were doing at
/// the fork (a sweep's lock and claims are never held across it), and its
/// pools are still swept in the background (the child gets a sweeper of
/// its own). Forks race a busy background sweeper and manual sweeps on
/// another thread over many stashes; a child that hangs is killed and
/// fails the test.
///
/// Runs in a process of its own (this test binary, run again for this one
/// test): the child's sweeper sweeps every pool registered in the process,
/// and other tests' pools hold objects whose `Drop` takes locks their
/// threads may hold at the fork, which no child could take.
#[cfg(all(target_os = "linux", not(miri)))]
#[test]
fn a_forked_child_uses_and_sweeps_its_pools() {
    const ALONE: &str = "STASHPOOL_TEST_FORK_ALONE";
    if std::env::var_os(ALONE).is_none() {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "a_forked_child_uses_and_sweeps_its_pools"])
            .args(["--test-threads=1", "--nocapture"])
            .env(ALONE, "1")
            .status()
            .unwrap();
        assert!(status.success(), "the test, run alone: {status}");
        return;
    }
    common::run_with_deadline(Duration::from_secs(300), || {
        let pool = Arc::new(
            LocalPool::builder(|| vec![0u8; 64])
                .sweep_every(Duration::from_millis(1))
                .build(),
        );
        // Many stashes, so that a sweep holds its claims a while.
        thread::scope(|s| {
            for _ in 0..16 {
                s.spawn(|| pool.with(|_| ()));
            }
        });
        pool.with(|_| ());
        let stop = Arc::new(AtomicBool::new(false));
        let sweeper = {
            let (pool, stop) = (Arc::clone(&pool), Arc::clone(&stop));
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    pool.with(|_| ());
                    pool.sweep();
                }
            })
        };
        let rounds = if cfg!(debug_assertions) { 100 } else { 300 };
        for round in 0..rounds {
            let pool = &pool;
            let ok = in_a_forked_child(Duration::from_secs(20), || {
                // This thread's stash is free, and so is the sweep lock.
                pool.with(|v| v.push(1));
                pool.sweep();
                // The background sweeper runs here too: what is put now is
                // trimmed by its second sweep.
                let trimmed = pool.stats().trimmed;
                pool.put(vec![7]);
                common::eventually(Duration::from_secs(10), || pool.stats().trimmed > trimmed)
            });
            assert!(ok, "the child of fork {round} failed or hung");
        }
        stop.store(true, Ordering::Relaxed);
        sweeper.join().unwrap();
    });
}

/// The pools of the two late-destructor tests (one each: they run in
/// parallel and compare counts).
static LATE_FOREIGN: LocalPool<Vec<u8>> = LocalPool::new(Vec::new);
static LATE_OWN: LocalPool<Vec<u8>> = LocalPool::new(Vec::new);

/// Uses its pool when dropped: from a thread-local destructor that runs
/// late in its thread's teardown.
struct Late(&'static LocalPool<Vec<u8>>);

impl Drop for Late {
    fn drop(&mut self) {
        self.0.with(|v| v.push(1));
    }
}

thread_local! {
    static LATE: std::cell::Cell<Option<Late>> = const { std::cell::Cell::new(None) };
}

/// Runs `body` on a thread named `name` and returns how many panics that
/// thread raised, its teardown included. The counting hook also sweeps
/// both late pools: a panic raised under the pool's sweep lock (user code under
/// a lock) then deadlocks, which the deadline turns into a failure.
fn panics_on_a_thread(name: &'static str, body: impl FnOnce() + Send + 'static) -> usize {
    /// The names of the threads that panicked, one entry per panic.
    static PANICKED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let current = thread::current();
            if let Some(name) = current.name().filter(|n| n.starts_with("late-")) {
                PANICKED.lock().unwrap().push(name.to_owned());
                LATE_FOREIGN.sweep();
                LATE_OWN.sweep();
            }
            previous(info);
        }));
    });
    thread::Builder::new()
        .name(name.into())
        .spawn(body)
        .unwrap()
        .join()
        .unwrap();
    let panicked = PANICKED.lock().unwrap();
    panicked.iter().filter(|n| *n == name).count()
}

/// A thread that holds an id of another per-thread table (here
/// `thread_local`'s, as tracing's or sharded-slab's would give it) and
/// first uses a pool in a thread-local destructor that runs after that id
/// was released: no panic (no abort under `panic = "abort"`), and the
/// object is made and pooled. Pools keep their own thread ids, which such a
/// thread can still take in its teardown and gives back at exit
/// (`per_thread` unit tests).
#[test]
fn a_late_destructor_on_a_thread_with_another_crates_id_uses_a_pool() {
    common::run_with_deadline(Duration::from_secs(60), || {
        let before = LATE_FOREIGN.stats();
        let panics = panics_on_a_thread("late-foreign-id", || {
            // Registered before `thread_local`'s id guard, so destroyed
            // after it released the id.
            LATE.with(|late| late.set(Some(Late(&LATE_FOREIGN))));
            thread_local::ThreadLocal::new().get_or(|| 1u32);
        });
        assert_eq!(panics, 0, "a pool used late must not panic");
        let stats = LATE_FOREIGN.stats();
        assert_eq!(
            (stats.created, stats.returned),
            (before.created + 1, before.returned + 1),
            "{stats:?}"
        );
    });
}

/// A thread whose first use of a pool is in a thread-local destructor that
/// runs after its stashpool id was given back (it used another pool first):
/// it takes no new id and goes around stashes, without a panic and without
/// running user code under a lock.
#[test]
fn a_late_destructor_uses_a_pool_without_a_stash_and_without_a_lock() {
    common::run_with_deadline(Duration::from_secs(60), || {
        static OTHER: LocalPool<u32> = LocalPool::new(|| 0);
        let before = LATE_OWN.stats();
        let panics = panics_on_a_thread("late-own-id", || {
            // Registered before this thread takes its id (with `OTHER`'s
            // first use), so destroyed after the id went back.
            LATE.with(|late| late.set(Some(Late(&LATE_OWN))));
            OTHER.with(|n| *n += 1);
        });
        assert_eq!(panics, 0);
        let stats = LATE_OWN.stats();
        assert_eq!(
            (stats.created, stats.returned),
            (before.created + 1, before.returned + 1),
            "{stats:?}"
        );
    });
}

//! Faults and bad input: panics in user code at every point the pool calls
//! it, objects whose `Drop` panics, refusing recyclers, failing makers, and
//! extreme configurations. After each, nothing is lost and the pool works.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::{Ledger, Tracked, eventually};
use stashpool::{LocalPool, Pooled, Recycle};

fn quiet<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    catch_unwind(AssertUnwindSafe(f))
}

/// A maker that fails its first `failures` calls.
struct Flaky {
    ledger: Arc<Ledger>,
    failures: AtomicUsize,
}

impl Recycle<Tracked> for Flaky {
    fn create(&self) -> Tracked {
        if self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            panic!("create failed");
        }
        self.ledger.make()
    }
}

#[test]
fn create_failing_the_first_calls() {
    let ledger = Ledger::new();
    let pool = LocalPool::builder(Flaky {
        ledger: Arc::clone(&ledger),
        failures: AtomicUsize::new(6),
    })
    .manual_sweep()
    .build();
    for _ in 0..3 {
        assert!(quiet(|| pool.with(|_| ())).is_err());
        assert!(quiet(|| drop(pool.get())).is_err());
    }
    assert_eq!(pool.stats().created, 0);
    // Back to normal: the six failures are behind us.
    let fine: Vec<_> = (0..4).map(|_| pool.get()).collect();
    drop(fine);
    let stats = pool.stats();
    assert_eq!((stats.created, stats.idle), (4, 4));
    drop(pool);
    assert_eq!(ledger.live(), 0);
}

struct RefuseAll;

impl Recycle<u32> for RefuseAll {
    fn create(&self) -> u32 {
        1
    }

    fn recycle(&self, _: &mut u32) -> bool {
        false
    }
}

#[test]
fn a_recycler_that_refuses_everything() {
    let pool = LocalPool::builder(RefuseAll).manual_sweep().build();
    for _ in 0..10 {
        pool.with(|n| *n += 1);
        drop(pool.get());
        pool.put(5);
    }
    let stats = pool.stats();
    assert_eq!((stats.created, stats.reused), (20, 0));
    assert_eq!(
        (stats.returned, stats.discarded, stats.rejected, stats.idle),
        (0, 30, 0, 0)
    );
}

/// Panics in `recycle` on the calls whose number `panics_on` says.
struct PanickyRecycle {
    ledger: Arc<Ledger>,
    calls: AtomicUsize,
}

impl Recycle<Tracked> for PanickyRecycle {
    fn create(&self) -> Tracked {
        self.ledger.make()
    }

    fn recycle(&self, _: &mut Tracked) -> bool {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if n % 3 == 1 {
            panic!("recycle failed");
        }
        true
    }
}

#[test]
fn recycle_panics_at_random_points() {
    let ledger = Ledger::new();
    let pool = LocalPool::builder(PanickyRecycle {
        ledger: Arc::clone(&ledger),
        calls: AtomicUsize::new(0),
    })
    .max_stashed(2)
    .manual_sweep()
    .build();
    let mut panics = 0;
    for i in 0..30 {
        let result = match i % 3 {
            0 => quiet(|| pool.with(|_| ())),
            1 => quiet(|| drop(pool.get())),
            _ => quiet(|| pool.put(ledger.make())),
        };
        panics += usize::from(result.is_err());
    }
    assert_eq!(panics, 10);
    let stats = pool.stats();
    assert_eq!(
        (stats.discarded, stats.rejected),
        (10, 0),
        "each panicking return counted discarded: {stats:?}"
    );
    assert_eq!(
        stats.idle,
        ledger.live(),
        "the panicked objects were dropped"
    );
    drop(pool);
    assert_eq!(ledger.live(), 0);
}

#[test]
fn closure_and_guard_panics_on_many_threads() {
    // Uses per thread: under Miri, enough for several panics of each kind.
    let uses: u64 = if cfg!(miri) { 60 } else { 200 };
    let ledger = Ledger::new();
    let l = Arc::clone(&ledger);
    let pool = LocalPool::builder(move || l.make())
        .max_stashed(4)
        .manual_sweep()
        .build();
    std::thread::scope(|s| {
        for t in 0..4 {
            let pool = &pool;
            s.spawn(move || {
                for i in 0..uses {
                    if (i + t) % 7 == 0 {
                        assert!(quiet(|| pool.with(|_| panic!("closure"))).is_err());
                    } else if (i + t) % 11 == 0 {
                        let r = quiet(|| {
                            let _held = pool.get();
                            panic!("while holding");
                        });
                        assert!(r.is_err());
                    } else {
                        pool.with(|obj| {
                            obj.acquire();
                            obj.release();
                        });
                    }
                }
            });
        }
    });
    let stats = pool.stats();
    assert_eq!(stats.idle, ledger.live());
    let panics = (0..4u64)
        .flat_map(|t| (0..uses).map(move |i| i + t))
        .filter(|n| n % 7 == 0 || n % 11 == 0)
        .count() as u64;
    // Every object a panic unwound through was discarded; the pool, with no
    // `max_idle`, refused nothing.
    assert_eq!((stats.discarded, stats.rejected), (panics, 0), "{stats:?}");
    // The books balance: every object taken came back, as accepted or as
    // discarded.
    assert_eq!(
        stats.created + stats.reused,
        stats.returned + stats.discarded,
        "{stats:?}"
    );
    drop(pool);
    assert_eq!(ledger.live(), 0);
}

/// An object whose `Drop` panics when `explode` is set.
struct Bomb {
    explode: bool,
    drops: Arc<AtomicUsize>,
}

impl Drop for Bomb {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        if self.explode {
            panic!("drop failed");
        }
    }
}

/// A pool of bombs that do not explode, counting drops in `drops`.
fn bomb_pool(
    drops: &Arc<AtomicUsize>,
) -> stashpool::LocalPoolBuilder<Bomb, impl Fn() -> Bomb + use<>> {
    let drops = Arc::clone(drops);
    LocalPool::builder(move || Bomb {
        explode: false,
        drops: Arc::clone(&drops),
    })
}

#[test]
fn panicking_drops_during_a_sweep_do_not_lose_the_others() {
    let drops = Arc::new(AtomicUsize::new(0));
    let pool = bomb_pool(&drops).max_stashed(2).manual_sweep().build();
    for i in 0..6 {
        pool.put(Bomb {
            explode: i % 2 == 0, // three of them panic when dropped
            drops: Arc::clone(&drops),
        });
    }
    pool.sweep();
    let result = quiet(|| pool.sweep());
    assert!(result.is_err(), "the first panic is re-raised");
    assert_eq!(drops.load(Ordering::SeqCst), 6, "every object was dropped");
    assert_eq!(pool.stats().idle, 0);
    // The pool still works.
    pool.with(|_| ());
    assert_eq!(pool.stats().idle, 1);
}

#[test]
fn panicking_drops_when_the_pool_drops() {
    let drops = Arc::new(AtomicUsize::new(0));
    let pool = bomb_pool(&drops).manual_sweep().build();
    for explode in [true, false, true] {
        pool.put(Bomb {
            explode,
            drops: Arc::clone(&drops),
        });
    }
    assert!(quiet(move || drop(pool)).is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 3);
}

/// Panics in `recycle` on every call.
struct PanicsOnReturn(Arc<Ledger>);

impl Recycle<Tracked> for PanicsOnReturn {
    fn create(&self) -> Tracked {
        self.0.make()
    }

    fn recycle(&self, _: &mut Tracked) -> bool {
        panic!("recycle failed")
    }
}

/// An owned guard holds its pool's `Arc`; a return that panics must still
/// let it go, or the pool (and everything in it) would never be dropped.
#[test]
fn owned_guards_let_their_pool_go_when_recycle_panics() {
    let ledger = Ledger::new();
    let pool = Arc::new(
        LocalPool::builder(PanicsOnReturn(Arc::clone(&ledger)))
            .manual_sweep()
            .build(),
    );
    let n = if cfg!(miri) { 20 } else { 1000 };
    let guards: Vec<_> = (0..n).map(|_| pool.get_owned()).collect();
    for guard in guards {
        assert!(quiet(move || drop(guard)).is_err());
    }
    assert_eq!(Arc::strong_count(&pool), 1, "a guard kept its pool");
    assert_eq!(pool.stats().discarded, n as u64);
    assert_eq!(ledger.live(), 0, "each object was dropped");
}

/// The same when `recycle` refuses the object and the object's own `Drop`
/// panics.
#[test]
fn owned_guards_let_their_pool_go_when_a_refused_object_panics_in_drop() {
    struct Refuse;
    impl Recycle<Bomb> for Refuse {
        fn create(&self) -> Bomb {
            Bomb {
                explode: true,
                drops: Arc::new(AtomicUsize::new(0)),
            }
        }

        fn recycle(&self, _: &mut Bomb) -> bool {
            false
        }
    }
    let pool = Arc::new(LocalPool::builder(Refuse).manual_sweep().build());
    let guard = pool.get_owned();
    let drops = Arc::clone(&guard.drops);
    assert!(quiet(move || drop(guard)).is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(Arc::strong_count(&pool), 1, "the guard kept its pool");
}

/// No return path leaves an `Arc` of the pool behind when it panics: `with`
/// and `put` on a pool in an `Arc`, and the owned guards of the ready-made
/// pools (a `BytePool`'s, and a `BytePools`' `SizedGuard`), dropped by an
/// unwinding thread.
#[test]
fn no_return_path_keeps_an_arc_of_its_pool_when_it_panics() {
    use stashpool::bytes::{BytePool, BytePools};

    let ledger = Ledger::new();
    let pool = Arc::new(
        LocalPool::builder(PanicsOnReturn(Arc::clone(&ledger)))
            .manual_sweep()
            .build(),
    );
    assert!(quiet(|| pool.with(|_| ())).is_err());
    assert!(quiet(|| pool.put(ledger.make())).is_err());
    assert!(
        quiet(|| {
            let _guard = pool.get_owned();
            panic!("the user's code failed");
        })
        .is_err()
    );
    assert_eq!(Arc::strong_count(&pool), 1);
    assert_eq!(pool.stats().discarded, 3);
    assert_eq!(ledger.live(), 0);

    let bytes = Arc::new(BytePool::builder(64).manual_sweep().build());
    let classes = Arc::new(BytePools::builder(64, 1024).manual_sweep().build());
    assert!(
        quiet(|| {
            let _guard = bytes.get_owned();
            let _sized = classes.get_owned(100);
            panic!("the user's code failed");
        })
        .is_err()
    );
    assert_eq!(Arc::strong_count(&bytes), 1);
    assert_eq!(Arc::strong_count(&classes), 1);
    assert_eq!((bytes.stats().discarded, classes.stats().discarded), (1, 1));
}

#[test]
fn background_sweeper_survives_panicking_drops() {
    let drops = Arc::new(AtomicUsize::new(0));
    let make = {
        let drops = Arc::clone(&drops);
        move || Bomb {
            explode: true,
            drops: Arc::clone(&drops),
        }
    };
    let bad = LocalPool::builder(make)
        .sweep_every(Duration::from_millis(2))
        .build();
    bad.with(|_| ());
    let good_drops = Arc::new(AtomicUsize::new(0));
    let good = bomb_pool(&good_drops)
        .sweep_every(Duration::from_millis(2))
        .build();
    good.with(|_| ());
    eventually(Duration::from_secs(20), || {
        drops.load(Ordering::SeqCst) > 0 && good_drops.load(Ordering::SeqCst) > 0
    });
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the bad object was swept");
    assert_eq!(good_drops.load(Ordering::SeqCst), 1, "and sweeping went on");
}

/// A panic payload whose own `Drop` panics, counting its drops.
struct NastyPayload(Arc<AtomicUsize>);

impl Drop for NastyPayload {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        panic!("the payload's drop panicked too");
    }
}

/// An object whose `Drop` panics with a [`NastyPayload`].
struct NastyDrop {
    drops: Arc<AtomicUsize>,
    payloads: Arc<AtomicUsize>,
}

impl Drop for NastyDrop {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        std::panic::panic_any(NastyPayload(Arc::clone(&self.payloads)));
    }
}

#[test]
fn background_sweeper_survives_a_payload_whose_drop_panics() {
    common::run_with_deadline(Duration::from_secs(60), || {
        let (drops, payloads) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let bad = LocalPool::builder({
            let (drops, payloads) = (Arc::clone(&drops), Arc::clone(&payloads));
            move || NastyDrop {
                drops: Arc::clone(&drops),
                payloads: Arc::clone(&payloads),
            }
        })
        .sweep_every(Duration::from_millis(2))
        .build();
        bad.with(|_| ());
        assert!(
            eventually(Duration::from_secs(20), || payloads.load(Ordering::SeqCst)
                > 0),
            "the sweeper dropped the object and its panic's payload"
        );
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        // A pool registered afterwards is still swept: the sweeper lives.
        let good_drops = Arc::new(AtomicUsize::new(0));
        let good = bomb_pool(&good_drops)
            .sweep_every(Duration::from_millis(2))
            .build();
        good.with(|_| ());
        assert!(
            eventually(Duration::from_secs(20), || good_drops
                .load(Ordering::SeqCst)
                == 1),
            "the background sweeper still sweeps"
        );
        drop((bad, good));
    });
}

#[test]
fn pool_drop_survives_payloads_whose_drop_panics() {
    let (drops, payloads) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let nasty = LocalPool::builder({
        let (drops, payloads) = (Arc::clone(&drops), Arc::clone(&payloads));
        move || NastyDrop {
            drops: Arc::clone(&drops),
            payloads: Arc::clone(&payloads),
        }
    })
    .manual_sweep()
    .build();
    let held: Vec<_> = (0..3).map(|_| nasty.get()).collect();
    drop(held);
    // Three panicking drops: the first panic is resumed, the other two
    // payloads (whose drops panic as well) are dropped on the way.
    let resumed = quiet(move || drop(nasty)).expect_err("the first panic is resumed");
    assert!(resumed.is::<NastyPayload>());
    assert_eq!(drops.load(Ordering::SeqCst), 3, "every object was dropped");
    assert_eq!(payloads.load(Ordering::SeqCst), 2, "the other payloads too");
    // The resumed payload is the caller's: dropping it panics as well.
    assert!(quiet(move || drop(resumed)).is_err());
    assert_eq!(payloads.load(Ordering::SeqCst), 3);
}

#[test]
fn extreme_configurations_work() {
    let huge = LocalPool::builder(|| 0u8)
        .max_stashed(usize::MAX)
        .max_idle(usize::MAX)
        .sweep_every(Duration::MAX)
        .build();
    for i in 0..100 {
        huge.put(i);
    }
    assert_eq!(huge.stats().idle, 100);

    // A 1 ns interval is raised to MIN_SWEEP_INTERVAL; the pool is swept.
    let tiny = LocalPool::builder(|| 0u8)
        .sweep_every(Duration::from_nanos(1))
        .build();
    tiny.with(|_| ());
    assert!(eventually(Duration::from_secs(20), || tiny.stats().trimmed == 1));
}

#[test]
fn objects_returned_to_a_different_pool_are_fine() {
    // `put` takes any object, wherever it came from.
    let a = LocalPool::builder(String::new).manual_sweep().build();
    let b = LocalPool::builder(String::new).manual_sweep().build();
    let s = Pooled::into_inner(a.get());
    b.put(s);
    assert_eq!((a.stats().idle, b.stats().idle), (0, 1));
}

#[test]
fn reentrant_use_from_drop() {
    static POOL: LocalPool<Vec<u8>> = LocalPool::new(Vec::new);
    /// Uses `POOL` from its own `Drop`.
    struct UsesPool(Arc<AtomicBool>);
    impl Drop for UsesPool {
        fn drop(&mut self) {
            POOL.with(|v| v.push(1));
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let done = Arc::new(AtomicBool::new(false));
    let pool = LocalPool::builder({
        let done = Arc::clone(&done);
        move || UsesPool(Arc::clone(&done))
    })
    .manual_sweep()
    .build();
    pool.with(|_| ());
    pool.sweep();
    pool.sweep(); // drops the object, whose Drop uses another pool
    assert!(done.load(Ordering::SeqCst));
}

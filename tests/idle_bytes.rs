//! Bytes: `Stats::idle_bytes` and the `max_idle_bytes` budget, across
//! threads, checked against a ledger of the bytes every object holds.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use common::{in_rounds, run_with_deadline};
use stashpool::bytes::{BytePool, BytePools};
use stashpool::{LocalPool, Recycle};

const DEADLINE: Duration = Duration::from_secs(60);

/// The bytes of every object made and dropped: with no object lent out,
/// `made - dropped` is what the pool holds idle.
#[derive(Default)]
struct Ledger {
    made: AtomicUsize,
    dropped: AtomicUsize,
}

impl Ledger {
    fn idle(&self) -> usize {
        self.made.load(Ordering::SeqCst) - self.dropped.load(Ordering::SeqCst)
    }
}

/// An object that holds `bytes` (its footprint), never changed.
struct Blob {
    bytes: usize,
    ledger: Arc<Ledger>,
}

impl Drop for Blob {
    fn drop(&mut self) {
        self.ledger.dropped.fetch_add(self.bytes, Ordering::SeqCst);
    }
}

/// Makes blobs of the sizes in `SIZES`, in turn.
struct Blobs {
    ledger: Arc<Ledger>,
    next: AtomicUsize,
}

/// Sizes that no sum of a few of them hides a miscount in.
const SIZES: [usize; 5] = [1_000, 30_000, 7, 64 << 10, 123_457];

impl Recycle<Blob> for Blobs {
    fn create(&self) -> Blob {
        let bytes = SIZES[self.next.fetch_add(1, Ordering::Relaxed) % SIZES.len()];
        self.ledger.made.fetch_add(bytes, Ordering::SeqCst);
        Blob {
            bytes,
            ledger: Arc::clone(&self.ledger),
        }
    }

    fn footprint(&self, blob: &Blob) -> usize {
        blob.bytes
    }
}

/// The footprint of every blob `FixedBlobs` makes.
const FIXED: usize = 4096;

/// Blobs of one size, which the recycler declares, so that no return
/// weighs one: its `footprint` is never called.
struct FixedBlobs(Arc<Ledger>);

impl Recycle<Blob> for FixedBlobs {
    const FIXED_FOOTPRINT: Option<usize> = Some(FIXED);

    fn create(&self) -> Blob {
        self.0.made.fetch_add(FIXED, Ordering::SeqCst);
        Blob {
            bytes: FIXED,
            ledger: Arc::clone(&self.0),
        }
    }

    fn footprint(&self, _: &Blob) -> usize {
        panic!("a fixed footprint is never weighed")
    }
}

fn blob_pool(ledger: &Arc<Ledger>, max_idle_bytes: Option<usize>) -> LocalPool<Blob, Blobs> {
    let blobs = Blobs {
        ledger: Arc::clone(ledger),
        next: AtomicUsize::new(0),
    };
    let builder = LocalPool::builder(blobs).manual_sweep();
    match max_idle_bytes {
        Some(n) => builder.max_idle_bytes(n),
        None => builder,
    }
    .build()
}

/// Objects idle in every place a pool keeps them at once: stashes of live
/// threads (kept and gathered for several takers), a taker's loan book
/// (objects another thread gave back to it alone), the overflow (spills,
/// and the stashes of threads that exited). `idle_bytes` is their sum
/// whichever way they went; a sweep and a clear take their bytes off.
#[test]
fn idle_bytes_add_up_the_footprints_wherever_the_objects_are() {
    run_with_deadline(DEADLINE, || {
        let ledger = Arc::new(Ledger::default());
        objects_everywhere(&blob_pool(&ledger, None), &ledger);
    });
}

/// The same with one footprint for all, which the pool multiplies by the
/// idle count rather than weighing each return.
#[test]
fn a_fixed_footprint_is_counted_wherever_the_objects_are() {
    run_with_deadline(DEADLINE, || {
        let ledger = Arc::new(Ledger::default());
        let fixed = FixedBlobs(Arc::clone(&ledger));
        objects_everywhere(&LocalPool::builder(fixed).manual_sweep().build(), &ledger);
    });
}

fn objects_everywhere<R: Recycle<Blob> + Sync>(pool: &LocalPool<Blob, R>, ledger: &Ledger) {
    {
        let (parked, checked) = (Barrier::new(4), Barrier::new(4));
        thread::scope(|s| {
            let (pool, parked, checked) = (&pool, &parked, &checked);
            let (to_giver, given) = mpsc::channel();
            let (ack, acked) = mpsc::channel();
            // A taker whose objects one other thread gives back, each batch
            // before the taker's next: into its book once it heeds that
            // thread's advice.
            s.spawn(move || {
                for _ in 0..6 {
                    let batch: Vec<_> = (0..3).map(|_| pool.get()).collect();
                    to_giver.send(batch).unwrap();
                    acked.recv().unwrap();
                }
                parked.wait();
                checked.wait();
            });
            s.spawn(move || {
                for batch in given.iter().take(6) {
                    drop(batch);
                    ack.send(()).unwrap();
                }
                parked.wait();
                checked.wait();
            });
            // A thread that holds more than a stash keeps, so it spills.
            s.spawn(move || {
                let held: Vec<_> = (0..300).map(|_| pool.get()).collect();
                drop(held);
                parked.wait();
                checked.wait();
            });
            // Threads that exit: their stashes go to the overflow.
            for _ in 0..3 {
                s.spawn(move || drop((0..5).map(|_| pool.get()).collect::<Vec<_>>()))
                    .join()
                    .unwrap();
            }
            parked.wait();
            let stats = pool.stats();
            assert_eq!(stats.idle_bytes, ledger.idle(), "{stats:?}");
            assert_eq!(
                stats.gets, stats.returned,
                "every object came back: {stats:?}"
            );
            pool.sweep();
            assert_eq!(pool.stats().idle_bytes, ledger.idle(), "after one sweep");
            pool.sweep();
            let swept = pool.stats();
            assert_eq!((swept.idle, swept.idle_bytes), (0, 0), "{swept:?}");
            assert_eq!(ledger.idle(), 0, "the second sweep dropped them all");
            checked.wait();
        });
        // Reused objects give their bytes back, and a clear drops the rest.
        drop((0..4).map(|_| pool.get()).collect::<Vec<_>>());
        let (a, b) = (pool.get(), pool.get());
        assert_eq!(pool.stats().idle_bytes, ledger.idle() - (a.bytes + b.bytes));
        pool.clear();
        assert_eq!(pool.stats().idle_bytes, 0);
    }
}

/// A pool with a byte budget keeps no per-thread stashes: an object one
/// thread returns is idle where any thread's get finds it, while its
/// returner still runs (without the budget, that thread's stash keeps it).
#[test]
fn a_budget_keeps_every_idle_object_shared() {
    run_with_deadline(DEADLINE, || {
        for (budget, made) in [(Some(1 << 20), 1), (None, 2)] {
            let ledger = Arc::new(Ledger::default());
            let pool = blob_pool(&ledger, budget);
            let (returned, taken) = (Barrier::new(2), Barrier::new(2));
            thread::scope(|s| {
                s.spawn(|| {
                    drop(pool.get());
                    returned.wait();
                    taken.wait();
                });
                returned.wait();
                let blob = pool.get();
                assert_eq!(pool.stats().created, made, "budget {budget:?}");
                drop(blob);
                taken.wait();
            });
        }
    });
}

/// Many threads, objects of mixed sizes given back on their own thread
/// and on others, under a budget: at every quiescent point (all threads
/// at a barrier, no return in progress) and after every sweep, the idle
/// bytes are within the budget and the stats count them exactly.
#[test]
fn max_idle_bytes_bounds_the_idle_bytes_at_every_quiescent_point() {
    run_with_deadline(DEADLINE, || {
        const THREADS: usize = 8;
        const ROUNDS: usize = 30;
        const BUDGET: usize = 300_000;
        let ledger = Arc::new(Ledger::default());
        let pool = blob_pool(&ledger, Some(BUDGET));
        let work =
            |me: usize, r: usize, senders: &[mpsc::Sender<_>], received: &mpsc::Receiver<_>| {
                // Some kept and dropped here, some sent to the next thread,
                // which drops them.
                let held: Vec<_> = (0..(me + r) % 7 + 1).map(|_| pool.get()).collect();
                senders[(me + 1) % THREADS].send(pool.get()).unwrap();
                drop(held);
                drop(received.recv().unwrap());
            };
        in_rounds(THREADS, ROUNDS, work, |r| {
            let stats = pool.stats();
            assert!(stats.idle_bytes <= BUDGET, "round {r}: {stats:?}");
            assert_eq!(stats.idle_bytes, ledger.idle(), "round {r}: {stats:?}");
            assert_eq!(stats.gets, stats.returned + stats.rejected, "{stats:?}");
            if r % 3 == 0 {
                pool.sweep();
                let swept = pool.stats();
                assert!(swept.idle_bytes <= BUDGET, "after a sweep: {swept:?}");
                assert_eq!(swept.idle_bytes, ledger.idle(), "after a sweep");
            }
        });
        let stats = pool.stats();
        assert!(stats.rejected > 0, "the budget refused some: {stats:?}");
        // Every byte that left the pool was given back to the budget: once
        // cleared, it takes what fits in it again.
        pool.clear();
        let (a, b) = (pool.get(), pool.get());
        let bytes = a.bytes + b.bytes;
        drop((a, b));
        let after = pool.stats();
        assert_eq!((after.idle_bytes, after.rejected), (bytes, stats.rejected));
        drop(pool);
        assert_eq!(ledger.idle(), 0, "every object dropped");
    });
}

/// golang/go#23199's shape: a burst of eight 8 MiB buffers, freed on eight
/// threads, under a 16 MiB budget, leaves 16 MiB idle with no sweep.
#[test]
fn a_burst_of_large_buffers_leaves_no_more_than_the_budget() {
    const MIB: usize = 1 << 20;
    let pool = BytePool::builder(8 * MIB)
        .max_idle_bytes(16 * MIB)
        .manual_sweep()
        .build();
    let burst: Vec<_> = (0..8).map(|_| pool.get()).collect();
    thread::scope(|s| {
        for buf in burst {
            s.spawn(move || drop(buf));
        }
    });
    let stats = pool.stats();
    assert_eq!(stats.created, 8);
    assert_eq!((stats.idle, stats.idle_bytes), (2, 16 * MIB), "{stats:?}");
    assert_eq!(stats.rejected, 6, "{stats:?}");
    // A buffer taken and grown past what is left is refused, and one
    // larger than the whole budget is never kept.
    let mut grown = pool.get();
    grown.reserve_exact(24 * MIB);
    let grown_to = grown.capacity();
    drop(grown);
    let after = pool.stats();
    assert_eq!(
        after.idle_bytes,
        8 * MIB,
        "{after:?} after dropping {grown_to}"
    );
    assert_eq!(after.rejected, 7);
}

/// A budget smaller than one object keeps nothing, and a preload stops at
/// the budget.
#[test]
fn a_budget_below_one_object_keeps_nothing() {
    let ledger = Arc::new(Ledger::default());
    let pool = blob_pool(&ledger, Some(6));
    drop(pool.get()); // 1000 bytes
    drop(pool.get()); // 30000 bytes
    let stats = pool.stats();
    assert_eq!((stats.idle, stats.idle_bytes, stats.rejected), (0, 0, 2));
    assert_eq!(ledger.idle(), 0);

    let preloaded = LocalPool::builder(Blobs {
        ledger: Arc::clone(&ledger),
        next: AtomicUsize::new(0),
    })
    .preload(5)
    .max_idle_bytes(40_000)
    .manual_sweep()
    .build();
    let stats = preloaded.stats();
    // 1000 + 30000 + 7 fit; 65536 does not, 123457 does not.
    assert_eq!((stats.idle, stats.idle_bytes), (3, 31_007), "{stats:?}");
    assert_eq!((stats.created, stats.rejected), (5, 2), "{stats:?}");
}

/// A multi-size pool's classes share one budget: threads take buffers of
/// mixed sizes, hold some across rounds, give some back on other threads;
/// at every quiescent point the classes together hold at most the budget,
/// and `idle_bytes` is each class's idle count times its size.
#[test]
fn the_classes_of_a_multi_size_pool_share_one_budget() {
    run_with_deadline(DEADLINE, || {
        const THREADS: usize = 4;
        const ROUNDS: usize = 20;
        const BUDGET: usize = 1 << 20;
        let pool = BytePools::builder(1024, 1 << 18)
            .max_idle_bytes(BUDGET)
            .manual_sweep()
            .build();
        let work =
            |me: usize, r: usize, senders: &[mpsc::Sender<_>], received: &mpsc::Receiver<_>| {
                let len = |i: usize| 1000 + (me * 7919 + r * 104_729 + i * 65_537) % 250_000;
                let held: Vec<_> = (0..6).map(|i| pool.get(len(i))).collect();
                senders[(me + 1) % THREADS].send(pool.get(len(6))).unwrap();
                drop(held);
                drop(received.recv().unwrap());
            };
        in_rounds(THREADS, ROUNDS, work, |r| {
            let stats = pool.stats();
            assert!(stats.idle_bytes <= BUDGET, "round {r}: {stats:?}");
            let counted: usize = pool
                .classes()
                .map(|size| size * pool.class_stats(size).unwrap().idle)
                .sum();
            assert_eq!(stats.idle_bytes, counted, "round {r}: {stats:?}");
            assert_eq!(stats.gets, stats.returned + stats.rejected, "{stats:?}");
            if r % 4 == 0 {
                pool.sweep();
                assert!(pool.stats().idle_bytes <= BUDGET);
            }
        });
        assert!(pool.stats().rejected > 0, "{:?}", pool.stats());
    });
}

/// A `footprint` that panics: the object it measured is dropped and
/// counted discarded, on a return and in a preload, and the pool goes on.
#[test]
fn a_panicking_footprint_drops_its_object_counted() {
    struct Panics;
    impl Recycle<Vec<u8>> for Panics {
        fn create(&self) -> Vec<u8> {
            Vec::with_capacity(8)
        }
        fn footprint(&self, buf: &Vec<u8>) -> usize {
            assert!(buf.is_empty(), "footprint panics on a written buffer");
            buf.capacity()
        }
    }
    let pool = LocalPool::builder(Panics).manual_sweep().build();
    let returned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.with(|buf| buf.push(1));
    }));
    assert!(returned.is_err());
    drop(pool.get());
    let stats = pool.stats();
    assert_eq!(
        (stats.created, stats.discarded, stats.idle, stats.idle_bytes),
        (2, 1, 1, 8)
    );

    struct PanicsAlways;
    impl Recycle<u8> for PanicsAlways {
        fn create(&self) -> u8 {
            0
        }
        fn footprint(&self, _: &u8) -> usize {
            panic!("no footprint")
        }
    }
    let preloaded = LocalPool::builder(PanicsAlways)
        .preload(2)
        .manual_sweep()
        .build();
    let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| preloaded.stats()));
    assert!(first.is_err(), "the preload's panic reaches the first call");
    let stats = preloaded.stats();
    assert_eq!(
        (stats.created, stats.discarded, stats.idle),
        (1, 1, 0),
        "{stats:?}"
    );
}

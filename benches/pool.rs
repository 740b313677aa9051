//! stashpool against every peer, on the workloads of the design notes.
//!
//! ```text
//! cargo bench --bench pool                       # everything (about 10 minutes)
//! cargo bench --bench pool -- hot/               # one workload
//! cargo bench --bench pool -- --quick            # a rough pass
//! ```
//!
//! Every workload uses 4 KiB byte buffers and writes 64 bytes per use. Peers
//! run in the same benchmark group, so their numbers can be read as ratios
//! of one run:
//!
//! * `hot/1` and `hot/all`: get, write, return, on one thread and on every
//!   core at once (times are per operation on each thread: divide by the
//!   thread count for the aggregate cost, or read the throughput);
//! * `overflow/1` and `overflow/all`: hold 100 buffers, then return all 100
//!   (Go's `BenchmarkPoolOverflow`); times per buffer;
//! * `handoff`: one thread gets and fills, sends through a bounded channel,
//!   another returns; times per buffer;
//! * `sizes/N`: a buffer of N bytes (64 B to 1 MiB), pooled or allocated;
//! * `scaling`: `hot` throughput at 1, 2, 4, ... threads up to the cores.

use std::cell::RefCell;
use std::hint::black_box;
use std::ops::DerefMut;
use std::sync::{mpsc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};

const SIZE: usize = 4096;
const WRITE: [u8; 64] = [7; 64];
const HELD: usize = 100;

// === the contenders ===

/// A pool under test: hands out 4 KiB buffers that go back when dropped.
trait Contender: Sync {
    type Buf<'a>
    where
        Self: 'a;
    fn get(&self) -> Self::Buf<'_>;
    /// The per-use work: write 64 bytes.
    fn fill(buf: &mut Self::Buf<'_>);

    /// `hot`: get, write, return.
    #[inline]
    fn hot(&self) {
        let mut buf = self.get();
        Self::fill(&mut buf);
    }

    /// `overflow`: hold `HELD` buffers, then return them all.
    #[inline]
    fn overflow<'a>(&'a self, held: &mut Vec<Self::Buf<'a>>) {
        for _ in 0..HELD {
            let mut buf = self.get();
            Self::fill(&mut buf);
            held.push(buf);
        }
        held.clear();
    }
}

/// Implements `Contender` for a pool whose guard derefs to `Vec<u8>`.
macro_rules! vec_contender {
    ($pool:ty, $buf:ty, |$p:ident| $get:expr) => {
        impl Contender for $pool {
            type Buf<'a>
                = $buf
            where
                Self: 'a;

            #[inline]
            fn get(&self) -> Self::Buf<'_> {
                let $p = self;
                $get
            }

            #[inline]
            fn fill(buf: &mut Self::Buf<'_>) {
                fill_vec(buf);
            }
        }
    };
}

fn new_buf() -> Vec<u8> {
    Vec::with_capacity(SIZE)
}

/// stashpool, through a guard.
struct Stash(stashpool::LocalPool<Vec<u8>>);
vec_contender!(
    Stash,
    stashpool::Pooled<'a, Vec<u8>, fn() -> Vec<u8>>,
    |p| p.0.get()
);

/// stashpool, scoped (`with`): the whole use inside the closure.
struct StashWith(stashpool::LocalPool<Vec<u8>>);

/// A naive `thread_local!` `RefCell<Vec<_>>` stash: the floor.
struct Floor;
thread_local! {
    static FLOOR: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}
struct FloorBuf(Vec<u8>);
impl Drop for FloorBuf {
    #[inline]
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.0);
        FLOOR.with(|stash| stash.borrow_mut().push(buf));
    }
}
impl std::ops::Deref for FloorBuf {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.0
    }
}
impl DerefMut for FloorBuf {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.0
    }
}
impl Contender for Floor {
    type Buf<'a> = FloorBuf;

    #[inline]
    fn get(&self) -> FloorBuf {
        FloorBuf(floor_pop())
    }

    #[inline]
    fn fill(buf: &mut FloorBuf) {
        fill_vec(buf);
    }

    /// The floor at its barest: a pop and a push, no guard.
    #[inline]
    fn hot(&self) {
        let mut buf = floor_pop();
        fill_vec(&mut buf);
        FLOOR.with(|stash| stash.borrow_mut().push(buf));
    }

    #[inline]
    fn overflow(&self, _: &mut Vec<FloorBuf>) {
        let mut held = [const { Vec::new() }; HELD];
        for slot in &mut held {
            *slot = floor_pop();
            fill_vec(slot);
        }
        for buf in held {
            FLOOR.with(|stash| stash.borrow_mut().push(buf));
        }
    }
}

#[inline]
fn floor_pop() -> Vec<u8> {
    FLOOR
        .with(|stash| stash.borrow_mut().pop())
        .unwrap_or_else(new_buf)
}

#[inline]
fn fill_vec(buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(&WRITE);
    black_box(&*buf);
}

/// A `Mutex<Vec<_>>`.
struct Locked(Mutex<Vec<Vec<u8>>>);
struct LockedBuf<'a>(&'a Locked, Vec<u8>);
impl Drop for LockedBuf<'_> {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.1);
        self.0 .0.lock().unwrap().push(buf);
    }
}
impl std::ops::Deref for LockedBuf<'_> {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.1
    }
}
impl DerefMut for LockedBuf<'_> {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.1
    }
}
vec_contender!(Locked, LockedBuf<'a>, |p| {
    let buf = p.0.lock().unwrap().pop();
    LockedBuf(p, buf.unwrap_or_else(new_buf))
});

type Reset = fn(&mut Vec<u8>);
fn reset(buf: &mut Vec<u8>) {
    buf.clear();
}

struct LfLinear(lockfree_object_pool::LinearObjectPool<Vec<u8>>);
vec_contender!(
    LfLinear,
    lockfree_object_pool::LinearReusable<'a, Vec<u8>>,
    |p| p.0.pull()
);

struct LfSpin(lockfree_object_pool::SpinLockObjectPool<Vec<u8>>);
vec_contender!(
    LfSpin,
    lockfree_object_pool::SpinLockReusable<'a, Vec<u8>>,
    |p| p.0.pull()
);

struct ObjPool(object_pool::Pool<Vec<u8>>);
vec_contender!(ObjPool, object_pool::Reusable<'a, Vec<u8>>, |p| p
    .0
    .pull(new_buf));

struct OAlloc;
impl opool::PoolAllocator<Vec<u8>> for OAlloc {
    fn allocate(&self) -> Vec<u8> {
        new_buf()
    }
    fn reset(&self, buf: &mut Vec<u8>) {
        buf.clear();
    }
}
struct OPool(opool::Pool<OAlloc, Vec<u8>>);
vec_contender!(OPool, opool::RefGuard<'a, OAlloc, Vec<u8>>, |p| p.0.get());

struct Slab(sharded_slab::Pool<Vec<u8>>);
struct SlabBuf<'a>(Option<sharded_slab::pool::RefMut<'a, Vec<u8>>>, &'a Slab);
impl Drop for SlabBuf<'_> {
    fn drop(&mut self) {
        if let Some(guard) = self.0.take() {
            let key = guard.key();
            drop(guard);
            self.1 .0.clear(key);
        }
    }
}
impl std::ops::Deref for SlabBuf<'_> {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        self.0.as_ref().unwrap()
    }
}
impl DerefMut for SlabBuf<'_> {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        self.0.as_mut().unwrap()
    }
}
vec_contender!(Slab, SlabBuf<'a>, |p| {
    let mut guard = p.0.create().expect("slab full");
    if guard.capacity() < SIZE {
        guard.reserve(SIZE);
    }
    SlabBuf(Some(guard), p)
});

struct SharkLocal;
vec_contender!(SharkLocal, poolshark::local::LPooled<Vec<u8>>, |_p| {
    let mut buf = poolshark::local::LPooled::<Vec<u8>>::take();
    if buf.capacity() < SIZE {
        buf.reserve(SIZE);
    }
    buf
});

struct SharkGlobal(poolshark::global::Pool<Vec<u8>>);
vec_contender!(SharkGlobal, poolshark::global::GPooled<Vec<u8>>, |p| {
    let mut buf = p.0.take();
    if buf.capacity() < SIZE {
        buf.reserve(SIZE);
    }
    buf
});

/// zeropool hands out byte slices by size class; `alloc_uninit` and a
/// 64-byte write is its fastest safe way to get a written buffer.
struct Zero(zeropool::ZeroPool);
impl Contender for Zero {
    type Buf<'a> = Option<zeropool::Buf<'a>>;

    #[inline]
    fn get(&self) -> Self::Buf<'_> {
        // The write is part of getting a readable buffer from zeropool.
        Some(self.0.alloc_uninit(WRITE.len()).write_from_slice(&WRITE))
    }

    #[inline]
    fn fill(buf: &mut Self::Buf<'_>) {
        black_box(&**buf.as_ref().unwrap());
    }
}

/// No pool: a new buffer every time.
struct Plain;
vec_contender!(Plain, Vec<u8>, |_p| new_buf());

// === workloads ===

/// Runs `work(iters)` on `threads` threads at once; returns the wall time
/// from their common start to the last one's end.
fn parallel(threads: usize, iters: u64, work: impl Fn(u64) + Sync) -> Duration {
    let start = Barrier::new(threads + 1);
    thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    work(iters);
                })
            })
            .collect();
        start.wait();
        let t0 = Instant::now();
        for worker in workers {
            worker.join().unwrap();
        }
        t0.elapsed()
    })
}

fn cores() -> usize {
    thread::available_parallelism().map_or(2, |n| n.get())
}

/// Every contender, in a fixed order, given to `run`.
macro_rules! for_each_contender {
    ($run:ident, $group:expr $(, $arg:expr)*) => {{
        let g = $group;
        $run(g, "stashpool get", &Stash(stashpool::LocalPool::new(new_buf)) $(, $arg)*);
        $run(g, "thread_local floor", &Floor $(, $arg)*);
        $run(g, "Mutex<Vec>", &Locked(Mutex::new(Vec::new())) $(, $arg)*);
        $run(g, "lockfree-object-pool linear", &LfLinear(lockfree_object_pool::LinearObjectPool::new(new_buf, reset as Reset)) $(, $arg)*);
        $run(g, "lockfree-object-pool spinlock", &LfSpin(lockfree_object_pool::SpinLockObjectPool::new(new_buf, reset as Reset)) $(, $arg)*);
        $run(g, "object-pool", &ObjPool(object_pool::Pool::new(0, new_buf)) $(, $arg)*);
        $run(g, "opool", &OPool(opool::Pool::new(4096, OAlloc)) $(, $arg)*);
        $run(g, "sharded-slab", &Slab(sharded_slab::Pool::new()) $(, $arg)*);
        $run(g, "zeropool", &Zero(zeropool::ZeroPool::new()) $(, $arg)*);
        $run(g, "poolshark local", &SharkLocal $(, $arg)*);
        $run(g, "poolshark global", &SharkGlobal(poolshark::global::Pool::new(4096, 2 * SIZE)) $(, $arg)*);
        $run(g, "plain allocation", &Plain $(, $arg)*);
    }};
}

fn bench_hot<C: Contender>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    c: &C,
    threads: usize,
) {
    g.bench_function(name, |b| {
        if threads == 1 {
            b.iter(|| c.hot());
        } else {
            b.iter_custom(|iters| {
                parallel(threads, iters, |n| {
                    for _ in 0..n {
                        c.hot();
                    }
                })
            });
        }
    });
}

fn bench_with(g: &mut BenchmarkGroup<'_, WallTime>, threads: usize) {
    let pool = StashWith(stashpool::LocalPool::new(new_buf));
    let op = |pool: &StashWith| pool.0.with(fill_vec);
    g.bench_function("stashpool with", |b| {
        if threads == 1 {
            b.iter(|| op(&pool));
        } else {
            b.iter_custom(|iters| {
                parallel(threads, iters, |n| {
                    for _ in 0..n {
                        op(&pool);
                    }
                })
            });
        }
    });
}

fn hot(c: &mut Criterion) {
    for threads in [1, cores()] {
        let label = if threads == 1 {
            "1".to_string()
        } else {
            "all".to_string()
        };
        let mut g = c.benchmark_group(format!("hot/{label}"));
        g.throughput(Throughput::Elements(threads as u64));
        bench_with(&mut g, threads);
        for_each_contender!(bench_hot, &mut g, threads);
        g.finish();
    }
}

fn bench_overflow<C: Contender>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    c: &C,
    threads: usize,
) {
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            parallel(threads, iters, |n| {
                let mut held = Vec::with_capacity(HELD);
                for _ in 0..n {
                    c.overflow(&mut held);
                }
            })
        });
    });
}

fn overflow(c: &mut Criterion) {
    for threads in [1, cores()] {
        let label = if threads == 1 { "1" } else { "all" };
        let mut g = c.benchmark_group(format!("overflow/{label}"));
        // One iteration holds and returns 100 buffers on each thread.
        g.throughput(Throughput::Elements((HELD * threads) as u64));
        for_each_contender!(bench_overflow, &mut g, threads);
        g.finish();
    }
}

fn bench_handoff<C: Contender>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, c: &C)
where
    for<'a> C::Buf<'a>: Send,
{
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let (tx, rx) = mpsc::sync_channel::<C::Buf<'_>>(64);
            let start = Barrier::new(2);
            thread::scope(|s| {
                s.spawn(|| {
                    start.wait();
                    for buf in rx {
                        drop(black_box(buf));
                    }
                });
                start.wait();
                let t0 = Instant::now();
                for _ in 0..iters {
                    let mut buf = c.get();
                    C::fill(&mut buf);
                    tx.send(buf).unwrap();
                }
                drop(tx);
                t0
            })
            .elapsed()
        });
    });
}

fn handoff(c: &mut Criterion) {
    let mut g = c.benchmark_group("handoff");
    g.throughput(Throughput::Elements(1));
    bench_handoff(
        &mut g,
        "stashpool get",
        &Stash(stashpool::LocalPool::new(new_buf)),
    );
    bench_handoff(&mut g, "thread_local floor", &Floor);
    bench_handoff(&mut g, "Mutex<Vec>", &Locked(Mutex::new(Vec::new())));
    bench_handoff(
        &mut g,
        "lockfree-object-pool linear",
        &LfLinear(lockfree_object_pool::LinearObjectPool::new(
            new_buf,
            reset as Reset,
        )),
    );
    bench_handoff(
        &mut g,
        "lockfree-object-pool spinlock",
        &LfSpin(lockfree_object_pool::SpinLockObjectPool::new(
            new_buf,
            reset as Reset,
        )),
    );
    bench_handoff(
        &mut g,
        "object-pool",
        &ObjPool(object_pool::Pool::new(0, new_buf)),
    );
    bench_handoff(&mut g, "opool", &OPool(opool::Pool::new(4096, OAlloc)));
    bench_handoff(&mut g, "zeropool", &Zero(zeropool::ZeroPool::new()));
    bench_handoff(&mut g, "poolshark local", &SharkLocal);
    bench_handoff(
        &mut g,
        "poolshark global",
        &SharkGlobal(poolshark::global::Pool::new(4096, 2 * SIZE)),
    );
    bench_handoff(&mut g, "plain allocation", &Plain);
    g.finish();
}

fn sizes(c: &mut Criterion) {
    let mut size = 64;
    while size <= 1 << 20 {
        let mut g = c.benchmark_group(format!("sizes/{size}"));
        let pool = stashpool::LocalPool::new(move || Vec::<u8>::with_capacity(size));
        g.bench_function("stashpool with", |b| {
            b.iter(|| {
                pool.with(|buf| {
                    buf.clear();
                    buf.extend_from_slice(&WRITE[..size.min(64)]);
                    black_box(&*buf);
                })
            })
        });
        g.bench_function("Vec::with_capacity", |b| {
            b.iter(|| {
                let mut buf = Vec::<u8>::with_capacity(size);
                buf.extend_from_slice(&WRITE[..size.min(64)]);
                black_box(&buf);
            })
        });
        g.bench_function("vec![0; n]", |b| {
            b.iter(|| {
                let mut buf = vec![0u8; size];
                buf[..size.min(64)].copy_from_slice(&WRITE[..size.min(64)]);
                black_box(&buf);
            })
        });
        g.finish();
        size *= 4;
    }
}

fn scaling(c: &mut Criterion) {
    let mut g = c.benchmark_group("scaling");
    let mut threads = 1;
    loop {
        g.throughput(Throughput::Elements(threads as u64));
        let pool = stashpool::LocalPool::new(new_buf);
        g.bench_function(format!("stashpool with/{threads}"), |b| {
            b.iter_custom(|iters| {
                parallel(threads, iters, |n| {
                    for _ in 0..n {
                        pool.with(fill_vec);
                    }
                })
            })
        });
        g.bench_function(format!("thread_local floor/{threads}"), |b| {
            b.iter_custom(|iters| {
                parallel(threads, iters, |n| {
                    for _ in 0..n {
                        Floor.hot();
                    }
                })
            })
        });
        if threads >= cores() {
            break;
        }
        threads = (threads * 2).min(cores());
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = hot, overflow, handoff, sizes, scaling
}
criterion_main!(benches);

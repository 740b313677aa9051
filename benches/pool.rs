//! stashpool against every peer, on the workloads of the design notes.
//!
//! ```text
//! cargo bench --bench pool              # everything, a few minutes on 2 cores
//! python3 benches/report.py             # benches/RESULTS.md and the chart
//! cargo bench --bench pool -- hot/      # one workload
//! cargo bench --bench pool -- --measurement-time 2   # longer, steadier samples
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
//!   (Go's `BenchmarkPoolOverflow`); times per 100 buffers on each thread;
//! * `handoff`: one thread gets and fills, sends through a bounded channel,
//!   another returns; times per buffer. The channel's ends spin rather than
//!   sleep (`parallel::SpinChannel` says why). `channel alone` is its floor:
//!   the same channel moving an object that owns no memory, with no pool;
//! * `sizes/N`: a buffer of N bytes (64 B to 1 MiB), pooled or allocated;
//! * `scaling`: `hot` at 1, 2, 4, ... threads up to the machine's cores.
//!
//! Timing (see `common/parallel.rs`): threads start together from a
//! spinning start and stamp their own start and end; each criterion sample
//! is the best of [`parallel::REPS`] runs, alternated with as many runs of
//! the workload's floor (the floor's own entry alternates with `stashpool
//! get`). The floor's best of every sample is kept as well, in
//! `target/criterion/stashpool-pool-pairs.json`, so `benches/report.py`
//! divides each contender by a floor timed at the same moments.
//! Single-thread workloads use the same interleaving, on the bench thread.

#[path = "common/parallel.rs"]
mod parallel;

use std::cell::RefCell;
use std::hint::black_box;
use std::ops::DerefMut;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput};

const SIZE: usize = 4096;
const WRITE: [u8; 64] = [7; 64];
const HELD: usize = 100;

// === the contenders ===

/// A pool under test: hands out 4 KiB buffers that go back when dropped.
///
/// Its methods, and every contender's, are `#[inline(always)]`: a program
/// that calls a pool's `get` in a loop has it inlined there, and a wrapper
/// that the compiler declined to inline would time a call that no user
/// pays, the more so the larger the pool's own inlined path.
trait Contender: Sync {
    type Buf<'a>
    where
        Self: 'a;
    fn get(&self) -> Self::Buf<'_>;
    /// The per-use work: write 64 bytes.
    fn fill(buf: &mut Self::Buf<'_>);

    /// `hot`: get, write, return.
    #[inline(always)]
    fn hot(&self) {
        let mut buf = self.get();
        Self::fill(&mut buf);
    }

    /// `overflow`: hold `HELD` buffers, then return them all.
    #[inline(always)]
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

            #[inline(always)]
            fn get(&self) -> Self::Buf<'_> {
                let $p = self;
                $get
            }

            #[inline(always)]
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
    static FLOOR_STASH: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}
struct FloorBuf(Vec<u8>);
impl Drop for FloorBuf {
    #[inline(always)]
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.0);
        FLOOR_STASH.with(|stash| stash.borrow_mut().push(buf));
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

    #[inline(always)]
    fn get(&self) -> FloorBuf {
        FloorBuf(floor_pop())
    }

    #[inline(always)]
    fn fill(buf: &mut FloorBuf) {
        fill_vec(buf);
    }

    /// The floor at its barest: a pop and a push, no guard.
    #[inline(always)]
    fn hot(&self) {
        let mut buf = floor_pop();
        fill_vec(&mut buf);
        FLOOR_STASH.with(|stash| stash.borrow_mut().push(buf));
    }

    #[inline(always)]
    fn overflow(&self, _: &mut Vec<FloorBuf>) {
        let mut held = [const { Vec::new() }; HELD];
        for slot in &mut held {
            *slot = floor_pop();
            fill_vec(slot);
        }
        for buf in held {
            FLOOR_STASH.with(|stash| stash.borrow_mut().push(buf));
        }
    }
}

#[inline(always)]
fn floor_pop() -> Vec<u8> {
    FLOOR_STASH
        .with(|stash| stash.borrow_mut().pop())
        .unwrap_or_else(new_buf)
}

#[inline(always)]
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
        self.0.0.lock().unwrap().push(buf);
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
            self.1.0.clear(key);
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

    #[inline(always)]
    fn get(&self) -> Self::Buf<'_> {
        // The write is part of getting a readable buffer from zeropool.
        Some(self.0.alloc_uninit(WRITE.len()).write_from_slice(&WRITE))
    }

    #[inline(always)]
    fn fill(buf: &mut Self::Buf<'_>) {
        black_box(&**buf.as_ref().unwrap());
    }
}

/// No pool: a new buffer every time.
struct Plain;
vec_contender!(Plain, Vec<u8>, |_p| new_buf());

// === workloads ===

/// The floor's name in every table: `benches/report.py` divides by it.
const FLOOR: &str = "thread_local floor";
/// stashpool's two ways in.
const STASH_GET: &str = "stashpool get";
const STASH_WITH: &str = "stashpool with";
/// The handoff floor's name.
const CHANNEL_ALONE: &str = "channel alone";
/// The bounded channel of the handoff workload.
const CHANNEL: usize = 64;

/// One thread's share of a workload: `n` operations.
type Loop<'a> = &'a (dyn Fn(u64) + Sync);

fn cores() -> usize {
    thread::available_parallelism().map_or(2, |n| n.get())
}

/// 1, 2, 4, ... up to the cores, and the core count itself.
fn thread_counts() -> Vec<usize> {
    let mut counts: Vec<usize> = (0..)
        .map(|shift| 1 << shift)
        .take_while(|&n| n < cores())
        .collect();
    counts.push(cores());
    counts
}

/// Every timed call of every benchmark, in order: the group, the
/// benchmark, its partner, and per call the iterations criterion asked for,
/// the iterations run, the subject's best and the partner's best. Written
/// beside criterion's results for `benches/report.py`, which divides each
/// contender by its floor as timed in the same samples.
type Pairs = Vec<(String, String, &'static str, Vec<Call>)>;
type Call = (u64, u64, Duration, Duration);
static PAIRS: Mutex<Pairs> = Mutex::new(Vec::new());

/// A group of timed workloads: each benchmark alternates with a partner,
/// and both times of every sample are kept (`PAIRS`).
///
/// Flat sampling gives every sample the same number of iterations, so each
/// rep is long enough for the threads' start to be a rounding error
/// (criterion's default linear sampling makes the first samples a few
/// iterations long), and each sample is a measurement in its own right: the
/// best of its reps.
struct Timed<'c> {
    group: BenchmarkGroup<'c, WallTime>,
    name: String,
}

impl<'c> Timed<'c> {
    fn new(c: &'c mut Criterion, name: &str) -> Self {
        let mut group = c.benchmark_group(name);
        group.sampling_mode(SamplingMode::Flat);
        Timed {
            group,
            name: name.into(),
        }
    }

    fn throughput(&mut self, elements: u64) {
        self.group.throughput(Throughput::Elements(elements));
    }

    /// Benchmarks `id`; `run(iters)` gives the subject's and the partner's
    /// best times, and criterion sees the subject's.
    fn bench(
        &mut self,
        id: &str,
        partner: &'static str,
        mut run: impl FnMut(u64) -> (Duration, Duration),
    ) {
        let index = {
            let mut pairs = PAIRS.lock().unwrap();
            pairs.push((self.name.clone(), id.into(), partner, Vec::new()));
            pairs.len() - 1
        };
        // Criterion sizes its samples from a warm-up that, on a busy
        // machine, can end after one stalled call of a few iterations; a
        // rep is never shorter than `parallel::MIN_REP`, and its times are
        // scaled back to the iterations criterion asked for.
        let mut min_iters = 0;
        self.group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                if min_iters == 0 {
                    min_iters = parallel::calibrate(&mut run);
                }
                let n = iters.max(min_iters);
                let (subject, partner) = run(n);
                PAIRS.lock().unwrap()[index]
                    .3
                    .push((iters, n, subject, partner));
                subject.mul_f64(iters as f64 / n as f64)
            })
        });
    }

    /// Times `subject` on `threads` threads, interleaved with `partner` on
    /// as many.
    fn threads(
        &mut self,
        id: &str,
        threads: usize,
        subject: Loop<'_>,
        (partner_name, partner): (&'static str, Loop<'_>),
    ) {
        self.bench(id, partner_name, |iters| {
            parallel::best_interleaved(
                || parallel::parallel(threads, || subject(iters)),
                || parallel::parallel(threads, || partner(iters)),
            )
        });
    }

    fn finish(self) {
        self.group.finish();
    }
}

/// The `hot` loop of a contender.
fn hot_loop<C: Contender>(c: &C) -> impl Fn(u64) + Sync + '_ {
    move |n| {
        for _ in 0..n {
            c.hot();
        }
    }
}

/// The `hot` loop of `with`: the whole use inside the closure.
fn with_loop(pool: &StashWith) -> impl Fn(u64) + Sync + '_ {
    move |n| {
        for _ in 0..n {
            pool.0.with(fill_vec);
        }
    }
}

/// The `overflow` loop of a contender.
fn overflow_loop<C: Contender>(c: &C) -> impl Fn(u64) + Sync + '_ {
    move |n| {
        let mut held = Vec::with_capacity(HELD);
        for _ in 0..n {
            c.overflow(&mut held);
        }
    }
}

/// The loops a contender alternates with: the floor, and (for the floor
/// itself) stashpool's guard.
struct Partners<'a> {
    floor: Loop<'a>,
    stash: Loop<'a>,
}

impl<'a> Partners<'a> {
    fn of(&self, name: &str) -> (&'static str, Loop<'a>) {
        if name == FLOOR {
            (STASH_GET, self.stash)
        } else {
            (FLOOR, self.floor)
        }
    }
}

fn bench_hot<C: Contender>(
    t: &mut Timed<'_>,
    name: &str,
    c: &C,
    threads: usize,
    partners: &Partners<'_>,
) {
    t.threads(name, threads, &hot_loop(c), partners.of(name));
}

fn bench_overflow<C: Contender>(
    t: &mut Timed<'_>,
    name: &str,
    c: &C,
    threads: usize,
    partners: &Partners<'_>,
) {
    t.threads(name, threads, &overflow_loop(c), partners.of(name));
}

/// Every contender, in a fixed order, given to `run`.
macro_rules! for_each_contender {
    ($run:ident, $group:expr $(, $arg:expr)*) => {{
        let g = $group;
        $run(g, STASH_GET, &Stash(stashpool::LocalPool::new(new_buf)) $(, $arg)*);
        $run(g, FLOOR, &Floor $(, $arg)*);
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

/// `hot/1` and `hot/all`.
fn hot(c: &mut Criterion) {
    for (label, threads) in [("1", 1), ("all", cores())] {
        let mut g = Timed::new(c, &format!("hot/{label}"));
        g.throughput(threads as u64);
        let partner = Stash(stashpool::LocalPool::new(new_buf));
        let (floor, stash) = (hot_loop(&Floor), hot_loop(&partner));
        let partners = Partners {
            floor: &floor,
            stash: &stash,
        };
        let with = StashWith(stashpool::LocalPool::new(new_buf));
        g.threads(STASH_WITH, threads, &with_loop(&with), (FLOOR, &floor));
        for_each_contender!(bench_hot, &mut g, threads, &partners);
        g.finish();
    }
}

/// `overflow/1` and `overflow/all`.
fn overflow(c: &mut Criterion) {
    for (label, threads) in [("1", 1), ("all", cores())] {
        let mut g = Timed::new(c, &format!("overflow/{label}"));
        // One iteration holds and returns 100 buffers on each thread.
        g.throughput((HELD * threads) as u64);
        let partner = Stash(stashpool::LocalPool::new(new_buf));
        let (floor, stash) = (overflow_loop(&Floor), overflow_loop(&partner));
        let partners = Partners {
            floor: &floor,
            stash: &stash,
        };
        for_each_contender!(bench_overflow, &mut g, threads, &partners);
        g.finish();
    }
}

/// One handoff run: a producer gets, fills and sends `iters` buffers, a
/// consumer receives and drops them. Timed from the first thread's start to
/// the consumer's last drop.
fn handoff_once<C: Contender>(c: &C, iters: u64) -> Duration
where
    for<'a> C::Buf<'a>: Send,
{
    let channel = &parallel::SpinChannel::new(CHANNEL);
    parallel::together(vec![
        Box::new(move || {
            for _ in 0..iters {
                let mut buf = c.get();
                C::fill(&mut buf);
                channel.send(buf);
            }
        }),
        Box::new(move || {
            for _ in 0..iters {
                drop(black_box(channel.recv()));
            }
        }),
    ])
}

/// The handoff floor: the same channel moving an empty `Vec<u8>`, which owns
/// no heap memory, so there is nothing to get, fill or give back. What a
/// pool adds to handoff is its time above this.
fn channel_alone_once(iters: u64) -> Duration {
    let channel = &parallel::SpinChannel::new(CHANNEL);
    parallel::together(vec![
        Box::new(move || {
            for _ in 0..iters {
                channel.send(black_box(Vec::<u8>::new()));
            }
        }),
        Box::new(move || {
            for _ in 0..iters {
                drop(black_box(channel.recv()));
            }
        }),
    ])
}

/// Benchmarks one contender's handoff, alternated with the channel alone.
fn bench_handoff<C: Contender>(t: &mut Timed<'_>, name: &str, c: &C)
where
    for<'a> C::Buf<'a>: Send,
{
    t.bench(name, CHANNEL_ALONE, |iters| {
        parallel::best_interleaved(|| handoff_once(c, iters), || channel_alone_once(iters))
    });
}

fn handoff(c: &mut Criterion) {
    let mut g = Timed::new(c, "handoff");
    g.throughput(1);
    let stash = Stash(stashpool::LocalPool::new(new_buf));
    g.bench(CHANNEL_ALONE, STASH_GET, |iters| {
        parallel::best_interleaved(|| channel_alone_once(iters), || handoff_once(&stash, iters))
    });
    bench_handoff(&mut g, STASH_GET, &stash);
    bench_handoff(&mut g, FLOOR, &Floor);
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

/// `sizes/N`: one buffer of N bytes, pooled or allocated, on one thread.
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

/// `scaling`: `hot` for `with`, the guard and the floor at 1, 2, 4, ...
/// threads; throughput is operations over all threads.
fn scaling(c: &mut Criterion) {
    let mut g = Timed::new(c, "scaling");
    let with = StashWith(stashpool::LocalPool::new(new_buf));
    let get = Stash(stashpool::LocalPool::new(new_buf));
    let (with, get, floor) = (with_loop(&with), hot_loop(&get), hot_loop(&Floor));
    for threads in thread_counts() {
        g.throughput(threads as u64);
        let id = |name: &str| format!("{name}/{threads}");
        g.threads(&id(STASH_WITH), threads, &with, (FLOOR, &floor));
        g.threads(&id(STASH_GET), threads, &get, (FLOOR, &floor));
        g.threads(&id(FLOOR), threads, &floor, (STASH_WITH, &with));
    }
    g.finish();
}

// === provenance ===

/// The groups this bench writes, for `benches/report.py` to tell them from
/// other benches' groups and from stale results.
fn group_names() -> Vec<String> {
    let mut names: Vec<String> = ["hot/1", "hot/all", "overflow/1", "overflow/all", "handoff"]
        .map(String::from)
        .to_vec();
    let mut size = 64;
    while size <= 1 << 20 {
        names.push(format!("sizes/{size}"));
        size *= 4;
    }
    names.push("scaling".into());
    names
}

/// Where criterion writes (its own rule, short of asking `cargo metadata`).
fn criterion_home() -> std::path::PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return home.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../target").into());
    target.join("criterion")
}

/// The first line a command prints, or "unknown".
fn first_line(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.lines().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}

fn json_string(text: &str) -> String {
    let mut out = String::from("\"");
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Records what this run measured: the commit, whether the tree had local
/// changes, when it started, the arguments, the threads, and the groups.
/// `benches/report.py` prints it above every table and leaves out results
/// older than the run.
fn record_run() {
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let list = |items: Vec<String>| {
        let items: Vec<String> = items.iter().map(|s| json_string(s)).collect();
        format!("[{}]", items.join(", "))
    };
    let dirty = first_line("git", &["status", "--porcelain", "--untracked-files=no"]);
    // How busy the machine was when the run started (1, 5, 15 minutes).
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".into());
    let record = format!(
        "{{\n  \"commit\": {},\n  \"dirty\": {},\n  \"started\": {},\n  \"args\": {},\n  \
         \"cores\": {},\n  \"load\": {},\n  \"rustc\": {},\n  \"reps\": {},\n  \"groups\": {}\n}}\n",
        json_string(&first_line("git", &["rev-parse", "HEAD"])),
        dirty != "unknown",
        started,
        list(std::env::args().skip(1).collect()),
        cores(),
        json_string(&load),
        json_string(&first_line("rustc", &["--version"])),
        parallel::REPS,
        list(group_names()),
    );
    let home = criterion_home();
    let written = std::fs::create_dir_all(&home)
        .and_then(|()| std::fs::write(home.join("stashpool-pool-run.json"), record));
    if let Err(err) = written {
        eprintln!("could not record the run in {}: {err}", home.display());
    }
}

fn json_ns(duration: Duration) -> String {
    duration.as_nanos().to_string()
}

/// Writes `PAIRS` beside criterion's results: per benchmark, its partner
/// and every call's iterations (asked for, run), subject best and partner
/// best (in ns, for the iterations run).
fn write_pairs() {
    let pairs = PAIRS.lock().unwrap();
    let entries: Vec<String> = pairs
        .iter()
        .map(|(group, name, partner, calls)| {
            let calls: Vec<String> = calls
                .iter()
                .map(|&(iters, run, subject, partner)| {
                    format!(
                        "[{iters}, {run}, {}, {}]",
                        json_ns(subject),
                        json_ns(partner)
                    )
                })
                .collect();
            format!(
                "  {{\"group\": {}, \"name\": {}, \"partner\": {}, \"calls\": [{}]}}",
                json_string(group),
                json_string(name),
                json_string(partner),
                calls.join(", ")
            )
        })
        .collect();
    let home = criterion_home();
    let path = home.join("stashpool-pool-pairs.json");
    if let Err(err) = std::fs::write(&path, format!("[\n{}\n]\n", entries.join(",\n"))) {
        eprintln!("could not write {}: {err}", path.display());
    }
}

fn main() {
    let mut criterion = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(1))
        .configure_from_args();
    // Record only a measuring run: `cargo test --benches` runs each bench
    // once without `--bench`, and `--test`, `--list` and `--profile-time`
    // write no estimates.
    let args: Vec<String> = std::env::args().collect();
    let measuring = args.iter().any(|arg| arg == "--bench")
        && !args
            .iter()
            .any(|arg| ["--test", "--list", "--profile-time"].contains(&arg.as_str()));
    if measuring {
        record_run();
    }
    hot(&mut criterion);
    overflow(&mut criterion);
    handoff(&mut criterion);
    sizes(&mut criterion);
    scaling(&mut criterion);
    if measuring {
        write_pairs();
    }
    criterion.final_summary();
}

//! A tour of stashpool: a pool of buffers grows under a burst of work, shrinks
//! to nothing when the work stops, and saves allocations and time against
//! plain allocation.
//!
//! Run it with `cargo run --release --example tour`.
//!
//! Worker threads build responses into byte buffers (as a server would):
//! each request takes a buffer, writes a few kilobytes into it, checksums
//! it and gives it back. Requests come in bursts, so a worker sometimes holds
//! several buffers at once. A table printed every 100 ms shows the pool:
//! objects idle in it, made, reused and trimmed by the background sweeper.
//! After the burst the pool is swept every 500 ms; an idle buffer survives
//! one sweep and is dropped by the second. The same burst then runs with a
//! fresh `Vec` per request, and the two are compared.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::io::Write;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use stashpool::{LocalPool, Recycle};

/// Bytes written per request.
const RESPONSE: usize = 32 * 1024;
/// Requests per worker thread.
const REQUESTS: usize = 300_000;
/// Most requests served at once by one worker, at the peak of the burst.
const MAX_GROUP: usize = 24;
/// How often the background sweeper trims the pool.
const SWEEP: Duration = Duration::from_millis(500);

// === a counting allocator, to show what the pool saves ===

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static HEAP: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        HEAP.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HEAP.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        HEAP.fetch_add(new_size, Ordering::Relaxed);
        HEAP.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

// === the workload ===

/// Response buffers: cleared on return, dropped if one grew past 1 MiB.
struct Buffers;

impl Recycle<Vec<u8>> for Buffers {
    fn create(&self) -> Vec<u8> {
        Vec::with_capacity(RESPONSE)
    }

    fn recycle(&self, buf: &mut Vec<u8>) -> bool {
        buf.clear();
        buf.capacity() <= 1 << 20
    }
}

/// Writes a response of `RESPONSE` bytes into `buf` and checksums it.
fn respond(buf: &mut Vec<u8>, request: usize) -> u64 {
    write!(buf, "HTTP/1.1 200 OK\r\nx-request: {request}\r\n\r\n").unwrap();
    let body = buf.len();
    while buf.len() < RESPONSE {
        let chunk = (RESPONSE - buf.len()).min(body);
        buf.extend_from_within(..chunk);
    }
    buf.iter().step_by(64).map(|&b| u64::from(b)).sum()
}

/// One worker's share of the burst: requests arrive in groups that need a
/// buffer each at the same time, and the groups grow as the load ramps up
/// (from 1 to `MAX_GROUP` buffers held at once).
fn work<B: DerefMut<Target = Vec<u8>>>(get: impl Fn() -> B, seed: u64) -> u64 {
    let mut rng = seed | 1;
    let mut sum = 0;
    let mut request = 0;
    let mut held = Vec::with_capacity(MAX_GROUP);
    while request < REQUESTS {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let ramp = 1 + MAX_GROUP * request / REQUESTS;
        let burst = 1 + (rng % ramp as u64) as usize;
        held.extend((0..burst).map(|_| get()));
        for buf in &mut held {
            sum += respond(buf, request);
            request += 1;
        }
        held.clear();
    }
    sum
}

/// Runs `threads` workers, each taking buffers from `get`.
fn burst<B, G>(threads: usize, get: G) -> (Duration, u64)
where
    B: DerefMut<Target = Vec<u8>>,
    G: Fn() -> B + Sync,
{
    let start = Instant::now();
    let sum = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let get = &get;
                s.spawn(move || work(get, t as u64 + 1))
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    (start.elapsed(), sum)
}

/// A buffer made for one request and dropped after it.
struct Plain(Vec<u8>);

impl Deref for Plain {
    type Target = Vec<u8>;

    fn deref(&self) -> &Vec<u8> {
        &self.0
    }
}

impl DerefMut for Plain {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.0
    }
}

// === the live table ===

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// Prints a row for `pool` every 100 ms until `done`.
fn monitor<R: Recycle<Vec<u8>> + Sync>(
    pool: &LocalPool<Vec<u8>, R>,
    start: Instant,
    phase: &AtomicUsize,
    done: &AtomicBool,
) {
    const PHASES: [&str; 2] = ["burst", "idle"];
    println!(
        "{:>7}  {:<6}{:>8}{:>10}{:>10}{:>9}{:>11}",
        "time", "phase", "idle", "created", "reused", "trimmed", "heap MiB"
    );
    let mut next = start;
    while !done.load(Ordering::Relaxed) {
        let s = pool.stats();
        println!(
            "{:>6.1}s  {:<6}{:>8}{:>10}{:>10}{:>9}{:>11.1}",
            start.elapsed().as_secs_f64(),
            PHASES[phase.load(Ordering::Relaxed)],
            s.idle,
            s.created,
            s.reused,
            s.trimmed,
            mib(HEAP.load(Ordering::Relaxed)),
        );
        next += Duration::from_millis(100);
        thread::sleep(next.saturating_duration_since(Instant::now()));
    }
}

fn main() {
    let threads = thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 8);
    println!(
        "stashpool tour: {threads} worker threads, {REQUESTS} requests each, {RESPONSE} B responses"
    );
    println!(
        "the pool is swept every {} ms; an idle buffer survives one sweep\n",
        SWEEP.as_millis()
    );

    let pool = LocalPool::builder(Buffers).sweep_every(SWEEP).build();
    let phase = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let start = Instant::now();
    let allocations_before = ALLOCATIONS.load(Ordering::Relaxed);

    let (pooled_time, pooled_sum) = thread::scope(|s| {
        s.spawn(|| monitor(&pool, start, &phase, &done));
        let result = burst(threads, || pool.get());
        let pooled_allocations = ALLOCATIONS.load(Ordering::Relaxed) - allocations_before;
        // Idle: nothing uses the pool; the sweeper shrinks it.
        phase.store(1, Ordering::Relaxed);
        let idle_start = Instant::now();
        while pool.stats().idle > 0 && idle_start.elapsed() < Duration::from_secs(10) {
            thread::sleep(Duration::from_millis(20));
        }
        thread::sleep(Duration::from_millis(250)); // a few rows at zero
        done.store(true, Ordering::Relaxed);
        (result, pooled_allocations)
    });
    let ((pooled_time, pooled_sum), pooled_allocations) = (pooled_time, pooled_sum);
    let stats = pool.stats();
    assert_eq!(stats.idle, 0, "the idle pool was swept empty");
    println!("\nthe pool's counters: {stats}");

    println!("\nthe same burst with a new Vec per request...");
    let allocations_before = ALLOCATIONS.load(Ordering::Relaxed);
    let (plain_time, plain_sum) = burst(threads, || Plain(Vec::new()));
    let plain_allocations = ALLOCATIONS.load(Ordering::Relaxed) - allocations_before;
    assert_eq!(
        black_box(pooled_sum),
        black_box(plain_sum),
        "same work, same result"
    );

    let requests = (threads * REQUESTS) as f64;
    println!();
    println!(
        "{:<22}{:>12}{:>16}{:>18}",
        "", "time", "per request", "allocations"
    );
    let row = |name: &str, time: Duration, allocations: u64| {
        println!(
            "{name:<22}{:>10.0}ms{:>14.0}ns{allocations:>18}",
            time.as_secs_f64() * 1e3,
            time.as_secs_f64() * 1e9 / requests,
        );
    };
    row("stashpool LocalPool", pooled_time, pooled_allocations);
    row("plain allocation", plain_time, plain_allocations);
    println!(
        "\nthe pool made {} buffers for {} requests (hit rate {:.2}%), {:.1}x fewer allocations, {:.2}x the speed,",
        stats.created,
        threads * REQUESTS,
        stats.hit_rate() * 100.0,
        plain_allocations as f64 / pooled_allocations.max(1) as f64,
        plain_time.as_secs_f64() / pooled_time.as_secs_f64(),
    );
    println!(
        "and after two idle sweeps it holds nothing: {} buffers trimmed, {:.1} MiB on the heap.",
        stats.trimmed,
        mib(HEAP.load(Ordering::Relaxed))
    );
}

//! What the server counts: requests, connections, refusals, and every heap
//! allocation in the process (a counting global allocator), so that the
//! pooled and the plain server can be compared by what they allocate and
//! by the heap they hold.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

const SHARDS: usize = 16;

/// A counter that many threads bump: one cache line per shard, a thread
/// always bumping the same shard, so that counting every request and every
/// allocation does not make all threads fight over one line (which would
/// tax the server that allocates more, and flatter the other).
pub struct Counter {
    shards: [CachePadded<AtomicUsize>; SHARDS],
}

impl Counter {
    pub const fn new() -> Self {
        Self {
            shards: [const { CachePadded::new(AtomicUsize::new(0)) }; SHARDS],
        }
    }

    #[inline]
    pub fn add(&self, n: usize) {
        self.shards[shard()].fetch_add(n, Ordering::Relaxed);
    }

    /// Takes `n` back off a count that [`add`](Counter::add) raised,
    /// maybe on another shard: shards wrap, and only the total means
    /// anything.
    #[inline]
    pub fn sub(&self, n: usize) {
        self.shards[shard()].fetch_sub(n, Ordering::Relaxed);
    }

    /// The total; exact once the threads that bump it are quiet.
    pub fn get(&self) -> usize {
        self.shards
            .iter()
            .fold(0, |sum, s| sum.wrapping_add(s.load(Ordering::Relaxed)))
    }
}

/// This thread's shard. The thread-local is `const`-initialised and has no
/// destructor, so reading it never allocates (it runs inside the allocator)
/// and works at any point of a thread's life.
#[inline]
fn shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    SHARD
        .try_with(|shard| {
            if shard.get() == usize::MAX {
                shard.set(NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS);
            }
            shard.get()
        })
        .unwrap_or(0)
}

/// Allocations (`alloc`, `alloc_zeroed` and `realloc` calls) since start.
pub static ALLOCATIONS: Counter = Counter::new();
/// Bytes those allocations asked for.
pub static ALLOCATED_BYTES: Counter = Counter::new();
/// Bytes allocated and not yet freed: the heap in use, as the program sees
/// it (the allocator's own overhead and free lists not included).
pub static LIVE_BYTES: Counter = Counter::new();

/// The system allocator, counting.
pub struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; counting touches only atomics and a const thread-local, never
// the heap.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.add(1);
        ALLOCATED_BYTES.add(layout.size());
        // SAFETY: the caller upholds `alloc`'s contract, which `System`
        // shares.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE_BYTES.add(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.add(1);
        ALLOCATED_BYTES.add(layout.size());
        // SAFETY: as for `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            LIVE_BYTES.add(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.sub(layout.size());
        // SAFETY: `ptr` came from `System` (every method forwards to it),
        // with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.add(1);
        ALLOCATED_BYTES.add(new_size);
        // SAFETY: `ptr` came from `System` with `layout`; the caller upholds
        // the rest of `realloc`'s contract.
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            // On failure the old block stays, and so does its count.
            LIVE_BYTES.sub(layout.size());
            LIVE_BYTES.add(new_size);
        }
        moved
    }
}

/// Requests answered (any status, error answers included).
pub static REQUESTS: Counter = Counter::new();
/// Connections accepted and handed to a worker or thread.
pub static CONNECTIONS: Counter = Counter::new();
/// Connections refused with 503 because every worker was busy.
pub static REFUSED: Counter = Counter::new();
/// Requests answered with an error status (4xx, 5xx).
pub static ERRORS: Counter = Counter::new();
/// Connections closed by the read timeout.
pub static TIMEOUTS: Counter = Counter::new();
/// Connections closed because the client did not take its answers within
/// the write timeout.
pub static WRITE_TIMEOUTS: Counter = Counter::new();

/// Writes the counters as `key=value` pairs, the form the benchmark script
/// and the tests read.
pub fn write_counters(out: &mut impl Write) -> std::io::Result<()> {
    write!(
        out,
        "requests={} connections={} refused={} errors={} timeouts={} write_timeouts={} allocations={} allocated_bytes={} live_bytes={}",
        REQUESTS.get(),
        CONNECTIONS.get(),
        REFUSED.get(),
        ERRORS.get(),
        TIMEOUTS.get(),
        WRITE_TIMEOUTS.get(),
        ALLOCATIONS.get(),
        ALLOCATED_BYTES.get(),
        LIVE_BYTES.get(),
    )
}

//! What the examples measure about themselves: allocations (a counting
//! global allocator) and the process's peak resident set.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

/// The system allocator, counting the allocations it makes.
///
/// One relaxed add per allocation: next to what the examples allocate (a
/// compressor, a frame) it costs nothing measurable, and the count says
/// what a pool saves.
pub struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations (and reallocations) made so far by the process.
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// The process's peak resident set so far, in KiB: `VmHWM` of
/// `/proc/self/status`, or `None` where there is no such file (not Linux).
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// `peak_rss_kib` for printing.
pub fn peak_rss() -> String {
    peak_rss_kib().map_or_else(
        || "unknown".into(),
        |kib| format!("{:.1} MiB", kib as f64 / 1024.0),
    )
}

/// Parses the value after a `--flag`, or exits with a usage error.
pub fn value<T: std::str::FromStr>(flag: &str, value: Option<String>) -> T {
    let value = value.unwrap_or_else(|| usage_error(&format!("{flag} needs a value")));
    value
        .parse()
        .unwrap_or_else(|_| usage_error(&format!("{flag}: not a valid value: {value:?}")))
}

/// Prints `message` and exits with status 2, as for bad arguments.
pub fn usage_error(message: &str) -> ! {
    eprintln!("error: {message} (--help lists the options)");
    std::process::exit(2)
}

/// Prints a pool's counters after a run, once every thread that used it
/// has finished, and checks that no object was lost: each one handed out
/// came back, and each one the pool made is idle in it or was dropped and
/// counted. (A guard dropped by a panic's unwinding drops its object rather
/// than pool what the panic may have left half-written, and counts it
/// discarded.)
///
/// # Panics
///
/// If an object is unaccounted for.
pub fn account(name: &str, stats: stashpool::Stats) {
    let dropped = stats.discarded + stats.rejected;
    let came_back = stats.returned + dropped;
    println!("  {name:<12} {stats}");
    assert_eq!(
        stats.gets, came_back,
        "{name}: every object handed out came back"
    );
    assert_eq!(
        stats.created,
        stats.idle as u64 + dropped + stats.trimmed,
        "{name}: every object made is idle or was dropped and counted"
    );
}

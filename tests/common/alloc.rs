//! A global allocator that counts the heap bytes the process holds, for the
//! memory tests. A test binary that uses it installs it with
//! `#[global_allocator] static GLOBAL: Counting = Counting;` and keeps to
//! tests that do not disturb each other's counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// Forwards to the system allocator, counting bytes.
pub struct Counting;

static HEAP: AtomicIsize = AtomicIsize::new(0);
static ALLOCATIONS: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator, only counting bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HEAP.fetch_add(layout.size() as isize, Ordering::Relaxed);
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HEAP.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Heap bytes allocated and not freed since the process started (through
/// `Counting`).
pub fn heap() -> isize {
    HEAP.load(Ordering::Relaxed)
}

/// Allocations made since the process started (through `Counting`; a
/// `realloc` counts as one, through `GlobalAlloc`'s default).
pub fn allocations() -> isize {
    ALLOCATIONS.load(Ordering::Relaxed)
}

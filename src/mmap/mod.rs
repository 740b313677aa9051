//! Pools of anonymous memory maps (feature `mmap`): large buffers kept off
//! the heap (Go's `bp.MmapBytePool`, and [`MmapPools`] for Go's
//! `bp.MultiMmapBytePool`).
//!
//! Large buffers in their own anonymous maps stay out of the heap, where
//! they would fragment it and keep it from shrinking. But a map made per
//! use costs an `mmap`, a page fault for every page touched, and an
//! `munmap`. An [`MmapPool`] keeps maps for reuse: the pages stay mapped
//! while the pool keeps the map, and a sweep unmaps maps that went idle,
//! handing the memory back to the kernel.
//!
//! Under [`Reset::Zero`](crate::Reset::Zero), the default, a map that was
//! written through its guard is zeroed before it is pooled again, so
//! nothing one user wrote can be read by the next; under
//! [`Reset::Keep`](crate::Reset::Keep) it keeps its contents. The zeroing
//! is a plain write, which keeps the pages resident.
//! `madvise(MADV_DONTNEED)` would zero the map by dropping its pages
//! instead, but every page the next user touches then faults again, which
//! costs about what a fresh map costs.
//!
//! # Examples
//!
//! ```
//! use stashpool::mmap::MmapPool;
//!
//! static CHUNKS: MmapPool = MmapPool::new(1 << 20);
//!
//! fn checksum(fill: u8) -> u64 {
//!     let mut chunk = CHUNKS.get();
//!     chunk.fill(fill); // stands in for reading a file chunk into it
//!     chunk.iter().map(|&b| b as u64).sum()
//! }
//!
//! assert_eq!(checksum(1), 1 << 20);
//! assert_eq!(checksum(2), 2 << 20);
//! assert_eq!(CHUNKS.stats().created, 1);
//! ```

mod mmap_pool;
mod mmap_pools;

pub use mmap_pool::{MmapPool, MmapRecycler, PooledMmap, PooledMmapOwned};
pub use mmap_pools::{MmapPools, SizedMmap, SizedMmapOwned};

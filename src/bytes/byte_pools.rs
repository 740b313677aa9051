//! `BytePools`: byte buffers in size classes four to a doubling, one pool
//! per class, for callers whose buffer sizes vary.

use super::BufferRecycler;
use crate::Reset;
use crate::resource::classes::{SizeClasses, class_pool};
use crate::resource::fallible;

/// The largest class a [`BytePools`] may have: the largest power of two
/// a `Vec<u8>` can hold (2<sup>62</sup> bytes on 64-bit targets).
pub const MAX_CLASS: usize = crate::resource::classes::MAX_CLASS;

/// Byte buffers for requests of varying size, pooled in size classes
/// (Go's `bp.MultiBytePool`): one [`BytePool`](super::BytePool) per size.
///
/// **The memory rule.** The classes are four to a doubling, as jemalloc
/// and mimalloc space theirs: every power of two `2^k` from the smallest
/// class up, and `1.25`, `1.5` and `1.75` times it. `get(len)` takes a
/// buffer from the smallest class that holds `len` bytes, so for any `len`
/// from `min` to `max` a buffer has at least `len` and at most `1.25 × len`
/// bytes of room (a request below `min` gets the smallest class). A class
/// keeps only buffers of exactly its size: one that grew or shrank is
/// dropped on return, and one given with `put` is kept if its capacity is
/// a class's. Idle buffers stay per class and per thread until sweeps drop
/// them; `max_idle` bounds each class's count, and
/// [`max_idle_bytes`](crate::ResourceBuilder::max_idle_bytes) the bytes of
/// all classes together, at every instant (its buffers are then shared by
/// all threads, none kept per thread). Set it where sizes vary widely:
/// a class is then seldom asked for again while one of its buffers is
/// idle, and every idle byte is one the allocator cannot give to another
/// size (`examples/archive`, files of 1 to 8 MiB, reuses few buffers and
/// keeps its peak memory near plain `Vec`s' with a budget of half its
/// largest file). Each class is a
/// [`LocalPool`](crate::LocalPool) of its own, made on first use; a guard
/// returns its buffer to the class it came from. Requests larger than
/// [`max_capacity`](Self::max_capacity) get a plain allocation that is
/// dropped, not pooled, when the guard drops.
///
/// Returned buffers are cleared, as in a [`BytePool`](super::BytePool).
///
/// # Examples
///
/// ```
/// use stashpool::bytes::BytePools;
///
/// static BUFFERS: BytePools = BytePools::new(512, 64 * 1024);
///
/// let small = BUFFERS.get(100); // from the 512-byte class
/// assert!(small.capacity() >= 512);
/// let medium = BUFFERS.get(3000); // from the 3072-byte class
/// assert_eq!(medium.capacity(), 3072);
/// let huge = BUFFERS.get(1 << 20); // larger than the largest class: not pooled
/// assert!(huge.capacity() >= 1 << 20);
/// ```
pub struct BytePools {
    classes: SizeClasses<Vec<u8>, BufferRecycler>,
}

/// Four classes per doubling (`SizeClasses`' grid of 2<sup>2</sup>).
const GRID: u32 = 2;

/// The recycler of a class: it keeps only buffers of exactly its size. One
/// that grew would hand a later request more than a quarter above what it
/// asked for; one that shrank could not serve it.
fn class_recycler(size: usize, _: Reset) -> BufferRecycler {
    BufferRecycler::new(size, size)
}

class_pool!(
    BytePools,
    Vec<u8>,
    BufferRecycler,
    GRID,
    class_recycler,
    "stashpool: BytePools: the smallest class must be non-zero, \
     at most the largest, and the largest at most MAX_CLASS bytes",
    fallible::with_capacity,
    Vec::capacity,
    "stashpool::bytes::BytePools"
);

/// A buffer from a [`BytePools`]: goes back to its size class, cleared,
/// when dropped, unless it was too large to be pooled.
///
/// Dereferences to `Vec<u8>`.
///
/// # Examples
///
/// ```
/// use std::io::Write;
/// use stashpool::bytes::BytePools;
/// use stashpool::SizedGuard;
///
/// let pool = BytePools::new(64, 1024);
/// let mut buf = pool.get(100);
/// write!(buf, "{}", 42).unwrap();
/// assert!(SizedGuard::is_pooled(&buf));
/// let kept: Vec<u8> = SizedGuard::into_inner(buf); // leaves the pool
/// assert_eq!(kept, b"42");
/// ```
pub type SizedBuffer<'a> = crate::SizedGuard<super::PooledBuffer<'a>>;

/// A buffer from a [`BytePools`] in an `Arc`, from
/// [`get_owned`](BytePools::get_owned): [`SizedBuffer`] that keeps the
/// pool alive, so `'static` and `Send`.
///
/// # Examples
///
/// ```standalone_crate
/// use std::sync::Arc;
/// use stashpool::bytes::{BytePools, SizedBufferOwned};
///
/// let pool = Arc::new(BytePools::new(64, 1024));
/// let buf: SizedBufferOwned = pool.get_owned(100);
/// std::thread::spawn(move || drop(buf)).join().unwrap();
/// assert_eq!(pool.stats().returned, 1);
/// ```
pub type SizedBufferOwned =
    crate::SizedGuard<crate::PooledOwned<Vec<u8>, super::BufferRecycler, BytePools>>;

//! Pools of anonymous memory maps (feature `mmap`): large buffers kept off
//! the heap (Go's `bp.MmapBytePool`).
//!
//! Large buffers in their own anonymous maps stay out of the heap, where
//! they would fragment it and keep it from shrinking. But a map made per
//! use costs an `mmap`, a page fault for every page touched, and an
//! `munmap`. An [`MmapPool`] keeps maps for reuse: the pages stay mapped
//! while the pool keeps the map, and a sweep unmaps maps that went idle,
//! handing the memory back to the kernel.
//!
//! A returned map is zeroed before it is pooled again, so nothing one user
//! wrote can be read by the next. The zeroing is a plain write, which keeps
//! the pages resident. `madvise(MADV_DONTNEED)` would zero the map by
//! dropping its pages instead, but every page the next user touches then
//! faults again, so a reused map would cost about what a fresh map costs:
//! writing zeros into resident pages is much cheaper than a page fault per
//! page.
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

use std::fmt;

use memmap2::MmapMut;

use crate::fallible;
use crate::resource::sealed::{Knobs, Resource};
use crate::resource::ResourceBuilder;
use crate::{LocalPool, Pooled, Recycle, Stats};

const BAD_LEN: &str = "stashpool: an MmapPool map length must be non-zero and at most isize::MAX";

/// A pooled map: goes back to its [`MmapPool`], zeroed, when dropped.
pub type PooledMmap<'a> = Pooled<'a, MmapMut, MmapRecycler>;

/// A pool of anonymous memory maps of one length.
///
/// [`get`](Self::get) hands out a zeroed [`MmapMut`] (it dereferences to
/// `[u8]`); the map goes back to the pool, zeroed, when the guard drops.
/// Sweeps unmap maps that stayed idle, as for any [`LocalPool`].
///
/// A map swapped into a guard through `DerefMut` is pooled in place of the
/// original if it has the pool's length, and zeroed like any other, so put
/// only anonymous maps there: a map of a file would have its contents
/// overwritten.
///
/// # Examples
///
/// ```
/// use stashpool::mmap::MmapPool;
///
/// let pool = MmapPool::builder(64 * 1024).max_idle(8).manual_sweep().build();
/// let mut map = pool.get();
/// map[..5].copy_from_slice(b"hello");
/// drop(map);
/// assert!(pool.get().iter().all(|&b| b == 0)); // same map, zeroed
/// ```
pub struct MmapPool {
    pool: LocalPool<MmapMut, MmapRecycler>,
}

impl MmapPool {
    /// A pool of anonymous maps of `len` bytes (rounded up to whole pages
    /// by the kernel; the map's `len()` is `len`).
    ///
    /// `const`, so a pool can be a `static`.
    ///
    /// # Panics
    ///
    /// If `len` is zero or larger than `isize::MAX`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapPool;
    ///
    /// assert_eq!(MmapPool::new(1 << 20).len(), 1 << 20);
    /// ```
    pub const fn new(len: usize) -> Self {
        Self {
            pool: LocalPool::new(MmapRecycler::new(len)),
        }
    }

    /// A builder, to set the core knobs.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapPool;
    ///
    /// let pool = MmapPool::builder(1 << 20).local_capacity(2).build();
    /// assert_eq!(pool.get().len(), 1 << 20);
    /// ```
    pub fn builder(len: usize) -> ResourceBuilder<Self> {
        ResourceBuilder::new(len)
    }

    /// A zeroed map, from this thread's stash, the shared overflow, or a
    /// new `mmap`. It goes back to the pool, zeroed, when the guard drops.
    ///
    /// # Panics
    ///
    /// If a new map is needed and the kernel refuses it (for example when
    /// `len` exceeds the address space or the overcommit limit).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapPool;
    ///
    /// let pool = MmapPool::new(4096);
    /// let mut map = pool.get();
    /// map[4095] = 1;
    /// map.flush().unwrap(); // `MmapMut`'s own methods work through the guard
    /// ```
    #[inline]
    pub fn get(&self) -> PooledMmap<'_> {
        self.pool.get()
    }

    /// Runs `f` on a zeroed map, which goes back to the pool after `f`
    /// returns (or is unmapped if `f` panics).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapPool;
    ///
    /// let pool = MmapPool::new(4096);
    /// let first = pool.with(|map| {
    ///     map[0] = 42;
    ///     map[0]
    /// });
    /// assert_eq!(first, 42);
    /// ```
    #[inline]
    pub fn with<U>(&self, f: impl FnOnce(&mut MmapMut) -> U) -> U {
        self.pool.with(f)
    }

    /// One sweep now: maps idle since the previous sweep are unmapped (see
    /// [`LocalPool::sweep`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapPool;
    ///
    /// let pool = MmapPool::builder(4096).manual_sweep().build();
    /// drop(pool.get());
    /// pool.sweep();
    /// pool.sweep();
    /// assert_eq!(pool.stats().trimmed, 1);
    /// ```
    pub fn sweep(&self) {
        self.pool.sweep()
    }

    /// Counters since the pool was made (see [`Stats`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapPool;
    ///
    /// let pool = MmapPool::new(4096);
    /// drop(pool.get());
    /// assert_eq!(pool.stats().idle, 1);
    /// ```
    pub fn stats(&self) -> Stats {
        self.pool.stats()
    }

    /// The length of each map, in bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapPool;
    ///
    /// assert_eq!(MmapPool::new(10_000).len(), 10_000);
    /// ```
    #[allow(clippy::len_without_is_empty)] // never empty: `new` refuses zero
    pub fn len(&self) -> usize {
        self.pool.recycler().len
    }
}

impl fmt::Debug for MmapPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MmapPool")
            .field("len", &self.len())
            .field("pool", &self.pool)
            .finish()
    }
}

impl Resource for MmapPool {
    /// The map length.
    type Params = usize;

    fn build(len: usize, knobs: Knobs) -> Self {
        Self {
            pool: knobs.pool(MmapRecycler::new(len)),
        }
    }
}

/// Maps anonymous memory of one length, zeroes returned maps, and drops
/// (unmaps) those of another length.
///
/// The recycler of an [`MmapPool`].
///
/// # Examples
///
/// ```
/// use stashpool::mmap::MmapRecycler;
/// use stashpool::Recycle;
///
/// let recycler = MmapRecycler::new(4096);
/// let mut map = recycler.create();
/// map[0] = 1;
/// assert!(recycler.recycle(&mut map));
/// assert_eq!(map[0], 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmapRecycler {
    len: usize,
}

impl MmapRecycler {
    /// A recycler of maps of `len` bytes.
    ///
    /// # Panics
    ///
    /// As [`MmapPool::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapRecycler;
    ///
    /// let recycler = MmapRecycler::new(1 << 20);
    /// ```
    pub const fn new(len: usize) -> Self {
        fallible::check_len(len, BAD_LEN);
        Self { len }
    }
}

impl Recycle<MmapMut> for MmapRecycler {
    fn create(&self) -> MmapMut {
        MmapMut::map_anon(self.len).unwrap_or_else(|err| {
            panic!(
                "stashpool: cannot map {} bytes of anonymous memory: {err}",
                self.len
            )
        })
    }

    fn recycle(&self, map: &mut MmapMut) -> bool {
        if map.len() != self.len {
            return false;
        }
        // A plain write, not `madvise(MADV_DONTNEED)`: see the module docs.
        map.fill(0);
        true
    }
}

//! `MmapPool`: anonymous maps of one length.

use std::fmt;

use memmap2::MmapMut;

use crate::resource::fallible;
use crate::resource::reset::{self, Wipe};
use crate::resource::sealed::{Contents, Preload, Resource};
use crate::resource::{ResourceBuilder, const_build, object_pool, resource_pool};
use crate::{LocalPool, Pooled, PooledOwned, Recycle, Reset};

const BAD_LEN: &str = "stashpool: an MmapPool map length must be non-zero and at most isize::MAX";

/// A pooled map: goes back to its [`MmapPool`] when dropped, zeroed if it
/// was written through the guard (see [`Pooled::is_written`]) and the
/// pool's policy is [`Reset::Zero`].
pub type PooledMmap<'a> = Pooled<'a, MmapMut, MmapRecycler>;

/// A pooled map that keeps its pool alive, from
/// [`get_owned`](MmapPool::get_owned): [`PooledMmap`] that is `'static`
/// and `Send`.
///
/// # Examples
///
/// ```standalone_crate
/// use std::sync::Arc;
/// use stashpool::mmap::{MmapPool, PooledMmapOwned};
///
/// let pool = Arc::new(MmapPool::new(4096));
/// let map: PooledMmapOwned = pool.get_owned();
/// std::thread::spawn(move || drop(map)).join().unwrap();
/// assert_eq!(pool.stats().returned, 1);
/// ```
pub type PooledMmapOwned = PooledOwned<MmapMut, MmapRecycler, MmapPool>;

/// A pool of anonymous memory maps of one length.
///
/// [`get`](Self::get) hands out an [`MmapMut`] (it dereferences to
/// `[u8]`); the map goes back to the pool when the guard drops. Sweeps
/// unmap maps that stayed idle, as for any [`LocalPool`].
///
/// [`MmapMut`]: https://docs.rs/memmap2/0.9/memmap2/struct.MmapMut.html
///
/// # Contents
///
/// * [`Reset::Zero`] (the default): a map comes out zeroed. The guard
///   records when it first hands out `&mut` access, and a written map is
///   zeroed when it comes back (a `memset` of the map, on
///   pages that stay resident); a map that was only read costs nothing.
/// * [`Reset::Keep`]: nothing is zeroed; a map comes out holding what its
///   last user left, as with Go's `bp`. For code that overwrites what it
///   reads.
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
    /// assert_eq!(MmapPool::new(1 << 20).capacity(), 1 << 20);
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
    /// let pool = MmapPool::builder(1 << 20).max_stashed(2).build();
    /// assert_eq!(pool.get().len(), 1 << 20);
    /// ```
    pub const fn builder(len: usize) -> ResourceBuilder<Self> {
        ResourceBuilder::new(len)
    }

    /// The length of each map, in bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapPool;
    ///
    /// assert_eq!(MmapPool::new(10_000).capacity(), 10_000);
    /// ```
    pub fn capacity(&self) -> usize {
        self.pool.recycler().len
    }

    /// What the pool does to a returned map's contents (see the type docs).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapPool;
    /// use stashpool::Reset;
    ///
    /// let pool = MmapPool::builder(4096).reset(Reset::Keep).build();
    /// assert_eq!(pool.reset(), Reset::Keep);
    /// ```
    pub fn reset(&self) -> Reset {
        self.pool.recycler().reset
    }
}

object_pool!([] MmapPool, MmapMut, MmapRecycler, "stashpool::mmap::MmapPool::new(4096)");

resource_pool!(
    [] MmapPool,
    |this| std::iter::once(&this.pool as &dyn crate::Pool),
    "stashpool::mmap::MmapPool::new(4096)"
);

impl Contents for MmapPool {}

impl fmt::Debug for MmapPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MmapPool")
            .field("capacity", &self.capacity())
            .field("pool", &self.pool)
            .finish()
    }
}

impl Resource for MmapPool {
    /// The map length.
    type Params = usize;
}

impl Preload for MmapPool {}

const_build!(
    [] MmapPool,
    |len, knobs| MmapPool {
        pool: knobs.pool(MmapRecycler {
            reset: knobs.reset,
            ..MmapRecycler::new(len)
        }),
    },
    "stashpool::mmap::MmapPool::builder(4096)",
    "stashpool::mmap::MmapPool"
);

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
    pub(crate) len: usize,
    pub(crate) reset: Reset,
}

impl MmapRecycler {
    /// A recycler of maps of `len` bytes, zeroing written ones
    /// ([`Reset::Zero`]).
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
        Self {
            len,
            reset: Reset::Zero,
        }
    }
}

impl Recycle<MmapMut> for MmapRecycler {
    fn create(&self) -> MmapMut {
        map_anon(self.len)
    }

    fn recycle(&self, map: &mut MmapMut) -> bool {
        reset::recycle(self, self.reset, map, true)
    }

    fn recycle_unwritten(&self, map: &mut MmapMut) -> bool {
        reset::recycle(self, self.reset, map, false)
    }

    fn footprint(&self, map: &MmapMut) -> usize {
        map.len()
    }
}

impl Wipe<MmapMut> for MmapRecycler {
    fn fits(&self, map: &mut MmapMut) -> bool {
        map.len() == self.len
    }

    fn wipe(&self, map: &mut MmapMut) {
        // A plain write, not `madvise(MADV_DONTNEED)`: see the module docs.
        map.fill(0);
    }
}

/// A new anonymous map of `len` bytes.
///
/// # Panics
///
/// If the kernel refuses it.
pub(super) fn map_anon(len: usize) -> MmapMut {
    MmapMut::map_anon(len).unwrap_or_else(|err| {
        panic!("stashpool: cannot map {len} bytes of anonymous memory: {err}")
    })
}

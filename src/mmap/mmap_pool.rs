//! `MmapPool`: anonymous maps of one length.

use std::fmt;

use memmap2::MmapMut;

use crate::resource::fallible;
use crate::resource::reset::{self, Dirty, Tracked, Tracker, Wipe};
use crate::resource::sealed::{Contents, Knobs, Resource};
use crate::resource::{resource_pool, ResourceBuilder};
use crate::{LocalPool, Recycle, Reset};

const BAD_LEN: &str = "stashpool: an MmapPool map length must be non-zero and at most isize::MAX";

/// A pooled map: goes back to its [`MmapPool`] when dropped, zeroed if it
/// was written (see [`Tracked`]) and the pool's policy is [`Reset::Zero`].
pub type PooledMmap<'a> = Tracked<'a, MmapMut, MmapRecycler>;

/// A pool of anonymous memory maps of one length.
///
/// [`get`](Self::get) hands out an [`MmapMut`] (it dereferences to
/// `[u8]`); the map goes back to the pool when the guard drops. Sweeps
/// unmap maps that stayed idle, as for any [`LocalPool`].
///
/// # Contents
///
/// * [`Reset::Zero`] (the default): a map comes out zeroed. The guard
///   marks its map dirty the first time it hands out `&mut` access, and a
///   dirty map is zeroed when it comes back (a `memset` of the map, on
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
    pool: LocalPool<Dirty<MmapMut>, Tracker<MmapRecycler>>,
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
            pool: LocalPool::new(Tracker {
                objects: MmapRecycler::new(len),
                reset: Reset::Zero,
            }),
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

    /// A map from this thread's stash, the shared overflow, or a new
    /// `mmap`: zeroed under [`Reset::Zero`]. It goes back to the pool when
    /// the guard drops.
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
        Tracked::new(self.pool.get())
    }

    /// Runs `f` on a map (as from [`get`](Self::get)), which goes back to the pool after `f`
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
        self.pool.with(|map| reset::with_dirty(map, f))
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
        self.pool.recycler().objects.len
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

resource_pool!(
    [] MmapPool,
    |this| std::iter::once(&this.pool as &dyn crate::Pool),
    "stashpool::mmap::MmapPool::new(4096)"
);

impl Contents for MmapPool {}

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
            pool: knobs.pool(Tracker {
                objects: MmapRecycler::new(len),
                reset: knobs.reset,
            }),
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
        Wipe::create(self)
    }

    fn recycle(&self, map: &mut MmapMut) -> bool {
        reset::wipe_if_fits(self, map)
    }
}

impl Wipe<MmapMut> for MmapRecycler {
    fn create(&self) -> MmapMut {
        map_anon(self.len)
    }

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

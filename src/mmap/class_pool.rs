//! `MmapClassPool`: anonymous maps of varying length, in power-of-two
//! classes.

use std::fmt;

use memmap2::MmapMut;

use super::mmap_pool::{map_anon, MmapPool, PooledMmap};
use crate::resource::classes::{SizeClasses, SizedGuard};
use crate::resource::sealed::{Contents, Knobs, Resource};
use crate::resource::{resource_pool, ResourceBuilder};
use crate::{Reset, Stats};

/// A map from an [`MmapClassPool`]: goes back to its class when dropped
/// (see [`PooledMmap`]), unless it was too large to be pooled.
///
/// Dereferences to [`MmapMut`].
pub type SizedMmap<'a> = SizedGuard<PooledMmap<'a>>;

/// Anonymous maps for requests of varying length, pooled in power-of-two
/// classes (Go's `bp.MultiMmapBytePool`).
///
/// `get(len)` takes a map from the smallest class that holds `len` bytes:
/// its `len()` is that class's size, at least `len` and less than twice
/// it. Each class is an [`MmapPool`] of its own, with the builder's knobs
/// and reset policy (see [`MmapPool`] for what each policy costs). Requests
/// larger than `max_len` are mapped alone and unmapped when the guard
/// drops.
///
/// # Examples
///
/// ```
/// use stashpool::mmap::MmapClassPool;
///
/// let pool = MmapClassPool::new(64 * 1024, 16 << 20);
///
/// let chunk = pool.get(100_000); // from the 128 KiB class
/// assert_eq!(chunk.len(), 128 * 1024);
/// drop(chunk);
/// assert_eq!(pool.get(70_000).len(), 128 * 1024); // the same map again
/// assert_eq!(pool.stats().reused, 1);
/// ```
pub struct MmapClassPool {
    classes: SizeClasses<MmapPool>,
    reset: Reset,
}

impl MmapClassPool {
    /// A pool with a class for every power of two from `min_len` to
    /// `max_len` (each rounded up to a power of two); requests above
    /// `max_len` are not pooled.
    ///
    /// # Panics
    ///
    /// If `min_len` is zero, `min_len > max_len`, or `max_len` is larger
    /// than 2<sup>62</sup> on 64-bit targets.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapClassPool;
    ///
    /// let pool = MmapClassPool::new(4096, 20_000);
    /// assert_eq!(pool.classes().collect::<Vec<_>>(), [4096, 8192, 16384, 32768]);
    /// ```
    pub fn new(min_len: usize, max_len: usize) -> Self {
        Self::builder(min_len, max_len).build()
    }

    /// A builder, to set the core knobs and the reset policy (they apply
    /// to every class).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapClassPool;
    /// use stashpool::Reset;
    ///
    /// let pool = MmapClassPool::builder(4096, 1 << 20)
    ///     .reset(Reset::Keep)
    ///     .max_idle(4)
    ///     .build();
    /// pool.with(5000, |map| map[0] = 9);
    /// assert_eq!(pool.get(5000)[0], 9); // kept
    /// ```
    pub fn builder(min_len: usize, max_len: usize) -> ResourceBuilder<Self> {
        ResourceBuilder::new((min_len, max_len))
    }

    /// A map of at least `len` bytes: from the smallest class that holds
    /// `len` (zeroed under [`Reset::Zero`]), or mapped alone when
    /// `len > max_len`.
    ///
    /// # Panics
    ///
    /// If a new map is needed and the kernel refuses it.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::{MmapClassPool, SizedMmap};
    ///
    /// let pool = MmapClassPool::new(4096, 1 << 20);
    /// let mut map = pool.get(10_000);
    /// assert_eq!(map.len(), 16384);
    /// map[9_999] = 1;
    /// assert!(!SizedMmap::is_pooled(&pool.get(2 << 20)));
    /// ```
    #[inline]
    pub fn get(&self, len: usize) -> SizedMmap<'_> {
        match self.classes.get(len) {
            Some(pool) => SizedGuard::pooled(pool.get()),
            None => SizedGuard::alone(map_anon(len)),
        }
    }

    /// Runs `f` on a map of at least `len` bytes (as from
    /// [`get`](Self::get)), which goes back to its class after `f` returns.
    ///
    /// # Panics
    ///
    /// As [`get`](Self::get).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapClassPool;
    ///
    /// let pool = MmapClassPool::new(4096, 1 << 20);
    /// let len = pool.with(5000, |map| map.len());
    /// assert_eq!(len, 8192);
    /// ```
    #[inline]
    pub fn with<U>(&self, len: usize, f: impl FnOnce(&mut MmapMut) -> U) -> U {
        match self.classes.get(len) {
            Some(pool) => pool.with(f),
            None => f(&mut map_anon(len)),
        }
    }

    /// The counters of the class that serves requests of `len` bytes, or
    /// `None` if such requests are not pooled.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapClassPool;
    ///
    /// let pool = MmapClassPool::new(4096, 1 << 20);
    /// drop(pool.get(5000));
    /// assert_eq!(pool.class_stats(8192).unwrap().idle, 1);
    /// assert!(pool.class_stats(2 << 20).is_none());
    /// ```
    pub fn class_stats(&self, len: usize) -> Option<Stats> {
        self.classes.get(len).map(crate::Pool::stats)
    }

    /// The class sizes, smallest first.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapClassPool;
    ///
    /// let pool = MmapClassPool::new(1 << 16, 1 << 18);
    /// assert_eq!(pool.classes().collect::<Vec<_>>(), [1 << 16, 1 << 17, 1 << 18]);
    /// ```
    pub fn classes(&self) -> impl Iterator<Item = usize> + '_ {
        self.classes.sizes()
    }

    /// The largest request that is pooled.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapClassPool;
    ///
    /// assert_eq!(MmapClassPool::new(4096, 100_000).max_len(), 100_000);
    /// ```
    pub fn max_len(&self) -> usize {
        self.classes.max()
    }

    /// What the pool does to a returned map's contents (see
    /// [`MmapPool`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapClassPool;
    /// use stashpool::Reset;
    ///
    /// assert_eq!(MmapClassPool::new(4096, 8192).reset(), Reset::Zero);
    /// ```
    pub fn reset(&self) -> Reset {
        self.reset
    }
}

resource_pool!(
    [] MmapClassPool,
    |this| this.classes.pools().iter().map(|pool| pool as &dyn crate::Pool),
    "stashpool::mmap::MmapClassPool::new(4096, 1 << 20)"
);

impl Contents for MmapClassPool {}

impl Resource for MmapClassPool {
    /// The smallest and largest pooled lengths.
    type Params = (usize, usize);

    fn build((min_len, max_len): (usize, usize), knobs: Knobs) -> Self {
        Self {
            classes: SizeClasses::new(min_len, max_len, "MmapClassPool", |len| {
                MmapPool::build(len, knobs)
            }),
            reset: knobs.reset,
        }
    }
}

impl fmt::Debug for MmapClassPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MmapClassPool")
            .field("classes", &self.classes().collect::<Vec<_>>())
            .field("max_len", &self.max_len())
            .field("reset", &self.reset)
            .field("stats", &self.stats())
            .finish()
    }
}

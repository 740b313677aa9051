//! `MmapPools`: anonymous maps of varying length, in power-of-two
//! classes.

use std::fmt;

use memmap2::MmapMut;

use super::mmap_pool::{map_anon, MmapRecycler, PooledMmap};
use crate::resource::classes::{class_pool, SizeClasses};
use crate::resource::sealed::{Contents, Knobs, Resource};
use crate::resource::ResourceBuilder;
use crate::Reset;

const BAD_CLASSES: &str = "stashpool: MmapPools: the smallest class must be non-zero, \
     at most the largest, and the largest at most 2^(usize::BITS - 2) bytes";

/// A map from an [`MmapPools`]: goes back to its class when dropped
/// (see [`PooledMmap`]), unless it was too large to be pooled.
///
/// Dereferences to [`MmapMut`].
///
/// [`MmapMut`]: https://docs.rs/memmap2/0.9/memmap2/struct.MmapMut.html
pub type SizedMmap<'a> = crate::SizedGuard<PooledMmap<'a>>;

/// Anonymous maps for requests of varying length, pooled in power-of-two
/// classes (Go's `bp.MultiMmapBytePool`): one [`MmapPool`](super::MmapPool)
/// per length.
///
/// `get(len)` takes a map from the smallest class that holds `len` bytes:
/// its `len()` is that class's size, at least `len` and less than twice
/// it. Each class is a pool of its own, made on first use, with the
/// builder's knobs and reset policy (see [`MmapPool`](super::MmapPool) for
/// what each policy costs). Requests larger than
/// [`max_capacity`](Self::max_capacity) are mapped alone and unmapped when
/// the guard drops.
///
/// # Examples
///
/// ```
/// use stashpool::mmap::MmapPools;
///
/// let pool = MmapPools::new(64 * 1024, 16 << 20);
///
/// let chunk = pool.get(100_000); // from the 128 KiB class
/// assert_eq!(chunk.len(), 128 * 1024);
/// drop(chunk);
/// assert_eq!(pool.get(70_000).len(), 128 * 1024); // the same map again
/// assert_eq!(pool.stats().reused, 1);
/// ```
pub struct MmapPools {
    classes: SizeClasses<MmapMut, MmapRecycler>,
    reset: Reset,
}

impl MmapPools {
    /// A pool with a class for every power of two from `min` to `max`
    /// bytes (each rounded up to a power of two); requests above `max` are
    /// not pooled.
    ///
    /// `const`, so a pool can be a `static`; the classes are made on first
    /// use.
    ///
    /// # Panics
    ///
    /// If `min` is zero, `min > max`, or `max` is larger than
    /// 2<sup>62</sup> on 64-bit targets.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapPools;
    ///
    /// let pool = MmapPools::new(4096, 20_000);
    /// assert_eq!(pool.classes().collect::<Vec<_>>(), [4096, 8192, 16384, 32768]);
    /// ```
    pub const fn new(min: usize, max: usize) -> Self {
        Self::with_knobs((min, max), Knobs::DEFAULT)
    }

    /// A builder, to set the core knobs and the reset policy (they apply
    /// to every class).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapPools;
    /// use stashpool::Reset;
    ///
    /// let pool = MmapPools::builder(4096, 1 << 20)
    ///     .reset(Reset::Keep)
    ///     .max_idle(4)
    ///     .build();
    /// pool.with(5000, |map| map[0] = 9);
    /// assert_eq!(pool.get(5000)[0], 9); // kept
    /// ```
    pub fn builder(min: usize, max: usize) -> ResourceBuilder<Self> {
        ResourceBuilder::new((min, max))
    }

    const fn with_knobs((min, max): (usize, usize), knobs: Knobs) -> Self {
        Self {
            classes: SizeClasses::new(min, max, knobs, class_recycler, BAD_CLASSES),
            reset: knobs.reset,
        }
    }

    /// What the pool does to a returned map's contents (see
    /// [`MmapPool`](super::MmapPool)).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::mmap::MmapPools;
    /// use stashpool::Reset;
    ///
    /// assert_eq!(MmapPools::new(4096, 8192).reset(), Reset::Zero);
    /// ```
    pub fn reset(&self) -> Reset {
        self.reset
    }
}

/// The recycler of a class: maps of the class's length, under the pool's
/// reset policy.
fn class_recycler(len: usize, reset: Reset) -> MmapRecycler {
    MmapRecycler {
        reset,
        ..MmapRecycler::new(len)
    }
}

class_pool!(
    MmapPools,
    MmapMut,
    MmapRecycler,
    map_anon,
    |map: &MmapMut| map.len(),
    "stashpool::mmap::MmapPools::new(4096, 1 << 20)"
);

impl Contents for MmapPools {}

impl Resource for MmapPools {
    type Params = (usize, usize);

    fn build(params: (usize, usize), knobs: Knobs) -> Self {
        Self::with_knobs(params, knobs)
    }
}

impl fmt::Debug for MmapPools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MmapPools")
            .field("classes", &self.classes().collect::<Vec<_>>())
            .field("max_capacity", &self.max_capacity())
            .field("reset", &self.reset)
            .field("stats", &self.stats())
            .finish()
    }
}

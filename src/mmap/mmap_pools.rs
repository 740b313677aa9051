//! `MmapPools`: anonymous maps of varying length, in power-of-two
//! classes.

use memmap2::MmapMut;

use super::mmap_pool::{MmapRecycler, PooledMmap, map_anon};
use crate::Reset;
use crate::resource::classes::{SizeClasses, class_pool};
use crate::resource::sealed::Contents;

const BAD_CLASSES: &str = "stashpool: MmapPools: the smallest class must be non-zero, \
     at most the largest, and the largest at most 2^(usize::BITS - 2) bytes";

/// A map from an [`MmapPools`]: goes back to its class when dropped
/// (see [`PooledMmap`]), unless it was too large to be pooled.
///
/// Dereferences to [`MmapMut`].
///
/// [`MmapMut`]: https://docs.rs/memmap2/0.9/memmap2/struct.MmapMut.html
pub type SizedMmap<'a> = crate::SizedGuard<PooledMmap<'a>>;

/// A map from an [`MmapPools`] in an `Arc`, from
/// [`get_owned`](MmapPools::get_owned): [`SizedMmap`] that keeps the pool
/// alive, so `'static` and `Send`.
///
/// # Examples
///
/// ```standalone_crate
/// use std::sync::Arc;
/// use stashpool::mmap::{MmapPools, SizedMmapOwned};
///
/// let pool = Arc::new(MmapPools::new(4096, 1 << 20));
/// let map: SizedMmapOwned = pool.get_owned(10_000);
/// std::thread::spawn(move || drop(map)).join().unwrap();
/// assert_eq!(pool.stats().returned, 1);
/// ```
pub type SizedMmapOwned = crate::SizedGuard<crate::PooledOwned<MmapMut, MmapRecycler, MmapPools>>;

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
}

impl MmapPools {
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
        self.classes.knobs().reset
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
    // One class per power of two: a map is whole pages.
    0,
    class_recycler,
    BAD_CLASSES,
    map_anon,
    |map: &MmapMut| map.len(),
    "stashpool::mmap::MmapPools"
);

impl Contents for MmapPools {}

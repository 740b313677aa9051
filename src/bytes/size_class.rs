//! `SizeClassPool`: byte buffers in power-of-two size classes, one pool per
//! class, for callers whose buffer sizes vary.

use std::fmt;

use super::{BufferRecycler, PooledBuffer};
use crate::resource::classes::{SizeClasses, SizedGuard};
use crate::resource::fallible;
use crate::resource::sealed::{Knobs, Resource};
use crate::resource::{resource_pool, ResourceBuilder};
use crate::{LocalPool, Stats};

/// The largest class a [`SizeClassPool`] may have: the largest power of two
/// a `Vec<u8>` can hold.
pub const MAX_CLASS: usize = crate::resource::classes::MAX_CLASS;

/// Byte buffers for requests of varying size, pooled in power-of-two size
/// classes.
///
/// `get(len)` takes a buffer from the smallest class that holds `len`
/// bytes, so a buffer never has less than `len` nor much more than twice
/// `len` bytes of room. Each class is a [`LocalPool`] of its own; a guard
/// returns its buffer to the class it came from. A buffer that grew into a
/// larger class, or shrank below its own, is dropped on return rather than
/// kept in a class where it does not belong. Requests larger than `max` get
/// a plain allocation that is dropped, not pooled, when the guard drops.
///
/// Returned buffers are cleared, as in a [`BytePool`](super::BytePool).
///
/// # Examples
///
/// ```
/// use stashpool::bytes::SizeClassPool;
///
/// let pool = SizeClassPool::new(512, 64 * 1024);
///
/// let small = pool.get(100); // from the 512-byte class
/// assert!(small.capacity() >= 512);
/// let medium = pool.get(3000); // from the 4096-byte class
/// assert!((3000..8192).contains(&medium.capacity()));
/// let huge = pool.get(1 << 20); // larger than max: not pooled
/// assert!(huge.capacity() >= 1 << 20);
/// ```
pub struct SizeClassPool {
    classes: SizeClasses<LocalPool<Vec<u8>, BufferRecycler>>,
}

impl SizeClassPool {
    /// A pool with a class for every power of two from `min` to `max`
    /// (each rounded up to a power of two); requests above `max` are not
    /// pooled.
    ///
    /// # Panics
    ///
    /// If `min` is zero, `min > max`, or `max > MAX_CLASS` (2<sup>62</sup>
    /// on 64-bit targets).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::SizeClassPool;
    ///
    /// let pool = SizeClassPool::new(100, 1000); // classes 128 to 1024
    /// assert_eq!(pool.classes().collect::<Vec<_>>(), [128, 256, 512, 1024]);
    /// ```
    pub fn new(min: usize, max: usize) -> Self {
        Self::builder(min, max).build()
    }

    /// A builder, to set the core knobs (they apply to every class).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::SizeClassPool;
    ///
    /// let pool = SizeClassPool::builder(64, 4096).local_capacity(8).build();
    /// pool.with(10, |buf| buf.push(1));
    /// ```
    pub fn builder(min: usize, max: usize) -> ResourceBuilder<Self> {
        ResourceBuilder::new(SizeClassParams { min, max })
    }

    /// An empty buffer with room for at least `len` bytes: from the
    /// smallest class that holds `len`, or a plain allocation when
    /// `len > max`. The guard gives a pooled buffer back to its class,
    /// cleared, when it drops.
    ///
    /// # Panics
    ///
    /// If the buffer cannot be allocated, for example when `len` is larger
    /// than `isize::MAX`. It panics rather than aborts, so the caller can
    /// catch it.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::SizeClassPool;
    ///
    /// let pool = SizeClassPool::new(64, 1024);
    /// let mut buf = pool.get(200);
    /// assert!(buf.is_empty());
    /// assert_eq!(buf.capacity(), 256);
    /// buf.extend_from_slice(&[7; 200]);
    /// ```
    pub fn get(&self, len: usize) -> SizedBuffer<'_> {
        match self.classes.get(len) {
            Some(pool) => SizedGuard::pooled(pool.get()),
            None => SizedGuard::alone(fallible::with_capacity(len)),
        }
    }

    /// Runs `f` on a buffer with room for `len` bytes (as from
    /// [`get`](Self::get)), which goes back to its class after `f` returns.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::SizeClassPool;
    ///
    /// let pool = SizeClassPool::new(64, 1024);
    /// let sum: u32 = pool.with(300, |buf| {
    ///     buf.extend((0..300).map(|i| i as u8));
    ///     buf.iter().map(|&b| b as u32).sum()
    /// });
    /// assert!(sum > 0);
    /// ```
    pub fn with<U>(&self, len: usize, f: impl FnOnce(&mut Vec<u8>) -> U) -> U {
        match self.classes.get(len) {
            Some(pool) => pool.with(f),
            None => f(&mut fallible::with_capacity(len)),
        }
    }

    /// The counters of the class that serves requests of `len` bytes, or
    /// `None` if such requests are not pooled.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::SizeClassPool;
    ///
    /// let pool = SizeClassPool::new(64, 1024);
    /// drop(pool.get(100));
    /// assert_eq!(pool.class_stats(128).unwrap().idle, 1);
    /// assert_eq!(pool.class_stats(64).unwrap().idle, 0);
    /// assert!(pool.class_stats(2000).is_none());
    /// ```
    pub fn class_stats(&self, len: usize) -> Option<Stats> {
        self.classes.get(len).map(crate::Pool::stats)
    }

    /// The class sizes, smallest first.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::SizeClassPool;
    ///
    /// let pool = SizeClassPool::new(1024, 4096);
    /// assert_eq!(pool.classes().collect::<Vec<_>>(), [1024, 2048, 4096]);
    /// ```
    pub fn classes(&self) -> impl Iterator<Item = usize> + '_ {
        self.classes.sizes()
    }

    /// The largest request that is pooled.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::SizeClassPool;
    ///
    /// assert_eq!(SizeClassPool::new(64, 1000).max(), 1000);
    /// ```
    pub fn max(&self) -> usize {
        self.classes.max()
    }
}

resource_pool!(
    [] SizeClassPool,
    |this| this.classes.pools().iter().map(|pool| pool as &dyn crate::Pool),
    "stashpool::bytes::SizeClassPool::new(64, 1024)"
);

impl fmt::Debug for SizeClassPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SizeClassPool")
            .field("classes", &self.classes().collect::<Vec<_>>())
            .field("max", &self.max())
            .field("stats", &self.stats())
            .finish()
    }
}

/// A [`SizeClassPool`]'s parameters, as given to its builder.
#[derive(Clone, Copy, Debug)]
pub struct SizeClassParams {
    min: usize,
    max: usize,
}

impl Resource for SizeClassPool {
    type Params = SizeClassParams;

    fn build(SizeClassParams { min, max }: SizeClassParams, knobs: Knobs) -> Self {
        // A buffer that grew into the next class is dropped (it would waste
        // half its memory here); one that shrank below its class can no
        // longer serve its requests.
        let classes = SizeClasses::new(min, max, "SizeClassPool", |size| {
            knobs.pool(BufferRecycler::new(size, 2 * size - 1))
        });
        Self { classes }
    }
}

/// A buffer from a [`SizeClassPool`]: goes back to its size class, cleared,
/// when dropped, unless it was too large to be pooled.
///
/// Dereferences to `Vec<u8>`.
///
/// # Examples
///
/// ```
/// use std::io::Write;
/// use stashpool::bytes::{SizeClassPool, SizedBuffer};
///
/// let pool = SizeClassPool::new(64, 1024);
/// let mut buf = pool.get(100);
/// write!(buf, "{}", 42).unwrap();
/// assert!(SizedBuffer::is_pooled(&buf));
/// let kept: Vec<u8> = SizedBuffer::into_inner(buf); // leaves the pool
/// assert_eq!(kept, b"42");
/// ```
pub type SizedBuffer<'a> = SizedGuard<PooledBuffer<'a>>;

//! `BufferPool`: growable byte and text buffers, cleared on return and
//! dropped when they grew too large.

use std::fmt;

use crate::resource::fallible;
use crate::resource::sealed::{Knobs, Preload, Resource, Token};
use crate::resource::{ResourceBuilder, const_build, object_pool, resource_pool};
use crate::{LocalPool, Pooled, PooledOwned, Recycle};

/// By default a buffer may grow to this many times the pool's `capacity`
/// and still be pooled; one that grew past it is dropped on return.
///
/// Large enough that a buffer sized for the common case can absorb the
/// occasional bigger message and be reused, small enough that one huge
/// message cannot pin its memory in the pool (Go issue 23199: a
/// `sync.Pool` of buffers that once held a 100 MB message keeps 100 MB per
/// pooled buffer). Set another bound with
/// [`ResourceBuilder::max_capacity`].
pub const DEFAULT_MAX_CAPACITY_FACTOR: usize = 8;

/// A growable buffer a [`BufferPool`] can pool: `Vec<u8>` or `String`.
///
/// Sealed: the pool relies on how these two types clear and report their
/// capacity.
pub trait Buffer: Sized + Send + 'static {
    /// An empty buffer with room for at least `capacity` bytes; panics
    /// (never aborts) if it cannot be allocated.
    #[doc(hidden)]
    fn alloc(capacity: usize, _: Token) -> Self;
    #[doc(hidden)]
    fn clear(&mut self, _: Token);
    #[doc(hidden)]
    fn capacity(&self, _: Token) -> usize;
}

impl Buffer for Vec<u8> {
    fn alloc(capacity: usize, _: Token) -> Self {
        fallible::with_capacity(capacity)
    }

    fn clear(&mut self, _: Token) {
        Vec::clear(self)
    }

    fn capacity(&self, _: Token) -> usize {
        Vec::capacity(self)
    }
}

impl Buffer for String {
    fn alloc(capacity: usize, _: Token) -> Self {
        // An empty byte vector is valid UTF-8.
        String::from_utf8(fallible::with_capacity(capacity)).unwrap_or_default()
    }

    fn clear(&mut self, _: Token) {
        String::clear(self)
    }

    fn capacity(&self, _: Token) -> usize {
        String::capacity(self)
    }
}

/// Makes buffers of a set capacity; clears returned ones and refuses those
/// whose capacity left `capacity..=max_capacity`.
///
/// The recycler of every [`BufferPool`], and of each size class of a
/// [`BytePools`](super::BytePools). A buffer that shrank (say its
/// user called `shrink_to_fit` or swapped in an empty one) is refused too,
/// so that every buffer a pool hands out has at least `capacity` bytes of
/// room.
///
/// # Examples
///
/// ```
/// use stashpool::bytes::BufferRecycler;
/// use stashpool::Recycle;
///
/// let recycler = BufferRecycler::new(16, 64);
/// let mut buf: Vec<u8> = recycler.create();
/// buf.extend_from_slice(b"secret");
/// assert!(recycler.recycle(&mut buf));
/// assert!(buf.is_empty());
///
/// buf.reserve(100); // grew past 64 bytes
/// assert!(!recycler.recycle(&mut buf));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferRecycler {
    capacity: usize,
    max_capacity: usize,
}

impl BufferRecycler {
    /// A recycler of buffers made with `capacity` bytes of room and kept
    /// while their capacity stays within `capacity..=max_capacity`.
    ///
    /// # Panics
    ///
    /// If `capacity > isize::MAX` (no such buffer exists), if
    /// `max_capacity < capacity`, or if both are zero (buffers that may
    /// never grow and have no room are not worth pooling).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::BufferRecycler;
    ///
    /// let recycler = BufferRecycler::new(4096, 1 << 20);
    /// assert_eq!(recycler.max_capacity(), 1 << 20);
    /// ```
    pub const fn new(capacity: usize, max_capacity: usize) -> Self {
        if capacity > fallible::MAX_LEN {
            panic!("stashpool: a buffer capacity must be at most isize::MAX bytes");
        }
        if max_capacity < capacity {
            panic!("stashpool: max_capacity must be at least capacity");
        }
        if max_capacity == 0 {
            panic!(
                "stashpool: buffers of capacity 0 need a non-zero max_capacity to be worth pooling"
            );
        }
        Self {
            capacity,
            max_capacity,
        }
    }

    /// The recycler a pool gets by default: `max_capacity` is
    /// [`DEFAULT_MAX_CAPACITY_FACTOR`] times `capacity`.
    pub(crate) const fn with_default_max(capacity: usize) -> Self {
        let max = capacity.saturating_mul(DEFAULT_MAX_CAPACITY_FACTOR);
        let max = if max > fallible::MAX_LEN {
            fallible::MAX_LEN
        } else {
            max
        };
        Self::new(capacity, max)
    }

    /// The room a new buffer has, in bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::BufferRecycler;
    ///
    /// assert_eq!(BufferRecycler::new(512, 1024).capacity(), 512);
    /// ```
    pub const fn capacity(&self) -> usize {
        self.capacity
    }

    /// The largest capacity a returned buffer may have and still be kept.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::BufferRecycler;
    ///
    /// assert_eq!(BufferRecycler::new(512, 1024).max_capacity(), 1024);
    /// ```
    pub const fn max_capacity(&self) -> usize {
        self.max_capacity
    }
}

impl<B: Buffer> Recycle<B> for BufferRecycler {
    fn create(&self) -> B {
        B::alloc(self.capacity, Token)
    }

    fn recycle(&self, buf: &mut B) -> bool {
        if !(self.capacity..=self.max_capacity).contains(&Buffer::capacity(buf, Token)) {
            return false;
        }
        // What a user wrote is now past `len`, out of reach of safe code.
        Buffer::clear(buf, Token);
        true
    }

    fn footprint(&self, buf: &B) -> usize {
        Buffer::capacity(buf, Token)
    }
}

/// A pooled buffer: goes back to its pool, cleared, when dropped.
///
/// `PooledBuffer<'_>` is a pooled `Vec<u8>` (which implements
/// [`io::Write`](std::io::Write)), `PooledBuffer<'_, String>` a pooled
/// `String` (which implements [`fmt::Write`]).
pub type PooledBuffer<'a, B = Vec<u8>> = Pooled<'a, B, BufferRecycler>;

/// A pooled buffer that keeps its pool alive, from
/// [`get_owned`](BufferPool::get_owned): [`PooledBuffer`] that is
/// `'static` and `Send`, to move to another thread or task.
///
/// `PooledBufferOwned` is an owned `Vec<u8>` from a [`BytePool`],
/// `PooledBufferOwned<String>` an owned `String` from a [`StringPool`].
///
/// # Examples
///
/// ```standalone_crate
/// use std::sync::Arc;
/// use stashpool::bytes::{BytePool, PooledBufferOwned};
///
/// let pool = Arc::new(BytePool::new(1024));
/// let mut buf: PooledBufferOwned = pool.get_owned();
/// buf.extend_from_slice(b"sent");
/// let len = std::thread::spawn(move || buf.len()).join().unwrap();
/// assert_eq!((len, pool.stats().returned), (4, 1));
/// ```
pub type PooledBufferOwned<B = Vec<u8>> = PooledOwned<B, BufferRecycler, BufferPool<B>>;

/// A pool of `Vec<u8>` byte buffers, for writing into: see [`BufferPool`].
///
/// A buffer comes out with `len() == 0`, so `Read::read` into it reads
/// nothing: to read into a pooled buffer, take a full-length chunk from a
/// [`ChunkPool`](super::ChunkPool), or, with the `bytes` feature, read
/// into its spare capacity through `bytes::BufMut`, as tokio's
/// `read_buf(&mut guard)` does.
///
/// # Examples
///
/// ```
/// use std::io::Write;
/// use stashpool::bytes::BytePool;
///
/// static BUFS: BytePool = BytePool::new(4096);
///
/// let mut buf = BUFS.get();
/// write!(buf, "GET /{} HTTP/1.1\r\n", "index.html").unwrap();
/// assert!(buf.starts_with(b"GET /index.html"));
/// ```
pub type BytePool = BufferPool<Vec<u8>>;

/// A pool of `String` text buffers: see [`BufferPool`].
///
/// # Examples
///
/// ```
/// use std::fmt::Write;
/// use stashpool::bytes::StringPool;
///
/// static TEXT: StringPool = StringPool::new(256);
///
/// let line = TEXT.with(|s| {
///     write!(s, "{}={}", "retries", 3).unwrap();
///     s.len()
/// });
/// assert_eq!(line, 9);
/// ```
pub type StringPool = BufferPool<String>;

/// A pool of growable buffers ([`BytePool`] of `Vec<u8>`, [`StringPool`] of
/// `String`), each with room for at least `capacity` bytes.
///
/// A buffer comes out empty (`len() == 0`), for writing into (`write!`,
/// `extend_from_slice`, `push_str`), and goes back cleared, so what one
/// user wrote cannot be read by the next through the safe API (it lies
/// beyond `len`, in spare capacity). A `Read::read` into an empty buffer
/// reads nothing: reads go into a full-length chunk from a
/// [`ChunkPool`](super::ChunkPool). A buffer may grow while in use; on
/// return it is pooled again only if its capacity is at most
/// [`max_capacity`](Self::max_capacity) (by default
/// [`DEFAULT_MAX_CAPACITY_FACTOR`] times `capacity`), so one huge message
/// cannot pin its memory in the pool.
///
/// Built on [`LocalPool`]: per-thread stashes over a shared overflow,
/// trimmed by sweeps.
///
/// # Examples
///
/// ```
/// use stashpool::bytes::BytePool;
///
/// let pool = BytePool::builder(1024).max_capacity(4096).manual_sweep().build();
///
/// let mut buf = pool.get();
/// buf.extend_from_slice(b"hello");
/// drop(buf);
/// assert!(pool.get().is_empty()); // the same buffer, cleared
///
/// pool.with(|buf| buf.resize(10_000, 0)); // grew past max_capacity...
/// assert_eq!(pool.stats().discarded, 1); // ...so it was dropped
/// ```
pub struct BufferPool<B: Buffer> {
    pool: LocalPool<B, BufferRecycler>,
}

impl<B: Buffer> BufferPool<B> {
    /// A pool of buffers with room for at least `capacity` bytes, kept while
    /// they stay within [`DEFAULT_MAX_CAPACITY_FACTOR`] times that.
    ///
    /// `const`, so a pool can be a `static`.
    ///
    /// # Panics
    ///
    /// If `capacity` is zero (use [`builder`](Self::builder) with a
    /// `max_capacity` to pool buffers that start empty) or larger than
    /// `isize::MAX`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::BytePool;
    ///
    /// let pool = BytePool::new(4096);
    /// assert_eq!(pool.max_capacity(), 8 * 4096);
    /// ```
    pub const fn new(capacity: usize) -> Self {
        Self::from_recycler(BufferRecycler::with_default_max(capacity))
    }

    /// A pool with the default knobs that makes buffers with `recycler`.
    pub(crate) const fn from_recycler(recycler: BufferRecycler) -> Self {
        Self {
            pool: LocalPool::new(recycler),
        }
    }

    /// A pool with these knobs that makes buffers with `recycler`.
    pub(crate) const fn with_knobs(recycler: BufferRecycler, knobs: Knobs) -> Self {
        Self {
            pool: knobs.pool(recycler),
        }
    }

    /// A builder, to set [`max_capacity`](ResourceBuilder::max_capacity) or
    /// the core knobs.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::StringPool;
    ///
    /// // Strings that start empty and are kept up to 1 KiB.
    /// let pool = StringPool::builder(0).max_capacity(1024).build();
    /// pool.with(|s| s.push_str("grows on first use"));
    /// assert!(pool.get().capacity() >= 18);
    /// ```
    pub const fn builder(capacity: usize) -> ResourceBuilder<Self> {
        ResourceBuilder::new(BufferParams {
            capacity,
            max_capacity: None,
        })
    }

    /// The room every buffer handed out has, in bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::BytePool;
    ///
    /// assert_eq!(BytePool::new(100).capacity(), 100);
    /// ```
    pub fn capacity(&self) -> usize {
        self.pool.recycler().capacity()
    }

    /// The largest capacity a returned buffer may have and still be pooled.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::BytePool;
    ///
    /// let pool = BytePool::builder(100).max_capacity(150).build();
    /// assert_eq!(pool.max_capacity(), 150);
    /// ```
    pub fn max_capacity(&self) -> usize {
        self.pool.recycler().max_capacity()
    }
}

object_pool!([B: Buffer] BufferPool<B>, B, BufferRecycler, "stashpool::bytes::BytePool::new(64)");

resource_pool!(
    [B: Buffer] BufferPool<B>,
    |this| std::iter::once(&this.pool as &dyn crate::Pool),
    "stashpool::bytes::BytePool::new(64)"
);

impl<B: Buffer> fmt::Debug for BufferPool<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferPool")
            .field("capacity", &self.capacity())
            .field("max_capacity", &self.max_capacity())
            .field("pool", &self.pool)
            .finish()
    }
}

// === impl ResourceBuilder ===

/// A [`BufferPool`]'s parameters, as given to its builder.
#[derive(Clone, Copy, Debug)]
pub struct BufferParams {
    capacity: usize,
    max_capacity: Option<usize>,
}

impl<B: Buffer> ResourceBuilder<BufferPool<B>> {
    /// Buffers that grew past `n` bytes of capacity are dropped on return,
    /// not pooled (default: [`DEFAULT_MAX_CAPACITY_FACTOR`] times the
    /// pool's capacity).
    ///
    /// [`build`](Self::build) panics if `n` is smaller than the capacity.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::BytePool;
    ///
    /// let pool = BytePool::builder(64).max_capacity(64).manual_sweep().build();
    /// pool.with(|buf| buf.extend_from_slice(&[0; 65])); // had to grow
    /// assert_eq!(pool.stats().idle, 0);
    /// ```
    pub const fn max_capacity(mut self, n: usize) -> Self {
        self.params.max_capacity = Some(n);
        self
    }
}

impl<B: Buffer> Resource for BufferPool<B> {
    type Params = BufferParams;
}

impl<B: Buffer> Preload for BufferPool<B> {}

const_build!(
    [B: Buffer] BufferPool<B>,
    |params, knobs| {
        let recycler = match params.max_capacity {
            Some(max) => BufferRecycler::new(params.capacity, max),
            None => BufferRecycler::with_default_max(params.capacity),
        };
        BufferPool::with_knobs(recycler, knobs)
    },
    "stashpool::bytes::BytePool::builder(4096)",
    "stashpool::bytes::BytePool"
);

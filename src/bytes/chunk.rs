//! `ChunkPool`: byte buffers of one length, handed out full length, to
//! read into.

use std::fmt;

use crate::resource::fallible;
use crate::resource::reset::{self, Wipe};
use crate::resource::sealed::{Contents, Preload, Resource};
use crate::resource::{ResourceBuilder, const_build, object_pool, resource_pool};
use crate::{LocalPool, Pooled, PooledOwned, Recycle, Reset};

const BAD_LEN: &str = "stashpool: a ChunkPool chunk length must be non-zero and at most isize::MAX";

/// A pooled chunk: goes back to its [`ChunkPool`] when dropped, zeroed if
/// it was written through the guard (see [`Pooled::is_written`]) and the
/// pool's policy is [`Reset::Zero`].
pub type PooledChunk<'a> = Pooled<'a, Box<[u8]>, ChunkRecycler>;

/// A pooled chunk that keeps its pool alive, from
/// [`get_owned`](ChunkPool::get_owned): [`PooledChunk`] that is `'static`
/// and `Send`, to move to another thread or task.
///
/// # Examples
///
/// ```standalone_crate
/// use std::sync::Arc;
/// use stashpool::bytes::{ChunkPool, PooledChunkOwned};
///
/// let pool = Arc::new(ChunkPool::new(4096));
/// let chunk: PooledChunkOwned = pool.get_owned();
/// std::thread::spawn(move || assert_eq!(chunk.len(), 4096)).join().unwrap();
/// assert_eq!(pool.stats().returned, 1);
/// ```
pub type PooledChunkOwned = PooledOwned<Box<[u8]>, ChunkRecycler, ChunkPool>;

/// A pool of byte buffers of one length, handed out at full length, to
/// read into (Go's `bp.BytePool`, whose `Get` returns a slice of its full
/// size).
///
/// `Read::read` fills the slice it is given, up to the slice's length: a
/// [`BytePool`](super::BytePool) buffer, which comes out empty for writing
/// into, reads nothing. A chunk is a `Box<[u8]>` of
/// [`capacity`](Self::capacity) bytes, zeroed once, when it is made (by
/// the allocator's zeroed allocation, which for a large chunk hands out
/// fresh pages that the kernel zeroes as they are first touched), so a
/// read loop passes it to `read` as it comes:
///
/// ```
/// use std::io::Read;
/// use stashpool::bytes::ChunkPool;
/// use stashpool::Reset;
///
/// static CHUNKS: ChunkPool = ChunkPool::builder(32 * 1024).reset(Reset::Keep).build();
///
/// fn checksum(mut file: impl Read) -> std::io::Result<u64> {
///     let mut sum = 0;
///     loop {
///         let mut chunk = CHUNKS.get();
///         let n = file.read(&mut chunk)?;
///         if n == 0 {
///             return Ok(sum);
///         }
///         sum += chunk[..n].iter().map(|&b| u64::from(b)).sum::<u64>();
///     }
/// }
///
/// assert_eq!(checksum(&[1u8; 100_000][..]).unwrap(), 100_000);
/// assert_eq!(CHUNKS.stats().created, 1);
/// ```
///
/// With the `bytes` feature, a chunk read into becomes a `bytes::Bytes`
/// of what was read, with no copy: `chunk.freeze(n)` on an owned chunk
/// (or a `static` pool's), which goes back to the pool when the last clone
/// drops.
///
/// # Contents
///
/// * [`Reset::Zero`] (the default): a chunk comes out zeroed. The guard
///   records when it first hands out `&mut` access, and a written chunk is
///   zeroed when it comes back, by the thread that drops it (the guard, or
///   the last `Bytes` clone: in a tokio server, the runtime worker that
///   drops it): a `memset` of the chunk per use, which is what a `resize`
///   of an empty buffer costs. A chunk only read costs nothing.
/// * [`Reset::Keep`], for `bp`'s behaviour: nothing is zeroed after a chunk
///   is made, so **the next user sees the bytes the last one left**. For
///   code that uses only the bytes a read returned (`&chunk[..n]`), which
///   saves the `memset` of every use.
///
/// A chunk swapped into a guard through `DerefMut` is pooled in place of
/// the original if it has the pool's length; one of another length is
/// dropped on return.
///
/// # Examples
///
/// ```
/// use stashpool::bytes::ChunkPool;
/// use stashpool::Reset;
///
/// let pool = ChunkPool::builder(8).reset(Reset::Keep).manual_sweep().build();
/// pool.get().copy_from_slice(b"previous");
/// assert_eq!(&pool.get()[..], b"previous"); // the same chunk, as it was left
///
/// let zeroing = ChunkPool::new(8);
/// zeroing.get().copy_from_slice(b"previous");
/// assert_eq!(&zeroing.get()[..], [0; 8]); // the same chunk, zeroed
/// ```
pub struct ChunkPool {
    pool: LocalPool<Box<[u8]>, ChunkRecycler>,
}

impl ChunkPool {
    /// A pool of chunks of `len` bytes, zeroed on return when written
    /// ([`Reset::Zero`]; see the type docs).
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
    /// use stashpool::bytes::ChunkPool;
    ///
    /// static CHUNKS: ChunkPool = ChunkPool::new(64 * 1024);
    /// assert_eq!(CHUNKS.get().len(), 64 * 1024);
    /// ```
    pub const fn new(len: usize) -> Self {
        Self {
            pool: LocalPool::new(ChunkRecycler::new(len)),
        }
    }

    /// A builder, to set the reset policy or the core knobs.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::ChunkPool;
    /// use stashpool::Reset;
    ///
    /// let pool = ChunkPool::builder(4096).reset(Reset::Keep).max_idle(64).build();
    /// assert_eq!(pool.reset(), Reset::Keep);
    /// ```
    pub const fn builder(len: usize) -> ResourceBuilder<Self> {
        ResourceBuilder::new(len)
    }

    /// The length of each chunk, in bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::ChunkPool;
    ///
    /// assert_eq!(ChunkPool::new(1500).capacity(), 1500);
    /// ```
    pub fn capacity(&self) -> usize {
        self.pool.recycler().len
    }

    /// What the pool does to a returned chunk's contents (see the type
    /// docs).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::ChunkPool;
    /// use stashpool::Reset;
    ///
    /// assert_eq!(ChunkPool::new(1500).reset(), Reset::Zero);
    /// ```
    pub fn reset(&self) -> Reset {
        self.pool.recycler().reset
    }
}

object_pool!([] ChunkPool, Box<[u8]>, ChunkRecycler, "stashpool::bytes::ChunkPool::new(64)");

resource_pool!(
    [] ChunkPool,
    |this| std::iter::once(&this.pool as &dyn crate::Pool),
    "stashpool::bytes::ChunkPool::new(64)"
);

impl Contents for ChunkPool {}

impl fmt::Debug for ChunkPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChunkPool")
            .field("capacity", &self.capacity())
            .field("reset", &self.reset())
            .field("pool", &self.pool)
            .finish()
    }
}

impl Resource for ChunkPool {
    /// The chunk length.
    type Params = usize;
}

impl Preload for ChunkPool {}

const_build!(
    [] ChunkPool,
    |len, knobs| ChunkPool {
        pool: knobs.pool(ChunkRecycler {
            reset: knobs.reset,
            ..ChunkRecycler::new(len)
        }),
    },
    "stashpool::bytes::ChunkPool::builder(4096)",
    "stashpool::bytes::ChunkPool"
);

/// Makes zeroed chunks of one length, zeroes returned ones that were
/// written (under [`Reset::Zero`]), and drops those of another length.
///
/// The recycler of a [`ChunkPool`].
///
/// # Examples
///
/// ```
/// use stashpool::bytes::ChunkRecycler;
/// use stashpool::Recycle;
///
/// let recycler = ChunkRecycler::new(16);
/// let mut chunk: Box<[u8]> = recycler.create();
/// chunk[0] = 1;
/// assert!(recycler.recycle(&mut chunk));
/// assert_eq!(chunk[0], 0);
/// assert!(!recycler.recycle(&mut vec![0; 8].into_boxed_slice()));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkRecycler {
    len: usize,
    reset: Reset,
}

impl ChunkRecycler {
    /// A recycler of chunks of `len` bytes, zeroing written ones
    /// ([`Reset::Zero`]).
    ///
    /// # Panics
    ///
    /// As [`ChunkPool::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::ChunkRecycler;
    ///
    /// let recycler = ChunkRecycler::new(32 * 1024);
    /// # let _ = recycler;
    /// ```
    pub const fn new(len: usize) -> Self {
        fallible::check_len(len, BAD_LEN);
        Self {
            len,
            reset: Reset::Zero,
        }
    }
}

impl Recycle<Box<[u8]>> for ChunkRecycler {
    fn create(&self) -> Box<[u8]> {
        // Exactly `len` of capacity: the conversion keeps the allocation.
        fallible::zeroed(self.len).into_boxed_slice()
    }

    fn recycle(&self, chunk: &mut Box<[u8]>) -> bool {
        reset::recycle(self, self.reset, chunk, true)
    }

    fn recycle_unwritten(&self, chunk: &mut Box<[u8]>) -> bool {
        reset::recycle(self, self.reset, chunk, false)
    }

    fn footprint(&self, chunk: &Box<[u8]>) -> usize {
        chunk.len()
    }
}

impl Wipe<Box<[u8]>> for ChunkRecycler {
    fn fits(&self, chunk: &mut Box<[u8]>) -> bool {
        chunk.len() == self.len
    }

    fn wipe(&self, chunk: &mut Box<[u8]>) {
        chunk.fill(0);
    }
}

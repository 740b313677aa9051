//! `CopyPool`: `io::copy` and `read_to_end` through pooled buffers.

use std::fmt;
use std::io::{self, Read, Write};

use super::scratch::ScratchPool;
use crate::bytes::{BufferPool, BufferRecycler, BytePool, PooledBuffer};
use crate::resource::sealed::{Contents, Knobs, Resource};
use crate::resource::{resource_pool, ResourceBuilder};
use crate::Reset;

/// The size of the buffer `io::copy` keeps on the stack (std's
/// `DEFAULT_BUF_SIZE`): a pooled buffer smaller than that would not help.
const STACK_BUF: usize = 8 * 1024;

const BAD_SIZE: &str = "stashpool: a CopyPool buffer size must be non-zero and at most isize::MAX";

/// Copies between streams, and reads whole streams, through pooled
/// buffers (Go's `io.CopyBuffer` and `io.ReadAll` with a buffer pool).
///
/// [`copy`](Self::copy) moves a stream through one pooled buffer of
/// `buf_size` bytes. [`read_all`](Self::read_all) reads a stream to its
/// end into a pooled `Vec<u8>` that starts with `buf_size` bytes of room,
/// so reading a body of typical size needs no allocation and no regrowth;
/// a vector that grew past
/// [`max_capacity`](ResourceBuilder::max_capacity) (by default
/// [`DEFAULT_MAX_CAPACITY_FACTOR`](crate::bytes::DEFAULT_MAX_CAPACITY_FACTOR)
/// times `buf_size`) is dropped on return rather than pooled.
///
/// Unlike Go's `io.Copy`, [`io::copy`] allocates nothing: it copies
/// through an 8 KiB buffer on the stack, and into a `Vec` or `BufWriter`
/// writer it reads straight into the writer's own buffer. So `copy` leaves
/// the first `buf_size` bytes of every stream (at least 8 KiB) to
/// `io::copy` through a [`Take`](io::Take): a stream that fits never takes
/// a pooled buffer and costs what `io::copy` costs, plus the `Take`. The
/// rest of a longer stream goes through the pooled buffer, in fewer calls
/// to the reader than `io::copy` makes: that pays for a reader whose every
/// call costs (a decoder, a TLS stream); for one that only copies from
/// memory, `io::copy`'s 8 KiB buffer, which stays in the L1 cache, is as
/// fast or faster.
///
/// # Contents
///
/// The copy buffer is handed to the reader, which may read it:
///
/// * [`Reset::Zero`] (the default): the bytes handed to readers since the
///   buffer left the pool are zeroed when it comes back, so no reader sees
///   another stream's bytes. That costs a `memset` of the buffer once per
///   `copy` of a stream longer than the buffer, none for a shorter one.
/// * [`Reset::Keep`]: nothing is zeroed; a reader may see bytes of an
///   earlier stream in the buffer it is handed (as with Go's `bp`). Safe
///   for readers that only write into what they are given, as every
///   well-behaved `Read` does.
///
/// `read_all` vectors are cleared on return under either policy: what was
/// read lies beyond their `len`, where safe code cannot see it.
///
/// # Examples
///
/// ```
/// use stashpool::io::CopyPool;
///
/// static COPIES: CopyPool = CopyPool::new(32 * 1024);
///
/// let mut out = Vec::new();
/// let n = COPIES.copy(&mut &b"a body"[..], &mut out).unwrap();
/// assert_eq!((n, &out[..]), (6, &b"a body"[..]));
///
/// let body = COPIES.read_all(&mut &b"another body"[..]).unwrap();
/// assert_eq!(&body[..], b"another body");
/// ```
pub struct CopyPool {
    /// Buffers lent to readers by `copy`.
    scratch: ScratchPool,
    /// Vectors filled by `read_all`.
    vecs: BytePool,
}

impl CopyPool {
    /// A pool of `buf_size`-byte copy buffers, and of `read_all` vectors
    /// with `buf_size` bytes of room.
    ///
    /// `const`, so a pool can be a `static`.
    ///
    /// # Panics
    ///
    /// If `buf_size` is zero or larger than `isize::MAX`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::CopyPool;
    ///
    /// assert_eq!(CopyPool::new(64 * 1024).buf_size(), 64 * 1024);
    /// ```
    pub const fn new(buf_size: usize) -> Self {
        Self {
            scratch: ScratchPool::new(buf_size, BAD_SIZE),
            vecs: BufferPool::new(buf_size),
        }
    }

    /// A builder, to set the core knobs (they apply to both kinds of
    /// buffer).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::CopyPool;
    ///
    /// let pool = CopyPool::builder(16 * 1024).max_idle(4).build();
    /// assert_eq!(pool.buf_size(), 16 * 1024);
    /// ```
    pub fn builder(buf_size: usize) -> ResourceBuilder<Self> {
        ResourceBuilder::new(CopyParams {
            buf_size,
            max_capacity: None,
        })
    }

    /// Copies `reader` to its end into `writer` through one pooled buffer,
    /// and returns the number of bytes copied: [`io::copy`], then, for a
    /// stream longer than `buf_size`, a pooled buffer of `buf_size` bytes
    /// (see the type docs).
    ///
    /// # Errors
    ///
    /// The first error from `reader` (other than
    /// [`Interrupted`](io::ErrorKind::Interrupted), which is retried) or
    /// from `writer`; what was copied before it stays copied.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::CopyPool;
    ///
    /// let pool = CopyPool::new(4096);
    /// let input = vec![7u8; 10_000]; // longer than the buffer
    /// let mut out = Vec::new();
    /// let n = pool.copy(&mut &input[..], &mut out).unwrap();
    /// assert_eq!(n, 10_000);
    /// assert_eq!(out, input);
    /// ```
    pub fn copy(
        &self,
        reader: &mut (impl Read + ?Sized),
        writer: &mut (impl Write + ?Sized),
    ) -> io::Result<u64> {
        // `io::copy` on a `Take` keeps its specialisations for `Vec` and
        // `BufWriter` writers: a stream no longer than the pooled buffer
        // goes straight into them, or through `io::copy`'s stack buffer,
        // with no pool lookup and nothing to zero.
        let first = self.buf_size().max(STACK_BUF) as u64;
        let mut copied = io::copy(&mut Read::take(&mut *reader, first), &mut *writer)?;
        if copied < first {
            return Ok(copied); // the reader reached its end
        }
        let mut scratch = self.scratch.get();
        let buf = scratch.lend_all();
        loop {
            let n = match reader.read(buf) {
                Ok(0) => return Ok(copied),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let Some(chunk) = buf.get(..n) else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "reader returned more bytes than the buffer holds",
                ));
            };
            writer.write_all(chunk)?;
            copied += n as u64;
        }
    }

    /// Reads `reader` to its end into a pooled vector: [`Read::read_to_end`]
    /// into a vector that starts with `buf_size` bytes of room.
    ///
    /// The vector goes back to the pool, cleared, when the guard drops.
    ///
    /// # Errors
    ///
    /// The first error from `reader` other than
    /// [`Interrupted`](io::ErrorKind::Interrupted); the vector then goes
    /// back to the pool.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::CopyPool;
    ///
    /// let pool = CopyPool::new(1024);
    /// let body = pool.read_all(&mut &b"{\"ok\":true}"[..]).unwrap();
    /// assert_eq!(body.len(), 11);
    /// ```
    pub fn read_all(&self, reader: &mut (impl Read + ?Sized)) -> io::Result<PooledBuffer<'_>> {
        let mut vec = self.vecs.get();
        reader.read_to_end(&mut vec)?;
        Ok(vec)
    }

    /// What the pool does to a copy buffer's contents (see the type docs).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::CopyPool;
    /// use stashpool::Reset;
    ///
    /// assert_eq!(CopyPool::new(1024).reset(), Reset::Zero);
    /// ```
    pub fn reset(&self) -> Reset {
        self.scratch.reset()
    }

    /// The size of each copy buffer, and the room each `read_all` vector
    /// starts with, in bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::CopyPool;
    ///
    /// assert_eq!(CopyPool::new(512).buf_size(), 512);
    /// ```
    pub fn buf_size(&self) -> usize {
        self.scratch.len()
    }
}

resource_pool!(
    [] CopyPool,
    |this| [this.scratch.pool(), &this.vecs as &dyn crate::Pool].into_iter(),
    "stashpool::io::CopyPool::new(1024)"
);

impl fmt::Debug for CopyPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CopyPool")
            .field("buf_size", &self.buf_size())
            .field("copy_buffers", &self.scratch)
            .field("read_all_buffers", &self.vecs)
            .finish()
    }
}

/// A [`CopyPool`]'s parameters, as given to its builder.
#[derive(Clone, Copy, Debug)]
pub struct CopyParams {
    buf_size: usize,
    max_capacity: Option<usize>,
}

impl ResourceBuilder<CopyPool> {
    /// `read_all` vectors that grew past `n` bytes of capacity are dropped
    /// on return, not pooled (default:
    /// [`DEFAULT_MAX_CAPACITY_FACTOR`](crate::bytes::DEFAULT_MAX_CAPACITY_FACTOR)
    /// times `buf_size`). `read_to_end` doubles a full vector, so a pool
    /// for bodies of up to `n` bytes that starts smaller keeps its vectors
    /// with a bound of `2 * n`.
    ///
    /// [`build`](Self::build) panics if `n` is smaller than `buf_size`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::CopyPool;
    ///
    /// let pool = CopyPool::builder(4096).max_capacity(1 << 20).build();
    /// drop(pool.read_all(&mut &[1u8; 100_000][..]).unwrap());
    /// assert_eq!(pool.stats().rejected, 0);
    /// ```
    pub fn max_capacity(mut self, n: usize) -> Self {
        self.params.max_capacity = Some(n);
        self
    }
}

impl Resource for CopyPool {
    type Params = CopyParams;

    fn build(params: CopyParams, knobs: Knobs) -> Self {
        let buf_size = params.buf_size;
        let scratch = ScratchPool::with_knobs(buf_size, BAD_SIZE, knobs);
        let recycler = match params.max_capacity {
            Some(max) => BufferRecycler::new(buf_size, max),
            None => BufferRecycler::with_default_max(buf_size),
        };
        let vecs = BufferPool::with_knobs(recycler, knobs);
        Self { scratch, vecs }
    }
}

impl Contents for CopyPool {}

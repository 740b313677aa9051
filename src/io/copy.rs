//! `CopyPool`: `io::copy` and `read_to_end` through pooled buffers.

use std::fmt;
use std::io::{self, Read, Write};

use super::scratch::ScratchPool;
use crate::bytes::{BufferPool, BufferRecycler, BytePool, PooledBuffer};
use crate::resource::sealed::{Knobs, Resource};
use crate::resource::ResourceBuilder;
use crate::Stats;

const BAD_SIZE: &str = "stashpool: a CopyPool buffer size must be non-zero and at most isize::MAX";

/// Copies between streams, and reads whole streams, through pooled
/// buffers (Go's `io.CopyBuffer` and `io.ReadAll` with a buffer pool).
///
/// [`copy`](Self::copy) moves a stream through one pooled buffer of
/// `buf_size` bytes, zeroed before it is pooled again.
/// [`read_all`](Self::read_all) reads a stream to its end into a pooled
/// `Vec<u8>` that starts with `buf_size` bytes of room, so reading a body
/// of typical size needs no allocation and no regrowth; a vector that grew
/// past [`DEFAULT_MAX_CAPACITY_FACTOR`](crate::bytes::DEFAULT_MAX_CAPACITY_FACTOR)
/// times `buf_size` is dropped on return rather than pooled.
///
/// Unlike Go's `io.Copy`, [`io::copy`] allocates nothing: it copies
/// through an 8 KiB buffer on the stack. So `copy` does not beat it at that
/// size (the pooled buffer is zeroed after each use, which `io::copy`'s
/// stack buffer needs too, plus the pool's own get and return); it is for
/// buffers larger than a stack should hold. `read_all` does beat a fresh
/// `read_to_end`, which grows its vector from nothing for every stream.
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
        ResourceBuilder::new(buf_size)
    }

    /// Copies `reader` to its end into `writer` through one pooled buffer,
    /// and returns the number of bytes copied: [`io::copy`] with a buffer
    /// of `buf_size` bytes from the pool.
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
    /// let pool = CopyPool::new(4);
    /// let mut out = Vec::new();
    /// // Larger than the buffer: copied 4 bytes at a time.
    /// let n = pool.copy(&mut &b"0123456789"[..], &mut out).unwrap();
    /// assert_eq!(n, 10);
    /// assert_eq!(out, b"0123456789");
    /// ```
    pub fn copy(
        &self,
        reader: &mut (impl Read + ?Sized),
        writer: &mut (impl Write + ?Sized),
    ) -> io::Result<u64> {
        let mut scratch = self.scratch.get();
        let buf = scratch.lend();
        let mut copied = 0;
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

    /// One sweep of both kinds of buffer now (see
    /// [`LocalPool::sweep`](crate::LocalPool::sweep)).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::CopyPool;
    ///
    /// let pool = CopyPool::builder(1024).manual_sweep().build();
    /// pool.copy(&mut std::io::empty(), &mut std::io::sink()).unwrap();
    /// pool.sweep();
    /// pool.sweep();
    /// assert_eq!(pool.stats().idle, 0);
    /// ```
    pub fn sweep(&self) {
        self.scratch.sweep();
        self.vecs.sweep();
    }

    /// Counters of both kinds of buffer added up (see [`Stats`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::CopyPool;
    ///
    /// let pool = CopyPool::new(1024);
    /// pool.copy(&mut &b"x"[..], &mut std::io::sink()).unwrap();
    /// drop(pool.read_all(&mut &b"y"[..]).unwrap());
    /// assert_eq!(pool.stats().idle, 2);
    /// ```
    pub fn stats(&self) -> Stats {
        self.scratch.stats() + self.vecs.stats()
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

impl fmt::Debug for CopyPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CopyPool")
            .field("buf_size", &self.buf_size())
            .field("copy_buffers", &self.scratch)
            .field("read_all_buffers", &self.vecs)
            .finish()
    }
}

impl Resource for CopyPool {
    /// The buffer size.
    type Params = usize;

    fn build(buf_size: usize, knobs: Knobs) -> Self {
        let scratch = ScratchPool::with_knobs(buf_size, BAD_SIZE, knobs);
        let vecs = BufferPool::with_knobs(BufferRecycler::with_default_max(buf_size), knobs);
        Self { scratch, vecs }
    }
}

//! `BufReaderPool`: buffered readers whose buffers are pooled.

use std::fmt;
use std::io::{self, BufRead, Read};

use super::scratch::{Scratch, ScratchPool};
use crate::Reset;
use crate::resource::sealed::{Contents, Preload, Resource};
use crate::resource::{ResourceBuilder, const_build, resource_pool};

const BAD_SIZE: &str =
    "stashpool: a BufReaderPool buffer size must be non-zero and at most isize::MAX";

/// Buffered readers over pooled buffers: [`std::io::BufReader`] without a
/// buffer allocation per stream.
///
/// Programs that read many short streams (requests, records, small files)
/// through a `BufReader` allocate and free its buffer per stream;
/// [`get`](Self::get) wraps a stream in a [`PooledBufReader`] whose
/// buffer comes from the pool and goes back when the reader is dropped or
/// unwrapped.
///
/// # Contents
///
/// The buffer is handed to the inner reader, which may read it:
///
/// * [`Reset::Zero`] (the default): the bytes handed to the inner reader
///   are zeroed when the buffer comes back, so one stream's bytes are never
///   visible to the next stream's reader. The inner reader is first handed
///   1 KiB of the buffer, twice as much each time it fills what it was
///   handed, up to the whole buffer: a short stream costs a `memset` of
///   1 KiB, a long one of the buffer (std's `BufReader` zeroes its fresh
///   buffer too, for readers without a `read_buf` of their own), and a
///   reader never read from costs nothing. A new buffer is not zeroed when
///   it is made, only as it is first handed out, so it costs memory (in
///   resident pages) as far as it was ever handed out, not its size.
/// * [`Reset::Keep`]: nothing is zeroed; the inner reader may see bytes of
///   an earlier stream in the buffer it is handed (as with Go's `bp`).
///   What this reader returns to its own caller is only ever what its
///   inner reader wrote.
///
/// # Examples
///
/// ```
/// use std::io::BufRead;
/// use stashpool::io::BufReaderPool;
///
/// static READERS: BufReaderPool = BufReaderPool::new(8 * 1024);
///
/// fn count_lines(stream: &[u8]) -> usize {
///     READERS.get(stream).lines().count()
/// }
///
/// assert_eq!(count_lines(b"a\nb\nc\n"), 3);
/// assert_eq!(count_lines(b"one line"), 1);
/// assert_eq!(READERS.stats().created, 1); // one buffer served both
/// ```
pub struct BufReaderPool {
    bufs: ScratchPool,
}

impl BufReaderPool {
    /// A pool of `capacity`-byte read buffers.
    ///
    /// `const`, so a pool can be a `static`.
    ///
    /// # Panics
    ///
    /// If `capacity` is zero or larger than `isize::MAX`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::BufReaderPool;
    ///
    /// let pool = BufReaderPool::new(4096);
    /// assert_eq!(pool.capacity(), 4096);
    /// ```
    pub const fn new(capacity: usize) -> Self {
        Self {
            bufs: ScratchPool::new(capacity, BAD_SIZE),
        }
    }

    /// A builder, to set the core knobs.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::BufReaderPool;
    ///
    /// let pool = BufReaderPool::builder(4096).max_idle(16).build();
    /// assert_eq!(pool.capacity(), 4096);
    /// ```
    pub const fn builder(capacity: usize) -> ResourceBuilder<Self> {
        ResourceBuilder::new(capacity)
    }

    /// A buffered reader over `inner`, with a buffer from the pool.
    ///
    /// # Panics
    ///
    /// If a new buffer is needed and cannot be allocated.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::Read;
    /// use stashpool::io::BufReaderPool;
    ///
    /// let pool = BufReaderPool::new(1024);
    /// let mut text = String::new();
    /// pool.get(&b"hello"[..]).read_to_string(&mut text).unwrap();
    /// assert_eq!(text, "hello");
    /// ```
    #[inline]
    pub fn get<R>(&self, inner: R) -> PooledBufReader<'_, R> {
        PooledBufReader {
            inner,
            buf: self.bufs.get(),
            pos: 0,
            filled: 0,
        }
    }

    /// Runs `f` on a buffered reader over `inner` (as from
    /// [`get`](Self::get)), whose buffer goes back to the pool after `f`
    /// returns.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::BufRead;
    /// use stashpool::io::BufReaderPool;
    ///
    /// let pool = BufReaderPool::new(1024);
    /// let lines = pool.with(&b"a\nb\n"[..], |reader| reader.lines().count());
    /// assert_eq!(lines, 2);
    /// ```
    #[inline]
    pub fn with<R, U>(&self, inner: R, f: impl FnOnce(&mut PooledBufReader<'_, R>) -> U) -> U {
        f(&mut self.get(inner))
    }

    /// What the pool does to a buffer's contents (see the type docs).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::BufReaderPool;
    /// use stashpool::Reset;
    ///
    /// assert_eq!(BufReaderPool::new(1024).reset(), Reset::Zero);
    /// ```
    pub fn reset(&self) -> Reset {
        self.bufs.reset()
    }

    /// The size of each reader's buffer, in bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::BufReaderPool;
    ///
    /// assert_eq!(BufReaderPool::new(512).capacity(), 512);
    /// ```
    pub fn capacity(&self) -> usize {
        self.bufs.len()
    }
}

resource_pool!(
    [] BufReaderPool,
    |this| std::iter::once(this.bufs.pool()),
    "stashpool::io::BufReaderPool::new(1024)"
);

impl Contents for BufReaderPool {}

impl fmt::Debug for BufReaderPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufReaderPool")
            .field("capacity", &self.capacity())
            .field("pool", &self.bufs)
            .finish()
    }
}

impl Resource for BufReaderPool {
    /// The buffer size.
    type Params = usize;
}

impl Preload for BufReaderPool {}

const_build!(
    [] BufReaderPool,
    |capacity, knobs| BufReaderPool {
        bufs: ScratchPool::with_knobs(capacity, BAD_SIZE, knobs),
    },
    "stashpool::io::BufReaderPool::builder(4096)",
    "stashpool::io::BufReaderPool"
);

// === impl PooledBufReader ===

/// A buffered reader whose buffer goes back to its [`BufReaderPool`] when
/// the reader is dropped or unwrapped.
///
/// Behaves as [`std::io::BufReader`]: reads from `inner` in chunks of up
/// to the buffer's size (smaller at first under [`Reset::Zero`], see
/// [`BufReaderPool`]), and passes large reads on an empty buffer straight
/// through.
///
/// # Examples
///
/// ```
/// use std::io::BufRead;
/// use stashpool::io::BufReaderPool;
///
/// let pool = BufReaderPool::new(64);
/// let mut reader = pool.get(&b"key: value\nrest"[..]);
/// let mut line = String::new();
/// reader.read_line(&mut line).unwrap();
/// assert_eq!(line, "key: value\n");
/// assert_eq!(reader.buffer(), b"rest");
/// ```
pub struct PooledBufReader<'a, R> {
    inner: R,
    buf: Scratch<'a>,
    /// `buf[pos..filled]` is read from `inner` and not yet consumed.
    pos: usize,
    filled: usize,
}

impl<R> PooledBufReader<'_, R> {
    /// The underlying reader; its buffered bytes are dropped and the buffer
    /// goes back to the pool.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::BufRead;
    /// use stashpool::io::BufReaderPool;
    ///
    /// let pool = BufReaderPool::new(64);
    /// let mut reader = pool.get(std::io::Cursor::new(b"abc".to_vec()));
    /// reader.fill_buf().unwrap();
    /// let cursor = reader.into_inner();
    /// assert_eq!(cursor.position(), 3); // read ahead into the dropped buffer
    /// assert_eq!(pool.stats().idle, 1);
    /// ```
    pub fn into_inner(self) -> R {
        self.inner
    }

    /// The underlying reader.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::BufReaderPool;
    ///
    /// let pool = BufReaderPool::new(64);
    /// let reader = pool.get(&b"abc"[..]);
    /// assert_eq!(reader.get_ref().len(), 3);
    /// ```
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// The underlying reader, mutably. Reading from it directly skips the
    /// bytes already buffered.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::BufReaderPool;
    ///
    /// let pool = BufReaderPool::new(64);
    /// let mut reader = pool.get(std::io::Cursor::new(vec![1, 2, 3]));
    /// reader.get_mut().set_position(2);
    /// ```
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    /// The bytes read from `inner` and not yet consumed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::BufRead;
    /// use stashpool::io::BufReaderPool;
    ///
    /// let pool = BufReaderPool::new(64);
    /// let mut reader = pool.get(&b"abc"[..]);
    /// assert!(reader.buffer().is_empty());
    /// reader.fill_buf().unwrap();
    /// reader.consume(1);
    /// assert_eq!(reader.buffer(), b"bc");
    /// ```
    pub fn buffer(&self) -> &[u8] {
        &self.buf.bytes()[self.pos..self.filled]
    }

    /// The size of the buffer, in bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::BufReaderPool;
    ///
    /// let pool = BufReaderPool::new(64);
    /// assert_eq!(pool.get(std::io::empty()).capacity(), 64);
    /// ```
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }
}

impl<R: Read> Read for PooledBufReader<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        // As std's `BufReader`: a read at least as large as the buffer,
        // with nothing buffered, gains nothing from a copy through it.
        if self.pos == self.filled && out.len() >= self.buf.len() {
            return self.inner.read(out);
        }
        let available = self.fill_buf()?;
        let n = available.len().min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: Read> BufRead for PooledBufReader<'_, R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos == self.filled {
            let buf = self.buf.lend_window();
            let n = self.inner.read(buf)?;
            if n > buf.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "reader returned more bytes than the buffer holds",
                ));
            }
            self.buf.filled(n);
            self.pos = 0;
            self.filled = n;
        }
        Ok(self.buffer())
    }

    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.filled);
    }
}

impl<R: fmt::Debug> fmt::Debug for PooledBufReader<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledBufReader")
            .field("inner", &self.inner)
            .field("buffered", &(self.filled - self.pos))
            .field("capacity", &self.capacity())
            .finish()
    }
}

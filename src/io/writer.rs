//! `BufWriterPool`: buffered writers whose buffers are pooled.

use std::fmt;
use std::io::{self, Write};

use crate::bytes::{BufferPool, BufferRecycler, BytePool, PooledBuffer};
use crate::resource::fallible;
use crate::resource::sealed::{Preload, Resource};
use crate::resource::{ResourceBuilder, const_build, resource_pool};

const BAD_SIZE: &str =
    "stashpool: a BufWriterPool buffer size must be non-zero and at most isize::MAX";

/// Buffered writers over pooled buffers: [`std::io::BufWriter`] without a
/// buffer allocation per stream.
///
/// [`get`](Self::get) wraps a stream in a [`PooledBufWriter`] whose
/// buffer comes from the pool. The writer flushes when dropped (ignoring
/// errors, as `BufWriter` does) or when unwrapped with
/// [`into_inner`](PooledBufWriter::into_inner) (reporting them), and its
/// buffer goes back to the pool, cleared.
///
/// # Examples
///
/// ```
/// use std::io::Write;
/// use stashpool::io::BufWriterPool;
///
/// static WRITERS: BufWriterPool = BufWriterPool::new(8 * 1024);
///
/// fn respond(out: &mut Vec<u8>, status: u16) -> std::io::Result<()> {
///     let mut w = WRITERS.get(out);
///     write!(w, "HTTP/1.1 {status} OK\r\n")?;
///     w.write_all(b"content-length: 0\r\n\r\n")?;
///     w.into_inner()?; // flushes
///     Ok(())
/// }
///
/// let mut out = Vec::new();
/// respond(&mut out, 200).unwrap();
/// respond(&mut out, 204).unwrap();
/// assert!(out.starts_with(b"HTTP/1.1 200 OK\r\n"));
/// assert_eq!(WRITERS.stats().created, 1);
/// ```
pub struct BufWriterPool {
    bufs: BytePool,
}

impl BufWriterPool {
    /// A pool of `capacity`-byte write buffers.
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
    /// use stashpool::io::BufWriterPool;
    ///
    /// assert_eq!(BufWriterPool::new(4096).capacity(), 4096);
    /// ```
    pub const fn new(capacity: usize) -> Self {
        Self {
            bufs: BufferPool::from_recycler(Self::recycler(capacity)),
        }
    }

    /// A writer never grows its buffer: it flushes first.
    const fn recycler(capacity: usize) -> BufferRecycler {
        fallible::check_len(capacity, BAD_SIZE);
        BufferRecycler::new(capacity, capacity)
    }

    /// A builder, to set the core knobs.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::BufWriterPool;
    ///
    /// let pool = BufWriterPool::builder(4096).max_stashed(4).build();
    /// assert_eq!(pool.capacity(), 4096);
    /// ```
    pub const fn builder(capacity: usize) -> ResourceBuilder<Self> {
        ResourceBuilder::new(capacity)
    }

    /// A buffered writer over `inner`, with a buffer from the pool.
    ///
    /// # Panics
    ///
    /// If a new buffer is needed and cannot be allocated.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::Write;
    /// use stashpool::io::BufWriterPool;
    ///
    /// let pool = BufWriterPool::new(1024);
    /// let mut out = Vec::new();
    /// let mut w = pool.get(&mut out);
    /// w.write_all(b"buffered").unwrap();
    /// drop(w); // flushes
    /// assert_eq!(out, b"buffered");
    /// ```
    #[inline]
    pub fn get<W: Write>(&self, inner: W) -> PooledBufWriter<'_, W> {
        PooledBufWriter {
            inner: Some(inner),
            buf: self.bufs.get(),
            panicked: false,
        }
    }

    /// Runs `f` on a buffered writer over `inner` (as from
    /// [`get`](Self::get)), then flushes it and gives its buffer back to
    /// the pool.
    ///
    /// # Errors
    ///
    /// `f`'s error (the writer is then dropped, which flushes and ignores
    /// errors, as any dropped writer does), else the flush's.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::Write;
    /// use stashpool::io::BufWriterPool;
    ///
    /// let pool = BufWriterPool::new(1024);
    /// let mut out = Vec::new();
    /// pool.with(&mut out, |w| writeln!(w, "{} {}", 1, 2)).unwrap();
    /// assert_eq!(out, b"1 2\n");
    /// ```
    pub fn with<W: Write, U>(
        &self,
        inner: W,
        f: impl FnOnce(&mut PooledBufWriter<'_, W>) -> io::Result<U>,
    ) -> io::Result<U> {
        let mut writer = self.get(inner);
        let out = f(&mut writer)?;
        writer.into_inner()?;
        Ok(out)
    }

    /// The size of each writer's buffer, in bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::BufWriterPool;
    ///
    /// assert_eq!(BufWriterPool::new(512).capacity(), 512);
    /// ```
    pub fn capacity(&self) -> usize {
        self.bufs.capacity()
    }
}

resource_pool!(
    [] BufWriterPool,
    |this| std::iter::once(&this.bufs as &dyn crate::Pool),
    "stashpool::io::BufWriterPool::new(1024)"
);

impl fmt::Debug for BufWriterPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufWriterPool")
            .field("capacity", &self.capacity())
            .field("pool", &self.bufs)
            .finish()
    }
}

impl Resource for BufWriterPool {
    /// The buffer size.
    type Params = usize;
}

impl Preload for BufWriterPool {}

const_build!(
    [] BufWriterPool,
    |capacity, knobs| BufWriterPool {
        bufs: BufferPool::with_knobs(BufWriterPool::recycler(capacity), knobs),
    },
    "stashpool::io::BufWriterPool::builder(4096)",
    "stashpool::io::BufWriterPool"
);

// === impl PooledBufWriter ===

/// A buffered writer whose buffer goes back to its [`BufWriterPool`] when
/// the writer is dropped or unwrapped.
///
/// Behaves as [`std::io::BufWriter`]: collects small writes in the buffer,
/// writes them to `inner` when it is full or on [`flush`](Write::flush),
/// and passes writes as large as the buffer straight through. Dropping it
/// flushes and ignores errors; [`into_inner`](Self::into_inner) flushes and
/// reports them.
///
/// # Examples
///
/// ```
/// use std::io::Write;
/// use stashpool::io::BufWriterPool;
///
/// let pool = BufWriterPool::new(16);
/// let mut w = pool.get(Vec::new());
/// w.write_all(b"abc").unwrap();
/// assert_eq!(w.buffer(), b"abc");
/// assert!(w.get_ref().is_empty()); // not written through yet
/// let out = w.into_inner().unwrap();
/// assert_eq!(out, b"abc");
/// ```
pub struct PooledBufWriter<'a, W: Write> {
    /// `None` only after `into_inner` took it.
    inner: Option<W>,
    buf: PooledBuffer<'a>,
    /// Set while `inner.write` runs: if it panics, the buffered data may
    /// have been written in part, so dropping the writer must not write it
    /// again (as std's `BufWriter`).
    panicked: bool,
}

impl<W: Write> PooledBufWriter<'_, W> {
    /// Flushes the buffer and returns the underlying writer; the buffer
    /// goes back to the pool.
    ///
    /// # Errors
    ///
    /// If flushing fails. The writer is then dropped with the data it
    /// could not write; call [`flush`](Write::flush) first to keep it on
    /// error.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::Write;
    /// use stashpool::io::BufWriterPool;
    ///
    /// let pool = BufWriterPool::new(64);
    /// let mut w = pool.get(Vec::new());
    /// w.write_all(b"done").unwrap();
    /// assert_eq!(w.into_inner().unwrap(), b"done");
    /// assert_eq!(pool.stats().idle, 1);
    /// ```
    pub fn into_inner(mut self) -> io::Result<W> {
        let flushed = self.flush_buf();
        // Taken even on error, so that `drop` does not try again.
        let inner = self.inner.take();
        flushed.map(|()| present(inner))
    }

    /// The underlying writer.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::BufWriterPool;
    ///
    /// let pool = BufWriterPool::new(64);
    /// let w = pool.get(Vec::<u8>::new());
    /// assert!(w.get_ref().is_empty());
    /// ```
    pub fn get_ref(&self) -> &W {
        present(self.inner.as_ref())
    }

    /// The underlying writer, mutably. Writing to it directly puts those
    /// bytes before the ones still buffered.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::BufWriterPool;
    ///
    /// let pool = BufWriterPool::new(64);
    /// let mut w = pool.get(Vec::<u8>::new());
    /// w.get_mut().reserve(100);
    /// ```
    pub fn get_mut(&mut self) -> &mut W {
        present(self.inner.as_mut())
    }

    /// The bytes written to this writer and not yet to `inner`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::Write;
    /// use stashpool::io::BufWriterPool;
    ///
    /// let pool = BufWriterPool::new(64);
    /// let mut w = pool.get(std::io::sink());
    /// w.write_all(b"xy").unwrap();
    /// assert_eq!(w.buffer(), b"xy");
    /// ```
    pub fn buffer(&self) -> &[u8] {
        &self.buf
    }

    /// The size of the buffer, in bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::BufWriterPool;
    ///
    /// let pool = BufWriterPool::new(64);
    /// assert_eq!(pool.get(std::io::sink()).capacity(), 64);
    /// ```
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Writes the whole buffer to `inner`, keeping what could not be
    /// written (after an error) at the front of the buffer.
    fn flush_buf(&mut self) -> io::Result<()> {
        let inner = present(self.inner.as_mut());
        let mut written = 0;
        let mut result = Ok(());
        while written < self.buf.len() {
            self.panicked = true;
            let r = inner.write(&self.buf[written..]);
            self.panicked = false;
            match r {
                Ok(0) => {
                    result = Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "failed to write the buffered data",
                    ));
                    break;
                }
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.buf.drain(..written);
        result
    }

    /// Adds `data` to the buffer (flushing it first if `data` does not
    /// fit) and returns `buffered`; or, for data as large as the buffer,
    /// flushes and passes it straight to `pass` (as std's `BufWriter`).
    #[inline]
    fn buffer_or_pass<U>(
        &mut self,
        data: &[u8],
        buffered: U,
        pass: impl FnOnce(&mut W) -> io::Result<U>,
    ) -> io::Result<U> {
        if self.buf.len() + data.len() > self.buf.capacity() {
            self.flush_buf()?;
        }
        if data.len() >= self.buf.capacity() {
            self.write_through(pass)
        } else {
            self.buf.extend_from_slice(data);
            Ok(buffered)
        }
    }

    /// Runs `write` on `inner`, past the buffer.
    fn write_through<U>(&mut self, write: impl FnOnce(&mut W) -> io::Result<U>) -> io::Result<U> {
        let inner = present(self.inner.as_mut());
        self.panicked = true;
        let r = write(inner);
        self.panicked = false;
        r
    }
}

impl<W: Write> Write for PooledBufWriter<'_, W> {
    #[inline]
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buffer_or_pass(data, data.len(), |inner| inner.write(data))
    }

    #[inline]
    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        self.buffer_or_pass(data, (), |inner| inner.write_all(data))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flush_buf()?;
        self.write_through(|inner| inner.flush())
    }
}

/// The writer, which only `into_inner` takes (consuming the guard).
fn present<T>(inner: Option<T>) -> T {
    inner.expect("stashpool: the writer is present until `into_inner`")
}

impl<W: Write> Drop for PooledBufWriter<'_, W> {
    fn drop(&mut self) {
        if self.inner.is_some() && !self.panicked {
            // Errors cannot be reported from `drop`; `into_inner` reports
            // them.
            let _ = self.flush_buf();
        }
    }
}

impl<W: Write + fmt::Debug> fmt::Debug for PooledBufWriter<'_, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledBufWriter")
            .field("inner", &self.inner)
            .field("buffered", &self.buf.len())
            .field("capacity", &self.capacity())
            .finish()
    }
}

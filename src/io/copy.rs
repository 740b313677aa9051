//! `CopyPool`: `io::copy` and `read_to_end` through pooled buffers.

use std::fmt;
use std::io::{self, Read, Write};

use super::known;
use super::scratch::ScratchPool;
use crate::Reset;
use crate::bytes::{BufferPool, BufferRecycler, BytePool, PooledBuffer};
use crate::resource::sealed::{Contents, Resource};
use crate::resource::{ResourceBuilder, const_build, resource_pool};

/// The size of the buffer `io::copy` keeps on the stack (std's
/// `DEFAULT_BUF_SIZE`): a pooled buffer no larger than that cannot save
/// a call.
const STACK_BUF: usize = 8 * 1024;

const BAD_SIZE: &str = "stashpool: a CopyPool buffer size must be non-zero and at most isize::MAX";

/// Copies between streams, and reads whole streams, through pooled
/// buffers (Go's `io.CopyBuffer` and `io.ReadAll` with a buffer pool).
///
/// [`copy`](Self::copy) moves the part of a stream past its first
/// `capacity` bytes through one pooled buffer of `capacity` bytes.
/// [`read_all`](Self::read_all) reads a stream to its end into a pooled
/// `Vec<u8>` that starts with `capacity` bytes of room, so reading a body
/// of typical size needs no allocation and no regrowth; a vector that grew
/// past [`max_capacity`](ResourceBuilder::max_capacity) (by default
/// [`DEFAULT_MAX_CAPACITY_FACTOR`](crate::bytes::DEFAULT_MAX_CAPACITY_FACTOR)
/// times `capacity`) is dropped on return rather than pooled.
///
/// # What a copy buffer buys
///
/// Unlike Go's `io.Copy`, [`io::copy`] allocates nothing, and it is hard
/// to beat: it reads straight into a `Vec<u8>` or `BufWriter` writer's own
/// buffer, writes a `&[u8]` reader out in one call, lets the kernel copy
/// between files, sockets and pipes on Linux, and otherwise copies through
/// an 8 KiB stack buffer that stays in the L1 cache. What a larger buffer
/// saves is calls: 32 KiB, Go's `io.Copy` size, reads a long stream in a
/// quarter of `io::copy`'s calls. That pays where every call costs (a
/// socket, a file, a decoder, a TLS stream), and costs where calls are
/// free: a reader that copies from memory copies through a buffer that,
/// with the bytes it copies, no longer fits in the L1 cache, and is slower
/// than `io::copy` (the `copy_opaque_1M` row of `benches/RESULTS.md`).
/// Nothing about a reader's type tells the two apart, so
/// [`copy`](Self::copy), as Go's `io.CopyBuffer`, skips its buffer by type
/// where a type says none is needed, and otherwise uses it for the rest of
/// every long stream; see its docs for the rule. Size the buffer for the
/// readers that pay, and use `io::copy` for readers that copy from
/// memory; a buffer larger than most streams is never taken for them, and
/// one of 8 KiB or less never at all.
///
/// The copies `io::copy` leaves to the kernel between file descriptors on
/// Linux get only a stream's first `capacity` bytes: whether the kernel
/// can copy depends on what a descriptor is (a regular file, a pipe, a
/// socket), which its type does not say. To copy one regular file into
/// another, which the kernel copies whole (`copy_file_range`), call
/// `io::copy`.
///
/// # Contents
///
/// The copy buffer is handed to the reader, which may read it:
///
/// * [`Reset::Zero`] (the default): the bytes handed to readers since the
///   buffer left the pool are zeroed when it comes back, so no reader sees
///   another stream's bytes. A stream copied without the pooled buffer
///   costs nothing; one that used it costs a `memset` of the buffer.
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
    /// A pool of `capacity`-byte copy buffers, and of `read_all` vectors
    /// with `capacity` bytes of room.
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
    /// use stashpool::io::CopyPool;
    ///
    /// assert_eq!(CopyPool::new(64 * 1024).capacity(), 64 * 1024);
    /// ```
    pub const fn new(capacity: usize) -> Self {
        Self {
            scratch: ScratchPool::new(capacity, BAD_SIZE),
            vecs: BufferPool::new(capacity),
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
    /// assert_eq!(pool.capacity(), 16 * 1024);
    /// ```
    pub const fn builder(capacity: usize) -> ResourceBuilder<Self> {
        ResourceBuilder::new(CopyParams {
            capacity,
            max_capacity: None,
        })
    }

    /// Copies `reader` to its end into `writer`, and returns the number of
    /// bytes copied: by [`io::copy`], and through a pooled buffer for the
    /// part of a long stream where that makes fewer calls.
    ///
    /// The way is chosen by the types of `reader` and `writer`, the pool's
    /// `capacity` and the length of the stream, and by nothing else (no
    /// clock, nothing left by earlier calls), in this order:
    ///
    /// 1. A `Vec<u8>` writer or a `&[u8]` reader (recognised by type, as
    ///    the generic arguments are, not through a `dyn` or a wrapper):
    ///    [`io::copy`], which reads straight into the vector's spare room,
    ///    or writes the slice out in one call.
    /// 2. A pool whose `capacity` is at most 8 KiB (`io::copy`'s stack
    ///    buffer): [`io::copy`], as such a buffer cannot save a call.
    /// 3. Otherwise, the first `capacity` bytes by [`io::copy`] through a
    ///    [`Take`](io::Take), which keeps `io::copy`'s other ways (a
    ///    `BufWriter`'s buffer, a kernel copy): a stream shorter than
    ///    `capacity` ends there, at `io::copy`'s cost, without a pool
    ///    lookup or anything to zero.
    /// 4. The rest of the stream, if it did not end short of `capacity`
    ///    bytes, through a pooled buffer, all of which is handed to each
    ///    read (a stream of exactly `capacity` bytes takes it for the one
    ///    read that finds the end). A long stream pays for the buffer once
    ///    and reads its rest in `capacity` chunks.
    ///
    /// Either way copies the same bytes; see the type docs for what a
    /// buffer buys and for how it is reset.
    ///
    /// A reader that says it read more bytes than it was handed gets an
    /// error from the pooled buffer's way, and a panic from `io::copy`'s.
    ///
    /// # Errors
    ///
    /// The first error from `reader` (other than
    /// [`Interrupted`](io::ErrorKind::Interrupted), which is retried) or
    /// from `writer`, and [`InvalidData`](io::ErrorKind::InvalidData) if
    /// `reader` says it read more bytes than the pooled buffer holds; what
    /// was copied before the error stays copied.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::CopyPool;
    ///
    /// let pool = CopyPool::new(32 * 1024);
    /// let input = vec![7u8; 100_000]; // longer than the buffer
    /// let mut out = std::io::BufWriter::new(Vec::new());
    /// let n = pool.copy(&mut std::io::Cursor::new(&input), &mut out).unwrap();
    /// assert_eq!(n, 100_000);
    /// assert_eq!(out.into_inner().unwrap(), input);
    /// assert_eq!(pool.stats().created, 1, "the rest went through the buffer");
    /// ```
    pub fn copy(
        &self,
        reader: &mut (impl Read + ?Sized),
        writer: &mut (impl Write + ?Sized),
    ) -> io::Result<u64> {
        if let Some(vec) = known::as_vec(writer) {
            return io::copy(reader, vec);
        }
        if let Some(result) = known::with_slice(reader, |slice| io::copy(slice, writer)) {
            return result;
        }
        let part = self.capacity();
        if part <= STACK_BUF {
            return io::copy(reader, writer);
        }
        let copied = io::copy(&mut Read::take(&mut *reader, part as u64), writer)?;
        if copied < part as u64 {
            return Ok(copied); // the reader reached its end
        }
        let mut scratch = self.scratch.get();
        Ok(copied + pump(reader, writer, scratch.lend_all())?)
    }

    /// Reads `reader` to its end into a pooled vector: [`Read::read_to_end`]
    /// into a vector that starts with `capacity` bytes of room.
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
    /// assert_eq!(CopyPool::new(512).capacity(), 512);
    /// ```
    pub fn capacity(&self) -> usize {
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
            .field("capacity", &self.capacity())
            .field("copy_buffers", &self.scratch)
            .field("read_all_buffers", &self.vecs)
            .finish()
    }
}

/// A [`CopyPool`]'s parameters, as given to its builder.
#[derive(Clone, Copy, Debug)]
pub struct CopyParams {
    capacity: usize,
    max_capacity: Option<usize>,
}

impl ResourceBuilder<CopyPool> {
    /// `read_all` vectors that grew past `n` bytes of capacity are dropped
    /// on return, not pooled (default:
    /// [`DEFAULT_MAX_CAPACITY_FACTOR`](crate::bytes::DEFAULT_MAX_CAPACITY_FACTOR)
    /// times `capacity`). `read_to_end` doubles a full vector, so a pool
    /// for bodies of up to `n` bytes that starts smaller keeps its vectors
    /// with a bound of `2 * n`.
    ///
    /// [`build`](Self::build) panics if `n` is smaller than `capacity`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::CopyPool;
    ///
    /// let pool = CopyPool::builder(4096).max_capacity(1 << 20).build();
    /// drop(pool.read_all(&mut &[1u8; 100_000][..]).unwrap());
    /// assert_eq!(pool.stats().discarded, 0);
    /// ```
    pub const fn max_capacity(mut self, n: usize) -> Self {
        self.params.max_capacity = Some(n);
        self
    }
}

impl Resource for CopyPool {
    type Params = CopyParams;
}

const_build!(
    [] CopyPool,
    |params, knobs| {
        let capacity = params.capacity;
        let scratch = ScratchPool::with_knobs(capacity, BAD_SIZE, knobs);
        let recycler = match params.max_capacity {
            Some(max) => BufferRecycler::new(capacity, max),
            None => BufferRecycler::with_default_max(capacity),
        };
        let vecs = BufferPool::with_knobs(recycler, knobs);
        CopyPool { scratch, vecs }
    },
    "stashpool::io::CopyPool::builder(64 * 1024)",
    "stashpool::io::CopyPool"
);

impl Contents for CopyPool {}

/// Copies from `reader` to `writer` through `buf` until the reader ends;
/// returns the bytes copied.
fn pump<R, W>(reader: &mut R, writer: &mut W, buf: &mut [u8]) -> io::Result<u64>
where
    R: Read + ?Sized,
    W: Write + ?Sized,
{
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
                "stashpool: a reader returned more bytes than the buffer it was handed holds",
            ));
        };
        writer.write_all(chunk)?;
        copied += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pump_copies_to_the_end_through_its_buffer() {
        let input: Vec<u8> = (0..100).collect();
        let mut out = Vec::new();
        let mut buf = [0; 16];
        assert_eq!(pump(&mut &input[..], &mut out, &mut buf).unwrap(), 100);
        assert_eq!(out, input);
        assert_eq!(pump(&mut &[][..], &mut out, &mut buf).unwrap(), 0);
    }

    #[test]
    fn a_reader_that_claims_more_than_it_was_lent_is_an_error() {
        struct Liar;
        impl Read for Liar {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                Ok(buf.len() + 1)
            }
        }
        let err = pump(&mut Liar, &mut io::sink(), &mut [0; 16]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().starts_with("stashpool:"));
    }
}

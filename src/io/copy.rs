//! `CopyPool`: `io::copy` and `read_to_end` through pooled buffers.

use std::fmt;
use std::io::{self, Read, Write};

// Not the `sync` shim's: `untimed` is a hint that no pool protocol reads.
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::known;
use super::scratch::ScratchPool;
use crate::bytes::{BufferPool, BufferRecycler, BytePool, PooledBuffer};
use crate::resource::sealed::{Contents, Knobs, Resource};
use crate::resource::{resource_pool, ResourceBuilder};
use crate::Reset;

/// The size of the buffer `io::copy` keeps on the stack (std's
/// `DEFAULT_BUF_SIZE`): a pooled buffer smaller than that would not help.
const STACK_BUF: usize = 8 * 1024;

/// After `io::copy` wins the timing on a long stream, the next
/// `UNTIMED_AFTER_STD - 1` long streams go its way without timing: a pool
/// mostly serves one kind of reader, and timing the pooled buffer costs a
/// cheap reader the cache misses it would have.
const UNTIMED_AFTER_STD: u32 = 16;

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
/// # How `copy` copies
///
/// Unlike Go's `io.Copy`, [`io::copy`] allocates nothing, and it is hard
/// to beat: it reads straight into a `Vec<u8>` or `BufWriter` writer's own
/// buffer, writes a `&[u8]` reader out in one call, lets the kernel copy
/// between files, sockets and pipes on Linux, and otherwise copies through
/// an 8 KiB stack buffer that stays in the L1 cache. A pooled buffer pays
/// only where it saves calls to a reader whose every call costs (a socket,
/// a file, a decoder, a TLS stream). So [`copy`](Self::copy) goes:
///
/// * a `Vec<u8>` writer or a `&[u8]` reader (recognised by type, generic
///   or borrowed as they are): straight to [`io::copy`];
/// * otherwise (and unless a recent win for `io::copy` is trusted, below)
///   the first `buf_size` bytes (at least 8 KiB) through
///   [`io::copy`] on a [`Take`](io::Take), which keeps its other ways: a
///   stream that fits costs what `io::copy` costs and never takes a
///   pooled buffer;
/// * the rest of a longer stream goes whichever way copied a part of it
///   faster per byte, timed on the clock: `io::copy`'s, or the whole pooled
///   buffer's (needing at least an eighth less time per byte). A reader
///   that copies from memory goes `io::copy`'s way; one that makes a system
///   call per read goes the pooled buffer's, in a quarter of the calls with
///   a 32 KiB buffer.
///
/// Timing costs: the two clock reads, and a cheap reader the cache misses
/// of two parts through the pooled buffer. After `io::copy`'s way wins,
/// the pool hands its next 15 long streams, and any short ones between
/// them, to `io::copy` whole and untimed, for a pool that serves one kind
/// of reader not to pay for timing each stream; a costly reader whose
/// stream follows a cheap one's in the same pool may so be copied as
/// `io::copy` copies it (never slower than that), until the pool times
/// again. The choice is made for speed alone: either way copies the same
/// bytes, and whatever the pooled buffer lent is reset as below.
///
/// Size the buffer for the readers that pay: 32 KiB, Go's `io.Copy` size,
/// makes a quarter of `io::copy`'s calls; a buffer larger than most
/// streams is never used for them.
///
/// # Contents
///
/// The copy buffer is handed to the reader, which may read it:
///
/// * [`Reset::Zero`] (the default): the bytes handed to readers since the
///   buffer left the pool are zeroed when it comes back, so no reader sees
///   another stream's bytes. A stream copied without the pooled buffer (a
///   short one, a `Vec` writer, a `&[u8]` reader, an untimed long one)
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
    /// How many more long streams go `io::copy`'s way untimed, since it
    /// last won (see `copy_choosing`).
    untimed: AtomicU32,
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
            untimed: AtomicU32::new(0),
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

    /// Copies `reader` to its end into `writer`, through a pooled buffer
    /// where that makes fewer, cheaper calls than [`io::copy`], and returns
    /// the number of bytes copied.
    ///
    /// What it does depends on the stream (see the type docs for why):
    ///
    /// * A `Vec<u8>` writer, or a `&[u8]` reader: [`io::copy`], which reads
    ///   straight into the vector or writes the slice in one call.
    /// * Any stream, while the pool trusts a recent win for `io::copy` (for
    ///   its next 15 streams longer than `buf_size`): [`io::copy`].
    /// * Otherwise, the first `buf_size` bytes (at least 8 KiB) by
    ///   [`io::copy`] through a [`Take`](io::Take), with no pooled buffer;
    ///   then, for a longer stream, a part by [`io::copy`] and a part
    ///   through the whole pooled buffer, both timed; the rest goes the way
    ///   that copied faster per byte (the pooled buffer only if clearly
    ///   faster).
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
    /// let pool = CopyPool::new(4096);
    /// let input = vec![7u8; 100_000]; // longer than the buffer
    /// let mut out = std::io::BufWriter::new(Vec::new());
    /// let n = pool.copy(&mut std::io::Cursor::new(&input), &mut out).unwrap();
    /// assert_eq!(n, 100_000);
    /// assert_eq!(out.into_inner().unwrap(), input);
    /// ```
    pub fn copy(
        &self,
        reader: &mut (impl Read + ?Sized),
        writer: &mut (impl Write + ?Sized),
    ) -> io::Result<u64> {
        self.copy_choosing(reader, writer, Timed::clearly_faster)
    }

    /// [`copy`](Self::copy), with the rule that picks the way for the rest
    /// of a long stream given `(by io::copy, through the pooled buffer)`;
    /// tests pass a fixed rule to reach each way for sure.
    fn copy_choosing<R, W>(
        &self,
        reader: &mut R,
        writer: &mut W,
        pooled_wins: impl FnOnce(Timed, Timed) -> bool,
    ) -> io::Result<u64>
    where
        R: Read + ?Sized,
        W: Write + ?Sized,
    {
        if let Some(vec) = known::as_vec(writer) {
            return io::copy(reader, vec);
        }
        if let Some(result) = known::with_slice(reader, |slice| io::copy(slice, writer)) {
            return result;
        }

        // Which way is faster for a long stream depends on the reader, and
        // nothing about its type says which: a reader whose every call
        // costs (a system call, a decoder's setup, a TLS record) copies
        // faster through the larger buffer, in fewer calls; one that only
        // copies from memory copies faster through `io::copy`'s 8 KiB
        // buffer, which stays in the L1 cache while a larger one spills
        // from it. So a long stream is timed a part each way, and goes on
        // the faster. A recent win for `io::copy` is trusted for the next
        // few long streams, which go to it whole: timing the pooled buffer
        // costs a cheap reader what using it does. (`untimed` is a hint:
        // racing threads may count a stream or two off, no more.)
        let part = self.buf_size().max(STACK_BUF) as u64;
        let untimed = self.untimed.load(Relaxed);
        if untimed > 0 {
            let copied = io::copy(reader, writer)?;
            if copied > part {
                self.untimed.store(untimed - 1, Relaxed);
            }
            return Ok(copied);
        }

        // `io::copy` on a `Take` keeps its other specialisations (a
        // `BufWriter` writer, copies the kernel can do): a stream no
        // longer than the pooled buffer goes through them, or through
        // `io::copy`'s stack buffer, with no pool lookup, no clock read
        // and nothing to zero.
        let mut copied = io::copy(&mut Read::take(&mut *reader, part), writer)?;
        if copied < part {
            return Ok(copied); // the reader reached its end
        }

        let start = Instant::now();
        let n = io::copy(&mut Read::take(&mut *reader, part), writer)?;
        let by_std = Timed::since(start, n);
        copied += n;
        if n < part {
            return Ok(copied);
        }

        // The pooled buffer may have left the caches while it was idle:
        // a first part through it, untimed, brings it back, so that the
        // timing sees what the rest of the stream would.
        let mut scratch = self.scratch.get();
        let buf = scratch.lend_all();
        let (n, ended) = pump(reader, writer, buf, part)?;
        copied += n;
        if ended {
            return Ok(copied);
        }
        let start = Instant::now();
        let (n, ended) = pump(reader, writer, buf, part)?;
        let pooled = Timed::since(start, n);
        copied += n;
        if ended {
            return Ok(copied);
        }

        if pooled_wins(by_std, pooled) {
            let (n, _) = pump(reader, writer, buf, u64::MAX)?;
            Ok(copied + n)
        } else {
            self.untimed.store(UNTIMED_AFTER_STD - 1, Relaxed);
            drop(scratch); // back to the pool before a long copy
            Ok(copied + io::copy(reader, writer)?)
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
        Self {
            scratch,
            vecs,
            untimed: AtomicU32::new(0),
        }
    }
}

impl Contents for CopyPool {}

/// Copies from `reader` to `writer` through `buf` until `limit` bytes or
/// more are copied or the reader ends; returns the bytes copied and
/// whether it ended.
fn pump<R, W>(reader: &mut R, writer: &mut W, buf: &mut [u8], limit: u64) -> io::Result<(u64, bool)>
where
    R: Read + ?Sized,
    W: Write + ?Sized,
{
    let mut copied = 0;
    while copied < limit {
        let n = match reader.read(buf) {
            Ok(0) => return Ok((copied, true)),
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
    Ok((copied, false))
}

/// How long one way took to copy part of a stream.
#[derive(Clone, Copy, Debug)]
struct Timed {
    bytes: u64,
    time: Duration,
}

impl Timed {
    fn since(start: Instant, bytes: u64) -> Self {
        Self {
            bytes,
            time: start.elapsed(),
        }
    }

    /// Whether `pooled` copied at least an eighth faster per byte than
    /// `by_std`: a margin, so that a close call (or a noisy one) stays
    /// with `io::copy`, whose speed is the bar.
    fn clearly_faster(by_std: Self, pooled: Self) -> bool {
        // pooled.time / pooled.bytes < 7/8 * by_std.time / by_std.bytes,
        // without division.
        let pooled_cost = (pooled.time.as_nanos() * 8).saturating_mul(by_std.bytes.into());
        let std_cost = (by_std.time.as_nanos() * 7).saturating_mul(pooled.bytes.into());
        pooled_cost < std_cost
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// The part of a stream each step of `copy` takes, in these pools.
    const PART: usize = STACK_BUF;

    /// Long enough to be timed both ways and to go on one of them.
    const LONG: usize = 6 * PART + 123;

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    /// A reader std knows nothing about.
    struct Opaque<'a>(&'a [u8]);

    impl Read for Opaque<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.0.read(buf)
        }
    }

    /// A writer std knows nothing about.
    #[derive(Default)]
    struct Collect(Vec<u8>);

    impl Write for Collect {
        fn write(&mut self, data: &[u8]) -> io::Result<usize> {
            self.0.extend_from_slice(data);
            Ok(data.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Writes `0xEE` over every buffer it is lent, reports half of it.
    struct Scribbler(usize);

    impl Read for Scribbler {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            buf.fill(0xEE);
            let n = (buf.len() / 2).max(1).min(self.0);
            self.0 -= n;
            Ok(n)
        }
    }

    /// Reads `.0` zero bytes; sets `.1` if a buffer it is lent holds
    /// anything else.
    struct ZeroSource<'a>(usize, &'a Cell<bool>);

    impl Read for ZeroSource<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if buf.iter().any(|&b| b != 0) {
                self.1.set(true);
            }
            let n = buf.len().min(self.0);
            buf[..n].fill(0);
            self.0 -= n;
            Ok(n)
        }
    }

    #[test]
    fn the_pooled_way_copies_the_rest_and_zeroes_what_it_lent() {
        let pool = CopyPool::builder(64).manual_sweep().build();
        let input = data(LONG);
        let mut out = Collect::default();
        let n = pool
            .copy_choosing(&mut Opaque(&input), &mut out, |_, _| true)
            .unwrap();
        assert_eq!(n, LONG as u64);
        assert!(out.0 == input);

        let n = pool
            .copy_choosing(&mut Scribbler(LONG), &mut io::sink(), |_, _| true)
            .unwrap();
        assert_eq!(n, LONG as u64);
        let saw_dirty = Cell::new(false);
        let mut zeros = ZeroSource(LONG, &saw_dirty);
        let n = pool
            .copy_choosing(&mut zeros, &mut io::sink(), |_, _| true)
            .unwrap();
        assert_eq!(n, LONG as u64);
        assert!(!saw_dirty.get(), "a reader saw what the last one wrote");
        assert_eq!(pool.untimed.load(Relaxed), 0, "every long stream is timed");
        let stats = pool.stats();
        assert_eq!((stats.created, stats.reused), (1, 2));
    }

    #[test]
    fn after_io_copy_wins_the_next_long_streams_go_its_way_untimed() {
        let pool = CopyPool::builder(64).manual_sweep().build();
        let input = data(LONG);
        let copy = |pool: &CopyPool, timed: &Cell<u32>, pooled_wins: bool| {
            let mut out = Collect::default();
            let n = pool
                .copy_choosing(&mut Opaque(&input), &mut out, |_, _| {
                    timed.set(timed.get() + 1);
                    pooled_wins
                })
                .unwrap();
            assert_eq!(n, LONG as u64);
            assert!(out.0 == input);
        };
        let timed = Cell::new(0);
        copy(&pool, &timed, false);
        assert_eq!((timed.get(), pool.stats().created), (1, 1));

        // Short streams do not count; long ones go untimed, no buffer out.
        for _ in 0..UNTIMED_AFTER_STD - 1 {
            let n = pool.copy(&mut Opaque(b"short"), &mut io::sink()).unwrap();
            assert_eq!(n, 5);
            copy(&pool, &timed, true);
        }
        assert_eq!(timed.get(), 1);
        let stats = pool.stats();
        assert_eq!((stats.created, stats.reused), (1, 0));

        copy(&pool, &timed, true);
        assert_eq!(timed.get(), 2, "timed again");
        copy(&pool, &timed, true);
        assert_eq!(timed.get(), 3, "a pooled win is timed every time");
        let stats = pool.stats();
        assert_eq!((stats.created, stats.reused), (1, 2));
    }

    #[test]
    fn a_reader_that_claims_more_than_it_was_lent_is_an_error() {
        struct Liar;
        impl Read for Liar {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                Ok(buf.len() + 1)
            }
        }
        let err = pump(&mut Liar, &mut io::sink(), &mut [0; 16], 100).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().starts_with("stashpool:"));
    }

    #[test]
    fn pump_stops_at_its_limit_or_the_end() {
        let input = data(100);
        let mut reader = Opaque(&input);
        let mut out = Collect::default();
        let mut buf = [0; 16];
        assert_eq!(
            pump(&mut reader, &mut out, &mut buf, 40).unwrap(),
            (48, false)
        );
        assert_eq!(
            pump(&mut reader, &mut out, &mut buf, 1000).unwrap(),
            (52, true)
        );
        assert!(out.0 == input);
    }

    #[test]
    fn the_pooled_way_must_be_an_eighth_faster_per_byte() {
        let timed = |bytes, nanos| Timed {
            bytes,
            time: Duration::from_nanos(nanos),
        };
        let by_std = timed(1000, 800);
        assert!(Timed::clearly_faster(by_std, timed(1000, 699)));
        assert!(!Timed::clearly_faster(by_std, timed(1000, 700)));
        assert!(!Timed::clearly_faster(by_std, timed(1000, 800)));
        // Per byte: twice the bytes in twice the time is no faster.
        assert!(!Timed::clearly_faster(by_std, timed(2000, 1600)));
        assert!(Timed::clearly_faster(by_std, timed(2000, 1000)));
        // A clock too coarse to see either stays with `io::copy`.
        assert!(!Timed::clearly_faster(timed(1000, 0), timed(1000, 0)));
        assert!(!Timed::clearly_faster(
            timed(u64::MAX, u64::MAX),
            timed(u64::MAX, u64::MAX)
        ));
    }
}

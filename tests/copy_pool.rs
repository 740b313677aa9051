//! `CopyPool`: the same bytes as `io::copy` whatever the reader, writer and
//! length; the way each stream goes, fixed by its types and length (no
//! pooled buffer where `io::copy` needs none or a stream is short, the
//! pooled buffer for the rest of a long one); nothing of one stream seen by
//! the next reader under `Reset::Zero`; errors, bad input.

use std::cell::Cell;
use std::io::{self, Cursor, Read, Write};
use std::panic::catch_unwind;

mod common;

use common::io::{Trickle, ZeroSource};
use stashpool::Reset;
use stashpool::io::CopyPool;

/// The size of `io::copy`'s stack buffer: pools whose buffers are no
/// larger never lend them to `copy`.
const STACK: usize = 8 * 1024;

/// The buffer size of the pools that lend their buffers: just over
/// `STACK`, so that the streams that reach the buffer stay short.
const BUF: usize = STACK + 1024;

/// Long enough for `copy` to go on through the pooled buffer, ending in a
/// part of it.
const LONG: usize = 2 * BUF + 1234;

/// Bytes that differ from one position to the next, so that a lost,
/// repeated or reordered chunk shows.
fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// A reader std knows nothing about, so that `io::copy` cannot copy from
/// the slice behind it in one go.
struct Opaque<'a>(&'a [u8]);

impl Read for Opaque<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

/// A reader std knows nothing about that records, for each call, how
/// many bytes it was handed and how many it read.
struct Counted<'a> {
    rest: &'a [u8],
    reads: Vec<(usize, usize)>,
}

impl<'a> Counted<'a> {
    fn new(data: &'a [u8]) -> Self {
        Self {
            rest: data,
            reads: Vec::new(),
        }
    }

    /// The calls up to the one that brought the bytes read to `total`.
    fn reads_until(&self, total: usize) -> &[(usize, usize)] {
        let mut sum = 0;
        let last = self.reads.iter().position(|&(_, n)| {
            sum += n;
            sum >= total
        });
        &self.reads[..=last.expect("fewer bytes read than asked")]
    }
}

impl Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.rest.read(buf)?;
        self.reads.push((buf.len(), n));
        Ok(n)
    }
}

/// A writer std knows nothing about, that keeps what it is given.
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

/// A reader of `len` bytes that writes `0xEE` over the whole buffer it is
/// lent, but reports reading only half of it.
struct Scribbler(usize);

impl Read for Scribbler {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        buf.fill(0xEE);
        let n = (buf.len() / 2).max(1).min(self.0);
        self.0 -= n;
        Ok(n)
    }
}

/// A reader that fails with `Interrupted` every other call.
struct Hiccup<'a>(bool, &'a [u8]);

impl Read for Hiccup<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0 = !self.0;
        if self.0 {
            return Err(io::ErrorKind::Interrupted.into());
        }
        self.1.read(buf)
    }
}

/// A reader of `len` bytes that then fails.
struct FailsAfter(usize);

impl Read for FailsAfter {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.0 == 0 {
            return Err(io::Error::other("disk on fire"));
        }
        let n = buf.len().min(self.0);
        self.0 -= n;
        Ok(n)
    }
}

/// A writer that takes `room` bytes, then fails.
struct BreaksAfter(usize);

impl Write for BreaksAfter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.0 == 0 {
            return Err(io::Error::other("broken pipe"));
        }
        let n = data.len().min(self.0);
        self.0 -= n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn copy_into_a_vec_takes_no_pooled_buffer() {
    let pool = CopyPool::builder(BUF).manual_sweep().build();
    for len in [0, 5, BUF, LONG] {
        let input = data(len);
        let mut out = Vec::new();
        let n = pool.copy(&mut Cursor::new(&input), &mut out).unwrap();
        assert_eq!((n, &out), (len as u64, &input), "Cursor, {len} bytes");

        // Into a vector that already holds something, from an opaque reader.
        let mut out = b"head:".to_vec();
        let n = pool.copy(&mut Opaque(&input), &mut out).unwrap();
        assert_eq!(n, len as u64);
        assert_eq!((&out[..5], &out[5..]), (&b"head:"[..], &input[..]));
    }
    assert_eq!(pool.stats().created, 0, "read_to_end needs no buffer");
}

#[test]
fn copy_from_a_slice_writes_it_out_whole() {
    let pool = CopyPool::builder(BUF).manual_sweep().build();
    for len in [0, 5, LONG] {
        let input = data(len);
        let mut reader = &input[..];
        let mut writer = Trickle {
            out: Vec::new(),
            chunk: 1000,
            calls: 0,
        };
        assert_eq!(pool.copy(&mut reader, &mut writer).unwrap(), len as u64);
        assert_eq!(writer.out, input);
        assert!(reader.is_empty(), "the slice is consumed, as io::copy does");
    }
    assert_eq!(pool.stats().created, 0);
}

#[test]
fn copy_reads_past_the_first_buf_size_bytes_through_the_pooled_buffer() {
    let pool = CopyPool::builder(BUF).manual_sweep().build();
    let input = data(LONG);
    let mut reader = Counted::new(&input);
    let mut out = Collect::default();
    assert_eq!(pool.copy(&mut reader, &mut out).unwrap(), LONG as u64);
    assert!(out.0 == input);

    // `io::copy`'s reads until `BUF` bytes are in, each handed less than
    // the pooled buffer; then the pooled buffer, whole, for every read:
    // `BUF`, 1234 bytes and the end.
    let first = reader.reads_until(BUF);
    assert!(first.iter().all(|&(handed, _)| handed < BUF), "{first:?}");
    assert_eq!(
        &reader.reads[first.len()..],
        [(BUF, BUF), (BUF, 1234), (BUF, 0)]
    );
    let stats = pool.stats();
    assert_eq!((stats.created, stats.idle), (1, 1));
}

#[test]
fn copy_takes_no_pooled_buffer_for_a_stream_shorter_than_it() {
    let pool = CopyPool::builder(BUF).manual_sweep().build();
    for len in [0, 1, STACK, BUF - 1] {
        let input = data(len);
        let mut reader = Counted::new(&input);
        let mut out = Collect::default();
        assert_eq!(pool.copy(&mut reader, &mut out).unwrap(), len as u64);
        assert!(out.0 == input);
        assert!(reader.reads.iter().all(|&(handed, _)| handed < BUF));
    }
    assert_eq!(pool.stats().created, 0);

    // Exactly `BUF` bytes: the pooled buffer finds the end.
    let input = data(BUF);
    let mut reader = Counted::new(&input);
    assert_eq!(pool.copy(&mut reader, &mut io::sink()).unwrap(), BUF as u64);
    assert_eq!(reader.reads.last(), Some(&(BUF, 0)));
    assert_eq!(pool.stats().created, 1);
}

#[test]
fn copy_with_buffers_no_larger_than_io_copys_is_io_copy() {
    for capacity in [1, 64, STACK] {
        let pool = CopyPool::builder(capacity).manual_sweep().build();
        let input = data(LONG);
        let mut out = Collect::default();
        assert_eq!(
            pool.copy(&mut Opaque(&input), &mut out).unwrap(),
            LONG as u64
        );
        assert!(out.0 == input);
        assert_eq!(pool.stats().created, 0, "{capacity} B buffers");
    }
}

#[test]
fn copy_to_any_writer_gives_what_io_copy_gives() {
    let lengths = [
        0,
        1,
        STACK - 1,
        STACK,
        STACK + 1,
        BUF - 1,
        BUF,
        BUF + 1,
        2 * BUF,
        LONG,
    ];
    for capacity in [5, STACK, BUF, 4 * STACK] {
        let pool = CopyPool::builder(capacity).manual_sweep().build();
        // Long enough to reach the pooled buffer, whatever its size.
        let past_the_buffer = 3 * capacity + 7;
        for len in lengths.into_iter().chain([past_the_buffer]) {
            let input = data(len);
            let mut out = Collect::default();
            let n = pool.copy(&mut Opaque(&input), &mut out).unwrap();
            assert_eq!(n, len as u64, "{capacity} B buffer, {len} bytes");
            assert!(out.0 == input, "{capacity} B buffer, {len} bytes");
        }
        let stats = pool.stats();
        let lends = capacity > STACK;
        assert_eq!(stats.created, u64::from(lends), "{capacity} B, reused");
        assert_eq!(stats.idle, usize::from(lends), "and back in the pool");
    }
}

#[test]
fn copy_lends_a_reader_only_zeros_under_reset_zero() {
    // Under Miri, which interprets every byte copied, two rounds: the
    // second still lends the buffer the first one's streams left dirty.
    let rounds = if cfg!(miri) { 2 } else { 3 };
    let pool = CopyPool::builder(BUF).manual_sweep().build();
    for round in 0..rounds {
        // Every buffer is filled with 0xEE past what the reader reports.
        let n = pool.copy(&mut Scribbler(LONG), &mut io::sink()).unwrap();
        assert_eq!(n, LONG as u64);

        let saw_dirty = Cell::new(false);
        let mut zeros = ZeroSource {
            len: LONG,
            saw_dirty: &saw_dirty,
        };
        let mut out = Collect::default();
        assert_eq!(pool.copy(&mut zeros, &mut out).unwrap(), LONG as u64);
        assert!(out.0.iter().all(|&b| b == 0));
        assert!(!saw_dirty.get(), "round {round}: a reader saw old bytes");
    }
    let stats = pool.stats();
    assert_eq!(
        (stats.created, stats.reused),
        (1, 2 * rounds - 1),
        "every stream passed through the one pooled buffer"
    );
}

#[test]
fn copy_under_reset_keep_lends_what_an_earlier_stream_left() {
    let pool = CopyPool::builder(BUF)
        .reset(Reset::Keep)
        .manual_sweep()
        .build();
    pool.copy(&mut Scribbler(LONG), &mut io::sink()).unwrap();

    let saw_dirty = Cell::new(false);
    let mut zeros = ZeroSource {
        len: LONG,
        saw_dirty: &saw_dirty,
    };
    assert_eq!(pool.copy(&mut zeros, &mut io::sink()).unwrap(), LONG as u64);
    assert!(
        saw_dirty.get(),
        "Reset::Keep keeps what the last reader wrote"
    );
    assert_eq!(pool.reset(), Reset::Keep);
}

#[test]
fn copy_retries_interrupted_reads_and_writes() {
    let pool = CopyPool::builder(BUF).manual_sweep().build();
    for len in [5, BUF, LONG] {
        let input = data(len);
        let mut writer = Trickle {
            out: Vec::new(),
            chunk: 100,
            calls: 0,
        };
        let n = pool.copy(&mut Hiccup(false, &input), &mut writer).unwrap();
        assert_eq!(n, len as u64);
        assert_eq!(writer.out, input, "{len} bytes");
    }
}

#[test]
fn copy_works_through_trait_objects() {
    let pool = CopyPool::new(BUF);
    let input = data(LONG);
    let mut reader: Box<dyn Read> = Box::new(Opaque(&input));
    let mut writer: Box<dyn Write> = Box::new(Vec::new());
    assert_eq!(pool.copy(&mut *reader, &mut *writer).unwrap(), LONG as u64);
}

#[test]
fn copy_reports_reader_errors_and_gives_the_buffer_back() {
    let pool = CopyPool::builder(BUF).manual_sweep().build();
    // In the first part, then while the pooled buffer is out.
    for at in [0, 100, BUF - 10, LONG] {
        let err = pool
            .copy(&mut FailsAfter(at), &mut Collect::default())
            .unwrap_err();
        assert_eq!(err.to_string(), "disk on fire", "failing at {at}");
    }
    let stats = pool.stats();
    assert_eq!(stats.created, 1, "the pooled buffer was reached");
    assert_eq!(stats.idle, 1, "the buffer went back");
}

#[test]
fn copy_reports_writer_errors_and_gives_the_buffer_back() {
    let pool = CopyPool::builder(BUF).manual_sweep().build();
    let input = data(LONG);
    for room in [0, 100, BUF - 10, LONG - 10] {
        let err = pool
            .copy(&mut Opaque(&input), &mut BreaksAfter(room))
            .unwrap_err();
        assert_eq!(err.to_string(), "broken pipe", "breaking at {room}");
    }
    let stats = pool.stats();
    assert_eq!(stats.created, 1, "the pooled buffer was reached");
    assert_eq!(stats.idle, 1, "the buffer went back");
}

#[test]
fn copy_pools_refuse_bad_buffer_sizes() {
    assert!(catch_unwind(|| CopyPool::new(0)).is_err());
    assert!(catch_unwind(|| CopyPool::new(usize::MAX)).is_err());
    assert!(catch_unwind(|| CopyPool::builder(0).build()).is_err());
    let message = catch_unwind(|| CopyPool::new(0)).unwrap_err();
    let message = match message.downcast_ref::<String>() {
        Some(message) => message.as_str(),
        None => message.downcast_ref::<&str>().copied().unwrap_or_default(),
    };
    assert!(message.starts_with("stashpool:"), "{message}");
}

// === read_all ===

#[test]
fn read_all_reads_to_the_end_into_a_cleared_pooled_vector() {
    let pool = CopyPool::builder(8).manual_sweep().build();
    let first = pool
        .read_all(&mut &b"first body, longer than 8"[..])
        .unwrap();
    assert_eq!(&first[..], b"first body, longer than 8");
    let ptr = first.as_ptr();
    drop(first);

    let second = pool.read_all(&mut &b"second"[..]).unwrap();
    assert_eq!(&second[..], b"second", "nothing of the first body is left");
    assert_eq!(second.as_ptr(), ptr, "the grown vector was kept");
}

#[test]
fn read_all_drops_vectors_that_grew_too_large() {
    let pool = CopyPool::builder(8).manual_sweep().build();
    drop(pool.read_all(&mut &[1u8; 1000][..]).unwrap());
    let stats = pool.stats();
    assert_eq!((stats.discarded, stats.idle), (1, 0));
}

#[test]
fn read_all_reports_reader_errors() {
    let pool = CopyPool::builder(8).manual_sweep().build();
    let err = pool.read_all(&mut FailsAfter(20)).unwrap_err();
    assert_eq!(err.to_string(), "disk on fire");
    assert_eq!(pool.stats().idle, 1, "the vector went back");
}

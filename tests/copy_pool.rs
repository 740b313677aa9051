//! `CopyPool`: the same bytes as `io::copy` whatever the reader, writer and
//! length, no pooled buffer where `io::copy` needs none, nothing of one
//! stream seen by the next reader under `Reset::Zero`, errors, bad input.
//!
//! Which way the rest of a long stream goes is decided on the clock, so
//! these tests assert nothing that depends on it; the unit tests in
//! `src/io/copy.rs` fix the choice to reach each way for sure. A stream
//! that ends while the pooled buffer is being timed always passes through
//! it, whatever the clock says (`MID` is such a length), and so does the
//! first longer one a pool copies.

use std::cell::Cell;
use std::io::{self, Cursor, Read, Write};
use std::panic::catch_unwind;

mod common;

use common::io::{Trickle, ZeroSource};
use stashpool::io::CopyPool;
use stashpool::Reset;

/// The part of every stream `copy` leaves to `io::copy` in pools with
/// buffers of at most 8 KiB, and the part it times each way.
const PART: usize = 8 * 1024;

/// A length that ends in the part `copy` sends through the pooled buffer
/// before timing it: past two parts, short of three.
const MID: usize = 2 * PART + 3000;

/// Long enough for `copy` to time both ways and go on one of them.
const LONG: usize = 6 * PART + 1234;

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
    let pool = CopyPool::builder(64).manual_sweep().build();
    for len in [0, 5, MID, LONG] {
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
    let pool = CopyPool::builder(64).manual_sweep().build();
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
fn copy_to_any_writer_gives_what_io_copy_gives() {
    let lengths = [
        0,
        1,
        PART - 1,
        PART,
        PART + 1,
        2 * PART,
        MID,
        3 * PART,
        LONG,
    ];
    for buf_size in [5, 64, 4 * PART] {
        let pool = CopyPool::builder(buf_size).manual_sweep().build();
        // Long enough to reach the pooled buffer, whatever its size.
        let past_the_timing = 4 * buf_size.max(PART) + 7;
        for len in lengths.into_iter().chain([past_the_timing]) {
            let input = data(len);
            let mut out = Collect::default();
            let n = pool.copy(&mut Opaque(&input), &mut out).unwrap();
            assert_eq!(n, len as u64, "{buf_size} B buffer, {len} bytes");
            assert!(out.0 == input, "{buf_size} B buffer, {len} bytes");
        }
        let stats = pool.stats();
        assert_eq!(stats.created, 1, "one buffer, reused");
        assert_eq!(stats.idle, 1, "and back in the pool");
    }
}

#[test]
fn copy_lends_a_reader_only_zeros_under_reset_zero() {
    let pool = CopyPool::builder(64).manual_sweep().build();
    for round in 0..3 {
        // Every buffer is filled with 0xEE past what the reader reports.
        let n = pool.copy(&mut Scribbler(MID), &mut io::sink()).unwrap();
        assert_eq!(n, MID as u64);

        let saw_dirty = Cell::new(false);
        let mut zeros = ZeroSource {
            len: MID,
            saw_dirty: &saw_dirty,
        };
        let mut out = Collect::default();
        assert_eq!(pool.copy(&mut zeros, &mut out).unwrap(), MID as u64);
        assert!(out.0.iter().all(|&b| b == 0));
        assert!(!saw_dirty.get(), "round {round}: a reader saw old bytes");
    }
    let stats = pool.stats();
    assert_eq!(
        (stats.created, stats.reused),
        (1, 5),
        "every stream passed through the one pooled buffer"
    );
}

#[test]
fn copy_under_reset_keep_lends_what_an_earlier_stream_left() {
    let pool = CopyPool::builder(64)
        .reset(Reset::Keep)
        .manual_sweep()
        .build();
    pool.copy(&mut Scribbler(MID), &mut io::sink()).unwrap();

    let saw_dirty = Cell::new(false);
    let mut zeros = ZeroSource {
        len: MID,
        saw_dirty: &saw_dirty,
    };
    assert_eq!(pool.copy(&mut zeros, &mut io::sink()).unwrap(), MID as u64);
    assert!(
        saw_dirty.get(),
        "Reset::Keep keeps what the last reader wrote"
    );
    assert_eq!(pool.reset(), Reset::Keep);
}

#[test]
fn copy_retries_interrupted_reads_and_writes() {
    let pool = CopyPool::builder(64).manual_sweep().build();
    for len in [5, MID, LONG] {
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
    let pool = CopyPool::new(64);
    let input = data(MID);
    let mut reader: Box<dyn Read> = Box::new(Opaque(&input));
    let mut writer: Box<dyn Write> = Box::new(Vec::new());
    assert_eq!(pool.copy(&mut *reader, &mut *writer).unwrap(), MID as u64);
}

#[test]
fn copy_reports_reader_errors_and_gives_the_buffer_back() {
    let pool = CopyPool::builder(64).manual_sweep().build();
    // In the first part, then while the pooled buffer is out.
    for at in [0, 100, MID - 10, LONG] {
        let err = pool
            .copy(&mut FailsAfter(at), &mut Collect::default())
            .unwrap_err();
        assert_eq!(err.to_string(), "disk on fire", "failing at {at}");
    }
    let stats = pool.stats();
    assert!(stats.created >= 1, "the pooled buffer was reached");
    assert_eq!(stats.idle, 1, "the buffer went back");
}

#[test]
fn copy_reports_writer_errors_and_gives_the_buffer_back() {
    let pool = CopyPool::builder(64).manual_sweep().build();
    let input = data(LONG);
    for room in [0, 100, MID - 10, LONG - 10] {
        let err = pool
            .copy(&mut Opaque(&input), &mut BreaksAfter(room))
            .unwrap_err();
        assert_eq!(err.to_string(), "broken pipe", "breaking at {room}");
    }
    let stats = pool.stats();
    assert!(stats.created >= 1, "the pooled buffer was reached");
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
    assert_eq!((stats.rejected, stats.idle), (1, 0));
}

#[test]
fn read_all_reports_reader_errors() {
    let pool = CopyPool::builder(8).manual_sweep().build();
    let err = pool.read_all(&mut FailsAfter(20)).unwrap_err();
    assert_eq!(err.to_string(), "disk on fire");
    assert_eq!(pool.stats().idle, 1, "the vector went back");
}

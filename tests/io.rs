//! `BufReaderPool` and `BufWriterPool`: same results as std, reuse,
//! nothing leaks between streams, errors, bad input. (`CopyPool`:
//! tests/copy_pool.rs.)

use std::cell::Cell;
use std::io::{self, BufRead, Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};

mod common;

use common::io::{Trickle, ZeroSource};
use stashpool::io::{BufReaderPool, BufWriterPool, CopyPool};
use stashpool::{Pool, Reset};

/// A reader that records whether the buffer it is first lent holds any
/// non-zero byte (what a careless or hostile `Read` could see), then reads
/// from `data`. (Later calls see its own earlier data.)
struct Snooper<'a> {
    data: &'a [u8],
    saw_dirty: &'a Cell<bool>,
    calls: usize,
}

impl<'a> Snooper<'a> {
    fn new(data: &'a [u8], saw_dirty: &'a Cell<bool>) -> Self {
        Self {
            data,
            saw_dirty,
            calls: 0,
        }
    }
}

impl Read for Snooper<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.calls == 1 && buf.iter().any(|&b| b != 0) {
            self.saw_dirty.set(true);
        }
        self.data.read(buf)
    }
}

/// A reader that writes `0xEE` over the whole buffer it is lent but reports
/// reading only one byte.
struct Scribbler(usize);

impl Read for Scribbler {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.0 == 0 {
            return Ok(0);
        }
        self.0 -= 1;
        buf.fill(0xEE);
        Ok(1)
    }
}

/// A writer that always fails.
#[derive(Debug)]
struct Broken;

impl Write for Broken {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::other("broken pipe"))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn text(lines: usize) -> Vec<u8> {
    (0..lines)
        .flat_map(|i| format!("line number {i}\n").into_bytes())
        .collect()
}

// === BufReaderPool ===

#[test]
fn a_pooled_reader_reads_what_std_reads() {
    let input = text(100);
    let pool = BufReaderPool::builder(7).manual_sweep().build(); // lines cross buffers
    let ours: Vec<String> = pool.get(&input[..]).lines().map(Result::unwrap).collect();
    let std: Vec<String> = io::BufReader::new(&input[..])
        .lines()
        .map(Result::unwrap)
        .collect();
    assert_eq!(ours, std);

    let mut bytes = Vec::new();
    let mut reader = pool.get(&input[..]);
    let mut chunk = [0u8; 5];
    loop {
        let n = reader.read(&mut chunk).unwrap();
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
    assert_eq!(bytes, input);
}

#[test]
fn large_reads_on_an_empty_buffer_pass_straight_through() {
    let pool = BufReaderPool::new(8);
    let saw_dirty = Cell::new(false);
    let mut reader = pool.get(Snooper::new(b"0123456789abcdef", &saw_dirty));
    let mut big = [0u8; 16];
    assert_eq!(reader.read(&mut big).unwrap(), 16);
    assert!(
        reader.buffer().is_empty(),
        "nothing went through the buffer"
    );
}

#[test]
fn readers_reuse_one_buffer() {
    let pool = BufReaderPool::builder(64).manual_sweep().build();
    for _ in 0..5 {
        let mut s = String::new();
        pool.get(&b"abc"[..]).read_to_string(&mut s).unwrap();
        assert_eq!(s, "abc");
    }
    let stats = pool.stats();
    assert_eq!((stats.created, stats.reused, stats.idle), (1, 4, 1));
}

#[test]
fn a_reader_never_sees_what_the_previous_stream_left_in_the_buffer() {
    let pool = BufReaderPool::builder(64).manual_sweep().build();
    let mut first = pool.get(&[0xAB; 40][..]);
    first.fill_buf().unwrap();
    drop(first);

    let saw_dirty = Cell::new(false);
    let mut second = pool.get(Snooper::new(b"x", &saw_dirty));
    assert_eq!(second.fill_buf().unwrap(), b"x");
    assert_eq!(pool.stats().reused, 1, "the same buffer was lent again");
    assert!(!saw_dirty.get(), "the second reader saw the first stream");
}

#[test]
fn under_reset_keep_a_reader_sees_what_the_last_stream_left() {
    let pool = BufReaderPool::builder(64)
        .reset(Reset::Keep)
        .manual_sweep()
        .build();
    let mut first = pool.get(&[0xAB; 40][..]);
    first.fill_buf().unwrap();
    drop(first);

    let saw_dirty = Cell::new(false);
    let mut second = pool.get(Snooper::new(b"x", &saw_dirty));
    assert_eq!(
        second.fill_buf().unwrap(),
        b"x",
        "it still reads only its own"
    );
    assert!(saw_dirty.get(), "Reset::Keep keeps the buffer's contents");
}

#[test]
fn a_reader_that_inspects_its_buffer_sees_only_zeros_under_reset_zero() {
    let pool = BufReaderPool::builder(64).manual_sweep().build();
    assert_eq!(pool.reset(), Reset::Zero);
    for round in 0..3 {
        // Scribbles over the whole buffer, then reads zeros and checks.
        let mut scribbled = pool.get(Scribbler(2));
        while !scribbled.fill_buf().unwrap().is_empty() {
            scribbled.consume(1);
        }
        drop(scribbled);
        let saw_dirty = Cell::new(false);
        let mut zeros = pool.get(ZeroSource {
            len: 100,
            saw_dirty: &saw_dirty,
        });
        io::copy(&mut zeros, &mut io::sink()).unwrap();
        assert!(!saw_dirty.get(), "round {round}: the reader saw old bytes");
    }
    assert_eq!(pool.stats().created, 1);
}

#[test]
fn io_pools_are_pools() {
    let readers = BufReaderPool::builder(16).manual_sweep().build();
    let writers = BufWriterPool::builder(16).manual_sweep().build();
    let copies = CopyPool::builder(16).manual_sweep().build();
    drop(readers.get(io::empty()));
    drop(writers.get(io::sink()));
    drop(copies.read_all(&mut io::empty()).unwrap());
    let pools: [&dyn Pool; 3] = [&readers, &writers, &copies];
    assert_eq!(pools.iter().map(|p| p.stats().idle).sum::<usize>(), 3);
    pools.iter().for_each(|p| p.clear());
    assert_eq!(pools.iter().map(|p| p.stats().idle).sum::<usize>(), 0);
}

#[test]
fn bytes_a_reader_wrote_past_its_count_are_zeroed_too() {
    let pool = BufReaderPool::builder(64).manual_sweep().build();
    let mut reader = pool.get(Scribbler(1));
    assert_eq!(reader.fill_buf().unwrap(), [0xEE]);
    drop(reader);

    let saw_dirty = Cell::new(false);
    pool.get(Snooper::new(b"", &saw_dirty)).fill_buf().unwrap();
    assert!(!saw_dirty.get());
}

#[test]
fn into_inner_gives_the_reader_back_and_the_buffer_to_the_pool() {
    let pool = BufReaderPool::builder(4).manual_sweep().build();
    let mut reader = pool.get(io::Cursor::new(b"abcdef".to_vec()));
    let mut two = [0u8; 2];
    reader.read_exact(&mut two).unwrap();
    assert_eq!(&two, b"ab");
    assert_eq!(reader.buffer(), b"cd");
    assert_eq!(reader.capacity(), 4);
    let cursor = reader.into_inner();
    assert_eq!(cursor.position(), 4);
    assert_eq!(pool.stats().idle, 1);
}

#[test]
fn a_reader_that_claims_too_many_bytes_is_an_error() {
    struct Liar;
    impl Read for Liar {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            Ok(buf.len() + 1)
        }
    }
    let pool = BufReaderPool::new(16);
    let err = pool.get(Liar).fill_buf().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
}

#[test]
fn reader_errors_pass_through() {
    struct Failing;
    impl Read for Failing {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            Err(io::Error::other("disk on fire"))
        }
    }
    let pool = BufReaderPool::new(16);
    let err = pool.get(Failing).read(&mut [0; 4]).unwrap_err();
    assert_eq!(err.to_string(), "disk on fire");
}

#[test]
fn bad_reader_buffer_sizes_are_refused() {
    assert!(catch_unwind(|| BufReaderPool::new(0)).is_err());
    assert!(catch_unwind(|| BufReaderPool::new(usize::MAX)).is_err());
    assert!(catch_unwind(|| BufReaderPool::builder(0).build()).is_err());
}

// === BufWriterPool ===

#[test]
fn small_writes_are_buffered_until_flush() {
    let pool = BufWriterPool::builder(16).manual_sweep().build();
    let mut w = pool.get(Vec::new());
    w.write_all(b"abc").unwrap();
    w.write_all(b"def").unwrap();
    assert!(w.get_ref().is_empty());
    assert_eq!(w.buffer(), b"abcdef");
    w.flush().unwrap();
    assert_eq!(w.get_ref(), b"abcdef");
    assert!(w.buffer().is_empty());
}

#[test]
fn a_full_buffer_is_written_out_and_large_writes_pass_through() {
    let pool = BufWriterPool::builder(8).manual_sweep().build();
    let mut w = pool.get(Vec::new());
    w.write_all(b"12345").unwrap();
    w.write_all(b"6789").unwrap(); // would overflow: flushes "12345" first
    assert_eq!(w.get_ref(), b"12345");
    w.write_all(b"a large write!").unwrap(); // flushes, then goes straight through
    assert_eq!(w.get_ref(), b"123456789a large write!");
    assert!(w.buffer().is_empty());
    assert_eq!(w.write(b"xyz").unwrap(), 3);
    assert_eq!(w.into_inner().unwrap(), b"123456789a large write!xyz");
}

#[test]
fn dropping_a_writer_flushes_it() {
    let pool = BufWriterPool::new(64);
    let mut out = Vec::new();
    let mut w = pool.get(&mut out);
    write!(w, "{}", 12345).unwrap();
    drop(w);
    assert_eq!(out, b"12345");
}

#[test]
fn writers_reuse_one_buffer_and_start_empty() {
    let pool = BufWriterPool::builder(32).manual_sweep().build();
    let mut w = pool.get(io::sink());
    w.write_all(b"first stream").unwrap();
    drop(w);
    let w = pool.get(Vec::new());
    assert!(w.buffer().is_empty());
    assert_eq!(w.capacity(), 32);
    assert_eq!(w.into_inner().unwrap(), b"");
    let stats = pool.stats();
    assert_eq!((stats.created, stats.reused), (1, 1));
}

#[test]
fn partial_and_interrupted_writes_are_retried() {
    let pool = BufWriterPool::new(64);
    let mut w = pool.get(Trickle {
        out: Vec::new(),
        chunk: 3,
        calls: 0,
    });
    w.write_all(b"partial writes").unwrap();
    let trickle = w.into_inner().unwrap();
    assert_eq!(trickle.out, b"partial writes");
}

#[test]
fn into_inner_reports_flush_errors() {
    let pool = BufWriterPool::builder(64).manual_sweep().build();
    let mut w = pool.get(Broken);
    w.write_all(b"lost").unwrap();
    let err = w.into_inner().unwrap_err();
    assert_eq!(err.to_string(), "broken pipe");
    assert_eq!(pool.stats().idle, 1, "the buffer still went back");
}

#[test]
fn a_writer_that_accepts_nothing_is_a_write_zero_error() {
    struct Full;
    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Ok(0)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let pool = BufWriterPool::new(8);
    let mut w = pool.get(Full);
    w.write_all(b"abc").unwrap();
    assert_eq!(w.flush().unwrap_err().kind(), io::ErrorKind::WriteZero);
}

#[test]
fn a_panicking_writer_is_not_written_again_on_drop() {
    struct PanicOnce {
        calls: usize,
    }
    impl Write for PanicOnce {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            self.calls += 1;
            assert!(self.calls < 2, "a second write after a panic");
            panic!("inner writer panics")
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let pool = BufWriterPool::new(8);
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut w = pool.get(PanicOnce { calls: 0 });
        w.write_all(b"abc").unwrap();
        let _ = w.flush(); // panics inside `inner.write`; the drop must not write
    }));
    let err = result.unwrap_err();
    assert_eq!(err.downcast_ref::<&str>(), Some(&"inner writer panics"));
    // The pool is still usable.
    pool.get(io::sink()).write_all(b"ok").unwrap();
}

#[test]
fn bad_writer_buffer_sizes_are_refused() {
    assert!(catch_unwind(|| BufWriterPool::new(0)).is_err());
    assert!(catch_unwind(|| BufWriterPool::new(usize::MAX)).is_err());
    assert!(catch_unwind(|| BufWriterPool::builder(0).build()).is_err());
}

#[test]
fn io_pools_have_debug_forms() {
    let readers = BufReaderPool::new(16);
    let writers = BufWriterPool::new(16);
    let copies = CopyPool::new(16);
    assert!(format!("{readers:?}").contains("capacity: 16"));
    assert!(format!("{writers:?}").contains("capacity: 16"));
    assert!(format!("{copies:?}").contains("capacity: 16"));
    assert!(format!("{:?}", readers.get(&b""[..])).contains("PooledBufReader"));
    assert!(format!("{:?}", writers.get(Vec::new())).contains("PooledBufWriter"));
}

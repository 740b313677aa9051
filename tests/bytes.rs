//! `BytePool`, `StringPool`, `BytePools` and `ChunkPool`: reuse, reset,
//! bounds, bad input.

use std::fmt::Write as _;
use std::io::{Read, Write as _};
use std::panic::catch_unwind;
use std::thread;

use stashpool::bytes::{
    BytePool, BytePools, ChunkPool, DEFAULT_MAX_CAPACITY_FACTOR, MAX_CLASS, StringPool,
};
use stashpool::{Reset, SizedGuard};

static STATIC_BUFS: BytePool = BytePool::new(128);

fn bytes(capacity: usize) -> BytePool {
    BytePool::builder(capacity).manual_sweep().build()
}

// === BytePool / StringPool ===

#[test]
fn byte_buffers_come_out_empty_with_the_capacity_asked_for() {
    let pool = bytes(1000);
    let buf = pool.get();
    assert_eq!(buf.len(), 0);
    assert!(buf.capacity() >= 1000);
}

#[test]
fn a_returned_byte_buffer_is_reused_and_cleared() {
    let pool = bytes(64);
    let mut buf = pool.get();
    buf.extend_from_slice(b"password=hunter2");
    let ptr = buf.as_ptr();
    drop(buf);

    let buf = pool.get();
    assert_eq!(buf.as_ptr(), ptr, "the same allocation comes back");
    assert!(buf.is_empty(), "what the last user wrote is not readable");
    let stats = pool.stats();
    assert_eq!((stats.created, stats.reused, stats.discarded), (1, 1, 0));
}

#[test]
fn a_returned_string_is_reused_and_cleared() {
    let pool = StringPool::builder(32).manual_sweep().build();
    let ptr = pool.with(|s| {
        s.push_str("secret");
        s.as_ptr()
    });
    pool.with(|s| {
        assert_eq!(s.as_ptr(), ptr);
        assert_eq!(s, "");
        assert!(s.capacity() >= 32);
    });
}

#[test]
fn a_buffer_may_grow_up_to_max_capacity_and_still_be_pooled() {
    let pool = BytePool::builder(16)
        .max_capacity(256)
        .manual_sweep()
        .build();
    pool.with(|buf| buf.extend_from_slice(&[1; 200]));
    assert_eq!(pool.stats().idle, 1);
    let buf = pool.get();
    assert!(buf.capacity() >= 200 && buf.is_empty());
}

#[test]
fn a_buffer_that_grew_past_max_capacity_is_dropped() {
    let pool = BytePool::builder(16)
        .max_capacity(256)
        .manual_sweep()
        .build();
    let mut buf = pool.get();
    buf.resize(10_000, 7);
    drop(buf);

    let stats = pool.stats();
    assert_eq!((stats.discarded, stats.idle), (1, 0));
    let buf = pool.get();
    assert!(buf.capacity() <= 256, "a new buffer, not the grown one");
    assert_eq!((pool.stats().created, pool.stats().reused), (2, 0));
}

#[test]
fn a_buffer_that_shrank_below_capacity_is_dropped() {
    let pool = bytes(512);
    let mut buf = pool.get();
    let _taken: Vec<u8> = std::mem::take(&mut *buf); // leaves an empty Vec behind
    drop(buf);
    assert_eq!(pool.stats().discarded, 1);
    assert!(pool.get().capacity() >= 512, "the promise still holds");
}

#[test]
fn default_max_capacity_is_the_documented_multiple() {
    let pool = BytePool::new(1000);
    assert_eq!(pool.capacity(), 1000);
    assert_eq!(pool.max_capacity(), 1000 * DEFAULT_MAX_CAPACITY_FACTOR);
    // Saturates rather than overflows.
    let pool = BytePool::builder(usize::MAX / 4).build();
    assert_eq!(pool.max_capacity(), isize::MAX as usize);
}

#[test]
fn pooled_byte_buffers_are_io_writers_and_strings_fmt_writers() {
    let pool = bytes(64);
    let mut buf = pool.get();
    write!(buf, "{}-{}", 1, 2).unwrap();
    buf.flush().unwrap();
    assert_eq!(&buf[..], b"1-2");

    let strings = StringPool::new(64);
    let mut s = strings.get();
    write!(s, "{:>4}", 7).unwrap();
    assert_eq!(&*s, "   7");
}

#[test]
fn a_static_pool_works() {
    let first = STATIC_BUFS.with(|buf| {
        buf.push(1);
        buf.as_ptr()
    });
    let second = STATIC_BUFS.with(|buf| {
        assert!(buf.is_empty());
        buf.as_ptr()
    });
    assert_eq!(first, second);
}

#[test]
fn two_sweeps_drop_idle_buffers() {
    let pool = bytes(64);
    drop((pool.get(), pool.get()));
    assert_eq!(pool.stats().idle, 2);
    pool.sweep();
    assert_eq!(pool.stats().idle, 2);
    pool.sweep();
    let stats = pool.stats();
    assert_eq!((stats.idle, stats.trimmed), (0, 2));
}

#[test]
fn buffers_shared_by_threads_are_always_handed_out_empty() {
    let pool = BytePool::new(64);
    thread::scope(|s| {
        for id in 0..4u8 {
            let pool = &pool;
            s.spawn(move || {
                for _ in 0..2000 {
                    let mut buf = pool.get();
                    assert!(buf.is_empty(), "a buffer came out dirty");
                    buf.extend_from_slice(&[id; 40]);
                    assert!(buf.iter().all(|&b| b == id), "a buffer is shared");
                }
            });
        }
    });
    let stats = pool.stats();
    assert_eq!(stats.gets, 8000);
    assert!(stats.created <= 8, "buffers are reused: {stats:?}");
}

#[test]
fn zero_and_impossible_capacities_are_refused_with_a_message() {
    for result in [
        catch_unwind(|| BytePool::new(0)),
        catch_unwind(|| BytePool::new(usize::MAX)),
        catch_unwind(|| BytePool::builder(100).max_capacity(99).build()),
        catch_unwind(|| BytePool::builder(0).build()),
    ] {
        let err = result.expect_err("bad parameters must panic");
        let msg = err.downcast_ref::<&str>().copied().unwrap_or_default();
        assert!(msg.starts_with("stashpool:"), "unclear message: {msg:?}");
    }
    assert!(catch_unwind(|| StringPool::new(0)).is_err());
}

#[test]
fn zero_capacity_buffers_with_a_max_capacity_grow_on_first_use() {
    let pool = StringPool::builder(0)
        .max_capacity(100)
        .manual_sweep()
        .build();
    pool.with(|s| s.push_str("hello"));
    let s = pool.get();
    assert!(s.is_empty() && s.capacity() >= 5);
    assert_eq!(pool.stats().reused, 1);
}

#[test]
fn an_unallocatable_buffer_panics_instead_of_aborting() {
    // Valid parameters (at most isize::MAX) that no allocator can meet.
    let pool = BytePool::new(isize::MAX as usize);
    assert!(catch_unwind(|| drop(pool.get())).is_err());
    // The pool survives the failed get.
    assert_eq!(pool.stats().created, 0);
}

#[test]
fn debug_shows_the_configuration() {
    let pool = BytePool::builder(64).max_capacity(128).build();
    let text = format!("{pool:?}");
    assert!(text.contains("capacity: 64") && text.contains("max_capacity: 128"));
    assert!(format!("{:?}", BytePool::builder(64)).contains("64"));
}

// === BytePools ===

fn classes(min: usize, max: usize) -> BytePools {
    BytePools::builder(min, max).manual_sweep().build()
}

#[test]
fn classes_are_four_to_a_doubling_from_min_to_max() {
    let pool = classes(100, 5000);
    assert_eq!(
        pool.classes().collect::<Vec<_>>(),
        [
            112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896, 1024, 1280, 1536,
            1792, 2048, 2560, 3072, 3584, 4096, 5120
        ]
    );
    assert_eq!(pool.max_capacity(), 5000);
}

proptest::proptest! {
    /// The memory rule: a buffer for any `len` from `min` to `max` has at
    /// least `len` and at most a quarter more bytes of room, new or
    /// reused: after buffers were written, grown, shrunk and put.
    #[test]
    fn a_buffer_wastes_at_most_a_quarter(
        min in 1usize..5000,
        span in 0usize..100_000,
        uses in proptest::collection::vec((0.0f64..1.0, 0usize..3, 0usize..300), 1..12),
    ) {
        let pool = classes(min, min + span);
        for (pick, how, extra) in uses {
            let len = min + ((span as f64) * pick) as usize;
            let mut buf = pool.get(len);
            proptest::prop_assert!(SizedGuard::is_pooled(&buf));
            let room = buf.capacity();
            proptest::prop_assert!(room >= len && room - len <= len / 4, "{} for {}", room, len);
            match how {
                0 => buf.resize(room + extra, 1), // grows
                1 => buf.shrink_to(room.saturating_sub(extra)),
                _ => pool.put(Vec::with_capacity(len + extra)),
            }
        }
    }
}

#[test]
fn a_request_gets_the_smallest_class_that_holds_it() {
    let pool = classes(64, 1 << 16);
    for (len, class) in [
        (0, 64),
        (1, 64),
        (64, 64),
        (65, 80),
        (1000, 1024),
        (1024, 1024),
        (1025, 1280),
        (1 << 16, 1 << 16),
    ] {
        let buf = pool.get(len);
        assert!(buf.is_empty());
        assert_eq!(buf.capacity(), class, "len {len}");
        assert!(SizedGuard::is_pooled(&buf));
    }
}

#[test]
fn requests_cycling_through_many_classes_each_reuse_their_own_buffer() {
    // More classes in turn than a thread keeps stashes at hand for, and
    // fewer: every class keeps serving its own one buffer either way.
    for cycle in [4, 12] {
        let pool = classes(64, 64 << 11);
        let mut seen = vec![None; cycle];
        for round in 0..50 {
            for (class, first) in seen.iter_mut().enumerate() {
                let mut buf = pool.get(64 << class);
                assert!(buf.is_empty());
                assert_eq!(buf.capacity(), 64 << class);
                buf.push(round as u8);
                let ptr = buf.as_ptr();
                assert_eq!(*first.get_or_insert(ptr), ptr, "class {class}");
            }
        }
        let stats = pool.stats();
        assert_eq!(stats.created, cycle as u64, "cycle {cycle}: {stats:?}");
        assert_eq!(stats.reused, 49 * cycle as u64);
        assert_eq!(stats.idle, cycle);
    }
}

#[test]
fn a_buffer_returns_to_its_own_class_cleared() {
    let pool = classes(64, 4096);
    let mut buf = pool.get(300);
    buf.extend_from_slice(&[0xAA; 300]);
    let ptr = buf.as_ptr();
    drop(buf);
    assert_eq!(pool.class_stats(320).unwrap().idle, 1);
    assert_eq!(pool.stats().idle, 1, "no other class got it");

    // Any request of the same class gets it back, empty.
    let buf = pool.get(260);
    assert_eq!(buf.as_ptr(), ptr);
    assert!(buf.is_empty());
    // A request of another class does not.
    assert_ne!(pool.get(100).as_ptr(), ptr);
}

#[test]
fn a_buffer_that_grew_into_another_class_is_dropped() {
    let pool = classes(64, 4096);
    let mut buf = pool.get(100);
    buf.resize(1000, 1); // now as large as the 1024 class
    drop(buf);
    assert_eq!(pool.class_stats(100).unwrap().discarded, 1);
    assert_eq!(pool.stats().idle, 0);
}

#[test]
fn requests_above_max_are_plain_allocations() {
    let pool = classes(64, 1000);
    let buf = pool.get(1001);
    assert!(!SizedGuard::is_pooled(&buf));
    assert!(buf.capacity() >= 1001);
    drop(buf);
    assert_eq!(pool.stats(), Default::default(), "the pool never saw it");
    assert!(pool.class_stats(1001).is_none());
    assert_eq!(pool.with(5000, |buf| buf.capacity()), 5000);
}

#[test]
fn into_inner_keeps_a_sized_buffer() {
    let pool = classes(64, 1024);
    let mut buf = pool.get(10);
    buf.push(9);
    let kept = SizedGuard::into_inner(buf);
    assert_eq!(kept, [9]);
    assert_eq!(pool.stats().idle, 0);
    let alone = SizedGuard::into_inner(pool.get(2000));
    assert!(alone.capacity() >= 2000);
}

#[test]
fn sweeps_reach_every_class() {
    let pool = classes(64, 1 << 20);
    drop((pool.get(1), pool.get(5000), pool.get(1 << 20)));
    assert_eq!(pool.stats().idle, 3);
    pool.sweep();
    pool.sweep();
    assert_eq!(pool.stats().trimmed, 3);
}

#[test]
fn bad_class_bounds_are_refused() {
    assert!(catch_unwind(|| BytePools::new(0, 64)).is_err());
    assert!(catch_unwind(|| BytePools::new(128, 64)).is_err());
    assert!(catch_unwind(|| BytePools::new(1, usize::MAX)).is_err());
    let pool = BytePools::new(MAX_CLASS, MAX_CLASS); // one class, valid
    assert_eq!(pool.classes().count(), 1);
}

#[test]
fn a_huge_request_panics_instead_of_aborting() {
    let pool = classes(64, 1024);
    for len in [usize::MAX, isize::MAX as usize] {
        assert!(catch_unwind(|| drop(pool.get(len))).is_err());
        assert!(catch_unwind(|| pool.with(len, |_| ())).is_err());
    }
    assert_eq!(pool.get(10).capacity(), 64, "the pool is still usable");
}

#[test]
fn sized_buffers_are_io_writers_with_a_debug_form() {
    let pool = classes(64, 1024);
    let mut buf = pool.get(16);
    write!(buf, "ab").unwrap();
    assert_eq!(format!("{buf:?}"), "[97, 98]");
    assert!(format!("{pool:?}").contains("BytePools"));
}

// === ChunkPool ===

/// A file of `len` bytes that all differ from their neighbours, removed
/// when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(name: &str, len: usize) -> (Self, Vec<u8>) {
        let contents: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let path = std::env::temp_dir().join(format!("stashpool-{name}-{}", std::process::id()));
        std::fs::write(&path, &contents).unwrap();
        (Self(path), contents)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Go's bp read loop: a chunk per read, passed to `read` as it comes,
/// the bytes read used, the chunk given back.
fn read_in_chunks(pool: &ChunkPool, mut file: impl Read) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let mut chunk = pool.get();
        let n = file.read(&mut chunk).unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn a_read_loop_fills_full_length_chunks_that_keep_is_not_zeroing() {
    let (file, contents) = TempFile::new("chunks-keep", 100_000);
    let pool = ChunkPool::builder(4096)
        .reset(Reset::Keep)
        .manual_sweep()
        .build();
    let read = read_in_chunks(&pool, std::fs::File::open(&file.0).unwrap());
    assert_eq!(read, contents);
    let stats = pool.stats();
    assert_eq!(stats.created, 1, "one chunk, made once: {stats}");
    assert_eq!(stats.gets, 100_000_usize.div_ceil(4096) as u64 + 1);
    // Nothing was zeroed after the chunk was made: it holds the file's
    // last full chunk, overwritten at its front by the short last read.
    let last_full = (100_000 / 4096 - 1) * 4096;
    let tail = 100_000 % 4096;
    let chunk = pool.get();
    assert_eq!(chunk.len(), 4096);
    assert_eq!(chunk[..tail], contents[100_000 - tail..]);
    assert_eq!(chunk[tail..], contents[last_full + tail..last_full + 4096]);
}

#[test]
fn under_zero_a_written_chunk_comes_back_zeroed_and_a_read_one_as_it_was() {
    let (file, contents) = TempFile::new("chunks-zero", 10_000);
    let pool = ChunkPool::builder(1024).manual_sweep().build();
    assert_eq!(pool.reset(), Reset::Zero);
    let read = read_in_chunks(&pool, std::fs::File::open(&file.0).unwrap());
    assert_eq!(read, contents);
    assert_eq!(pool.stats().created, 1);
    let chunk = pool.get();
    assert!(chunk.iter().all(|&b| b == 0), "what the reads left is gone");
    assert_eq!(chunk.len(), 1024);
}

#[test]
fn a_chunk_of_another_length_is_dropped_on_return() {
    let pool = ChunkPool::builder(64).manual_sweep().build();
    pool.put(vec![0; 63].into_boxed_slice());
    let mut chunk = pool.get();
    *chunk = vec![1; 65].into_boxed_slice();
    drop(chunk);
    let stats = pool.stats();
    assert_eq!((stats.discarded, stats.idle), (2, 0), "{stats}");
    assert_eq!(pool.get().len(), 64);
}

#[test]
fn owned_chunks_carry_reads_to_another_thread() {
    // pkg/sftp's concurrent reads: one thread reads chunks, another writes
    // them out in order; each chunk goes back on the writing thread.
    let (file, contents) = TempFile::new("chunks-owned", 50_000);
    let pool = std::sync::Arc::new(ChunkPool::builder(4096).reset(Reset::Keep).build());
    let (send, receive) =
        std::sync::mpsc::sync_channel::<(stashpool::bytes::PooledChunkOwned, usize)>(4);
    let reader = {
        let pool = std::sync::Arc::clone(&pool);
        let mut file = std::fs::File::open(&file.0).unwrap();
        thread::spawn(move || {
            loop {
                let mut chunk = pool.get_owned();
                let n = file.read(&mut chunk).unwrap();
                if n == 0 {
                    return;
                }
                send.send((chunk, n)).unwrap();
            }
        })
    };
    let mut out = Vec::new();
    for (chunk, n) in receive {
        out.extend_from_slice(&chunk[..n]);
    }
    reader.join().unwrap();
    assert_eq!(out, contents);
    let stats = pool.stats();
    assert_eq!(
        stats.gets,
        stats.returned + stats.discarded + stats.rejected,
        "{stats}"
    );
}

#[test]
fn bad_chunk_lengths_are_refused() {
    assert!(catch_unwind(|| ChunkPool::new(0)).is_err());
    assert!(catch_unwind(|| ChunkPool::new(usize::MAX)).is_err());
    assert!(catch_unwind(|| drop(ChunkPool::new(isize::MAX as usize).get())).is_err());
}

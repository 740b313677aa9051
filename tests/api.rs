//! The public surface, written out with its types: every name and signature
//! users program against, so a change to one fails to compile here.

use std::io::{self, BufRead, Read, Write};
use std::sync::Arc;
use std::time::Duration;

use stashpool::bytes::{BytePool, BytePools, StringPool};
use stashpool::io::{BufReaderPool, BufWriterPool, CopyPool, PooledBufReader, PooledBufWriter};
#[cfg(feature = "workers")]
use stashpool::workers::{WorkerPool, WorkerStats};
use stashpool::{LocalPool, LocalPoolBuilder, Pooled, PooledOwned, Recycle, Stats};

struct Zeroed;

impl Recycle<Vec<u8>> for Zeroed {
    fn create(&self) -> Vec<u8> {
        vec![0; 8]
    }
}

static STATIC: LocalPool<Vec<u8>> = LocalPool::new(|| Vec::with_capacity(4096));

#[test]
fn core() {
    fn send_sync<X: Send + Sync>() {}
    send_sync::<LocalPool<Vec<u8>>>();
    send_sync::<LocalPool<Vec<u8>, Zeroed>>();
    fn send_static<X: Send + 'static>() {}
    send_static::<PooledOwned<Vec<u8>, Zeroed>>();

    let builder: LocalPoolBuilder<Vec<u8>, Zeroed> = LocalPool::builder(Zeroed);
    let pool: LocalPool<Vec<u8>, Zeroed> = builder
        .max_stashed(4)
        .max_idle(16)
        .sweep_every(Duration::from_secs(1))
        .manual_sweep()
        .build();
    let guard: Pooled<'_, Vec<u8>, Zeroed> = pool.get();
    let kept: Vec<u8> = Pooled::into_inner(guard);
    pool.put(kept);
    let n: usize = pool.with(|buf: &mut Vec<u8>| buf.len());
    assert_eq!(n, 8);
    pool.sweep();
    let stats: Stats = pool.stats();
    let Stats {
        gets,
        created,
        reused,
        returned,
        discarded,
        rejected,
        trimmed,
        idle,
        ..
    } = stats;
    assert_eq!(
        (
            gets, created, reused, returned, discarded, rejected, trimmed, idle
        ),
        (2, 1, 1, 2, 0, 0, 0, 1)
    );

    let shared = Arc::new(LocalPool::new(Zeroed));
    let owned: PooledOwned<Vec<u8>, Zeroed> = shared.get_owned();
    let _: Vec<u8> = PooledOwned::into_inner(owned);
    STATIC.with(|buf| buf.push(1));
}

#[test]
fn resources() -> io::Result<()> {
    let bytes = BytePool::new(64);
    let b = bytes.get();
    assert!(b.is_empty() && b.capacity() >= 64);
    let bytes = BytePool::builder(64)
        .max_capacity(1024)
        .manual_sweep()
        .build();
    bytes.with(|b| b.push(1));
    let strings = StringPool::new(32);
    assert!(strings.get().capacity() >= 32);
    let classes = BytePools::new(64, 4096);
    let c = classes.get(100);
    assert!(c.is_empty() && c.capacity() >= 100);

    let readers = BufReaderPool::new(64);
    let mut reader: PooledBufReader<'_, &[u8]> = readers.get(&b"a\nb"[..]);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest)?;
    let _inner: &[u8] = reader.into_inner();

    let writers = BufWriterPool::new(64);
    let mut writer: PooledBufWriter<'_, Vec<u8>> = writers.get(Vec::new());
    writer.write_all(b"x")?;
    let out: Vec<u8> = writer.into_inner()?;
    assert_eq!(out, b"x");

    let copies = CopyPool::new(64);
    let mut sink = Vec::new();
    let n: u64 = copies.copy(&mut &b"hello"[..], &mut sink)?;
    assert_eq!(n, 5);
    let all: Pooled<'_, Vec<u8>, _> = copies.read_all(&mut &b"hello"[..])?;
    assert_eq!(&all[..], b"hello");
    Ok(())
}

#[cfg(feature = "image")]
#[test]
fn images() {
    use stashpool::image::{RgbaPool, Subsampling, YCbCrFrame, YCbCrPool};
    let rgba = RgbaPool::new(4, 2);
    let frame: &image::RgbaImage = &rgba.get();
    assert_eq!(frame.dimensions(), (4, 2));
    let ycbcr = YCbCrPool::new(4, 2, Subsampling::S420);
    let frame: &YCbCrFrame = &ycbcr.get();
    let (_y, _cb, _cr, _ys, _cs): (&Vec<u8>, &Vec<u8>, &Vec<u8>, usize, usize) = (
        &frame.y,
        &frame.cb,
        &frame.cr,
        frame.y_stride,
        frame.c_stride,
    );
    let _ = (Subsampling::S444, Subsampling::S422);
}

#[cfg(feature = "mmap")]
#[test]
fn maps() {
    let maps = stashpool::mmap::MmapPool::new(4096);
    let map: &memmap2::MmapMut = &maps.get();
    assert_eq!(map.len(), 4096);
}

#[cfg(feature = "bytes")]
#[test]
fn slabs() {
    let slabs = stashpool::slab::SlabPool::new(4096);
    let piece: bytes::BytesMut = slabs.alloc(10);
    assert!(piece.is_empty() && piece.capacity() >= 10);
}

#[cfg(feature = "workers")]
#[test]
fn workers() {
    let pool = WorkerPool::builder(2)
        .idle_timeout(Duration::from_secs(1))
        .build();
    pool.submit(|| {});
    let _given_back_if_full: Result<(), _> = pool.try_submit(|| {});
    pool.wait();
    let _running: usize = pool.running();
    let stats: WorkerStats = pool.stats();
    let (_completed, _panicked): (u64, u64) = (stats.completed, stats.panicked);
    drop(WorkerPool::new(1));
}

/// A guard of a pool with the default recycler can be named without it,
/// as the pool can: `Pooled<'static, Vec<u8>>` for a `static` pool's guard.
#[test]
fn guards_of_default_pools_are_named_without_their_recycler() {
    static SCRATCH: LocalPool<Vec<u8>> = LocalPool::new(Vec::new);
    fn scratch() -> Pooled<'static, Vec<u8>> {
        SCRATCH.get()
    }
    fn owned(pool: &std::sync::Arc<LocalPool<String>>) -> PooledOwned<String> {
        pool.get_owned()
    }
    scratch().push(1);
    assert_eq!(SCRATCH.stats().returned, 1);
    let pool = std::sync::Arc::new(LocalPool::new(String::new as fn() -> String));
    owned(&pool).push('x');
    assert_eq!(pool.stats().returned, 1);
}

/// Every ready-made pool's owned guard has a name, next to its borrowed
/// guard's, so that a channel or a struct field of them can be written.
#[test]
fn owned_guards_of_ready_made_pools_are_named() {
    use stashpool::bytes::{
        ChunkPool, PooledBufferOwned, PooledChunk, PooledChunkOwned, SizedBufferOwned,
    };
    fn send_static<X: Send + 'static>(guard: X) -> X {
        guard
    }
    let bytes = Arc::new(BytePool::new(64));
    let _: PooledBufferOwned = send_static(bytes.get_owned());
    let strings = Arc::new(StringPool::new(64));
    let _: PooledBufferOwned<String> = send_static(strings.get_owned());
    let classes = Arc::new(BytePools::new(64, 4096));
    let _: SizedBufferOwned = send_static(classes.get_owned(100));
    let chunks = Arc::new(ChunkPool::new(64));
    let _: PooledChunk<'_> = chunks.get();
    let _: PooledChunkOwned = send_static(chunks.get_owned());
    #[cfg(feature = "mmap")]
    {
        use stashpool::mmap::{MmapPool, MmapPools, PooledMmapOwned, SizedMmapOwned};
        let maps = Arc::new(MmapPool::new(4096));
        let _: PooledMmapOwned = send_static(maps.get_owned());
        let classes = Arc::new(MmapPools::new(4096, 1 << 16));
        let _: SizedMmapOwned = send_static(classes.get_owned(100));
    }
    #[cfg(feature = "image")]
    {
        use stashpool::image::{
            PooledFrameOwned, PooledRgbaOwned, PooledYCbCrOwned, RgbaPool, RgbaPools, Subsampling,
            YCbCrFrame, YCbCrPool, YCbCrPools,
        };
        let rgba = Arc::new(RgbaPool::new(4, 4));
        let _: PooledRgbaOwned = send_static(rgba.get_owned());
        let rgbas = Arc::new(RgbaPools::new());
        let _: PooledRgbaOwned<RgbaPools> = send_static(rgbas.get_owned(4, 4));
        let ycbcr = Arc::new(YCbCrPool::new(4, 4, Subsampling::S420));
        let _: PooledYCbCrOwned = send_static(ycbcr.get_owned());
        let _: PooledFrameOwned<YCbCrFrame> = send_static(ycbcr.get_owned());
        let ycbcrs = Arc::new(YCbCrPools::new(Subsampling::S420));
        let _: PooledYCbCrOwned<YCbCrPools> = send_static(ycbcrs.get_owned(4, 4));
    }
}

/// Byte guards fit the `bytes` crate and tokio: `AsRef<[u8]>` whatever the
/// features, and with `bytes`, `BufMut` and `freeze` into `Bytes`.
#[test]
fn byte_guards_are_byte_slices() {
    use stashpool::bytes::ChunkPool;
    fn bytes(guard: &(impl AsRef<[u8]> + AsMut<[u8]>)) -> usize {
        guard.as_ref().len()
    }
    let chunks = Arc::new(ChunkPool::new(16));
    let buffers = Arc::new(BytePool::new(16));
    let classes = Arc::new(BytePools::new(16, 64));
    assert_eq!(bytes(&chunks.get()) + bytes(&chunks.get_owned()), 32);
    assert_eq!(bytes(&buffers.get()) + bytes(&buffers.get_owned()), 0);
    assert_eq!(bytes(&classes.get(10)) + bytes(&classes.get_owned(10)), 0);
    let text = StringPool::new(8);
    let _: &str = text.get().as_ref();
    let _: &std::path::Path = text.get().as_ref();

    #[cfg(feature = "bytes")]
    {
        use ::bytes::{BufMut, Bytes};
        fn buf_mut(_: &mut impl BufMut) {}
        buf_mut(&mut buffers.get());
        buf_mut(&mut buffers.get_owned());
        buf_mut(&mut classes.get(10));
        buf_mut(&mut classes.get_owned(10));
        let _: Bytes = buffers.get_owned().freeze();
        let _: Bytes = classes.get_owned(10).freeze();
        let _: Bytes = chunks.get_owned().freeze(16);
        let _: Bytes = Bytes::from_owner(chunks.get_owned());
        let _: Bytes = Bytes::from_owner(buffers.get_owned());
    }
}

/// Each note of `Stats`' `Display`, with the setting it names, and none on
/// a pool that reuses what comes back.
#[test]
fn stats_notes_name_what_to_change() {
    let reusing = LocalPool::new(Vec::<u8>::new);
    reusing.with(|_| ());
    reusing.with(|_| ());
    assert!(
        !reusing.stats().to_string().contains("note"),
        "{}",
        reusing.stats()
    );

    // Dropped for want of room: max_idle(1), eight objects back at once.
    let bounded = LocalPool::builder(Vec::<u8>::new)
        .max_idle(1)
        .manual_sweep()
        .build();
    for _ in 0..4 {
        let held: Vec<_> = (0..8).map(|_| bounded.get()).collect();
        drop(held);
    }
    let shown = bounded.stats().to_string();
    let room = "were rejected for want of room: max_idle or max_idle_bytes is below";
    assert!(shown.contains(room), "{shown}");
    // And for want of bytes: a budget below one buffer.
    let budgeted = stashpool::bytes::BytePool::builder(4096)
        .max_idle_bytes(1024)
        .build();
    budgeted.with(|_| ());
    let shown = budgeted.stats().to_string();
    assert!(
        shown.contains(room) && shown.contains("idle_bytes=0"),
        "{shown}"
    );

    // Every object taken while the others were in use.
    let live = LocalPool::new(Vec::<u8>::new);
    let held: Vec<_> = (0..5).map(|_| live.get()).collect();
    drop(held);
    let shown = live.stats().to_string();
    assert!(
        shown.contains("no get reused an object (5 gets, 5 made)"),
        "{shown}"
    );

    // Refused by the recycler: the discarded note names Reset::Keep.
    struct Refuse;
    impl Recycle<Vec<u8>> for Refuse {
        fn create(&self) -> Vec<u8> {
            Vec::new()
        }
        fn recycle(&self, _: &mut Vec<u8>) -> bool {
            false
        }
    }
    let refusing = LocalPool::new(Refuse);
    refusing.with(|_| ());
    refusing.with(|_| ());
    let shown = refusing.stats().to_string();
    assert!(
        shown.contains("were discarded (by the recycler, or a Reset policy: Reset::Keep"),
        "{shown}"
    );
}

//! Configured pools: every pool as a plain `static`, built in a `const`
//! context with every knob its builder takes, and `preload`.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use stashpool::bytes::{BytePool, BytePools, ChunkPool, StringPool};
use stashpool::io::{BufReaderPool, BufWriterPool, CopyPool};
use stashpool::{LocalPool, Reset, Stats};

/// Long enough that no background sweep runs during a test.
const EVERY: Duration = Duration::from_secs(3600);

fn buffer() -> Vec<u8> {
    Vec::with_capacity(64)
}

// === every pool, as a static ===

static LOCAL: LocalPool<Vec<u8>> = LocalPool::builder(buffer as fn() -> Vec<u8>)
    .max_stashed(4)
    .max_idle(16)
    .sweep_every(EVERY)
    .preload(2)
    .build();
static BYTES: BytePool = BytePool::builder(64)
    .max_capacity(256)
    .max_stashed(4)
    .max_idle(16)
    .sweep_every(EVERY)
    .manual_sweep()
    .preload(2)
    .build();
static STRINGS: StringPool = StringPool::builder(64)
    .max_capacity(256)
    .max_stashed(4)
    .max_idle(16)
    .sweep_every(EVERY)
    .manual_sweep()
    .preload(2)
    .build();
static CLASSES: BytePools = BytePools::builder(64, 4096)
    .max_stashed(4)
    .max_idle(16)
    .sweep_every(EVERY)
    .manual_sweep()
    .build();
static CHUNKS: ChunkPool = ChunkPool::builder(64)
    .reset(Reset::Keep)
    .max_stashed(4)
    .max_idle(16)
    .sweep_every(EVERY)
    .manual_sweep()
    .preload(2)
    .build();
static READERS: BufReaderPool = BufReaderPool::builder(64)
    .reset(Reset::Keep)
    .max_stashed(4)
    .max_idle(16)
    .sweep_every(EVERY)
    .manual_sweep()
    .preload(2)
    .build();
static WRITERS: BufWriterPool = BufWriterPool::builder(64)
    .max_stashed(4)
    .max_idle(16)
    .sweep_every(EVERY)
    .manual_sweep()
    .preload(2)
    .build();
static COPIES: CopyPool = CopyPool::builder(16 * 1024)
    .max_capacity(256 * 1024)
    .reset(Reset::Keep)
    .max_stashed(4)
    .max_idle(16)
    .sweep_every(EVERY)
    .manual_sweep()
    .build();

/// What a preloaded pool shows on its first call: the preloaded objects
/// made and idle, none handed out.
fn preloaded(stats: Stats, n: u64) {
    assert_eq!(
        (stats.gets, stats.created, stats.returned, stats.idle),
        (0, n, n, n as usize),
        "{stats}"
    );
}

#[test]
fn a_configured_local_pool_is_a_static() {
    preloaded(LOCAL.stats(), 2);
    let debug = format!("{LOCAL:?}");
    assert!(debug.contains("max_stashed: 4"), "{debug}");
    assert!(debug.contains("max_idle: 16"), "{debug}");
    assert!(debug.contains("sweep_every: Some(3600s)"), "{debug}");
    LOCAL.with(|buf| buf.push(1));
    assert_eq!(LOCAL.stats().created, 2, "a preloaded object served");
}

#[test]
fn configured_byte_pools_are_statics() {
    preloaded(BYTES.stats(), 2);
    assert_eq!((BYTES.capacity(), BYTES.max_capacity()), (64, 256));
    BYTES.with(|buf| buf.extend_from_slice(&[1; 200]));
    assert_eq!(BYTES.stats().discarded, 0, "kept up to max_capacity");

    preloaded(STRINGS.stats(), 2);
    assert_eq!(STRINGS.max_capacity(), 256);
    STRINGS.with(|s| s.push_str("text"));

    assert_eq!(
        CLASSES.classes().collect::<Vec<_>>(),
        [
            64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896, 1024,
            1280, 1536, 1792, 2048, 2560, 3072, 3584, 4096
        ]
    );
    CLASSES.with(100, |buf| buf.push(1));
    assert_eq!(CLASSES.class_stats(100).unwrap().idle, 1);

    preloaded(CHUNKS.stats(), 2);
    assert_eq!(CHUNKS.reset(), Reset::Keep);
    CHUNKS.get()[..4].copy_from_slice(b"kept");
    assert_eq!(CHUNKS.stats().created, 2);
    let chunks = [CHUNKS.get(), CHUNKS.get()];
    assert!(
        chunks.iter().any(|chunk| &chunk[..4] == b"kept"),
        "Reset::Keep"
    );
}

#[test]
fn configured_io_pools_are_statics() {
    use std::io::{Read, Write};

    preloaded(READERS.stats(), 2);
    assert_eq!((READERS.capacity(), READERS.reset()), (64, Reset::Keep));
    let mut text = String::new();
    READERS
        .get(&b"read through a static"[..])
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(text, "read through a static");

    preloaded(WRITERS.stats(), 2);
    let mut out = Vec::new();
    WRITERS.get(&mut out).write_all(b"written").unwrap();
    assert_eq!(out, b"written");

    assert_eq!(
        (COPIES.capacity(), COPIES.reset()),
        (16 * 1024, Reset::Keep)
    );
    let body = COPIES.read_all(&mut &[5u8; 100_000][..]).unwrap();
    assert_eq!(body.len(), 100_000);
    drop(body);
    assert_eq!(COPIES.stats().discarded, 0, "kept up to max_capacity");
}

#[cfg(feature = "image")]
#[test]
fn configured_frame_pools_are_statics() {
    use stashpool::image::{
        GrayPool, GrayPools, RgbaPool, RgbaPools, Subsampling, YCbCrPool, YCbCrPools,
    };

    static RGBA: RgbaPool = RgbaPool::builder(8, 4)
        .reset(Reset::Keep)
        .max_stashed(4)
        .max_idle(16)
        .sweep_every(EVERY)
        .manual_sweep()
        .preload(2)
        .build();
    static RGBAS: RgbaPools = RgbaPools::builder()
        .reset(Reset::Keep)
        .max_stashed(4)
        .max_idle(16)
        .sweep_every(EVERY)
        .manual_sweep()
        .build();
    static GRAY: GrayPool = GrayPool::builder(8, 4)
        .reset(Reset::Keep)
        .max_stashed(4)
        .max_idle(16)
        .sweep_every(EVERY)
        .manual_sweep()
        .preload(2)
        .build();
    static GRAYS: GrayPools = GrayPools::builder()
        .reset(Reset::Keep)
        .max_stashed(4)
        .max_idle(16)
        .sweep_every(EVERY)
        .manual_sweep()
        .build();
    static YCBCR: YCbCrPool = YCbCrPool::builder(8, 4, Subsampling::S420)
        .reset(Reset::Keep)
        .max_stashed(4)
        .max_idle(16)
        .sweep_every(EVERY)
        .manual_sweep()
        .preload(2)
        .build();
    static YCBCRS: YCbCrPools = YCbCrPools::builder(Subsampling::S422)
        .reset(Reset::Keep)
        .max_stashed(4)
        .max_idle(16)
        .sweep_every(EVERY)
        .manual_sweep()
        .build();

    preloaded(RGBA.stats(), 2);
    preloaded(GRAY.stats(), 2);
    preloaded(YCBCR.stats(), 2);
    for reset in [
        RGBA.reset(),
        RGBAS.reset(),
        GRAY.reset(),
        GRAYS.reset(),
        YCBCR.reset(),
        YCBCRS.reset(),
    ] {
        assert_eq!(reset, Reset::Keep);
    }
    assert_eq!(RGBA.get().dimensions(), (8, 4));
    assert_eq!(RGBAS.get(3, 3).dimensions(), (3, 3));
    assert_eq!(GRAY.get().len(), 8 * 4);
    GRAYS.with(5, 5, |frame| frame.fill(9));
    assert!(GRAYS.get(5, 5).iter().all(|&v| v == 9), "Reset::Keep");
    assert_eq!(YCBCR.get().cb.len(), 4 * 2);
    assert_eq!(YCBCRS.subsampling(), Subsampling::S422);
}

#[cfg(feature = "mmap")]
#[test]
fn configured_map_pools_are_statics() {
    use stashpool::mmap::{MmapPool, MmapPools};

    static MAPS: MmapPool = MmapPool::builder(4096)
        .reset(Reset::Keep)
        .max_stashed(4)
        .max_idle(16)
        .sweep_every(EVERY)
        .manual_sweep()
        .preload(2)
        .build();
    static MAP_CLASSES: MmapPools = MmapPools::builder(4096, 1 << 16)
        .reset(Reset::Keep)
        .max_stashed(4)
        .max_idle(16)
        .sweep_every(EVERY)
        .manual_sweep()
        .build();

    preloaded(MAPS.stats(), 2);
    assert_eq!((MAPS.capacity(), MAPS.reset()), (4096, Reset::Keep));
    MAPS.get()[0] = 1;
    assert_eq!(MAP_CLASSES.get(5000).len(), 8192);
    assert_eq!(MAP_CLASSES.reset(), Reset::Keep);
}

#[cfg(feature = "bytes")]
#[test]
fn a_configured_slab_pool_is_a_static() {
    use stashpool::slab::SlabPool;

    static SLABS: SlabPool = SlabPool::builder(4096)
        .max_stashed(4)
        .max_idle(16)
        .sweep_every(EVERY)
        .manual_sweep()
        .preload(2)
        .build();

    preloaded(SLABS.stats(), 2);
    assert_eq!(SLABS.slab_capacity(), 4096);
    let piece = SLABS.alloc(100);
    assert!(piece.capacity() >= 100);
    assert_eq!(SLABS.stats().created, 2, "carved from a preloaded slab");
}

/// A bad parameter in a `static` fails the build; at run time, `build`
/// panics with the pool's message, as `new` does.
#[test]
fn a_const_build_refuses_what_new_refuses() {
    let panicked = std::panic::catch_unwind(|| ChunkPool::builder(0).build());
    let payload = panicked.unwrap_err();
    let message = match payload.downcast_ref::<String>() {
        Some(message) => message.as_str(),
        None => payload.downcast_ref::<&str>().copied().unwrap_or_default(),
    };
    assert!(message.starts_with("stashpool:"), "{message}");
    assert!(std::panic::catch_unwind(|| BytePool::builder(64).max_capacity(32).build()).is_err());
    assert!(
        std::panic::catch_unwind(|| {
            LocalPool::builder(buffer as fn() -> Vec<u8>).sweep_every(Duration::ZERO)
        })
        .is_err()
    );
}

// === preload ===

#[test]
fn preload_fills_the_pool_at_its_first_call_and_sweeps_trim_it() {
    let pool = LocalPool::builder(|| vec![0u8; 1024])
        .preload(4)
        .manual_sweep()
        .build();
    // `stats` is the first call: the pool is made and filled by it.
    preloaded(pool.stats(), 4);
    pool.sweep();
    assert_eq!(pool.stats().idle, 4, "survives one sweep");
    pool.sweep();
    let stats = pool.stats();
    assert_eq!((stats.idle, stats.trimmed), (0, 4), "dropped by the second");
    drop(pool.get());
    assert_eq!(pool.stats().created, 5, "trimmed, so made anew");
}

#[test]
fn every_first_call_fills_a_preloaded_pool() {
    fn fresh() -> LocalPool<Vec<u8>> {
        LocalPool::builder(Vec::new as fn() -> Vec<u8>)
            .preload(3)
            .manual_sweep()
            .build()
    }
    let firsts: [fn(&LocalPool<Vec<u8>>); 6] = [
        |pool| drop(pool.get()),
        |pool| pool.with(|_| ()),
        |pool| drop(pool.try_get().expect("a preloaded object")),
        |pool| pool.put(Vec::new()),
        |pool| pool.sweep(),
        |pool| pool.clear(),
    ];
    for (i, first) in firsts.into_iter().enumerate() {
        let pool = fresh();
        first(&pool);
        assert_eq!(pool.stats().created, 3, "first call {i}");
    }
    let pool = Arc::new(fresh());
    drop(pool.get_owned());
    assert_eq!(pool.stats().created, 3);
}

#[test]
fn preloaded_objects_serve_other_threads_first_gets() {
    let pool = Arc::new(
        LocalPool::builder(|| vec![0u8; 64])
            .preload(4)
            .manual_sweep()
            .build(),
    );
    preloaded(pool.stats(), 4);
    let held: Vec<_> = (0..4)
        .map(|_| {
            let pool = Arc::clone(&pool);
            thread::spawn(move || Arc::clone(&pool).get_owned())
                .join()
                .unwrap()
        })
        .collect();
    let stats = pool.stats();
    assert_eq!((stats.gets, stats.created, stats.reused), (4, 4, 4));
    drop(held);
}

/// Threads that race to make a preloaded pool's first call make exactly
/// its objects: one thread fills the pool before any can take from it, so
/// none of the first `n` gets, on any thread, makes an object. A slow
/// `create` widens the window in which a racer could find it empty.
#[test]
fn racing_first_calls_make_exactly_the_preloaded_objects() {
    use std::sync::Barrier;
    use std::sync::atomic::{AtomicUsize, Ordering};
    const THREADS: usize = 8;
    static MADE: AtomicUsize = AtomicUsize::new(0);
    fn slow() -> Vec<u8> {
        MADE.fetch_add(1, Ordering::Relaxed);
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_micros(200) {
            std::hint::spin_loop();
        }
        vec![0; 64]
    }
    for round in 0..200 {
        MADE.store(0, Ordering::Relaxed);
        let pool = LocalPool::builder(slow as fn() -> Vec<u8>)
            .preload(THREADS)
            .manual_sweep()
            .build();
        let (start, got) = (Barrier::new(THREADS), Barrier::new(THREADS));
        thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    start.wait();
                    let held = pool.get();
                    // Every get is made before any object comes back.
                    got.wait();
                    drop(held);
                });
            }
        });
        assert_eq!(MADE.load(Ordering::Relaxed), THREADS, "round {round}");
        let stats = pool.stats();
        assert_eq!(
            (stats.created, stats.gets),
            (THREADS as u64, THREADS as u64)
        );
    }
}

/// A `create` that uses the pool it is preloading gets a clear panic, not
/// a thread waiting for itself; the pool is made at the next call.
#[test]
fn a_create_that_uses_the_pool_it_preloads_panics() {
    static POOL: LocalPool<u64> = LocalPool::builder(reentrant as fn() -> u64)
        .preload(1)
        .manual_sweep()
        .build();
    static REENTER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);
    fn reentrant() -> u64 {
        if REENTER.swap(false, std::sync::atomic::Ordering::Relaxed) {
            return POOL.stats().created;
        }
        7
    }
    let panic = std::panic::catch_unwind(|| POOL.stats()).expect_err("re-entered");
    let message = panic.downcast_ref::<String>().map_or("", String::as_str);
    assert!(message.contains("preloading"), "{message}");
    // The panic left no claim held: the next call makes and fills the pool.
    assert_eq!(*POOL.get(), 7);
    assert_eq!(POOL.stats().created, 1);
}

/// The same through another preloading pool: `OUTER`'s `create` makes
/// `INNER`, whose `create` uses `OUTER`. The panic names the re-entry
/// rather than leave the thread waiting for itself.
#[test]
fn a_create_that_reaches_its_pool_through_another_preloading_pool_panics() {
    static OUTER: LocalPool<u64> = LocalPool::builder(outer as fn() -> u64)
        .preload(1)
        .manual_sweep()
        .build();
    static INNER: LocalPool<u64> = LocalPool::builder(inner as fn() -> u64)
        .preload(1)
        .manual_sweep()
        .build();
    fn outer() -> u64 {
        *INNER.get()
    }
    fn inner() -> u64 {
        OUTER.stats().created
    }
    let panic = std::panic::catch_unwind(|| OUTER.stats()).expect_err("re-entered");
    let message = panic.downcast_ref::<String>().map_or("", String::as_str);
    assert!(message.contains("preloading"), "{message}");
}

/// A `create` that panics while preloading leaves what it made pooled,
/// and the first call panics with it.
#[test]
fn a_panicking_create_keeps_what_it_preloaded() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    fn third_panics() -> u64 {
        let n = CALLS.fetch_add(1, Ordering::Relaxed);
        assert_ne!(n, 2, "the third create panics");
        n as u64
    }
    let pool = LocalPool::builder(third_panics as fn() -> u64)
        .preload(4)
        .manual_sweep()
        .build();
    assert!(std::panic::catch_unwind(|| pool.stats()).is_err());
    let stats = pool.stats();
    assert_eq!((stats.created, stats.idle), (2, 2), "made before the panic");
}

#[test]
fn preload_is_bounded_by_max_idle() {
    let pool = LocalPool::builder(|| 0u64)
        .preload(5)
        .max_idle(2)
        .manual_sweep()
        .build();
    let stats = pool.stats();
    assert_eq!(
        (stats.created, stats.returned, stats.rejected, stats.idle),
        (5, 2, 3, 2)
    );
}

#[test]
fn a_preloaded_resource_pool_counts_its_objects_made_before_any_get() {
    let pool = ChunkPool::builder(4096).preload(4).manual_sweep().build();
    preloaded(pool.stats(), 4);
    let chunks: Vec<_> = (0..4).map(|_| pool.get()).collect();
    assert_eq!(pool.stats().created, 4);
    drop(chunks);
    pool.sweep();
    pool.sweep();
    assert_eq!(pool.stats().idle, 0, "gone after two idle sweeps");
}

//! Every ready-made pool answers the same calls: `get`, `try_get`,
//! `get_owned` on an `Arc`, `with` and `put` (the multi-size pools with the
//! size first), and, as a `Pool`, `sweep`, `clear` and `stats`, so one list
//! sweeps, clears and reports them all, whatever they hold.
#![cfg(all(feature = "image", feature = "mmap", feature = "bytes"))]

use std::io::{self, BufRead, Write};
use std::sync::Arc;

use stashpool::bytes::{BytePool, BytePools, StringPool};
use stashpool::image::{RgbaPool, RgbaPools, Subsampling, YCbCrPool, YCbCrPools};
use stashpool::io::{BufReaderPool, BufWriterPool, CopyPool};
use stashpool::mmap::{MmapPool, MmapPools};
use stashpool::slab::SlabPool;
use stashpool::{Pool, Pooled, SizedGuard, Stats};

#[test]
fn every_resource_pool_sweeps_clears_and_reports_through_the_trait() {
    let bytes = BytePool::builder(64).manual_sweep().build();
    let strings = StringPool::builder(64).manual_sweep().build();
    let sized = BytePools::builder(64, 1024).manual_sweep().build();
    let readers = BufReaderPool::builder(64).manual_sweep().build();
    let writers = BufWriterPool::builder(64).manual_sweep().build();
    let copies = CopyPool::builder(64).manual_sweep().build();
    let rgba = RgbaPool::builder(2, 2).manual_sweep().build();
    let ycbcr = YCbCrPool::builder(2, 2, Subsampling::S420)
        .manual_sweep()
        .build();
    let maps = MmapPool::builder(4096).manual_sweep().build();
    let slabs = SlabPool::builder(4096).manual_sweep().build();
    let map_classes = MmapPools::builder(4096, 1 << 16).manual_sweep().build();
    let rgba_shapes = RgbaPools::builder().manual_sweep().build();
    let ycbcr_shapes = YCbCrPools::builder(Subsampling::S444)
        .manual_sweep()
        .build();

    drop(bytes.get());
    drop(strings.get());
    drop(sized.get(100));
    drop(readers.get(io::empty()));
    drop(writers.get(io::sink()));
    drop(copies.read_all(&mut io::empty()).unwrap());
    drop(rgba.get());
    drop(ycbcr.get());
    drop(maps.get());
    drop(slabs.alloc(8));
    drop(map_classes.get(5000));
    drop(rgba_shapes.get(3, 3));
    drop(ycbcr_shapes.get(3, 3));

    let pools: Vec<&dyn Pool> = vec![
        &bytes,
        &strings,
        &sized,
        &readers,
        &writers,
        &copies,
        &rgba,
        &ycbcr,
        &maps,
        &slabs,
        &map_classes,
        &rgba_shapes,
        &ycbcr_shapes,
    ];
    let total: Stats = pools.iter().map(|pool| pool.stats()).sum();
    assert_eq!(total.idle, pools.len(), "one idle object each");
    assert_eq!(total.created, pools.len() as u64);

    pools.iter().for_each(|pool| pool.sweep());
    let total: Stats = pools.iter().map(|pool| pool.stats()).sum();
    assert_eq!(total.idle, pools.len(), "one sweep keeps them");

    pools.iter().for_each(|pool| pool.clear());
    let total: Stats = pools.iter().map(|pool| pool.stats()).sum();
    assert_eq!(total.idle, 0, "clear drops every idle object");
    // The inherent methods are the trait's.
    assert_eq!(rgba_shapes.stats(), Pool::stats(&rgba_shapes));
}

/// One program over a pool, the same for every kind: each call once, with
/// the books checked after each step. `$pool` must be made with manual
/// sweeps (so that only this program's calls move the counters), `$into`
/// is the guard's `into_inner`, and `$($size),*` the size arguments of a
/// multi-size pool (none for a pool of one size).
macro_rules! same_calls {
    ($pool:expr, $into:path $(, $size:expr)*) => {{
        let pool = Arc::new($pool);
        assert!(pool.try_get($($size),*).is_none(), "try_get never makes one");
        drop(pool.get($($size),*));
        let stats = pool.stats();
        assert_eq!((stats.created, stats.returned, stats.idle), (1, 1, 1));

        let object = $into(pool.try_get($($size),*).expect("the object just returned"));
        assert_eq!(pool.stats().idle, 0);
        pool.put(object);
        assert_eq!(pool.stats().idle, 1, "put takes it back");

        let owned = pool.get_owned($($size),*);
        std::thread::spawn(move || drop(owned)).join().unwrap();
        pool.with($($size,)* |object| {
            let _ = &*object;
        });
        let stats = pool.stats();
        assert_eq!(
            (stats.created, stats.reused, stats.returned, stats.discarded),
            (1, 3, 4, 0),
            "one object served every call"
        );

        pool.sweep();
        assert_eq!(pool.stats().idle, 1, "one sweep keeps it");
        pool.clear();
        assert_eq!(pool.stats().idle, 0);
        let as_pool: &dyn Pool = &*pool;
        assert_eq!(as_pool.stats(), pool.stats());
    }};
}

#[test]
fn every_object_pool_answers_the_same_calls() {
    same_calls!(
        BytePool::builder(64).manual_sweep().build(),
        Pooled::into_inner
    );
    same_calls!(
        StringPool::builder(64).manual_sweep().build(),
        Pooled::into_inner
    );
    same_calls!(
        RgbaPool::builder(4, 4).manual_sweep().build(),
        Pooled::into_inner
    );
    same_calls!(
        YCbCrPool::builder(4, 4, Subsampling::S420)
            .manual_sweep()
            .build(),
        Pooled::into_inner
    );
    same_calls!(
        MmapPool::builder(4096).manual_sweep().build(),
        Pooled::into_inner
    );
    same_calls!(
        BytePools::builder(64, 1024).manual_sweep().build(),
        SizedGuard::into_inner,
        100
    );
    same_calls!(
        MmapPools::builder(4096, 1 << 16).manual_sweep().build(),
        SizedGuard::into_inner,
        5000
    );
    same_calls!(
        RgbaPools::builder().manual_sweep().build(),
        Pooled::into_inner,
        4,
        3
    );
    same_calls!(
        YCbCrPools::builder(Subsampling::S444)
            .manual_sweep()
            .build(),
        Pooled::into_inner,
        4,
        3
    );
}

/// A `static` pool's guard has a name a function can return.
fn scratch() -> Pooled<'static, Vec<u8>> {
    static SCRATCH: stashpool::LocalPool<Vec<u8>> = stashpool::LocalPool::new(Vec::new);
    SCRATCH.get()
}

#[test]
fn the_io_pools_lend_through_get_and_with() {
    assert!(scratch().is_empty());

    let readers = BufReaderPool::builder(64).manual_sweep().build();
    let lines = readers.with(&b"a\nb\n"[..], |reader| reader.lines().count());
    assert_eq!(lines, 2);
    let mut line = String::new();
    readers.get(&b"c\n"[..]).read_line(&mut line).unwrap();
    assert_eq!(line, "c\n");

    let writers = BufWriterPool::builder(64).manual_sweep().build();
    let mut out = Vec::new();
    writers.with(&mut out, |w| w.write_all(b"x")).unwrap();
    writers.get(&mut out).write_all(b"y").unwrap();
    assert_eq!(out, b"xy");

    for stats in [readers.stats(), writers.stats()] {
        assert_eq!((stats.created, stats.reused, stats.returned), (1, 1, 2));
    }
}

#[test]
fn a_written_object_goes_back_through_recycle_and_a_read_one_does_not() {
    let maps = MmapPool::builder(4096).manual_sweep().build();
    let mut map = maps.get();
    assert_eq!(map[0], 0); // a read
    assert!(!Pooled::is_written(&map));
    map[0] = 7;
    assert!(Pooled::is_written(&map));
    drop(map);
    let map = maps.get();
    assert_eq!(map[0], 0, "zeroed on return: it was written");
    assert!(!Pooled::is_written(&map), "a returned map starts unwritten");

    // Under `Keep` nothing is zeroed, written or not.
    let kept = MmapPool::builder(4096)
        .reset(stashpool::Reset::Keep)
        .manual_sweep()
        .build();
    kept.with(|map| map[0] = 7);
    assert_eq!(kept.get()[0], 7);
}

#[test]
fn a_multi_size_pool_keeps_what_it_is_put_where_it_fits_and_discards_the_rest() {
    let bytes = BytePools::builder(64, 1024).manual_sweep().build();
    for capacity in [0, 10, 96, 100, 192, 200, 5000] {
        bytes.put(Vec::with_capacity(capacity));
    }
    // 96 and 192 are classes; 100 and 200 would give a request of their
    // class more room than the class has; 0 and 10 are below the smallest
    // class, 5000 above the largest.
    assert_eq!((bytes.stats().idle, bytes.stats().discarded), (2, 5));
    assert_eq!(bytes.class_stats(96).unwrap().idle, 1);
    assert_eq!(bytes.class_stats(192).unwrap().idle, 1);

    let maps = MmapPools::builder(4096, 1 << 14).manual_sweep().build();
    let exact = SizedGuard::into_inner(maps.get(8192));
    maps.put(exact);
    maps.put(memmap2::MmapMut::map_anon(5000).unwrap()); // no class is 5000 bytes
    assert_eq!((maps.stats().idle, maps.stats().discarded), (1, 1));
}

/// A multi-size pool preloads each class or shape on its first use (its
/// counters included), and a byte budget stops the preload where it is
/// full.
#[test]
fn multi_size_pools_preload_each_class_on_its_first_use() {
    let bytes = BytePools::builder(1024, 1 << 16)
        .preload(3)
        .max_idle_bytes(4 * 2048)
        .manual_sweep()
        .build();
    let buf = bytes.get(2000);
    let class = bytes.class_stats(2000).unwrap();
    assert_eq!(
        (class.created, class.idle),
        (3, 2),
        "of 3, one taken: {class:?}"
    );
    drop(buf);
    // Three 1024-byte buffers: the budget holds two more after 3 x 2048.
    let small = bytes.class_stats(1024).unwrap();
    assert_eq!(
        (small.created, small.idle, small.rejected),
        (3, 2, 1),
        "{small:?}"
    );
    // `stats` reaches every class, and the budget is full: the other
    // classes' preloads are all refused.
    let stats = bytes.stats();
    assert_eq!(stats.idle_bytes, 4 * 2048, "{stats:?}");
    assert_eq!(stats.created, 3 * bytes.classes().count() as u64);

    let frames = RgbaPools::builder().preload(2).manual_sweep().build();
    drop(frames.get(8, 8));
    let stats = frames.stats();
    assert_eq!((stats.created, stats.idle), (2, 2), "{stats:?}");
}

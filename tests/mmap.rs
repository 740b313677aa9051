//! `MmapPool` and `MmapPools`: reuse, reset policies, length checks,
//! bad input.
#![cfg(feature = "mmap")]

use std::panic::catch_unwind;

use memmap2::MmapMut;
use stashpool::mmap::{MmapPool, MmapPools};
use stashpool::{Pool, Pooled, Reset, SizedGuard};

fn pool(len: usize) -> MmapPool {
    MmapPool::builder(len).manual_sweep().build()
}

#[test]
fn maps_have_the_pool_length_and_start_zeroed() {
    let pool = pool(3 * 4096 + 5);
    let map = pool.get();
    assert_eq!(map.len(), 3 * 4096 + 5);
    assert!(map.iter().all(|&b| b == 0));
}

#[test]
fn a_returned_map_is_reused_and_zeroed() {
    let pool = pool(64 * 1024);
    let mut map = pool.get();
    map.fill(0x5A);
    let ptr = map.as_ptr();
    drop(map);

    let map = pool.get();
    assert_eq!(map.as_ptr(), ptr, "the same mapping comes back");
    assert!(
        map.iter().all(|&b| b == 0),
        "what the last user wrote leaked"
    );
    let stats = pool.stats();
    assert_eq!((stats.created, stats.reused), (1, 1));
}

#[test]
fn a_map_swapped_for_another_length_is_dropped() {
    let pool = pool(8192);
    pool.with(|map| *map = MmapMut::map_anon(4096).unwrap());
    let stats = pool.stats();
    assert_eq!((stats.discarded, stats.idle), (1, 0));
    assert_eq!(pool.get().len(), 8192);
}

#[test]
fn two_sweeps_unmap_idle_maps() {
    let pool = pool(4096);
    drop((pool.get(), pool.get(), pool.get()));
    pool.sweep();
    assert_eq!(pool.stats().idle, 3);
    pool.sweep();
    assert_eq!(pool.stats().idle, 0);
    assert_eq!(pool.stats().trimmed, 3);
}

#[test]
fn maps_work_across_threads() {
    let pool = MmapPool::new(16 * 1024);
    std::thread::scope(|s| {
        for id in 1..=2u8 {
            let pool = &pool;
            s.spawn(move || {
                for _ in 0..50 {
                    let mut map = pool.get();
                    assert!(map.iter().all(|&b| b == 0));
                    map.fill(id);
                }
            });
        }
    });
    assert!(pool.stats().created <= 2 + 1);
}

#[test]
fn bad_lengths_are_refused() {
    assert!(catch_unwind(|| MmapPool::new(0)).is_err());
    assert!(catch_unwind(|| MmapPool::new(usize::MAX)).is_err());
    assert!(catch_unwind(|| MmapPool::builder(0).build()).is_err());
}

#[test]
fn a_map_the_kernel_refuses_panics_instead_of_aborting() {
    let pool = MmapPool::new(isize::MAX as usize);
    let err = catch_unwind(|| drop(pool.get())).unwrap_err();
    let msg = err.downcast_ref::<String>().unwrap();
    assert!(msg.starts_with("stashpool: cannot map"), "{msg}");
    assert!(format!("{pool:?}").contains("MmapPool"));
}

#[test]
fn under_reset_keep_a_map_keeps_its_contents() {
    let pool = MmapPool::builder(4096)
        .reset(Reset::Keep)
        .manual_sweep()
        .build();
    pool.get()[100] = 42;
    let map = pool.get();
    assert_eq!(pool.stats().reused, 1);
    assert_eq!(map[100], 42, "kept, as in Go's bp");
}

#[test]
fn under_reset_zero_a_map_only_read_is_not_marked() {
    let pool = pool(4096);
    let map = pool.get();
    assert_eq!(map.iter().map(|&b| b as u32).sum::<u32>(), 0);
    assert!(!Pooled::is_written(&map));
    drop(map);
    pool.with(|map| map[7] = 1);
    assert_eq!(pool.get()[7], 0);
}

// === MmapPools ===

#[test]
fn requests_go_to_the_smallest_fitting_class() {
    let pool = MmapPools::builder(4096, 100_000).manual_sweep().build();
    assert_eq!(
        pool.classes().collect::<Vec<_>>(),
        [4096, 8192, 16384, 32768, 65536, 131072]
    );
    for (len, class) in [(1, 4096), (4096, 4096), (4097, 8192), (100_000, 131072)] {
        let map = pool.get(len);
        assert_eq!(map.len(), class, "{len} bytes");
        assert!(SizedGuard::is_pooled(&map));
    }
    let alone = pool.get(100_001);
    assert_eq!(alone.len(), 100_001);
    assert!(!SizedGuard::is_pooled(&alone));
    drop(alone);
    assert_eq!(pool.stats().idle, 3, "one map per class used, none alone");
    assert_eq!(pool.class_stats(5000).unwrap().idle, 1);
    assert_eq!(pool.max_capacity(), 100_000);
}

#[test]
fn class_maps_are_reused_and_reset() {
    let pool = MmapPools::builder(4096, 1 << 20).manual_sweep().build();
    let mut map = pool.get(10_000);
    map[9_999] = 5;
    drop(map);
    let map = pool.get(9_000);
    assert_eq!(pool.stats().reused, 1);
    assert_eq!(map[9_999], 0);
    drop(map);

    let keep = MmapPools::builder(4096, 1 << 20).reset(Reset::Keep).build();
    keep.with(10_000, |map| map[9_999] = 5);
    assert_eq!(keep.get(10_000)[9_999], 5);
    assert_eq!(keep.reset(), Reset::Keep);
}

#[test]
fn class_pools_sweep_and_clear_every_class() {
    let pool = MmapPools::builder(4096, 1 << 20).manual_sweep().build();
    drop((pool.get(10), pool.get(50_000)));
    pool.sweep();
    pool.sweep();
    assert_eq!(pool.stats().trimmed, 2);
    drop((pool.get(10), pool.get(50_000)));
    let as_pool: &dyn Pool = &pool;
    assert_eq!(as_pool.stats().idle, 2);
    as_pool.clear();
    assert_eq!(pool.stats().idle, 0);
    let kept: MmapMut = SizedGuard::into_inner(pool.get(10));
    assert_eq!(kept.len(), 4096);
    assert!(format!("{pool:?}").contains("MmapPools"));
}

#[test]
fn bad_class_bounds_are_refused() {
    let message = |f: fn()| {
        let err = catch_unwind(f).unwrap_err();
        err.downcast_ref::<String>().unwrap().clone()
    };
    let rule = "stashpool: MmapPools: the smallest class must be non-zero, at most the \
                largest, and the largest at most 2^(usize::BITS - 2) bytes";
    assert_eq!(message(|| drop(MmapPools::new(0, 4096))), rule);
    assert_eq!(message(|| drop(MmapPools::new(8192, 4096))), rule);
    assert_eq!(message(|| drop(MmapPools::new(1, usize::MAX))), rule);
}

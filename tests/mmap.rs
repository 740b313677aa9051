//! `MmapPool`: reuse, zeroing, length checks, bad input.
#![cfg(feature = "mmap")]

use std::panic::catch_unwind;

use memmap2::MmapMut;
use stashpool::mmap::MmapPool;

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
    assert_eq!((stats.rejected, stats.idle), (1, 0));
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

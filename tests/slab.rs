//! `SlabPool`: carving, independence of pieces, slab turnover, bad input.
#![cfg(feature = "bytes")]

use std::panic::catch_unwind;

use bytes::BufMut;
use stashpool::slab::SlabPool;

fn pool(slab_capacity: usize) -> SlabPool {
    SlabPool::builder(slab_capacity).manual_sweep().build()
}

#[test]
fn buffers_are_empty_with_at_least_the_room_asked_for() {
    let pool = pool(1024);
    for len in [0, 1, 7, 8, 100, 511, 512, 1000, 5000] {
        let buf = pool.alloc(len);
        assert_eq!(buf.len(), 0, "len {len}");
        assert!(buf.capacity() >= len, "len {len}");
    }
}

#[test]
fn small_buffers_are_carved_side_by_side_from_one_slab() {
    let pool = pool(4096);
    let pieces: Vec<_> = [10, 30, 8, 100].iter().map(|&n| pool.alloc(n)).collect();
    let base = pieces[0].as_ptr() as usize;
    let offsets: Vec<usize> = pieces.iter().map(|p| p.as_ptr() as usize - base).collect();
    // Each piece starts where the previous one's 8-byte-rounded room ends.
    assert_eq!(offsets, [0, 16, 48, 56]);
    let stats = pool.stats();
    assert_eq!((stats.created, stats.reused), (1, 3));
}

#[test]
fn requests_of_half_a_slab_or_more_are_allocated_alone() {
    let pool = pool(1024);
    let alone = pool.alloc(512);
    assert!(alone.capacity() >= 512);
    assert_eq!(pool.stats(), Default::default(), "no slab was touched");
    let carved = pool.alloc(511);
    assert!(carved.capacity() >= 511);
    assert_eq!(pool.stats().created, 1);
}

#[test]
fn pieces_are_independent_even_when_they_grow() {
    let pool = pool(1024);
    let mut a = pool.alloc(8);
    let mut b = pool.alloc(8);
    a.put_u64(u64::MAX);
    b.put_u64(7);
    a.put_slice(&[0xAB; 100]); // past its room: reallocates, b untouched
    assert_eq!(&b[..], &7u64.to_be_bytes());
    assert_eq!(a.len(), 108);
    assert!(a[8..].iter().all(|&x| x == 0xAB));
    let c = pool.alloc(8);
    assert!(c.is_empty(), "a new piece never shows earlier bytes");
}

#[test]
fn a_new_slab_starts_when_the_current_one_is_used_up() {
    let pool = pool(1024);
    // 9 pieces of 104 bytes use 936 bytes; the 10th does not fit in the
    // remaining 88 and starts a second slab.
    let pieces: Vec<_> = (0..10).map(|_| pool.alloc(100)).collect();
    let stats = pool.stats();
    assert_eq!((stats.created, stats.reused), (2, 9));
    let first_slab = pieces[0].as_ptr() as usize;
    let tenth = pieces[9].as_ptr() as usize;
    assert!(tenth < first_slab || tenth >= first_slab + 1024);
}

#[test]
fn a_used_up_slab_is_given_up_while_its_pieces_live() {
    let pool = pool(64);
    let a = pool.alloc(31); // 32 bytes of room
    let b = pool.alloc(31); // the other 32: nothing left
    let stats = pool.stats();
    // Kept: it may be reclaimed once its pieces drop.
    assert_eq!((stats.created, stats.discarded, stats.idle), (1, 0, 1));
    let c = pool.alloc(31); // `a` and `b` still hold the first slab
    let stats = pool.stats();
    assert_eq!((stats.created, stats.discarded, stats.idle), (2, 1, 1));
    let (a, c) = (a.as_ptr() as usize, c.as_ptr() as usize);
    assert!(c < a || c >= a + 64, "the third piece is in another slab");
    drop(b);
}

#[test]
fn a_slab_is_reused_whole_once_its_pieces_have_dropped() {
    let pool = pool(1024);
    let first = pool.alloc(100);
    let start = first.as_ptr();
    drop(first);
    // Eight more pieces of 104 bytes leave 88, too few for a tenth.
    for _ in 0..8 {
        drop(pool.alloc(100));
    }
    let again = pool.alloc(100);
    assert_eq!(again.as_ptr(), start, "carving starts over at the front");
    assert!(again.is_empty() && again.capacity() >= 100);
    let stats = pool.stats();
    assert_eq!((stats.created, stats.discarded), (1, 0), "{stats:?}");
}

#[test]
fn a_reused_slab_never_shows_what_its_pieces_held() {
    let pool = pool(64);
    for round in 0..10u8 {
        let mut a = pool.alloc(31);
        let mut b = pool.alloc(31);
        assert!(a.is_empty() && b.is_empty());
        a.put_bytes(round, 32);
        b.put_bytes(round, 32);
        assert!(a.iter().chain(b.iter()).all(|&x| x == round));
    }
    assert_eq!(pool.stats().created, 1);
}

#[test]
fn a_slab_whose_last_piece_dropped_on_another_thread_is_reused() {
    let pool = pool(64);
    let a = pool.alloc(31);
    let b = pool.alloc(31);
    let start = a.as_ptr();
    std::thread::spawn(move || drop((a, b))).join().unwrap();
    assert_eq!(pool.alloc(31).as_ptr(), start);
    assert_eq!(pool.stats().created, 1);
}

#[test]
fn tiny_slabs_still_serve_every_request() {
    for slab_capacity in 1..20 {
        let pool = pool(slab_capacity);
        for len in 0..slab_capacity + 2 {
            assert!(pool.alloc(len).capacity() >= len);
        }
    }
}

#[test]
fn pieces_can_be_frozen_and_sent_to_other_threads() {
    let pool = SlabPool::new(8192);
    let frozen: Vec<bytes::Bytes> = (0..64u8)
        .map(|i| {
            let mut b = pool.alloc(4);
            b.put_slice(&[i; 4]);
            b.freeze()
        })
        .collect();
    let sum = std::thread::spawn(move || frozen.iter().map(|b| b[3] as u32).sum::<u32>())
        .join()
        .unwrap();
    assert_eq!(sum, (0..64).sum());
}

#[test]
fn threads_carve_from_their_own_slabs() {
    let pool = SlabPool::new(4096);
    std::thread::scope(|s| {
        for id in 0..2u8 {
            let pool = &pool;
            s.spawn(move || {
                let mut kept = Vec::new();
                for _ in 0..500 {
                    let mut b = pool.alloc(16);
                    b.put_slice(&[id; 16]);
                    kept.push(b);
                }
                assert!(kept.iter().all(|b| b.iter().all(|&x| x == id)));
            });
        }
    });
    // 1000 pieces of 16 bytes: 4 slabs of 256 pieces, at most one more
    // started per thread.
    assert!(pool.stats().created <= 6, "{:?}", pool.stats());
}

#[test]
fn two_sweeps_let_idle_remainders_go() {
    let pool = pool(4096);
    drop(pool.alloc(10));
    pool.sweep();
    assert_eq!(pool.stats().idle, 1);
    pool.sweep();
    assert_eq!(pool.stats().trimmed, 1);
    assert_eq!(pool.alloc(10).capacity(), 16);
    assert_eq!(pool.stats().created, 2);
}

#[test]
fn bad_sizes_are_refused_and_huge_requests_panic_instead_of_aborting() {
    assert!(catch_unwind(|| SlabPool::new(0)).is_err());
    assert!(catch_unwind(|| SlabPool::new(usize::MAX)).is_err());
    assert!(catch_unwind(|| SlabPool::builder(0).build()).is_err());
    let pool = pool(4096);
    assert!(catch_unwind(|| pool.alloc(usize::MAX)).is_err());
    // These reach the allocator, which refuses them (Miri cannot model that
    // refusal: it stops, so it runs the size check above only).
    if !cfg!(miri) {
        assert!(catch_unwind(|| pool.alloc(isize::MAX as usize)).is_err());
        // A valid slab size no allocator can serve fails on first use.
        let huge = SlabPool::new(isize::MAX as usize);
        assert!(catch_unwind(|| huge.alloc(1)).is_err());
    }
    assert!(format!("{pool:?}").contains("slab_capacity: 4096"));
}

//! A slab's memory is freed when the last piece carved from it drops.
//!
//! Alone in its test binary: it counts the bytes the whole process has
//! allocated, which another test running beside it would disturb.
#![cfg(feature = "bytes")]

mod common;

use common::alloc::{Counting, heap};
use stashpool::slab::SlabPool;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Heap bytes live now.
fn live() -> usize {
    heap().max(0) as usize
}

#[test]
fn a_slab_is_freed_when_its_last_piece_drops() {
    const SLAB: usize = 1 << 20;
    let before = live();
    let pool = SlabPool::builder(SLAB).manual_sweep().build();
    let mut pieces: Vec<_> = (0..100).map(|_| pool.alloc(1000)).collect();
    assert_eq!(pool.stats().created, 1);
    assert!(live() >= before + SLAB);

    drop(pool); // drops the slab's unused remainder
    let last = pieces.pop().unwrap();
    drop(pieces);
    assert!(live() >= before + SLAB, "one piece still holds the slab");

    drop(last);
    assert!(
        live() < before + SLAB / 2,
        "the slab was not freed: {} bytes live, {before} before",
        live()
    );
}

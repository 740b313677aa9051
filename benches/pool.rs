//! The hot path against the floor: one thread gets a 4 KiB buffer, writes
//! 64 bytes and returns it, with stashpool (`with` and a guard) and with a
//! bare `thread_local!` `RefCell<Vec<_>>` stash.
//!
//! `cargo bench --bench pool`

use std::cell::RefCell;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use stashpool::LocalPool;

const SIZE: usize = 4096;

fn write(buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(&[7; 64]);
    black_box(&*buf);
}

thread_local! {
    static FLOOR: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

fn floor_get() -> Vec<u8> {
    FLOOR
        .with(|stash| stash.borrow_mut().pop())
        .unwrap_or_else(|| Vec::with_capacity(SIZE))
}

fn floor_put(buf: Vec<u8>) {
    FLOOR.with(|stash| {
        let mut stash = stash.borrow_mut();
        if stash.len() < 64 {
            stash.push(buf);
        }
    });
}

fn hot(c: &mut Criterion) {
    let mut group = c.benchmark_group("hot/1-thread");
    group.bench_function("thread_local floor", |b| {
        b.iter(|| {
            let mut buf = floor_get();
            write(&mut buf);
            floor_put(buf);
        })
    });
    let pool = LocalPool::new(|| Vec::with_capacity(SIZE));
    group.bench_function("stashpool with", |b| b.iter(|| pool.with(write)));
    group.bench_function("stashpool get", |b| b.iter(|| write(&mut pool.get())));
    group.bench_function("plain allocation", |b| {
        b.iter(|| write(&mut Vec::with_capacity(SIZE)))
    });
    group.finish();
}

criterion_group!(benches, hot);
criterion_main!(benches);

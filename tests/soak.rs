//! A soak test: the stress mix for minutes, with background sweeping, while
//! memory is watched. Ignored by default; run it with
//!
//! ```text
//! SOAK_SECS=300 cargo test --release --test soak -- --ignored --nocapture
//! ```
//!
//! Threads come and go; each makes bursts of gets, holds, returns, scoped
//! uses and `into_inner`s on shared pools of 16 KiB buffers, with idle
//! pauses between bursts so sweeps trim. The test checks, every 100 ms,
//! that the pools hold no more than the bursts can need and that the
//! process's resident memory stays under a fixed bound; at the end, that
//! every object made was dropped exactly once.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::{Ledger, Tracked, rss};
use stashpool::{LocalPool, Pooled};

const THREADS: usize = 4;
const BURST: usize = 64;
const BUFFER: usize = 16 * 1024;

/// A tracked object with a buffer, so memory use is visible.
struct Heavy {
    _tracked: Tracked,
    buf: Vec<u8>,
}

#[test]
#[ignore = "minutes long; run with --ignored (see the module docs)"]
fn soak() {
    let secs = std::env::var("SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    let ledger = Ledger::new();
    let pool = {
        let l = Arc::clone(&ledger);
        Arc::new(
            LocalPool::builder(move || Heavy {
                _tracked: l.make(),
                buf: vec![1; BUFFER],
            })
            .max_stashed(16)
            .sweep_every(Duration::from_millis(100))
            .build(),
        )
    };
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    // Every object the bursts can hold at once, plus what stashes and the
    // overflow may keep for two sweep intervals: a generous fixed bound.
    let most_idle = 2 * THREADS * BURST * 4;
    let rss_bound = rss().unwrap_or(0) + most_idle * (BUFFER + 4096) + (64 << 20);

    let mut generation = 0u64;
    let mut workers: Vec<thread::JoinHandle<()>> = Vec::new();
    while start.elapsed() < Duration::from_secs(secs) {
        // Threads come and go: replace one worker per round.
        if workers.len() == THREADS {
            workers.remove(0).join().unwrap();
        }
        generation += 1;
        let (shared, stop) = (Arc::clone(&pool), Arc::clone(&stop));
        workers.push(thread::spawn(move || {
            let mut rng = generation | 1;
            let mut next = || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            for _ in 0..50 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let mut held = Vec::new();
                for _ in 0..(next() as usize % BURST) {
                    match next() % 4 {
                        0 | 1 => held.push(shared.get()),
                        2 => shared.with(|h| h.buf[0] = h.buf[0].wrapping_add(1)),
                        _ => {
                            if let Some(h) = held.pop() {
                                drop(Pooled::into_inner(h));
                            }
                        }
                    }
                }
                drop(held);
                // Idle between bursts, so sweeps find idle objects.
                thread::sleep(Duration::from_millis(next() % 30));
            }
        }));
        let stats = pool.stats();
        assert!(stats.idle <= most_idle, "the pool stays bounded: {stats:?}");
        if let Some(now) = rss() {
            assert!(now <= rss_bound, "resident memory {now} over {rss_bound}");
        }
        thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().unwrap();
    }
    // Idle now: the background sweeper empties the pool.
    let idle_since = Instant::now();
    while pool.stats().idle > 0 && idle_since.elapsed() < Duration::from_secs(30) {
        thread::sleep(Duration::from_millis(10));
    }
    let stats = pool.stats();
    println!(
        "{generation} threads over {secs} s: {stats:?}, rss {:?}",
        rss()
    );
    assert_eq!(stats.idle, 0, "an idle pool is swept empty");
    assert!(stats.trimmed > 0);
    drop(pool);
    assert_eq!(ledger.live(), 0, "every object dropped exactly once");
}

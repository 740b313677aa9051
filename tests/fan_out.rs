//! Pooled buffers shared as `bytes::Bytes` by several threads: each goes
//! back to its pool with its last clone, and is neither freed nor lent
//! again while a clone lives (Miri runs these, `.ci/nightly`).
#![cfg(feature = "bytes")]

use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};
use std::thread;

use bytes::Bytes;
use stashpool::bytes::{BytePool, ChunkPool};

/// Threads each chunk is cloned to, as a checksum, a counter and a
/// compressor would be.
const CONSUMERS: usize = 3;

/// What chunk `seq` holds: a pattern that tells it from its neighbours, so
/// that a buffer written again while a clone of it lives is seen.
fn pattern(seq: usize, len: usize) -> impl Iterator<Item = u8> {
    (0..len).map(move |i| (seq.wrapping_mul(31) + i) as u8)
}

/// Receives `(seq, len, bytes)` until the producer is done, checking that
/// every chunk still holds what the producer wrote; returns how many it saw.
fn consume(chunks: Receiver<(usize, Bytes)>) -> usize {
    let mut seen = 0;
    for (seq, bytes) in chunks {
        assert!(
            bytes.iter().copied().eq(pattern(seq, bytes.len())),
            "chunk {seq} changed while a clone of it lived"
        );
        seen += 1;
    }
    seen
}

#[test]
fn frozen_chunks_fan_out_to_three_threads_and_come_back_with_their_last_clone() {
    let (chunks, queued, len) = if cfg!(miri) {
        (24, 2, 64)
    } else {
        (1_000, 8, 4096)
    };
    let pool = Arc::new(ChunkPool::builder(len).manual_sweep().build());
    let (senders, consumers): (Vec<_>, Vec<_>) = (0..CONSUMERS)
        .map(|_| {
            let (send, receive) = sync_channel(queued);
            (send, thread::spawn(move || consume(receive)))
        })
        .unzip();

    for seq in 0..chunks {
        let mut chunk = pool.get_owned();
        // A read into the chunk, which fills part of it.
        let n = len - seq % 7;
        for (byte, value) in chunk.iter_mut().zip(pattern(seq, n)) {
            *byte = value;
        }
        let bytes = chunk.freeze(n);
        for send in &senders {
            send.send((seq, bytes.clone())).unwrap();
        }
    }
    drop(senders);
    for consumer in consumers {
        assert_eq!(consumer.join().unwrap(), chunks);
    }

    // Each chunk is alive while a consumer holds a clone: at most `queued`
    // waiting and one in hand per consumer, plus the producer's. The pool
    // makes about that many, not one per chunk.
    let in_flight = queued + 2;
    let stats = pool.stats();
    assert_eq!(stats.gets as usize, chunks);
    assert_eq!(stats.returned as usize, chunks, "every chunk came back");
    assert!(
        stats.created as usize <= 2 * in_flight + 4,
        "one chunk made per use: {stats}"
    );
}

#[test]
fn a_buffer_is_lent_again_only_after_its_last_clone_drops() {
    let pool = Arc::new(BytePool::builder(64).manual_sweep().build());
    let mut buf = pool.get_owned();
    buf.extend_from_slice(&[7; 64]);
    let at = buf.as_ptr();
    let bytes = buf.freeze();
    assert_eq!(bytes.as_ptr(), at, "no copy");
    let clones: Vec<Bytes> = (0..CONSUMERS).map(|_| bytes.clone()).collect();
    drop(bytes);

    // While the clones live, what the pool lends is another buffer.
    for _ in 0..3 {
        let mut other = pool.get_owned();
        assert_ne!(other.as_ptr(), at);
        other.extend_from_slice(&[9; 64]);
    }
    assert_eq!((pool.stats().created, pool.stats().returned), (2, 3));

    // The clones, dropped on three threads: the last one returns it.
    let readers: Vec<_> = clones
        .into_iter()
        .map(|clone| {
            thread::spawn(move || {
                assert!(clone.iter().all(|&b| b == 7), "written while shared");
            })
        })
        .collect();
    for reader in readers {
        reader.join().unwrap();
    }
    assert_eq!(pool.stats().returned, 4);
    let both = [pool.get_owned(), pool.get_owned()];
    assert!(both.iter().any(|buf| buf.as_ptr() == at), "not reused");
    assert!(both.iter().all(|buf| buf.is_empty()), "cleared on return");
    assert_eq!(pool.stats().created, 2);
}

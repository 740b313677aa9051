//! The workload of the `compress` example, which `benches/pays.rs` runs
//! too: JSON-like messages compressed with `flate2` from several threads,
//! one compressor and one output buffer per message.

use std::hint::black_box;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use stashpool::bytes::{BytePool, PooledBuffer};
use stashpool::{LocalPool, Recycle};

/// The shortest and the longest message.
pub const SIZES: (usize, usize) = (200, 4096);

/// Room in an output buffer: deflate of a message of at most
/// `SIZES.1` bytes always fits, so no message makes a buffer grow.
pub const OUTPUT_CAPACITY: usize = 2 * SIZES.1;

/// How each message is compressed: raw deflate at the default level, as
/// an HTTP server's `Content-Encoding: deflate` does.
pub fn level() -> Compression {
    Compression::default()
}

/// Where a message's compressor and output buffer come from.
pub trait Deflaters: Sync {
    /// A compressor ready for a new stream.
    type Compressor<'a>: DerefMut<Target = Compress>
    where
        Self: 'a;
    /// An empty buffer with room for `OUTPUT_CAPACITY` bytes.
    type Buffer<'a>: DerefMut<Target = Vec<u8>>
    where
        Self: 'a;

    fn compressor(&self) -> Self::Compressor<'_>;
    fn buffer(&self) -> Self::Buffer<'_>;
}

// === pooled ===

/// Makes compressors, and resets returned ones for their next stream.
#[derive(Debug)]
pub struct Compressors;

impl Recycle<Compress> for Compressors {
    fn create(&self) -> Compress {
        Compress::new(level(), false)
    }

    fn recycle(&self, compressor: &mut Compress) -> bool {
        // A compressor keeps its window and tables between streams;
        // `reset` starts a new stream with the same settings, without
        // allocating.
        compressor.reset();
        true
    }
}

/// Compressors and output buffers from stashpool pools.
#[derive(Debug)]
pub struct Pooled {
    pub compressors: LocalPool<Compress, Compressors>,
    pub buffers: BytePool,
}

impl Pooled {
    pub fn new() -> Self {
        Self {
            compressors: LocalPool::builder(Compressors).manual_sweep().build(),
            buffers: BytePool::builder(OUTPUT_CAPACITY).manual_sweep().build(),
        }
    }
}

impl Deflaters for Pooled {
    type Compressor<'a> = stashpool::Pooled<'a, Compress, Compressors>;
    type Buffer<'a> = PooledBuffer<'a>;

    fn compressor(&self) -> Self::Compressor<'_> {
        self.compressors.get()
    }

    fn buffer(&self) -> Self::Buffer<'_> {
        self.buffers.get()
    }
}

// === plain ===

/// A compressor and a buffer made for each message and dropped after it.
#[derive(Debug)]
pub struct Plain;

/// An object made fresh and dropped at the end of its use.
#[derive(Debug)]
pub struct Fresh<T>(pub T);

impl<T> Deref for Fresh<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for Fresh<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl Deflaters for Plain {
    type Compressor<'a> = Fresh<Compress>;
    type Buffer<'a> = Fresh<Vec<u8>>;

    fn compressor(&self) -> Fresh<Compress> {
        Fresh(Compress::new(level(), false))
    }

    fn buffer(&self) -> Fresh<Vec<u8>> {
        Fresh(Vec::with_capacity(OUTPUT_CAPACITY))
    }
}

// === messages ===

/// `count` JSON-like messages (an order with its items), each `size`
/// bytes long, or of sizes spread evenly over `SIZES` when `size` is
/// `None`. The same seed gives the same messages.
///
/// # Panics
///
/// If `size` is outside `SIZES`.
pub fn messages(count: usize, size: Option<usize>, seed: u64) -> Vec<Vec<u8>> {
    if let Some(size) = size {
        assert!(
            (SIZES.0..=SIZES.1).contains(&size),
            "a message is {} to {} bytes",
            SIZES.0,
            SIZES.1
        );
    }
    let mut rng = seed | 1;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    const WORDS: [&str; 12] = [
        "express", "gift", "fragile", "leave", "at", "door", "ring", "twice", "back", "office",
        "before", "noon",
    ];
    const EVENTS: [&str; 4] = ["created", "paid", "shipped", "delivered"];
    (0..count)
        .map(|i| {
            let target = size.unwrap_or_else(|| SIZES.0 + next((SIZES.1 - SIZES.0 + 1) as u64) as usize);
            let mut m = format!(
                r#"{{"id":{},"ts":{},"user":"u-{:05}","event":"{}","region":"eu-west-{}","items":["#,
                100_000 + i,
                1_733_000_000_000 + next(86_400_000),
                next(100_000),
                EVENTS[next(4) as usize],
                1 + next(3),
            );
            // Items while they fit, leaving room for the note that pads
            // the message to its length.
            let mut first = true;
            loop {
                let item = format!(
                    r#"{}{{"sku":"SKU-{:05}","qty":{},"price":{}}}"#,
                    if first { "" } else { "," },
                    next(50_000),
                    1 + next(9),
                    99 + next(20_000),
                );
                if m.len() + item.len() + 12 > target {
                    break;
                }
                m.push_str(&item);
                first = false;
            }
            m.push_str(r#"],"note":""#);
            while m.len() + 2 < target {
                let word = WORDS[next(WORDS.len() as u64) as usize];
                let room = target - 2 - m.len();
                m.push_str(&word[..word.len().min(room)]);
                if m.len() + 2 < target {
                    m.push(' ');
                }
            }
            m.push_str(r#""}"#);
            debug_assert_eq!(m.len(), target);
            m.into_bytes()
        })
        .collect()
}

// === the run ===

/// What a run did, and how long it took.
#[derive(Clone, Copy, Debug)]
pub struct Report {
    /// From the first thread's start to the last one's end, each thread
    /// stamping its own.
    pub elapsed: Duration,
    pub messages: u64,
    /// Bytes of the messages, and of their compressed forms.
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// Every this many messages a thread decompresses what it made and checks
/// it against the message, so a compressor that was not reset properly
/// would be caught.
const CHECK_EVERY: usize = 1024;

/// Compresses `per_thread` messages on each of `threads` threads, cycling
/// through `messages`, each with a compressor and a buffer from
/// `deflaters`.
///
/// # Panics
///
/// If a message does not decompress to itself, or `messages` is empty.
pub fn run<D: Deflaters>(
    deflaters: &D,
    messages: &[Vec<u8>],
    threads: usize,
    per_thread: usize,
) -> Report {
    assert!(!messages.is_empty(), "no messages to compress");
    let go = AtomicBool::new(false);
    let results: Vec<_> = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let go = &go;
                s.spawn(move || {
                    // Made before the loop, so the only allocations in it
                    // are the compressors' and buffers' (see `inflate`).
                    let mut check = (Decompress::new(false), Vec::with_capacity(SIZES.1));
                    // A spinning start: every thread begins at once, not
                    // as a futex wakes them one by one.
                    while !go.load(Ordering::Acquire) {
                        std::hint::spin_loop();
                    }
                    let start = Instant::now();
                    let (mut bytes_in, mut bytes_out) = (0, 0);
                    for i in 0..per_thread {
                        let message = &messages[(t * 7919 + i) % messages.len()];
                        let mut compressor = deflaters.compressor();
                        let mut out = deflaters.buffer();
                        deflate(&mut compressor, message, &mut out);
                        if i % CHECK_EVERY == 0 {
                            inflate(&mut check, &out);
                            assert_eq!(check.1, *message, "a message round-trips");
                        }
                        bytes_in += message.len() as u64;
                        bytes_out += black_box(&out[..]).len() as u64;
                    }
                    (start, Instant::now(), bytes_in, bytes_out)
                })
            })
            .collect();
        go.store(true, Ordering::Release);
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let start = results.iter().map(|r| r.0).min().unwrap();
    let end = results.iter().map(|r| r.1).max().unwrap();
    Report {
        elapsed: end - start,
        messages: (threads * per_thread) as u64,
        bytes_in: results.iter().map(|r| r.2).sum(),
        bytes_out: results.iter().map(|r| r.3).sum(),
    }
}

/// Compresses `message`, a whole stream, into `out`.
fn deflate(compressor: &mut Compress, message: &[u8], out: &mut Vec<u8>) {
    assert_eq!(compressor.total_in(), 0, "a compressor starts a new stream");
    loop {
        let read = compressor.total_in() as usize;
        let status = compressor
            .compress_vec(&message[read..], out, FlushCompress::Finish)
            .expect("deflate accepts any input");
        if status == Status::StreamEnd {
            return;
        }
        // Only if `OUTPUT_CAPACITY` were too small: make room, go on.
        out.reserve(out.capacity());
    }
}

/// Decompresses a whole raw deflate stream of at most `SIZES.1` bytes
/// into `out`, with a decompressor and a buffer made once.
///
/// Neither is made here because one small block allocated and freed in the
/// loop changes what `--plain` measures: glibc keeps freed blocks of up to
/// about 1 KiB in a per-thread cache, and such a block left at the top of
/// a thread's heap keeps glibc from handing the compressor's freed pages
/// back to the kernel, which it otherwise does after each message.
fn inflate((decompress, out): &mut (Decompress, Vec<u8>), compressed: &[u8]) {
    decompress.reset(false);
    out.clear();
    let status = decompress
        .decompress_vec(compressed, out, FlushDecompress::Finish)
        .expect("a valid deflate stream");
    assert_eq!(
        status,
        Status::StreamEnd,
        "the whole message fits its length"
    );
}

//! The workload of the `fan_out` example, which `benches/pays.rs` runs
//! too: a file read in chunks, each chunk frozen into `bytes::Bytes` and
//! cloned to three consumer threads (a checksum, a line counter and a
//! deflate compressor), which drop their clones when done with them.

use std::io::{self, Read, Write};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use flate2::write::DeflateEncoder;
use flate2::{Compression, Crc};
use stashpool::bytes::ChunkPool;

/// The length of a chunk, as `bp.BytePool`'s users read files.
pub const CHUNK: usize = 64 * 1024;

/// Chunks that wait in each consumer's channel: the producer waits when
/// the slowest consumer is this far behind.
pub const QUEUED: usize = 16;

/// Chunks alive at once, at most: `QUEUED` waiting for the slowest
/// consumer, one in its hands and one being read and sent.
pub const IN_FLIGHT: usize = QUEUED + 2;

/// Where a chunk's memory comes from.
pub trait Chunks {
    /// The next chunk of `input`, up to `CHUNK` bytes; `None` at its end.
    fn read(&self, input: &mut impl Read) -> io::Result<Option<Bytes>>;
}

/// Chunks from a `ChunkPool` on its defaults, frozen with no copy: a
/// chunk goes back to the pool when the last consumer drops its clone.
pub struct Pooled {
    pub chunks: Arc<ChunkPool>,
}

impl Pooled {
    pub fn new() -> Self {
        Self {
            chunks: Arc::new(ChunkPool::new(CHUNK)),
        }
    }
}

impl Chunks for Pooled {
    fn read(&self, input: &mut impl Read) -> io::Result<Option<Bytes>> {
        let mut chunk = self.chunks.get_owned();
        let n = fill(input, &mut chunk)?;
        Ok((n > 0).then(|| chunk.freeze(n)))
    }
}

/// A zeroed vector per chunk, as `Bytes::from(vec)`: freed when the last
/// consumer drops its clone.
pub struct Plain;

impl Chunks for Plain {
    fn read(&self, input: &mut impl Read) -> io::Result<Option<Bytes>> {
        let mut chunk = vec![0; CHUNK];
        let n = fill(input, &mut chunk)?;
        chunk.truncate(n);
        Ok((n > 0).then(|| Bytes::from(chunk)))
    }
}

/// Reads into `buf` until it is full or `input` ends; the bytes read.
fn fill(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// What a run did, and what its consumers found.
#[derive(Debug)]
pub struct Report {
    /// From the first read to the last consumer's end.
    pub elapsed: Duration,
    pub chunks: u64,
    pub bytes: u64,
    /// CRC-32 of the input.
    pub crc: u32,
    pub lines: u64,
    /// Length of the input deflated.
    pub deflated: u64,
    /// Time each consumer spent on its chunks (checksum, counter,
    /// compressor), waits aside: which of them bounds the run.
    pub busy: [Duration; 3],
}

/// Reads `input` to its end in chunks from `chunks`, each cloned to the
/// three consumers, and waits for them.
pub fn run(chunks: &impl Chunks, input: &mut impl Read, level: Compression) -> io::Result<Report> {
    let start = Instant::now();
    let (to_crc, crc) = consumer(|chunks| {
        let mut crc = Crc::new();
        for chunk in chunks {
            crc.update(&chunk);
        }
        u64::from(crc.sum())
    });
    let (to_counter, counter) = consumer(|chunks| {
        chunks
            .map(|chunk| chunk.iter().filter(|&&b| b == b'\n').count() as u64)
            .sum()
    });
    let (to_deflate, deflate) = consumer(move |chunks| {
        let mut encoder = DeflateEncoder::new(Counted(0), level);
        for chunk in chunks {
            encoder
                .write_all(&chunk)
                .expect("a counter takes every write");
        }
        encoder.finish().expect("a counter takes every write").0
    });

    let (mut count, mut bytes) = (0, 0);
    while let Some(chunk) = chunks.read(input)? {
        count += 1;
        bytes += chunk.len() as u64;
        for to in [&to_crc, &to_counter, &to_deflate] {
            to.send(chunk.clone()).expect("consumers run to the end");
        }
    }
    drop((to_crc, to_counter, to_deflate));
    let [
        (crc, crc_busy),
        (lines, lines_busy),
        (deflated, deflate_busy),
    ] = [crc, counter, deflate].map(|consumer| consumer.join().expect("a consumer panicked"));
    Ok(Report {
        elapsed: start.elapsed(),
        chunks: count,
        bytes,
        crc: crc as u32,
        lines,
        deflated,
        busy: [crc_busy, lines_busy, deflate_busy],
    })
}

/// A consumer thread running `work` over the chunks sent to it; it hands
/// back its result and the time `work` spent on chunks, waits aside.
fn consumer(
    work: impl FnOnce(&mut dyn Iterator<Item = Bytes>) -> u64 + Send + 'static,
) -> (
    std::sync::mpsc::SyncSender<Bytes>,
    thread::JoinHandle<(u64, Duration)>,
) {
    let (send, receive) = sync_channel(QUEUED);
    let handle = thread::spawn(move || {
        let mut timed = Timed::new(receive);
        let result = work(&mut timed);
        (result, timed.busy())
    });
    (send, handle)
}

/// The chunks a consumer receives, timing what it does between them.
struct Timed {
    chunks: Receiver<Bytes>,
    busy: Duration,
    /// When the consumer took its last chunk: it has worked on it since.
    since: Option<Instant>,
}

impl Timed {
    fn new(chunks: Receiver<Bytes>) -> Self {
        Self {
            chunks,
            busy: Duration::ZERO,
            since: None,
        }
    }

    fn busy(mut self) -> Duration {
        self.stop();
        self.busy
    }

    fn stop(&mut self) {
        if let Some(since) = self.since.take() {
            self.busy += since.elapsed();
        }
    }
}

impl Iterator for Timed {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        self.stop();
        let chunk = self.chunks.recv().ok()?;
        self.since = Some(Instant::now());
        Some(chunk)
    }
}

/// A writer that keeps only the count of what it was given.
struct Counted(u64);

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes `len` bytes of text-like input to `out`: lines of words from a
/// small vocabulary, picked by a fixed pseudo-random sequence, which
/// deflate compresses as it would logs.
pub fn write_input(out: &mut impl Write, len: u64) -> io::Result<()> {
    const WORDS: [&str; 16] = [
        "GET",
        "POST",
        "/index.html",
        "/api/v1/items",
        "200",
        "404",
        "user",
        "session",
        "latency_ms=",
        "bytes=",
        "ok",
        "retry",
        "cache",
        "miss",
        "hit",
        "upstream",
    ];
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        // xorshift64: a fixed sequence, the same input every run.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut buf = Vec::with_capacity(1 << 20);
    let mut written = 0;
    while written < len {
        buf.clear();
        while buf.len() < (1 << 20) - 128 {
            let words = 4 + next() % 8;
            for _ in 0..words {
                let r = next();
                buf.extend_from_slice(WORDS[(r % 16) as usize].as_bytes());
                if r % 5 == 0 {
                    write!(buf, "{}", (r >> 8) % 10_000)?;
                }
                buf.push(b' ');
            }
            buf.push(b'\n');
        }
        let take = buf.len().min((len - written) as usize);
        out.write_all(&buf[..take])?;
        written += take as u64;
    }
    Ok(())
}

//! The workload of the `archive` example, which `benches/pays.rs` runs too:
//! files of 1 to 8 MiB deflated on rayon's threads, each with an input and
//! an output buffer and a compressor.

use std::time::{Duration, Instant};

use flate2::{Compress, Compression, FlushCompress, Status};
use rayon::prelude::*;
use stashpool::bytes::BytePools;
use stashpool::{LocalPool, Recycle};

/// The smallest and the largest file.
pub const SIZES: (usize, usize) = (1 << 20, 8 << 20);

/// The most bytes the buffer pool keeps idle: what two threads' jobs hold
/// at once (an input and an output each) of an average file, so that the
/// pool keeps a round of work and no more.
pub const MAX_IDLE_BYTES: usize = 4 << 20;

/// Inputs and outputs, four classes per doubling from 1 MiB to a bound
/// above the largest file's output.
pub static BUFFERS: BytePools = BytePools::builder(SIZES.0, 2 * SIZES.1)
    .max_idle_bytes(MAX_IDLE_BYTES)
    .build();

/// Compressors, reset when they come back.
pub static COMPRESSORS: LocalPool<Compress, Compressors> = LocalPool::new(Compressors);

/// Makes compressors, and resets returned ones for their next stream.
#[derive(Debug)]
pub struct Compressors;

impl Recycle<Compress> for Compressors {
    fn create(&self) -> Compress {
        Compress::new(Compression::default(), false)
    }

    fn recycle(&self, compressor: &mut Compress) -> bool {
        compressor.reset();
        true
    }
}

/// The length of file `n`: spread over `SIZES`, the same in every run.
pub fn file_len(n: usize) -> usize {
    let spread = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    SIZES.0 + spread as usize % (SIZES.1 - SIZES.0)
}

/// The most bytes raw deflate makes of `len` (stored blocks at worst).
pub fn deflate_bound(len: usize) -> usize {
    len + len / 1000 + 64
}

/// Writes `len` bytes of text-like data, from words picked by a generator
/// seeded with `seed`: compressible about as much as a log file.
pub fn fill(buf: &mut Vec<u8>, len: usize, seed: u64) {
    const WORDS: [&[u8]; 16] = [
        b"request ",
        b"served ",
        b"in ",
        b"ms ",
        b"user=",
        b"GET ",
        b"/api/v1/items ",
        b"200 ",
        b"404 ",
        b"cache ",
        b"miss ",
        b"hit ",
        b"upstream ",
        b"timeout ",
        b"\n",
        b"retry ",
    ];
    let mut state = seed | 1;
    while buf.len() < len {
        // xorshift64
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let word = WORDS[(state % 16) as usize];
        if state.is_multiple_of(5) {
            // A number of up to four digits.
            let n = state % 10_000;
            let digits = [n / 1000, n / 100 % 10, n / 10 % 10, n % 10].map(|d| b'0' + d as u8);
            buf.extend_from_slice(&digits[..(len - buf.len()).min(4)]);
        }
        buf.extend_from_slice(&word[..word.len().min(len - buf.len())]);
    }
    buf.truncate(len);
}

/// Deflates `input` into `output` (empty, with room for
/// `deflate_bound(input.len())` bytes) with `compressor` (ready for a new
/// stream).
pub fn deflate(compressor: &mut Compress, input: &[u8], output: &mut Vec<u8>) {
    let status = compressor
        .compress_vec(input, output, FlushCompress::Finish)
        .expect("deflate runs");
    assert_eq!(status, Status::StreamEnd, "the output has room for it all");
}

/// Where a job's buffers and compressor come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// From the pools above.
    Pooled,
    /// `Vec::with_capacity` and `Compress::new` per file.
    Plain,
}

/// What a run did.
#[derive(Debug)]
pub struct Report {
    pub elapsed: Duration,
    pub files: usize,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// Deflates `files` files on rayon's threads.
pub fn run(kind: Kind, files: usize) -> Report {
    let start = Instant::now();
    let (bytes_in, bytes_out) = (0..files)
        .into_par_iter()
        .map(|n| {
            let len = file_len(n);
            let out = match kind {
                Kind::Pooled => {
                    let mut input = BUFFERS.get(len);
                    fill(&mut input, len, n as u64);
                    let mut output = BUFFERS.get(deflate_bound(len));
                    deflate(&mut COMPRESSORS.get(), &input, &mut output);
                    output.len()
                }
                Kind::Plain => {
                    let mut input = Vec::with_capacity(len);
                    fill(&mut input, len, n as u64);
                    let mut output = Vec::with_capacity(deflate_bound(len));
                    deflate(
                        &mut Compress::new(Compression::default(), false),
                        &input,
                        &mut output,
                    );
                    output.len()
                }
            };
            (len as u64, out as u64)
        })
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    Report {
        elapsed: start.elapsed(),
        files,
        bytes_in,
        bytes_out,
    }
}

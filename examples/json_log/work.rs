//! The workload of the `json_log` example, which `benches/pays.rs` runs
//! too: producer threads serialise log records with `serde_json` into
//! 512-byte buffers and send them through one channel to a writer thread,
//! which writes them through a `BufWriter` and drops them. Every buffer is
//! returned on the writer for all the producers: the fan-in shape.

use std::io::{self, BufWriter, Write};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;
use stashpool::bytes::BytePool;

/// A buffer's room: a record serialises to about half of it.
pub const CAPACITY: usize = 512;

/// Records in flight between the producers and the writer, at most.
pub const IN_FLIGHT: usize = 1024;

/// The pooled buffers: a plain `static`, whose guards are `'static` and
/// `Send`, so they can cross the channel.
pub static BUFFERS: BytePool = BytePool::new(CAPACITY);

/// A log record, as a structured logger would emit it.
#[derive(Serialize)]
struct Record<'a> {
    timestamp_us: u64,
    level: &'a str,
    target: &'a str,
    thread: usize,
    sequence: u64,
    message: &'a str,
    fields: Fields<'a>,
}

#[derive(Serialize)]
struct Fields<'a> {
    request_id: u64,
    user: &'a str,
    latency_ms: f64,
    status: u16,
    path: &'a str,
}

/// A buffer to serialise a record into, and what it holds.
pub trait Buffer: Write + AsRef<[u8]> + Send + 'static {}

impl<B: Write + AsRef<[u8]> + Send + 'static> Buffer for B {}

/// A pooled buffer, back in `BUFFERS` when the writer drops it.
pub fn pooled() -> impl Buffer {
    BUFFERS.get()
}

/// A vector per record, freed when the writer drops it.
pub fn plain() -> impl Buffer {
    Vec::with_capacity(CAPACITY)
}

/// What a run did.
#[derive(Debug)]
pub struct Report {
    /// From the producers' start to the writer's flush.
    pub elapsed: Duration,
    /// Records written.
    pub records: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// `producers` threads each serialise `records` records into buffers from
/// `buffer` and send them to one writer, which writes them to `out`
/// through a `BufWriter` and drops each buffer once written.
pub fn run<B: Buffer, W: Write + Send>(
    buffer: fn() -> B,
    producers: usize,
    records: u64,
    out: W,
) -> io::Result<Report> {
    let start = Instant::now();
    let (to_writer, received) = mpsc::sync_channel::<B>(IN_FLIGHT);
    let (written, bytes) = thread::scope(|s| {
        let writer = s.spawn(move || -> io::Result<(u64, u64)> {
            let mut out = BufWriter::new(out);
            let (mut written, mut bytes) = (0, 0);
            for buf in received {
                out.write_all(buf.as_ref())?;
                bytes += buf.as_ref().len() as u64;
                written += 1;
            }
            out.flush()?;
            Ok((written, bytes))
        });
        for thread in 0..producers {
            let to_writer = to_writer.clone();
            s.spawn(move || {
                for sequence in 0..records {
                    let mut buf = buffer();
                    let record = record(thread, sequence, start);
                    serde_json::to_writer(&mut buf, &record).expect("a record serialises");
                    buf.write_all(b"\n").expect("a buffer takes a newline");
                    if to_writer.send(buf).is_err() {
                        return; // the writer failed: its error is the run's
                    }
                }
            });
        }
        drop(to_writer);
        writer.join().expect("the writer does not panic")
    })?;
    Ok(Report {
        elapsed: start.elapsed(),
        records: written,
        bytes,
    })
}

/// The `sequence`th record of producer `thread`.
fn record(thread: usize, sequence: u64, start: Instant) -> Record<'static> {
    const PATHS: [&str; 4] = ["/api/orders", "/api/users/me", "/healthz", "/static/app.js"];
    const USERS: [&str; 3] = ["ada", "grace", "barbara"];
    Record {
        timestamp_us: start.elapsed().as_micros() as u64,
        level: if sequence.is_multiple_of(16) {
            "WARN"
        } else {
            "INFO"
        },
        target: "server::http",
        thread,
        sequence,
        message: "request served",
        fields: Fields {
            request_id: sequence.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16,
            user: USERS[sequence as usize % USERS.len()],
            latency_ms: (sequence % 997) as f64 * 0.25,
            status: if sequence.is_multiple_of(64) {
                503
            } else {
                200
            },
            path: PATHS[sequence as usize % PATHS.len()],
        },
    }
}

//! Where a pool pays: the two examples' workloads, `frame_pipeline` and
//! `compress`, with their objects from stashpool, from plain construction
//! and from the peer pools `lockfree-object-pool` and `opool`, each run in
//! a fresh process so that its peak resident set is its own; and the two
//! examples of buffers in flight, `echo_server` and `fan_out`, pooled
//! against plain.
//!
//! ```text
//! cargo bench --bench pays                    # both tables, into benches/results/pays.md
//! cargo bench --bench pays -- buffers         # the second table only
//! cargo bench --bench pays -- json-log        # the third table only
//! cargo bench --bench pays -- archive         # the fourth table only
//! cargo bench --bench pays -- pipeline opool  # one run
//! ```
//!
//! The workloads are the examples' own code (`examples/frame_pipeline/
//! pipeline.rs`, `examples/compress/work.rs`), included here:
//!
//! * `pipeline`: `FRAMES` frames, 720p and 1080p alternating, through the
//!   pipeline with a worker per core; the time runs from the first frame
//!   to the sink's last PNG.
//! * `compress 1 KiB` and `compress mixed`: `MESSAGES` messages of 1 KiB,
//!   or of 200 B to 4 KiB, on a thread per core from a spinning start;
//!   each thread stamps its own start and end.
//!
//! Each peer takes every object the workload needs from its pool, made
//! the way the stashpool run makes it: frames kept as they are (the
//! stages overwrite them, as under `Reset::Keep`), compressors `reset`,
//! buffers cleared. `plain` makes each object fresh. `plain, glibc
//! keeping memory` is `plain` with glibc told, through `GLIBC_TUNABLES`,
//! to keep what is freed rather than hand it back to the kernel (its trim
//! and mmap thresholds raised): the most the allocator can give without a
//! pool.
//!
//! Runs are interleaved (every peer once, then every peer again), so a
//! burst of load on the machine hits all peers alike; the table gives
//! each peer's best wall time (interference only ever adds time) and the
//! median of them, its best CPU time (every thread's, user and system,
//! during the run: what the work cost, less bent by other processes on a
//! shared machine than the wall time), and the median of its peak
//! resident sets (`VmHWM`, which includes the program's code and the
//! messages or frames it keeps). Linux only.
//!
//! The second table compares two versions of one program, pooled and
//! plain, whose difference is smaller than what the machine's other work
//! moves a time by: each round runs both, one process each, in turn
//! (which goes first alternates), and the table gives the median over the
//! rounds of plain's time over pooled's in the same round, with the
//! rounds' lowest and highest, beside each version's median time:
//!
//! * `echo server`: `examples/echo_server`, `ECHO_CONNECTIONS` connections
//!   of `ECHO_LINES` lines each over loopback, a runtime thread per core;
//! * `fan-out`: `examples/fan_out`, `FAN_OUT_MIB` MiB of generated input
//!   (written once, read from the page cache by every run) in 64 KiB
//!   chunks to three consumers, deflate at level 1.

#![cfg_attr(not(target_os = "linux"), allow(dead_code, unused_imports))]

// The examples' own code; the parts only the examples print are unused.
#[path = "../examples/archive/work.rs"]
#[allow(dead_code)]
mod archive;
#[path = "../examples/compress/work.rs"]
#[allow(dead_code)]
mod compress;
#[path = "../examples/echo_server/work.rs"]
#[allow(dead_code)]
mod echo;
#[path = "../examples/fan_out/work.rs"]
#[allow(dead_code)]
mod fan_out;
#[path = "../examples/json_log/work.rs"]
#[allow(dead_code)]
mod json_log;
#[path = "../examples/common/measure.rs"]
#[allow(dead_code)]
mod measure;
#[path = "common/median.rs"]
mod median;
#[path = "../examples/frame_pipeline/pipeline.rs"]
#[allow(dead_code)]
mod pipeline;
#[path = "common/sitting.rs"]
mod sitting;

use median::median;
use std::env;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::thread;

use flate2::Compress;
use image::RgbaImage;

#[global_allocator]
static ALLOCATOR: measure::Counting = measure::Counting;

/// Processes per peer and workload.
const RUNS: usize = 7;

/// Frames per pipeline run.
const FRAMES: usize = 300;

/// Messages per compress run, all threads together.
const MESSAGES: usize = 8_000;

/// The peers, in the table's order.
const PEERS: [&str; 5] = [
    "stashpool",
    "plain",
    "plain, glibc keeping memory",
    "lockfree-object-pool",
    "opool",
];

const WORKLOADS: [&str; 3] = ["pipeline", "compress 1 KiB", "compress mixed"];

/// Rounds of the second table: each runs both versions once.
const ROUNDS: usize = 9;

/// The second table's workloads, and its versions.
const BUFFER_WORKLOADS: [&str; 2] = ["echo server", "fan-out"];
const VERSIONS: [&str; 2] = ["stashpool", "plain"];

/// The JSON log's producers, and the records each serialises.
const JSON_PRODUCERS: usize = 4;
const JSON_RECORDS: u64 = 250_000;

/// Files per archive run.
const ARCHIVE_FILES: usize = 120;

/// The JSON log's settings: quiet, and beside this many busy loops.
const BUSY_LOOPS: [usize; 2] = [0, 2];

/// The echo server's clients and the lines each sends.
const ECHO_CONNECTIONS: usize = 64;
const ECHO_LINES: usize = 2_000;

/// The fan-out's input, in MiB, and where the table's runs find it.
const FAN_OUT_MIB: u64 = 256;
const FAN_OUT_INPUT: &str = "PAYS_FAN_OUT_INPUT";

/// What `plain, glibc keeping memory` sets: no trimming of the heap's top
/// below 1 GiB free, and blocks up to 32 MiB (glibc's largest mmap
/// threshold) from the heap rather than mapped alone.
const KEEP_MEMORY: &str =
    "glibc.malloc.trim_threshold=1073741824:glibc.malloc.mmap_threshold=33554432";

fn cores() -> usize {
    thread::available_parallelism().map_or(2, |n| n.get())
}

/// Leaks `value`: the pipeline's objects travel in `'static` tasks, so
/// their pools live as long as the process (as in the example).
fn leak<T>(value: T) -> &'static T {
    Box::leak(Box::new(value))
}

// === lockfree-object-pool ===

mod lockfree {
    use super::*;
    use lockfree_object_pool::{LinearObjectPool, LinearReusable};

    pub struct Frames {
        frames: Vec<((u32, u32), LinearObjectPool<RgbaImage>)>,
        thumbnails: LinearObjectPool<RgbaImage>,
        pngs: LinearObjectPool<Vec<u8>>,
    }

    fn frames(width: u32, height: u32) -> LinearObjectPool<RgbaImage> {
        LinearObjectPool::new(move || RgbaImage::new(width, height), |_| {})
    }

    impl Frames {
        pub fn new() -> Self {
            Self {
                frames: pipeline::SHAPES
                    .iter()
                    .map(|&(w, h)| ((w, h), frames(w, h)))
                    .collect(),
                thumbnails: frames(pipeline::THUMBNAIL.0, pipeline::THUMBNAIL.1),
                pngs: LinearObjectPool::new(
                    || Vec::with_capacity(pipeline::PNG_CAPACITY),
                    Vec::clear,
                ),
            }
        }
    }

    impl pipeline::Alloc for Frames {
        type Frame = LinearReusable<'static, RgbaImage>;
        type Png = LinearReusable<'static, Vec<u8>>;

        fn frame(&'static self, width: u32, height: u32) -> Self::Frame {
            let (_, pool) = self
                .frames
                .iter()
                .find(|(shape, _)| *shape == (width, height))
                .expect("a known shape");
            pool.pull()
        }

        fn thumbnail(&'static self) -> Self::Frame {
            self.thumbnails.pull()
        }

        fn png(&'static self) -> Self::Png {
            self.pngs.pull()
        }
    }

    pub struct Deflaters {
        compressors: LinearObjectPool<Compress>,
        buffers: LinearObjectPool<Vec<u8>>,
    }

    impl Deflaters {
        pub fn new() -> Self {
            Self {
                compressors: LinearObjectPool::new(
                    || Compress::new(compress::level(), false),
                    Compress::reset,
                ),
                buffers: LinearObjectPool::new(
                    || Vec::with_capacity(compress::OUTPUT_CAPACITY),
                    Vec::clear,
                ),
            }
        }
    }

    impl compress::Deflaters for Deflaters {
        type Compressor<'a> = LinearReusable<'a, Compress>;
        type Buffer<'a> = LinearReusable<'a, Vec<u8>>;

        fn compressor(&self) -> Self::Compressor<'_> {
            self.compressors.pull()
        }

        fn buffer(&self) -> Self::Buffer<'_> {
            self.buffers.pull()
        }
    }
}

// === opool ===

mod opool_peer {
    use super::*;
    use opool::{Pool, PoolAllocator, RefGuard};

    /// Most idle objects an `opool::Pool` keeps (its queue's size): more
    /// than either workload has in flight.
    const IDLE: usize = 64;

    pub struct Shape(u32, u32);

    impl PoolAllocator<RgbaImage> for Shape {
        fn allocate(&self) -> RgbaImage {
            RgbaImage::new(self.0, self.1)
        }
    }

    /// Empty buffers of at least `.0` bytes.
    pub struct Buffers(usize);

    impl PoolAllocator<Vec<u8>> for Buffers {
        fn reset(&self, buf: &mut Vec<u8>) {
            buf.clear();
        }

        fn allocate(&self) -> Vec<u8> {
            Vec::with_capacity(self.0)
        }
    }

    pub struct Compressors;

    impl PoolAllocator<Compress> for Compressors {
        fn reset(&self, compressor: &mut Compress) {
            compressor.reset();
        }

        fn allocate(&self) -> Compress {
            Compress::new(compress::level(), false)
        }
    }

    pub struct Frames {
        frames: Vec<((u32, u32), Pool<Shape, RgbaImage>)>,
        thumbnails: Pool<Shape, RgbaImage>,
        pngs: Pool<Buffers, Vec<u8>>,
    }

    impl Frames {
        pub fn new() -> Self {
            let (w, h) = pipeline::THUMBNAIL;
            Self {
                frames: pipeline::SHAPES
                    .iter()
                    .map(|&(w, h)| ((w, h), Pool::new(IDLE, Shape(w, h))))
                    .collect(),
                thumbnails: Pool::new(IDLE, Shape(w, h)),
                pngs: Pool::new(IDLE, Buffers(pipeline::PNG_CAPACITY)),
            }
        }
    }

    impl pipeline::Alloc for Frames {
        type Frame = RefGuard<'static, Shape, RgbaImage>;
        type Png = RefGuard<'static, Buffers, Vec<u8>>;

        fn frame(&'static self, width: u32, height: u32) -> Self::Frame {
            let (_, pool) = self
                .frames
                .iter()
                .find(|(shape, _)| *shape == (width, height))
                .expect("a known shape");
            pool.get()
        }

        fn thumbnail(&'static self) -> Self::Frame {
            self.thumbnails.get()
        }

        fn png(&'static self) -> Self::Png {
            self.pngs.get()
        }
    }

    pub struct Deflaters {
        compressors: Pool<Compressors, Compress>,
        buffers: Pool<Buffers, Vec<u8>>,
    }

    impl Deflaters {
        pub fn new() -> Self {
            Self {
                compressors: Pool::new(IDLE, Compressors),
                buffers: Pool::new(IDLE, Buffers(compress::OUTPUT_CAPACITY)),
            }
        }
    }

    impl compress::Deflaters for Deflaters {
        type Compressor<'a> = RefGuard<'a, Compressors, Compress>;
        type Buffer<'a> = RefGuard<'a, Buffers, Vec<u8>>;

        fn compressor(&self) -> Self::Compressor<'_> {
            self.compressors.get()
        }

        fn buffer(&self) -> Self::Buffer<'_> {
            self.buffers.get()
        }
    }
}

// === one run ===

/// Runs `workload` with `peer`'s objects in this process; prints what
/// the run cost (see `Cost`) and the peak resident set in KiB.
fn run_one(workload: &str, peer: &str) {
    if BUFFER_WORKLOADS.contains(&workload) || ["json log", "archive"].contains(&workload) {
        return run_buffers(workload, peer);
    }
    let cost = if workload == "pipeline" {
        match peer {
            "stashpool" => frames(leak(pipeline::Pooled::new())),
            "plain" => frames(&pipeline::Plain),
            "lockfree-object-pool" => frames(leak(lockfree::Frames::new())),
            "opool" => frames(leak(opool_peer::Frames::new())),
            _ => panic!("unknown peer {peer:?}"),
        }
    } else {
        let size = match workload {
            "compress 1 KiB" => Some(1024),
            "compress mixed" => None,
            _ => panic!("unknown workload {workload:?}"),
        };
        let messages = compress::messages(1024, size, 42);
        match peer {
            "stashpool" => messages_with(&compress::Pooled::new(), &messages),
            "plain" => messages_with(&compress::Plain, &messages),
            "lockfree-object-pool" => messages_with(&lockfree::Deflaters::new(), &messages),
            "opool" => messages_with(&opool_peer::Deflaters::new(), &messages),
            _ => panic!("unknown peer {peer:?}"),
        }
    };
    let hwm = measure::peak_rss_kib().expect("Linux /proc");
    println!(
        "{:.3} {:.3} {:.3} {hwm}",
        cost.millis, cost.cpu_millis, cost.allocations
    );
}

/// What a run cost.
struct Cost {
    /// Wall time, as the workload measures it.
    millis: f64,
    /// CPU time of every thread of the process (user and system) during
    /// the run: on a machine shared with other work, the wall time says
    /// as much about the other work as about this run, its CPU time less.
    cpu_millis: f64,
    /// Allocations per frame or message during the run.
    allocations: f64,
}

/// CPU time of this process's threads so far, user and system, in ms.
#[cfg(target_os = "linux")]
fn cpu_millis() -> f64 {
    // SAFETY: `getrusage` writes one `rusage` into the zeroed value we own.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut usage), 0);
        usage
    };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    ms(usage.ru_utime) + ms(usage.ru_stime)
}

/// System CPU time of this process's threads so far, in ms: the share of
/// the work spent in the kernel.
#[cfg(target_os = "linux")]
fn system_millis() -> f64 {
    // SAFETY: `getrusage` writes one `rusage` into the zeroed value we own.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut usage), 0);
        usage
    };
    usage.ru_stime.tv_sec as f64 * 1e3 + usage.ru_stime.tv_usec as f64 / 1e3
}

/// Runs `work`, which returns its wall time and its items, and measures
/// the rest of its cost.
fn cost(work: impl FnOnce() -> (std::time::Duration, usize)) -> Cost {
    let (allocations, cpu) = (measure::allocations(), cpu_millis());
    let (elapsed, items) = work();
    Cost {
        millis: elapsed.as_secs_f64() * 1e3,
        cpu_millis: cpu_millis() - cpu,
        allocations: (measure::allocations() - allocations) as f64 / items as f64,
    }
}

/// The pipeline with objects from `alloc`.
fn frames<A: pipeline::Alloc>(alloc: &'static A) -> Cost {
    let config = pipeline::Config {
        frames: FRAMES,
        workers: cores(),
        fail_every: 0,
        panic_every: 0,
    };
    cost(|| {
        let report = pipeline::run(alloc, config);
        assert_eq!(report.encoded, FRAMES as u64, "every frame encoded");
        (report.elapsed, FRAMES)
    })
}

/// `messages` compressed with `deflaters`' objects, on a thread per core.
fn messages_with<D: compress::Deflaters>(deflaters: &D, messages: &[Vec<u8>]) -> Cost {
    let threads = cores();
    cost(|| {
        let report = compress::run(deflaters, messages, threads, MESSAGES / threads);
        (report.elapsed, report.messages as usize)
    })
}

// === buffers in flight ===

/// One run of a second-table workload: prints its wall and CPU time in
/// ms, its allocations per item, the objects the pool made (0 when plain),
/// the share of the run its bound took (system time of CPU time for the
/// echo server, deflate's busy time of the run for the fan-out), and its
/// peak resident set in KiB.
fn run_buffers(workload: &str, version: &str) {
    let plain = match version {
        "stashpool" => false,
        "plain" => true,
        _ => panic!("unknown version {version:?}"),
    };
    let (allocations, cpu, system) = (measure::allocations(), cpu_millis(), system_millis());
    let (elapsed, items, created, bound) = if workload == "echo server" {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cores())
            .enable_io()
            .build()
            .expect("a runtime");
        let report = runtime
            .block_on(async {
                if plain {
                    echo::run(echo::plain, ECHO_CONNECTIONS, ECHO_LINES).await
                } else {
                    echo::run(echo::pooled, ECHO_CONNECTIONS, ECHO_LINES).await
                }
            })
            .expect("the echo server runs");
        drop(runtime);
        let system = system_millis() - system;
        let cpu = cpu_millis() - cpu;
        let created = echo::BUFFERS.stats().created;
        (report.elapsed, report.lines, created, system / cpu)
    } else if workload == "archive" {
        let kind = if plain {
            archive::Kind::Plain
        } else {
            archive::Kind::Pooled
        };
        let report = archive::run(kind, ARCHIVE_FILES);
        let created = archive::BUFFERS.stats().created;
        (report.elapsed, report.files as u64, created, f64::NAN)
    } else if workload == "json log" {
        let sink = std::io::sink();
        let report = if plain {
            json_log::run(json_log::plain, JSON_PRODUCERS, JSON_RECORDS, sink)
        } else {
            json_log::run(json_log::pooled, JSON_PRODUCERS, JSON_RECORDS, sink)
        }
        .expect("the JSON log runs");
        let created = json_log::BUFFERS.stats().created;
        // What bounds it, serde_json, is not timed apart.
        (report.elapsed, report.records, created, f64::NAN)
    } else {
        let path = env::var(FAN_OUT_INPUT).expect("the input's path, from the table");
        let mut input = std::fs::File::open(path).expect("the fan-out's input");
        let level = flate2::Compression::fast();
        let pooled = fan_out::Pooled::new();
        let report = if plain {
            fan_out::run(&fan_out::Plain, &mut input, level)
        } else {
            fan_out::run(&pooled, &mut input, level)
        }
        .expect("the fan-out runs");
        let created = pooled.chunks.stats().created;
        let deflate = report.busy[2].as_secs_f64() / report.elapsed.as_secs_f64();
        (report.elapsed, report.chunks, created, deflate)
    };
    let allocations = (measure::allocations() - allocations) as f64 / items as f64;
    let cpu = cpu_millis() - cpu;
    let hwm = measure::peak_rss_kib().expect("Linux /proc");
    println!(
        "{:.3} {cpu:.3} {allocations:.3} {created} {bound:.4} {hwm}",
        elapsed.as_secs_f64() * 1e3
    );
}

/// A second-table run, as its process printed it.
struct BufferRun {
    millis: f64,
    cpu_millis: f64,
    allocations: f64,
    created: u64,
    bound: f64,
    hwm: u64,
}

fn measure_buffers(me: &Path, workload: &str, version: &str, input: &Path) -> BufferRun {
    let out = Command::new(me)
        .args([workload, version])
        .env(FAN_OUT_INPUT, input)
        .output()
        .expect("run the bench again for one version");
    assert!(
        out.status.success(),
        "{workload} {version} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8 output");
    let fields: Vec<&str> = text.split_whitespace().collect();
    BufferRun {
        millis: fields[0].parse().unwrap(),
        cpu_millis: fields[1].parse().unwrap(),
        allocations: fields[2].parse().unwrap(),
        created: fields[3].parse().unwrap(),
        bound: fields[4].parse().unwrap(),
        hwm: fields[5].parse().unwrap(),
    }
}

/// A generated input file, deleted when dropped.
struct Input(std::path::PathBuf);

impl Drop for Input {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn buffers_table() {
    let me = env::current_exe().expect("the bench's own path");
    let input = Input(env::temp_dir().join(format!("stashpool-pays-{}", std::process::id())));
    {
        let file = std::fs::File::create(&input.0).expect("a temporary file");
        let mut out = std::io::BufWriter::new(file);
        fan_out::write_input(&mut out, FAN_OUT_MIB << 20).expect("write the input");
        std::io::Write::flush(&mut out).expect("write the input");
    }
    // runs[workload][version][round]
    let mut runs: Vec<[Vec<BufferRun>; 2]> = BUFFER_WORKLOADS
        .iter()
        .map(|_| [Vec::new(), Vec::new()])
        .collect();
    for round in 0..ROUNDS {
        eprintln!("round {} of {ROUNDS}", round + 1);
        for (workload, runs) in BUFFER_WORKLOADS.iter().zip(&mut runs) {
            // Which version goes first alternates, so neither always runs
            // on a machine just warmed, or just disturbed, by the other.
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for version in order {
                runs[version].push(measure_buffers(&me, workload, VERSIONS[version], &input.0));
            }
        }
    }
    drop(input);

    let mut text = String::new();
    let out = &mut text;
    writeln!(
        out,
        "## Buffers in flight: the tokio echo server and the fan-out, pooled and plain"
    )
    .unwrap();
    writeln!(out).unwrap();
    writeln!(
        out,
        "`cargo bench --bench pays -- buffers`: `echo server` is `examples/echo_server` \
         ({ECHO_CONNECTIONS} connections x {ECHO_LINES} lines over loopback, {} runtime threads, \
         `read_buf` into a buffer from a `static` `BytePool` per read, or a `Vec::with_capacity(4096)`); \
         `fan-out` is `examples/fan_out` ({FAN_OUT_MIB} MiB in 64 KiB chunks, each frozen into `Bytes` \
         and cloned to a CRC-32, a line counter and a deflate compressor at level 1: chunks from a \
         `ChunkPool` on its defaults, or `Bytes::from(vec![0; 64 KiB])`). {ROUNDS} rounds, each \
         running both versions, a fresh process each, the first of them alternating. *plain ÷ \
         stashpool*: the median over the rounds of plain's time over stashpool's in the same round \
         (above 1: stashpool is faster), with the lowest and the highest round; times and the rest \
         are medians. *bound by*: for the echo server, the kernel's share of the CPU time (system \
         calls and wake-ups); for the fan-out, the share of the run the deflate thread was busy.",
        cores()
    )
    .unwrap();
    writeln!(out).unwrap();
    writeln!(
        out,
        "| workload | version | median (ms) | plain ÷ stashpool (lowest, highest) | CPU (ms) | bound by | objects made | allocations per item | peak RSS (MiB) |"
    )
    .unwrap();
    writeln!(
        out,
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    .unwrap();
    for (workload, runs) in BUFFER_WORKLOADS.iter().zip(&runs) {
        let bound = if *workload == "echo server" {
            "system"
        } else {
            "deflate"
        };
        for ((version, runs), (ratio, made)) in VERSIONS.iter().zip(runs).zip(paired_cells(runs)) {
            writeln!(
                out,
                "| {workload} | {version} | {:.1} | {ratio} | {:.1} | {bound} {:.0}% | {made} | {:.2} | {:.1} |",
                median(runs.iter().map(|r| r.millis).collect()),
                median(runs.iter().map(|r| r.cpu_millis).collect()),
                100.0 * median(runs.iter().map(|r| r.bound).collect()),
                median(runs.iter().map(|r| r.allocations).collect()),
                median(runs.iter().map(|r| r.hwm).collect()) as f64 / 1024.0,
            )
            .unwrap();
        }
    }
    finish(text, "buffers");
}

/// The JSON log (`examples/json_log`), quiet and beside `BUSY_LOOPS` busy
/// loops.
fn json_log_table() -> Paired {
    Paired {
        workload: "json log",
        mode: "json-log",
        busy_loops: &BUSY_LOOPS,
        heading: "Fan-in: a JSON log, pooled and plain",
        description: format!(
            "`cargo bench --bench pays -- json-log`: `examples/json_log`, {JSON_PRODUCERS} \
             producers each serialising {JSON_RECORDS} log records with `serde_json` into a \
             512-byte buffer (from a `static` `BytePool`, or `Vec::with_capacity(512)`) and \
             sending it through a bounded channel to one writer, which writes it through a \
             `BufWriter` and drops it: every buffer is returned on the writer for four takers."
        ),
        item: "record",
    }
}

/// The archive (`examples/archive`), quiet.
fn archive_table() -> Paired {
    Paired {
        workload: "archive",
        mode: "archive",
        busy_loops: &[0],
        heading: "Memory: an archive of files of 1 to 8 MiB, pooled and plain",
        description: format!(
            "`cargo bench --bench pays -- archive`: `examples/archive`, {ARCHIVE_FILES} files of \
             1 to 8 MiB generated into an input buffer and deflated (level 6) into an output \
             buffer on rayon's threads; pooled, both buffers from a `static` `BytePools` (four \
             classes per doubling) under `max_idle_bytes({} MiB)` and the compressors from a \
             `LocalPool`, else `Vec::with_capacity` and `Compress::new` per file.",
            archive::MAX_IDLE_BYTES >> 20
        ),
        item: "file",
    }
}

/// A paired table of two versions of one program (`VERSIONS`), in the
/// second table's rounds: `heading`, then `description`, then a row per
/// version for each setting of `busy_loops` (quiet, or beside this many
/// busy loops: this bench again, spinning, one process each, killed when
/// the rounds end); `mode` is the argument that makes it, `workload` the
/// one that runs a version, `item` what its allocations are counted per.
struct Paired {
    workload: &'static str,
    mode: &'static str,
    busy_loops: &'static [usize],
    heading: &'static str,
    description: String,
    item: &'static str,
}

fn paired_table(table: Paired) {
    let me = env::current_exe().expect("the bench's own path");
    // runs[setting][version][round]
    let mut runs: Vec<[Vec<BufferRun>; 2]> = Vec::new();
    for &busy in table.busy_loops {
        let mut loops: Vec<_> = (0..busy)
            .map(|_| Command::new(&me).arg("spin").spawn().expect("a busy loop"))
            .collect();
        let mut setting = [Vec::new(), Vec::new()];
        for round in 0..ROUNDS {
            eprintln!("{busy} busy loops: round {} of {ROUNDS}", round + 1);
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for version in order {
                let run = measure_buffers(&me, table.workload, VERSIONS[version], Path::new(""));
                setting[version].push(run);
            }
        }
        for busy_loop in &mut loops {
            busy_loop.kill().expect("stop a busy loop");
            busy_loop.wait().expect("reap a busy loop");
        }
        runs.push(setting);
    }

    let mut text = String::new();
    let out = &mut text;
    writeln!(out, "## {}", table.heading).unwrap();
    writeln!(out).unwrap();
    writeln!(
        out,
        "{} {ROUNDS} rounds per setting, each running both versions, a fresh process each, \
         the first of them alternating; *busy loops*: processes spinning beside the rounds on \
         this machine's {} cores. *plain ÷ stashpool*: the median over the rounds of plain's \
         wall time over stashpool's in the same round (above 1: stashpool is faster), with the \
         lowest and the highest round; the rest are medians. CPU: every thread's user and \
         system time. *RSS ÷ plain*: the version's median peak RSS over plain's.",
        table.description,
        cores()
    )
    .unwrap();
    writeln!(out).unwrap();
    writeln!(
        out,
        "| busy loops | version | wall (ms) | plain ÷ stashpool (lowest, highest) | CPU (ms) | objects made | allocations per {} | peak RSS (MiB) | RSS ÷ plain |",
        table.item
    )
    .unwrap();
    writeln!(
        out,
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    .unwrap();
    let rss = |runs: &[BufferRun]| median(runs.iter().map(|r| r.hwm).collect()) as f64;
    for (busy, setting) in table.busy_loops.iter().zip(&runs) {
        let cells = paired_cells(setting);
        for ((version, runs), (ratio, made)) in VERSIONS.iter().zip(setting).zip(cells) {
            writeln!(
                out,
                "| {busy} | {version} | {:.1} | {ratio} | {:.1} | {made} | {:.2} | {:.1} | {:.2} |",
                median(runs.iter().map(|r| r.millis).collect()),
                median(runs.iter().map(|r| r.cpu_millis).collect()),
                median(runs.iter().map(|r| r.allocations).collect()),
                rss(runs) / 1024.0,
                rss(runs) / rss(&setting[1]),
            )
            .unwrap();
        }
    }
    finish(text, table.mode);
}

/// The two versions' cells of a paired table (`runs[version][round]`,
/// stashpool first): the ratio (stashpool: 1; plain: the median over the
/// rounds of plain's time over stashpool's in the same round, with the
/// lowest and the highest) and the objects made (plain: none).
fn paired_cells(runs: &[Vec<BufferRun>; 2]) -> [(String, String); 2] {
    let mut ratios: Vec<f64> = runs[1]
        .iter()
        .zip(&runs[0])
        .map(|(plain, pooled)| plain.millis / pooled.millis)
        .collect();
    ratios.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (low, high) = (ratios[0], ratios[ratios.len() - 1]);
    let made = median(runs[0].iter().map(|r| r.created).collect());
    [
        ("1".to_owned(), made.to_string()),
        (
            format!("{:.3} ({low:.3}, {high:.3})", median(ratios)),
            "-".to_owned(),
        ),
    ]
}

/// Ends a table with its sitting and the command that made it (`pays --
/// {mode}`), prints it and writes it into benches/results/pays.md.
fn finish(mut text: String, mode: &str) {
    writeln!(text).unwrap();
    writeln!(
        text,
        "_{}; commit `{}`; {}; `cargo bench --bench pays -- {mode}`._",
        sitting::date(),
        sitting::commit(),
        sitting::machine(),
    )
    .unwrap();
    print!("{text}");
    write_section(&text);
}

/// Writes `section` (a `## ` heading and what follows it) into
/// benches/results/pays.md, in place of the section of the same heading,
/// or after the others: each table rewrites its own.
fn write_section(section: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("results/pays.md");
    let heading = section.lines().next().expect("a heading");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let mut sections: Vec<String> = Vec::new();
    for line in old.lines() {
        if line.starts_with("## ") || sections.is_empty() {
            sections.push(String::new());
        }
        let last = sections.last_mut().expect("pushed above");
        last.push_str(line);
        last.push('\n');
    }
    let new = section.trim_end().to_owned() + "\n";
    match sections
        .iter_mut()
        .find(|s| s.lines().next() == Some(heading))
    {
        Some(old) => *old = new,
        None => sections.push(new),
    }
    let text = sections
        .iter()
        .map(|s| s.trim_end())
        .collect::<Vec<_>>()
        .join("\n\n")
        + "\n";
    std::fs::write(&path, text).expect("write benches/results/pays.md");
    eprintln!("written to {}", path.display());
}

// === the table ===

/// One run in a fresh process: its cost, and its peak resident set.
fn measure(me: &Path, workload: &str, peer: &str) -> (Cost, u64) {
    let mut command = Command::new(me);
    if peer == "plain, glibc keeping memory" {
        command
            .env("GLIBC_TUNABLES", KEEP_MEMORY)
            .args([workload, "plain"]);
    } else {
        command.args([workload, peer]);
    }
    let out = command.output().expect("run the bench again for one peer");
    assert!(
        out.status.success(),
        "{workload} {peer} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8 output");
    let fields: Vec<&str> = text.split_whitespace().collect();
    let cost = Cost {
        millis: fields[0].parse().unwrap(),
        cpu_millis: fields[1].parse().unwrap(),
        allocations: fields[2].parse().unwrap(),
    };
    (cost, fields[3].parse().unwrap())
}

fn table() {
    let me = env::current_exe().expect("the bench's own path");
    let mut runs: Vec<Vec<Vec<(Cost, u64)>>> = WORKLOADS
        .iter()
        .map(|_| PEERS.iter().map(|_| Vec::new()).collect())
        .collect();
    for round in 0..RUNS {
        eprintln!("round {} of {RUNS}", round + 1);
        for (workload, runs) in WORKLOADS.iter().zip(&mut runs) {
            for (peer, runs) in PEERS.iter().zip(runs) {
                runs.push(measure(&me, workload, peer));
            }
        }
    }

    let mut text = String::new();
    let out = &mut text;
    writeln!(
        out,
        "## Where pools pay: the examples against plain construction and peer pools"
    )
    .unwrap();
    writeln!(out).unwrap();
    writeln!(
        out,
        "`cargo bench --bench pays`: `pipeline` is `examples/frame_pipeline` ({FRAMES} frames, \
         720p and 1080p alternating, {} scaling workers); `compress` is `examples/compress` ({MESSAGES} messages \
         on {} threads, 1 KiB each or 200 B to 4 KiB). {RUNS} runs per peer, interleaved, a fresh process each; \
         the best wall time and the best CPU time (user and system, every thread, during the run), medians of \
         the rest. *÷ stashpool*: the peer's best over stashpool's (above 1: stashpool is faster), and its \
         median peak RSS over stashpool's. `plain, glibc keeping memory`: plain with \
         `GLIBC_TUNABLES={KEEP_MEMORY}`.",
        cores(),
        cores()
    )
    .unwrap();
    writeln!(out).unwrap();
    writeln!(
        out,
        "| workload | peer | best (ms) | median (ms) | ÷ stashpool | CPU (ms) | ÷ stashpool | peak RSS (MiB) | ÷ stashpool | allocations per item |"
    )
    .unwrap();
    writeln!(
        out,
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    .unwrap();
    for (workload, runs) in WORKLOADS.iter().zip(&runs) {
        let best = |runs: &[(Cost, u64)], of: fn(&Cost) -> f64| {
            runs.iter().map(|r| of(&r.0)).fold(f64::INFINITY, f64::min)
        };
        let wall = |runs: &[(Cost, u64)]| best(runs, |c| c.millis);
        let cpu = |runs: &[(Cost, u64)]| best(runs, |c| c.cpu_millis);
        let hwm = |runs: &[(Cost, u64)]| median(runs.iter().map(|r| r.1).collect());
        let ours = &runs[0];
        for (peer, runs) in PEERS.iter().zip(runs) {
            writeln!(
                out,
                "| {workload} | {peer} | {:.1} | {:.1} | {:.2} | {:.1} | {:.2} | {:.1} | {:.2} | {:.2} |",
                wall(runs),
                median(runs.iter().map(|r| r.0.millis).collect()),
                wall(runs) / wall(ours),
                cpu(runs),
                cpu(runs) / cpu(ours),
                hwm(runs) as f64 / 1024.0,
                hwm(runs) as f64 / hwm(ours) as f64,
                median(runs.iter().map(|r| r.0.allocations).collect()),
            )
            .unwrap();
        }
    }
    writeln!(out).unwrap();
    writeln!(
        out,
        "_{}; commit `{}`; {}; `cargo bench --bench pays`._",
        sitting::date(),
        sitting::commit(),
        sitting::machine(),
    )
    .unwrap();
    print!("{text}");
    write_section(&text);
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("pays reads /proc/self/status: Linux only");
}

#[cfg(target_os = "linux")]
fn main() {
    // `cargo bench` passes `--bench`: ignore it.
    let args: Vec<String> = env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    match args.as_slice() {
        [workload, peer] => run_one(workload, peer),
        [buffers] if buffers == "buffers" => buffers_table(),
        [json] if json == "json-log" => paired_table(json_log_table()),
        [archive] if archive == "archive" => paired_table(archive_table()),
        [spin] if spin == "spin" => loop {
            std::hint::spin_loop();
        },
        [] => {
            table();
            buffers_table();
            paired_table(json_log_table());
            paired_table(archive_table());
        }
        _ => panic!(
            "usage: pays [buffers | json-log | archive | WORKLOAD PEER]; workloads {WORKLOADS:?} \
             {BUFFER_WORKLOADS:?} \"json log\" \"archive\", \
             peers {PEERS:?} {VERSIONS:?}"
        ),
    }
}

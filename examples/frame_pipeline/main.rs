//! A media pipeline across threads: a producer renders 720p and 1080p RGBA
//! frames, a `workers::WorkerPool` scales each to a 320x180 thumbnail, an
//! encoder thread writes the thumbnails as PNG into byte buffers, and a
//! sink thread takes the PNGs. Frames, thumbnails and buffers come from
//! stashpool pools, each taken on one thread and given back on another.
//!
//! ```text
//! cargo run --release --example frame_pipeline --features image            # pooled
//! cargo run --release --example frame_pipeline --features image -- --plain # everything made fresh
//! ```
//!
//! A frame is megabytes: made fresh, glibc (with its default settings)
//! maps it afresh or hands its pages back to the kernel when it is freed,
//! so each new frame faults its pages in again, zeroed by the kernel,
//! though the producer overwrites every pixel. The pooled pipeline keeps
//! the few frames in flight under `Reset::Keep` and reuses them as they
//! are. (The zeroing alone would cost little: the stores of a `memset`
//! claim cache lines without reading them, and writing over a kept frame
//! reads each line first, which costs about as much. It is the faults the
//! pool saves; `benches/pays.rs` also runs glibc told to keep its memory.)
//! `--plain` runs the same program with `RgbaImage::new` and
//! `Vec::with_capacity` wherever the pooled one takes from a pool.
//!
//! Edges it shows: `--fail-every N` makes the encoding of every Nth
//! thumbnail fail partway (a write error), and that frame's objects go
//! back to their pools while the stream goes on; `--panic-every N` makes
//! the scaling of every Nth frame panic with its frame and thumbnail in
//! hand, and the unwinding gives both back. After the run the program
//! accounts for every pooled object from the pools' counters, then sweeps
//! twice and shows the pools empty. `benches/pays.rs` measures the
//! pipeline against plain allocation and the peer pools, a fresh process
//! each.

#[path = "../common/measure.rs"]
mod measure;
mod pipeline;

use std::env;
use std::panic;
use std::thread;

use pipeline::{Config, INJECTED_PANIC, Plain, Pooled};
use stashpool::Pool;

#[global_allocator]
static ALLOCATOR: measure::Counting = measure::Counting;

const HELP: &str = "\
usage: frame_pipeline [--plain] [--frames N] [--workers N] [--fail-every N] [--panic-every N]

  --plain            make every frame, thumbnail and buffer fresh (no pools)
  --frames N         frames to push through, 720p and 1080p alternating (default 600)
  --workers N        most scaling threads (default: one per core)
  --fail-every N     the encoding of every Nth thumbnail fails (default 0: none)
  --panic-every N    the scaling of every Nth frame panics (default 0: none)";

fn options() -> (bool, Config) {
    let mut plain = false;
    let mut config = Config {
        frames: 600,
        workers: thread::available_parallelism().map_or(2, |n| n.get()),
        fail_every: 0,
        panic_every: 0,
    };
    let mut args = env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--plain" => plain = true,
            "--frames" => config.frames = measure::value(&arg, args.next()),
            "--workers" => config.workers = measure::value(&arg, args.next()),
            "--fail-every" => config.fail_every = measure::value(&arg, args.next()),
            "--panic-every" => config.panic_every = measure::value(&arg, args.next()),
            "--help" | "-h" => {
                println!("{HELP}");
                std::process::exit(0);
            }
            _ => measure::usage_error(&format!("unknown argument {arg:?}")),
        }
    }
    if config.workers == 0 {
        measure::usage_error("--workers must be at least 1");
    }
    (plain, config)
}

fn main() {
    let (plain, config) = options();
    // The injected panics are expected: one line each, not a backtrace.
    let default_hook = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        match info.payload().downcast_ref::<String>() {
            Some(message) if message.starts_with(INJECTED_PANIC) => eprintln!("  ({message})"),
            _ => default_hook(info),
        }
    }));
    println!(
        "frame_pipeline: {} frames (720p and 1080p) -> {} workers scaling to {}x{} -> PNG encoder -> sink, {}",
        config.frames,
        config.workers,
        pipeline::THUMBNAIL.0,
        pipeline::THUMBNAIL.1,
        if plain {
            "everything made fresh (--plain)"
        } else {
            "frames, thumbnails and buffers from pools"
        }
    );

    // The tasks and channels are `'static`, and so are the pooled objects
    // that travel in them: the pools live as long as the program.
    let pooled: &'static Pooled = Box::leak(Box::new(Pooled::new()));
    let allocations = measure::allocations();
    let report = if plain {
        pipeline::run(&Plain, config)
    } else {
        pipeline::run(pooled, config)
    };
    let allocations = measure::allocations() - allocations;

    let secs = report.elapsed.as_secs_f64();
    println!("  time         {secs:.3} s");
    println!("  frames/s     {:.1}", config.frames as f64 / secs);
    println!(
        "  PNGs         {} encoded ({:.1} KiB on average), {} failed, {} panicked",
        report.encoded,
        report.png_bytes as f64 / report.encoded.max(1) as f64 / 1024.0,
        report.failed,
        report.panicked
    );
    println!(
        "  allocations  {allocations} ({:.1} per frame)",
        allocations as f64 / config.frames.max(1) as f64
    );
    println!("  peak RSS     {}", measure::peak_rss());
    if plain {
        return;
    }

    // Every stage has finished: the counters are exact.
    println!("pools after the run:");
    // Each panicked task held a frame and a thumbnail: the unwinding
    // dropped both, and their pools counted them discarded.
    let pools: [(&str, &dyn Pool); 3] = [
        ("frames", &pooled.frames),
        ("thumbnails", &pooled.thumbnails),
        ("PNG buffers", &pooled.pngs),
    ];
    for (name, pool) in pools {
        measure::account(name, pool.stats());
    }
    println!("after two sweeps:");
    for (name, pool) in pools {
        pool.sweep();
        pool.sweep();
        measure::account(name, pool.stats());
        assert_eq!(
            pool.stats().idle,
            0,
            "{name}: two sweeps leave the pool empty"
        );
    }
    println!("  the pools are empty");
}

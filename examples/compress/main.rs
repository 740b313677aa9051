//! Pooled compressors: many small JSON-like messages (200 B to 4 KiB)
//! compressed with `flate2` from several threads, each message with a
//! `flate2::Compress` and an output buffer taken from stashpool pools, as
//! Go's `net/http` keeps its gzip writers in a `sync.Pool`.
//!
//! ```text
//! cargo run --release --example compress                 # pooled
//! cargo run --release --example compress -- --plain      # Compress::new per message
//! cargo run --release --example compress -- --size 1024  # 1 KiB messages only
//! ```
//!
//! A compressor is large next to a small message: `Compress::new` allocates and zeroes its window, hash chains and
//! Huffman tables, hundreds of KiB, for a message of a few KiB. A pooled
//! one is `reset` when it comes back, which zeroes the same tables (flate2's
//! default backend, miniz_oxide, zeroes them in both) but allocates
//! nothing. So what the pool saves is the allocator's part, and that
//! depends on what the allocator does with hundreds of KiB freed after
//! every message: glibc hands the free top of a thread's heap back to the
//! kernel once it exceeds the trim threshold (128 KiB by default), and each
//! message then faults those pages in again; a glibc told to keep them
//! (`GLIBC_TUNABLES=glibc.malloc.trim_threshold=...`) leaves the pool
//! little to save.
//!
//! `--plain` runs the same program with `Compress::new` and a fresh `Vec`
//! per message. Both print their time, allocations, peak resident set
//! and, pooled, the pools' counters; `benches/pays.rs` measures both, with
//! glibc's defaults and told to keep its memory, against the peer pools,
//! a fresh process each.

#[path = "../common/measure.rs"]
mod measure;
mod work;

use std::env;
use std::thread;

use stashpool::Pool;
use work::{Plain, Pooled, SIZES};

#[global_allocator]
static ALLOCATOR: measure::Counting = measure::Counting;

const HELP: &str = "\
usage: compress [--plain] [--messages N] [--threads N] [--size BYTES]

  --plain         make a compressor and a buffer per message (no pools)
  --messages N    messages in all, shared among the threads (default 100000)
  --threads N     compressing threads (default: one per core)
  --size BYTES    every message this long (200 to 4096; default: mixed)";

struct Options {
    plain: bool,
    messages: usize,
    threads: usize,
    size: Option<usize>,
}

fn options() -> Options {
    let mut options = Options {
        plain: false,
        messages: 100_000,
        threads: thread::available_parallelism().map_or(2, |n| n.get()),
        size: None,
    };
    let mut args = env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--plain" => options.plain = true,
            "--messages" => options.messages = measure::value(&arg, args.next()),
            "--threads" => options.threads = measure::value(&arg, args.next()),
            "--size" => options.size = Some(measure::value(&arg, args.next())),
            "--help" | "-h" => {
                println!("{HELP}");
                std::process::exit(0);
            }
            _ => measure::usage_error(&format!("unknown argument {arg:?}")),
        }
    }
    if options.threads == 0 || options.messages < options.threads {
        measure::usage_error("--threads must be at least 1 and at most --messages");
    }
    if options
        .size
        .is_some_and(|size| !(SIZES.0..=SIZES.1).contains(&size))
    {
        measure::usage_error("--size must be 200 to 4096");
    }
    options
}

fn main() {
    let options = options();
    let messages = work::messages(1024, options.size, 42);
    let per_thread = options.messages / options.threads;
    let sizes = options.size.map_or_else(
        || format!("{} B to {} KiB", SIZES.0, SIZES.1 / 1024),
        |size| format!("{size} B"),
    );
    println!(
        "compress: {} messages of {sizes} on {} threads, raw deflate at level {}, {}",
        per_thread * options.threads,
        options.threads,
        work::level().level(),
        if options.plain {
            "a new compressor and buffer per message (--plain)"
        } else {
            "compressors and buffers from pools"
        }
    );

    let pooled = Pooled::new();
    let allocations = measure::allocations();
    let report = if options.plain {
        work::run(&Plain, &messages, options.threads, per_thread)
    } else {
        work::run(&pooled, &messages, options.threads, per_thread)
    };
    let allocations = measure::allocations() - allocations;

    let secs = report.elapsed.as_secs_f64();
    println!("  time         {:.3} s", secs);
    println!("  messages/s   {:.0}", report.messages as f64 / secs);
    println!(
        "  input        {:.1} MiB at {:.1} MiB/s, compressed to {:.1}%",
        report.bytes_in as f64 / (1 << 20) as f64,
        report.bytes_in as f64 / (1 << 20) as f64 / secs,
        100.0 * report.bytes_out as f64 / report.bytes_in as f64
    );
    println!(
        "  allocations  {allocations} ({:.3} per message)",
        allocations as f64 / report.messages as f64
    );
    println!("  peak RSS     {}", measure::peak_rss());
    if options.plain {
        return;
    }

    // The threads were joined: the counters are exact.
    println!("pools after the run:");
    measure::account("compressors", pooled.compressors.stats());
    measure::account("buffers", pooled.buffers.stats());
    let pools: [&dyn Pool; 2] = [&pooled.compressors, &pooled.buffers];
    for pool in pools {
        pool.sweep();
        pool.sweep();
    }
    println!("after two sweeps:");
    measure::account("compressors", pooled.compressors.stats());
    measure::account("buffers", pooled.buffers.stats());
    let idle: usize = pools.iter().map(|pool| pool.stats().idle).sum();
    assert_eq!(idle, 0, "two sweeps leave the pools empty");
    println!("  the pools are empty");
}

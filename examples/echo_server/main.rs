//! A tokio line-echo server on pooled buffers: each connection reads with
//! `read_buf(&mut guard)` into a buffer from a `static` `BytePool` and
//! writes back what it read; 64 client connections in the same process
//! send lines and check every echo.
//!
//! ```text
//! cargo run --release --example echo_server --features bytes             # pooled
//! cargo run --release --example echo_server --features bytes -- --plain  # Vec::with_capacity per read
//! ```
//!
//! What it shows is the fit, not a speed-up: a guard is a `BufMut`, so
//! tokio reads into it as into a `Vec<u8>`, and a `static` pool's guard
//! is `Send + 'static`, so it lives across `.await`s in a spawned task.
//! The server is bound by system calls and wake-ups (a read, a write and
//! a task wake per line on each side of the loopback), next to which one
//! 4 KiB allocation per read costs little: `benches/results/pays.md`
//! measures both versions, alternated, one process each.

#[path = "../common/measure.rs"]
mod measure;
mod work;

use std::env;
use std::thread;

#[global_allocator]
static ALLOCATOR: measure::Counting = measure::Counting;

const HELP: &str = "\
usage: echo_server [--plain] [--connections N] [--lines N] [--threads N]

  --plain           a Vec::with_capacity(4096) per read (no pool)
  --connections N   client connections (default 64)
  --lines N         lines each client sends (default 2000)
  --threads N       runtime worker threads (default: one per core)";

struct Options {
    plain: bool,
    connections: usize,
    lines: usize,
    threads: usize,
}

fn options() -> Options {
    let mut options = Options {
        plain: false,
        connections: 64,
        lines: 2000,
        threads: thread::available_parallelism().map_or(2, |n| n.get()),
    };
    let mut args = env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--plain" => options.plain = true,
            "--connections" => options.connections = measure::value(&arg, args.next()),
            "--lines" => options.lines = measure::value(&arg, args.next()),
            "--threads" => options.threads = measure::value(&arg, args.next()),
            "--help" | "-h" => {
                println!("{HELP}");
                std::process::exit(0);
            }
            _ => measure::usage_error(&format!("unknown argument {arg:?}")),
        }
    }
    if options.connections == 0 || options.threads == 0 {
        measure::usage_error("--connections and --threads must be at least 1");
    }
    options
}

fn main() -> std::io::Result<()> {
    let options = options();
    println!(
        "echo_server: {} connections x {} lines over loopback, {} runtime threads, {}",
        options.connections,
        options.lines,
        options.threads,
        if options.plain {
            "a Vec per read (--plain)"
        } else {
            "read_buf into buffers from a static BytePool"
        }
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.threads)
        .enable_io()
        .build()?;
    let allocations = measure::allocations();
    let report = runtime.block_on(async {
        if options.plain {
            work::run(work::plain, options.connections, options.lines).await
        } else {
            work::run(work::pooled, options.connections, options.lines).await
        }
    })?;
    let allocations = measure::allocations() - allocations;
    // The server's tasks end with the runtime: every buffer is back.
    drop(runtime);

    let secs = report.elapsed.as_secs_f64();
    println!("  time         {secs:.3} s");
    println!(
        "  lines/s      {:.0} ({:.1} MiB echoed)",
        report.lines as f64 / secs,
        report.bytes as f64 / f64::from(1 << 20)
    );
    println!(
        "  allocations  {allocations} ({:.2} per line, clients' included)",
        allocations as f64 / report.lines.max(1) as f64
    );
    println!("  peak RSS     {}", measure::peak_rss());
    if !options.plain {
        println!("pool after the run:");
        measure::account("buffers", work::BUFFERS.stats());
    }
    Ok(())
}

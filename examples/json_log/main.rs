//! A structured logger's shape: four threads serialise JSON log records
//! with `serde_json` into 512-byte buffers from a `static` `BytePool` and
//! send them through a channel to one writer thread, which writes them
//! through a `BufWriter` and drops them. Every buffer is dropped on the
//! writer for four producers (a fan-in), so the writer gathers them and
//! passes them back to the producers eight at a time.
//!
//! ```text
//! cargo run --release --example json_log                  # 1,000,000 records, pooled
//! cargo run --release --example json_log -- --plain       # a Vec per record
//! cargo run --release --example json_log -- --records 100000 --output log.json
//! ```
//!
//! Where the time goes: `serde_json`, above all. A pool saves the
//! allocation and the free of each record's buffer, a small share of the
//! work: the two versions run level on a quiet machine. `benches/pays.rs`
//! measures both, alternated, one process each, quiet and beside two busy
//! loops (`benches/results/pays.md`).

#[path = "../common/measure.rs"]
mod measure;
mod work;

use std::env;
use std::fs::File;
use std::path::PathBuf;

#[global_allocator]
static ALLOCATOR: measure::Counting = measure::Counting;

const HELP: &str = "\
usage: json_log [--plain] [--records N] [--producers N] [--output FILE]

  --plain          a Vec::with_capacity(512) per record (no pool)
  --records N      records per producer (default 250000)
  --producers N    producer threads (default 4)
  --output FILE    write the log to FILE (default: discard it)";

struct Options {
    plain: bool,
    records: u64,
    producers: usize,
    output: Option<PathBuf>,
}

fn options() -> Options {
    let mut options = Options {
        plain: false,
        records: 250_000,
        producers: 4,
        output: None,
    };
    let mut args = env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--plain" => options.plain = true,
            "--records" => options.records = measure::value(&arg, args.next()),
            "--producers" => options.producers = measure::value(&arg, args.next()),
            "--output" => options.output = Some(measure::value(&arg, args.next())),
            "--help" | "-h" => {
                println!("{HELP}");
                std::process::exit(0);
            }
            _ => measure::usage_error(&format!("unknown argument {arg:?}")),
        }
    }
    if options.producers == 0 {
        measure::usage_error("--producers must be at least 1");
    }
    options
}

fn main() -> std::io::Result<()> {
    let options = options();
    let out: Box<dyn std::io::Write + Send> = match &options.output {
        Some(path) => Box::new(File::create(path)?),
        None => Box::new(std::io::sink()),
    };
    let before = measure::allocations();
    let report = if options.plain {
        work::run(work::plain, options.producers, options.records, out)?
    } else {
        work::run(work::pooled, options.producers, options.records, out)?
    };
    let allocations = measure::allocations() - before;
    println!(
        "{} records ({} MiB) from {} producers in {:.1} ms: {:.0} ns per record",
        report.records,
        report.bytes >> 20,
        options.producers,
        report.elapsed.as_secs_f64() * 1e3,
        report.elapsed.as_secs_f64() * 1e9 / report.records as f64,
    );
    println!(
        "{:.2} allocations per record; peak RSS {}",
        allocations as f64 / report.records as f64,
        measure::peak_rss()
    );
    if !options.plain {
        measure::account("buffers", work::BUFFERS.stats());
    }
    Ok(())
}

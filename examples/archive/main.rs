//! An archiver's shape: 120 files of 1 to 8 MiB, each generated into an
//! input buffer and deflated into an output buffer on rayon's threads,
//! both buffers from a `static` `BytePools` under a byte budget, the
//! compressor from a pool.
//!
//! ```text
//! cargo run --release --example archive             # pooled
//! cargo run --release --example archive -- --plain  # Vec and Compress::new per file
//! cargo run --release --example archive -- --files 16
//! ```
//!
//! Where the time goes: deflate, above all (`miniz_oxide`). A pool saves
//! the page faults of fresh multi-MiB buffers and a compressor's tables
//! per file, a small share: the two versions run about level. What the
//! pool must not cost is memory: its classes are four to a doubling, so a
//! buffer has at most a quarter more room than asked for, and
//! `max_idle_bytes` bounds what all classes keep idle together (a budget
//! of one round of work: `work::MAX_IDLE_BYTES`). `benches/pays.rs`
//! measures both versions' time and peak resident set, alternated, one
//! process each (`benches/results/pays.md`).

#[path = "../common/measure.rs"]
mod measure;
mod work;

use std::env;

#[global_allocator]
static ALLOCATOR: measure::Counting = measure::Counting;

const HELP: &str = "\
usage: archive [--plain] [--files N]

  --plain     a Vec::with_capacity per buffer and Compress::new per file
  --files N   files to deflate, 1 to 8 MiB each (default 120)";

fn main() {
    let mut plain = false;
    let mut files = 120;
    let mut args = env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--plain" => plain = true,
            "--files" => files = measure::value(&arg, args.next()),
            "--help" | "-h" => {
                println!("{HELP}");
                return;
            }
            _ => measure::usage_error(&format!("unknown argument {arg:?}")),
        }
    }
    let kind = if plain {
        work::Kind::Plain
    } else {
        work::Kind::Pooled
    };
    let before = measure::allocations();
    let report = work::run(kind, files);
    let allocations = measure::allocations() - before;
    println!(
        "{} files, {} MiB deflated to {} MiB on {} threads in {:.1} ms",
        report.files,
        report.bytes_in >> 20,
        report.bytes_out >> 20,
        rayon::current_num_threads(),
        report.elapsed.as_secs_f64() * 1e3,
    );
    println!(
        "{:.1} allocations per file; peak RSS {}",
        allocations as f64 / report.files as f64,
        measure::peak_rss()
    );
    if !plain {
        let buffers = work::BUFFERS.stats();
        measure::account("buffers", buffers);
        assert!(
            buffers.idle_bytes <= work::MAX_IDLE_BYTES,
            "the buffers keep no more than their budget"
        );
        measure::account("compressors", work::COMPRESSORS.stats());
    }
}

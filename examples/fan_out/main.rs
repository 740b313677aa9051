//! A fan-out of pooled chunks as `bytes::Bytes`: a file read in 64 KiB
//! chunks, each chunk frozen into `Bytes` with no copy and cloned to three
//! consumer threads (a CRC-32, a line counter and a deflate compressor).
//! A chunk goes back to its `ChunkPool` when the last consumer drops its
//! clone, so the pool makes about as many chunks as are in flight, not
//! one per chunk read.
//!
//! ```text
//! cargo run --release --example fan_out --features bytes             # 256 MiB, pooled
//! cargo run --release --example fan_out --features bytes -- --plain  # Bytes::from(vec) per chunk
//! cargo run --release --example fan_out --features bytes -- --mib 8  # a quick run
//! ```
//!
//! The input is generated (text-like lines) into a temporary file that the
//! run deletes, unless `--input` names a file to read.
//!
//! Where the time goes: the consumers, deflate above all, not the chunks'
//! memory. Each consumer's busy time is printed; the pooled and plain runs
//! differ only in where a chunk comes from, a pooled chunk (zeroed on
//! return under the default `Reset::Zero`) against `vec![0; 64 KiB]`, both
//! a `memset` of the chunk next to a read and three passes over it.
//! `benches/pays.rs` measures both, alternated, one process each
//! (`benches/results/pays.md`).

#[path = "../common/measure.rs"]
mod measure;
mod work;

use std::env;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use flate2::Compression;
use work::{CHUNK, IN_FLIGHT, Plain, Pooled};

#[global_allocator]
static ALLOCATOR: measure::Counting = measure::Counting;

const HELP: &str = "\
usage: fan_out [--plain] [--mib N] [--input FILE] [--level N]

  --plain         Bytes::from(vec![0; 64 KiB]) per chunk (no pool)
  --mib N         generate N MiB of input (default 256)
  --input FILE    read FILE instead of generating input
  --level N       deflate level, 0 to 9 (default 1, the fastest)";

struct Options {
    plain: bool,
    mib: u64,
    input: Option<PathBuf>,
    level: u32,
}

fn options() -> Options {
    let mut options = Options {
        plain: false,
        mib: 256,
        input: None,
        level: 1,
    };
    let mut args = env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--plain" => options.plain = true,
            "--mib" => options.mib = measure::value(&arg, args.next()),
            "--input" => options.input = Some(measure::value(&arg, args.next())),
            "--level" => options.level = measure::value(&arg, args.next()),
            "--help" | "-h" => {
                println!("{HELP}");
                std::process::exit(0);
            }
            _ => measure::usage_error(&format!("unknown argument {arg:?}")),
        }
    }
    if options.level > 9 {
        measure::usage_error("--level must be 0 to 9");
    }
    options
}

/// A generated input file, deleted when dropped.
struct Generated(PathBuf);

impl Drop for Generated {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn main() -> std::io::Result<()> {
    let options = options();
    let mut generated = None;
    let path = match options.input.clone() {
        Some(path) => path,
        None => {
            let path = env::temp_dir().join(format!("stashpool-fan-out-{}", std::process::id()));
            let file = Generated(path.clone());
            let mut out = BufWriter::new(File::create(&path)?);
            work::write_input(&mut out, options.mib << 20)?;
            out.flush()?;
            generated = Some(file);
            path
        }
    };
    println!(
        "fan_out: {} in {} KiB chunks to 3 consumers (CRC-32, lines, deflate at level {}), {}",
        path.display(),
        CHUNK / 1024,
        options.level,
        if options.plain {
            "Bytes::from(vec) per chunk (--plain)"
        } else {
            "chunks from a ChunkPool, frozen into Bytes"
        }
    );

    let level = Compression::new(options.level);
    let pooled = Pooled::new();
    let mut input = File::open(&path)?;
    let allocations = measure::allocations();
    let report = if options.plain {
        work::run(&Plain, &mut input, level)?
    } else {
        work::run(&pooled, &mut input, level)?
    };
    let allocations = measure::allocations() - allocations;
    drop(generated);

    let secs = report.elapsed.as_secs_f64();
    let mib = report.bytes as f64 / f64::from(1 << 20);
    println!("  time         {secs:.3} s");
    println!(
        "  input        {mib:.1} MiB in {} chunks, {:.1} MiB/s",
        report.chunks,
        mib / secs
    );
    println!(
        "  consumers    crc32 {:08x}, {} lines, deflated to {:.1}%",
        report.crc,
        report.lines,
        100.0 * report.deflated as f64 / report.bytes.max(1) as f64
    );
    let [crc, lines, deflate] = report.busy.map(|busy| busy.as_secs_f64());
    println!(
        "  busy         crc32 {crc:.3} s, lines {lines:.3} s, deflate {deflate:.3} s \
         ({:.0}% of the run)",
        100.0 * deflate / secs
    );
    println!(
        "  allocations  {allocations} ({:.2} per chunk)",
        allocations as f64 / report.chunks.max(1) as f64
    );
    println!("  peak RSS     {}", measure::peak_rss());
    if options.plain {
        return Ok(());
    }

    // The consumers were joined and dropped every clone: the counters are
    // exact, and every chunk is back.
    let stats = pooled.chunks.stats();
    println!("pool after the run:");
    measure::account("chunks", stats);
    println!(
        "  {} chunks made for {} read: at most {IN_FLIGHT} are in flight",
        stats.created, report.chunks
    );
    assert!(
        stats.created as usize <= IN_FLIGHT + 4,
        "the pool made more chunks than are in flight"
    );
    Ok(())
}

//! A pool's first use: in a fresh process, and on each new thread of a
//! running one.
//!
//! Each sample of the first two rows is a fresh process (this binary, run
//! again) that times its first `with` on a new pool (background sweeping,
//! the default), alone or with another thread already running (parked on
//! a channel, as in every server and test binary). The third row times the
//! first `with` of each of several new threads on a pool that the
//! process has used for a while. Rows give the median and the worst sample.
//!
//! `cargo bench --bench first_use` prints the table and writes it to
//! `benches/results/first_use.md`. With `FIRST_USE_BEFORE=PATH` (this
//! bench built from another commit, named by `FIRST_USE_BEFORE_LABEL`), the
//! two binaries' processes alternate in one sitting and the table has a
//! column for each.

use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use stashpool::LocalPool;

#[path = "common/sitting.rs"]
mod sitting;

/// Fresh processes per row and binary.
const PROCESSES: usize = 25;
/// Processes, and new threads in each, for the per-thread row.
const THREAD_PROCESSES: usize = 5;
const THREADS: usize = 8;

const ROWS: [(&str, &str); 3] = [
    ("alone", "first `with` in a fresh process, no other thread"),
    (
        "busy",
        "first `with` in a fresh process, one other thread running",
    ),
    (
        "threads",
        "first `with` on a new thread, the pool in use for a while",
    ),
];

/// Times `f`, in microseconds.
fn micros(f: impl FnOnce()) -> f64 {
    let start = Instant::now();
    f();
    start.elapsed().as_secs_f64() * 1e6
}

fn first_with() -> f64 {
    let pool: LocalPool<Vec<u8>> = LocalPool::new(Vec::new);
    let t = micros(|| pool.with(|v| v.push(1)));
    std::mem::forget(pool);
    t
}

/// One child process: prints its samples, one a line.
fn child(row: &str) {
    match row {
        "alone" => println!("{}", first_with()),
        "busy" => {
            let (started, wait) = mpsc::channel();
            let (_park, parked) = mpsc::channel::<()>();
            thread::spawn(move || {
                started.send(()).unwrap();
                let _ = parked.recv();
            });
            wait.recv().unwrap();
            println!("{}", first_with());
        }
        "threads" => {
            static POOL: LocalPool<Vec<u8>> = LocalPool::new(Vec::new);
            POOL.with(|v| v.push(1));
            // A running process: its sweeper is up and settled.
            thread::sleep(Duration::from_millis(100));
            for _ in 0..THREADS {
                let t = thread::spawn(|| micros(|| POOL.with(|v| v.push(1))))
                    .join()
                    .unwrap();
                println!("{t}");
            }
        }
        _ => panic!("unknown row {row}"),
    }
}

fn samples(binary: &str, row: &str) -> Vec<f64> {
    let out = Command::new(binary)
        .env("FIRST_USE_CHILD", row)
        .output()
        .expect("run the child");
    assert!(out.status.success(), "child {binary} {row}: {out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| line.parse().unwrap())
        .collect()
}

fn main() {
    if let Ok(row) = std::env::var("FIRST_USE_CHILD") {
        return child(&row);
    }
    // The machine may be shared: say how busy it was.
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split(' ').next().unwrap_or("unknown").to_owned();
    let me = std::env::current_exe().unwrap();
    let mut builds = Vec::new();
    if let Ok(before) = std::env::var("FIRST_USE_BEFORE") {
        let label = std::env::var("FIRST_USE_BEFORE_LABEL").unwrap_or("before".into());
        builds.push((label, before));
    }
    builds.push((sitting::commit(), me.to_str().unwrap().to_owned()));
    // [row][build]: every sample.
    let mut all = vec![vec![Vec::new(); builds.len()]; ROWS.len()];
    for round in 0..PROCESSES {
        for (row, (name, _)) in ROWS.iter().enumerate() {
            if *name == "threads" && round >= THREAD_PROCESSES {
                continue;
            }
            for (build, (_, binary)) in builds.iter().enumerate() {
                all[row][build].extend(samples(binary, name));
            }
        }
    }
    let mut table = String::from("| first use | samples |");
    let mut rule = String::from("| --- | ---: |");
    for (label, _) in &builds {
        table += &format!(" `{label}`: median, µs | worst, µs |");
        rule += " ---: | ---: |";
    }
    table += &format!("\n{rule}\n");
    for (row, (_, what)) in ROWS.iter().enumerate() {
        table += &format!("| {what} | {} |", all[row][0].len());
        for samples in &mut all[row] {
            samples.sort_by(f64::total_cmp);
            let median = samples[samples.len() / 2];
            let worst = samples[samples.len() - 1];
            table += &format!(" {median:.0} | {worst:.0} |");
        }
        table += "\n";
    }
    let out = format!(
        "## A pool's first use\n\n\
         `cargo bench --bench first_use`: the first `with` on a new pool (background \
         sweeping), each sample a fresh process ({PROCESSES} per row and build), alone or \
         with one other thread parked on a channel; and the first `with` of each new \
         thread ({THREADS} per process, {THREAD_PROCESSES} processes) on a pool the process \
         has used for 100 ms. Builds alternate process by process, in one sitting.\n\n\
         {}; {}, load average {load} at the start.\n\n{table}",
        sitting::date(),
        sitting::machine()
    );
    print!("{out}");
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/results");
    std::fs::write(format!("{dir}/first_use.md"), out).unwrap();
}

//! Time and peak memory of running many tasks with `WorkerPool` and its
//! peers, in a fresh process per run so that each peak is that peer's alone.
//!
//! ```text
//! cargo run --release --example workers_rss                   # the table
//! cargo run --release --example workers_rss -- rayon sleepy   # one run
//! ```
//!
//! Workloads: `tiny` (100 000 one-multiply tasks, one worker per core) and
//! `sleepy` (10 000 tasks of a 1 ms sleep, 64 workers). `baseline` runs
//! nothing: what the process itself takes.
//!
//! Two peaks are reported. `VmHWM` is the kernel's peak resident set; it
//! includes the pages of the program and of libc that happen to be mapped
//! in, which differ by which code ran and vary by a few hundred KiB from run
//! to run. Peak anonymous memory (`RssAnon`, sampled every millisecond by a
//! helper thread) is what the run allocated: heap, thread stacks, queues.
//! Linux only.

#[path = "../benches/common/peers.rs"]
mod peers;

use std::env;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use peers::{Peer, NAMES};

/// Processes per peer and workload; the table shows medians.
const RUNS: usize = 5;

/// A field of `/proc/self/status`, in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    let line = status
        .lines()
        .find(|line| line.starts_with(field))
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Runs one peer on one workload in this process; prints the milliseconds it
/// took, the peak resident set and the peak anonymous memory, in KiB.
fn run_one(peer: &str, workload: &str) {
    let (tasks, workers) = match workload {
        "tiny" => (peers::TINY_TASKS, peers::cores()),
        "sleepy" => (peers::SLEEPY_TASKS, peers::SLEEPY_WORKERS),
        _ => panic!("unknown workload {workload:?}: tiny or sleepy"),
    };
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = Arc::clone(&done);
        thread::spawn(move || {
            let mut peak = status_kib("RssAnon:");
            while !done.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(1));
                peak = peak.max(status_kib("RssAnon:"));
            }
            peak
        })
    };
    let start = Instant::now();
    if peer != "baseline" {
        let peer = Peer::new(peer, workers);
        if workload == "tiny" {
            peer.run(tasks, peers::tiny_task);
        } else {
            peer.run(tasks, peers::sleepy_task);
        }
    }
    let millis = start.elapsed().as_secs_f64() * 1e3;
    done.store(true, Ordering::Relaxed);
    let anon = sampler.join().unwrap();
    println!("{millis:.3} {} {anon}", status_kib("VmHWM:"));
}

/// One run in a fresh process: milliseconds, peak RSS, peak anonymous KiB.
fn measure(me: &Path, peer: &str, workload: &str) -> (f64, u64, u64) {
    let out = Command::new(me)
        .args([peer, workload])
        .output()
        .expect("run the example again for one peer");
    assert!(out.status.success(), "{peer} {workload} failed");
    let text = String::from_utf8(out.stdout).expect("UTF-8 output");
    let fields: Vec<&str> = text.split_whitespace().collect();
    (
        fields[0].parse().unwrap(),
        fields[1].parse().unwrap(),
        fields[2].parse().unwrap(),
    )
}

fn median<T: PartialOrd + Copy>(mut values: Vec<T>) -> T {
    values.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
    values[values.len() / 2]
}

fn main() {
    let args: Vec<String> = env::args().skip(1).collect();
    match args.as_slice() {
        [peer, workload] => run_one(peer, workload),
        [] => {
            let me = env::current_exe().expect("the example's own path");
            println!("median of {RUNS} runs, a fresh process each");
            println!("workload peer              time (ms)  VmHWM (KiB)  peak anon (KiB)");
            for workload in ["tiny", "sleepy"] {
                for peer in std::iter::once("baseline").chain(NAMES) {
                    let runs: Vec<_> = (0..RUNS).map(|_| measure(&me, peer, workload)).collect();
                    println!(
                        "{workload:<8} {peer:<16} {:>10.1} {:>12} {:>16}",
                        median(runs.iter().map(|r| r.0).collect()),
                        median(runs.iter().map(|r| r.1).collect()),
                        median(runs.iter().map(|r| r.2).collect()),
                    );
                }
            }
        }
        _ => panic!("usage: workers_rss [PEER WORKLOAD]; peers {NAMES:?}"),
    }
}

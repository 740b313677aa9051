//! Time and peak memory of running many tasks with `WorkerPool` and its
//! peers, one fresh process per peer so that each peak (Linux's `VmHWM`) is
//! that peer's alone.
//!
//! ```text
//! cargo run --release --example workers_rss            # every peer, both workloads
//! cargo run --release --example workers_rss -- rayon sleepy
//! ```
//!
//! Workloads: `tiny` (100 000 one-multiply tasks, one worker per core) and
//! `sleepy` (10 000 tasks of a 1 ms sleep, 64 workers). `baseline` runs
//! nothing: what the process itself takes.

#[path = "../benches/common/peers.rs"]
mod peers;

use std::env;
use std::process::Command;
use std::time::Instant;

use peers::{Peer, NAMES};

/// This process's peak resident set so far, in KiB (`VmHWM`), where Linux
/// reports it.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn run_one(peer: &str, workload: &str) {
    let start = Instant::now();
    if peer != "baseline" {
        let (tasks, workers) = match workload {
            "tiny" => (peers::TINY_TASKS, peers::cores()),
            "sleepy" => (peers::SLEEPY_TASKS, peers::SLEEPY_WORKERS),
            _ => panic!("unknown workload {workload:?}: tiny or sleepy"),
        };
        let peer = Peer::new(peer, workers);
        if workload == "tiny" {
            peer.run(tasks, peers::tiny_task);
        } else {
            peer.run(tasks, peers::sleepy_task);
        }
    }
    let elapsed = start.elapsed();
    let peak = peak_rss_kib().map_or("n/a".to_string(), |kib| kib.to_string());
    println!(
        "{workload:<7} {peer:<16} {:>9.1} ms {peak:>9} KiB",
        elapsed.as_secs_f64() * 1e3
    );
}

fn main() {
    let args: Vec<String> = env::args().skip(1).collect();
    match args.as_slice() {
        [peer, workload] => run_one(peer, workload),
        [] => {
            println!("workload peer                 time     peak RSS");
            let me = env::current_exe().expect("the example's own path");
            for workload in ["tiny", "sleepy"] {
                for peer in std::iter::once("baseline").chain(NAMES) {
                    let status = Command::new(&me)
                        .args([peer, workload])
                        .status()
                        .expect("run the example again for one peer");
                    assert!(status.success(), "{peer} {workload} failed");
                }
            }
        }
        _ => panic!("usage: workers_rss [PEER WORKLOAD]; peers {NAMES:?}"),
    }
}

//! Time, peak memory and system calls of running many tasks with
//! `WorkerPool` and its peers, in a fresh process per run so that each
//! peak, and each count, is that peer's alone.
//!
//! ```text
//! cargo bench --bench workers_rss                             # the table
//! cargo bench --bench workers_rss -- rayon sleepy             # one cold run
//! cargo bench --bench workers_rss -- rayon sleepy warm        # one warm run
//! cargo bench --bench workers_rss -- stashpool_queue_64 tiny  # one setting
//! cargo bench --bench workers_rss -- rayon tiny unsampled     # a tail run
//! cargo bench --bench workers_rss -- tail                     # the tail table
//! ```
//!
//! Workloads: `tiny` (100 000 one-multiply tasks, one worker per core) and
//! `sleepy` (10 000 tasks of a 1 ms sleep, 64 workers). `baseline` runs
//! nothing: what the process itself takes. Runs are interleaved (every
//! peer once, then every peer again), so a burst of load on the machine
//! hits all peers alike; the table gives the best time of the runs and the
//! medians of the rest.
//!
//! Two times are reported, each from its own processes:
//!
//! * *cold*: making the pool and running one batch in a fresh process, as a
//!   short-lived program would. It pays the pool's thread starts and every
//!   first touch of memory (queues and task boxes growing into new pages).
//!   Memory and system calls are this run's.
//! * *warm*: the same pool runs untimed batches for a while, then
//!   `TIMED_BATCHES` timed ones, and the best of those is its time: the
//!   steady state of a long-lived program, and what `benches/workers.rs`
//!   (criterion, pools made once and reused) measures.
//!
//! Why the best of several batches per warm process, and not one: a tiny
//! batch lasts about as long as a few scheduler ticks, so one timed batch
//! mostly measures whether a tick, another process or a page of the
//! sampler landed in it, and repeated single-batch runs of the same peer
//! spread over a range several times the batch's length. Many batches in
//! one process, best taken, measure the pool; every peer gets the same
//! count, in the same order of steps. The count is capped by a time
//! budget (`TIMED_BUDGET`) only so that the slow rows (a thread per task,
//! sleeping tasks) finish; it never binds for the pools on tiny tasks.
//! Cold runs stay one batch per fresh process, since a fresh process is
//! what they measure; there are more of them (`RUNS`) instead.
//!
//! The tail table (`-- tail`) is about the spread of cold runs rather than
//! the best: `TAIL_RUNS` fresh processes per peer on `tiny`, interleaved,
//! with the quartiles, the median and the worst of each, in
//! `TAIL_SITTINGS` sittings one after another, and without the memory
//! sampler (`UNSAMPLED`). A pool whose median is good
//! but whose worst run is several times slower leaves a short-lived program
//! at the mercy of the schedule; the ratio says how far. It writes its
//! tables into `benches/results/workers_rss.md` (between the `tail`
//! markers), with the load average before and after each sitting, since on
//! a shared machine the worst runs measure the neighbours too; and with a
//! control that has no pool at all (`Peer::Turns`).
//!
//! Neither includes dropping the pool: `WorkerPool`'s drop joins its
//! workers, `rayon`'s and `threadpool`'s return without waiting for theirs,
//! so timing it would charge one peer for work the others leave undone.
//!
//! Two peaks are reported. `VmHWM` is the kernel's peak resident set; it
//! includes the pages of the program and of libc that happen to be mapped
//! in, which differ by which code ran and vary by a few hundred KiB from run
//! to run. Peak anonymous memory (`RssAnon`, sampled every millisecond by a
//! helper thread) is what the run allocated: heap, thread stacks, queues.
//!
//! System calls: `sched_yield` and `futex` calls of the whole process
//! (every thread), counted by `perf stat` on the tracepoints
//! `syscalls:sys_enter_*` when perf may use them, else by `strace -f -c`
//! (which slows the run down, so its times are not comparable; the table
//! says which counted). Context switches (voluntary + involuntary, every
//! thread) come from `getrusage`: of the whole run when cold, and per timed
//! batch when warm (where parking and waking shows, batch by batch).
//! Linux only.

#![cfg_attr(not(target_os = "linux"), allow(dead_code, unused_imports))]

#[path = "common/median.rs"]
mod median;
#[path = "common/peers.rs"]
mod peers;
#[path = "common/sitting.rs"]
mod sitting;

use median::median;
use std::env;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use peers::{NAMES, Peer};

/// Processes per peer and workload, of each kind (cold and warm).
const RUNS: usize = 7;

/// Cold processes per peer in a sitting of the tail table.
const TAIL_RUNS: usize = 20;

/// Sittings of the tail table, one after another: on a shared machine one
/// sitting can favour any peer, and only an order that holds in each of
/// them says something.
const TAIL_SITTINGS: usize = 3;

/// The peers of the tail table: the pool, first (each sitting ends with
/// how it compares with the best of the others), the two pools of threads
/// it competes with (`thread_per_task` takes seconds a run,
/// `scope_fan_out` dispatches nothing), and last the control
/// (`Peer::Turns`).
const TAIL_PEERS: [&str; 4] = ["stashpool", "rayon", "threadpool", CONTROL];
/// The tail table's control, compared with no peer.
const CONTROL: &str = "turns";

/// The argument that runs one cold run without the memory sampler: the
/// tail's runs, which report times, not memory. The sampler is a thread
/// that wakes at a short fixed interval; on a machine with a core per
/// worker it takes a core from a worker or the submitter each time it
/// runs, which is the bench's own noise in exactly the spread the tail
/// measures.
const UNSAMPLED: &str = "unsampled";

/// Where the tail table goes, between these markers.
const RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/results/workers_rss.md");
const TAIL_BEGIN: &str = "<!-- tail: written by `cargo bench --bench workers_rss -- tail` -->";
const TAIL_END: &str = "<!-- tail end -->";

/// Timed batches in a warm process, after the warm-up: the best counts.
const TIMED_BATCHES: u32 = 15;

/// A warm process stops timing batches early once they have taken this
/// long (at least one is always timed): only a thread per task and the
/// sleeping workload come near it.
const TIMED_BUDGET: Duration = Duration::from_secs(1);

/// How long a warm run runs untimed batches before the timed one.
const WARM_UP: Duration = Duration::from_millis(300);

/// A field of `/proc/self/status`, in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    let line = status
        .lines()
        .find(|line| line.starts_with(field))
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Context switches of every thread of this process so far, dead ones
/// included.
#[cfg(target_os = "linux")]
fn context_switches() -> u64 {
    // SAFETY: `getrusage` writes one `rusage` into the zeroed value we own.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut usage), 0);
        usage
    };
    (usage.ru_nvcsw + usage.ru_nivcsw) as u64
}

/// The three kinds of run, each in a process of its own (see the module
/// docs).
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// One batch on a new pool, memory sampled.
    Cold,
    /// Untimed batches, then the best of several timed ones, on one pool;
    /// memory sampled.
    Warm,
    /// A cold run without the memory sampler: the tail's (`UNSAMPLED`).
    Unsampled,
}

/// Runs one peer on one workload in this process; prints the milliseconds
/// it took, the peak resident set and the peak anonymous memory, in KiB
/// (`-` if `Unsampled`), and the context switches (of the whole run when
/// cold; per timed batch, on average, when warm).
fn run_one(peer: &str, workload: &str, kind: Kind) {
    let (tasks, workers) = match workload {
        "tiny" => (peers::TINY_TASKS, peers::cores()),
        "sleepy" => (peers::SLEEPY_TASKS, peers::SLEEPY_WORKERS),
        _ => panic!("unknown workload {workload:?}: tiny or sleepy"),
    };
    let done = Arc::new(AtomicBool::new(false));
    let sampler = (kind != Kind::Unsampled).then(|| {
        let done = Arc::clone(&done);
        thread::spawn(move || {
            let mut peak = status_kib("RssAnon:");
            while !done.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(1));
                peak = peak.max(status_kib("RssAnon:"));
            }
            peak
        })
    });
    let batch = |peer: &Peer| {
        if workload == "tiny" {
            peer.run(tasks, peers::tiny_task);
        } else {
            peer.run(tasks, peers::sleepy_task);
        }
    };
    let mut switches = context_switches();
    let mut batches = 1;
    let (millis, peer) = if peer == "baseline" {
        (0.0, None)
    } else if kind == Kind::Warm {
        let peer = Peer::new(peer, workers);
        // One batch is not enough to reach a steady state for every peer
        // (`rayon`'s second batch is still slow): warm up for a while, as
        // criterion does, and at least once.
        let warm_until = Instant::now() + WARM_UP;
        batch(&peer);
        while Instant::now() < warm_until {
            batch(&peer);
        }
        switches = context_switches();
        let (timing, mut best) = (Instant::now(), Duration::MAX);
        batches = 0;
        while batches < TIMED_BATCHES && (batches == 0 || timing.elapsed() < TIMED_BUDGET) {
            let start = Instant::now();
            batch(&peer);
            best = best.min(start.elapsed());
            batches += 1;
        }
        (best.as_secs_f64() * 1e3, Some(peer))
    } else {
        let start = Instant::now();
        let peer = Peer::new(peer, workers);
        batch(&peer);
        (start.elapsed().as_secs_f64() * 1e3, Some(peer))
    };
    let switches = (context_switches() - switches) / u64::from(batches);
    // Outside the timed part: see the module docs.
    drop(peer);
    done.store(true, Ordering::Relaxed);
    let anon = sampler.map_or_else(|| "-".into(), |s| s.join().unwrap().to_string());
    println!("{millis:.3} {} {anon} {switches}", status_kib("VmHWM:"));
}

/// How system calls are counted, if they can be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Counter {
    Perf,
    Strace,
    None,
}

impl Counter {
    fn find() -> Self {
        let works = |program: &str, args: &[&str]| {
            Command::new(program)
                .args(args)
                .output()
                .is_ok_and(|out| out.status.success())
        };
        if works(
            "perf",
            &["stat", "-e", "syscalls:sys_enter_sched_yield", "true"],
        ) {
            Self::Perf
        } else if works("strace", &["-f", "-c", "-e", "trace=sched_yield", "true"]) {
            Self::Strace
        } else {
            Self::None
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Perf => "perf stat",
            Self::Strace => "strace -f -c (slows the runs: times not comparable)",
            Self::None => "neither perf nor strace works here: not counted",
        }
    }
}

/// One run in a fresh process.
struct Run {
    millis: f64,
    hwm: u64,
    /// `None` if the run was not sampled (the tail's).
    anon: Option<u64>,
    switches: u64,
    /// `sched_yield` and `futex` calls, if counted.
    yields: Option<u64>,
    futexes: Option<u64>,
}

/// The count of `syscall` in `perf stat -x,` or `strace -c` output.
fn syscall_count(counter: Counter, text: &str, syscall: &str) -> Option<u64> {
    text.lines().find_map(|line| match counter {
        Counter::Perf => {
            let fields: Vec<&str> = line.split(',').collect();
            (fields.len() > 2 && fields[2] == format!("syscalls:sys_enter_{syscall}"))
                .then(|| fields[0].parse().ok())
                .flatten()
        }
        Counter::Strace => {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.last() == Some(&syscall) && fields.len() >= 5)
                .then(|| fields[3].parse().ok())
                .flatten()
        }
        Counter::None => None,
    })
}

/// A cold run, in a fresh process, with its system calls counted, and its
/// peak anonymous memory if `sampled`.
fn measure(me: &Path, counter: Counter, peer: &str, workload: &str, sampled: bool) -> Run {
    let mut command = match counter {
        Counter::Perf => {
            let mut c = Command::new("perf");
            c.args(["stat", "-x,", "-e"]);
            c.arg("syscalls:sys_enter_sched_yield,syscalls:sys_enter_futex");
            c.arg("--").arg(me);
            c
        }
        Counter::Strace => {
            let mut c = Command::new("strace");
            c.args(["-f", "-c", "-e", "trace=sched_yield,futex", "--"]);
            c.arg(me);
            c
        }
        Counter::None => Command::new(me),
    };
    let out = command
        .args([peer, workload])
        .args((!sampled).then_some(UNSAMPLED))
        .output()
        .expect("run the bench again for one peer");
    assert!(out.status.success(), "{peer} {workload} failed");
    let text = String::from_utf8(out.stdout).expect("UTF-8 output");
    let fields: Vec<&str> = text.split_whitespace().collect();
    let counts = String::from_utf8_lossy(&out.stderr);
    Run {
        millis: fields[0].parse().unwrap(),
        hwm: fields[1].parse().unwrap(),
        anon: (fields[2] != "-").then(|| fields[2].parse().unwrap()),
        switches: fields[3].parse().unwrap(),
        yields: syscall_count(counter, &counts, "sched_yield"),
        futexes: syscall_count(counter, &counts, "futex"),
    }
}

/// The best time of a warm run, in a fresh process, and its context
/// switches per timed batch (system calls are not counted: they would
/// include the untimed batches).
fn measure_warm(me: &Path, peer: &str, workload: &str) -> (f64, u64) {
    let out = Command::new(me)
        .args([peer, workload, "warm"])
        .output()
        .expect("run the bench again for one peer");
    assert!(out.status.success(), "{peer} {workload} warm failed");
    let text = String::from_utf8(out.stdout).expect("UTF-8 output");
    let fields: Vec<&str> = text.split_whitespace().collect();
    (fields[0].parse().unwrap(), fields[3].parse().unwrap())
}

fn show(count: Option<u64>) -> String {
    count.map_or_else(|| "-".into(), |n| n.to_string())
}

fn table() {
    let me = env::current_exe().expect("the bench's own path");
    let counter = Counter::find();
    println!(
        "{RUNS} runs per peer, interleaved, a fresh process each; best time, medians of the rest"
    );
    println!("system calls counted by {}", counter.name());
    println!(
        "cold: make the pool, run one batch; warm: best of {TIMED_BATCHES} batches on a pool already warmed up"
    );
    println!("ctx switches: of a cold run; warm ctx: per warm batch");
    println!(
        "workload peer                  cold (ms)  warm (ms)  VmHWM (KiB)  peak anon (KiB)  ctx switches  warm ctx  sched_yield      futex"
    );
    for workload in ["tiny", "sleepy"] {
        let peers: Vec<&str> = std::iter::once("baseline").chain(NAMES).collect();
        let mut runs: Vec<Vec<Run>> = peers.iter().map(|_| Vec::new()).collect();
        let mut warm: Vec<Vec<(f64, u64)>> = peers.iter().map(|_| Vec::new()).collect();
        for _ in 0..RUNS {
            for ((peer, runs), warm) in peers.iter().zip(&mut runs).zip(&mut warm) {
                runs.push(measure(&me, counter, peer, workload, true));
                warm.push(measure_warm(&me, peer, workload));
            }
        }
        for ((peer, runs), warm) in peers.iter().zip(runs).zip(warm) {
            let best = runs.iter().map(|r| r.millis).fold(f64::INFINITY, f64::min);
            let warm_best = warm.iter().map(|w| w.0).fold(f64::INFINITY, f64::min);
            let warm_switches = median(warm.iter().map(|w| w.1).collect());
            let yields = runs.iter().map(|r| r.yields).collect::<Option<Vec<_>>>();
            let futexes = runs.iter().map(|r| r.futexes).collect::<Option<Vec<_>>>();
            println!(
                "{workload:<8} {peer:<20} {best:>10.1} {warm_best:>10.1} {:>12} {:>16} {:>13} {warm_switches:>9} {:>12} {:>10}",
                median(runs.iter().map(|r| r.hwm).collect()),
                median(runs.iter().map(|r| r.anon.expect("sampled")).collect()),
                median(runs.iter().map(|r| r.switches).collect()),
                show(yields.map(median)),
                show(futexes.map(median)),
            );
        }
    }
}

/// The first three fields of `/proc/loadavg`: runnable threads on the
/// machine, averaged over 1, 5 and 15 minutes.
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").expect("Linux /proc");
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The tail table: see the module docs.
fn tail() {
    let me = env::current_exe().expect("the bench's own path");
    let counter = Counter::find();
    let tables: Vec<String> = (1..=TAIL_SITTINGS)
        .map(|sitting| tail_sitting(&me, counter, sitting))
        .collect();
    let tables = tables.join("\n");
    let section = format!(
        "{TAIL_BEGIN}\n\
         ### The tail: worst cold runs\n\n\
         `cargo bench --bench workers_rss -- tail`: the spread of cold runs of `tiny` (make the pool, run one batch, in a fresh process, with no memory sampler), {TAIL_SITTINGS} sittings one after another, each of {TAIL_RUNS} runs per peer, interleaved: best, quartiles, median and worst of each, with the calls to `sched_yield` and `futex` of each run (a run in which workers park and are woken over and over, or wait for a preempted thread, shows there, whatever else slowed it). The load average shows how busy the machine was: on a shared machine the worst runs measure the neighbours too. `turns` is the control: no pool and no queue, the tasks run by the workers in turn, each spinning for its turn, so that it stalls for as long as any of them is off its core; what its worst run adds to its median is what the sitting's schedule added to one run.\n\n\
         ```text\n{tables}```\n\n\
         _{}; commit `{}`; {}; written by the bench._\n\
         {TAIL_END}\n",
        sitting::date(),
        sitting::commit(),
        sitting::machine(),
    );
    let old = std::fs::read_to_string(RESULTS).unwrap_or_default();
    let new = match (old.find(TAIL_BEGIN), old.find(TAIL_END)) {
        (Some(begin), Some(end)) => {
            let rest = old[end + TAIL_END.len()..].trim_start_matches('\n');
            format!("{}{section}{rest}", &old[..begin])
        }
        _ => format!("{old}\n{section}"),
    };
    std::fs::write(RESULTS, new).expect("write the results file");
    println!("written into {RESULTS}");
}

/// One sitting of the tail table: `TAIL_RUNS` cold runs per peer,
/// interleaved. Returns its table, also printed.
fn tail_sitting(me: &Path, counter: Counter, sitting: usize) -> String {
    let load_before = load_average();
    let mut runs: Vec<Vec<Run>> = TAIL_PEERS.iter().map(|_| Vec::new()).collect();
    for _ in 0..TAIL_RUNS {
        for (peer, runs) in TAIL_PEERS.iter().zip(&mut runs) {
            runs.push(measure(me, counter, peer, "tiny", false));
        }
    }
    let load_after = load_average();
    let mut table = format!(
        "sitting {sitting} of {TAIL_SITTINGS}: {TAIL_RUNS} cold runs per peer of {} tiny tasks on {} workers, interleaved, a fresh process each\n\
         system calls per run counted by {}\n\
         peer        best (ms)  quartiles (ms)  median (ms)  worst (ms)  worst/median  yield median  futex median  futex worst\n",
        peers::TINY_TASKS,
        peers::cores(),
        counter.name(),
    );
    let mut medians = Vec::new();
    for (peer, runs) in TAIL_PEERS.iter().zip(runs) {
        let mut times: Vec<f64> = runs.iter().map(|r| r.millis).collect();
        times.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
        let (best, worst) = (times[0], times[times.len() - 1]);
        let quartiles = format!(
            "{:.1}-{:.1}",
            times[times.len() / 4],
            times[3 * times.len() / 4]
        );
        let middle = median(times);
        medians.push((*peer, middle, worst));
        let yields = runs.iter().map(|r| r.yields).collect::<Option<Vec<_>>>();
        let futexes = runs.iter().map(|r| r.futexes).collect::<Option<Vec<_>>>();
        table += &format!(
            "{peer:<10} {best:>10.1} {quartiles:>15} {middle:>12.1} {worst:>11.1} {:>13.2} {:>13} {:>13} {:>12}\n",
            worst / middle,
            show(yields.map(median)),
            show(futexes.clone().map(median)),
            show(futexes.and_then(|f| f.into_iter().max())),
        );
    }
    let (control, medians) = medians.split_last().expect("the control last");
    assert_eq!(control.0, CONTROL, "the control is the last of TAIL_PEERS");
    let (ours, others) = medians.split_first().expect("stashpool first");
    let (best_peer, best_median, _) = others
        .iter()
        .copied()
        .min_by(|a, b| a.1.partial_cmp(&b.1).expect("comparable"))
        .expect("a peer");
    table += &format!(
        "{}: median {:.2}x the best peer's ({best_peer}), worst {:.2}x its own median; \
         {} (control): worst {:.2}x its own median\n",
        ours.0,
        ours.1 / best_median,
        ours.2 / ours.1,
        control.0,
        control.2 / control.1,
    );
    table += &format!("load average (1, 5, 15 min): {load_before} before, {load_after} after\n");
    print!("{table}");
    table
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("workers_rss reads /proc and getrusage: Linux only");
}

#[cfg(target_os = "linux")]
fn main() {
    // `cargo bench` passes `--bench` (and a filter, if given): ignore them.
    let args: Vec<String> = env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    match args.as_slice() {
        [peer, workload] => run_one(peer, workload, Kind::Cold),
        [peer, workload, warm] if warm == "warm" => run_one(peer, workload, Kind::Warm),
        [peer, workload, bare] if bare == UNSAMPLED => run_one(peer, workload, Kind::Unsampled),
        [] => table(),
        [mode] if mode == "tail" => tail(),
        _ => panic!(
            "usage: workers_rss [PEER WORKLOAD [warm | {UNSAMPLED}] | tail]; peers {NAMES:?}"
        ),
    }
}

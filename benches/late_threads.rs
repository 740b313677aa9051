//! A thread's hot get, by how many threads the process ran before it.
//!
//! Whether a thread has a fast path in a pool must depend only on how that
//! pool is used, never on other threads or pools of the process. Each row is
//! one thread, started after `others` threads used some other pool (and
//! stay alive, blocked), timing a pool that only it uses: a guarded get, a
//! 64-byte write and the return, on a 4 KiB buffer. All the rows' threads
//! are alive at once and take turns, rep by rep, so they see the same
//! machine; a row's figure is its best rep.
//!
//! `cargo bench --bench late_threads` prints the table and writes it to
//! `benches/results/late_threads.md`.

use std::hint::black_box;
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use stashpool::LocalPool;

#[path = "common/sitting.rs"]
mod sitting;

/// Gets per rep.
const GETS: u32 = 2_000_000;
/// Reps per row.
const REPS: usize = 9;
/// The rows: how many threads used another pool before the timed one.
const ROWS: [usize; 4] = [0, 15, 16, 200];

/// A thread that times its own pool's hot path whenever asked.
struct Timer {
    ask: mpsc::Sender<()>,
    answer: mpsc::Receiver<Duration>,
}

fn timer() -> Timer {
    let (ask, asked) = mpsc::channel::<()>();
    let (answer_tx, answer) = mpsc::channel();
    thread::spawn(move || {
        let pool: LocalPool<Vec<u8>> = LocalPool::new(|| Vec::with_capacity(4096));
        for () in asked {
            let start = Instant::now();
            for i in 0..GETS {
                let mut buf = pool.get();
                buf.clear();
                buf.extend_from_slice(&[i as u8; 64]);
                black_box(&mut *buf);
            }
            answer_tx.send(start.elapsed()).unwrap();
        }
    });
    // Its pool is used once before the first rep, so no rep pays for setup.
    timer_warm(Timer { ask, answer })
}

fn timer_warm(t: Timer) -> Timer {
    t.ask.send(()).unwrap();
    t.answer.recv().unwrap();
    t
}

fn main() {
    // Threads that used another pool and stay alive, blocked, until the end.
    static OTHER: LocalPool<Vec<u8>> = LocalPool::new(|| Vec::with_capacity(4096));
    let release = Arc::new(Barrier::new(ROWS[ROWS.len() - 1] + 1));
    let mut blocked = Vec::new();
    let mut timers = Vec::new();
    for &others in &ROWS {
        while blocked.len() < others {
            let (used, release) = (mpsc::channel(), Arc::clone(&release));
            let (done, wait) = used;
            blocked.push(thread::spawn(move || {
                OTHER.with(|buf| buf.push(1));
                done.send(()).unwrap();
                release.wait();
            }));
            wait.recv().unwrap();
        }
        timers.push((others, timer()));
    }
    let mut best = vec![Duration::MAX; timers.len()];
    for _ in 0..REPS {
        for (row, (_, timer)) in timers.iter().enumerate() {
            timer.ask.send(()).unwrap();
            best[row] = best[row].min(timer.answer.recv().unwrap());
        }
    }
    release.wait();
    for thread in blocked {
        thread.join().unwrap();
    }
    let ns = |d: Duration| d.as_secs_f64() * 1e9 / f64::from(GETS);
    let first = ns(best[0]);
    let mut table = String::from(
        "| threads that used another pool first | hot get + 64 B write + return, ns | ÷ first thread |\n| ---: | ---: | ---: |\n",
    );
    for (row, (others, _)) in timers.iter().enumerate() {
        let t = ns(best[row]);
        table += &format!("| {others} | {t:.1} | {:.2} |\n", t / first);
    }
    let out = format!(
        "## Every thread fast: a thread's hot get by how many threads came before it\n\n\
         `cargo bench --bench late_threads`: each row is one thread, started after that many \
         other threads used another pool (alive and blocked), timing a pool that only it uses \
         (4 KiB buffers); all rows' threads alive at once, taking turns; best of {REPS} reps \
         of {GETS} gets.\n\nCommit `{}`; {}.\n\n{table}",
        sitting::commit(),
        sitting::machine()
    );
    print!("{out}");
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/results");
    std::fs::write(format!("{dir}/late_threads.md"), out).unwrap();
}

//! Objects taken on one thread and returned on another, on default
//! configurations: stashpool against the pools a user would write
//! instead, and against Go's `sync.Pool` on the same program.
//!
//! ```text
//! cargo bench --bench flows                      # the table, into benches/results/flows.md
//! cargo bench --bench flows -- "pipe 1 MiB" stashpool   # one run
//! cargo bench --bench flows -- fan-in            # the fan-in table, into benches/results/fan_in.md
//! ```
//!
//! The workloads:
//!
//! * `pipe 64 KiB`, `pipe 1 MiB`, `pipe 8 MiB`: one producer takes a
//!   buffer, fills it, and sends it through a bounded channel of 16 to two
//!   consumers, which read it and drop it: every buffer goes back on
//!   another thread than took it. The buffers are `BytePool`'s (length 0,
//!   filled by `resize`).
//! * `sftp 32 KiB`: pkg/sftp's concurrent download: 16 threads read a
//!   file in 32 KiB chunks into full-length pooled buffers (`read_at`) and
//!   send them to one writer thread, which writes them out and returns
//!   them; four downloads in a row, each with threads of its own.
//!
//! The peers, each made as its users make it, on its defaults:
//!
//! * `stashpool`: `BytePool::builder(size).build()` (pipes), a
//!   `LocalPool` of `vec![0; 32 KiB]` (sftp);
//! * `stashpool, max_stashed(0)`: the same without per-thread stashes;
//! * `Mutex<Vec>`: the twenty-line pool, a `Vec` of idle buffers under a
//!   `Mutex`, unbounded;
//! * `channel of 64`: pkg/sftp's own pool, a bounded channel of idle
//!   buffers (a get takes one or allocates, a return sends one or drops it);
//! * `plain`: a new buffer every time;
//! * `Go sync.Pool`: `benches/go/flows`, the same program in Go (Get on
//!   the producer or the readers, Put on the consumers or the writer), run
//!   when `go` is installed.
//!
//! Each run is a fresh process, so its peak resident set (`VmHWM`) is its
//! own; runs are interleaved (every peer once, then again), and the table
//! gives each peer's best and median wall time, the objects it made (the
//! median), and its median peak RSS. Linux only.
//!
//! **Fan-in** (`fan-in`) isolates the cost of many threads returning to
//! one: P producers each get a buffer, write 64 bytes into it and push it
//! into one bounded spinning queue (`SpinChannel`, 1024 slots); one
//! consumer pops and drops it, so every object is returned on the consumer
//! for P takers. Rows: 3 producers with 512 B, 4 KiB and 64 KiB buffers,
//! and 1 producer with 512 B. The peers run in one process, interleaved,
//! from a spinning start with each thread stamping its own start and end
//! (`common/parallel.rs`); a peer's figure is its best of `FAN_IN_REPS`
//! per process, and several processes are alternated: the table gives
//! the best over processes and, as the ratio, the median over processes
//! of stashpool's best over the peer's. Beside them: the queue moving
//! empty `Vec`s (no pool, no allocation), `lockfree-object-pool`'s
//! `LinearObjectPool`, `object-pool`, and Go's `sync.Pool` in the same
//! shape (`benches/go/flows fanin`, a bounded ring of its own).

#![cfg_attr(not(target_os = "linux"), allow(dead_code, unused_imports))]

#[path = "../examples/common/measure.rs"]
#[allow(dead_code)]
mod measure;
#[path = "common/median.rs"]
mod median;
#[path = "common/parallel.rs"]
mod parallel;
#[path = "common/sitting.rs"]
mod sitting;

use median::median;
use std::env;
use std::fmt::Write as _;
use std::hint::black_box;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread;
use std::time::Instant;

use stashpool::LocalPool;
use stashpool::bytes::BytePool;

/// Processes per peer and workload: the objects a pipe makes are its peak
/// in flight, which the scheduler sets (a consumer preempted while the
/// producer runs on), so one run says little and the medians need many.
const RUNS: usize = 15;

/// The channel between the producer and its consumers (`pipe`).
const IN_FLIGHT: usize = 16;

/// Consumers of a pipe.
const CONSUMERS: usize = 2;

/// Readers, chunk size and file size of `sftp`, and how many times it
/// downloads the file (a new set of threads each time): one download is a
/// few dozen milliseconds of seventeen threads on the machine's cores, long
/// enough for the scheduler, not the pool, to set its time.
const READERS: usize = 16;
const CHUNK: usize = 32 << 10;
const FILE_LEN: usize = 256 << 20;
const DOWNLOADS: usize = 4;

/// pkg/sftp's pool: a channel of this many idle buffers.
const CHANNEL_POOL: usize = 64;

/// Workloads: name, buffer size, messages.
const WORKLOADS: [(&str, usize, usize); 4] = [
    ("pipe 64 KiB", 64 << 10, 200_000),
    ("pipe 1 MiB", 1 << 20, 20_000),
    ("pipe 8 MiB", 8 << 20, 3_000),
    ("sftp 32 KiB", CHUNK, DOWNLOADS * FILE_LEN / CHUNK),
];

const PEERS: [&str; 6] = [
    "stashpool",
    "stashpool, max_stashed(0)",
    "Mutex<Vec>",
    "channel of 64",
    "plain",
    "Go sync.Pool",
];

// === the pools ===

/// What a workload needs of a pool: a buffer it can send to another
/// thread, which goes back to the pool when dropped there.
trait Buffers: Sync + 'static {
    type Buf: DerefMut<Target = Vec<u8>> + Send;
    fn get(&'static self) -> Self::Buf;
    /// Buffers made so far.
    fn made(&self) -> u64;
}

struct Stash(BytePool);

impl Buffers for Stash {
    type Buf = stashpool::bytes::PooledBuffer<'static>;
    fn get(&'static self) -> Self::Buf {
        self.0.get()
    }
    fn made(&self) -> u64 {
        self.0.stats().created
    }
}

/// Full-length buffers that nothing resets, for reads (`sftp`).
struct StashFull(LocalPool<Vec<u8>>);

impl Buffers for StashFull {
    type Buf = stashpool::Pooled<'static, Vec<u8>>;
    fn get(&'static self) -> Self::Buf {
        self.0.get()
    }
    fn made(&self) -> u64 {
        self.0.stats().created
    }
}

/// How the hand-written peers make a buffer and ready a returned one.
struct Make {
    size: usize,
    /// Full length (for reads) or empty (for writes).
    full: bool,
    made: AtomicU64,
}

impl Make {
    fn new(size: usize, full: bool) -> Self {
        Self {
            size,
            full,
            made: AtomicU64::new(0),
        }
    }

    fn make(&self) -> Vec<u8> {
        self.made.fetch_add(1, Ordering::Relaxed);
        if self.full {
            vec![0; self.size]
        } else {
            Vec::with_capacity(self.size)
        }
    }

    fn ready(&self, buf: &mut Vec<u8>) {
        if !self.full {
            buf.clear();
        }
    }
}

/// A hand-written pool's buffer: back to `pool` on drop.
struct Lent<P: Hand + 'static> {
    buf: Option<Vec<u8>>,
    pool: &'static P,
}

impl<P: Hand> Deref for Lent<P> {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        self.buf.as_ref().unwrap()
    }
}

impl<P: Hand> DerefMut for Lent<P> {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        self.buf.as_mut().unwrap()
    }
}

impl<P: Hand> Drop for Lent<P> {
    fn drop(&mut self) {
        self.pool.put(self.buf.take().unwrap());
    }
}

/// A hand-written pool: takes and puts whole buffers.
trait Hand: Sync + Sized + 'static {
    fn take(&self) -> Vec<u8>;
    fn put(&self, buf: Vec<u8>);
    fn make(&self) -> &Make;
}

impl<P: Hand> Buffers for P {
    type Buf = Lent<P>;
    fn get(&'static self) -> Lent<P> {
        Lent {
            buf: Some(self.take()),
            pool: self,
        }
    }
    fn made(&self) -> u64 {
        self.make().made.load(Ordering::Relaxed)
    }
}

/// The twenty-line pool.
struct MutexVec(Mutex<Vec<Vec<u8>>>, Make);

impl Hand for MutexVec {
    fn take(&self) -> Vec<u8> {
        let idle = self.0.lock().unwrap().pop();
        idle.unwrap_or_else(|| self.1.make())
    }
    fn put(&self, mut buf: Vec<u8>) {
        self.1.ready(&mut buf);
        self.0.lock().unwrap().push(buf);
    }
    fn make(&self) -> &Make {
        &self.1
    }
}

/// pkg/sftp's pool: a bounded channel of idle buffers.
struct ChannelPool(SyncSender<Vec<u8>>, Mutex<Receiver<Vec<u8>>>, Make);

impl Hand for ChannelPool {
    fn take(&self) -> Vec<u8> {
        let idle = self.1.lock().unwrap().try_recv().ok();
        idle.unwrap_or_else(|| self.2.make())
    }
    fn put(&self, mut buf: Vec<u8>) {
        self.2.ready(&mut buf);
        let _ = self.0.try_send(buf);
    }
    fn make(&self) -> &Make {
        &self.2
    }
}

/// No pool.
struct Plain(Make);

impl Hand for Plain {
    fn take(&self) -> Vec<u8> {
        self.0.make()
    }
    fn put(&self, buf: Vec<u8>) {
        drop(buf);
    }
    fn make(&self) -> &Make {
        &self.0
    }
}

// === the workloads ===

/// One producer, `CONSUMERS` consumers, `messages` buffers of `size`.
fn pipe<B: Buffers>(pool: &'static B, size: usize, messages: usize) -> f64 {
    let (send, receive) = sync_channel::<(usize, B::Buf)>(IN_FLIGHT);
    let receive = Mutex::new(receive);
    let start = Instant::now();
    thread::scope(|s| {
        for _ in 0..CONSUMERS {
            s.spawn(|| {
                let mut sum = 0u64;
                loop {
                    let next = receive.lock().unwrap().recv();
                    let Ok((i, buf)) = next else { break };
                    assert_eq!(buf.len(), size);
                    // Read it: a byte of every page, and its first and last.
                    sum += buf.iter().step_by(4096).map(|&b| u64::from(b)).sum::<u64>();
                    sum += u64::from(buf[0] ^ buf[size - 1]) + i as u64;
                    drop(buf);
                }
                black_box(sum);
            });
        }
        for i in 0..messages {
            let mut buf = pool.get();
            buf.resize(size, i as u8);
            send.send((i, buf)).expect("consumers live");
        }
        drop(send);
    });
    start.elapsed().as_secs_f64() * 1e3
}

/// The file `sftp` reads, made once per machine.
fn sftp_file() -> PathBuf {
    let path = env::temp_dir().join(format!("stashpool-flows-{FILE_LEN}"));
    let fits = std::fs::metadata(&path).is_ok_and(|m| m.len() == FILE_LEN as u64);
    if !fits {
        let data: Vec<u8> = (0..FILE_LEN).map(|i| (i * 7 + i / 4096) as u8).collect();
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, data).expect("write the file sftp reads");
        std::fs::rename(&tmp, &path).expect("rename it into place");
    }
    path
}

/// `DOWNLOADS` times: `READERS` threads read the file in chunks; one
/// writer writes them out in order of arrival and returns them.
fn sftp<B: Buffers>(pool: &'static B) -> f64 {
    use std::io::Write;
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(sftp_file()).expect("open the file");
    let chunks = FILE_LEN / CHUNK;
    let start = Instant::now();
    for _ in 0..DOWNLOADS {
        let next = AtomicU64::new(0);
        // pkg/sftp's results channel: as many in flight as readers, twice.
        let (send, receive) = sync_channel::<(usize, B::Buf)>(2 * READERS);
        thread::scope(|s| {
            for _ in 0..READERS {
                let (send, file, next) = (send.clone(), &file, &next);
                s.spawn(move || {
                    loop {
                        let chunk = next.fetch_add(1, Ordering::Relaxed) as usize;
                        if chunk >= chunks {
                            break;
                        }
                        let mut buf = pool.get();
                        if buf.len() != CHUNK {
                            buf.resize(CHUNK, 0);
                        }
                        file.read_exact_at(&mut buf, (chunk * CHUNK) as u64)
                            .expect("read a chunk");
                        send.send((chunk, buf)).expect("the writer lives");
                    }
                });
            }
            drop(send);
            let mut out = std::io::sink();
            let mut sum = 0u64;
            for (chunk, buf) in receive {
                out.write_all(&buf).unwrap();
                sum += u64::from(buf[chunk % CHUNK]);
            }
            black_box(sum);
        });
    }
    start.elapsed().as_secs_f64() * 1e3
}

// === one run ===

fn leak<T>(value: T) -> &'static T {
    Box::leak(Box::new(value))
}

/// Runs `workload` on `pool`; wall time in ms and buffers made.
fn on<B: Buffers>(pool: &'static B, workload: &str) -> (f64, u64) {
    let (_, size, messages) = find(workload);
    let millis = if workload.starts_with("sftp") {
        sftp(pool)
    } else {
        pipe(pool, size, messages)
    };
    (millis, pool.made())
}

fn find(workload: &str) -> (&'static str, usize, usize) {
    *WORKLOADS
        .iter()
        .find(|(name, _, _)| *name == workload)
        .unwrap_or_else(|| panic!("unknown workload {workload:?}"))
}

/// Runs `workload` with `peer`'s buffers in this process; prints the wall
/// time, the buffers made and the peak resident set in KiB.
fn run_one(workload: &str, peer: &str) {
    let (_, size, _) = find(workload);
    let full = workload.starts_with("sftp");
    let (millis, made) = match peer {
        "stashpool" if full => on(leak(StashFull(LocalPool::new(|| vec![0; CHUNK]))), workload),
        "stashpool" => on(leak(Stash(BytePool::builder(size).build())), workload),
        "stashpool, max_stashed(0)" if full => {
            let pool = LocalPool::builder((|| vec![0; CHUNK]) as fn() -> Vec<u8>)
                .max_stashed(0)
                .build();
            on(leak(StashFull(pool)), workload)
        }
        "stashpool, max_stashed(0)" => {
            let pool = BytePool::builder(size).max_stashed(0).build();
            on(leak(Stash(pool)), workload)
        }
        "Mutex<Vec>" => on(
            leak(MutexVec(Mutex::new(Vec::new()), Make::new(size, full))),
            workload,
        ),
        "channel of 64" => {
            let (send, receive) = sync_channel(CHANNEL_POOL);
            let pool = ChannelPool(send, Mutex::new(receive), Make::new(size, full));
            on(leak(pool), workload)
        }
        "plain" => on(leak(Plain(Make::new(size, full))), workload),
        _ => panic!("unknown peer {peer:?}"),
    };
    let hwm = measure::peak_rss_kib().expect("Linux /proc");
    println!("{millis:.3} {made} {hwm}");
}

// === fan-in ===

/// Fan-in rows: name, producers, buffer size.
const FAN_IN: [(&str, usize, usize); 4] = [
    ("3 → 1, 512 B", 3, 512),
    ("3 → 1, 4 KiB", 3, 4 << 10),
    ("3 → 1, 64 KiB", 3, 64 << 10),
    ("1 → 1, 512 B", 1, 512),
];

/// Objects per fan-in rep: long enough that the threads' start is noise.
const FAN_IN_OBJECTS: usize = 300_000;

/// Reps per peer and row in one process, interleaved across the peers.
const FAN_IN_REPS: usize = 7;

/// Processes the fan-in table alternates.
const FAN_IN_PROCESSES: usize = 3;

/// The fan-in queue's capacity.
const FAN_IN_QUEUE: usize = 1024;

const FAN_IN_PEERS: [&str; 8] = [
    "stashpool",
    "stashpool, max_stashed(0)",
    "queue alone",
    "plain",
    "lockfree-object-pool Linear",
    "object-pool",
    "Mutex<Vec>",
    "Go sync.Pool",
];

/// `lockfree-object-pool`'s `LinearObjectPool`, resetting as the others do.
struct Linear(
    lockfree_object_pool::LinearObjectPool<Vec<u8>>,
    &'static Make,
);

impl Buffers for Linear {
    type Buf = lockfree_object_pool::LinearReusable<'static, Vec<u8>>;
    fn get(&'static self) -> Self::Buf {
        self.0.pull()
    }
    fn made(&self) -> u64 {
        self.1.made.load(Ordering::Relaxed)
    }
}

/// `object-pool`'s `Pool`: `pull` with a fallback, cleared on the way out
/// (it resets nothing itself).
struct ObjectPool(object_pool::Pool<Vec<u8>>, Make);

/// An `object-pool` buffer, cleared when taken.
struct Pulled(object_pool::Reusable<'static, Vec<u8>>);

impl Deref for Pulled {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.0
    }
}

impl DerefMut for Pulled {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.0
    }
}

impl Buffers for ObjectPool {
    type Buf = Pulled;
    fn get(&'static self) -> Pulled {
        let mut buf = self.0.pull(|| self.1.make());
        buf.clear();
        Pulled(buf)
    }
    fn made(&self) -> u64 {
        self.1.made.load(Ordering::Relaxed)
    }
}

/// One fan-in rep: `producers` threads get, write 64 bytes and send
/// `FAN_IN_OBJECTS` buffers in all to one consumer, which drops them; ns
/// per object. `get` is the peer's get (`None`: the queue alone, moving
/// empty `Vec`s).
fn fan_in_once<B: Buffers>(pool: Option<&'static B>, producers: usize) -> f64 {
    enum Item<B: Buffers> {
        Pooled(B::Buf),
        Empty(Vec<u8>),
    }
    let queue = parallel::SpinChannel::<Item<B>>::new(FAN_IN_QUEUE);
    let queue = &queue;
    let mut tasks: Vec<parallel::Task<'_>> = Vec::new();
    tasks.push(Box::new(move || {
        let mut sum = 0u64;
        for _ in 0..FAN_IN_OBJECTS {
            match queue.recv() {
                Item::Pooled(buf) => sum += u64::from(buf[63]),
                Item::Empty(buf) => sum += buf.capacity() as u64,
            }
        }
        black_box(sum);
    }));
    for p in 0..producers {
        let share = FAN_IN_OBJECTS / producers + usize::from(p < FAN_IN_OBJECTS % producers);
        tasks.push(Box::new(move || {
            for i in 0..share {
                queue.send(match pool {
                    Some(pool) => {
                        let mut buf = pool.get();
                        buf.extend_from_slice(&[i as u8; 64]);
                        Item::Pooled(buf)
                    }
                    None => Item::Empty(black_box(Vec::new())),
                });
            }
        }));
    }
    parallel::together(tasks).as_secs_f64() * 1e9 / FAN_IN_OBJECTS as f64
}

/// The fan-in rows in this process: every peer once per rep, interleaved;
/// prints each row's and peer's best in ns per object.
fn fan_in_one() {
    for (row, producers, size) in FAN_IN {
        let stash = leak(Stash(BytePool::builder(size).build()));
        let stashless = leak(Stash(BytePool::builder(size).max_stashed(0).build()));
        let plain = leak(Plain(Make::new(size, false)));
        let made = leak(Make::new(size, false));
        let linear = leak(Linear(
            lockfree_object_pool::LinearObjectPool::new(move || made.make(), Vec::clear),
            made,
        ));
        let object = leak(ObjectPool(
            object_pool::Pool::new(0, Vec::new),
            Make::new(size, false),
        ));
        let locked = leak(MutexVec(Mutex::new(Vec::new()), Make::new(size, false)));
        let runs: [&dyn Fn() -> f64; 7] = [
            &|| fan_in_once(Some(stash), producers),
            &|| fan_in_once(Some(stashless), producers),
            &|| fan_in_once::<Plain>(None, producers),
            &|| fan_in_once(Some(plain), producers),
            &|| fan_in_once(Some(linear), producers),
            &|| fan_in_once(Some(object), producers),
            &|| fan_in_once(Some(locked), producers),
        ];
        let mut best = [f64::INFINITY; 7];
        for _ in 0..FAN_IN_REPS {
            for (best, run) in best.iter_mut().zip(runs) {
                *best = best.min(run());
            }
        }
        for (peer, best) in FAN_IN_PEERS.iter().zip(best) {
            println!("{row}\t{peer}\t{best:.2}");
        }
    }
}

/// What `command` prints; it must succeed.
fn stdout(command: &mut Command) -> String {
    let out = command.output().expect("run a fan-in process");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// The fan-in table: `FAN_IN_PROCESSES` processes of `fan_in_one`, each
/// followed by Go's, into `benches/results/fan_in.md`.
fn fan_in_table() {
    let me = env::current_exe().expect("the bench's own path");
    let go = go_program();
    // Per process: (row, peer) -> best ns per object.
    let mut processes: Vec<Vec<(String, String, f64)>> = Vec::new();
    for process in 0..FAN_IN_PROCESSES {
        eprintln!("process {} of {FAN_IN_PROCESSES}", process + 1);
        let mut rows: Vec<(String, String, f64)> = stdout(Command::new(&me).arg("fan-in-one"))
            .lines()
            .map(|line| {
                let f: Vec<&str> = line.split('\t').collect();
                (f[0].to_owned(), f[1].to_owned(), f[2].parse().unwrap())
            })
            .collect();
        if let Some(go) = &go {
            for (row, producers, size) in FAN_IN {
                let args = [producers, size, FAN_IN_OBJECTS, FAN_IN_REPS, FAN_IN_QUEUE];
                let ns: f64 = stdout(
                    Command::new(go)
                        .arg("fanin")
                        .args(args.map(|n| n.to_string())),
                )
                .trim()
                .parse()
                .unwrap();
                rows.push((row.to_owned(), "Go sync.Pool".to_owned(), ns));
            }
        }
        processes.push(rows);
    }
    let find = |rows: &[(String, String, f64)], row: &str, peer: &str| {
        rows.iter()
            .find(|(r, p, _)| r == row && p == peer)
            .map(|&(_, _, ns)| ns)
    };
    let mut text = String::new();
    let out = &mut text;
    writeln!(out, "## Fan-in: many threads return to one").unwrap();
    writeln!(out).unwrap();
    writeln!(
        out,
        "`cargo bench --bench flows -- fan-in`: P producers get a buffer, write 64 bytes and push \
         it into one bounded spinning queue of {FAN_IN_QUEUE}; one consumer pops and drops it. \
         {FAN_IN_OBJECTS} objects per rep; ns per object (wall time / objects) from a spinning \
         start, each thread stamping its own start and end. Each process runs every peer \
         {FAN_IN_REPS} times, interleaved, and keeps each peer's best; {FAN_IN_PROCESSES} \
         processes, each followed by Go's. *best*: the best over processes; *÷ stashpool*: the \
         median over processes of the peer's best over stashpool's in the same process (Go: \
         in the process beside it), above 1 when stashpool is faster. *queue alone* moves \
         empty `Vec`s: no pool, no allocation."
    )
    .unwrap();
    writeln!(out).unwrap();
    write!(out, "| ns per object |").unwrap();
    for peer in FAN_IN_PEERS {
        write!(out, " {peer} |").unwrap();
    }
    writeln!(out).unwrap();
    writeln!(out, "| --- |{}", " ---: |".repeat(FAN_IN_PEERS.len())).unwrap();
    for (row, _, _) in FAN_IN {
        write!(out, "| {row} |").unwrap();
        for peer in FAN_IN_PEERS {
            let bests: Vec<f64> = processes
                .iter()
                .filter_map(|rows| find(rows, row, peer))
                .collect();
            if bests.is_empty() {
                write!(out, " not run |").unwrap();
                continue;
            }
            let best = bests.iter().copied().fold(f64::INFINITY, f64::min);
            let ratios: Vec<f64> = processes
                .iter()
                .filter_map(|rows| Some(find(rows, row, peer)? / find(rows, row, "stashpool")?))
                .collect();
            write!(out, " {best:.1} (÷ {:.2}) |", median(ratios)).unwrap();
        }
        writeln!(out).unwrap();
    }
    write_results(text, "cargo bench --bench flows -- fan-in", "fan_in.md");
}

// === the table ===

/// One run: wall ms, objects made, peak RSS in KiB.
type Run = (f64, u64, u64);

/// The Go program, built into the target directory; `None` without `go`.
fn go_program() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("go");
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/go-flows");
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg("./flows")
        .current_dir(dir)
        .status()
        .ok()?;
    assert!(built.success(), "go build ./flows failed");
    Some(out)
}

fn go_version() -> String {
    Command::new("go")
        .arg("version")
        .output()
        .ok()
        .map_or_else(String::new, |out| {
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        })
}

/// One run in a fresh process.
fn measure(me: &Path, go: Option<&Path>, workload: &str, peer: &str) -> Option<Run> {
    let out = if peer == "Go sync.Pool" {
        let (name, size, messages) = find(workload);
        let mut command = Command::new(go?);
        if name.starts_with("sftp") {
            command.args(["sftp", &sftp_file().to_string_lossy()]);
            command.args([READERS, CHUNK, FILE_LEN, DOWNLOADS].map(|n| n.to_string()));
        } else {
            command.arg("pipe");
            command.args([size, messages, IN_FLIGHT, CONSUMERS].map(|n| n.to_string()));
        }
        command.output()
    } else {
        Command::new(me).args([workload, peer]).output()
    }
    .expect("run one peer");
    assert!(
        out.status.success(),
        "{workload} {peer} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8 output");
    let fields: Vec<&str> = text.split_whitespace().collect();
    Some((
        fields[0].parse().unwrap(),
        fields[1].parse().unwrap(),
        fields[2].parse().unwrap(),
    ))
}

fn table() {
    let me = env::current_exe().expect("the bench's own path");
    let go = go_program();
    sftp_file();
    let mut runs: Vec<Vec<Vec<Run>>> = WORKLOADS
        .iter()
        .map(|_| PEERS.iter().map(|_| Vec::new()).collect())
        .collect();
    for round in 0..RUNS {
        eprintln!("round {} of {RUNS}", round + 1);
        for ((workload, _, _), runs) in WORKLOADS.iter().zip(&mut runs) {
            for (peer, runs) in PEERS.iter().zip(runs) {
                runs.extend(measure(&me, go.as_deref(), workload, peer));
            }
        }
    }

    let mut text = String::new();
    let out = &mut text;
    writeln!(out, "## Flows: objects returned on another thread").unwrap();
    writeln!(out).unwrap();
    writeln!(
        out,
        "`cargo bench --bench flows`: `pipe`: one producer fills buffers and sends them through a \
         bounded channel of {IN_FLIGHT} to {CONSUMERS} consumers, which return them; `sftp`: {READERS} \
         threads read a {} MiB file in {} KiB chunks into pooled buffers, one writer returns them, {DOWNLOADS} \
         downloads in a row. Every \
         pool on its defaults. {RUNS} runs per peer, interleaved, a fresh process each: the best and \
         the median wall time, the median of the objects made and of the peak RSS. *÷ stashpool*: for the time, the \
         median over rounds of the peer's time over stashpool's in the same round, so that \
         the machine's drift across the sitting cancels; for the RSS, the peer's median over \
         stashpool's (above 1: stashpool is faster, or leaner).",
        FILE_LEN >> 20,
        CHUNK >> 10
    )
    .unwrap();
    writeln!(out).unwrap();
    writeln!(
        out,
        "| workload | peer | best (ms) | median (ms) | ÷ stashpool | objects made | peak RSS (MiB) | ÷ stashpool |"
    )
    .unwrap();
    writeln!(
        out,
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    .unwrap();
    for ((workload, _, _), runs) in WORKLOADS.iter().zip(&runs) {
        let best = |runs: &[Run]| runs.iter().map(|r| r.0).fold(f64::INFINITY, f64::min);
        let hwm = |runs: &[Run]| median(runs.iter().map(|r| r.2).collect()) as f64 / 1024.0;
        let ours = &runs[0];
        // Runs of one round are seconds apart: their ratio is what the
        // peers differ by, whatever the machine was doing at the time.
        let paired = |runs: &[Run]| median(runs.iter().zip(ours).map(|(r, o)| r.0 / o.0).collect());
        for (peer, runs) in PEERS.iter().zip(runs) {
            if runs.is_empty() {
                writeln!(out, "| {workload} | {peer} | not run (no `go`) | | | | | |").unwrap();
                continue;
            }
            writeln!(
                out,
                "| {workload} | {peer} | {:.1} | {:.1} | {:.2} | {} | {:.1} | {:.2} |",
                best(runs),
                median(runs.iter().map(|r| r.0).collect()),
                paired(runs),
                median(runs.iter().map(|r| r.1).collect()),
                hwm(runs),
                hwm(runs) / hwm(ours),
            )
            .unwrap();
        }
    }
    write_results(text, "cargo bench --bench flows", "flows.md");
}

/// Ends a table with the sitting it was measured in, prints it and writes
/// it to `benches/results/{file}`.
fn write_results(mut text: String, command: &str, file: &str) {
    writeln!(text).unwrap();
    writeln!(
        text,
        "_{}; commit `{}`; {}; {}; `{command}`._",
        sitting::date(),
        sitting::commit(),
        sitting::machine(),
        go_version(),
    )
    .unwrap();
    print!("{text}");
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("results")
        .join(file);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("write benches/results/{file}: {e}"));
    eprintln!("written to {}", path.display());
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("flows reads /proc/self/status: Linux only");
}

#[cfg(target_os = "linux")]
fn main() {
    // `cargo bench` passes `--bench`: ignore it.
    let args: Vec<String> = env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    match args.as_slice() {
        [mode] if mode == "fan-in" => fan_in_table(),
        [mode] if mode == "fan-in-one" => fan_in_one(),
        [workload, peer] => run_one(workload, peer),
        [] => table(),
        _ => panic!("usage: flows [WORKLOAD PEER]; workloads {WORKLOADS:?}, peers {PEERS:?}"),
    }
}

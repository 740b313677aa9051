//! A small HTTP/1.1 keep-alive server on `std::net`, built on stashpool's
//! pools the way Go servers use `bp`: a bounded set of workers for the
//! connections, a pooled reader and writer for each burst of requests, a
//! pooled buffer per request.
//!
//! ```text
//! cargo run --release --example http_server                  # pooled, on 127.0.0.1:8080
//! cargo run --release --example http_server -- --plain       # the same server, plain allocation
//! cargo run --release --example http_server -- --addr 127.0.0.1:0 --duration 30
//! ```
//!
//! # Routes
//!
//! * `GET /`: a static text body.
//! * `POST /echo` (or `PUT`): the request body, back.
//! * `GET /json`: a JSON document built per request into a per-request
//!   buffer.
//! * `GET /stats`: the counters below, as `key=value` text.
//!
//! `HEAD` works wherever `GET` does. Other paths get 404, other methods 405
//! (with `Allow`). Connections are kept open (HTTP/1.1, or HTTP/1.0 with
//! `Connection: keep-alive`) until the client closes or asks to close;
//! pipelined requests are answered in order, with one flush for the batch.
//!
//! # The two modes
//!
//! Pooled (the default): each connection runs as a task on a
//! [`WorkerPool`] of `--workers` threads, reads through a pooled
//! `BufReader` and writes through a pooled `BufWriter` (4 KiB each), and
//! takes one buffer per request from a
//! [`BytePool`](stashpool::bytes::BytePool) of 2 KiB buffers: it holds the
//! request head, then the body, or the JSON document sent back. A
//! connection takes its reader and writer when a request begins to arrive
//! and gives them back once it has answered every request that arrived
//! with it, so a connection between requests holds none. The pools keep
//! at most 8 idle objects per core, all stashes and the shared overflow
//! together (`max_idle`), so what one worker returns the next takes, and
//! they hold about as many objects as requests are in flight, whatever the
//! number of connections. They are built before the first connection and swept from the
//! server's monitor thread rather than from stashpool's background
//! sweeper.
//!
//! `--plain`: the same code, but each connection gets its own
//! `std::thread::spawn`ed thread, and the reader, writer and per-request
//! buffer are std's `BufReader`/`BufWriter` and a `Vec` of the same
//! capacity, allocated where the pooled server takes them from its pools.
//! The two differ only in where threads and buffers come from, so
//! comparing them measures the pools.
//!
//! # Bad input
//!
//! Nothing a client sends takes the server down; each refusal says why in
//! a one-line body and closes the connection:
//!
//! * a malformed request line or header, or an HTTP/1.1 request without
//!   `Host`: 400; an HTTP version other than 1.0 and 1.1: 505;
//! * a line of the head that ends in a bare LF rather than CRLF: 400.
//!   RFC 9112 lets a server take a bare LF for a line's end, but a proxy
//!   in front of it may not, and the two would then disagree on the
//!   headers, and so on where the request ends;
//! * a request head over `--max-head` bytes (default 8 KiB): 431;
//! * a body over `--max-body` bytes (default 1 MiB): 413, before any of it
//!   is read; `Transfer-Encoding` (chunked bodies): 501; an `Expect` other
//!   than `100-continue`: 417. A body is read into a buffer that grows as
//!   it arrives, so a head that announces a large body and sends none
//!   holds no more memory than a head;
//! * a request that has begun but not arrived whole within
//!   `--read-timeout-ms` (default 5000): 408. A connection with no request
//!   in that time is closed without a word, as is one whose client
//!   disconnects mid-request;
//! * a client that does not take its answers within `--write-timeout-ms`
//!   (default 5000) is cut off without a word. The deadline runs from the
//!   first write after the server last read from the connection until all
//!   written since is in the kernel's send buffer, so a slow reader that
//!   falls behind the answers to its pipelined requests keeps its worker
//!   for at most that long; a client keeps one longer only by taking its
//!   answers as fast as it asks for them, as any kept-alive client may.
//!
//! # More connections than workers: refused with 503
//!
//! The server serves at most `--workers` connections at once (default 256),
//! in both modes. A connection beyond that is answered at once with `503
//! Service Unavailable` and `Retry-After: 1`, and closed; it is never
//! queued. A kept-alive connection holds its worker until it closes or
//! idles out, so a queued one could wait the full read timeout behind an
//! idle client: a prompt refusal is the clearer answer. The accept thread
//! writes the refusal without blocking; a client whose request bytes
//! arrive just as the refused socket closes may see a reset instead of the
//! 503.
//!
//! Each connection takes a file descriptor. On Linux the server checks at
//! start that its file-descriptor limit (`RLIMIT_NOFILE`, `ulimit -n`)
//! leaves room for `--workers` connections, besides the descriptors open
//! already and one for a connection being refused; if not, it serves as
//! many as there is room for and says so on stderr, and its `listening`
//! line gives the number. Should an accept fail anyway (descriptors taken
//! by something else), it says so once and retries after a pause that
//! doubles up to a second.
//!
//! # Stopping and output
//!
//! The server prints `listening on http://ADDR` first (with the real port
//! when the port given was 0), then a line of counters every
//! `--stats-every` seconds (default 10; 0 for never), and a last one,
//! marked `final`, when it stops: on SIGINT or SIGTERM (Linux), or after
//! `--duration` seconds. Connections still open then are cut. The
//! counters: requests answered, connections served and refused, error
//! answers, read timeouts, heap allocations, bytes allocated and bytes
//! still in use (`live_bytes`) in the whole process (a counting global
//! allocator), the pools' statistics and the worker pool's.

mod conn;
mod counters;
mod http;

use std::env;
use std::io::{self, Write};
use std::net::{TcpListener, TcpStream};
use std::process;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use stashpool::workers::WorkerPool;

use conn::Limits;
use counters::Counting;
use http::{Reject, Status};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const USAGE: &str = "\
usage: http_server [--plain] [--addr HOST:PORT] [--workers N] [--read-timeout-ms MS]
                   [--write-timeout-ms MS] [--max-head BYTES] [--max-body BYTES]
                   [--stats-every SECS] [--sweep-every-ms MS] [--duration SECS]

  --plain             plain allocation and a std::thread per connection (default: pooled)
  --addr HOST:PORT    where to listen (default 127.0.0.1:8080; port 0 picks a free one)
  --workers N         most connections served at once; more get 503 (default 256;
                      lowered to what the file-descriptor limit leaves room for)
  --read-timeout-ms   how long a read may wait (default 5000)
  --write-timeout-ms  how long a client may take to receive the answers to what it
                      sent (default 5000)
  --max-head BYTES    largest request head (default 8192); larger: 431
  --max-body BYTES    largest request body (default 1048576); larger: 413
  --stats-every SECS  print the counters this often (default 10; 0: only at the end)
  --sweep-every-ms MS sweep the pools this often (default 5000, stashpool's default)
  --duration SECS     stop after this long (default: at SIGINT or SIGTERM)";

/// The command line.
#[derive(Debug)]
struct Config {
    plain: bool,
    addr: String,
    workers: usize,
    limits: Limits,
    stats_every: Option<Duration>,
    /// How often the pooled server sweeps its pools.
    sweep_every: Duration,
    duration: Option<Duration>,
}

impl Config {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Config, String> {
        let mut config = Config {
            plain: false,
            addr: "127.0.0.1:8080".to_owned(),
            workers: 256,
            limits: Limits {
                read_timeout: Duration::from_secs(5),
                write_timeout: Duration::from_secs(5),
                max_head: 8 * 1024,
                max_body: 1024 * 1024,
            },
            stats_every: Some(Duration::from_secs(10)),
            sweep_every: stashpool::DEFAULT_SWEEP_INTERVAL,
            duration: None,
        };
        while let Some(flag) = args.next() {
            if flag == "--plain" {
                config.plain = true;
                continue;
            }
            if flag == "--help" || flag == "-h" {
                println!("{USAGE}");
                process::exit(0);
            }
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let number = || {
                value
                    .parse::<u64>()
                    .map_err(|_| format!("{flag} takes a whole number, not {value:?}"))
            };
            match flag.as_str() {
                "--addr" => config.addr = value.clone(),
                "--workers" => {
                    config.workers = number()? as usize;
                    if !(1..=4096).contains(&config.workers) {
                        return Err("--workers must be from 1 to 4096".to_owned());
                    }
                }
                "--read-timeout-ms" => {
                    config.limits.read_timeout = Duration::from_millis(number()?.max(1))
                }
                "--write-timeout-ms" => {
                    config.limits.write_timeout = Duration::from_millis(number()?.max(1))
                }
                "--max-head" => config.limits.max_head = number()? as usize,
                "--max-body" => config.limits.max_body = number()? as usize,
                "--stats-every" => {
                    config.stats_every = Some(number()?).filter(|&s| s > 0).map(Duration::from_secs)
                }
                "--sweep-every-ms" => config.sweep_every = Duration::from_millis(number()?.max(1)),
                "--duration" => config.duration = Some(Duration::from_secs(number()?)),
                _ => return Err(format!("unknown flag {flag:?}")),
            }
        }
        Ok(config)
    }
}

/// Set by the signal handler or when `--duration` is up.
static STOP: AtomicBool = AtomicBool::new(false);

#[cfg(target_os = "linux")]
fn handle_signals() {
    extern "C" fn on_signal(_: libc::c_int) {
        STOP.store(true, Ordering::Relaxed);
    }
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is
        // async-signal-safe, and it lives as long as the program.
        unsafe {
            libc::signal(
                signal,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn handle_signals() {}

/// Connections being served now, in both modes.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// A connection's place among the `--workers` served at once; freed when
/// the connection's task ends, however it ends.
struct Slot;

impl Slot {
    fn claim(most: usize) -> Option<Slot> {
        if ACTIVE.fetch_add(1, Ordering::Acquire) < most {
            Some(Slot)
        } else {
            ACTIVE.fetch_sub(1, Ordering::Release);
            None
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        ACTIVE.fetch_sub(1, Ordering::Release);
    }
}

/// Answers a connection beyond the limit with 503, without ever blocking
/// the accept loop: the socket is non-blocking, what the client already
/// sent is read and dropped (so that closing does not reset the
/// connection), and the answer fits in one write to an empty send buffer.
fn refuse(stream: TcpStream) {
    counters::REFUSED.add(1);
    if stream.set_nonblocking(true).is_err() {
        return;
    }
    let mut stream = &stream;
    let drain = |mut stream: &TcpStream| {
        let mut sink = [0u8; 4096];
        for _ in 0..16 {
            if !matches!(io::Read::read(&mut stream, &mut sink), Ok(n) if n > 0) {
                break;
            }
        }
    };
    drain(stream);
    let mut answer = [0u8; 512];
    let mut out = io::Cursor::new(&mut answer[..]);
    let reject = Reject {
        status: Status::SERVICE_UNAVAILABLE,
        reason: "every worker is busy; try again",
    };
    if http::write_reject(&mut out, reject, "Retry-After: 1\r\n").is_ok() {
        let written = out.position() as usize;
        let _ = stream.write_all(&answer[..written]);
        let _ = stream.shutdown(std::net::Shutdown::Write);
        drain(stream);
    }
}

/// The most connections the server can hold open at once: `workers`, or
/// fewer if the file-descriptor limit leaves room for fewer. Each
/// connection takes a descriptor, as does one more connection while it is
/// refused with 503; the descriptors open now (the standard streams, the
/// listener) are taken already. Exits if there is room for none.
fn fit_workers(workers: usize) -> usize {
    let Some((limit, open)) = descriptors() else {
        return workers;
    };
    let room = limit.saturating_sub(open + 1);
    if workers as u64 <= room {
        return workers;
    }
    if room == 0 {
        eprintln!(
            "http_server: the file-descriptor limit (RLIMIT_NOFILE, `ulimit -n`) is {limit} \
             and {open} are open: no room for a connection; raise the limit"
        );
        process::exit(1);
    }
    eprintln!(
        "http_server: --workers {workers} needs {} file descriptors, but the limit \
         (RLIMIT_NOFILE, `ulimit -n`) is {limit} and {open} are open: serving {room} workers; \
         raise the limit to serve more",
        workers as u64 + open + 1
    );
    room as usize
}

/// The process's file-descriptor limit (soft `RLIMIT_NOFILE`), and how
/// many of the descriptors below it are open.
#[cfg(target_os = "linux")]
fn descriptors() -> Option<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` only writes the struct it is given, which lives
    // across the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    let limit = limit.rlim_cur;
    // Only descriptors below the limit take room: a new one is always
    // numbered below it.
    let open = match std::fs::read_dir("/proc/self/fd") {
        // Listing the directory opened one, which it lists too.
        Ok(dir) => {
            let below = dir
                .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u64>().ok())
                .filter(|&fd| fd < limit);
            below.count() as u64 - 1
        }
        // No descriptor below the limit is free.
        Err(error) if error.raw_os_error() == Some(libc::EMFILE) => limit,
        Err(_) => return None,
    };
    Some((limit, open))
}

#[cfg(not(target_os = "linux"))]
fn descriptors() -> Option<(u64, u64)> {
    None
}

/// One line of counters, pool and worker statistics on stdout.
fn report(label: &str, started: Instant, plain: bool, workers: Option<&WorkerPool>) {
    let mut line = Vec::with_capacity(1024);
    let _ = write!(
        line,
        "http_server: {label} mode={} elapsed_s={:.1} ",
        if plain { "plain" } else { "pooled" },
        started.elapsed().as_secs_f64()
    );
    let _ = conn::write_stats(&mut line);
    if let Some(workers) = workers {
        let stats = workers.stats();
        let _ = write!(
            line,
            " workers.running={} workers.completed={} workers.panicked={}",
            workers.running(),
            stats.completed,
            stats.panicked
        );
    }
    line.push(b'\n');
    let mut stdout = io::stdout().lock();
    let _ = stdout.write_all(&line);
    let _ = stdout.flush();
}

/// Sweeps the pooled server's pools and prints the counters on their
/// intervals; when the server is told to stop,
/// prints them a last time and ends the process. Polls the stop flag,
/// which a signal handler can only set, not announce.
fn monitor(config: &Config, started: Instant, workers: Option<&WorkerPool>) -> ! {
    const TICK: Duration = Duration::from_millis(50);
    let mut next = config.stats_every.map(|every| started + every);
    let mut next_sweep = started + config.sweep_every;
    loop {
        thread::sleep(TICK);
        if !config.plain && Instant::now() >= next_sweep {
            conn::sweep_pools();
            next_sweep = Instant::now() + config.sweep_every;
        }
        if config.duration.is_some_and(|d| started.elapsed() >= d) {
            STOP.store(true, Ordering::Relaxed);
        }
        if STOP.load(Ordering::Relaxed) {
            report("final", started, config.plain, workers);
            process::exit(0);
        }
        if let (Some(at), Some(every)) = (next, config.stats_every)
            && Instant::now() >= at
        {
            report("stats", started, config.plain, workers);
            next = Some(at + every);
        }
    }
}

fn main() {
    let mut config = Config::parse(env::args().skip(1)).unwrap_or_else(|error| {
        eprintln!("http_server: {error}\n\n{USAGE}");
        process::exit(2);
    });
    let listener = TcpListener::bind(&config.addr).unwrap_or_else(|error| {
        eprintln!("http_server: cannot listen on {}: {error}", config.addr);
        process::exit(1);
    });
    let local = listener
        .local_addr()
        .expect("a bound socket has an address");
    handle_signals();
    let started = Instant::now();
    // Connection tasks borrow the limits for as long as the process runs.
    let limits: &'static Limits = Box::leak(Box::new(config.limits));
    // No queue beyond the workers: at most `workers` connections are
    // admitted (`Slot`), so a connection never needs to wait in a queue for
    // one, and the queue's ring, which is sized for the queue capacity and
    // allocated whole when the pool is made, stays a slot per worker.
    if !config.plain {
        conn::build_pools();
    }
    config.workers = fit_workers(config.workers);
    let workers =
        (!config.plain).then(|| WorkerPool::builder(config.workers).max_queued(0).build());
    println!(
        "http_server: listening on http://{local} ({}, {} workers)",
        if config.plain {
            "plain: a thread per connection"
        } else {
            "pooled"
        },
        config.workers
    );
    let _ = io::stdout().flush();

    thread::scope(|scope| {
        scope.spawn(|| monitor(&config, started, workers.as_ref()));
        // The pause after a failed accept; zero after a success.
        let mut backoff = Duration::ZERO;
        for stream in listener.incoming() {
            let stream = match stream {
                Ok(stream) => {
                    backoff = Duration::ZERO;
                    stream
                }
                Err(error) => {
                    // Out of descriptors, or a connection reset before it
                    // was accepted: keep serving the others. Said once per
                    // run of failures, and retried after a pause that
                    // doubles, so that a lasting error neither floods the
                    // log nor spins.
                    if backoff.is_zero() {
                        eprintln!("http_server: accept: {error} (retrying)");
                    }
                    backoff = (backoff * 2).clamp(Duration::from_millis(5), Duration::from_secs(1));
                    thread::sleep(backoff);
                    continue;
                }
            };
            let Some(slot) = Slot::claim(config.workers) else {
                refuse(stream);
                continue;
            };
            let plain = config.plain;
            let task = move || {
                let _slot = slot;
                conn::serve(stream, limits, plain);
            };
            match &workers {
                // At most `workers` connections hold a slot, so a worker is
                // free or about to be: the submit does not wait long.
                Some(workers) => workers.submit(task),
                None => {
                    if let Err(error) = thread::Builder::new().spawn(task) {
                        // The task was dropped: its slot is free and its
                        // connection closed.
                        eprintln!("http_server: cannot start a thread: {error}");
                    }
                }
            }
        }
    });
}

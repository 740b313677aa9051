//! One connection: requests read, answered and flushed in turn until the
//! client closes, asks to close, times out or sends something the server
//! refuses.
//!
//! The pooled and the plain server run this same code; they differ only in
//! where their buffers come from. Pooled: the reader's and writer's buffers
//! from [`READERS`] and [`WRITERS`] for the connection, taken once its
//! first request begins to arrive (so a connection that never sends holds
//! none), and one buffer per
//! request from [`BUFFERS`], taken once the request has begun to arrive
//! (so an idle connection holds none) and given back when it has been
//! answered; it holds the head, then the body or the document sent back.
//! Plain: `std::io::BufReader`/`BufWriter` of the same size, and a fresh
//! `Vec` of the same capacity per request.

use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use stashpool::bytes::BytePool;
use stashpool::io::{BufReaderPool, BufWriterPool, PooledBufReader};

use crate::counters::{self, ERRORS, REQUESTS, TIMEOUTS};
use crate::http::{self, HeadError, Reject, Request, Status};

/// Size of a connection's read and write buffers, in both modes: Go's
/// `net/http` default, and a single page. A pooled read buffer is zeroed
/// whole (so one connection's bytes never reach the next), which makes all
/// of its pages resident, where std's `BufReader` leaves the pages it never
/// reads into untouched; at one page the two cost the same memory.
pub const IO_BUFFER: usize = 4 * 1024;
/// Capacity of a per-request buffer, in both modes: a request head, the
/// JSON document and the benchmark's bodies fit without growing. Small,
/// because the pooled server keeps an idle one in each worker's stash, and
/// it runs a worker per open connection.
///
/// That idle buffer per worker is most of the memory the pooled server
/// holds beyond the plain one once connections far outnumber cores. The
/// plain server frees its buffer after each request, and glibc makes at
/// most eight arenas per core: past that many threads, threads share an
/// arena and reuse each other's freed buffers, so the plain server keeps
/// about as many as requests are in flight at once, not one per thread.
pub const BUFFER: usize = 2 * 1024;

/// Read buffers of the pooled server's connections.
pub static READERS: BufReaderPool = BufReaderPool::new(IO_BUFFER);
/// Write buffers of the pooled server's connections.
pub static WRITERS: BufWriterPool = BufWriterPool::new(IO_BUFFER);
/// Per-request buffers of the pooled server. A body that grew one past the
/// pool's `max_capacity` is dropped on return, not pooled, so a large
/// upload does not pin its memory.
///
/// The default knobs, although with many workers each stash pins an idle
/// buffer (see [`BUFFER`]): `local_capacity(0)` or a small `max_idle`
/// would send every return through the shared overflow instead, which
/// allocates a block of its own every few dozen pushes and leaves spare
/// batch buffers in each worker's stash; that costs about as much resident
/// memory as the buffers it saves with many workers, and more with few.
pub static BUFFERS: BytePool = BytePool::new(BUFFER);

/// What a connection may send and how long it may take.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// How long a read may wait: for a request to begin on an open
    /// connection, and for the rest of it once begun.
    pub read_timeout: Duration,
    /// Most bytes in a request head (request line and headers); more: 431.
    pub max_head: usize,
    /// Most bytes in a request body; more: 413.
    pub max_body: usize,
}

const HELLO: &[u8] = b"Hello from stashpool!\n";
const TEXT: &str = "text/plain; charset=utf-8";

/// Serves one accepted connection to its end.
pub fn serve(stream: TcpStream, limits: &Limits, plain: bool) {
    static NEXT_ID: AtomicU64 = AtomicU64::new(0);
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    counters::CONNECTIONS.add(1);
    // Timeouts on both directions: a client that neither sends nor reads
    // cannot hold a worker for longer than this.
    let configured = stream
        .set_read_timeout(Some(limits.read_timeout))
        .and_then(|()| stream.set_write_timeout(Some(limits.read_timeout)))
        .and_then(|()| stream.set_nodelay(true));
    if configured.is_err() || !first_request_begins(&stream) {
        return;
    }
    let timed = Timed {
        stream: &stream,
        timeout: limits.read_timeout,
        deadline: None,
        shortened: false,
    };
    if plain {
        Connection {
            stream: &stream,
            reader: BufReader::with_capacity(IO_BUFFER, timed),
            writer: BufWriter::with_capacity(IO_BUFFER, &stream),
            take: || Fresh(Vec::with_capacity(BUFFER)),
            limits,
            id,
            served: 0,
        }
        .run();
    } else {
        Connection {
            stream: &stream,
            reader: READERS.reader(timed),
            writer: WRITERS.writer(&stream),
            take: || BUFFERS.get(),
            limits,
            id,
            served: 0,
        }
        .run();
    }
}

/// Waits, without a buffer, for the connection's first request to begin:
/// `false` when the client closed, timed out or failed first. Only then
/// does the connection take its read and write buffers, so one that never
/// sends anything (a port probe, a client that connects ahead of need)
/// holds none, and in the pooled server leaves none idle in its worker's
/// stash: the same rule as a request's buffer, one step earlier.
fn first_request_begins(stream: &TcpStream) -> bool {
    loop {
        match stream.peek(&mut [0u8]) {
            Ok(0) => return false,
            Ok(_) => return true,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => {
                if is_timeout(&error) {
                    TIMEOUTS.add(1);
                }
                return false;
            }
        }
    }
}

/// A plain per-request buffer: allocated when taken, freed when dropped.
pub struct Fresh(Vec<u8>);

impl Deref for Fresh {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.0
    }
}

impl DerefMut for Fresh {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.0
    }
}

/// The socket as the buffered reader sees it. A read waits at most the
/// read timeout (set on the socket once per connection); once a request
/// has begun and needs another read, the reads share one deadline, so a
/// request trickled in a byte at a time still ends in time.
pub struct Timed<'s> {
    stream: &'s TcpStream,
    timeout: Duration,
    deadline: Option<Instant>,
    /// The socket's timeout was lowered for the deadline and must be put
    /// back before the next request.
    shortened: bool,
}

impl Timed<'_> {
    /// Starts the request's deadline, if it has not started.
    fn arm(&mut self) {
        if self.deadline.is_none() {
            self.deadline = Some(Instant::now() + self.timeout);
        }
    }

    /// Ends the request's deadline. Costs a system call only when the
    /// request needed more than one read.
    fn disarm(&mut self) -> io::Result<()> {
        self.deadline = None;
        if self.shortened {
            self.shortened = false;
            self.stream.set_read_timeout(Some(self.timeout))?;
        }
        Ok(())
    }
}

impl Read for Timed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(deadline) = self.deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            self.stream.set_read_timeout(Some(left))?;
            self.shortened = true;
        }
        let mut stream = self.stream;
        stream.read(buf)
    }
}

/// A buffered reader over [`Timed`]: std's or a pooled one.
trait TimedReader<'s>: BufRead {
    fn timed(&mut self) -> &mut Timed<'s>;
    fn buffered(&self) -> usize;
}

impl<'s> TimedReader<'s> for BufReader<Timed<'s>> {
    fn timed(&mut self) -> &mut Timed<'s> {
        self.get_mut()
    }
    fn buffered(&self) -> usize {
        self.buffer().len()
    }
}

impl<'s> TimedReader<'s> for PooledBufReader<'_, Timed<'s>> {
    fn timed(&mut self) -> &mut Timed<'s> {
        self.get_mut()
    }
    fn buffered(&self) -> usize {
        self.buffer().len()
    }
}

/// How one request ended.
enum Outcome {
    /// Answered; read the next request.
    Next,
    /// Close the connection without a word: the client closed, timed out
    /// between requests, or a socket failed.
    Close,
    /// Answer with an error and close.
    Refuse(Reject),
}

struct Connection<'s, R, W, F> {
    stream: &'s TcpStream,
    reader: R,
    writer: W,
    /// Where per-request buffers come from.
    take: F,
    limits: &'s Limits,
    id: u64,
    served: u64,
}

fn is_timeout(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

impl<'s, R, W, F, B> Connection<'s, R, W, F>
where
    R: TimedReader<'s>,
    W: Write,
    F: Fn() -> B,
    B: DerefMut<Target = Vec<u8>>,
{
    fn run(mut self) {
        loop {
            match self.request() {
                Outcome::Next => {}
                Outcome::Close => return,
                Outcome::Refuse(reject) => {
                    REQUESTS.add(1);
                    ERRORS.add(1);
                    if http::write_reject(&mut self.writer, reject, "").is_ok() {
                        linger(self.stream, self.limits.read_timeout);
                    }
                    return;
                }
            }
        }
    }

    /// Reads one request and answers it.
    ///
    /// One buffer serves the whole request: it holds the head until the
    /// head is parsed, then the body, or the document sent back.
    fn request(&mut self) -> Outcome {
        // Wait for the request to begin before taking its buffer, so that
        // an idle kept-alive connection holds none.
        loop {
            match self.reader.fill_buf() {
                Ok([]) => return Outcome::Close,
                Ok(_) => break,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => {
                    if is_timeout(&error) {
                        TIMEOUTS.add(1); // an idle keep-alive connection
                    }
                    return Outcome::Close;
                }
            }
        }
        let mut buf = (self.take)();
        let read = http::read_head(&mut self.reader, &mut buf, self.limits.max_head, |r| {
            r.timed().arm()
        });
        match read {
            Ok(()) => {}
            Err(HeadError::Closed | HeadError::Truncated) => return Outcome::Close,
            Err(HeadError::TooLarge) => {
                return Outcome::Refuse(Reject {
                    status: Status::HEADERS_TOO_LARGE,
                    reason: "the request head is over the server's limit",
                })
            }
            Err(HeadError::Io { error, partial }) => {
                if !is_timeout(&error) {
                    return Outcome::Close;
                }
                TIMEOUTS.add(1);
                if !partial {
                    return Outcome::Close;
                }
                return Outcome::Refuse(Reject {
                    status: Status::REQUEST_TIMEOUT,
                    reason: "the request did not arrive within the read timeout",
                });
            }
        }
        let call = match http::parse(&buf) {
            Ok(request) => Call::new(&request),
            Err(reject) => return Outcome::Refuse(reject),
        };
        buf.clear(); // the head is parsed: the buffer is free for the body
        let length = call.content_length;
        if length > self.limits.max_body as u64 {
            return Outcome::Refuse(Reject {
                status: Status::CONTENT_TOO_LARGE,
                reason: "the request body is over the server's limit",
            });
        }
        if length > 0 {
            let length = length as usize; // at most max_body
            if call.expect_continue {
                let sent = write!(self.writer, "HTTP/1.1 {}\r\n\r\n", Status::CONTINUE)
                    .and_then(|()| self.writer.flush());
                if sent.is_err() {
                    return Outcome::Close;
                }
            }
            buf.resize(length, 0);
            if self.reader.buffered() < length {
                self.reader.timed().arm();
            }
            if let Err(error) = self.reader.read_exact(&mut buf) {
                if !is_timeout(&error) {
                    return Outcome::Close;
                }
                TIMEOUTS.add(1);
                return Outcome::Refuse(Reject {
                    status: Status::REQUEST_TIMEOUT,
                    reason: "the request body did not arrive within the read timeout",
                });
            }
        }
        if self.reader.timed().disarm().is_err() {
            return Outcome::Close;
        }
        self.served += 1;
        if self.respond(&call, &mut buf).is_err() {
            return Outcome::Close;
        }
        REQUESTS.add(1);
        if !call.keep_alive {
            let _ = self.writer.flush();
            return Outcome::Close;
        }
        // Pipelined requests already read are answered before one flush.
        if self.reader.buffered() == 0 && self.writer.flush().is_err() {
            return Outcome::Close;
        }
        Outcome::Next
    }

    /// Answers `call`; `buf` holds the request body, and is free for the
    /// answer's.
    fn respond(&mut self, call: &Call, buf: &mut Vec<u8>) -> io::Result<()> {
        match call.route {
            Route::Hello => self.send(call, Status::OK, TEXT, HELLO, ""),
            Route::Json => {
                buf.clear();
                json_document(buf, self.id, self.served)?;
                self.send(call, Status::OK, "application/json", buf, "")
            }
            Route::Stats => {
                buf.clear();
                write_stats(buf)?;
                buf.push(b'\n');
                self.send(call, Status::OK, TEXT, buf, "")
            }
            Route::Echo => self.send(call, Status::OK, "application/octet-stream", buf, ""),
            Route::ReadOnly => self.error(
                call,
                Status::METHOD_NOT_ALLOWED,
                b"405 Method Not Allowed: use GET or HEAD\n",
                "Allow: GET, HEAD\r\n",
            ),
            Route::WriteOnly => self.error(
                call,
                Status::METHOD_NOT_ALLOWED,
                b"405 Method Not Allowed: use POST or PUT\n",
                "Allow: POST, PUT\r\n",
            ),
            Route::NotFound => self.error(
                call,
                Status::NOT_FOUND,
                b"404 Not Found: the routes are /, /json, /stats and /echo\n",
                "",
            ),
        }
    }

    fn error(&mut self, call: &Call, status: Status, body: &[u8], extra: &str) -> io::Result<()> {
        ERRORS.add(1);
        self.send(call, status, TEXT, body, extra)
    }

    fn send(
        &mut self,
        call: &Call,
        status: Status,
        content_type: &str,
        body: &[u8],
        extra: &str,
    ) -> io::Result<()> {
        http::write_head(
            &mut self.writer,
            status,
            content_type,
            body.len(),
            call.keep_alive,
            call.minor,
            extra,
        )?;
        if !call.head_only {
            self.writer.write_all(body)?;
        }
        Ok(())
    }
}

/// What a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Hello,
    Json,
    Stats,
    Echo,
    /// A route that takes only `GET` and `HEAD`, asked with another method.
    ReadOnly,
    /// `/echo`, asked without `POST` or `PUT`.
    WriteOnly,
    NotFound,
}

/// What the server keeps of a parsed request: nothing borrowed from its
/// head, so the head's buffer can be used again for the body.
#[derive(Clone, Copy, Debug)]
struct Call {
    route: Route,
    /// `HEAD`: the answer's head only.
    head_only: bool,
    minor: u8,
    keep_alive: bool,
    content_length: u64,
    expect_continue: bool,
}

impl Call {
    fn new(request: &Request<'_>) -> Call {
        let read_only = matches!(request.method, b"GET" | b"HEAD");
        let route = match request.path {
            b"/" if read_only => Route::Hello,
            b"/json" if read_only => Route::Json,
            b"/stats" if read_only => Route::Stats,
            b"/echo" if matches!(request.method, b"POST" | b"PUT") => Route::Echo,
            b"/" | b"/json" | b"/stats" => Route::ReadOnly,
            b"/echo" => Route::WriteOnly,
            _ => Route::NotFound,
        };
        Call {
            route,
            head_only: request.method == b"HEAD",
            minor: request.minor,
            keep_alive: request.keep_alive,
            content_length: request.content_length,
            expect_continue: request.expect_continue,
        }
    }
}

/// A JSON document built per request: a small catalogue whose numbers
/// depend on the connection and the request, so no two are alike.
fn json_document(out: &mut Vec<u8>, connection: u64, request: u64) -> io::Result<()> {
    write!(
        out,
        "{{\"server\":\"stashpool\",\"connection\":{connection},\"request\":{request},\"items\":["
    )?;
    for id in 0..16u64 {
        if id > 0 {
            out.push(b',');
        }
        write!(
            out,
            "{{\"id\":{id},\"name\":\"item-{id}\",\"price_cents\":{},\"in_stock\":{}}}",
            (id * 137 + request * 7) % 10_000,
            !(id + request).is_multiple_of(3),
        )?;
    }
    out.extend_from_slice(b"]}\n");
    Ok(())
}

/// The counters and the pools' statistics, as `key=value` pairs.
pub fn write_stats(out: &mut impl Write) -> io::Result<()> {
    counters::write_counters(out)?;
    for (name, stats) in [
        ("buffers", BUFFERS.stats()),
        ("readers", READERS.stats()),
        ("writers", WRITERS.stats()),
    ] {
        write!(
            out,
            " {name}.created={} {name}.reused={} {name}.rejected={} {name}.idle={}",
            stats.created, stats.reused, stats.rejected, stats.idle
        )?;
    }
    Ok(())
}

/// After an error answer: stop sending, then read and drop what the client
/// still sends, for a short while. Closing a socket with unread bytes makes
/// the kernel send a reset, which can destroy the answer before the client
/// reads it (a refused body is typically still on its way).
pub fn linger(stream: &TcpStream, read_timeout: Duration) {
    const MOST: usize = 256 * 1024;
    let _ = stream.shutdown(Shutdown::Write);
    let end = Instant::now() + read_timeout.min(Duration::from_secs(1));
    let mut sink = [0u8; 4096];
    let mut drained = 0;
    let mut stream = stream;
    while drained < MOST {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match stream.read(&mut sink) {
            Ok(0) => break,
            Ok(n) => drained += n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}

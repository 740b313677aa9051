//! One connection: requests read, answered and flushed in turn until the
//! client closes, asks to close, times out or sends something the server
//! refuses.
//!
//! A connection holds buffers only while it has requests to serve. It
//! waits for a request to begin with none (its first read lands in a small
//! array on the stack), then takes a reader, which starts from those
//! bytes, and a writer for the burst of requests that has arrived (one,
//! or several pipelined), and one buffer per request, which holds the head,
//! then the body or the document sent back. When the burst is answered and
//! flushed and nothing more has arrived, it gives the reader and the writer
//! back and waits again. So the buffers a server holds follow the requests
//! in flight, not the connections open: a kept-alive connection between
//! requests, or one that never sends, holds none.
//!
//! The pooled and the plain server run this same code; they differ only in
//! where the buffers come from ([`Buffers`]). Pooled: [`READERS`],
//! [`WRITERS`] and [`BUFFERS`], so taking them costs no allocation. Plain:
//! `std::io::BufReader`/`BufWriter` of the same size and a `Vec` of the
//! same capacity, allocated when taken and freed when given back.

use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::ops::{Deref, DerefMut};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use stashpool::Pool;
use stashpool::bytes::BytePool;
use stashpool::io::{BufReaderPool, BufWriterPool, PooledBufReader};

use crate::counters::{self, ERRORS, REQUESTS, TIMEOUTS, WRITE_TIMEOUTS};
use crate::http::{self, HeadError, Reject, Request, Status};

/// Size of the read and write buffers, in both modes: Go's `net/http`
/// default, and a single page. std's `BufReader` zeroes its whole buffer
/// on its first read (the socket reader here has no `read_buf` of its own);
/// a pooled reader zeroes what it lends the socket, 1 KiB at first, and on
/// return what was lent, so one connection's bytes never reach the next.
pub const IO_BUFFER: usize = 4 * 1024;
/// Capacity of a per-request buffer, in both modes: a request head, the
/// JSON document and the benchmark's bodies fit without growing.
pub const BUFFER: usize = 2 * 1024;

/// Read buffers of the pooled server's connections.
pub static READERS: LazyLock<BufReaderPool> = LazyLock::new(|| {
    BufReaderPool::builder(IO_BUFFER)
        .max_idle(max_idle())
        .manual_sweep()
        .build()
});
/// Write buffers of the pooled server's connections.
pub static WRITERS: LazyLock<BufWriterPool> = LazyLock::new(|| {
    BufWriterPool::builder(IO_BUFFER)
        .max_idle(max_idle())
        .manual_sweep()
        .build()
});
/// Per-request buffers of the pooled server. A body that grew one past the
/// pool's `max_capacity` is dropped on return, not pooled, so a large
/// upload does not pin its memory.
pub static BUFFERS: LazyLock<BytePool> = LazyLock::new(|| {
    BytePool::builder(BUFFER)
        .max_idle(max_idle())
        .manual_sweep()
        .build()
});

/// Idle objects each pool keeps per core.
///
/// The pools are shaped for a worker per connection. A worker takes each
/// pool's object once per burst of its connection's requests (a reader and
/// a writer) or per request (a buffer), so about as many are in use at
/// once as requests are in flight. `max_idle` bounds what the pools keep
/// beyond that, all stashes and the overflow together (a stash keeps at
/// most its share, and the workers beyond the pool's slots share the
/// overflow), so an idle set does not grow with the open connections:
/// enough that a burst does not drop objects on return only to make them
/// again (which churns the allocator's arenas), few enough that an idle
/// server holds little. Sweeps give back the rest.
pub const IDLE_PER_CORE: usize = 8;

fn max_idle() -> usize {
    IDLE_PER_CORE * thread::available_parallelism().map_or(1, usize::from)
}

/// The pooled server's pools, for sweeping and reporting them together.
///
/// They are built with `manual_sweep`: the server sweeps them from the
/// thread that already prints its counters ([`sweep_pools`]), rather than
/// from stashpool's background sweeper, a thread the plain server has no
/// counterpart of.
pub fn pools() -> [(&'static str, &'static dyn Pool); 3] {
    [
        ("buffers", &*BUFFERS),
        ("readers", &*READERS),
        ("writers", &*WRITERS),
    ]
}

/// Builds the pools now, before the first connection, so that no worker
/// pays for it on its first request.
pub fn build_pools() {
    LazyLock::force(&READERS);
    LazyLock::force(&WRITERS);
    LazyLock::force(&BUFFERS);
}

/// One sweep of every pool: what has sat idle since the last sweep is
/// dropped, so after a burst the pools shrink back within two sweeps.
pub fn sweep_pools() {
    for (_, pool) in pools() {
        pool.sweep();
    }
}

/// What a connection may send and how long it may take.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// How long a read may wait: for a request to begin on an open
    /// connection, and for the rest of it once begun.
    pub read_timeout: Duration,
    /// How long the client may take to receive the answers to what the
    /// server has read from it ([`TimedWrite`]).
    pub write_timeout: Duration,
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
    // cannot hold a worker for longer than these.
    let configured = stream
        .set_read_timeout(Some(limits.read_timeout))
        .and_then(|()| stream.set_write_timeout(Some(limits.write_timeout)))
        .and_then(|()| stream.set_nodelay(true));
    if configured.is_err() {
        return;
    }
    if plain {
        Connection::new(&stream, limits, id, Plain).run();
    } else {
        Connection::new(&stream, limits, id, Pools).run();
    }
}

/// Where a connection's buffers come from; the one difference between the
/// two servers.
trait Buffers<'s> {
    /// A reader over the connection's socket (its `Timed`).
    fn reader<'t>(&self, timed: &'t mut Timed<'s>) -> impl TimedReader<'s> + 't;
    /// A writer over the connection's socket (a burst's `TimedWrite`).
    fn writer(&self, out: TimedWrite<'s>) -> impl Write + 's;
    /// A per-request buffer.
    fn buffer(&self) -> impl DerefMut<Target = Vec<u8>>;
}

/// The pooled server's buffers: [`READERS`], [`WRITERS`] and [`BUFFERS`].
struct Pools;

impl<'s> Buffers<'s> for Pools {
    fn reader<'t>(&self, timed: &'t mut Timed<'s>) -> impl TimedReader<'s> + 't {
        READERS.get(timed)
    }
    fn writer(&self, out: TimedWrite<'s>) -> impl Write + 's {
        WRITERS.get(out)
    }
    fn buffer(&self) -> impl DerefMut<Target = Vec<u8>> {
        BUFFERS.get()
    }
}

/// The plain server's buffers: std's, and a fresh `Vec` per request, each
/// allocated when taken and freed when dropped.
struct Plain;

impl<'s> Buffers<'s> for Plain {
    fn reader<'t>(&self, timed: &'t mut Timed<'s>) -> impl TimedReader<'s> + 't {
        BufReader::with_capacity(IO_BUFFER, timed)
    }
    fn writer(&self, out: TimedWrite<'s>) -> impl Write + 's {
        BufWriter::with_capacity(IO_BUFFER, out)
    }
    fn buffer(&self) -> impl DerefMut<Target = Vec<u8>> {
        Fresh(Vec::with_capacity(BUFFER))
    }
}

/// Most bytes a connection reads before it takes its reader: the first
/// read of every burst lands in its [`Timed`], and the reader it takes
/// next starts from them. Enough for the head of a typical API request; a
/// longer one goes on in the reader's buffer. Reading the first bytes
/// rather than waiting for them with a `peek` saves a system call per
/// burst. Small, because it is on every connection's stack, and a few
/// hundred bytes more there take another page for some threads' stacks.
const FIRST_BYTES: usize = 256;

/// The first bytes of a burst, read before the connection takes a reader
/// ([`Timed::begin`]); the reader reads them before the socket.
struct FirstBytes {
    bytes: [u8; FIRST_BYTES],
    /// `bytes[start..end]` are yet to be read.
    start: usize,
    end: usize,
}

impl FirstBytes {
    fn pending(&self) -> usize {
        self.end - self.start
    }

    /// Moves as many pending bytes as fit into `buf`.
    fn read(&mut self, buf: &mut [u8]) -> usize {
        let n = self.pending().min(buf.len());
        buf[..n].copy_from_slice(&self.bytes[self.start..self.start + n]);
        self.start += n;
        n
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

/// The socket as the buffered reader sees it: each burst's first bytes,
/// then the socket. A read waits at most the read timeout (set on the
/// socket once per connection); once a request has begun and needs another
/// read, the reads share one deadline, so a request trickled in a byte at
/// a time still ends in time. One per connection, lent to each burst's
/// reader.
pub struct Timed<'s> {
    stream: &'s TcpStream,
    first: FirstBytes,
    timeout: Duration,
    deadline: Option<Instant>,
    /// The socket's timeout was lowered for the deadline and must be put
    /// back before the next request.
    shortened: bool,
}

impl<'s> Timed<'s> {
    fn new(stream: &'s TcpStream, timeout: Duration) -> Self {
        Timed {
            stream,
            first: FirstBytes {
                bytes: [0; FIRST_BYTES],
                start: 0,
                end: 0,
            },
            timeout,
            deadline: None,
            shortened: false,
        }
    }

    /// Waits, without a buffer, for a request to begin, and reads its
    /// first bytes: `false` when the client closed, timed out or failed
    /// first. Only then does the connection take its read and write
    /// buffers, so one that sends nothing (a port probe, a client that
    /// connects ahead of need, a kept-alive connection between requests)
    /// holds none.
    fn begin(&mut self) -> bool {
        debug_assert_eq!(self.first.pending(), 0, "the last burst was read whole");
        let mut stream = self.stream;
        loop {
            match stream.read(&mut self.first.bytes) {
                Ok(0) => return false,
                Ok(n) => {
                    (self.first.start, self.first.end) = (0, n);
                    return true;
                }
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
        if self.first.pending() > 0 {
            return Ok(self.first.read(buf));
        }
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

/// The socket as a burst's buffered writer sees it: the answers to what
/// the server has read must reach the kernel within the write timeout.
///
/// The socket's own timeout bounds a write that makes no progress at all;
/// a client that takes a few bytes now and then passes it for ever, and
/// keeps its worker while the answers to a pipelined burst trickle out.
/// So the writes between two reads share one deadline, armed by the first
/// of them and ended by a flush, which the connection calls whenever
/// everything answered so far must be out: before it waits to read more,
/// and at the end of a burst. A client holds a worker past the deadline
/// only by taking its answers as fast as it asks for them, as any
/// kept-alive client may; one that does not is cut off without a word.
///
/// The first write after a flush waits at most the socket's timeout, the
/// whole write timeout; only a later one costs a system call to lower it
/// to what is left, and the flush after it another to put it back.
pub struct TimedWrite<'s> {
    stream: &'s TcpStream,
    timeout: Duration,
    deadline: Option<Instant>,
    /// The socket's timeout was lowered for the deadline.
    shortened: bool,
    /// The deadline has passed: the connection is over, and every write
    /// fails at once (the buffered writer tries again when dropped).
    expired: bool,
}

impl<'s> TimedWrite<'s> {
    fn new(stream: &'s TcpStream, timeout: Duration) -> Self {
        TimedWrite {
            stream,
            timeout,
            deadline: None,
            shortened: false,
            expired: false,
        }
    }

    /// The deadline has passed; counted once per connection.
    fn expire(&mut self) -> io::Error {
        if !self.expired {
            self.expired = true;
            WRITE_TIMEOUTS.add(1);
        }
        io::ErrorKind::TimedOut.into()
    }
}

impl Write for TimedWrite<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.expired {
            return Err(self.expire());
        }
        let now = Instant::now();
        match self.deadline {
            None => self.deadline = Some(now + self.timeout),
            Some(deadline) => {
                let left = deadline.saturating_duration_since(now);
                if left.is_zero() {
                    return Err(self.expire());
                }
                self.stream.set_write_timeout(Some(left))?;
                self.shortened = true;
            }
        }
        let mut stream = self.stream;
        stream.write(buf).map_err(|error| {
            if is_timeout(&error) {
                self.expire()
            } else {
                error
            }
        })
    }

    /// Ends the deadline. The buffered writer calls it only once its
    /// buffer is written out, so everything written has reached the kernel.
    fn flush(&mut self) -> io::Result<()> {
        self.deadline = None;
        if self.shortened {
            self.shortened = false;
            self.stream.set_write_timeout(Some(self.timeout))?;
        }
        Ok(())
    }
}

/// A buffered reader over [`Timed`]: std's or a pooled one.
trait TimedReader<'s>: BufRead {
    fn timed(&mut self) -> &mut Timed<'s>;
    fn buffered(&self) -> usize;
}

impl<'s> TimedReader<'s> for BufReader<&mut Timed<'s>> {
    fn timed(&mut self) -> &mut Timed<'s> {
        self.get_mut()
    }
    fn buffered(&self) -> usize {
        self.buffer().len() + self.get_ref().first.pending()
    }
}

impl<'s> TimedReader<'s> for PooledBufReader<'_, &mut Timed<'s>> {
    fn timed(&mut self) -> &mut Timed<'s> {
        self.get_mut()
    }
    fn buffered(&self) -> usize {
        self.buffer().len() + self.get_ref().first.pending()
    }
}

/// Consumes the empty lines a client may send between requests (RFC 9112,
/// section 2.2), such as a CRLF after a body, from what is already
/// buffered, without reading more: a burst that ends in them is over.
fn skip_buffered_blank_lines<'s>(reader: &mut impl TimedReader<'s>) {
    while reader.buffered() > 0 {
        // Bytes are buffered (in the reader or in the burst's first bytes),
        // so this does not wait on the socket.
        let Ok(buffered) = reader.fill_buf() else {
            return;
        };
        let blank = buffered
            .iter()
            .take_while(|&&b| b == b'\r' || b == b'\n')
            .count();
        if blank == 0 {
            return;
        }
        reader.consume(blank);
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

/// One connection's state between its requests: no buffers.
struct Connection<'s, B> {
    stream: &'s TcpStream,
    limits: &'s Limits,
    id: u64,
    served: u64,
    buffers: B,
}

fn is_timeout(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

impl<'s, B: Buffers<'s>> Connection<'s, B> {
    fn new(stream: &'s TcpStream, limits: &'s Limits, id: u64, buffers: B) -> Self {
        Connection {
            stream,
            limits,
            id,
            served: 0,
            buffers,
        }
    }

    /// Serves bursts of requests until the connection ends. A burst is what
    /// the client sends back to back: one request, or several pipelined.
    /// It takes a reader and a writer when it begins and gives them back
    /// when it has been answered and nothing more has arrived, so that the
    /// buffers a server holds follow the requests in flight, not the
    /// connections open.
    fn run(mut self) {
        let mut timed = Timed::new(self.stream, self.limits.read_timeout);
        while timed.begin() {
            let mut reader = self.buffers.reader(&mut timed);
            let out = TimedWrite::new(self.stream, self.limits.write_timeout);
            let mut writer = self.buffers.writer(out);
            loop {
                match self.request(&mut reader, &mut writer) {
                    Outcome::Next => {
                        skip_buffered_blank_lines(&mut reader);
                        // More of the burst is here already.
                        if reader.buffered() > 0 {
                            continue;
                        }
                        // Answered and flushed: the buffers go back.
                        if writer.flush().is_err() {
                            return;
                        }
                        break;
                    }
                    Outcome::Close => return,
                    Outcome::Refuse(reject) => {
                        REQUESTS.add(1);
                        ERRORS.add(1);
                        if http::write_reject(&mut writer, reject, "").is_ok() {
                            linger(self.stream, self.limits.read_timeout);
                        }
                        return;
                    }
                }
            }
        }
    }

    /// Reads one request and answers it.
    ///
    /// One buffer serves the whole request: it holds the head until the
    /// head is parsed, then the body, or the document sent back.
    fn request(&mut self, reader: &mut impl TimedReader<'s>, writer: &mut impl Write) -> Outcome {
        // The request has begun (`Timed::begin`, or bytes left over
        // from the one before): read them before taking its buffer.
        loop {
            match reader.fill_buf() {
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
        let mut buf = self.buffers.buffer();
        // Before any read that can wait, the answers to the requests before
        // this one in the burst go out: their client may be waiting for
        // them before it sends the rest of this one.
        let read = http::read_head(reader, &mut buf, self.limits.max_head, |r| {
            writer.flush()?;
            r.timed().arm();
            Ok(())
        });
        match read {
            Ok(()) => {}
            Err(HeadError::Closed | HeadError::Truncated | HeadError::Aborted) => {
                return Outcome::Close;
            }
            Err(HeadError::TooLarge) => {
                return Outcome::Refuse(Reject {
                    status: Status::HEADERS_TOO_LARGE,
                    reason: "the request head is over the server's limit",
                });
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
                let sent = write!(writer, "HTTP/1.1 {}\r\n\r\n", Status::CONTINUE)
                    .and_then(|()| writer.flush());
                if sent.is_err() {
                    return Outcome::Close;
                }
            }
            if reader.buffered() < length {
                // As before a head's reads.
                if writer.flush().is_err() {
                    return Outcome::Close;
                }
                reader.timed().arm();
            }
            // Read as it arrives, into a buffer that grows (doubling) with
            // what has arrived, never sized by the announced length: a
            // head that promises a large body and sends none costs its
            // buffer and no more.
            match reader.by_ref().take(length as u64).read_to_end(&mut buf) {
                Ok(read) if read == length => {}
                Ok(_) => return Outcome::Close, // closed mid-body
                Err(error) if !is_timeout(&error) => return Outcome::Close,
                Err(_) => {
                    TIMEOUTS.add(1);
                    return Outcome::Refuse(Reject {
                        status: Status::REQUEST_TIMEOUT,
                        reason: "the request body did not arrive within the read timeout",
                    });
                }
            }
        }
        if reader.timed().disarm().is_err() {
            return Outcome::Close;
        }
        self.served += 1;
        if self.respond(writer, &call, &mut buf).is_err() {
            return Outcome::Close;
        }
        REQUESTS.add(1);
        if !call.keep_alive {
            let _ = writer.flush();
            return Outcome::Close;
        }
        // Pipelined requests already read are answered before one flush.
        if reader.buffered() == 0 && writer.flush().is_err() {
            return Outcome::Close;
        }
        Outcome::Next
    }

    /// Answers `call`; `buf` holds the request body, and is free for the
    /// answer's.
    fn respond(&self, writer: &mut impl Write, call: &Call, buf: &mut Vec<u8>) -> io::Result<()> {
        match call.route {
            Route::Hello => send(writer, call, Status::OK, TEXT, HELLO, ""),
            Route::Json => {
                buf.clear();
                json_document(buf, self.id, self.served)?;
                send(writer, call, Status::OK, "application/json", buf, "")
            }
            Route::Stats => {
                buf.clear();
                write_stats(buf)?;
                buf.push(b'\n');
                send(writer, call, Status::OK, TEXT, buf, "")
            }
            Route::Echo => send(
                writer,
                call,
                Status::OK,
                "application/octet-stream",
                buf,
                "",
            ),
            Route::ReadOnly => error(
                writer,
                call,
                Status::METHOD_NOT_ALLOWED,
                b"405 Method Not Allowed: use GET or HEAD\n",
                "Allow: GET, HEAD\r\n",
            ),
            Route::WriteOnly => error(
                writer,
                call,
                Status::METHOD_NOT_ALLOWED,
                b"405 Method Not Allowed: use POST or PUT\n",
                "Allow: POST, PUT\r\n",
            ),
            Route::NotFound => error(
                writer,
                call,
                Status::NOT_FOUND,
                b"404 Not Found: the routes are /, /json, /stats and /echo\n",
                "",
            ),
        }
    }
}

/// Answers `call` with an error.
fn error(
    writer: &mut impl Write,
    call: &Call,
    status: Status,
    body: &[u8],
    extra: &str,
) -> io::Result<()> {
    ERRORS.add(1);
    send(writer, call, status, TEXT, body, extra)
}

/// Writes an answer: head, then body unless the request was `HEAD`.
fn send(
    writer: &mut impl Write,
    call: &Call,
    status: Status,
    content_type: &str,
    body: &[u8],
    extra: &str,
) -> io::Result<()> {
    http::write_head(
        writer,
        status,
        content_type,
        body.len(),
        call.keep_alive,
        call.minor,
        extra,
    )?;
    if !call.head_only {
        writer.write_all(body)?;
    }
    Ok(())
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

/// The counters and the pools' statistics, as `key=value` pairs: each
/// pool's `Stats` as it displays itself (less a note, which follows a
/// `;`), its keys under the pool's name (`readers.gets=...`).
pub fn write_stats(out: &mut impl Write) -> io::Result<()> {
    counters::write_counters(out)?;
    for (name, pool) in pools() {
        let shown = pool.stats().to_string();
        let counters = shown.split(';').next().unwrap_or_default();
        for pair in counters.split(' ') {
            write!(out, " {name}.{pair}")?;
        }
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

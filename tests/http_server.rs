//! The example HTTP server (`examples/http_server`), driven over real
//! sockets on 127.0.0.1: its routes in both modes, keep-alive and
//! pipelining, and every kind of bad input it must survive.
//!
//! Each test starts the built example binary (`cargo test` builds the
//! examples before it runs the tests) on an ephemeral port and talks to it
//! as any client would. Running the real binary tests what a user runs: the
//! command line, the accept loop, the refusal of extra connections and the
//! counters printed at exit, none of which a library-level harness would
//! reach; and it keeps the server's code in the example, where it is read
//! as one, instead of in the crate's public API. Every socket read has a
//! deadline, so a server that hangs fails a test instead of stalling it.

/// The server's HTTP parser, whose unit tests run with these (the example
/// is built as the binary these tests start, not as a test harness).
#[path = "../examples/http_server/http.rs"]
#[allow(dead_code)]
mod http;

use std::collections::HashMap;
use std::env;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

/// Longest any single step may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(20);

/// The example binary, next to this test's own executable:
/// `target/<profile>/deps/http_server-<hash>` -> `target/<profile>/examples/`.
fn binary() -> PathBuf {
    let exe = env::current_exe().expect("the test's own path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test runs from target/<profile>/deps");
    let path = profile_dir
        .join("examples")
        .join(format!("http_server{}", env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "the example server is not built at {}: run `cargo test` (which builds the examples), \
         or `cargo build --example http_server` first",
        path.display()
    );
    path
}

/// A running server, killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
    /// The server's first line: where it listens, and with how many
    /// workers.
    first: String,
    /// The server's stdout lines after the first.
    lines: Receiver<String>,
    /// The server's stderr lines, also passed on to the test's own.
    errors: Receiver<String>,
}

/// The lines of `from`, sent to the receiver as they come, each handed to
/// `each` too.
fn lines_of(from: impl Read + Send + 'static, each: fn(&str)) -> Receiver<String> {
    let (send, lines) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            each(&line);
            if send.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

impl Server {
    fn start(args: &[&str]) -> Server {
        Server::start_with(args, |_| {})
    }

    /// Starts the server with `args`, its command first adjusted by `adjust`.
    fn start_with(args: &[&str], adjust: impl FnOnce(&mut Command)) -> Server {
        let mut command = Command::new(binary());
        command
            .args(["--addr", "127.0.0.1:0", "--stats-every", "0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        adjust(&mut command);
        let mut child = command.spawn().expect("start the example server");
        let lines = lines_of(child.stdout.take().unwrap(), |_| {});
        let errors = lines_of(child.stderr.take().unwrap(), |line| eprintln!("{line}"));
        let first = lines
            .recv_timeout(DEADLINE)
            .expect("the server prints where it listens");
        let addr = first
            .split_once("http://")
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("no address in the server's first line: {first:?}"));
        Server {
            child,
            addr,
            first,
            lines,
            errors,
        }
    }

    fn client(&self) -> Client {
        Client::new(self.connect())
    }

    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(self.addr).expect("connect to the server");
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        stream.set_write_timeout(Some(DEADLINE)).unwrap();
        stream
    }

    /// The counters the server reports on `/stats`.
    fn stats(&self) -> HashMap<String, u64> {
        let response = self.get_when_free("/stats");
        assert_eq!(response.status, 200);
        parse_counters(&String::from_utf8(response.body).unwrap())
    }

    /// A new connection and its first answer, to GET `path`; retried
    /// (within the deadline) while the server answers 503, for a worker
    /// freed by a connection that has ended for the client but not yet for
    /// the server.
    fn client_when_free(&self, path: &str) -> (Client, Response) {
        let start = Instant::now();
        loop {
            let mut client = self.client();
            let response = client.get(path);
            if response.status != 503 {
                return (client, response);
            }
            assert!(
                start.elapsed() < DEADLINE,
                "the server still refuses connections: a worker was never freed"
            );
            thread::yield_now();
        }
    }

    fn get_when_free(&self, path: &str) -> Response {
        self.client_when_free(path).1
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn parse_counters(text: &str) -> HashMap<String, u64> {
    text.split_whitespace()
        .filter_map(|pair| pair.split_once('='))
        .filter_map(|(key, value)| Some((key.to_owned(), value.parse().ok()?)))
        .collect()
}

#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("a text body")
    }
}

/// One connection, speaking HTTP/1.1 by hand.
struct Client {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Client {
    fn new(stream: TcpStream) -> Client {
        // A request sent in two writes (a POST's head, then its body) would
        // otherwise wait for the server's delayed acknowledgement of the
        // first before the second leaves (Nagle's algorithm); curl and wrk
        // set it too.
        stream.set_nodelay(true).expect("TCP_NODELAY");
        let reader = BufReader::new(stream.try_clone().unwrap());
        Client { stream, reader }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send to the server");
    }

    fn get(&mut self, path: &str) -> Response {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes());
        self.response()
    }

    fn post(&mut self, path: &str, body: &[u8]) -> Response {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        self.send(head.as_bytes());
        self.send(body);
        self.response()
    }

    fn response(&mut self) -> Response {
        self.read_response(false)
    }

    /// Reads a response; a response to HEAD has no body whatever its
    /// Content-Length says.
    fn read_response(&mut self, head_only: bool) -> Response {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).expect("a status line");
        assert!(
            n > 0,
            "the server closed the connection instead of answering"
        );
        let status = line
            .strip_prefix("HTTP/1.1 ")
            .and_then(|rest| rest.get(..3))
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("not a status line: {line:?}"));
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line).expect("a header line");
            let trimmed = line.trim_end_matches(['\r', '\n']);
            if trimmed.is_empty() {
                break;
            }
            let (name, value) = trimmed.split_once(':').expect("a header with a colon");
            headers.push((name.to_owned(), value.trim().to_owned()));
        }
        let mut response = Response {
            status,
            headers,
            body: Vec::new(),
        };
        if !head_only && status != 100 {
            let length: usize = response
                .header("Content-Length")
                .expect("every response has a Content-Length")
                .parse()
                .unwrap();
            response.body.resize(length, 0);
            self.reader
                .read_exact(&mut response.body)
                .expect("the whole body");
        }
        response
    }

    /// Asserts that the server has closed the connection: the next read
    /// ends the stream (or the server reset it) rather than timing out.
    fn assert_closed(&mut self) {
        let mut rest = Vec::new();
        match self.reader.read_to_end(&mut rest) {
            Ok(_) => assert!(rest.is_empty(), "unexpected bytes: {rest:?}"),
            Err(error) => assert_eq!(
                error.kind(),
                std::io::ErrorKind::ConnectionReset,
                "the connection was neither closed nor reset"
            ),
        }
    }
}

/// Sends `request` on a new connection and returns the answer, after
/// which the server must have closed the connection.
fn refused(server: &Server, request: &[u8]) -> Response {
    let mut client = server.client();
    client.send(request);
    let response = client.response();
    assert_eq!(response.header("Connection"), Some("close"));
    client.assert_closed();
    response
}

fn check_routes(mode: &[&str]) {
    let server = Server::start(mode);
    let mut client = server.client();

    let hello = client.get("/");
    assert_eq!(hello.status, 200);
    assert_eq!(hello.text(), "Hello from stashpool!\n");

    let json = client.get("/json");
    assert_eq!(json.status, 200);
    assert_eq!(json.header("Content-Type"), Some("application/json"));
    let doc = json.text();
    assert!(doc.starts_with("{\"server\":\"stashpool\""), "{doc}");
    assert!(doc.contains("\"request\":2,"), "the second request: {doc}");
    assert!(doc.contains("\"name\":\"item-15\""), "{doc}");
    assert!(doc.ends_with("]}\n"), "{doc}");

    // Every byte value, longer than one read buffer.
    let body: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    let echo = client.post("/echo", &body);
    assert_eq!(echo.status, 200);
    assert!(echo.body == body, "the echo differs from what was sent");
    assert_eq!(client.post("/echo", b"").body, b"");

    // HEAD: the headers of a GET, no body; the next response follows at
    // once, which it could not if a body had been sent.
    client.send(b"HEAD /json HTTP/1.1\r\nHost: test\r\n\r\n");
    let head = client.read_response(true);
    assert_eq!(head.status, 200);
    assert!(
        head.header("Content-Length")
            .unwrap()
            .parse::<usize>()
            .unwrap()
            > 0
    );
    assert_eq!(client.get("/").text(), "Hello from stashpool!\n");

    let missing = client.get("/nowhere");
    assert_eq!(missing.status, 404);
    assert!(missing.text().contains("/json"), "a 404 names the routes");
    client.send(b"DELETE / HTTP/1.1\r\nHost: test\r\n\r\n");
    let wrong = client.response();
    assert_eq!(wrong.status, 405);
    assert_eq!(wrong.header("Allow"), Some("GET, HEAD"));
    // 404 and 405 keep the connection.
    assert_eq!(client.get("/").status, 200);
}

#[test]
fn routes_answer_in_the_pooled_mode() {
    check_routes(&[]);
}

#[test]
fn routes_answer_in_the_plain_mode() {
    check_routes(&["--plain"]);
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let server = Server::start(&[]);
    let mut client = server.client();
    client.send(
        b"GET /json HTTP/1.1\r\nHost: t\r\n\r\n\
          POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc\
          GET /json HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    assert!(client.response().text().contains("\"request\":1,"));
    assert_eq!(client.response().body, b"abc");
    assert!(client.response().text().contains("\"request\":3,"));
}

#[test]
fn a_request_that_follows_in_pieces_does_not_hold_back_the_answers_before_it() {
    // The server's read timeout outlasts the client's deadline: an answer
    // held back until the next request completes or times out fails here.
    let server = Server::start(&["--read-timeout-ms", "600000"]);
    let mut client = server.client();
    // A whole request and the start of the next, in one write.
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\nGET /json HT");
    assert_eq!(
        client.response().status,
        200,
        "the first answer comes at once"
    );
    client.send(b"TP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(client.response().status, 200);
    // A body followed by the CRLF that clients may add (RFC 9112, 2.2):
    // the answer comes, and the connection is idle, not mid-request.
    client.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi\r\n");
    let echo = client.response();
    assert_eq!((echo.status, echo.body.as_slice()), (200, &b"hi"[..]));
    assert_eq!(client.get("/").status, 200);
    let stats = server.stats();
    assert_eq!((stats["errors"], stats["timeouts"]), (0, 0), "{stats:?}");
}

#[test]
fn http_1_0_closes_unless_asked_to_keep_alive() {
    let server = Server::start(&[]);
    let mut client = server.client();
    client.send(b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(client.response().status, 200);
    client.assert_closed();

    let mut client = server.client();
    client.send(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(client.response().header("Connection"), Some("keep-alive"));
    assert_eq!(client.get("/").status, 200);

    let mut client = server.client();
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_eq!(client.response().status, 200);
    client.assert_closed();
}

#[test]
fn malformed_requests_get_400_and_the_server_goes_on() {
    let server = Server::start(&[]);
    for request in [
        &b"GARBAGE\r\n\r\n"[..],
        b"GET / HTTP/1.1 extra\r\nHost: t\r\n\r\n",
        b"GET  / HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET nowhere HTTP/1.1\r\nHost: t\r\n\r\n",
        b"G(T / HTTP/1.1\r\nHost: t\r\n\r\n",
        b"\x00\x01\x02\xff\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n", // no Host
        b"GET / HTTP/1.1\r\nHost: t\r\nno colon here\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nBad Name: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\n folded\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        // Lines that end in a bare LF, which a proxy in front may not read
        // as their end: here the header would hide a body from it.
        b"GET / HTTP/1.1\nHost: t\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\n\n",
        b"POST /echo HTTP/1.1\r\nHost: t\r\nX-A: b\nContent-Length: 5\r\n\r\nhello",
    ] {
        let response = refused(&server, request);
        assert_eq!(
            response.status,
            400,
            "for {:?}",
            String::from_utf8_lossy(request)
        );
        assert!(response.text().starts_with("400 Bad Request: "));
    }
    assert_eq!(
        refused(&server, b"GET / HTTP/2.0\r\nHost: t\r\n\r\n").status,
        505
    );
    assert_eq!(
        refused(
            &server,
            b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        )
        .status,
        501
    );
    assert_eq!(
        refused(
            &server,
            b"GET / HTTP/1.1\r\nHost: t\r\nExpect: magic\r\n\r\n"
        )
        .status,
        417
    );
    // Still serving, and counting what it refused.
    assert_eq!(server.client().get("/").status, 200);
    assert_eq!(server.stats()["errors"], 19);
}

#[test]
fn an_oversized_head_gets_431() {
    let server = Server::start(&["--max-head", "1024"]);
    let long_header = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
        "a".repeat(2000)
    );
    let response = refused(&server, long_header.as_bytes());
    assert_eq!(response.status, 431);
    // A head that never ends a line.
    assert_eq!(refused(&server, &[b'A'; 5000]).status, 431);
    // Many small headers add up too.
    let many = format!(
        "GET / HTTP/1.1\r\nHost: t\r\n{}\r\n",
        "X-A: b\r\n".repeat(200)
    );
    assert_eq!(refused(&server, many.as_bytes()).status, 431);
    // Just under the limit is fine.
    let fits = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
        "a".repeat(900)
    );
    let mut client = server.client();
    client.send(fits.as_bytes());
    assert_eq!(client.response().status, 200);
}

#[test]
fn an_oversized_body_gets_413_before_it_is_read() {
    let server = Server::start(&["--max-body", "1000"]);
    // Refused on the head alone: the client need not send the body.
    let response = refused(
        &server,
        b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1001\r\n\r\n",
    );
    assert_eq!(response.status, 413);
    // A client that sends the body anyway still reads the answer.
    let mut request = b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 50000\r\n\r\n".to_vec();
    request.resize(request.len() + 50_000, b'x');
    assert_eq!(refused(&server, &request).status, 413);
    // At the limit, served.
    let body = [b'y'; 1000];
    assert_eq!(server.client().post("/echo", &body).body, body);
}

#[test]
fn expect_100_continue_gets_an_interim_answer() {
    let server = Server::start(&[]);
    let mut client = server.client();
    client.send(
        b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
    );
    assert_eq!(client.read_response(false).status, 100);
    client.send(b"hello");
    assert_eq!(client.response().body, b"hello");
    // HTTP/1.0 has no 100 Continue: the expectation is ignored, and the
    // first answer is the final one.
    let mut client = server.client();
    client.send(b"POST /echo HTTP/1.0\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello");
    let answer = client.response();
    assert_eq!(
        (answer.status, answer.body.as_slice()),
        (200, &b"hello"[..])
    );
}

#[test]
fn clients_that_vanish_mid_request_free_their_worker() {
    // One worker: each vanished client must give it back for the next
    // request to be served at all.
    let server = Server::start(&["--workers", "1"]);
    for partial in [
        &b"GET /js"[..],
        b"GET /json HTTP/1.1\r\nHost: t\r\n",
        b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nonly some",
    ] {
        let mut stream = server.connect();
        stream.write_all(partial).unwrap();
        drop(stream);
        assert_eq!(server.get_when_free("/").status, 200);
    }
}

#[test]
fn silent_and_slow_clients_are_cut_off_by_the_read_timeout() {
    // As many workers as timed-out connections below, so that none waits
    // for another's worker; were a timed-out connection to keep its
    // worker, none would be left for the last request.
    let server = Server::start(&["--workers", "4", "--read-timeout-ms", "200"]);
    // Never sends a byte: closed without an answer.
    let mut silent = server.client();
    silent.assert_closed();
    // Begins a request and stalls: 408.
    let mut stalled = Client::new(server.connect());
    stalled.send(b"GET / HTTP/1.1\r\nHost: t\r\n");
    let response = stalled.response();
    assert_eq!(response.status, 408);
    stalled.assert_closed();
    // A body that stops short: 408 as well.
    let mut short = Client::new(server.connect());
    short.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
    assert_eq!(short.response().status, 408);
    short.assert_closed();
    // A head trickled a byte at a time, each byte within the timeout but
    // the whole of it not: the deadline covers the request, not each read.
    let mut trickle = server.connect();
    trickle
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let deadline = Instant::now() + DEADLINE;
    let mut answer = [0u8; 12];
    for byte in b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ".iter().cycle() {
        assert!(
            Instant::now() < deadline,
            "a trickled request was never cut off"
        );
        if trickle.write_all(&[*byte]).is_err() {
            break; // the server closed the connection
        }
        // Waits up to 50 ms for an answer: the pace of the trickle.
        match trickle.peek(&mut answer) {
            Ok(0) => break,
            Ok(n) => {
                let expected = b"HTTP/1.1 408";
                assert_eq!(&answer[..n], &expected[..n]);
                break;
            }
            Err(error) => assert!(
                matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "{error}"
            ),
        }
    }
    drop(trickle);
    // The workers are free again, and the timeouts were counted.
    assert_eq!(server.get_when_free("/").status, 200);
    assert!(server.stats()["timeouts"] >= 4);
}

#[test]
fn connections_beyond_the_workers_get_503() {
    let server = Server::start(&["--workers", "2"]);
    // Two connections, each answered once, so each holds a worker.
    let mut held: Vec<Client> = (0..2).map(|_| server.client()).collect();
    for client in &mut held {
        assert_eq!(client.get("/").status, 200);
    }
    let mut extra = server.client();
    let response = extra.response(); // answered without a request
    assert_eq!(response.status, 503);
    assert_eq!(response.header("Retry-After"), Some("1"));
    assert!(response.text().starts_with("503 Service Unavailable: "));
    extra.assert_closed();
    // The held connections are unharmed.
    for client in &mut held {
        assert_eq!(client.get("/json").status, 200);
    }
    // Closing one frees its worker for a newcomer.
    held.pop();
    assert_eq!(server.get_when_free("/").status, 200);
    let stats = server.stats();
    assert!(stats["refused"] >= 1);
}

/// A connection to `addr` with a small receive buffer, set before it
/// connects so that the window the server sees is small from the start.
/// A client that reads a little at a time then lets the server write a
/// little at a time, as one on a slow link does, rather than in the large
/// steps by which a loopback window opens.
#[cfg(target_os = "linux")]
fn connect_with_small_window(addr: SocketAddr) -> TcpStream {
    use std::mem::size_of;
    use std::os::fd::FromRawFd;

    let SocketAddr::V4(v4) = addr else {
        panic!("the server listens on 127.0.0.1, not {addr}")
    };
    // SAFETY: `socket` takes no pointers.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` is a socket just made, which nothing else owns.
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    let size: libc::c_int = 4096;
    // SAFETY: the option's value is a live `c_int`, of the length given.
    let set = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&raw const size).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(set, 0, "SO_RCVBUF: {}", std::io::Error::last_os_error());
    let to = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*v4.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: the address is a live `sockaddr_in`, of the length given.
    let connected = unsafe {
        libc::connect(
            fd,
            (&raw const to).cast(),
            size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    assert_eq!(connected, 0, "connect: {}", std::io::Error::last_os_error());
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    stream.set_write_timeout(Some(DEADLINE)).unwrap();
    stream
}

#[cfg(target_os = "linux")]
#[test]
fn a_slow_reader_is_cut_off_by_the_write_timeout() {
    // One worker, which the slow reader holds: no other client is served
    // until the server cuts it off.
    for mode in [&[][..], &["--plain"][..]] {
        let args = [mode, &["--workers", "1", "--write-timeout-ms", "300"]].concat();
        let server = Server::start(&args);
        let stream = connect_with_small_window(server.addr);
        // Pipelined requests, for as long as the server reads them: the
        // answers to what it has read always outgrow what the client takes.
        let mut pipeline = stream.try_clone().unwrap();
        let pipeline = thread::spawn(move || {
            let requests = b"GET /json HTTP/1.1\r\nHost: t\r\n\r\n".repeat(64);
            while pipeline.write_all(&requests).is_ok() {}
        });
        // Takes the answers a little at a time, each read soon after the
        // last, so that every write the server makes progresses: only a
        // deadline on the whole of the answers can cut this client off.
        let start = Instant::now();
        let mut taken = 0;
        let mut answers = [0u8; 512];
        loop {
            match (&stream).read(&mut answers) {
                Ok(0) => break,
                Ok(n) => taken += n,
                Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(error) => panic!("{args:?}: reading the answers: {error}"),
            }
            assert!(
                start.elapsed() < DEADLINE,
                "{args:?}: the slow reader still holds its worker after taking {taken} bytes"
            );
            // The slow reader's pace, not a wait for the server.
            thread::sleep(Duration::from_millis(10));
        }
        pipeline.join().unwrap();
        assert_eq!(server.get_when_free("/").status, 200, "{args:?}");
        assert_eq!(server.stats()["write_timeouts"], 1, "{args:?}");
    }
}

#[test]
fn bodies_announced_and_not_sent_take_no_memory() {
    // Heads that announce a body at the limit and send none of it. The
    // heap the server holds for them must follow what they sent: their
    // heads, and a connection's buffers (a reader and a writer of 4 KiB, a
    // request buffer of 2 KiB, a thread's bookkeeping); not the body they
    // announced.
    let heads = 32;
    let per_connection = 16 * 1024;
    let head = b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1048576\r\n\
                 Expect: 100-continue\r\n\r\n";
    for mode in [&[][..], &["--plain"][..]] {
        let server = Server::start(mode);
        let before = server.stats()["live_bytes"];
        let clients: Vec<Client> = (0..heads)
            .map(|_| {
                let mut client = server.client();
                client.send(head);
                // The head is read: the server waits for the body.
                assert_eq!(client.response().status, 100, "{mode:?}");
                client
            })
            .collect();
        let after = server.stats()["live_bytes"];
        // The connection that asks for /stats holds buffers too.
        let bound = heads * (head.len() + per_connection) + per_connection;
        let grown = after.saturating_sub(before);
        assert!(
            grown <= bound as u64,
            "{mode:?}: the heap grew by {grown} bytes for {heads} heads with no body \
             (at most {bound})"
        );
        drop(clients);
    }
}

#[cfg(target_os = "linux")]
#[test]
fn workers_are_lowered_to_what_the_file_descriptor_limit_allows() {
    use std::os::unix::process::CommandExt;

    // Far fewer descriptors than --workers asks for.
    const LIMIT: usize = 48;
    // Idle connections are kept for the whole test, so that no descriptor
    // frees up on its own.
    let args = ["--workers", "256", "--read-timeout-ms", "600000"];
    let mut server = Server::start_with(&args, |command| {
        let set = || {
            let limit = libc::rlimit {
                rlim_cur: LIMIT as libc::rlim_t,
                rlim_max: LIMIT as libc::rlim_t,
            };
            // SAFETY: `setrlimit` only reads the struct it is given, which
            // lives across the call.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        };
        // SAFETY: between fork and exec the closure only calls
        // `setrlimit`, which is async-signal-safe, and allocates nothing.
        unsafe { command.pre_exec(set) };
    });
    let workers: usize = server
        .first
        .split_once(", ")
        .and_then(|(_, rest)| rest.split_once(" workers"))
        .and_then(|(count, _)| count.parse().ok())
        .unwrap_or_else(|| panic!("no workers in {:?}", server.first));
    // As many connections as descriptors: each is answered, served while
    // a worker is free, refused with 503 once none is, never left
    // unaccepted for want of a descriptor (the client would wait for its
    // answer until the deadline).
    let mut served = Vec::new();
    let mut refused = 0;
    for _ in 0..LIMIT {
        let mut client = server.client();
        match client.get("/").status {
            200 => served.push(client),
            503 => refused += 1,
            status => panic!("status {status}"),
        }
    }
    assert_eq!(served.len(), workers, "{}", server.first);
    assert!(refused > 0, "{}", server.first);
    // Said once, at start, with the number served.
    let said = server
        .errors
        .recv_timeout(DEADLINE)
        .expect("a line on stderr");
    assert!(
        said.contains("RLIMIT_NOFILE") && said.contains(&format!("serving {workers} workers")),
        "{said}"
    );
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let rest: Vec<String> = server.errors.iter().collect();
    assert!(rest.is_empty(), "more on stderr: {rest:?}");
}

#[test]
fn the_pooled_server_reuses_its_buffers() {
    // One worker: every connection runs on the same thread, so the
    // counts below are exact.
    let server = Server::start(&["--workers", "1"]);
    let connections = 5;
    for _ in 0..connections {
        let (mut client, first) = server.client_when_free("/json");
        assert_eq!(first.status, 200);
        for _ in 1..10 {
            assert_eq!(client.get("/json").status, 200);
        }
    }
    let stats = parse_counters(server.get_when_free("/stats").text());
    // The client waits for each answer, so every request is a burst of its
    // own: it takes a reader, a writer and a buffer, and gives all three
    // back before the next. All on one thread: each made once, then reused
    // by every later request (the /stats request included).
    let requests = 10 * connections;
    for pool in ["readers", "writers", "buffers"] {
        assert_eq!(stats[&format!("{pool}.created")], 1, "{pool}: {stats:?}");
        assert_eq!(
            stats[&format!("{pool}.reused")],
            requests,
            "{pool}: {stats:?}"
        );
        // Every request's get, the /stats request's too.
        assert_eq!(
            stats[&format!("{pool}.gets")],
            requests + 1,
            "{pool}: {stats:?}"
        );
    }
}

/// Objects of `pool` out of it now, by the counters of `stats`: made, and
/// neither idle in the pool nor dropped by it.
fn out_of(stats: &HashMap<String, u64>, pool: &str) -> u64 {
    let count = |what: &str| stats[&format!("{pool}.{what}")];
    count("created") - count("idle") - count("discarded") - count("rejected") - count("trimmed")
}

#[test]
fn connections_between_requests_hold_no_buffers() {
    // Kept-alive connections that have been answered and sent nothing
    // since hold no reader, writer or buffer: only the /stats connection,
    // which is being answered, has them out.
    let held = 3;
    let server = Server::start(&["--workers", &(held + 1).to_string()]);
    let mut clients: Vec<Client> = (0..held)
        .map(|_| server.client_when_free("/json").0)
        .collect();
    for client in &mut clients {
        assert_eq!(client.get("/").status, 200);
    }
    // A connection gives its buffers back just after its answer is sent,
    // so the client may read the answer first: ask until they are back.
    let start = Instant::now();
    let pools = ["readers", "writers", "buffers"];
    loop {
        let stats = parse_counters(server.get_when_free("/stats").text());
        if pools.iter().all(|pool| out_of(&stats, pool) == 1) {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "idle connections still hold buffers: {stats:?}"
        );
        thread::yield_now();
    }
    // And they are served again when they send.
    for client in &mut clients {
        assert_eq!(client.get("/json").status, 200);
    }
}

#[test]
fn connections_that_never_send_take_no_buffers() {
    // One worker, so a probe that took a reader and a writer would leave
    // them in the stash the /stats connection takes its own from.
    let server = Server::start(&["--workers", "1"]);
    let probes = 3;
    for _ in 0..probes {
        drop(server.connect()); // connect and close, as wrk does before a run
    }
    let stats = parse_counters(server.get_when_free("/stats").text());
    // The first probe found the worker free (later ones may have been
    // refused while it was still closing the one before), and the /stats
    // connection was served after it.
    assert!(stats["connections"] >= 2, "no probe was served: {stats:?}");
    // Only the /stats connection took a reader and a writer.
    assert_eq!(stats["readers.created"], 1, "{stats:?}");
    assert_eq!(stats["readers.reused"], 0, "{stats:?}");
    assert_eq!(stats["writers.created"], 1, "{stats:?}");
    assert_eq!(stats["writers.reused"], 0, "{stats:?}");
}

#[test]
fn the_pools_shrink_when_the_burst_is_over() {
    // Three requests in flight at once, each begun but not finished, take
    // three readers. Once they are answered and the server is idle, its
    // sweeps (every 20 ms here) drop all three, wherever the workers left
    // them. Watched through the counters the server prints each second, so
    // that no request of the test's own keeps a reader in use.
    let in_flight = 3;
    let server = Server::start(&[
        "--workers",
        "4",
        "--sweep-every-ms",
        "20",
        "--stats-every",
        "1",
    ]);
    let mut clients: Vec<Client> = (0..in_flight).map(|_| server.client()).collect();
    for client in &mut clients {
        client.send(b"GET /json HTTP/1.1\r\nHost: test\r\n");
    }
    let start = Instant::now();
    while out_of(&server.stats(), "readers") < in_flight as u64 + 1 {
        assert!(
            start.elapsed() < DEADLINE,
            "the requests never took their readers"
        );
        thread::yield_now();
    }
    for client in &mut clients {
        client.send(b"\r\n");
        assert_eq!(client.response().status, 200);
    }
    let made = server.stats()["readers.created"];
    assert!(
        made > in_flight as u64,
        "one reader each, and the /stats one"
    );
    let start = Instant::now();
    loop {
        assert!(
            start.elapsed() < DEADLINE,
            "the idle readers were never trimmed"
        );
        let line = server
            .lines
            .recv_timeout(DEADLINE)
            .expect("the server prints its counters every second");
        let stats = parse_counters(&line);
        if stats["readers.idle"] == 0 {
            assert_eq!(stats["readers.trimmed"], stats["readers.created"], "{line}");
            assert!(stats["readers.created"] >= made, "{line}");
            assert_eq!(out_of(&stats, "readers"), 0, "{line}");
            break;
        }
    }
}

/// Requests `/json` `n` times on one connection and returns how many
/// allocations the server made meanwhile, from `/stats` (asked on another
/// connection) before and after.
fn allocations_for(server: &Server, n: u64) -> u64 {
    let mut client = server.client();
    assert_eq!(client.get("/json").status, 200); // this connection is set up
    let before = server.stats()["allocations"];
    for _ in 0..n {
        assert_eq!(client.get("/json").status, 200);
    }
    server.stats()["allocations"] - before
}

#[test]
fn the_pooled_server_allocates_next_to_nothing_per_request() {
    // The plain server allocates a buffer for each request at least; the
    // pooled one reuses its buffers. The margin covers what the second
    // /stats connection costs.
    let n = 200;
    let pooled = allocations_for(&Server::start(&[]), n);
    let plain = allocations_for(&Server::start(&["--plain"]), n);
    assert!(
        pooled < n / 4,
        "pooled: {pooled} allocations for {n} requests"
    );
    assert!(plain >= n, "plain: {plain} allocations for {n} requests");
}

#[cfg(target_os = "linux")]
#[test]
fn sigterm_prints_the_final_counters() {
    let mut server = Server::start(&[]);
    let mut client = server.client();
    for _ in 0..3 {
        assert_eq!(client.get("/").status, 200);
    }
    let pid = libc::pid_t::try_from(server.child.id()).unwrap();
    // SAFETY: `kill` has no memory-safety preconditions; the pid is our
    // own child, not yet waited for.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let last = server
        .lines
        .recv_timeout(DEADLINE)
        .expect("a final line after SIGTERM");
    assert!(
        last.starts_with("http_server: final mode=pooled "),
        "{last}"
    );
    let counters = parse_counters(&last);
    assert_eq!(counters["requests"], 3);
    assert_eq!(counters["connections"], 1);
    assert_eq!(counters["workers.panicked"], 0);
    let status = server.child.wait().unwrap();
    assert!(status.success(), "{status}");
}

/// The heap the server holds (`live_bytes`) after `n` more requests of
/// each route on one kept-alive connection, less what it held before them.
fn heap_growth(server: &Server, n: u64) -> i64 {
    let mut client = server.client();
    let body = vec![b'x'; 1024];
    let round = |client: &mut Client| {
        assert_eq!(client.get("/").status, 200);
        assert_eq!(client.get("/json").status, 200);
        let echo = client.post("/echo", &body);
        assert_eq!((echo.status, echo.body.len()), (200, body.len()));
    };
    round(&mut client); // this connection and its buffers are set up
    let before = server.stats();
    for _ in 0..n {
        round(&mut client);
    }
    let after = server.stats();
    assert!(after["live_bytes"] > 0, "{after:?}");
    assert!(after["live_bytes"] <= after["allocated_bytes"], "{after:?}");
    after["live_bytes"] as i64 - before["live_bytes"] as i64
}

#[test]
fn requests_leave_no_heap_behind() {
    // Both modes take a connection's buffers for each burst of requests
    // and free (plain) or pool (pooled) them after it. What a request leaves behind would
    // add up over 3 * 300 requests; the margin covers one connection's
    // buffers and thread, the /stats connection before the last one, which
    // the server may not have closed yet.
    let n = 300;
    let margin = 16 * 1024;
    // Two workers: the client's connection and the /stats one, so the
    // pooled server starts no new worker (with its stashes) meanwhile.
    for args in [&["--workers", "2"][..], &["--plain"][..]] {
        let growth = heap_growth(&Server::start(args), n);
        assert!(
            growth < margin,
            "{args:?}: the heap grew by {growth} bytes over {n} rounds of requests"
        );
    }
}

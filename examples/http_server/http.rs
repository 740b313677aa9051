//! HTTP/1.1 framing: reading a request head under a size limit, parsing it,
//! and writing a response head.
//!
//! Only what the server needs is kept from a head (method, path, version,
//! `Content-Length`, `Connection`, `Expect`, `Host`); nothing is allocated
//! while parsing: the parsed request borrows the head's buffer.

use std::fmt;
use std::io::{self, BufRead, Write};

/// A response status: code and reason phrase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status(pub u16, pub &'static str);

impl Status {
    pub const OK: Status = Status(200, "OK");
    pub const CONTINUE: Status = Status(100, "Continue");
    pub const BAD_REQUEST: Status = Status(400, "Bad Request");
    pub const NOT_FOUND: Status = Status(404, "Not Found");
    pub const METHOD_NOT_ALLOWED: Status = Status(405, "Method Not Allowed");
    pub const REQUEST_TIMEOUT: Status = Status(408, "Request Timeout");
    pub const CONTENT_TOO_LARGE: Status = Status(413, "Content Too Large");
    pub const EXPECTATION_FAILED: Status = Status(417, "Expectation Failed");
    pub const HEADERS_TOO_LARGE: Status = Status(431, "Request Header Fields Too Large");
    pub const NOT_IMPLEMENTED: Status = Status(501, "Not Implemented");
    pub const SERVICE_UNAVAILABLE: Status = Status(503, "Service Unavailable");
    pub const VERSION_NOT_SUPPORTED: Status = Status(505, "HTTP Version Not Supported");
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.0, self.1)
    }
}

/// Why a request was refused: the status to answer with and a sentence for
/// the response body, so a client learns what was wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reject {
    pub status: Status,
    pub reason: &'static str,
}

const fn reject(status: Status, reason: &'static str) -> Reject {
    Reject { status, reason }
}

/// How reading a request head ended, when it did not yield a head.
#[derive(Debug)]
pub enum HeadError {
    /// The peer closed the connection before the first byte of a request:
    /// the normal end of a keep-alive connection.
    Closed,
    /// The peer closed the connection part way through a head.
    Truncated,
    /// The head did not end within the size limit.
    TooLarge,
    /// A read failed: a timeout (`WouldBlock` or `TimedOut`) or a socket
    /// error. `partial` says whether part of a head had arrived.
    Io { error: io::Error, partial: bool },
    /// The caller's `before_refill` failed, and no more was read.
    Aborted,
}

/// Reads one request head (request line, header lines, blank line) into
/// `head`, at most `max` bytes of it.
///
/// `before_refill` runs before every read from the socket after the first
/// byte of the head arrived: the caller arms the request's deadline there,
/// so that a head trickled in byte by byte still ends in time; if it
/// fails, so does the read ([`HeadError::Aborted`]). Empty lines before a
/// request line are skipped (RFC 9112 §2.2), and count against the limit.
///
/// A line ends at its LF. Whether it ended in CRLF, as it must, is for
/// [`parse`] to judge.
pub fn read_head<R: BufRead>(
    reader: &mut R,
    head: &mut Vec<u8>,
    max: usize,
    mut before_refill: impl FnMut(&mut R) -> io::Result<()>,
) -> Result<(), HeadError> {
    let mut seen = 0usize;
    // Where the line being read begins in `head`: a line can arrive in
    // pieces, over several reads.
    let mut line_start = head.len();
    loop {
        if seen > 0 {
            before_refill(reader).map_err(|_| HeadError::Aborted)?;
        }
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => {
                return Err(HeadError::Io {
                    error,
                    partial: seen > 0,
                });
            }
        };
        if available.is_empty() {
            return Err(if seen == 0 {
                HeadError::Closed
            } else {
                HeadError::Truncated
            });
        }
        let (take, line_ended) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        seen += take;
        if seen > max {
            return Err(HeadError::TooLarge);
        }
        head.extend_from_slice(&available[..take]);
        reader.consume(take);
        if line_ended {
            let line = &head[line_start..];
            if line == b"\r\n" || line == b"\n" {
                if line_start == 0 {
                    head.clear(); // an empty line before the request line
                } else {
                    return Ok(());
                }
            }
            line_start = head.len();
        }
    }
}

/// What the server uses of a request head.
#[derive(Debug)]
pub struct Request<'h> {
    pub method: &'h [u8],
    /// The request target's path, without its query.
    pub path: &'h [u8],
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor: u8,
    pub content_length: u64,
    /// Whether the connection stays open after the response.
    pub keep_alive: bool,
    /// `Expect: 100-continue`: the client waits for a `100 Continue` before
    /// it sends the body.
    pub expect_continue: bool,
}

/// Parses a head read by [`read_head`].
///
/// Every line of the head must end in CRLF; one that ends in a bare LF is
/// refused (400). RFC 9112 (section 2.2) lets a recipient take a bare LF
/// for a line's end, but a proxy in front of the server may not: it would
/// read `X-A: b<LF>Content-Length: 5` as one header where this server would
/// read two, and the two would disagree on where the request ends, the
/// opening for request smuggling. Empty lines before the request line are
/// skipped in either form ([`read_head`]): they carry nothing to disagree
/// on.
pub fn parse(head: &[u8]) -> Result<Request<'_>, Reject> {
    const BARE_LF: Reject = reject(
        Status::BAD_REQUEST,
        "a line of the request head ends in a bare LF: lines end in CRLF",
    );
    let mut lines = head
        .split_inclusive(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r\n").ok_or(BARE_LF));
    let request_line = lines.next().transpose()?.unwrap_or_default();
    let (method, target, minor) = parse_request_line(request_line)?;
    let path = match target.iter().position(|&b| b == b'?') {
        Some(i) => &target[..i],
        None => target,
    };

    let mut content_length: Option<u64> = None;
    let mut close = false;
    let mut keep_alive_token = false;
    let mut expect_continue = false;
    let mut hosts = 0;
    for line in lines {
        let line = line?;
        if line.is_empty() {
            break; // the blank line that ends the head
        }
        if line[0] == b' ' || line[0] == b'\t' {
            return Err(reject(
                Status::BAD_REQUEST,
                "folded header lines are not accepted",
            ));
        }
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or(reject(Status::BAD_REQUEST, "a header line has no colon"))?;
        let name = &line[..colon];
        if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
            return Err(reject(Status::BAD_REQUEST, "malformed header name"));
        }
        let value = line[colon + 1..].trim_ascii();
        if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            return Err(reject(
                Status::BAD_REQUEST,
                "control character in a header value",
            ));
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let length = parse_decimal(value).ok_or(reject(
                Status::BAD_REQUEST,
                "Content-Length is not a decimal number",
            ))?;
            if content_length.is_some_and(|seen| seen != length) {
                return Err(reject(
                    Status::BAD_REQUEST,
                    "conflicting Content-Length headers",
                ));
            }
            content_length = Some(length);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            // Bodies are framed by Content-Length only; a chunked body could
            // not be told apart from the next request, so refuse it whole.
            return Err(reject(
                Status::NOT_IMPLEMENTED,
                "Transfer-Encoding is not supported: send Content-Length",
            ));
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive_token |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case(b"expect") {
            if !value.eq_ignore_ascii_case(b"100-continue") {
                return Err(reject(
                    Status::EXPECTATION_FAILED,
                    "only Expect: 100-continue is understood",
                ));
            }
            expect_continue = true;
        } else if name.eq_ignore_ascii_case(b"host") {
            hosts += 1;
        }
    }
    if minor == 1 && hosts != 1 {
        return Err(reject(
            Status::BAD_REQUEST,
            "an HTTP/1.1 request needs exactly one Host header",
        ));
    }
    let keep_alive = !close && (minor == 1 || keep_alive_token);
    Ok(Request {
        method,
        path,
        minor,
        content_length: content_length.unwrap_or(0),
        keep_alive,
        // An HTTP/1.0 client cannot know 100 Continue: the expectation is
        // ignored there (RFC 9110, section 10.1.1).
        expect_continue: expect_continue && minor == 1 && content_length.unwrap_or(0) > 0,
    })
}

/// `METHOD SP request-target SP HTTP-version`, single spaces, nothing else.
fn parse_request_line(line: &[u8]) -> Result<(&[u8], &[u8], u8), Reject> {
    const MALFORMED: Reject = reject(
        Status::BAD_REQUEST,
        "malformed request line: expected METHOD /path HTTP/1.1",
    );
    let mut parts = line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(MALFORMED);
    };
    if method.is_empty() || !method.iter().all(|&b| is_tchar(b)) {
        return Err(MALFORMED);
    }
    if target.first() != Some(&b'/') || target.iter().any(|&b| b <= b' ' || b == 0x7f) {
        return Err(reject(
            Status::BAD_REQUEST,
            "the request target must be an absolute path such as /json",
        ));
    }
    match version {
        b"HTTP/1.1" => Ok((method, target, 1)),
        b"HTTP/1.0" => Ok((method, target, 0)),
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            Err(reject(
                Status::VERSION_NOT_SUPPORTED,
                "only HTTP/1.0 and HTTP/1.1 are served",
            ))
        }
        _ => Err(MALFORMED),
    }
}

/// A token character (RFC 9110 §5.6.2), as in methods and header names.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A non-empty run of ASCII digits that fits a `u64`.
fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

/// Writes a response head. `minor` is the request's HTTP version: an
/// HTTP/1.0 client that asked to keep the connection is told it is kept.
/// `extra` is more header lines, each ending in `\r\n`.
pub fn write_head(
    out: &mut impl Write,
    status: Status,
    content_type: &str,
    content_length: usize,
    keep_alive: bool,
    minor: u8,
    extra: &str,
) -> io::Result<()> {
    let connection = match (keep_alive, minor) {
        (false, _) => "Connection: close\r\n",
        (true, 0) => "Connection: keep-alive\r\n",
        (true, _) => "",
    };
    write!(
        out,
        "HTTP/1.1 {status}\r\nServer: stashpool-example\r\nContent-Type: {content_type}\r\n\
         Content-Length: {content_length}\r\n{connection}{extra}\r\n"
    )
}

/// An error response: the reason as a one-line text body, and the
/// connection closed after it.
pub fn write_reject(out: &mut impl Write, reject: Reject, extra: &str) -> io::Result<()> {
    let Reject { status, reason } = reject;
    // "400 Bad Request: <reason>\n"; codes are three digits.
    let length = 3 + 1 + status.1.len() + 2 + reason.len() + 1;
    write_head(
        out,
        status,
        "text/plain; charset=utf-8",
        length,
        false,
        1,
        extra,
    )?;
    writeln!(out, "{status}: {reason}")?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    /// `read_head` over `bytes` delivered `chunk` bytes per read.
    fn head_in_chunks(bytes: &[u8], chunk: usize) -> Result<Vec<u8>, HeadError> {
        let mut reader = BufReader::with_capacity(chunk, bytes);
        let mut head = Vec::new();
        read_head(&mut reader, &mut head, 1024, |_| Ok(())).map(|()| head)
    }

    #[test]
    fn a_head_read_in_pieces_ends_only_at_its_blank_line() {
        let request = b"GET / HTTP/1.1\r\nHost: t\r\nX-A: b\r\n\r\nGET /next";
        let head_len = request.len() - b"GET /next".len();
        // Every split, lines cut between their `\r` and `\n` included.
        for chunk in 1..=request.len() {
            let head = head_in_chunks(request, chunk)
                .unwrap_or_else(|error| panic!("chunk {chunk}: {error:?}"));
            assert_eq!(head, &request[..head_len], "chunk {chunk}");
        }
    }

    #[test]
    fn blank_lines_before_the_request_line_are_skipped_in_pieces_too() {
        let request = b"\r\n\r\nGET / HTTP/1.1\r\n\r\n";
        for chunk in 1..=request.len() {
            let head = head_in_chunks(request, chunk).unwrap();
            assert_eq!(head, b"GET / HTTP/1.1\r\n\r\n", "chunk {chunk}");
        }
    }

    #[test]
    fn a_line_that_ends_in_a_bare_lf_is_refused() {
        for head in [
            &b"GET / HTTP/1.1\nHost: t\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost: t\n\r\n",
            b"GET / HTTP/1.1\r\nHost: t\r\n\n",
            // One header to a reader of bare LFs, two to this server.
            b"POST / HTTP/1.1\r\nHost: t\r\nX-A: b\nContent-Length: 5\r\n\r\n",
        ] {
            let head = head_in_chunks(head, 7).expect("a head ends at its empty line");
            let refused = parse(&head).expect_err("a bare LF");
            assert_eq!(refused.status, Status::BAD_REQUEST);
            assert!(refused.reason.contains("bare LF"), "{refused:?}");
        }
        // Empty lines before the request line carry nothing: skipped, bare
        // or not.
        let head = head_in_chunks(b"\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n", 7).unwrap();
        assert_eq!(parse(&head).unwrap().path, b"/");
    }

    #[test]
    fn a_head_past_the_limit_is_too_large_however_it_arrives() {
        let request = format!("GET / HTTP/1.1\r\n{}\r\n", "X-A: b\r\n".repeat(200));
        for chunk in [1, 7, 512, 4096] {
            assert!(
                matches!(
                    head_in_chunks(request.as_bytes(), chunk),
                    Err(HeadError::TooLarge)
                ),
                "chunk {chunk}"
            );
        }
    }
}

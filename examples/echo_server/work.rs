//! The workload of the `echo_server` example, which `benches/pays.rs` runs
//! too: a tokio line-echo server over loopback, driven by clients in the
//! same process, each connection reading with `read_buf` into a buffer
//! from `buffer()` and writing back what it read.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::BufMut;
use stashpool::bytes::BytePool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The room a read buffer starts with, as tokio's own examples read.
pub const CAPACITY: usize = 4096;

/// The pooled read buffers: a plain `static`, whose guards are `'static`
/// and `Send`, so they can be held across an `.await` in a spawned task.
pub static BUFFERS: BytePool = BytePool::new(CAPACITY);

/// A buffer to read into, and what it reads.
pub trait Buffer: BufMut + AsRef<[u8]> + Send {}

impl<B: BufMut + AsRef<[u8]> + Send> Buffer for B {}

/// A pooled buffer, back in `BUFFERS` when dropped.
pub fn pooled() -> impl Buffer {
    BUFFERS.get()
}

/// A vector per read, freed when dropped.
pub fn plain() -> impl Buffer {
    Vec::with_capacity(CAPACITY)
}

/// What a run did.
#[derive(Debug)]
pub struct Report {
    /// From the first client's first line to the last echo.
    pub elapsed: Duration,
    /// Lines echoed, all connections together.
    pub lines: u64,
    pub bytes: u64,
}

/// Serves `connections` clients that each send `lines` lines and read each
/// echo before the next, the server reading into buffers from `buffer`.
pub async fn run<B: Buffer + 'static>(
    buffer: fn() -> B,
    connections: usize,
    lines: usize,
) -> io::Result<Report> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            // Each line is a write of its own, as a request's reply is.
            stream.set_nodelay(true)?;
            tokio::spawn(serve(stream, buffer));
        }
        io::Result::Ok(())
    });

    let start = Instant::now();
    let clients: Vec<_> = (0..connections)
        .map(|id| tokio::spawn(client(addr, id, lines)))
        .collect();
    let mut bytes = 0;
    for client in clients {
        bytes += client.await.expect("a client panicked")?;
    }
    let elapsed = start.elapsed();
    server.abort();
    Ok(Report {
        elapsed,
        lines: (connections * lines) as u64,
        bytes,
    })
}

/// Echoes what `stream` sends until it closes: a buffer per read.
async fn serve<B: Buffer>(mut stream: TcpStream, buffer: fn() -> B) -> io::Result<()> {
    loop {
        let mut buf = buffer();
        if stream.read_buf(&mut buf).await? == 0 {
            return Ok(());
        }
        stream.write_all(buf.as_ref()).await?;
    }
}

/// Sends `lines` lines, reading each one's echo before the next, and
/// checks every echo; the bytes echoed.
async fn client(addr: SocketAddr, id: usize, lines: usize) -> io::Result<u64> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let mut echo = Vec::with_capacity(CAPACITY);
    let mut bytes = 0;
    for n in 0..lines {
        let line = format!("connection {id} line {n}: {}\n", "x".repeat(n % 64));
        stream.write_all(line.as_bytes()).await?;
        echo.clear();
        while echo.len() < line.len() {
            if stream.read_buf(&mut echo).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        assert_eq!(echo, line.as_bytes(), "the server echoes what it read");
        bytes += line.len() as u64;
    }
    Ok(bytes)
}

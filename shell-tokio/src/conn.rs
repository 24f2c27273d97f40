//! Connections: the accept loop and what each connection may cost, as kube-apiserver's Go
//! server bounds them (`secure_serving.go`): the TLS handshake and a request's head within the
//! header timeout (32 s), a connection with no request in flight closed after the idle timeout
//! (90 s), and an accept that fails (out of file descriptors) retried after a back-off
//! instead of ending the server.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// How long a connection may take over its TLS handshake and over a request's head, and how
/// long it may stay open with no request in flight.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub header: Duration,
    pub idle: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { header: Duration::from_secs(32), idle: Duration::from_secs(90) }
    }
}

/// Accepts connections for ever, handing each to `serve`. A failed accept (EMFILE, ENFILE,
/// ENOMEM, ...) is retried after 5 ms, doubling up to 1 s while it keeps failing, as Go's
/// `http.Server.Serve` does.
pub async fn accept_loop<F, Fut>(listener: TcpListener, serve: F)
where
    F: Fn(TcpStream, std::net::SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut delay = Duration::ZERO;
    loop {
        match listener.accept().await {
            Ok((tcp, addr)) => {
                delay = Duration::ZERO;
                tokio::spawn(serve(tcp, addr));
            }
            Err(e) => {
                delay = if delay.is_zero() { Duration::from_millis(5) } else { (delay * 2).min(Duration::from_secs(1)) };
                tracing::warn!("accept error: {e}; retrying in {delay:?}");
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// Raises the soft limit of open files to the hard limit, as Go's runtime does at start, so
/// that the server can hold as many connections as the system lets it.
pub fn raise_open_files_limit() {
    // SAFETY: getrlimit and setrlimit only read and write the struct passed to them.
    unsafe {
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                tracing::warn!("could not raise the open files limit: {}", io::Error::last_os_error());
            }
        }
    }
}

/// What a connection's watchdog reads: bytes received, requests started, requests whose
/// response is not finished, and the bytes received when a request last started or ended
/// (bytes beyond those, with no request in flight, are the head of the next one).
#[derive(Default)]
pub struct Activity {
    bytes_read: AtomicU64,
    requests: AtomicU64,
    in_flight: AtomicUsize,
    settled: AtomicU64,
}

impl Activity {
    /// A request started; the guard marks its response finished when dropped (with its body).
    pub fn start(self: &Arc<Self>) -> InFlight {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.settle();
        InFlight(self.clone())
    }

    /// Marks what was read so far as not part of a request's head (the TLS handshake's, or a
    /// finished request's).
    pub fn settle(&self) {
        self.settled.store(self.bytes_read.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

/// A request of a connection whose response is not finished.
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.settle();
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A stream that counts the bytes read from it.
pub struct Counted<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Counted<S> {
    pub fn new(inner: S, activity: Arc<Activity>) -> Self {
        Counted { inner, activity }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.activity.bytes_read.fetch_add(n as u64, Ordering::Relaxed);
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Why a connection's watchdog ends it.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No request in flight for the idle timeout: closed gracefully (HTTP/2: GOAWAY).
    Idle,
    /// An HTTP/1 request's head has been arriving for longer than the header timeout.
    SlowHeader,
}

/// Watches a connection's [`Activity`] and returns when it must end. HTTP/2 connections
/// are only checked for idleness: their frames (pings, settings) are not requests' heads.
pub async fn watchdog(activity: Arc<Activity>, limits: Limits, http2: bool) -> Verdict {
    let tick = (limits.header.min(limits.idle) / 8).max(Duration::from_millis(10));
    let mut requests = activity.requests.load(Ordering::Relaxed);
    let (mut idle_since, mut head_since) = (tokio::time::Instant::now(), None::<tokio::time::Instant>);
    loop {
        tokio::time::sleep(tick).await;
        let now = tokio::time::Instant::now();
        let started = activity.requests.load(Ordering::Relaxed);
        if activity.in_flight.load(Ordering::Relaxed) > 0 || started != requests {
            requests = started;
            idle_since = now;
            head_since = None;
            continue;
        }
        if !http2 && activity.bytes_read.load(Ordering::Relaxed) > activity.settled.load(Ordering::Relaxed) {
            // Bytes came in, but no request yet: a head is arriving.
            if now.duration_since(*head_since.get_or_insert(now)) >= limits.header {
                return Verdict::SlowHeader;
            }
            continue;
        }
        if now.duration_since(idle_since) >= limits.idle {
            return Verdict::Idle;
        }
    }
}

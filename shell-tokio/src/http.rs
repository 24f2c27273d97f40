//! HTTP serving: TLS connections, HTTP/1.1 and HTTP/2, each request driven through its core
//! request machine, with bodies and watch streams sent as they are produced.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kapi_core::auth::Peer;
use kapi_core::pipeline::{Effect, Event, Head, Health, Request, RequestMachine, Server};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;

use crate::caches::{Caches, Chunk};
use crate::clock::{instant_of, now, seed};
use crate::store::Store;

type Body = BoxBody<Bytes, Infallible>;

/// What every request needs from the process.
pub struct State {
    pub server: Arc<Server>,
    pub store: Store,
    pub caches: Caches,
    pub bootstrapped: AtomicBool,
    pub shutting_down: AtomicBool,
}

impl State {
    async fn health(&self) -> Health {
        Health {
            storage: self.store.health().await,
            caches_ready: self.caches.ready(),
            bootstrapped: self.bootstrapped.load(Ordering::Relaxed),
            shutting_down: self.shutting_down.load(Ordering::Relaxed),
        }
    }
}

/// Accepts connections until the listener fails.
pub async fn serve(listener: TcpListener, tls: TlsAcceptor, state: Arc<State>) -> anyhow::Result<()> {
    loop {
        let (tcp, addr) = listener.accept().await?;
        let (tls, state) = (tls.clone(), state.clone());
        tokio::spawn(async move {
            let _ = tcp.set_nodelay(true);
            let Ok(stream) = tls.accept(tcp).await else { return };
            let certificate = stream.get_ref().1.peer_certificates().and_then(|c| c.first());
            let peer = Peer::new(certificate.map(|c| c.as_ref()), addr.to_string());
            let service = service_fn(move |req| handle(state.clone(), peer.clone(), req));
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new()).serve_connection_with_upgrades(TokioIo::new(stream), service).await;
        });
    }
}

/// Reads a body up to `limit` bytes; `true` when it was longer. The excess is read and
/// dropped (up to a bound) so the client, still sending, gets the 413 rather than a reset.
async fn read_body(mut body: Incoming, limit: usize) -> (Bytes, bool) {
    let mut buf = Vec::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { break };
        if let Ok(data) = frame.into_data() {
            seen += data.len();
            if seen > limit {
                buf = Vec::new();
                if seen > limit.saturating_mul(8) {
                    break;
                }
                continue;
            }
            buf.extend_from_slice(&data);
        }
    }
    (Bytes::from(buf), seen > limit)
}

async fn handle(state: Arc<State>, peer: Peer, req: hyper::Request<Incoming>) -> Result<hyper::Response<Body>, Infallible> {
    let (parts, body) = req.into_parts();
    let (body, too_large) = read_body(body, state.server.max_body_bytes).await;
    let request = Request {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().unwrap_or("").to_string(),
        headers: parts.headers.iter().map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect(),
        body,
        body_too_large: too_large,
        peer,
    };
    Ok(call(state, request).await)
}

/// Serves one request: runs its request machine until it answers. An answer whose body is
/// complete by then (most are: one object, one status) goes out whole; a longer one (a list)
/// streams from a task that goes on running the machine, a chunk at a time.
pub async fn call(state: Arc<State>, request: Request) -> hyper::Response<Body> {
    let mut m = RequestMachine::new(state.server.clone(), request, now(), seed());
    loop {
        match m.poll(now()) {
            Some(Effect::Kv(req)) => {
                let r = state.store.call(req).await;
                m.handle(now(), Event::Kv(r));
            }
            Some(Effect::Cache { resource, request }) => {
                let r = state.caches.read(&resource, request).await;
                m.handle(now(), Event::Cache(r));
            }
            Some(Effect::Health) => {
                let health = state.health().await;
                m.handle(now(), Event::Health(health));
            }
            Some(Effect::Respond(head)) => return respond(m, head),
            Some(Effect::Watch { resource, params, head }) => {
                return match state.caches.watch(&resource, params) {
                    Ok(rx) => response(head, streaming(rx)),
                    Err(e) => {
                        let body = Bytes::from(serde_json::to_vec(&e.to_status()).expect("JSON trees serialize"));
                        response(Head::new(e.code, "application/json"), Full::new(body).boxed())
                    }
                };
            }
            // A machine that ends without answering (it cannot: it answers 504 at its deadline).
            Some(Effect::Body(_) | Effect::End) => return internal_error(),
            None => match m.poll_timeout() {
                Some(t) => tokio::time::sleep_until(instant_of(t)).await,
                None => return internal_error(),
            },
        }
    }
}

fn internal_error() -> hyper::Response<Body> {
    response(Head::new(500, "text/plain"), Full::new(Bytes::from_static(b"internal error")).boxed())
}

fn response(head: Head, body: Body) -> hyper::Response<Body> {
    let mut b = hyper::Response::builder().status(head.status);
    for (k, v) in head.headers {
        b = b.header(k, v);
    }
    b.body(body).expect("heads from the core are valid")
}

/// A response body of the chunks a request machine or a watch cache produces.
fn streaming(chunks: impl futures_util::Stream<Item = Chunk> + Send + Sync + 'static) -> Body {
    BodyExt::boxed(StreamBody::new(chunks.flat_map(futures_util::stream::iter).map(|b| Ok::<_, Infallible>(Frame::data(b)))))
}

/// The response under `head`: whole if the machine's body is one chunk, else streamed as the
/// machine produces it.
fn respond(mut m: RequestMachine, head: Head) -> hyper::Response<Body> {
    let first = match m.poll(now()) {
        Some(Effect::Body(b)) => b,
        _ => return response(head, Full::new(Bytes::new()).boxed()),
    };
    match m.poll(now()) {
        Some(Effect::Body(second)) => {
            let (tx, rx) = mpsc::channel(4);
            tokio::spawn(stream_rest(m, [first, second], tx));
            response(head, streaming(ReceiverStream::new(rx)))
        }
        _ => response(head, Full::new(first).boxed()),
    }
}

/// Sends `ready`, then the rest of the machine's body, a chunk at a time as the client reads.
async fn stream_rest(mut m: RequestMachine, ready: [Bytes; 2], tx: mpsc::Sender<Chunk>) {
    for b in ready {
        if tx.send(Chunk::One(b)).await.is_err() {
            return;
        }
    }
    while let Some(Effect::Body(b)) = m.poll(now()) {
        if tx.send(Chunk::One(b)).await.is_err() {
            return;
        }
    }
}

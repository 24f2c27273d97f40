//! HTTP serving: TLS connections, HTTP/1.1 and HTTP/2, each request driven through its core
//! request machine, with bodies and watch streams sent as they are produced.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use arc_swap::ArcSwap;
use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kapi_core::auth::Peer;
use kapi_core::pipeline::{Effect, Event, Head, Health, Request, RequestMachine, Served, Server};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;

use crate::caches::Caches;
use crate::clock::{instant_of, now, seed};
use crate::conn::{self, Activity, Counted, Limits, Verdict};
use crate::proxy::Upstream;
use crate::store::Store;
use crate::tls::ClientCas;

/// A response body. Its error (only a relayed body has one: the extension server's answer
/// broke off, or outlived the request's deadline) makes hyper abort the response rather than
/// end it as if it were whole.
type Body = BoxBody<Bytes, BoxError>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A body sent whole.
fn whole(bytes: Bytes) -> Body {
    Full::new(bytes).map_err(|never| match never {}).boxed()
}

/// An extension server's answer, relayed until the request's deadline (if it has one); the
/// request's machine, and so its place in flight, is held until the answer ends (when its
/// last audit line is written).
struct Relayed {
    upstream: Incoming,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    _machine: std::sync::Mutex<Answer>,
}

impl hyper::body::Body for Relayed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(deadline) = &mut self.deadline
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Some(Err("the request's deadline passed while the extension server's answer was relayed".into())));
        }
        Pin::new(&mut self.upstream).poll_frame(cx).map_err(Into::into)
    }
}

/// A response body whose request is in flight until the body is sent or dropped. Its size,
/// where known, is the body's (so a whole body goes with its `Content-Length`).
struct InFlightBody {
    body: Body,
    _in_flight: conn::InFlight,
}

impl hyper::body::Body for InFlightBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// What every request needs from the process.
pub struct State {
    pub server: Arc<Server>,
    /// What the server serves now; each request takes the current one when it starts.
    pub served: ArcSwap<Served>,
    pub store: Store,
    pub caches: Caches,
    pub bootstrapped: AtomicBool,
    pub shutting_down: AtomicBool,
    /// Sends requests on to extension API servers.
    pub proxy: crate::proxy::ProxyClient,
    /// Calls webhooks (CRDs' conversion webhooks) for requests.
    pub webhooks: crate::webhook::WebhookClient,
    /// Where the requests' audit events go.
    pub audit_log: crate::audit_log::AuditLog,
}

impl State {
    async fn health(&self) -> Health {
        Health {
            storage: self.store.health().await,
            // Writes are refused until the admission webhooks' configurations are read.
            caches_ready: self.caches.ready() && self.served.load().admission_synced(),
            bootstrapped: self.bootstrapped.load(Ordering::Relaxed),
            shutting_down: self.shutting_down.load(Ordering::Relaxed),
        }
    }
}

/// Serves connections for ever: TLS, then HTTP/1.1 or HTTP/2 by ALPN, each within `limits`.
pub async fn serve(listener: TcpListener, tls: TlsAcceptor, cas: Arc<ClientCas>, state: Arc<State>, limits: Limits) {
    conn::accept_loop(listener, move |tcp, addr| {
        let (tls, cas, state) = (tls.clone(), cas.clone(), state.clone());
        async move {
            let _ = tcp.set_nodelay(true);
            let activity = Arc::new(Activity::default());
            let handshake = tls.accept(Counted::new(tcp, activity.clone()));
            let Ok(Ok(stream)) = tokio::time::timeout(limits.header, handshake).await else { return };
            activity.settle();
            let (_, session) = stream.get_ref();
            let http2 = session.alpn_protocol() == Some(b"h2");
            let chain = session.peer_certificates().unwrap_or_default();
            let peer = Peer::new(chain.first().map(|c| c.as_ref()), cas.verified_by(chain), addr.to_string());
            let requests = activity.clone();
            let service = service_fn(move |req| {
                let in_flight = requests.start();
                let (state, peer) = (state.clone(), peer.clone());
                async move {
                    let response = handle(state, peer, req).await;
                    Ok::<_, Infallible>(response.map(|body| InFlightBody { body, _in_flight: in_flight }))
                }
            });
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            builder.http1().header_read_timeout(None);
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => return,
                verdict = conn::watchdog(activity, limits, http2) => if verdict == Verdict::SlowHeader { return },
            }
            // Idle: HTTP/2 says GOAWAY, HTTP/1 closes; either way the connection ends.
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(limits.header, connection).await;
        }
    })
    .await
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

async fn handle(state: Arc<State>, peer: Peer, req: hyper::Request<Incoming>) -> hyper::Response<Body> {
    let (mut parts, body) = req.into_parts();
    let switch = parts.extensions.remove::<OnUpgrade>();
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
    call(state, request, switch).await
}

/// Waits, as kube's webhook and policy admission waits for its informers (`WaitForReady`:
/// every 100 ms, up to 10 s), until what admission is configured by (webhook configurations,
/// policies, bindings) has been read; a write that comes sooner would be refused (`not yet
/// ready to handle request`) rather than admitted without them.
async fn admission_read(state: &State) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !state.served.load().admission_synced() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Runs `request` as a request of its own, its answer dropped (the server's own writes).
fn spawn_call(state: Arc<State>, request: Request) {
    tokio::spawn(async move {
        call(state, request, None).await;
    });
}

/// Serves one request: runs its request machine until it answers. An answer whose body is
/// complete by then (most are: one object, one status) goes out whole; a longer one (a list)
/// streams from a task that goes on running the machine, a chunk at a time.
///
/// A request with a large body (a big object to decode, compare and validate) runs its machine
/// off the threads that serve connections (`block_in_place`), so that it cannot hold up other
/// requests; the request's deadline bounds every wait for the store or a cache, after which
/// the machine answers 504.
///
/// `switch` is the client's connection once it has switched protocols, for a request that
/// asks to (it is joined to an extension server's after its 101).
pub async fn call(state: Arc<State>, request: Request, switch: Option<OnUpgrade>) -> hyper::Response<Body> {
    let heavy = request.body.len() >= HEAVY_BODY_BYTES;
    if request.method != "GET" {
        admission_read(&state).await;
    }
    // Boxed, as the stores' large futures are: the request's future stays small to move. Held
    // as an Answer, whose last audit line is written however the request ends.
    let mut m =
        Answer { m: Box::new(RequestMachine::new(state.server.clone(), state.served.load_full(), request, now(), seed())), log: state.audit_log.clone() };
    let run = |m: &mut RequestMachine, event: Option<Event>| {
        let go = || {
            if let Some(e) = event {
                m.handle(now(), e);
            }
            m.poll(now())
        };
        if heavy { tokio::task::block_in_place(go) } else { go() }
    };
    let mut event = None;
    // What follows an extension server's answer's head, once that is in.
    let mut upstream = None;
    loop {
        match run(&mut m.m, event.take()) {
            Some(Effect::Kv(req)) => event = within(m.m.deadline(), state.store.call(req)).await.map(Event::Kv),
            Some(Effect::Cache { resource, request }) => event = within(m.m.deadline(), state.caches.read(&resource, request)).await.map(Event::Cache),
            Some(Effect::Health) => event = within(m.m.deadline(), state.health()).await.map(Event::Health),
            Some(Effect::Probe(probes)) => event = within(m.m.deadline(), crate::probe::probe_all(probes)).await.map(Event::Probed),
            Some(Effect::Proxy(req)) => {
                event = match within(m.m.deadline(), state.proxy.send(*req)).await {
                    Some(Ok((head, rest))) => {
                        upstream = Some(rest);
                        Some(Event::Proxied(Ok(head)))
                    }
                    Some(Err(e)) => Some(Event::Proxied(Err(e))),
                    None => None,
                }
            }
            Some(Effect::Call(call)) => event = within(m.m.deadline(), state.webhooks.call(*call)).await.map(Event::Called),
            Some(Effect::Calls(calls)) => {
                let all = futures_util::future::join_all(calls.into_iter().map(|c| state.webhooks.call(c)));
                event = within(m.m.deadline(), all).await.map(Event::CalledAll);
            }
            Some(Effect::Loopback(request)) => spawn_call(state.clone(), *request),
            Some(Effect::Audit(line)) => state.audit_log.write(line),
            Some(Effect::Respond(head)) => {
                return match upstream.take() {
                    Some(Upstream { switched: Some(server), .. }) if head.status == 101 => match switch {
                        Some(client) => join(m, head, client, server),
                        None => internal_error(),
                    },
                    Some(upstream) => relay(m, head, upstream.body),
                    None => respond(m, head),
                };
            }
            Some(Effect::Watch { resource, params, head }) => {
                // The watch's last audit line is written when its stream ends.
                let ended = WatchEnd { recorder: m.m.take_audit(), log: state.audit_log.clone() };
                return match state.caches.watch(&resource, params) {
                    Ok(rx) => response(
                        head,
                        streaming(rx.map(move |frame| {
                            let _held = &ended;
                            frame
                        })),
                    ),
                    Err(e) => {
                        let body = Bytes::from(serde_json::to_vec(&e.to_status()).expect("JSON trees serialize"));
                        response(Head::new(e.code, "application/json"), whole(body))
                    }
                };
            }
            // A machine that ends without answering (it cannot: it answers 504 at its deadline).
            Some(Effect::Body(_) | Effect::End | Effect::Relay) => return internal_error(),
            None => match m.m.poll_timeout() {
                Some(t) => tokio::time::sleep_until(instant_of(t)).await,
                None => return internal_error(),
            },
        }
    }
}

/// Bodies from this size on are decoded and written off the connection-serving threads.
const HEAVY_BODY_BYTES: usize = 64 * 1024;

/// `f`'s output, or `None` if the deadline comes first.
async fn within<T>(deadline: Option<jiff::Timestamp>, f: impl std::future::Future<Output = T>) -> Option<T> {
    match deadline {
        Some(t) => tokio::time::timeout_at(instant_of(t), f).await.ok(),
        None => Some(f.await),
    }
}

fn internal_error() -> hyper::Response<Body> {
    response(Head::new(500, "text/plain"), whole(Bytes::from_static(b"internal error")))
}

fn response(head: Head, body: Body) -> hyper::Response<Body> {
    let mut b = hyper::Response::builder().status(head.status);
    for (k, v) in head.headers {
        b = b.header(k, v);
    }
    b.body(body).expect("heads from the core are valid")
}

/// A response body of the chunks a request machine or a watch cache produces.
fn streaming(chunks: impl futures_util::Stream<Item = Bytes> + Send + Sync + 'static) -> Body {
    BodyExt::boxed(StreamBody::new(chunks.map(|b| Ok::<_, BoxError>(Frame::data(b)))))
}

/// A machine that has answered, with the audit log the rest of its lines go to.
struct Answer {
    m: Box<RequestMachine>,
    log: crate::audit_log::AuditLog,
}

impl Drop for Answer {
    fn drop(&mut self) {
        if let Some(line) = self.m.finish_audit(now()) {
            self.log.write(line);
        }
    }
}

/// A watch's recorder, whose `ResponseComplete` line is written when the watch's stream goes.
struct WatchEnd {
    recorder: Option<Box<kapi_core::audit::Recorder>>,
    log: crate::audit_log::AuditLog,
}

impl Drop for WatchEnd {
    fn drop(&mut self) {
        if let Some(line) = self.recorder.as_mut().and_then(|r| r.complete(now())) {
            self.log.write(line);
        }
    }
}

impl Answer {
    /// The machine's next effect that is not an audit line (those are written).
    fn poll(&mut self) -> Option<Effect> {
        loop {
            match self.m.poll(now()) {
                Some(Effect::Audit(line)) => self.log.write(line),
                other => return other,
            }
        }
    }
}

/// The response under `head`: whole if the machine's body is one chunk, else streamed as the
/// machine produces it (its end polled, so that its last audit line is written).
fn respond(mut m: Answer, head: Head) -> hyper::Response<Body> {
    let first = match m.poll() {
        Some(Effect::Body(b)) => b,
        _ => return response(head, whole(Bytes::new())),
    };
    match m.poll() {
        Some(Effect::Body(second)) => {
            let (tx, rx) = mpsc::channel(4);
            tokio::spawn(stream_rest(m, [first, second], tx));
            response(head, streaming(ReceiverStream::new(rx)))
        }
        _ => response(head, whole(first)),
    }
}

/// The answer under `head` to a proxied request: the extension server's body as it comes
/// (aborted where it breaks off), the request holding its place in flight until it ends; or
/// the machine's own body in its place.
fn relay(mut m: Answer, head: Head, upstream: Incoming) -> hyper::Response<Body> {
    match m.poll() {
        Some(Effect::Relay) => {
            let deadline = m.m.relay_deadline().map(|t| Box::pin(tokio::time::sleep_until(instant_of(t))));
            response(head, Relayed { upstream, deadline, _machine: std::sync::Mutex::new(m) }.boxed())
        }
        Some(Effect::Body(b)) => response(head, whole(b)),
        _ => response(head, whole(Bytes::new())),
    }
}

/// The 101 under `head`, after which the client's connection and the extension server's are
/// joined, both ways, until either ends (or fails); the request's machine, and so its place in
/// flight, is held until then.
fn join(m: Answer, head: Head, client: OnUpgrade, server: OnUpgrade) -> hyper::Response<Body> {
    tokio::spawn(async move {
        let _machine = m;
        let (Ok(client), Ok(server)) = tokio::join!(client, server) else { return };
        let _ = tokio::io::copy_bidirectional(&mut TokioIo::new(client), &mut TokioIo::new(server)).await;
    });
    response(head, whole(Bytes::new()))
}

/// Sends `ready`, then the rest of the machine's body, a chunk at a time as the client reads.
async fn stream_rest(mut m: Answer, ready: [Bytes; 2], tx: mpsc::Sender<Bytes>) {
    for b in ready {
        if tx.send(b).await.is_err() {
            return;
        }
    }
    while let Some(Effect::Body(b)) = m.poll() {
        if tx.send(b).await.is_err() {
            return;
        }
    }
}

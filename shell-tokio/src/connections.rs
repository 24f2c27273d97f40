//! Outbound HTTPS connections kept for reuse, as kube's transports keep them: a webhook is
//! called over a connection made for an earlier call when one is idle (HTTP/2 streams share
//! one; HTTP/1.1 connections are kept 25 to a host), and a connection idle for 90 s is closed
//! (client-go's `SetTransportDefaults` and Go's `IdleConnTimeout`); an HTTP/2 connection is
//! pinged after 30 s without a frame and dropped when no answer comes within 15 s (client-go's
//! `ReadIdleTimeout` and `PingTimeout`), so a peer that went away without closing it fails one
//! call, not every call until the kernel gives up. [`Connections::unpooled`] makes a connection
//! per request instead (the proxy's: a watch through an extension server holds its stream
//! for as long as it runs, and must not queue other requests behind a server's stream limit).
//!
//! Connections are pooled per TLS identity (the name the server is verified under, the CA bundle
//! that verifies it, whether it is verified at all, the client certificate, whether HTTP/2 may be
//! offered), so a connection is never reused for a call that would not have accepted it; within
//! an identity, per address. A change of configuration makes a new identity; past
//! [`MAX_IDENTITIES`], the pool used least recently is dropped for a new one.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use kapi_core::aggregator::ProxyTarget;
use rustls::RootCertStore;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// How long connecting and the TLS handshake may take (Go's dialer and kube's transport).
const DIAL_TIMEOUT: Duration = Duration::from_secs(30);
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// client-go's transport defaults.
const MAX_IDLE_PER_HOST: usize = 25;
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
const PING_AFTER: Duration = Duration::from_secs(30);
const PING_TIMEOUT: Duration = Duration::from_secs(15);
/// Identities whose pools are kept; past them the one used least recently is dropped.
const MAX_IDENTITIES: usize = 256;

/// The pools of outbound connections, one per TLS identity.
pub struct Connections {
    /// The system's CAs, which verify a server named without a CA bundle.
    system_roots: Arc<RootCertStore>,
    pools: Mutex<Pools>,
    /// Idle connections kept to a host (none: a connection per request).
    max_idle_per_host: usize,
}

type Pool = Client<Connector, Full<Bytes>>;

/// The pools by identity, each with the turn it was last used in.
#[derive(Default)]
struct Pools {
    by_identity: BTreeMap<Identity, (Pool, u64)>,
    turn: u64,
}

impl Pools {
    /// The pool of `identity`, marked used now.
    fn used(&mut self, identity: &Identity) -> Option<Pool> {
        self.turn += 1;
        let (pool, last) = self.by_identity.get_mut(identity)?;
        *last = self.turn;
        Some(pool.clone())
    }

    /// Keeps `pool` for `identity`, dropping the pool used least recently if there are
    /// [`MAX_IDENTITIES`] already.
    fn keep(&mut self, identity: Identity, pool: Pool) {
        if self.by_identity.len() >= MAX_IDENTITIES
            && let Some(oldest) = self.by_identity.iter().min_by_key(|(_, (_, last))| *last).map(|(i, _)| i.clone())
        {
            self.by_identity.remove(&oldest);
        }
        self.by_identity.insert(identity, (pool, self.turn));
    }
}

/// What a connection was made for: a call may reuse it only if it would have made it alike.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Identity {
    server_name: String,
    ca_bundle: Option<String>,
    insecure_skip_tls_verify: bool,
    /// The client certificate's DER and its key's.
    client_certificate: Option<(Vec<u8>, Vec<u8>)>,
    http1_only: bool,
}

/// A client certificate chain and its key.
pub type ClientCertificate<'a> = (&'a [CertificateDer<'static>], &'a PrivateKeyDer<'static>);

impl Default for Connections {
    fn default() -> Self {
        Connections { system_roots: system_roots(), pools: Mutex::default(), max_idle_per_host: MAX_IDLE_PER_HOST }
    }
}

impl Connections {
    /// Connections made for one request each, never kept.
    pub fn unpooled() -> Connections {
        Connections { max_idle_per_host: 0, ..Connections::default() }
    }

    /// Sends `request` (its URI: path and query) to `target`, presenting `client` if given, over
    /// HTTP/2 or HTTP/1.1 by ALPN (only HTTP/1.1 with `http1_only`, as a request that may switch
    /// protocols needs); the answer, or the error in Go's words where kube's client would say
    /// them.
    pub async fn send(
        &self,
        target: &ProxyTarget,
        client: Option<ClientCertificate<'_>>,
        http1_only: bool,
        mut request: http::Request<Full<Bytes>>,
    ) -> Result<http::Response<Incoming>, String> {
        let pool = self.pool(target, client, http1_only)?;
        *request.uri_mut() = format!("{}{}", target.url, request.uri()).parse().map_err(|e: http::uri::InvalidUri| e.to_string())?;
        pool.request(request).await.map_err(|e| go_words(&e))
    }

    /// The pool of `target`'s identity, made on first use.
    fn pool(&self, target: &ProxyTarget, client: Option<ClientCertificate<'_>>, http1_only: bool) -> Result<Pool, String> {
        let identity = Identity {
            server_name: target.server_name.clone(),
            ca_bundle: target.ca_bundle.clone(),
            insecure_skip_tls_verify: target.insecure_skip_tls_verify,
            client_certificate: client.and_then(|(chain, key)| Some((chain.first()?.to_vec(), key.secret_der().to_vec()))),
            http1_only,
        };
        let mut pools = self.pools.lock().expect("the pools' lock is not poisoned");
        if let Some(pool) = pools.used(&identity) {
            return Ok(pool);
        }
        let mut config = tls(target, &self.system_roots, client)?;
        if http1_only {
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
        }
        let server_name = ServerName::try_from(target.server_name.clone()).map_err(|e| e.to_string())?;
        let connector = Connector { tls: tokio_rustls::TlsConnector::from(Arc::new(config)), server_name };
        let pool = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(IDLE_TIMEOUT)
            .pool_max_idle_per_host(self.max_idle_per_host)
            .http2_keep_alive_interval(PING_AFTER)
            .http2_keep_alive_timeout(PING_TIMEOUT)
            .http2_keep_alive_while_idle(true)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(connector);
        pools.keep(identity, pool.clone());
        Ok(pool)
    }
}

/// The TLS client configuration for `target`: its server checked against its CA bundle (the
/// system's roots without one), or not at all where it says so; with a client certificate
/// when one is given.
fn tls(target: &ProxyTarget, system_roots: &Arc<RootCertStore>, client: Option<ClientCertificate<'_>>) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(crate::tls::provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().map_err(|e| e.to_string())?;
    let builder = if target.insecure_skip_tls_verify {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(crate::probe::AnyCertificate(provider)))
    } else if let Some(bundle) = &target.ca_bundle {
        let mut roots = RootCertStore::empty();
        roots.add_parsable_certificates(rustls_pki_types::pem::PemObject::pem_slice_iter(bundle.as_bytes()).flatten());
        builder.with_root_certificates(roots)
    } else {
        builder.with_root_certificates(system_roots.clone())
    };
    let mut config = match client {
        Some((certs, key)) => builder.with_client_auth_cert(certs.to_vec(), key.clone_key()).map_err(|e| e.to_string())?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The system's CA roots.
fn system_roots() -> Arc<RootCertStore> {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    Arc::new(roots)
}

/// Why a call failed, as Go's client says it: the dialer's or the handshake's error as the
/// connector wrote it, else the HTTP error.
fn go_words(e: &hyper_util::client::legacy::Error) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(dial) = err.downcast_ref::<DialError>() {
            return dial.0.clone();
        }
        if let Some(http) = err.downcast_ref::<hyper::Error>() {
            return http.to_string();
        }
        source = err.source();
    }
    e.to_string()
}

/// Why a connection could not be made, in Go's words.
#[derive(Debug)]
struct DialError(String);

impl std::fmt::Display for DialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DialError {}

/// Makes the connections of one identity: TCP to the URI's address (no Nagle), then TLS under
/// the identity's server name.
#[derive(Clone)]
struct Connector {
    tls: tokio_rustls::TlsConnector,
    server_name: ServerName<'static>,
}

impl tower_service::Service<http::Uri> for Connector {
    type Response = TokioIo<TlsConnection>;
    type Error = DialError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, DialError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), DialError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let (tls, server_name) = (self.tls.clone(), self.server_name.clone());
        let authority = match uri.authority() {
            Some(a) if a.port().is_some() => a.to_string(),
            Some(a) => format!("{}:443", a.host()),
            None => String::new(),
        };
        Box::pin(async move {
            let tcp = match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(&authority)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    return Err(DialError(format!("dial tcp {authority}: connect: connection refused")));
                }
                Ok(Err(e)) => return Err(DialError(format!("dial tcp {authority}: {e}"))),
                Err(_) => return Err(DialError(format!("dial tcp {authority}: i/o timeout"))),
            };
            let _ = tcp.set_nodelay(true);
            match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, tls.connect(server_name, tcp)).await {
                Ok(Ok(s)) => Ok(TokioIo::new(TlsConnection(s))),
                Ok(Err(e)) => Err(DialError(format!("tls: {e}"))),
                Err(_) => Err(DialError("net/http: TLS handshake timeout".into())),
            }
        })
    }
}

/// A TLS connection, which tells the pool whether ALPN chose HTTP/2.
pub struct TlsConnection(TlsStream<TcpStream>);

impl Connection for TlsConnection {
    fn connected(&self) -> Connected {
        let connected = Connected::new();
        if self.0.get_ref().1.alpn_protocol() == Some(b"h2") { connected.negotiated_h2() } else { connected }
    }
}

impl AsyncRead for TlsConnection {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConnection {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body_util::BodyExt;
    use tokio::net::TcpListener;

    use super::*;

    /// An HTTPS server on loopback answering `ok` to everything, offering `alpn`; its port,
    /// the CA bundle that verifies it, and the count of connections it accepted.
    async fn server(alpn: &[&[u8]]) -> (u16, String, Arc<AtomicUsize>) {
        let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        let key = PrivateKeyDer::Pkcs8(made.signing_key.serialize_der().into());
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(crate::tls::provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![made.cert.der().clone()], key)
            .unwrap();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    let ok = hyper::service::service_fn(|_| async { Ok::<_, hyper::Error>(http::Response::new(Full::new(Bytes::from_static(b"ok")))) });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(tls), ok).await;
                });
            }
        });
        (port, made.cert.pem(), accepted)
    }

    fn target(port: u16, ca_bundle: &str) -> ProxyTarget {
        ProxyTarget {
            url: format!("https://127.0.0.1:{port}"),
            server_name: "127.0.0.1".into(),
            ca_bundle: Some(ca_bundle.into()),
            insecure_skip_tls_verify: false,
        }
    }

    async fn get(connections: &Connections, target: &ProxyTarget, http1_only: bool) -> Result<String, String> {
        let request = http::Request::get("/hook").body(Full::new(Bytes::new())).unwrap();
        let response = connections.send(target, None, http1_only, request).await?;
        Ok(String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap())
    }

    #[tokio::test]
    async fn calls_in_turn_share_one_connection_over_http2_and_http1() {
        for alpn in [&[&b"h2"[..], b"http/1.1"][..], &[b"http/1.1"]] {
            let (port, ca, accepted) = server(alpn).await;
            let connections = Connections::default();
            for _ in 0..5 {
                assert_eq!(get(&connections, &target(port, &ca), false).await.unwrap(), "ok");
            }
            assert_eq!(accepted.load(Ordering::SeqCst), 1, "{alpn:?}");
        }
    }

    #[tokio::test]
    async fn unpooled_calls_each_make_a_connection() {
        let (port, ca, accepted) = server(&[b"h2", b"http/1.1"]).await;
        let connections = Connections::unpooled();
        for _ in 0..3 {
            assert_eq!(get(&connections, &target(port, &ca), false).await.unwrap(), "ok");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_call_another_identity_would_make_gets_its_own_connection() {
        let (port, ca, accepted) = server(&[b"h2", b"http/1.1"]).await;
        let connections = Connections::default();
        get(&connections, &target(port, &ca), false).await.unwrap();
        // Asking for HTTP/1.1 only (a request that may switch protocols): not the HTTP/2 one.
        get(&connections, &target(port, &ca), true).await.unwrap();
        // Another CA bundle: verified afresh, so connected afresh.
        let mut other = target(port, &ca);
        other.ca_bundle = Some(format!("{ca}\n"));
        get(&connections, &other, false).await.unwrap();
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
        // A server the bundle does not verify is refused, whatever is pooled.
        let (_, stranger, _) = server(&[b"h2"]).await;
        let err = get(&connections, &target(port, &stranger), false).await.unwrap_err();
        assert!(err.starts_with("tls: invalid peer certificate"), "{err}");
    }

    #[tokio::test]
    async fn past_the_most_identities_the_pool_used_least_recently_is_dropped() {
        let (port, ca, accepted) = server(&[b"h2", b"http/1.1"]).await;
        let connections = Connections::default();
        get(&connections, &target(port, &ca), false).await.unwrap();
        // As many other identities (bundles), the first called again between each.
        for i in 0..MAX_IDENTITIES {
            let mut other = target(port, &ca);
            other.ca_bundle = Some(format!("{ca}{}", "\n".repeat(i + 1)));
            connections.pool(&other, None, false).unwrap();
            get(&connections, &target(port, &ca), false).await.unwrap();
        }
        let pools = connections.pools.lock().unwrap();
        assert_eq!(pools.by_identity.len(), MAX_IDENTITIES);
        let first = Identity {
            server_name: "127.0.0.1".into(),
            ca_bundle: Some(ca.clone()),
            insecure_skip_tls_verify: false,
            client_certificate: None,
            http1_only: false,
        };
        assert!(pools.by_identity.contains_key(&first), "the busy pool is kept");
        let oldest = Identity { ca_bundle: Some(format!("{ca}\n")), ..first };
        assert!(!pools.by_identity.contains_key(&oldest), "the pool used least recently is dropped");
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "every call of the first identity shared its connection");
    }

    #[tokio::test]
    async fn a_refused_dial_is_said_in_go_words() {
        let port = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
        let err = get(&Connections::default(), &target(port, ""), false).await.unwrap_err();
        assert_eq!(err, format!("dial tcp 127.0.0.1:{port}: connect: connection refused"));
    }
}

//! An HTTP/2 (or HTTP/1.1, as the server's ALPN says) client of one API server, on one
//! connection: requests multiplex on it the way client-go's do.

use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as Hyper;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::kubeconfig::Target;

#[derive(Clone)]
pub struct Client {
    http: Hyper<HttpsConnector<HttpConnector>, Full<Bytes>>,
    server: String,
    token: Option<String>,
}

/// How a request ended: the HTTP status, or `None` when the transport failed.
pub type Outcome = Option<u16>;

impl Client {
    /// A client with its own connection (made on first use).
    pub fn new(target: &Target) -> Client {
        // Go's clients (client-go, kubectl) turn Nagle's algorithm off, and so must this one:
        // with it on, a request's HEADERS and DATA frames wait 40 ms for a delayed ACK.
        let mut tcp = HttpConnector::new();
        tcp.set_nodelay(true);
        tcp.enforce_http(false);
        let https = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config((*target.tls).clone()).https_only().enable_all_versions().wrap_connector(tcp);
        let http = Hyper::builder(TokioExecutor::new()).pool_max_idle_per_host(64).build(https);
        Client { http, server: target.server.clone(), token: target.token.clone() }
    }

    /// Sends a request; the response's body is left to the caller to stream.
    pub async fn send(&self, method: Method, path: &str, body: Option<Bytes>) -> anyhow::Result<Response<Incoming>> {
        self.send_as(method, path, body, "application/json", "application/json").await
    }

    /// [`Client::send`] with a body of `content_type`, accepting `accept`.
    async fn send_as(&self, method: Method, path: &str, body: Option<Bytes>, content_type: &str, accept: &str) -> anyhow::Result<Response<Incoming>> {
        let mut b = Request::builder().method(method).uri(format!("{}{path}", self.server)).header("accept", accept);
        if body.is_some() {
            b = b.header("content-type", content_type);
        }
        if let Some(t) = &self.token {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        let req = b.body(Full::new(body.unwrap_or_default()))?;
        self.http.request(req).await.with_context(|| format!("request to {path}"))
    }

    /// Sends a request and reads its whole body: the status (None on a transport failure),
    /// the body, and the time to its last byte.
    pub async fn call(&self, method: Method, path: &str, body: Option<Bytes>) -> (Outcome, Bytes, Duration) {
        self.call_as(method, path, body, "application/json").await
    }

    /// [`Client::call`] with a body of `content_type` (a patch's, say).
    pub async fn call_as(&self, method: Method, path: &str, body: Option<Bytes>, content_type: &str) -> (Outcome, Bytes, Duration) {
        self.exchange(method, path, body, content_type, "application/json").await
    }

    /// A GET that accepts `accept` (aggregated discovery's media type, say).
    pub async fn get_accepting(&self, path: &str, accept: &str) -> (Outcome, Bytes, Duration) {
        self.exchange(Method::GET, path, None, "application/json", accept).await
    }

    async fn exchange(&self, method: Method, path: &str, body: Option<Bytes>, content_type: &str, accept: &str) -> (Outcome, Bytes, Duration) {
        let start = Instant::now();
        let result = async {
            let resp = self.send_as(method, path, body, content_type, accept).await?;
            let status = resp.status().as_u16();
            let body = resp.into_body().collect().await?.to_bytes();
            anyhow::Ok((status, body))
        }
        .await;
        match result {
            Ok((status, body)) => (Some(status), body, start.elapsed()),
            Err(_) => (None, Bytes::new(), start.elapsed()),
        }
    }
}

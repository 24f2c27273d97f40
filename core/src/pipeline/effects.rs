//! What a request machine and its shell exchange: the [`Request`] the shell received, the
//! [`Effect`]s the machine asks the shell for, and the [`Event`]s that answer them (see the
//! call order in [`super`]).

use std::sync::Arc;

use bytes::Bytes;

use super::Head;
use crate::aggregator::{ProxyHead, ProxyRequest};
use crate::auth::Peer;
use crate::cache::{ReadRequest, ReadResult, WatchParams};
use crate::catalog::Resource;
use crate::kv::{KvRequest, KvResult};
use crate::status::ApiError;
use crate::webhook::{WebhookAnswer, WebhookCall};

/// One HTTP request as the shell received it.
#[derive(Clone, Debug, Default)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: String,
    /// Header names in any case.
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    /// The body was longer than [`Server::max_body_bytes`] and was not read whole.
    pub body_too_large: bool,
    pub peer: Peer,
}

impl Request {
    /// A request of the server's own, as kube's loopback client sends it: a JSON `body` of
    /// `content_type`, if any, with the server's loopback token (`system:apiserver`), if it
    /// has one.
    pub(crate) fn loopback(token: Option<&str>, method: &str, path: String, body: Option<(&str, &serde_json::Value)>) -> Request {
        let mut headers = vec![("User-Agent".to_string(), "kube-apiserver/kapi".to_string()), ("Accept".to_string(), "application/json".to_string())];
        headers.extend(token.map(|t| ("Authorization".to_string(), format!("Bearer {t}"))));
        headers.extend(body.map(|(content_type, _)| ("Content-Type".to_string(), content_type.to_string())));
        let body = body.map(|(_, b)| Bytes::from(serde_json::to_vec(b).expect("JSON trees serialize"))).unwrap_or_default();
        Request { method: method.into(), path, headers, body, ..Default::default() }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// What the health endpoints report, as the shell sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Health {
    pub storage: Result<(), String>,
    pub caches_ready: bool,
    pub bootstrapped: bool,
    pub shutting_down: bool,
}

impl Default for Health {
    fn default() -> Self {
        Health { storage: Ok(()), caches_ready: true, bootstrapped: true, shutting_down: false }
    }
}

#[derive(Debug)]
pub enum Effect {
    Kv(KvRequest),
    Cache {
        resource: Arc<Resource>,
        request: ReadRequest,
    },
    /// Stream a watch of `resource` under `head`; this request's machine is finished.
    Watch {
        resource: Arc<Resource>,
        params: WatchParams,
        head: Head,
    },
    /// Report the server's health with [`Event::Health`].
    Health,
    /// Make these HTTP(S) GETs, certificates unverified, each within its timeout, and report
    /// what each met with [`Event::Probed`], in order (componentstatuses probe the scheduler
    /// and the controller-manager as kube-apiserver does).
    Probe(Vec<Probe>),
    /// Send this request to an extension API server (with the front-proxy client
    /// certificate) and report its answer's head, or why there is none, with
    /// [`Event::Proxied`].
    Proxy(Box<ProxyRequest>),
    /// After [`Effect::Respond`]: the body is the extension server's answer's, sent on as it
    /// comes; after a 101 (to a [`ProxyRequest::upgrade`]), the client's connection and the
    /// extension server's are joined instead, both ways, until either ends. This request's
    /// machine is finished.
    Relay,
    /// Make this webhook call (a CRD's conversion webhook) and report its answer with
    /// [`Event::Called`].
    Call(Box<WebhookCall>),
    /// Make these webhook calls at once (admission webhooks) and report their answers, in
    /// order, with [`Event::CalledAll`].
    Calls(Vec<WebhookCall>),
    /// Run this request through the pipeline as a request of its own, without waiting for its
    /// answer (the server's own write as a side effect, as kube's loopback client makes it:
    /// a legacy token's Secret dated as used). Nothing is fed back.
    Loopback(Box<Request>),
    /// Append this line (an audit event, see [`crate::audit`]) to the audit log. It comes
    /// before what made it, so a machine's last effect is never one.
    Audit(Bytes),
    Respond(Head),
    Body(Bytes),
    End,
}

#[derive(Debug)]
pub enum Event {
    Kv(KvResult),
    Cache(Result<ReadResult, ApiError>),
    Health(Health),
    Probed(Vec<ProbeOutcome>),
    /// The head of an extension server's answer, or the transport's error.
    Proxied(Result<ProxyHead, String>),
    /// A webhook's answer, or the transport's error in Go's words.
    Called(Result<WebhookAnswer, String>),
    /// The answers to [`Effect::Calls`], in order.
    CalledAll(Vec<Result<WebhookAnswer, String>>),
}

/// An HTTP(S) GET the shell makes for a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    pub url: String,
    pub timeout_seconds: u64,
}

/// What a [`Probe`] met.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// An answer: its status and the start of its body (up to 10 KiB, as kube reads).
    Answered {
        status: u16,
        body: String,
    },
    /// Nothing listens there.
    Refused,
    TimedOut,
    /// Any other failure, in the words of the shell's client.
    Failed(String),
}

//! Requests for a group version an extension server serves (kube-aggregator's proxy handler):
//! 503 while its APIService is not available, its Service read from the watch cache and
//! resolved, then the request sent on ([`Effect::Proxy`]) and the answer relayed
//! ([`Effect::Relay`]).

use jiff::{SignedDuration, Timestamp};

use super::Stage;
use crate::aggregator::{self, ApiService, ProxyHead, ProxyRequest};
use crate::cache::{ReadRequest, ReadResult};
use crate::pipeline::{Effect, RequestMachine};
use crate::status::ApiError;
use crate::storage::keys::object_key;

/// How long a discovery request to an extension server (`/apis/<group>/<version>`) may take.
const DISCOVERY_TIMEOUT: SignedDuration = SignedDuration::from_secs(5);

impl RequestMachine {
    /// Starts proxying this request to `api`'s extension server.
    pub(in crate::pipeline) fn proxy(&mut self, now: Timestamp, api: ApiService) {
        // The answer is the extension server's, as it wrote it.
        (self.compressor, self.pretty) = (None, None);
        if !api.available {
            return self.plain(503, "service unavailable");
        }
        if is_discovery(&self.req.path) {
            self.deadline = self.deadline.min(now + DISCOVERY_TIMEOUT);
        }
        let Some(services) = self.served.catalog.get("", "v1", "services").cloned() else { return self.plain(503, "service unavailable") };
        self.out.push_back(Effect::Cache { resource: services, request: ReadRequest::Latest { min: None } });
        self.stage = Stage::ProxyResolve { api };
    }

    /// The Services as the cache has them: the request goes on to the one `api` names.
    pub(super) fn proxy_resolved(&mut self, api: ApiService, services: Result<ReadResult, ApiError>) {
        let Some(res) = self.served.catalog.get("", "v1", "services").cloned() else { return self.plain(503, "service unavailable") };
        let key = object_key(&self.server.storage_root(&res), Some(&api.service.namespace), &api.service.name);
        let service = match services {
            Ok(ReadResult::Snapshot(s)) => s.objects.get(&key).map(|o| o.value()),
            _ => None,
        };
        let target = match aggregator::resolve(&api, service.as_ref()) {
            Ok(t) => t,
            Err(_) => return self.plain(503, "service unavailable"),
        };
        let host = target.url.trim_start_matches("https://").to_string();
        let path_and_query = if self.req.query.is_empty() { self.raw_path.clone() } else { format!("{}?{}", self.raw_path, self.req.query) };
        let headers = aggregator::outbound_headers(&self.req.headers, &self.user, &self.req.peer.remote_addr, &self.req.path, &host);
        let upgrade = aggregator::is_upgrade(&self.req.headers);
        let request = ProxyRequest { target, method: self.req.method.clone(), path_and_query, headers, body: self.req.body.clone(), upgrade };
        self.out.push_back(Effect::Proxy(Box::new(request)));
        self.stage = Stage::Proxying;
    }

    /// The extension server answered (or could not be reached).
    pub(super) fn proxied(&mut self, answer: Result<ProxyHead, String>) {
        match answer {
            Ok(upstream) => match aggregator::answer_head(upstream, aggregator::is_upgrade(&self.req.headers)) {
                (head, Some(body)) => self.respond(head, body),
                (head, None) => {
                    self.responded = true;
                    self.out.push_back(Effect::Respond(head));
                    self.out.push_back(Effect::Relay);
                    self.stage = Stage::Done;
                }
            },
            Err(e) => self.plain(503, &format!("error trying to reach service: {e}")),
        }
    }

    /// At the deadline: a discovery request to an extension server is answered as kube's proxy
    /// answers the end of its 5 seconds (true); any other request as every request is.
    pub(in crate::pipeline) fn proxy_timed_out(&mut self) -> bool {
        if !(is_discovery(&self.req.path) && matches!(self.stage, Stage::ProxyResolve { .. } | Stage::Proxying)) {
            return false;
        }
        self.plain(503, "error trying to reach service: context deadline exceeded");
        true
    }

    /// kube-aggregator's own error answer: plain text.
    fn plain(&mut self, status: u16, message: &str) {
        let (head, body) = aggregator::unavailable(status, message);
        self.respond(head, body);
    }
}

/// Whether a path is a group version's discovery (`/apis/<group>/<version>`).
fn is_discovery(path: &str) -> bool {
    path.trim_end_matches('/').split('/').count() == 4
}

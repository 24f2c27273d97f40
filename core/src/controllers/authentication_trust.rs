//! kube-apiserver's cluster authentication trust controller: the `extension-apiserver-
//! authentication` ConfigMap in `kube-system`, from which extension API servers learn which
//! CAs sign this server's clients and front proxies and which headers name a proxied user.
//! What is there is merged with this server's, never removed (servers of a cluster share it):
//! lists keep their order and gain what they lack, CA bundles keep each certificate once
//! (certificates expired more than five minutes ago go). Looked at once a minute and after
//! each write; after a failure, again after a wait that doubles up to a minute.

use base64::Engine;
use jiff::{SignedDuration, Timestamp};
use serde_json::{Map, Value, json};

use super::{Asker, Controllers};
use crate::auth::RequestHeader;

const PATH: &str = "/api/v1/namespaces/kube-system/configmaps";
const NAME: &str = "extension-apiserver-authentication";
/// How often the ConfigMap is looked at again.
const RESYNC: SignedDuration = SignedDuration::from_secs(60);
/// The first wait after a failure.
const FIRST_RETRY: SignedDuration = SignedDuration::from_secs(1);
/// How long after its end a certificate is still published.
const EXPIRED_GRACE: SignedDuration = SignedDuration::from_secs(5 * 60);

/// What this server publishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthenticationTrust {
    /// `--client-ca-file` (PEM).
    pub client_ca: String,
    /// `--requestheader-client-ca-file` (PEM) and the other `--requestheader-*` flags.
    pub request_header: Option<(String, RequestHeader)>,
}

/// A request of the controller.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum TrustStep {
    Get,
    Write,
}

impl Controllers {
    /// Publishes `trust` in the ConfigMap from now on.
    pub fn publish_authentication_trust(&mut self, trust: AuthenticationTrust, now: Timestamp) {
        self.trust = Some(Publishing { trust, due: now, backoff: FIRST_RETRY });
    }

    fn trust_busy(&self) -> bool {
        self.in_flight.values().any(|a| matches!(a, Asker::Trust { .. }))
    }

    /// When the ConfigMap is looked at next (none while a look is under way).
    pub(super) fn trust_wake(&self) -> Option<Timestamp> {
        self.trust.as_ref().filter(|_| !self.trust_busy()).map(|p| p.due)
    }

    pub(super) fn trust_due(&mut self, now: Timestamp) {
        if self.trust_wake().is_none_or(|due| due > now) {
            return;
        }
        if let Some(p) = &mut self.trust {
            p.due = now + RESYNC;
        }
        self.send(Asker::Trust { step: TrustStep::Get, status: 0, body: Vec::new() }, "GET", format!("{PATH}/{NAME}"), "", None);
    }

    pub(super) fn trust_answered(&mut self, now: Timestamp, step: TrustStep, status: u16, body: &[u8]) {
        let Some(p) = &self.trust else { return };
        let asker = || Asker::Trust { step: TrustStep::Write, status: 0, body: Vec::new() };
        match (step, status) {
            (TrustStep::Get, 404) => {
                let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME, "namespace": "kube-system"}, "data": merged(&Map::new(), &p.trust, now)});
                self.send(asker(), "POST", PATH.to_string(), "", Some(cm));
            }
            (TrustStep::Get, 200) => {
                let Ok(mut cm) = serde_json::from_slice::<Value>(body) else { return };
                let existing = cm.get("data").and_then(Value::as_object).cloned().unwrap_or_default();
                let data = merged(&existing, &p.trust, now);
                if Value::Object(existing) == data {
                    if let Some(p) = &mut self.trust {
                        p.backoff = FIRST_RETRY;
                    }
                } else {
                    cm["data"] = data;
                    self.send(asker(), "PUT", format!("{PATH}/{NAME}"), "", Some(cm));
                }
            }
            // Written: the next look (a moment away) finds it as it should be.
            (TrustStep::Write, 200 | 201) => {
                if let Some(p) = &mut self.trust {
                    p.due = now + FIRST_RETRY;
                }
            }
            // A failure: looked at again after a wait that doubles each time, up to a minute.
            _ => {
                if let Some(p) = &mut self.trust {
                    p.due = now + p.backoff;
                    p.backoff = (p.backoff * 2).min(RESYNC);
                }
            }
        }
    }
}

/// What this server publishes, when it looks next, and how long it waits after a failure.
pub(super) struct Publishing {
    trust: AuthenticationTrust,
    due: Timestamp,
    backoff: SignedDuration,
}

/// The ConfigMap's data: what `existing` holds, with `trust` merged in.
fn merged(existing: &Map<String, Value>, trust: &AuthenticationTrust, now: Timestamp) -> Value {
    let text = |k: &str| existing.get(k).and_then(Value::as_str).unwrap_or_default();
    let mut data = Map::new();
    let client_ca = bundle(&[text("client-ca-file"), &trust.client_ca], now);
    if !client_ca.is_empty() {
        data.insert("client-ca-file".into(), json!(client_ca));
    }
    let (ours_ca, ours) = match &trust.request_header {
        Some((ca, rh)) => (ca.as_str(), rh.clone()),
        None => ("", RequestHeader::default()),
    };
    let request_header_ca = bundle(&[text("requestheader-client-ca-file"), ours_ca], now);
    if request_header_ca.is_empty() {
        return Value::Object(data);
    }
    let list = |k: &str, ours: &[String]| {
        let mut out: Vec<String> = serde_json::from_str(text(k)).unwrap_or_default();
        for v in ours {
            if !out.contains(v) {
                out.push(v.clone());
            }
        }
        json!(serde_json::to_string(&out).expect("strings serialize"))
    };
    data.insert("requestheader-username-headers".into(), list("requestheader-username-headers", &ours.username_headers));
    data.insert("requestheader-uid-headers".into(), list("requestheader-uid-headers", &ours.uid_headers));
    data.insert("requestheader-group-headers".into(), list("requestheader-group-headers", &ours.group_headers));
    data.insert("requestheader-extra-headers-prefix".into(), list("requestheader-extra-headers-prefix", &ours.extra_prefixes));
    data.insert("requestheader-client-ca-file".into(), json!(request_header_ca));
    data.insert("requestheader-allowed-names".into(), list("requestheader-allowed-names", &ours.allowed_names));
    Value::Object(data)
}

/// The certificates of the PEM `bundles`, each once and in order, less those that ended
/// more than five minutes before `now`, as PEM (Go's `pem.Encode`: 64-character lines).
fn bundle(bundles: &[&str], now: Timestamp) -> String {
    let mut seen: Vec<Vec<u8>> = Vec::new();
    for pem in bundles {
        for block in x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes()).flatten() {
            if block.label != "CERTIFICATE" || seen.contains(&block.contents) {
                continue;
            }
            let ends = block.parse_x509().ok().map(|c| c.validity().not_after.timestamp());
            if ends.is_some_and(|end| end < (now - EXPIRED_GRACE).as_second()) {
                continue;
            }
            seen.push(block.contents);
        }
    }
    let mut out = String::new();
    for der in seen {
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        for line in b64.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::{ControllerEffect, ControllerEvent, Enabled};

    #[test]
    fn the_configmap_is_looked_at_when_due_and_again_after_a_failure() {
        let t0 = Timestamp::from_second(1_700_000_000).unwrap();
        let catalog = crate::resources::catalog(&crate::resources::Settings::default());
        let mut c = Controllers::new(Enabled::NONE, &catalog, "token", "", t0);
        c.publish_authentication_trust(AuthenticationTrust { client_ca: String::new(), request_header: None }, t0);
        assert_eq!(c.poll_timeout(), Some(t0), "a shell sleeping until the next wake-up looks at once");
        let mut get = None;
        while let Some(ControllerEffect::Request { id, request }) = c.poll(t0) {
            if request.path.ends_with("/extension-apiserver-authentication") {
                get = Some(id);
            }
        }
        let id = get.expect("the ConfigMap is asked for");
        assert!(c.poll_timeout().is_none_or(|t| t > t0), "no wake-up for a look under way");
        c.handle(t0, ControllerEvent::Head { id, status: 500 });
        c.handle(t0, ControllerEvent::End { id });
        assert_eq!(c.poll_timeout(), Some(t0 + FIRST_RETRY), "after a failure, a second later");
    }
}

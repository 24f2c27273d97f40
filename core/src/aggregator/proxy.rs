//! Proxying a request to an extension API server, as kube-aggregator's proxy handler does:
//! the Service resolved to an address (kube's cluster-IP resolver, its default), the client's
//! identity sent in `X-Remote-*` headers over a connection authenticated with the front-proxy
//! client certificate, and the answer relayed as it comes. A request to switch protocols
//! (`Connection: Upgrade`, as `kubectl exec` sends) goes on with its connection's headers, and
//! after the extension server's 101 the two connections are joined (kube's upgrade-aware
//! proxy). Its own errors are Go's `http.Error`: plain text, not a `Status`.

use bytes::Bytes;
use serde_json::Value;

use super::{ApiService, ServiceRef};
use crate::auth::{
    STANDARD_EXTRA_PREFIX, STANDARD_GROUP, STANDARD_UID, STANDARD_USERNAME, UserInfo, escape_extra_key, is_remote_header, starts_with_ignore_case,
};
use crate::meta;
use crate::pipeline::Head;

/// Where the shell connects, and how it checks the server it reaches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyTarget {
    /// `https://<host>:<port>`.
    pub url: String,
    /// The name the server's certificate must have: `<service>.<namespace>.svc`.
    pub server_name: String,
    /// PEM roots to verify it with; when `None` (and not `insecure_skip_tls_verify`), the
    /// system's.
    pub ca_bundle: Option<String>,
    pub insecure_skip_tls_verify: bool,
}

/// A request the shell makes to an extension server, with the front-proxy client certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyRequest {
    pub target: ProxyTarget,
    pub method: String,
    /// Path and query, as the client sent them.
    pub path_and_query: String,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    /// The client asks to switch protocols ([`is_upgrade`]): the shell sends the request over
    /// HTTP/1.1, and after a 101 joins the client's connection and the extension server's,
    /// both ways, until either ends.
    pub upgrade: bool,
}

/// The head of the extension server's answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyHead {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

/// Headers that belong to one connection, not to the request or answer (Go's
/// `httputil.ReverseProxy` drops them both ways).
const HOP_BY_HOP: &[&str] =
    &["connection", "proxy-connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade"];

fn is_hop_by_hop(name: &str) -> bool {
    HOP_BY_HOP.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// The headers a `Connection` header names (lower case), which belong to the connection too.
fn connection_named(headers: &[(String, String)]) -> Vec<String> {
    headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case("connection")).flat_map(|(_, v)| v.split(',')).map(|t| t.trim().to_ascii_lowercase()).collect()
}

/// Whether a request asks to switch protocols: a `Connection` header that says `upgrade`
/// (apimachinery's `httpstream.IsUpgradeRequest`).
pub fn is_upgrade(headers: &[(String, String)]) -> bool {
    headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("connection") && v.to_ascii_lowercase().contains("upgrade"))
}

/// Impersonation headers: kube acts on them before it proxies (and sends the impersonated
/// user on); kapi does not impersonate yet, so they go no further than kapi.
fn is_impersonation(name: &str) -> bool {
    starts_with_ignore_case(name, "Impersonate-")
}

/// The address of `api`'s Service (`service`: the Service object, if it exists), as kube's
/// cluster-IP resolver finds it; the error is the resolver's.
pub fn resolve(api: &ApiService, service: Option<&Value>) -> Result<ProxyTarget, String> {
    resolve_service(&api.service, service, api.ca_bundle.clone(), api.insecure_skip_tls_verify)
}

/// The address of the Service `s` names (`service`: the Service object, if it exists), as
/// kube's cluster-IP resolver finds it, checked under `<service>.<namespace>.svc` with
/// `ca_bundle`; the error is the resolver's.
pub fn resolve_service(s: &ServiceRef, service: Option<&Value>, ca_bundle: Option<String>, insecure_skip_tls_verify: bool) -> Result<ProxyTarget, String> {
    let svc = service.ok_or_else(|| format!("service {:?} not found", s.name))?;
    let host_port = |host: &str, port: i64| if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    let address = match meta::str_at(svc, &["spec", "type"]).unwrap_or("ClusterIP") {
        "ExternalName" => host_port(meta::str_at(svc, &["spec", "externalName"]).unwrap_or_default(), s.port),
        "ClusterIP" | "NodePort" | "LoadBalancer" => {
            let ip = meta::str_at(svc, &["spec", "clusterIP"]).unwrap_or_default();
            if ip == "None" {
                return Err("cannot route to service with ClusterIP \"None\"".into());
            }
            let ports = meta::at(svc, &["spec", "ports"]).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            if !ports.iter().any(|p| p.get("port").and_then(Value::as_i64) == Some(s.port)) {
                return Err(format!("no service port {} found for service {:?}", s.port, s.name));
            }
            host_port(ip, s.port)
        }
        other => return Err(format!("unsupported service type {other:?}")),
    };
    Ok(ProxyTarget { url: format!("https://{address}"), server_name: format!("{}.{}.svc", s.name, s.namespace), ca_bundle, insecure_skip_tls_verify })
}

/// The headers sent on: the client's, less the connection's (kept for a request to switch
/// protocols, which needs them), any `X-Remote-*` and `Impersonate-*`, plus who the client is (`X-Remote-User`, `-Uid`, one `X-Remote-Group` per
/// group, `X-Remote-Extra-` per value) and kube's `X-Forwarded-*` (the client's address added
/// to any `X-Forwarded-For` it sent).
pub fn outbound_headers(incoming: &[(String, String)], user: &UserInfo, remote_addr: &str, path: &str, host: &str) -> Vec<(String, String)> {
    let forwarded =
        |name: &str| ["host", "x-forwarded-for", "x-forwarded-uri", "x-forwarded-host", "x-forwarded-proto"].iter().any(|h| h.eq_ignore_ascii_case(name));
    let (upgrade, named) = (is_upgrade(incoming), connection_named(incoming));
    let connection = |k: &str| !upgrade && (is_hop_by_hop(k) || named.contains(&k.to_ascii_lowercase()));
    let kept = |k: &str| !connection(k) && !is_remote_header(k) && !forwarded(k) && !is_impersonation(k);
    let mut out: Vec<(String, String)> = incoming.iter().filter(|(k, _)| kept(k)).cloned().collect();
    out.push((STANDARD_USERNAME.into(), user.name.clone()));
    if !user.uid.is_empty() {
        out.push((STANDARD_UID.into(), user.uid.clone()));
    }
    out.extend(user.groups.iter().map(|g| (STANDARD_GROUP.to_string(), g.clone())));
    for (key, values) in &user.extra {
        let name = format!("{STANDARD_EXTRA_PREFIX}{}", escape_extra_key(key));
        out.extend(values.iter().map(|v| (name.clone(), v.clone())));
    }
    let client_ip = remote_addr.rsplit_once(':').map_or(remote_addr, |(ip, _)| ip).trim_matches(['[', ']']);
    let prior: Vec<&str> = incoming.iter().filter(|(k, _)| k.eq_ignore_ascii_case("x-forwarded-for")).map(|(_, v)| v.as_str()).collect();
    if !client_ip.is_empty() {
        let chain = prior.into_iter().chain([client_ip]).collect::<Vec<_>>().join(", ");
        out.push(("X-Forwarded-For".into(), chain));
    }
    out.push(("X-Forwarded-Uri".into(), path.to_string()));
    out.push(("X-Forwarded-Host".into(), host.to_string()));
    out.push(("X-Forwarded-Proto".into(), "https".into()));
    out
}

/// What the client gets for the extension server's answer: its head (its `Content-Length`
/// too: the body is relayed unchanged), less the connection's headers and CORS grants, with the
/// body relayed (`None`); or, for a redirect, kube's 502 in its place (`Some(body)`).
///
/// To a request to switch protocols (`upgrade`): a 101 goes to the client as it is (the
/// connections are then joined), an error (400 and up) as any answer does, and anything else
/// is kube's 503 `invalid upgrade response`.
pub fn answer_head(upstream: ProxyHead, upgrade: bool) -> (Head, Option<Bytes>) {
    if upgrade && upstream.status == 101 {
        return (Head { status: 101, headers: upstream.headers }, None);
    }
    if upgrade && upstream.status < 400 {
        let (head, body) = unavailable(503, &format!("invalid upgrade response: status code {}", upstream.status));
        return (head, Some(body));
    }
    let location = upstream.headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("location") && !v.is_empty());
    if (300..400).contains(&upstream.status) && location {
        // Go's `http.Error` without a content type, which its server then sniffs as text.
        let head = Head::new(502, "text/plain; charset=utf-8").with("X-Content-Type-Options", "nosniff");
        return (head, Some(Bytes::from_static(b"the backend attempted to redirect this request, which is not permitted")));
    }
    let cors = |k: &str| CORS_GRANTS.iter().any(|h| h.eq_ignore_ascii_case(k));
    let named = connection_named(&upstream.headers);
    let headers = upstream.headers.into_iter().filter(|(k, _)| !is_hop_by_hop(k) && !named.contains(&k.to_ascii_lowercase()) && !cors(k)).collect();
    (Head { status: upstream.status, headers }, None)
}

/// What kube's proxy removes from an extension server's answer (its own CORS handling decides).
const CORS_GRANTS: &[&str] =
    &["access-control-allow-credentials", "access-control-allow-headers", "access-control-allow-methods", "access-control-allow-origin"];

/// The aggregator's own error answer (Go's `http.Error`): `message` as plain text.
pub fn unavailable(status: u16, message: &str) -> (Head, Bytes) {
    let head = Head::new(status, "text/plain; charset=utf-8").with("X-Content-Type-Options", "nosniff");
    (head, Bytes::from(format!("{message}\n")))
}

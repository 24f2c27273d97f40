//! The invariant checkers. Each observes the HTTP traffic between the simulated clients and the
//! server (and the [`Oracle`](super::oracle::Oracle), the truth of what the store committed) and
//! reports a [`Violation`] the moment an answer cannot be explained.

pub mod authz;
pub mod concurrency;
pub mod crds;
pub mod durability;
pub mod list;
pub mod quota;
pub mod response;
pub mod selector;
pub mod watch;
pub mod webhooks;

use std::collections::BTreeMap;
use std::fmt;

use bytes::Bytes;
use kapi_core::kv::Revision;

use super::kinds::Kind;

/// The invariants of the issue, numbered as there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invariant {
    /// 1. No acknowledged write is lost.
    Durability,
    /// 2. Watchers see every matching event, in order, once.
    Watch,
    /// 3. LISTs show the store's state at their revision, and consistent ones are fresh.
    List,
    /// 4. No update based on a stale resourceVersion succeeds.
    Concurrency,
    /// 5. Every response is well formed and has kube-apiserver's code for the situation.
    Response,
    /// 6. No queue grows without bound.
    Bounded,
    /// 6. With faults off, every request completes and every client catches up.
    Liveness,
    /// 7. No request is served by a catalog older than one its client saw, and a deleted CRD
    ///    leaves none of its resources behind.
    Catalog,
    /// 8. Every RBAC decision is kube's over the RBAC objects of its snapshot's revisions, and
    ///    no request is allowed by a policy older than one its client saw.
    Authorization,
    /// 9. A quota is never exceeded by acknowledged writes.
    Quota,
    /// 10. A webhook that did not answer never lets a write through, and webhooks are called
    ///     within their timeouts.
    Admission,
}

impl Invariant {
    /// The process exit code for a violation: 3 for correctness, 4 for liveness.
    pub fn exit_code(self) -> i32 {
        if self == Invariant::Liveness { 4 } else { 3 }
    }
}

#[derive(Clone, Debug)]
pub struct Violation {
    pub invariant: Invariant,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.invariant, self.message)
    }
}

pub type Checked = Result<(), Violation>;

pub fn fail(invariant: Invariant, message: String) -> Violation {
    Violation { invariant, message }
}

pub fn violation(invariant: Invariant, message: String) -> Checked {
    Err(fail(invariant, message))
}

/// Where in one of the simulated collections a request points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub kind: Kind,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl Target {
    /// The target of a collection's path; `None` for any other path.
    pub fn parse(path: &str) -> Option<Target> {
        let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let (kind, rest) = Kind::of_path(&segs)?;
        let r = kind.resource();
        let (namespace, name) = match rest {
            [res] if *res == r => (None, None),
            ["namespaces", ns, res] if *res == r => (Some(ns.to_string()), None),
            ["namespaces", ns, res, name] if *res == r => (Some(ns.to_string()), Some(name.to_string())),
            _ => return None,
        };
        Some(Target { kind, namespace, name })
    }

    /// The storage key prefix of the collection this target lies in.
    pub fn prefix(&self) -> Bytes {
        prefix(self.kind, self.namespace.as_deref())
    }
}

/// The storage key prefix of a collection, in a namespace or across all.
pub fn prefix(kind: Kind, namespace: Option<&str>) -> Bytes {
    match namespace {
        Some(ns) => Bytes::from(format!("/registry/{}/{ns}/", kind.storage_prefix())),
        None => Bytes::from(format!("/registry/{}/", kind.storage_prefix())),
    }
}

/// The storage key of an object.
pub fn key(kind: Kind, namespace: &str, name: &str) -> Bytes {
    Bytes::from(format!("/registry/{}/{namespace}/{name}", kind.storage_prefix()))
}

/// The storage key and resourceVersion of an object of a collection in a response.
pub fn identity(kind: Kind, object: &serde_json::Value) -> Option<(Bytes, Revision)> {
    let meta = &object["metadata"];
    let rv = meta["resourceVersion"].as_str()?.parse().ok()?;
    Some((key(kind, meta["namespace"].as_str()?, meta["name"].as_str()?), rv))
}

/// One request as the checkers see it, with what the world knew when it was sent and answered.
#[derive(Clone, Debug)]
pub struct Call {
    /// Which client sent it.
    pub caller: usize,
    pub method: String,
    pub target: Option<Target>,
    pub query: BTreeMap<String, String>,
    pub body: serde_json::Value,
    /// The store's revision when the request was sent.
    pub start: Revision,
    /// The store's revision when it was answered.
    pub end: Revision,
    /// The newest revision acknowledged to any client before the request was sent.
    pub acked_before: Revision,
    /// Faults (store errors, outages, restarts) were possible while it ran.
    pub faulty: bool,
    /// The catalogs it met (set when it is answered).
    pub catalogs: super::server::Catalogs,
    /// The member (of `clients::rbac::MEMBERS`) whose token it bears, if any.
    pub member: Option<usize>,
    /// The policy its authorization was decided by (set when it is answered).
    pub policy: super::server::Policy,
    /// The configmaps each namespace's quota allows, in a world with quotas.
    pub quota: Option<u64>,
    /// The world has admission webhooks (`sim::webhooks`).
    pub webhooks: bool,
    /// The world has the validating admission policy (`check::webhooks::POLICY`).
    pub admission_policy: bool,
}

impl Call {
    pub fn param(&self, k: &str) -> Option<&str> {
        self.query.get(k).map(String::as_str)
    }

    pub fn dry_run(&self) -> bool {
        self.param("dryRun").is_some()
    }

    pub fn is_watch(&self) -> bool {
        matches!(self.param("watch"), Some("1" | "true"))
    }

    /// The request's object key, when it names one object.
    pub fn key(&self) -> Option<Bytes> {
        let t = self.target.as_ref()?;
        Some(key(t.kind, t.namespace.as_deref()?, t.name.as_deref()?))
    }
}

/// Splits a query string (the simulator's clients never percent-encode more than `,` `(` `)` `!` and space).
pub fn parse_query(q: &str) -> BTreeMap<String, String> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_string(), decode(v))
        })
        .collect()
}

fn decode(v: &str) -> String {
    v.replace("%2C", ",").replace("%28", "(").replace("%29", ")").replace("%21", "!").replace("%20", " ").replace("%3D", "=")
}

/// Percent-encodes what the simulator's selectors contain.
pub fn encode(v: &str) -> String {
    v.replace(' ', "%20").replace(',', "%2C").replace('(', "%28").replace(')', "%29").replace('!', "%21").replace('=', "%3D")
}

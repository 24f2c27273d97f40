//! kube's quota evaluators: what a pod, a service, a persistent volume claim or any other
//! object uses of a quota, which of a quota's resources they count, which writes change it
//! and the scopes they fall in.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use serde_json::Value;

use super::scopes::ScopeSelector;
use super::{Resources, add, read, sum, zero};
use crate::admission::Operation;
use crate::meta;
use crate::quantity::{Format, Quantity};

/// The resources a pod's usage may name (beside hugepages and extended resources).
const POD_RESOURCES: [&str; 11] = [
    "count/pods",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
];
/// The resources a quota may require every container to ask for.
const REQUIRED: [&str; 6] = ["cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"];
const SERVICE_RESOURCES: [&str; 4] = ["count/services", "services", "services.nodeports", "services.loadbalancers"];
const CLAIM_RESOURCES: [&str; 2] = ["persistentvolumeclaims", "requests.storage"];
const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";

/// The core resources whose object counts have an old name of their own too.
const LEGACY_COUNTS: [&str; 4] = ["configmaps", "secrets", "replicationcontrollers", "resourcequotas"];

/// What quota never counts (kube's `ignoredResources`).
const IGNORED: [(&str, &str); 10] = [
    ("", "bindings"),
    ("", "componentstatuses"),
    ("", "events"),
    ("events.k8s.io", "events"),
    ("authentication.k8s.io", "tokenreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "localsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
];

/// How the objects of one resource are counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Evaluator {
    Pods,
    Services,
    Claims,
    /// Any other resource: one of each name per object, on create.
    Count(Vec<String>),
}

impl Evaluator {
    /// The evaluator of a resource; none for what quota ignores.
    pub fn of(group: &str, resource: &str) -> Option<Evaluator> {
        if IGNORED.contains(&(group, resource)) {
            return None;
        }
        Some(match (group, resource) {
            ("", "pods") => Evaluator::Pods,
            ("", "services") => Evaluator::Services,
            ("", "persistentvolumeclaims") => Evaluator::Claims,
            ("", r) if LEGACY_COUNTS.contains(&r) => Evaluator::Count(vec![format!("count/{r}"), r.to_string()]),
            (g, r) => Evaluator::Count(vec![count_name(g, r)]),
        })
    }

    /// Whether a write changes what its object uses (kube's `Handles`).
    pub fn handles(&self, op: Operation, subresource: Option<&str>, old: Option<&Value>, new: Option<&Value>) -> bool {
        match self {
            Evaluator::Pods => match (subresource, op) {
                (None, Operation::Create) | (Some("resize"), Operation::Update) => true,
                (None, Operation::Update) => match (old, new) {
                    (Some(old), Some(new)) => terminating(old) != terminating(new),
                    _ => false,
                },
                _ => false,
            },
            Evaluator::Services => matches!(op, Operation::Create | Operation::Update),
            // kube compares the claims' allocated storage as pointers: every status update counts.
            Evaluator::Claims => match subresource {
                None => matches!(op, Operation::Create | Operation::Update),
                Some("status") => true,
                Some(_) => false,
            },
            Evaluator::Count(_) => subresource.is_none() && op == Operation::Create,
        }
    }

    /// Whether any write of this resource, under `subresource`, could change what it uses
    /// (what is known before the object is read).
    pub fn may_handle(&self, op: Operation, subresource: Option<&str>) -> bool {
        match self {
            Evaluator::Pods => matches!((subresource, op), (None, Operation::Create | Operation::Update) | (Some("resize"), Operation::Update)),
            Evaluator::Services | Evaluator::Claims => self.handles(op, subresource, None, None) || op == Operation::Update,
            Evaluator::Count(_) => self.handles(op, subresource, None, None),
        }
    }

    /// The names among `names` this evaluator counts (kube's `MatchingResources`), sorted.
    pub fn matching(&self, names: &[String]) -> Vec<String> {
        let mut out: BTreeSet<String> = BTreeSet::new();
        for name in names {
            let counted = match self {
                Evaluator::Pods => {
                    POD_RESOURCES.contains(&name.as_str())
                        || name.starts_with("hugepages-")
                        || name.starts_with("requests.hugepages-")
                        || name.strip_prefix("requests.").is_some_and(|rest| !native(rest) && !rest.starts_with("requests."))
                }
                Evaluator::Services => SERVICE_RESOURCES.contains(&name.as_str()),
                Evaluator::Claims => {
                    name == "count/persistentvolumeclaims"
                        || CLAIM_RESOURCES.contains(&name.as_str())
                        || CLAIM_RESOURCES.iter().any(|r| name.ends_with(&format!("{STORAGE_CLASS_SUFFIX}{r}")))
                }
                Evaluator::Count(counted) => counted.contains(name),
            };
            if counted {
                out.insert(name.clone());
            }
        }
        out.into_iter().collect()
    }

    /// What `obj` uses (kube's `Usage`); `now` decides whether a pod past its deletion grace
    /// still counts.
    pub fn usage(&self, obj: &Value, now: Timestamp) -> Resources {
        let one = || Quantity::from_i64(1, Format::DecimalSI);
        match self {
            Evaluator::Pods => {
                let mut out = Resources::from([("count/pods".to_string(), one())]);
                if !counts_compute(obj, now) {
                    return out;
                }
                let (requests, limits) = pod_resources(obj);
                out.extend(compute_usage(&requests, &limits));
                out
            }
            Evaluator::Services => service_usage(obj),
            Evaluator::Claims => claim_usage(obj),
            Evaluator::Count(names) => names.iter().map(|n| (n.clone(), one())).collect(),
        }
    }

    /// Whether `obj` falls in the scope `selector` names (only pods have scopes).
    pub fn matches_scope(&self, selector: &ScopeSelector, obj: &Value) -> Result<bool, String> {
        match self {
            Evaluator::Pods => selector.matches_pod(obj),
            _ => Ok(false),
        }
    }

    /// kube's `Constraints`: a quota of `required` (its counted resources) may require each of
    /// a pod's containers to ask for them.
    pub fn constraints(&self, required: &[String], obj: &Value) -> Result<(), String> {
        let Evaluator::Pods = self else { return Ok(()) };
        let required: Vec<&String> = required.iter().filter(|r| REQUIRED.contains(&r.as_str())).collect();
        if required.is_empty() {
            return Ok(());
        }
        let mut missing: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let spec = |field: &str| meta::at(obj, &["spec", field]).and_then(Value::as_array).cloned().unwrap_or_default();
        for c in spec("containers").iter().chain(spec("initContainers").iter()) {
            let usage = compute_usage(&read(meta::at(c, &["resources", "requests"])), &read(meta::at(c, &["resources", "limits"])));
            for r in required.iter().filter(|r| !usage.contains_key(r.as_str())) {
                missing.entry(r.to_string()).or_default().insert(c.get("name").and_then(Value::as_str).unwrap_or_default().to_string());
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let parts: Vec<String> = missing.iter().map(|(r, cs)| format!("{r} for: {}", cs.iter().cloned().collect::<Vec<_>>().join(","))).collect();
        Err(format!("must specify {}", parts.join("; ")))
    }
}

/// The object-count name of a resource: `count/<resource>[.<group>]`.
pub fn count_name(group: &str, resource: &str) -> String {
    if group.is_empty() { format!("count/{resource}") } else { format!("count/{resource}.{group}") }
}

/// kube's `IsNativeResource`: no domain, or one of kubernetes.io.
fn native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// `spec.activeDeadlineSeconds` set and not negative.
pub(super) fn terminating(pod: &Value) -> bool {
    meta::at(pod, &["spec", "activeDeadlineSeconds"]).and_then(Value::as_i64).is_some_and(|s| s >= 0)
}

/// kube's `QuotaV1Pod`: a pod that has finished, or is past its deletion grace, uses no compute.
fn counts_compute(pod: &Value, now: Timestamp) -> bool {
    if matches!(meta::str_at(pod, &["status", "phase"]), Some("Succeeded" | "Failed")) {
        return false;
    }
    let deleted = meta::deletion_timestamp(pod).and_then(|t| t.parse::<Timestamp>().ok());
    let grace = meta::at(pod, &["metadata", "deletionGracePeriodSeconds"]).and_then(Value::as_i64);
    match (deleted, grace) {
        // A grace past the last representable time never ends.
        (Some(at), Some(grace)) => at.checked_add(jiff::SignedDuration::from_secs(grace)).ok().is_none_or(|end| now <= end),
        _ => true,
    }
}

/// What a pod's containers ask for, as the sum kube's `PodRequests`/`PodLimits` make: the
/// containers' and restartable init containers' sum, or an init container's own with the
/// sidecars started before it, whichever is greater; `of` reads a container's list.
pub fn pod_total(pod: &Value, of: impl Fn(&Value) -> Resources) -> Resources {
    let merge = |into: &mut Resources, from: &Resources| *into = add(into, from);
    let spec = |field: &str| meta::at(pod, &["spec", field]).and_then(Value::as_array).cloned().unwrap_or_default();
    let mut total = Resources::new();
    for c in &spec("containers") {
        merge(&mut total, &of(c));
    }
    let (mut sidecars, mut init_max) = (Resources::new(), Resources::new());
    for c in &spec("initContainers") {
        let own = of(c);
        if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            merge(&mut total, &own);
            merge(&mut sidecars, &own);
            continue;
        }
        for (k, q) in add(&own, &sidecars) {
            if init_max.get(&k).is_none_or(|have| q > *have) {
                init_max.insert(k, q);
            }
        }
    }
    for (k, q) in init_max {
        if total.get(&k).is_none_or(|have| q > *have) {
            total.insert(k, q);
        }
    }
    total
}

/// A pod's requests and limits for quota: each container's, or for a container (or sidecar)
/// whose status says what it was given, the larger of that and its spec (only what it was
/// given while a resize is infeasible), summed, with the pod's overhead (kube's
/// `PodRequests`/`PodLimits` with status resources).
fn pod_resources(pod: &Value) -> (Resources, Resources) {
    let statuses = |field: &str| meta::at(pod, &["status", field]).and_then(Value::as_array).cloned().unwrap_or_default();
    let (regular, init) = (statuses("containerStatuses"), statuses("initContainerStatuses"));
    let infeasible = meta::at(pod, &["status", "conditions"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c.get("type").and_then(Value::as_str) == Some("PodResizePending") && c.get("reason").and_then(Value::as_str) == Some("Infeasible"));
    let of = |field: &'static str| {
        let (regular, init) = (&regular, &init);
        move |c: &Value| {
            let spec = read(meta::at(c, &["resources", field]));
            let name = c.get("name").and_then(Value::as_str);
            let sidecar = c.get("restartPolicy").and_then(Value::as_str) == Some("Always");
            let status = regular.iter().chain(init.iter().filter(|_| sidecar)).find(|s| s.get("name").and_then(Value::as_str) == name);
            let Some(given) = status.and_then(|s| s.get("resources")).filter(|r| r.is_object()) else { return spec };
            let mut list = read(given.get(field));
            if field == "requests" {
                list = larger(&list, &read(status.and_then(|s| s.get("allocatedResources"))));
            }
            if infeasible { list } else { larger(&spec, &list) }
        }
    };
    let mut requests = pod_total(pod, of("requests"));
    let mut limits = pod_total(pod, of("limits"));
    let overhead = read(meta::at(pod, &["spec", "overhead"]));
    requests = add(&requests, &overhead);
    for (k, q) in &overhead {
        if let Some(l) = limits.get(k) {
            let l = sum(l, q);
            limits.insert(k.clone(), l);
        }
    }
    (requests, limits)
}

/// The greater of each entry of two lists.
fn larger(a: &Resources, b: &Resources) -> Resources {
    let mut out = a.clone();
    for (k, q) in b {
        if out.get(k).is_none_or(|have| q > have) {
            out.insert(k.clone(), *q);
        }
    }
    out
}

/// kube's `podComputeUsageHelper`: the quota names of requests and limits.
fn compute_usage(requests: &Resources, limits: &Resources) -> Resources {
    let mut out = Resources::from([("pods".to_string(), Quantity::from_i64(1, Format::DecimalSI))]);
    for r in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(q) = requests.get(r) {
            out.insert(r.to_string(), *q);
            out.insert(format!("requests.{r}"), *q);
        }
        if let Some(q) = limits.get(r) {
            out.insert(format!("limits.{r}"), *q);
        }
    }
    for (name, q) in requests {
        if name.starts_with("hugepages-") {
            out.insert(name.clone(), *q);
            out.insert(format!("requests.{name}"), *q);
        }
        if !native(name) && !name.starts_with("requests.") {
            out.insert(format!("requests.{name}"), *q);
        }
    }
    out
}

fn service_usage(svc: &Value) -> Resources {
    let one = Quantity::from_i64(1, Format::DecimalSI);
    let ports = meta::at(svc, &["spec", "ports"]).and_then(Value::as_array).cloned().unwrap_or_default();
    let count = |n: usize| Quantity::from_i64(n as i64, Format::DecimalSI);
    let (mut node_ports, mut balancers) = (zero(), zero());
    match meta::str_at(svc, &["spec", "type"]) {
        Some("NodePort") => node_ports = count(ports.len()),
        Some("LoadBalancer") => {
            balancers = one;
            let allocated = meta::at(svc, &["spec", "allocateLoadBalancerNodePorts"]).and_then(Value::as_bool) != Some(false);
            node_ports = if allocated {
                count(ports.len())
            } else {
                count(ports.iter().filter(|p| p.get("nodePort").and_then(Value::as_i64).is_some_and(|n| n != 0)).count())
            };
        }
        _ => {}
    }
    Resources::from([
        ("count/services".to_string(), one),
        ("services".to_string(), one),
        ("services.loadbalancers".to_string(), balancers),
        ("services.nodeports".to_string(), node_ports),
    ])
}

fn claim_usage(claim: &Value) -> Resources {
    let one = Quantity::from_i64(1, Format::DecimalSI);
    let mut out = Resources::from([("persistentvolumeclaims".to_string(), one), ("count/persistentvolumeclaims".to_string(), one)]);
    let class = meta::str_at(claim, &["metadata", "annotations", "volume.beta.kubernetes.io/storage-class"])
        .or_else(|| meta::str_at(claim, &["spec", "storageClassName"]))
        .unwrap_or_default();
    if !class.is_empty() {
        out.insert(format!("{class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"), one);
    }
    let storage = |path: &[&str]| meta::str_at(claim, path).and_then(Quantity::parse).map(|q| q.round_up());
    let requested = storage(&["spec", "resources", "requests", "storage"]);
    let allocated = storage(&["status", "allocatedResources", "storage"]);
    let storage = match (requested, allocated) {
        (Some(r), Some(a)) if a > r => Some(a),
        (r, _) => r,
    };
    if let Some(q) = storage {
        out.insert("requests.storage".to_string(), q);
        if !class.is_empty() {
            out.insert(format!("{class}{STORAGE_CLASS_SUFFIX}requests.storage"), q);
        }
    }
    out
}

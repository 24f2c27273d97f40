//! core/v1 resourcequotas (+`status`) and limitranges as objects: kube's strategies, defaults
//! and the main rules of `ValidateResourceQuota` and `ValidateLimitRange`. What they enforce
//! is admission's (ResourceQuota, LimitRanger).

use serde_json::{Map, Value, json};

use super::{info, serve, status_subresource};
use crate::catalog::{Lifecycle, Resource, Strategy};
use crate::meta;
use crate::quantity::Quantity;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};
use crate::validation::qualified_name;

pub fn resources() -> (Resource, Resource) {
    let mut limits = info("", "v1", "LimitRange", "limitranges", true);
    limits.short_names = crate::catalog::names(&["limits"]);
    let mut quotas = info("", "v1", "ResourceQuota", "resourcequotas", true);
    quotas.short_names = crate::catalog::names(&["quota"]);
    quotas.subresources = vec![status_subresource(&quotas)];
    (serve(limits, LimitRanges), serve(quotas, ResourceQuotas))
}

/// The resources a quota may name without a domain (`IsStandardQuotaResourceName`).
const STANDARD_QUOTA: &[&str] = &[
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
];

/// Quota resources counted in whole objects (`IsIntegerResourceName`).
fn integer_resource(name: &str) -> bool {
    matches!(name, "pods" | "services" | "replicationcontrollers" | "resourcequotas" | "secrets" | "configmaps" | "persistentvolumeclaims")
        || name.starts_with("services.")
        || name.starts_with("count/")
}

const SCOPES: &[&str] =
    &["Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass", "CrossNamespacePodAffinity", "VolumeAttributesClass"];

struct ResourceQuotas;

const QUOTA_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::AGE,
    Column::new("Request", "string", Describe::Text("Request represents a minimum amount of cpu/memory that a container may consume.")),
    Column::new(
        "Limit",
        "string",
        Describe::Text("Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
    ),
];

fn quota_hard(hard: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    for (k, v) in hard.and_then(Value::as_object).into_iter().flatten() {
        let at = format!("{path}[{k}]");
        if !k.contains('/') && !STANDARD_QUOTA.contains(&k.as_str()) && !k.starts_with("requests.") && !k.starts_with("count/") {
            errs.push(FieldError::invalid(at.clone(), json!(k), "must be a standard resource for quota"));
        } else if !k.starts_with("count/") {
            for msg in qualified_name(k) {
                errs.push(FieldError::invalid(at.clone(), json!(k), msg));
            }
        }
        let Some(q) = v.as_str().and_then(Quantity::parse) else { continue };
        if q.milli_value() < 0 {
            errs.push(FieldError::invalid(at.clone(), v.clone(), "must be greater than or equal to 0"));
        }
        if integer_resource(k) && q.milli_value() % 1000 != 0 {
            errs.push(FieldError::invalid(at, v.clone(), "must be an integer"));
        }
    }
}

impl Strategy for ResourceQuotas {
    fn lifecycle(&self) -> Lifecycle {
        Lifecycle::Status
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        quota_hard(meta::at(obj, &["spec", "hard"]), "spec.hard", &mut errs);
        let scopes: Vec<&str> = meta::at(obj, &["spec", "scopes"]).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        for s in &scopes {
            if !SCOPES.contains(s) {
                errs.push(FieldError::invalid("spec.scopes", json!(s), "unsupported scope"));
            }
        }
        for (a, b) in [("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating")] {
            if scopes.contains(&a) && scopes.contains(&b) {
                errs.push(FieldError::invalid("spec.scopes", json!(scopes), "conflicting scopes"));
            }
        }
        for (i, e) in meta::at(obj, &["spec", "scopeSelector", "matchExpressions"]).and_then(Value::as_array).into_iter().flatten().enumerate() {
            let at = format!("spec.scopeSelector.matchExpressions[{i}]");
            let scope = e.get("scopeName").and_then(Value::as_str).unwrap_or_default();
            if !SCOPES.contains(&scope) {
                errs.push(FieldError::invalid(format!("{at}.scopeName"), json!(scope), "unsupported scope"));
            }
            let values = e.get("values").and_then(Value::as_array).map_or(0, Vec::len);
            match e.get("operator").and_then(Value::as_str).unwrap_or_default() {
                "In" | "NotIn" if values == 0 => {
                    errs.push(FieldError::required(format!("{at}.values"), "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"))
                }
                "Exists" | "DoesNotExist" if values > 0 => errs.push(FieldError::invalid(
                    format!("{at}.values"),
                    e["values"].clone(),
                    "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
                )),
                "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
                _ => errs.push(FieldError::invalid(format!("{at}.operator"), e.get("operator").cloned().unwrap_or_default(), "not a valid selector operator")),
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let scopes = |o: &Value| {
            let mut s: Vec<String> =
                meta::at(o, &["spec", "scopes"]).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(String::from).collect();
            s.sort();
            s.dedup();
            s
        };
        if scopes(new) != scopes(old) {
            errs.push(FieldError::invalid("spec.scopes", meta::at(new, &["spec", "scopes"]).cloned().unwrap_or(Value::Null), "field is immutable"));
        }
        errs
    }

    fn validate_subresource_update(&self, _subresource: &str, new: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        quota_hard(meta::at(new, &["status", "hard"]), "status.hard", &mut errs);
        quota_hard(meta::at(new, &["status", "used"]), "status.used", &mut errs);
        errs
    }

    fn columns(&self) -> &'static [Column] {
        QUOTA_COLUMNS
    }

    /// `<resource>: <used>/<hard>` for every resource of `status.hard`, in name order: limits
    /// in one cell, the rest in the other.
    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let hard = meta::at(obj, &["status", "hard"]).and_then(Value::as_object).cloned().unwrap_or_default();
        let used = meta::at(obj, &["status", "used"]).and_then(Value::as_object).cloned().unwrap_or_default();
        let (mut requests, mut limits) = (Vec::new(), Vec::new());
        let canonical = |v: Option<&Value>| v.and_then(Value::as_str).and_then(Quantity::parse).map_or("0".into(), |q| q.canonical());
        for (name, h) in &hard {
            let cell = format!("{name}: {}/{}", canonical(used.get(name)), canonical(Some(h)));
            if name.split('.').next() == Some("limits") { limits.push(cell) } else { requests.push(cell) }
        }
        vec![json!(meta::name(obj)), table::age(obj, now), json!(requests.join(", ")), json!(limits.join(", "))]
    }
}

struct LimitRanges;

const LIMIT_TYPES: &[&str] = &["Container", "Pod", "PersistentVolumeClaim"];

/// `SetDefaults_LimitRangeItem` for containers: limits default to `max`, requests to the
/// default limit, else to `min`.
fn default_container_item(item: &mut Map<String, Value>) {
    let get = |item: &Map<String, Value>, k: &str| item.get(k).and_then(Value::as_object).cloned().unwrap_or_default();
    let (max, min) = (get(item, "max"), get(item, "min"));
    let mut default = get(item, "default");
    for (k, v) in &max {
        default.entry(k.clone()).or_insert_with(|| v.clone());
    }
    let mut request = get(item, "defaultRequest");
    for (k, v) in default.iter().chain(&min) {
        request.entry(k.clone()).or_insert_with(|| v.clone());
    }
    item.insert("default".into(), Value::Object(default));
    item.insert("defaultRequest".into(), Value::Object(request));
}

fn quantities(item: &Value, field: &str) -> Vec<(String, Quantity, Value)> {
    item.get(field)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| v.as_str().and_then(Quantity::parse).map(|q| (k.clone(), q, v.clone())))
        .collect()
}

fn validate_limit_item(item: &Value, at: &str, errs: &mut Vec<FieldError>) {
    let ty = item.get("type").and_then(Value::as_str).unwrap_or_default();
    if ty == "Pod" {
        for f in ["default", "defaultRequest"] {
            if item.get(f).and_then(Value::as_object).is_some_and(|m| !m.is_empty()) {
                errs.push(FieldError::forbidden(format!("{at}.{f}"), "may not be specified when `type` is 'Pod'"));
            }
        }
    }
    if ty == "PersistentVolumeClaim" && !["min", "max"].iter().any(|f| item.get(*f).and_then(|m| m.get("storage")).is_some()) {
        errs.push(FieldError::required(format!("{at}.limits"), "either minimum or maximum storage value is required, but neither was provided"));
    }
    let find =
        |list: &[(String, Quantity, Value)], k: &str| list.iter().find(|(n, ..)| n == k).map(|(_, q, v)| (*q, v.as_str().unwrap_or_default().to_string()));
    let (min, max, default, request) = (quantities(item, "min"), quantities(item, "max"), quantities(item, "default"), quantities(item, "defaultRequest"));
    let mut keys: Vec<&String> = min.iter().chain(&max).chain(&default).chain(&request).map(|(k, ..)| k).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        let (mn, mx, df, rq) = (find(&min, k), find(&max, k), find(&default, k), find(&request, k));
        let mut check = |a: &Option<(Quantity, String)>, b: &Option<(Quantity, String)>, field: &str, what: (&str, &str)| {
            if let (Some((qa, sa)), Some((qb, sb))) = (a, b)
                && qa > qb
            {
                errs.push(FieldError::invalid(format!("{at}.{field}[{k}]"), json!(sa), format!("{} value {sa} is greater than {} value {sb}", what.0, what.1)));
            }
        };
        check(&mn, &mx, "min", ("min", "max"));
        check(&mn, &rq, "defaultRequest", ("min", "default request"));
        check(&rq, &mx, "defaultRequest", ("default request", "max"));
        check(&rq, &df, "defaultRequest", ("default request", "default limit"));
        check(&mn, &df, "default", ("min", "default"));
        check(&df, &mx, "default", ("default", "max"));
    }
    for (k, q, v) in quantities(item, "maxLimitRequestRatio") {
        if q.milli_value() < 1000 {
            errs.push(FieldError::invalid(
                format!("{at}.maxLimitRequestRatio[{k}]"),
                v.clone(),
                format!("ratio {} is less than 1", v.as_str().unwrap_or_default()),
            ));
        }
    }
}

impl Strategy for LimitRanges {
    fn default(&self, obj: &mut Value) {
        for item in meta::object_at(obj, &["spec"]).get_mut("limits").and_then(Value::as_array_mut).into_iter().flatten() {
            if let Value::Object(m) = item
                && m.get("type").and_then(Value::as_str) == Some("Container")
            {
                default_container_item(m);
            }
        }
    }

    /// A limit range created without a name gets a random one (kube's UUID).
    fn finalize_create(&self, obj: &mut Value) {
        if meta::name(obj).is_empty() {
            let uid = meta::uid(obj).to_string();
            meta::set_meta(obj, "name", json!(uid));
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let mut seen = Vec::new();
        for (i, item) in meta::at(obj, &["spec", "limits"]).and_then(Value::as_array).into_iter().flatten().enumerate() {
            let at = format!("spec.limits[{i}]");
            let ty = item.get("type").and_then(Value::as_str).unwrap_or_default();
            for msg in qualified_name(ty) {
                errs.push(FieldError::invalid(format!("{at}.type"), json!(ty), msg));
            }
            if !ty.contains('/') && !LIMIT_TYPES.contains(&ty) {
                errs.push(FieldError::invalid(format!("{at}.type"), json!(ty), "must be a standard limit type or fully qualified"));
            }
            if seen.contains(&ty) {
                errs.push(FieldError::duplicate(format!("{at}.type"), json!(ty)));
            }
            seen.push(ty);
            validate_limit_item(item, &at, &mut errs);
        }
        errs
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }
}

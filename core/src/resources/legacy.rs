//! The versions kube v1.25 stopped serving that v1.20 components still ask for, as kube
//! v1.21–v1.24 served them: `policy/v1beta1` poddisruptionbudgets, `batch/v1beta1` cronjobs and
//! `discovery.k8s.io/v1beta1` endpointslices. Off by default; `--runtime-config` turns them on
//! (see `runtime_config.rs`). Each is stored as its v1 object, and its rules are the v1 kind's,
//! applied to the object converted to v1 (kube's `pkg/apis/*/v1beta1/conversion.go`).

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::{info, serve, status_subresource};
use crate::auth::UserInfo;
use crate::catalog::{FieldName, GracefulDelete, Lifecycle, Resource, ResourceInfo, Strategy};
use crate::status::FieldError;
use crate::table::Column;
use crate::validation::NameCheck;

/// A kind served at an older version: stored as `stored` (its v1 form), converted by `up` and
/// `down`, ruled by the v1 kind's strategy.
struct OlderVersion<S> {
    inner: S,
    group: String,
    stored: String,
    served: &'static str,
    up: fn(&mut Map<String, Value>),
    down: fn(&mut Map<String, Value>),
}

impl<S> OlderVersion<S> {
    fn to_stored(&self, mut obj: Value) -> Value {
        if let Some(m) = obj.as_object_mut() {
            (self.up)(m);
            m.insert("apiVersion".into(), json!(format!("{}/{}", self.group, self.stored)));
        }
        obj
    }

    fn to_served(&self, mut obj: Value) -> Value {
        if let Some(m) = obj.as_object_mut() {
            (self.down)(m);
            m.insert("apiVersion".into(), json!(format!("{}/{}", self.group, self.served)));
        }
        obj
    }

    /// Runs `f` on the object as stored, and turns the result back into the served form.
    fn as_stored(&self, obj: &mut Value, f: impl FnOnce(&mut Value)) {
        let mut stored = self.to_stored(obj.take());
        f(&mut stored);
        *obj = self.to_served(stored);
    }
}

impl<S: Strategy> Strategy for OlderVersion<S> {
    fn stored_as_served(&self) -> bool {
        false
    }

    fn served_from_stored(&self, stored: Value) -> Value {
        self.to_served(stored)
    }

    fn stored_from_served(&self, served: &Value) -> Option<Value> {
        Some(self.to_stored(served.clone()))
    }

    fn default(&self, obj: &mut Value) {
        self.as_stored(obj, |o| self.inner.default(o));
    }

    fn lifecycle(&self) -> Lifecycle {
        self.inner.lifecycle()
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        self.as_stored(obj, |o| self.inner.prepare_for_create(o));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        self.inner.validate(&self.to_stored(obj.clone()))
    }

    fn name_check(&self) -> NameCheck {
        self.inner.name_check()
    }

    fn finalize_create(&self, obj: &mut Value) {
        self.as_stored(obj, |o| self.inner.finalize_create(o));
    }

    fn record_requester(&self, obj: &mut Value, user: &UserInfo) {
        self.as_stored(obj, |o| self.inner.record_requester(o, user));
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let old = self.to_stored(old.clone());
        self.as_stored(new, |n| self.inner.prepare_for_update(n, &old));
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        self.inner.validate_update(&self.to_stored(new.clone()), &self.to_stored(old.clone()))
    }

    fn prepare_for_subresource_update(&self, subresource: &str, new: &mut Value, old: &Value) {
        let old = self.to_stored(old.clone());
        self.as_stored(new, |n| self.inner.prepare_for_subresource_update(subresource, n, &old));
    }

    fn validate_subresource_update(&self, subresource: &str, new: &Value, old: &Value) -> Vec<FieldError> {
        self.inner.validate_subresource_update(subresource, &self.to_stored(new.clone()), &self.to_stored(old.clone()))
    }

    fn allow_create_on_update(&self) -> bool {
        self.inner.allow_create_on_update()
    }

    fn allow_unconditional_update(&self) -> bool {
        self.inner.allow_unconditional_update()
    }

    fn graceful_delete(&self, obj: &Value, grace: Option<i64>) -> GracefulDelete {
        self.inner.graceful_delete(&self.to_stored(obj.clone()), grace)
    }

    fn prepare_for_delete(&self, obj: &mut Value, now: Timestamp) {
        self.as_stored(obj, |o| self.inner.prepare_for_delete(o, now));
    }

    fn default_propagation(&self) -> &'static str {
        self.inner.default_propagation()
    }

    fn columns(&self) -> &'static [Column] {
        self.inner.columns()
    }

    fn column_definitions(&self) -> Vec<Value> {
        self.inner.column_definitions()
    }

    fn row(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        self.inner.row(&self.to_stored(obj.clone()), now)
    }

    fn selectable_fields(&self) -> &[FieldName] {
        self.inner.selectable_fields()
    }

    fn field_path<'a>(&self, field: &'a str) -> &'a str {
        self.inner.field_path(field)
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        self.inner.field_value(&self.to_stored(obj.clone()), field)
    }
}

/// The `v1beta1` resource of a kind whose v1 resource is `v1`, with the warning kube v1.21–v1.24
/// sent with every answer.
fn older<S: Strategy + 'static>(
    v1: &ResourceInfo,
    inner: S,
    up: fn(&mut Map<String, Value>),
    down: fn(&mut Map<String, Value>),
    deprecation: &'static str,
) -> Resource {
    let mut i = info(&v1.group, "v1beta1", &v1.kind, &v1.resource, v1.namespaced);
    i.short_names = v1.short_names.clone();
    i.categories = v1.categories.clone();
    if v1.subresource("status").is_some() {
        i.subresources = vec![status_subresource(&i)];
    }
    i.stored_as = Some((v1.group.clone(), v1.version.clone()));
    i.deprecation = Some(deprecation.into());
    serve(i, OlderVersion { inner, group: v1.group.clone(), stored: v1.version.clone(), served: "v1beta1", up, down })
}

/// `policy/v1beta1` poddisruptionbudgets.
pub fn pod_disruption_budgets(v1: &ResourceInfo, inner: impl Strategy + 'static) -> Resource {
    older(
        v1,
        inner,
        |m| budget_selector(m, v1beta1_selector_to_v1),
        |m| budget_selector(m, v1_selector_to_v1beta1),
        "policy/v1beta1 PodDisruptionBudget is deprecated in v1.21+, unavailable in v1.25+; use policy/v1 PodDisruptionBudget",
    )
}

/// `batch/v1beta1` cronjobs: the same fields as v1.
pub fn cron_jobs(v1: &ResourceInfo, inner: impl Strategy + 'static) -> Resource {
    older(v1, inner, |_| {}, |_| {}, "batch/v1beta1 CronJob is deprecated in v1.21+, unavailable in v1.25+; use batch/v1 CronJob")
}

/// `discovery.k8s.io/v1beta1` endpointslices.
pub fn endpoint_slices(v1: &ResourceInfo, inner: impl Strategy + 'static) -> Resource {
    older(
        v1,
        inner,
        |m| each_endpoint(m, topology_to_v1),
        |m| each_endpoint(m, topology_to_v1beta1),
        "discovery.k8s.io/v1beta1 EndpointSlice is deprecated in v1.21+, unavailable in v1.25+; use discovery.k8s.io/v1 EndpointSlice",
    )
}

/// The label of the selector expression that says what a v1beta1 budget's selector meant.
const EMPTY_SELECTOR_MATCH: &str = "pdb.kubernetes.io/deprecated-v1beta1-empty-selector-match";

fn budget_selector(m: &mut Map<String, Value>, convert: fn(&mut Value)) {
    if let Some(selector) = m.get_mut("spec").and_then(|s| s.get_mut("selector")) {
        convert(selector);
    }
}

fn only_expression(selector: &Value, operator: &str) -> bool {
    *selector == json!({"matchExpressions": [{"key": EMPTY_SELECTOR_MATCH, "operator": operator}]})
}

/// In v1beta1 an empty selector matches no pod, in v1 every pod: kube stores v1beta1's empty
/// selector as an `Exists` on a label no pod has, and v1's as a `DoesNotExist` on it.
fn v1beta1_selector_to_v1(selector: &mut Value) {
    if *selector == json!({}) {
        *selector = json!({"matchExpressions": [{"key": EMPTY_SELECTOR_MATCH, "operator": "Exists"}]});
    } else if only_expression(selector, "DoesNotExist") {
        *selector = json!({});
    } else if let Some(Value::Array(exprs)) = selector.get_mut("matchExpressions") {
        exprs.retain(|e| e.get("key").and_then(Value::as_str) != Some(EMPTY_SELECTOR_MATCH));
    }
}

fn v1_selector_to_v1beta1(selector: &mut Value) {
    if only_expression(selector, "Exists") {
        *selector = json!({});
    } else if *selector == json!({}) {
        *selector = json!({"matchExpressions": [{"key": EMPTY_SELECTOR_MATCH, "operator": "DoesNotExist"}]});
    }
}

const ZONE: &str = "topology.kubernetes.io/zone";
const HOSTNAME: &str = "kubernetes.io/hostname";

fn each_endpoint(m: &mut Map<String, Value>, convert: fn(&mut Map<String, Value>)) {
    if let Some(Value::Array(endpoints)) = m.get_mut("endpoints") {
        endpoints.iter_mut().filter_map(Value::as_object_mut).for_each(convert);
    }
}

/// v1beta1's `topology` becomes v1's `zone`, `nodeName` (from the hostname, unless set and
/// different) and `deprecatedTopology` (the rest).
fn topology_to_v1(e: &mut Map<String, Value>) {
    let Some(Value::Object(mut topology)) = e.remove("topology") else { return };
    if let Some(zone) = topology.remove(ZONE) {
        e.insert("zone".into(), zone);
    }
    if let Some(host) = topology.get(HOSTNAME).cloned() {
        match e.get("nodeName") {
            None => {
                e.insert("nodeName".into(), host);
                topology.remove(HOSTNAME);
            }
            Some(n) if *n == host => {
                topology.remove(HOSTNAME);
            }
            Some(_) => {}
        }
    }
    if !topology.is_empty() {
        e.insert("deprecatedTopology".into(), Value::Object(topology));
    }
}

/// v1's `deprecatedTopology`, `zone` and `nodeName` become v1beta1's `topology`.
fn topology_to_v1beta1(e: &mut Map<String, Value>) {
    let deprecated = e.remove("deprecatedTopology");
    let zone = e.remove("zone");
    if deprecated.is_none() && zone.is_none() && e.get("nodeName").is_none() {
        return;
    }
    let mut topology = match deprecated {
        Some(Value::Object(t)) => t,
        _ => Map::new(),
    };
    if let Some(z) = zone {
        topology.insert(ZONE.into(), z);
    }
    if let Some(n) = e.get("nodeName").cloned() {
        topology.entry(HOSTNAME).or_insert(n);
    }
    e.insert("topology".into(), Value::Object(topology));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(v1beta1: Value, v1: Value, to_v1: fn(&mut Map<String, Value>), to_v1beta1: fn(&mut Map<String, Value>)) {
        let mut up = v1beta1.clone();
        to_v1(up.as_object_mut().unwrap());
        assert_eq!(up, v1, "v1beta1 -> v1");
        to_v1beta1(up.as_object_mut().unwrap());
        assert_eq!(up, v1beta1, "v1 -> v1beta1");
    }

    #[test]
    fn a_v1beta1_budgets_empty_selector_matches_no_pod_in_v1() {
        let budget = |selector: Value| json!({"spec": {"selector": selector}});
        let up = |m: &mut Map<String, Value>| budget_selector(m, v1beta1_selector_to_v1);
        let down = |m: &mut Map<String, Value>| budget_selector(m, v1_selector_to_v1beta1);
        round_trip(budget(json!({})), budget(json!({"matchExpressions": [{"key": EMPTY_SELECTOR_MATCH, "operator": "Exists"}]})), up, down);
        round_trip(budget(json!({"matchExpressions": [{"key": EMPTY_SELECTOR_MATCH, "operator": "DoesNotExist"}]})), budget(json!({})), up, down);
        round_trip(budget(json!({"matchLabels": {"app": "a"}})), budget(json!({"matchLabels": {"app": "a"}})), up, down);
    }

    #[test]
    fn endpoint_topology_becomes_zone_node_name_and_deprecated_topology() {
        let slice = |e: Value| json!({"endpoints": [e]});
        let up = |m: &mut Map<String, Value>| each_endpoint(m, topology_to_v1);
        let down = |m: &mut Map<String, Value>| each_endpoint(m, topology_to_v1beta1);
        round_trip(
            slice(json!({"addresses": ["10.0.0.1"], "nodeName": "n1", "topology": {ZONE: "z1", HOSTNAME: "n1", "rack": "r"}})),
            slice(json!({"addresses": ["10.0.0.1"], "zone": "z1", "nodeName": "n1", "deprecatedTopology": {"rack": "r"}})),
            up,
            down,
        );
        round_trip(slice(json!({"addresses": ["10.0.0.1"]})), slice(json!({"addresses": ["10.0.0.1"]})), up, down);
        let mut beta = slice(json!({"addresses": ["a"], "topology": {HOSTNAME: "n1"}}));
        up(beta.as_object_mut().unwrap());
        assert_eq!(beta, slice(json!({"addresses": ["a"], "nodeName": "n1"})), "the hostname is the node's name");
        let mut v1 = slice(json!({"addresses": ["a"], "nodeName": "n1"}));
        down(v1.as_object_mut().unwrap());
        assert_eq!(v1, slice(json!({"addresses": ["a"], "nodeName": "n1", "topology": {HOSTNAME: "n1"}})));
    }
}

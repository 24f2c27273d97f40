//! PodNodeSelector (off by default): a new pod's `nodeSelector` gets its namespace's node
//! selector (the `scheduler.alpha.kubernetes.io/node-selector` annotation, `key=value,...`;
//! without it the configuration's `clusterDefaultNodeSelector`), refused with kube's 403 when
//! they conflict, and must stay within the namespace's whitelist, which the configuration
//! gives by namespace name:
//!
//! ```yaml
//! podNodeSelectorPluginConfig:
//!   clusterDefaultNodeSelector: env=prod
//!   dev: env=dev,zone=a
//! ```
//!
//! As kube, the configuration is read leniently (what does not decode is left out) and its
//! selectors are parsed when a pod needs them: a bad one, like a bad annotation, is a 500
//! whose message is Go's error.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{Attributes, Lookup, Operation, Pending, Plugin};
use crate::meta;
use crate::rand::Rng;
use crate::status::{ApiError, GroupResource, quote};

const ANNOTATION: &str = "scheduler.alpha.kubernetes.io/node-selector";
const CLUSTER_DEFAULT: &str = "clusterDefaultNodeSelector";

#[derive(Debug, Default)]
pub struct PodNodeSelector {
    /// `podNodeSelectorPluginConfig`: the cluster's default and each namespace's whitelist.
    selectors: BTreeMap<String, String>,
}

type Labels = BTreeMap<String, String>;

/// kube's `ConvertSelectorToLabelsMap`: `key=value` pairs, comma separated, each checked as a
/// label (Go's error otherwise).
fn parse(selector: &str) -> Result<Labels, String> {
    let mut labels = Labels::new();
    if selector.is_empty() {
        return Ok(labels);
    }
    for label in selector.split(',') {
        let parts: Vec<&str> = label.split('=').collect();
        let [key, value] = parts[..] else { return Err(format!("invalid selector: [{}]", parts.join(" "))) };
        let (key, value) = (key.trim(), value.trim());
        let bad = crate::validation::qualified_name(key);
        if !bad.is_empty() {
            return Err(format!("<nil>: Invalid value: {}: {}", quote(key), bad.join("; ")));
        }
        let bad = crate::validation::label_value(value);
        if !bad.is_empty() {
            return Err(format!("[{key}]: Invalid value: {}: {}", quote(value), bad.join("; ")));
        }
        labels.insert(key.to_string(), value.to_string());
    }
    Ok(labels)
}

/// A Go error, not an API status: kube answers it as a 500 of its message.
fn go_error(message: String) -> ApiError {
    ApiError::new(500, "", message)
}

fn node_selector(pod: &Value) -> Labels {
    meta::string_map(meta::at(pod, &["spec", "nodeSelector"])).into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

impl PodNodeSelector {
    /// The plugin with its configuration (YAML or JSON); what does not decode is left out, as
    /// kube leaves it.
    pub fn new(config: Option<&[u8]>) -> PodNodeSelector {
        let tree: Value = config.and_then(|c| serde_norway::from_slice(c).ok()).unwrap_or_default();
        // Go's JSON decoder matches the field's name in any case, the last one given winning.
        let named = tree.as_object().and_then(|fields| fields.iter().rfind(|(k, _)| k.eq_ignore_ascii_case("podNodeSelectorPluginConfig")));
        let config = named.map(|(_, v)| v);
        let entries = config.and_then(Value::as_object).into_iter().flatten();
        let selectors = entries.filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect();
        PodNodeSelector { selectors }
    }

    /// The namespace's node selector: its annotation's, even empty, else the cluster's
    /// default (kube's 500 for a namespace that does not exist).
    fn namespace_selector(&self, a: &Attributes) -> Result<Labels, ApiError> {
        let namespace = match &a.found.namespace {
            Some((name, Some(ns))) if name == a.namespace => ns,
            _ => return Err(ApiError::internal(format!("namespace {} does not exist", a.namespace))),
        };
        let selector = match meta::str_at(namespace, &["metadata", "annotations", ANNOTATION]) {
            Some(annotated) => annotated,
            None => self.selectors.get(CLUSTER_DEFAULT).map_or("", String::as_str),
        };
        parse(selector).map_err(go_error)
    }

    /// kube's `Validate`: the pod's selector agrees with its namespace's and is within the
    /// namespace's whitelist.
    fn check(&self, a: &Attributes, pod: &Value, namespace: &Labels) -> Result<(), ApiError> {
        agrees(pod, namespace)?;
        let whitelist = parse(self.selectors.get(a.namespace).map_or("", String::as_str)).map_err(go_error)?;
        if !whitelist.is_empty() && node_selector(pod).iter().any(|(k, v)| whitelist.get(k) != Some(v)) {
            return Err(forbidden(pod, "pod node label selector labels conflict with its namespace whitelist"));
        }
        Ok(())
    }
}

/// kube's 403 for the pod, by the name it has (none for a name to be generated).
fn forbidden(pod: &Value, why: &str) -> ApiError {
    ApiError::forbidden(&GroupResource::new("", "pods"), meta::name(pod), why)
}

/// The pod's selector and its namespace's give no label two values.
fn agrees(pod: &Value, namespace: &Labels) -> Result<(), ApiError> {
    let own = node_selector(pod);
    if namespace.iter().any(|(k, v)| own.get(k).is_some_and(|mine| mine != v)) {
        return Err(forbidden(pod, "pod node label selector conflicts with its namespace node label selector"));
    }
    Ok(())
}

impl Plugin for PodNodeSelector {
    fn name(&self) -> &'static str {
        "PodNodeSelector"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Create
    }

    fn lookups(&self, request: &Pending) -> Vec<Lookup> {
        request.pods_namespace()
    }

    fn admit(&self, a: &Attributes, obj: Option<&mut Value>, _rng: &mut Rng) -> Result<(), ApiError> {
        let Some(pod) = obj.filter(|_| a.is_core("pods")) else { return Ok(()) };
        let namespace = self.namespace_selector(a)?;
        agrees(pod, &namespace)?;
        let mut merged = namespace.clone();
        merged.extend(node_selector(pod));
        let spec = meta::object_at(pod, &["spec"]);
        if merged.is_empty() {
            spec.remove("nodeSelector");
        } else {
            spec.insert("nodeSelector".into(), Value::Object(merged.into_iter().map(|(k, v)| (k, Value::String(v))).collect::<Map<_, _>>()));
        }
        self.check(a, pod, &namespace)
    }

    fn validate(&self, a: &Attributes, obj: Option<&Value>, _warnings: &mut Vec<String>) -> Result<(), ApiError> {
        let Some(pod) = obj.filter(|_| a.is_core("pods")) else { return Ok(()) };
        self.check(a, pod, &self.namespace_selector(a)?)
    }
}

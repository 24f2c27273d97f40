//! PodTolerationRestriction (off by default): a new pod gets its namespace's default
//! tolerations (the `scheduler.alpha.kubernetes.io/defaultTolerations` annotation, a JSON
//! list, else the configuration's `default`), every pod that is not BestEffort tolerates
//! memory pressure, and a pod's tolerations must be within its namespace's whitelist
//! (`scheduler.alpha.kubernetes.io/tolerationsWhitelist`, else the configuration's
//! `whitelist`). An annotation present but empty gives no tolerations, and overrides the
//! configuration. The configuration is `podtolerationrestriction.admission.k8s.io/v1alpha1`
//! `Configuration`, optional.
//!
//! kube's errors here are Go errors, not API statuses: a bad annotation or a pod outside the
//! whitelist is a 500 whose message is the error's.

use serde_json::{Map, Value};

use super::tolerations::{self, toleration};
use super::{Attributes, Lookup, Operation, Pending, Plugin};
use crate::config_file::{self, Decoder};
use crate::meta;
use crate::rand::Rng;
use crate::status::{ApiError, GroupResource};

const DEFAULTS: &str = "scheduler.alpha.kubernetes.io/defaultTolerations";
const WHITELIST: &str = "scheduler.alpha.kubernetes.io/tolerationsWhitelist";
const SCHEME: &str = "k8s.io/kubernetes/plugin/pkg/admission/podtolerationrestriction/config.go:37";

#[derive(Debug, Default)]
pub struct PodTolerationRestriction {
    /// The cluster's default tolerations, for namespaces without the annotation.
    default: Vec<Value>,
    /// The cluster's whitelist, likewise.
    whitelist: Vec<Value>,
}

/// Go's error for JSON of the wrong type (`json: cannot unmarshal ...`).
fn unmarshal_error(v: &Value, into: &str) -> String {
    format!("json: cannot unmarshal {} into {into}", config_file::json_kind(v))
}

/// Tolerations as Go's JSON decoder reads them into `[]v1.Toleration`: field names in any
/// case, others ignored, `null` for none; written back as Go writes them.
fn decode_tolerations(data: &str) -> Result<Vec<Value>, String> {
    let list: Value = serde_json::from_str(data).map_err(|e| crate::codec::go_json::syntax_error(data.as_bytes()).unwrap_or_else(|| e.to_string()))?;
    let items = match &list {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        other => return Err(unmarshal_error(other, "Go value of type []v1.Toleration")),
    };
    let mut out = Vec::new();
    let mut first_error = None;
    for item in items {
        let fields = match item {
            Value::Object(fields) => fields,
            Value::Null => &Map::new(),
            other => {
                first_error.get_or_insert_with(|| unmarshal_error(other, "Go value of type v1.Toleration"));
                continue;
            }
        };
        let field = |name: &str| fields.iter().rev().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v);
        let mut strings = [""; 4];
        let go_types = ["string", "v1.TolerationOperator", "string", "v1.TaintEffect"];
        for ((slot, name), go_type) in strings.iter_mut().zip(["key", "operator", "value", "effect"]).zip(go_types) {
            match field(name) {
                Some(Value::String(s)) => *slot = s,
                None | Some(Value::Null) => {}
                Some(other) => {
                    first_error.get_or_insert_with(|| unmarshal_error(other, &format!("Go struct field Toleration.{name} of type {go_type}")));
                }
            }
        }
        let seconds = match field("tolerationSeconds") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) if n.as_i64().is_some() => n.as_i64(),
            Some(other) => {
                // Go names the number it could not hold.
                let what = match other {
                    Value::Number(n) => format!("number {n}"),
                    other => config_file::json_kind(other).to_string(),
                };
                first_error.get_or_insert_with(|| format!("json: cannot unmarshal {what} into Go struct field Toleration.tolerationSeconds of type int64"));
                None
            }
        };
        let [key, operator, value, effect] = strings;
        out.push(toleration(key, operator, value, effect, seconds));
    }
    first_error.map_or(Ok(out), Err)
}

impl PodTolerationRestriction {
    /// The plugin with its configuration (none: no cluster defaults or whitelist), or kube's
    /// start-up error.
    pub fn new(config: Option<&[u8]>) -> Result<PodTolerationRestriction, String> {
        let Some(config) = config else { return Ok(PodTolerationRestriction::default()) };
        let init = |e: String| format!("couldn't init admission plugin \"PodTolerationRestriction\": {e}");
        let tree = config_file::read(config, "Configuration", &["podtolerationrestriction.admission.k8s.io/v1alpha1"], SCHEME).map_err(init)?;
        let mut d = Decoder::new(&tree);
        let root = d.root(&tree, "Configuration", &["apiVersion", "kind", "default", "whitelist"]);
        let mut lists = [Vec::new(), Vec::new()];
        for (list, field) in lists.iter_mut().zip(["default", "whitelist"]) {
            for (at, item) in d.items(&root, field, "[]v1.Toleration") {
                let t = d.object(Some(item), at, "Configuration", "Toleration", &["key", "operator", "value", "effect", "tolerationSeconds"]);
                let seconds = d.int64(&t, "tolerationSeconds");
                list.push(toleration(&d.string(&t, "key"), &d.string(&t, "operator"), &d.string(&t, "value"), &d.string(&t, "effect"), seconds));
            }
        }
        d.finish_leniently().map_err(init)?;
        let [default, whitelist] = lists;
        let mut errors = crate::resources::validate_tolerations(&default, "podtolerationrestriction.default");
        errors.extend(crate::resources::validate_tolerations(&whitelist, "podtolerationrestriction.whitelist"));
        if !errors.is_empty() {
            let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
            return Err(init(format!("invalid config: [{}]", shown.join(" "))));
        }
        Ok(PodTolerationRestriction { default, whitelist })
    }

    /// The tolerations of a namespace's annotation `key`: `None` without it (the cluster's
    /// apply); kube's 404 for a namespace that does not exist.
    fn annotated(a: &Attributes, key: &str) -> Result<Option<Vec<Value>>, ApiError> {
        let namespace = match &a.found.namespace {
            Some((name, Some(ns))) if name == a.namespace => ns,
            _ => return Err(ApiError::not_found(&GroupResource::new("", "namespaces"), a.namespace)),
        };
        match meta::str_at(namespace, &["metadata", "annotations", key]) {
            None => Ok(None),
            Some("") => Ok(Some(Vec::new())),
            Some(data) => decode_tolerations(data).map(Some).map_err(|e| ApiError::new(500, "", e)),
        }
    }

    /// A pod's tolerations must be within the whitelist (kube's `Validate`).
    fn check(&self, a: &Attributes, pod: &Value) -> Result<(), ApiError> {
        let own = meta::at(pod, &["spec", "tolerations"]).and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        if own.is_empty() {
            return Ok(());
        }
        let (whitelist, scope) = match Self::annotated(a, WHITELIST)? {
            Some(list) => (list, "namespace"),
            None => (self.whitelist.clone(), "cluster"),
        };
        if tolerations::within(own, &whitelist) {
            return Ok(());
        }
        let why = format!("pod tolerations (possibly merged with namespace default tolerations) conflict with its {scope} whitelist");
        Err(ApiError::new(500, "", why))
    }
}

impl Plugin for PodTolerationRestriction {
    fn name(&self) -> &'static str {
        "PodTolerationRestriction"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    fn lookups(&self, request: &Pending) -> Vec<Lookup> {
        request.pods_namespace()
    }

    fn admit(&self, a: &Attributes, obj: Option<&mut Value>, _rng: &mut Rng) -> Result<(), ApiError> {
        let Some(pod) = obj.filter(|_| a.is_core("pods")) else { return Ok(()) };
        let mut extra = Vec::new();
        if a.operation == Operation::Create {
            extra = Self::annotated(a, DEFAULTS)?.unwrap_or_else(|| self.default.clone());
        }
        let qos = meta::at(pod, &["status", "qosClass"]).and_then(Value::as_str).filter(|q| !q.is_empty());
        let best_effort = qos.unwrap_or_else(|| crate::resources::podspec::qos_class(pod.get("spec").unwrap_or(&Value::Null))) == "BestEffort";
        if !best_effort {
            extra.push(toleration("node.kubernetes.io/memory-pressure", "Exists", "", "NoSchedule", None));
        }
        if !extra.is_empty() {
            let spec = meta::object_at(pod, &["spec"]);
            let own = spec.get("tolerations").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
            let merged = tolerations::merge(own, &extra);
            spec.insert("tolerations".into(), Value::Array(merged));
        }
        self.check(a, pod)
    }

    fn validate(&self, a: &Attributes, obj: Option<&Value>, _warnings: &mut Vec<String>) -> Result<(), ApiError> {
        obj.filter(|_| a.is_core("pods")).map_or(Ok(()), |pod| self.check(a, pod))
    }
}

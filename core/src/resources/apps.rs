//! apps/v1: deployments, replicasets, statefulsets, daemonsets, controllerrevisions.

use serde_json::{Value, json};

use super::podspec::{self, SpecOf};
use super::{info, scale_subresource, serve, status_subresource};
use crate::catalog::{Lifecycle, Resource, ScaleOf, Strategy};
use crate::meta;
use crate::status::{ApiError, FieldError};
use crate::table::{self, Column, Describe};

pub fn resources() -> Vec<Resource> {
    let workload = |kind: &'static str, resource_name: &'static str, short: &'static [&'static str], scale: bool, w: Kind| {
        let mut i = info("apps", "v1", kind, resource_name, true);
        i.short_names = crate::catalog::names(short);
        i.categories = crate::catalog::names(&["all"]);
        i.subresources = vec![status_subresource(&i)];
        if scale {
            i.subresources.push(scale_subresource());
        }
        serve(i, Workload(w))
    };
    let mut revisions = info("apps", "v1", "ControllerRevision", "controllerrevisions", true);
    revisions.singular = "controllerrevision".into();
    vec![
        workload("Deployment", "deployments", &["deploy"], true, Kind::Deployment),
        workload("ReplicaSet", "replicasets", &["rs"], true, Kind::ReplicaSet),
        workload("StatefulSet", "statefulsets", &["sts"], true, Kind::StatefulSet),
        workload("DaemonSet", "daemonsets", &["ds"], false, Kind::DaemonSet),
        serve(revisions, ControllerRevisions),
    ]
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Deployment,
    ReplicaSet,
    StatefulSet,
    DaemonSet,
}

struct Workload(Kind);

const DEPLOYMENT_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Ready", "string", Describe::Text("Number of the pod with ready state")),
    Column::new("Up-to-date", "integer", Describe::Field("io.k8s.api.apps.v1.DeploymentStatus", "updatedReplicas")),
    Column::new("Available", "integer", Describe::Field("io.k8s.api.apps.v1.DeploymentStatus", "availableReplicas")),
    Column::AGE,
    Column::CONTAINERS,
    Column::IMAGES,
    Column::new("Selector", "string", Describe::Field("io.k8s.api.apps.v1.DeploymentSpec", "selector")).wide(),
];

const REPLICASET_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Desired", "integer", Describe::Field("io.k8s.api.apps.v1.ReplicaSetSpec", "replicas")),
    Column::new("Current", "integer", Describe::Field("io.k8s.api.apps.v1.ReplicaSetStatus", "replicas")),
    Column::new("Ready", "integer", Describe::Field("io.k8s.api.apps.v1.ReplicaSetStatus", "readyReplicas")),
    Column::AGE,
    Column::CONTAINERS,
    Column::IMAGES,
    Column::new("Selector", "string", Describe::Field("io.k8s.api.apps.v1.ReplicaSetSpec", "selector")).wide(),
];

const STATEFULSET_COLUMNS: &[Column] =
    &[Column::NAME, Column::new("Ready", "string", Describe::Text("Number of the pod with ready state")), Column::AGE, Column::CONTAINERS, Column::IMAGES];

const DS_STATUS: &str = "io.k8s.api.apps.v1.DaemonSetStatus";
const DAEMONSET_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Desired", "integer", Describe::Field(DS_STATUS, "desiredNumberScheduled")),
    Column::new("Current", "integer", Describe::Field(DS_STATUS, "currentNumberScheduled")),
    Column::new("Ready", "integer", Describe::Field(DS_STATUS, "numberReady")),
    Column::new("Up-to-date", "integer", Describe::Field(DS_STATUS, "updatedNumberScheduled")),
    Column::new("Available", "integer", Describe::Field(DS_STATUS, "numberAvailable")),
    Column::new("Node Selector", "string", Describe::Field("io.k8s.api.core.v1.PodSpec", "nodeSelector")),
    Column::AGE,
    Column::CONTAINERS,
    Column::IMAGES,
    Column::new("Selector", "string", Describe::Field("io.k8s.api.apps.v1.DaemonSetSpec", "selector")).wide(),
];

/// Defaults of a pod template at `spec.template`.
pub(super) fn default_template(obj: &mut Value, path: &[&str]) {
    let mut p = path.to_vec();
    p.push("spec");
    podspec::default_spec(meta::object_at(obj, &p));
}

/// Template checks shared by the workloads: selector, labels, pod spec, restart policy.
pub(super) fn validate_template(obj: &Value, path: &[&str], restart: &[&str]) -> Vec<FieldError> {
    let mut spec_path = path.to_vec();
    spec_path.push("spec");
    let dotted = spec_path.join(".");
    let mut errs = podspec::validate_spec(meta::at(obj, &spec_path).unwrap_or(&Value::Null), &dotted, SpecOf::Template);
    if let Some(rp) = meta::at(obj, &[&spec_path[..], &["restartPolicy"]].concat())
        && !restart.contains(&rp.as_str().unwrap_or_default())
    {
        errs.push(FieldError::not_supported(format!("{dotted}.restartPolicy"), rp.clone(), restart));
    }
    let mut labels_path = path.to_vec();
    labels_path.extend(["metadata", "labels"]);
    errs.extend(crate::validation::labels(meta::at(obj, &labels_path), &labels_path.join(".")));
    errs
}

/// `spec.updateStrategy` defaults of StatefulSets and DaemonSets: type `RollingUpdate`, and
/// then these `rollingUpdate` fields.
fn default_update_strategy(spec: &mut serde_json::Map<String, Value>, rolling: &[(&str, Value)]) {
    let Value::Object(us) = spec.entry("updateStrategy").or_insert_with(|| json!({})) else { return };
    us.entry("type").or_insert_with(|| json!("RollingUpdate"));
    if us.get("type").and_then(Value::as_str) != Some("RollingUpdate") {
        return;
    }
    if let Value::Object(ru) = us.entry("rollingUpdate").or_insert_with(|| json!({})) {
        for (field, value) in rolling {
            ru.entry(field.to_string()).or_insert_with(|| value.clone());
        }
    }
}

impl Workload {
    fn template_row(obj: &Value) -> (Value, Value, Value) {
        let (c, i) = table::containers_and_images(meta::at(obj, &["spec", "template", "spec"]));
        (c, i, json!(table::selector_string(meta::at(obj, &["spec", "selector"]))))
    }
}

impl Strategy for Workload {
    fn default(&self, obj: &mut Value) {
        let spec = meta::object_at(obj, &["spec"]);
        match self.0 {
            Kind::Deployment => {
                spec.entry("replicas").or_insert_with(|| json!(1));
                let strategy = spec.entry("strategy").or_insert_with(|| json!({}));
                if let Value::Object(s) = strategy {
                    s.entry("type").or_insert_with(|| json!("RollingUpdate"));
                    if s.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
                        let ru = s.entry("rollingUpdate").or_insert_with(|| json!({}));
                        if let Value::Object(ru) = ru {
                            ru.entry("maxUnavailable").or_insert_with(|| json!("25%"));
                            ru.entry("maxSurge").or_insert_with(|| json!("25%"));
                        }
                    }
                }
                spec.entry("revisionHistoryLimit").or_insert_with(|| json!(10));
                spec.entry("progressDeadlineSeconds").or_insert_with(|| json!(600));
            }
            Kind::ReplicaSet => {
                spec.entry("replicas").or_insert_with(|| json!(1));
            }
            Kind::StatefulSet => {
                spec.entry("replicas").or_insert_with(|| json!(1));
                spec.entry("podManagementPolicy").or_insert_with(|| json!("OrderedReady"));
                default_update_strategy(spec, &[("partition", json!(0))]);
                spec.entry("revisionHistoryLimit").or_insert_with(|| json!(10));
                spec.entry("persistentVolumeClaimRetentionPolicy").or_insert_with(|| json!({"whenDeleted": "Retain", "whenScaled": "Retain"}));
            }
            Kind::DaemonSet => {
                default_update_strategy(spec, &[("maxUnavailable", json!(1)), ("maxSurge", json!(0))]);
                spec.entry("revisionHistoryLimit").or_insert_with(|| json!(10));
            }
        }
        default_template(obj, &["spec", "template"]);
    }

    fn lifecycle(&self) -> Lifecycle {
        Lifecycle::StatusAndGeneration
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        podspec::validate_template_selector(obj, &mut errs);
        errs.extend(validate_template(obj, &["spec", "template"], &["Always"]));
        if let Some(r) = meta::at(obj, &["spec", "replicas"]).and_then(Value::as_i64)
            && r < 0
        {
            errs.push(FieldError::invalid("spec.replicas", json!(r), "must be greater than or equal to 0"));
        }
        if self.0 == Kind::Deployment {
            let ty = meta::at(obj, &["spec", "strategy", "type"]).cloned().unwrap_or(json!("RollingUpdate"));
            if !["Recreate", "RollingUpdate"].contains(&ty.as_str().unwrap_or_default()) {
                errs.push(FieldError::not_supported("spec.strategy.type", ty.clone(), &["Recreate", "RollingUpdate"]));
            }
            if ty == "Recreate" && meta::at(obj, &["spec", "strategy", "rollingUpdate"]).is_some() {
                errs.push(FieldError::forbidden("spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'"));
            }
        }
        match self.0 {
            Kind::StatefulSet => validate_statefulset_policies(obj, &mut errs),
            Kind::DaemonSet => {
                let ty = meta::str_at(obj, &["spec", "updateStrategy", "type"]).unwrap_or_default();
                if !["RollingUpdate", "OnDelete"].contains(&ty) {
                    errs.push(FieldError::not_supported(
                        "spec.updateStrategy",
                        json!(strategy_struct("DaemonSetUpdateStrategy", ty)),
                        &["RollingUpdate", "OnDelete"],
                    ));
                }
            }
            _ => {}
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if let Some(e) = crate::validation::immutable(new, old, &["spec", "selector"], "spec.selector") {
            errs.push(e);
        }
        errs
    }

    fn columns(&self) -> &'static [Column] {
        match self.0 {
            Kind::Deployment => DEPLOYMENT_COLUMNS,
            Kind::ReplicaSet => REPLICASET_COLUMNS,
            Kind::StatefulSet => STATEFULSET_COLUMNS,
            Kind::DaemonSet => DAEMONSET_COLUMNS,
        }
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let i = |p: &[&str]| json!(table::int_at(obj, p));
        let name = json!(meta::name(obj));
        let age = table::age(obj, now);
        let (containers, images, selector) = Self::template_row(obj);
        match self.0 {
            Kind::Deployment => vec![
                name,
                json!(format!("{}/{}", table::int_at(obj, &["status", "readyReplicas"]), table::int_at(obj, &["spec", "replicas"]))),
                i(&["status", "updatedReplicas"]),
                i(&["status", "availableReplicas"]),
                age,
                containers,
                images,
                selector,
            ],
            Kind::ReplicaSet => {
                vec![name, i(&["spec", "replicas"]), i(&["status", "replicas"]), i(&["status", "readyReplicas"]), age, containers, images, selector]
            }
            Kind::StatefulSet => vec![
                name,
                json!(format!("{}/{}", table::int_at(obj, &["status", "readyReplicas"]), table::int_at(obj, &["spec", "replicas"]))),
                age,
                containers,
                images,
            ],
            Kind::DaemonSet => vec![
                name,
                i(&["status", "desiredNumberScheduled"]),
                i(&["status", "currentNumberScheduled"]),
                i(&["status", "numberReady"]),
                i(&["status", "updatedNumberScheduled"]),
                i(&["status", "numberAvailable"]),
                json!(table::format_labels(meta::at(obj, &["spec", "template", "spec", "nodeSelector"]))),
                age,
                containers,
                images,
                selector,
            ],
        }
    }

    fn scale_of(&self, obj: &Value) -> Result<ScaleOf, ApiError> {
        let selector = crate::selector::LabelSelector::from_object(meta::at(obj, &["spec", "selector"]).unwrap_or(&Value::Null))
            .ok()
            .map(|_| table::selector_string(meta::at(obj, &["spec", "selector"])))
            .filter(|s| s != "<none>")
            .unwrap_or_default();
        Ok(super::scale(obj, &selector))
    }
}

struct ControllerRevisions;

const REVISION_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Controller", "string", Describe::Text("Controller of the object")),
    Column::new("Revision", "integer", Describe::Field("io.k8s.api.apps.v1.ControllerRevision", "revision")),
    Column::AGE,
];

impl Strategy for ControllerRevisions {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if obj.get("revision").and_then(Value::as_i64).unwrap_or(0) < 0 {
            errs.push(FieldError::invalid("revision", obj["revision"].clone(), "must be greater than or equal to 0"));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if let Some(e) = crate::validation::immutable(new, old, &["data"], "data") {
            errs.push(e);
        }
        errs
    }

    fn columns(&self) -> &'static [Column] {
        REVISION_COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let controller = meta::at(obj, &["metadata", "ownerReferences"])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
            .map(|r| {
                let kind = r.get("kind").and_then(Value::as_str).unwrap_or_default().to_lowercase();
                let group = r.get("apiVersion").and_then(Value::as_str).and_then(|a| a.split_once('/')).map(|(g, _)| g).unwrap_or("");
                let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
                if group.is_empty() { format!("{kind}/{name}") } else { format!("{kind}.{group}/{name}") }
            })
            .unwrap_or_else(|| "<none>".into());
        vec![json!(meta::name(obj)), json!(controller), json!(table::int_at(obj, &["revision"])), table::age(obj, now)]
    }
}

/// How Go prints an update strategy struct without `rollingUpdate` (kube's bad value for one).
fn strategy_struct(kind: &str, ty: &str) -> String {
    let rolling = if kind == "DaemonSetUpdateStrategy" { "RollingUpdateDaemonSet" } else { "RollingUpdateStatefulSetStrategy" };
    format!("apps.{kind}{{Type:{}, RollingUpdate:(*apps.{rolling})(nil)}}", crate::status::quote(ty))
}

/// A StatefulSet's pod management, update strategy and claim retention policies, as kube 1.33
/// checks them.
fn validate_statefulset_policies(obj: &Value, errs: &mut Vec<FieldError>) {
    match meta::str_at(obj, &["spec", "podManagementPolicy"]).unwrap_or_default() {
        "" => errs.push(FieldError::required("spec.podManagementPolicy", "")),
        "OrderedReady" | "Parallel" => {}
        other => errs.push(FieldError::invalid("spec.podManagementPolicy", json!(other), "must be 'OrderedReady' or 'Parallel'")),
    }
    match meta::str_at(obj, &["spec", "updateStrategy", "type"]).unwrap_or_default() {
        "" => errs.push(FieldError::required("spec.updateStrategy", "")),
        "RollingUpdate" | "OnDelete" => {}
        other if meta::at(obj, &["spec", "updateStrategy", "rollingUpdate"]).is_none() => errs.push(FieldError::invalid(
            "spec.updateStrategy",
            json!(strategy_struct("StatefulSetUpdateStrategy", other)),
            "must be 'RollingUpdate' or 'OnDelete'",
        )),
        other => errs.push(FieldError::invalid("spec.updateStrategy", json!(other), "must be 'RollingUpdate' or 'OnDelete'")),
    }
    for when in ["whenDeleted", "whenScaled"] {
        if let Some(policy) = meta::at(obj, &["spec", "persistentVolumeClaimRetentionPolicy", when]) {
            crate::validation::supported(errs, Some(policy), &format!("spec.persistentVolumeClaimRetentionPolicy.{when}"), &["Retain", "Delete"]);
        }
    }
}

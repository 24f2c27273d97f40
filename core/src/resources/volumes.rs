//! core/v1 persistentvolumes and persistentvolumeclaims (+`status`): kube's
//! `pkg/registry/core/persistentvolume[claim]` strategies and the main rules of
//! `ValidatePersistentVolume[Claim]`.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::{info, serve, status_subresource};
use crate::catalog::{Lifecycle, Resource, Strategy};
use crate::meta;
use crate::quantity::Quantity;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};
use crate::validation::{dns1123_subdomain, label_selector, supported};

pub fn resources() -> Vec<Resource> {
    let mut claims = info("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true);
    claims.short_names = crate::catalog::names(&["pvc"]);
    claims.subresources = vec![status_subresource(&claims)];
    let mut volumes = info("", "v1", "PersistentVolume", "persistentvolumes", false);
    volumes.short_names = crate::catalog::names(&["pv"]);
    volumes.subresources = vec![status_subresource(&volumes)];
    vec![serve(claims, Claims), serve(volumes, Volumes)]
}

const ACCESS_MODES: &[&str] = &["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"];

/// The volume sources a PersistentVolume may name (one of them).
const SOURCES: &[&str] = &[
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
];

fn access_modes(obj: &Value, required: &str, errs: &mut Vec<FieldError>) {
    let modes = meta::at(obj, &["spec", "accessModes"]).and_then(Value::as_array).cloned().unwrap_or_default();
    if modes.is_empty() {
        errs.push(FieldError::required("spec.accessModes", required));
    }
    for m in &modes {
        supported(errs, Some(m), "spec.accessModes", ACCESS_MODES);
    }
    if modes.len() > 1 && modes.iter().any(|m| m == "ReadWriteOncePod") {
        errs.push(FieldError::forbidden("spec.accessModes", "may not use ReadWriteOncePod with other access modes"));
    }
}

fn storage_class_and_mode(obj: &Value, errs: &mut Vec<FieldError>) {
    if let Some(sc) = meta::str_at(obj, &["spec", "storageClassName"]).filter(|s| !s.is_empty()) {
        for msg in dns1123_subdomain(sc) {
            errs.push(FieldError::invalid("spec.storageClassName", json!(sc), msg));
        }
    }
    supported(errs, meta::at(obj, &["spec", "volumeMode"]), "spec.volumeMode", &["Block", "Filesystem"]);
}

/// `helper.GetAccessModesAsString`: the modes present, in kube's fixed order.
fn modes_string(modes: Option<&Value>) -> String {
    let present: Vec<&str> = modes.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    [("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP")]
        .iter()
        .filter(|(m, _)| present.contains(m))
        .map(|(_, s)| *s)
        .collect::<Vec<_>>()
        .join(",")
}

fn phase_or_terminating(obj: &Value) -> String {
    if meta::deletion_timestamp(obj).is_some() { "Terminating".into() } else { table::str_or(obj, &["status", "phase"], "") }
}

fn storage_class(obj: &Value) -> String {
    meta::str_at(obj, &["metadata", "annotations", "volume.beta.kubernetes.io/storage-class"])
        .or_else(|| meta::str_at(obj, &["spec", "storageClassName"]))
        .unwrap_or_default()
        .to_string()
}

struct Volumes;

const PV_SPEC: &str = "io.k8s.api.core.v1.PersistentVolumeSpec";
const PV_STATUS: &str = "io.k8s.api.core.v1.PersistentVolumeStatus";
const PV_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Capacity", "string", Describe::Field(PV_SPEC, "capacity")),
    Column::new("Access Modes", "string", Describe::Field(PV_SPEC, "accessModes")),
    Column::new("Reclaim Policy", "string", Describe::Field(PV_SPEC, "persistentVolumeReclaimPolicy")),
    Column::new("Status", "string", Describe::Field(PV_STATUS, "phase")),
    Column::new("Claim", "string", Describe::Field(PV_SPEC, "claimRef")),
    Column::new("StorageClass", "string", Describe::Text("StorageClass of the pv")),
    Column::new("VolumeAttributesClass", "string", Describe::Text("VolumeAttributesClass of the pv")),
    Column::new("Reason", "string", Describe::Field(PV_STATUS, "reason")),
    Column::AGE,
    Column::new("VolumeMode", "string", Describe::Field(PV_SPEC, "volumeMode")).wide(),
];

impl Strategy for Volumes {
    fn default(&self, obj: &mut Value) {
        let spec = meta::object_at(obj, &["spec"]);
        spec.entry("persistentVolumeReclaimPolicy").or_insert_with(|| json!("Retain"));
        spec.entry("volumeMode").or_insert_with(|| json!("Filesystem"));
        if let Some(Value::Object(hp)) = spec.get_mut("hostPath") {
            hp.entry("type").or_insert_with(|| json!(""));
        }
        meta::object_at(obj, &["status"]).entry("phase").or_insert_with(|| json!("Pending"));
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        Lifecycle::Status.prepare_for_create(obj);
    }

    /// A new volume is `Pending` since its creation (`PersistentVolumeLastPhaseTransitionTime`).
    fn finalize_create(&self, obj: &mut Value) {
        let created = meta::at(obj, &["metadata", "creationTimestamp"]).cloned().unwrap_or_default();
        let status = meta::object_at(obj, &["status"]);
        status.insert("phase".into(), json!("Pending"));
        status.insert("lastPhaseTransitionTime".into(), created);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        Lifecycle::Status.prepare_for_update(new, old);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        access_modes(obj, "", &mut errs);
        match meta::at(obj, &["spec", "capacity"]).and_then(Value::as_object) {
            None => errs.push(FieldError::required("spec.capacity", "")),
            Some(c) if c.is_empty() => errs.push(FieldError::required("spec.capacity", "")),
            Some(c) => {
                if c.len() > 1 || !c.contains_key("storage") {
                    errs.push(FieldError::not_supported("spec.capacity", json!(c), &["storage"]));
                }
                if let Some(q) = c.get("storage").and_then(Value::as_str).and_then(Quantity::parse)
                    && q.milli_value() <= 0
                {
                    errs.push(FieldError::invalid("spec.capacity[storage]", c["storage"].clone(), "must be greater than zero"));
                }
            }
        }
        supported(&mut errs, meta::at(obj, &["spec", "persistentVolumeReclaimPolicy"]), "spec.persistentVolumeReclaimPolicy", &["Delete", "Recycle", "Retain"]);
        let sources: Vec<&str> = SOURCES.iter().copied().filter(|s| meta::at(obj, &["spec", s]).is_some_and(|v| !v.is_null())).collect();
        match sources.as_slice() {
            [] => errs.push(FieldError::required("spec", "must specify a volume type")),
            [_, rest @ ..] => {
                for s in rest {
                    errs.push(FieldError::forbidden(format!("spec.{s}"), "may not specify more than 1 volume type"));
                }
            }
        }
        for (source, field) in [("hostPath", "path"), ("nfs", "server"), ("nfs", "path"), ("csi", "driver"), ("csi", "volumeHandle"), ("local", "path")] {
            if meta::at(obj, &["spec", source]).is_some_and(|v| !v.is_null()) && meta::str_at(obj, &["spec", source, field]).is_none_or(str::is_empty) {
                errs.push(FieldError::required(format!("spec.{source}.{field}"), ""));
            }
        }
        if sources.contains(&"local") && meta::at(obj, &["spec", "nodeAffinity"]).is_none_or(Value::is_null) {
            errs.push(FieldError::required("spec.nodeAffinity", "Local volume requires node affinity"));
        }
        storage_class_and_mode(obj, &mut errs);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let source = |o: &Value| SOURCES.iter().map(|s| meta::at(o, &["spec", s]).cloned()).collect::<Vec<_>>();
        if source(new) != source(old) {
            errs.push(FieldError::forbidden("spec.persistentvolumesource", "spec.persistentvolumesource is immutable after creation"));
        }
        errs.extend(crate::validation::immutable(new, old, &["spec", "volumeMode"], "volumeMode"));
        errs
    }

    fn prepare_for_subresource_update(&self, subresource: &str, new: &mut Value, old: &Value) {
        crate::catalog::copy_all_but_status(new, old);
        if subresource == "status" && meta::at(new, &["status", "lastPhaseTransitionTime"]).is_none() {
            let kept = meta::at(old, &["status", "lastPhaseTransitionTime"]).cloned();
            if meta::at(new, &["status", "phase"]) == meta::at(old, &["status", "phase"])
                && let Some(t) = kept
            {
                meta::object_at(new, &["status"]).insert("lastPhaseTransitionTime".into(), t);
            }
        }
    }

    fn columns(&self) -> &'static [Column] {
        PV_COLUMNS
    }

    fn row(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let capacity = meta::str_at(obj, &["spec", "capacity", "storage"]).and_then(Quantity::parse).map_or("0".into(), |q| q.canonical());
        let claim = match meta::at(obj, &["spec", "claimRef"]) {
            Some(c) if !c.is_null() => format!("{}/{}", meta::str_at(c, &["namespace"]).unwrap_or_default(), meta::str_at(c, &["name"]).unwrap_or_default()),
            _ => String::new(),
        };
        vec![
            json!(meta::name(obj)),
            json!(capacity),
            json!(modes_string(meta::at(obj, &["spec", "accessModes"]))),
            json!(table::str_or(obj, &["spec", "persistentVolumeReclaimPolicy"], "")),
            json!(phase_or_terminating(obj)),
            json!(claim),
            json!(storage_class(obj)),
            json!(table::str_or(obj, &["spec", "volumeAttributesClassName"], "<unset>")),
            json!(table::str_or(obj, &["status", "reason"], "")),
            table::age(obj, now),
            json!(table::str_or(obj, &["spec", "volumeMode"], "<unset>")),
        ]
    }
}

struct Claims;

const PVC_SPEC: &str = "io.k8s.api.core.v1.PersistentVolumeClaimSpec";
const PVC_STATUS: &str = "io.k8s.api.core.v1.PersistentVolumeClaimStatus";
const PVC_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Status", "string", Describe::Field(PVC_STATUS, "phase")),
    Column::new("Volume", "string", Describe::Field(PVC_SPEC, "volumeName")),
    Column::new("Capacity", "string", Describe::Field(PVC_STATUS, "capacity")),
    Column::new("Access Modes", "string", Describe::Field(PVC_STATUS, "accessModes")),
    Column::new("StorageClass", "string", Describe::Text("StorageClass of the pvc")),
    Column::new("VolumeAttributesClass", "string", Describe::Text("VolumeAttributesClass of the pvc")),
    Column::AGE,
    Column::new("VolumeMode", "string", Describe::Field(PVC_SPEC, "volumeMode")).wide(),
];

fn requested_storage(obj: &Value) -> Option<Quantity> {
    meta::str_at(obj, &["spec", "resources", "requests", "storage"]).and_then(Quantity::parse)
}

impl Strategy for Claims {
    fn default(&self, obj: &mut Value) {
        meta::object_at(obj, &["spec"]).entry("volumeMode").or_insert_with(|| json!("Filesystem"));
        meta::object_at(obj, &["status"]).entry("phase").or_insert_with(|| json!("Pending"));
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        Lifecycle::Status.prepare_for_create(obj);
        normalize_data_sources(obj);
        meta::object_at(obj, &["status"]).insert("phase".into(), json!("Pending"));
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        Lifecycle::Status.prepare_for_update(new, old);
        normalize_data_sources(new);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        access_modes(obj, "at least 1 access mode is required", &mut errs);
        errs.extend(label_selector(meta::at(obj, &["spec", "selector"]), "spec.selector"));
        match (meta::at(obj, &["spec", "resources", "requests", "storage"]), requested_storage(obj)) {
            (None, _) => errs.push(FieldError::required("spec.resources[storage]", "")),
            (Some(v), Some(q)) if q.milli_value() <= 0 => errs.push(FieldError::invalid("spec.resources[storage]", v.clone(), "must be greater than zero")),
            _ => {}
        }
        storage_class_and_mode(obj, &mut errs);
        for field in ["dataSource", "dataSourceRef"] {
            let Some(ds) = meta::at(obj, &["spec", field]).filter(|d| !d.is_null()) else { continue };
            for key in ["name", "kind"] {
                if ds.get(key).and_then(Value::as_str).is_none_or(str::is_empty) {
                    errs.push(FieldError::required(format!("spec.{field}.{key}"), ""));
                }
            }
            let group = ds.get("apiGroup").and_then(Value::as_str).unwrap_or_default();
            let kind = ds.get("kind").and_then(Value::as_str).unwrap_or_default();
            if group.is_empty() && !kind.is_empty() && kind != "PersistentVolumeClaim" {
                errs.push(FieldError::invalid(
                    format!("spec.{field}.kind"),
                    json!(kind),
                    "must be 'PersistentVolumeClaim' when referencing the default apiGroup",
                ));
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let comparable = |o: &Value, bound: bool| {
            let mut spec = o.get("spec").cloned().unwrap_or_default();
            if let Value::Object(m) = &mut spec {
                m.remove("volumeAttributesClassName");
                if bound && let Some(Value::Object(r)) = m.get_mut("resources") {
                    r.remove("requests");
                }
                if m.get("volumeName").and_then(Value::as_str).is_none_or(str::is_empty) {
                    m.remove("volumeName");
                }
                m.remove("volumeMode");
                if m.get("storageClassName").is_none_or(Value::is_null) {
                    m.remove("storageClassName");
                }
            }
            spec
        };
        let bound = meta::str_at(old, &["status", "phase"]) == Some("Bound");
        let mut old_spec = comparable(old, bound);
        let new_spec = comparable(new, bound);
        if meta::str_at(old, &["spec", "volumeName"]).is_none_or(str::is_empty)
            && let (Value::Object(o), Some(v)) = (&mut old_spec, new_spec.get("volumeName"))
        {
            o.insert("volumeName".into(), v.clone());
        }
        if old_spec.get("storageClassName").is_none()
            && let (Value::Object(o), Some(v)) = (&mut old_spec, new_spec.get("storageClassName"))
        {
            o.insert("storageClassName".into(), v.clone());
        }
        if new_spec != old_spec {
            errs.push(FieldError::forbidden(
                "spec",
                "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
            ));
        }
        if bound
            && let (Some(n), Some(o)) = (requested_storage(new), requested_storage(old))
            && n < o
        {
            let capacity = meta::str_at(old, &["status", "capacity", "storage"]).and_then(Quantity::parse);
            if capacity.is_none_or(|c| n <= c) {
                errs.push(FieldError::forbidden("spec.resources.requests.storage", "field can not be less than status.capacity"));
            }
        }
        errs.extend(crate::validation::immutable(new, old, &["spec", "volumeMode"], "volumeMode"));
        errs
    }

    fn columns(&self) -> &'static [Column] {
        PVC_COLUMNS
    }

    fn row(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let bound = meta::str_at(obj, &["spec", "volumeName"]).is_some_and(|v| !v.is_empty());
        let capacity = if bound { meta::str_at(obj, &["status", "capacity", "storage"]).and_then(Quantity::parse).map(|q| q.canonical()) } else { None };
        let modes = if bound { modes_string(meta::at(obj, &["status", "accessModes"])) } else { String::new() };
        vec![
            json!(meta::name(obj)),
            json!(phase_or_terminating(obj)),
            json!(table::str_or(obj, &["spec", "volumeName"], "")),
            json!(capacity.unwrap_or_default()),
            json!(modes),
            json!(storage_class(obj)),
            json!(table::str_or(obj, &["spec", "volumeAttributesClassName"], "<unset>")),
            table::age(obj, now),
            json!(table::str_or(obj, &["spec", "volumeMode"], "<unset>")),
        ]
    }
}

/// `NormalizeDataSources`: with only one of `dataSource` and `dataSourceRef` set (and the
/// reference not in another namespace), the other becomes a copy of it.
fn normalize_data_sources(obj: &mut Value) {
    let spec = meta::object_at(obj, &["spec"]);
    let ds = spec.get("dataSource").filter(|v| !v.is_null()).cloned();
    let dsr = spec.get("dataSourceRef").filter(|v| !v.is_null()).cloned();
    match (ds, dsr) {
        (Some(ds), None) => {
            spec.insert("dataSourceRef".into(), ds);
        }
        (None, Some(dsr)) if dsr.get("namespace").and_then(Value::as_str).is_none_or(str::is_empty) => {
            let mut ds = dsr;
            if let Value::Object(m) = &mut ds {
                m.remove("namespace");
            }
            spec.insert("dataSource".into(), ds);
        }
        _ => {}
    }
}

//! storage.k8s.io/v1: storage classes, CSI drivers, CSI nodes, CSI storage capacities and volume
//! attachments (kube's `pkg/registry/storage` strategies and `pkg/apis/storage/validation`).

use serde_json::{Value, json};

use super::{info, serve, status_subresource};
use crate::catalog::{Lifecycle, Resource, Strategy};
use crate::meta;
use crate::quantity::Quantity;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};
use crate::validation::{dns1123_subdomain, immutable, label_selector, qualified_name, supported};

const G: &str = "storage.k8s.io";

pub fn resources() -> Vec<Resource> {
    let mut drivers = info(G, "v1", "CSIDriver", "csidrivers", false);
    drivers.singular = "csidriver".into();
    let mut nodes = info(G, "v1", "CSINode", "csinodes", false);
    nodes.singular = "csinode".into();
    let mut capacities = info(G, "v1", "CSIStorageCapacity", "csistoragecapacities", true);
    capacities.singular = "csistoragecapacity".into();
    let mut classes = info(G, "v1", "StorageClass", "storageclasses", false);
    classes.short_names = crate::catalog::names(&["sc"]);
    classes.singular = "storageclass".into();
    let mut attachments = info(G, "v1", "VolumeAttachment", "volumeattachments", false);
    attachments.subresources = vec![status_subresource(&attachments)];
    vec![
        serve(drivers, Storage::Drivers),
        serve(nodes, Storage::Nodes),
        serve(capacities, Storage::Capacities),
        serve(classes, Storage::Classes),
        serve(attachments, Storage::Attachments),
    ]
}

enum Storage {
    Drivers,
    Nodes,
    Capacities,
    Classes,
    Attachments,
}

const CLASS: &str = "io.k8s.api.storage.v1.StorageClass";
const CLASS_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Provisioner", "string", Describe::Field(CLASS, "provisioner")),
    Column::new("ReclaimPolicy", "string", Describe::Field(CLASS, "reclaimPolicy")),
    Column::new("VolumeBindingMode", "string", Describe::Field(CLASS, "volumeBindingMode")),
    Column::new("AllowVolumeExpansion", "string", Describe::Field(CLASS, "allowVolumeExpansion")),
    Column::AGE,
];

const DRIVER: &str = "io.k8s.api.storage.v1.CSIDriverSpec";
const DRIVER_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("AttachRequired", "boolean", Describe::Field(DRIVER, "attachRequired")),
    Column::new("PodInfoOnMount", "boolean", Describe::Field(DRIVER, "podInfoOnMount")),
    Column::new("StorageCapacity", "boolean", Describe::Field(DRIVER, "storageCapacity")),
    Column::new("TokenRequests", "string", Describe::Field(DRIVER, "tokenRequests")),
    Column::new("RequiresRepublish", "boolean", Describe::Field(DRIVER, "requiresRepublish")),
    Column::new("Modes", "string", Describe::Field(DRIVER, "volumeLifecycleModes")),
    Column::AGE,
];

const NODE_COLUMNS: &[Column] =
    &[Column::NAME, Column::new("Drivers", "integer", Describe::Text("Drivers indicates the number of CSI drivers registered on the node")), Column::AGE];

const CAPACITY: &str = "io.k8s.api.storage.v1.CSIStorageCapacity";
const CAPACITY_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("StorageClassName", "string", Describe::Field(CAPACITY, "storageClassName")),
    Column::new("Capacity", "string", Describe::Field(CAPACITY, "capacity")),
];

const ATTACHMENT_COLUMNS: &[Column] = &[
    Column::NAME,
    Column { format: "name", ..Column::new("Attacher", "string", Describe::Field("io.k8s.api.storage.v1.VolumeAttachmentSpec", "attacher")) },
    Column::new("PV", "string", Describe::Field("io.k8s.api.storage.v1.VolumeAttachmentSource", "persistentVolumeName")),
    Column::new("Node", "string", Describe::Field("io.k8s.api.storage.v1.VolumeAttachmentSpec", "nodeName")),
    Column::new("Attached", "boolean", Describe::Field("io.k8s.api.storage.v1.VolumeAttachmentStatus", "attached")),
    Column::AGE,
];

fn subdomain(errs: &mut Vec<FieldError>, v: &str, path: &str) {
    for msg in dns1123_subdomain(v) {
        errs.push(FieldError::invalid(path, json!(v), msg));
    }
}

/// `ValidateCSIDriverName`: required, at most 63 characters, a DNS subdomain once lower-cased.
fn csi_driver_name(errs: &mut Vec<FieldError>, name: &str, path: &str) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    if name.len() > 63 {
        errs.push(FieldError::too_long(path, 63));
    }
    subdomain(errs, &name.to_lowercase(), path);
}

fn bool_or(obj: &Value, path: &[&str], default: bool) -> bool {
    meta::at(obj, path).and_then(Value::as_bool).unwrap_or(default)
}

impl Storage {
    fn validate_class(obj: &Value, errs: &mut Vec<FieldError>) {
        let provisioner = obj.get("provisioner").and_then(Value::as_str).unwrap_or_default();
        if provisioner.is_empty() {
            errs.push(FieldError::required("provisioner", ""));
        } else {
            for msg in qualified_name(&provisioner.to_lowercase()) {
                errs.push(FieldError::invalid("provisioner", json!(provisioner), msg));
            }
        }
        let params = obj.get("parameters").and_then(Value::as_object);
        if params.is_some_and(|p| p.len() > 512) {
            errs.push(FieldError::too_long("parameters", 512));
        }
        if params.is_some_and(|p| p.contains_key("")) {
            errs.push(FieldError::invalid("parameters", json!(params), "field can not be empty."));
        }
        supported(errs, obj.get("reclaimPolicy"), "reclaimPolicy", &["Delete", "Retain"]);
        match obj.get("volumeBindingMode") {
            None | Some(Value::Null) => errs.push(FieldError::required("volumeBindingMode", "")),
            mode => supported(errs, mode, "volumeBindingMode", &["Immediate", "WaitForFirstConsumer"]),
        }
    }

    fn validate_driver(obj: &Value, errs: &mut Vec<FieldError>) {
        for (field, path) in [
            ("attachRequired", "spec.attachedRequired"),
            ("podInfoOnMount", "spec.podInfoOnMount"),
            ("storageCapacity", "spec.storageCapacity"),
            ("seLinuxMount", "spec.seLinuxMount"),
        ] {
            if meta::at(obj, &["spec", field]).is_none_or(Value::is_null) {
                errs.push(FieldError::required(path, ""));
            }
        }
        supported(errs, meta::at(obj, &["spec", "fsGroupPolicy"]), "spec.fsGroupPolicy", &["File", "None", "ReadWriteOnceWithFSType"]);
        for (i, m) in meta::at(obj, &["spec", "volumeLifecycleModes"]).and_then(Value::as_array).into_iter().flatten().enumerate() {
            supported(errs, Some(m), &format!("spec.volumeLifecycleModes[{i}]"), &["Persistent", "Ephemeral"]);
        }
        let mut audiences = Vec::new();
        for (i, t) in meta::at(obj, &["spec", "tokenRequests"]).and_then(Value::as_array).into_iter().flatten().enumerate() {
            let audience = t.get("audience").cloned().unwrap_or(json!(""));
            if audiences.contains(&audience) {
                errs.push(FieldError::duplicate(format!("spec.tokenRequests[{i}].audience"), audience.clone()));
            }
            audiences.push(audience);
            if let Some(s) = t.get("expirationSeconds").and_then(Value::as_i64) {
                if s < 600 {
                    errs.push(FieldError::invalid(
                        format!("spec.tokenRequests[{i}].expirationSeconds"),
                        json!(s),
                        "may not specify a duration less than 10 minutes",
                    ));
                } else if s > 1 << 32 {
                    errs.push(FieldError::invalid(
                        format!("spec.tokenRequests[{i}].expirationSeconds"),
                        json!(s),
                        "may not specify a duration larger than 2^32 seconds",
                    ));
                }
            }
        }
    }

    fn validate_node(obj: &Value, errs: &mut Vec<FieldError>) {
        let mut names = Vec::new();
        for (i, d) in meta::at(obj, &["spec", "drivers"]).and_then(Value::as_array).into_iter().flatten().enumerate() {
            let at = format!("spec.drivers[{i}]");
            let name = d.get("name").and_then(Value::as_str).unwrap_or_default();
            csi_driver_name(errs, name, &format!("{at}.name"));
            if names.contains(&name) {
                errs.push(FieldError::duplicate(format!("{at}.name"), json!(name)));
            }
            names.push(name);
            let node_id = d.get("nodeID").and_then(Value::as_str).unwrap_or_default();
            if node_id.is_empty() {
                errs.push(FieldError::required(format!("{at}.nodeID"), ""));
            } else if node_id.len() > 256 {
                errs.push(FieldError::invalid(format!("{at}.nodeID"), json!(node_id), "must be 256 characters or less"));
            }
            for (j, key) in d.get("topologyKeys").and_then(Value::as_array).into_iter().flatten().enumerate() {
                let k = key.as_str().unwrap_or_default();
                for msg in qualified_name(k) {
                    errs.push(FieldError::invalid(format!("{at}.topologyKeys[{j}]"), json!(k), msg));
                }
            }
        }
    }

    fn validate_attachment(obj: &Value, errs: &mut Vec<FieldError>) {
        csi_driver_name(errs, meta::str_at(obj, &["spec", "attacher"]).unwrap_or_default(), "spec.attacher");
        let pv = meta::at(obj, &["spec", "source", "persistentVolumeName"]).filter(|v| !v.is_null());
        let inline = meta::at(obj, &["spec", "source", "inlineVolumeSpec"]).filter(|v| !v.is_null());
        match (pv, inline) {
            (None, None) => errs.push(FieldError::required("spec.source", "must specify exactly one of inlineVolumeSpec and persistentVolumeName")),
            (Some(_), Some(_)) => errs.push(FieldError::forbidden("spec.source", "must specify exactly one of inlineVolumeSpec and persistentVolumeName")),
            (Some(pv), None) => match pv.as_str().unwrap_or_default() {
                "" => errs.push(FieldError::required("spec.source.persistentVolumeName", "must specify non empty persistentVolumeName")),
                name => subdomain(errs, name, "spec.source.persistentVolumeName"),
            },
            (None, Some(_)) => {}
        }
        subdomain(errs, meta::str_at(obj, &["spec", "nodeName"]).unwrap_or_default(), "spec.nodeName");
    }
}

impl Strategy for Storage {
    fn default(&self, obj: &mut Value) {
        match self {
            Storage::Classes => {
                if let Some(m) = obj.as_object_mut() {
                    m.entry("reclaimPolicy").or_insert_with(|| json!("Delete"));
                    m.entry("volumeBindingMode").or_insert_with(|| json!("Immediate"));
                }
            }
            Storage::Drivers => {
                let spec = meta::object_at(obj, &["spec"]);
                for (k, v) in [
                    ("attachRequired", json!(true)),
                    ("podInfoOnMount", json!(false)),
                    ("storageCapacity", json!(false)),
                    ("fsGroupPolicy", json!("ReadWriteOnceWithFSType")),
                    ("volumeLifecycleModes", json!(["Persistent"])),
                    ("requiresRepublish", json!(false)),
                    ("seLinuxMount", json!(false)),
                ] {
                    spec.entry(k).or_insert(v);
                }
            }
            _ => {}
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if let Storage::Attachments = self {
            Lifecycle::Status.prepare_for_create(obj);
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        match self {
            Storage::Attachments => Lifecycle::Status.prepare_for_update(new, old),
            Storage::Drivers => Lifecycle::Generation("spec").prepare_for_update(new, old),
            _ => {}
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        match self {
            Storage::Classes => Self::validate_class(obj, &mut errs),
            Storage::Drivers => Self::validate_driver(obj, &mut errs),
            Storage::Nodes => Self::validate_node(obj, &mut errs),
            Storage::Attachments => Self::validate_attachment(obj, &mut errs),
            Storage::Capacities => {
                errs.extend(label_selector(obj.get("nodeTopology"), "nodeTopology"));
                subdomain(&mut errs, obj.get("storageClassName").and_then(Value::as_str).unwrap_or_default(), "storageClassName");
                if let Some(c) = obj.get("capacity").and_then(Value::as_str).and_then(Quantity::parse)
                    && c.milli_value() < 0
                {
                    errs.push(FieldError::invalid("capacity", obj["capacity"].clone(), "must be greater than or equal to 0"));
                }
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        match self {
            Storage::Classes => {
                for field in ["parameters", "provisioner", "reclaimPolicy"] {
                    if new.get(field) != old.get(field) {
                        errs.push(FieldError::forbidden(field, format!("updates to {field} are forbidden.")));
                    }
                }
                errs.extend(immutable(new, old, &["volumeBindingMode"], "volumeBindingMode"));
            }
            Storage::Drivers => {
                errs.extend(immutable(new, old, &["spec", "attachRequired"], "spec.attachedRequired"));
                errs.extend(immutable(new, old, &["spec", "volumeLifecycleModes"], "spec.volumeLifecycleModes"));
            }
            Storage::Nodes => {
                let drivers = |o: &Value| meta::at(o, &["spec", "drivers"]).and_then(Value::as_array).cloned().unwrap_or_default();
                let changed = drivers(new).iter().any(|d| drivers(old).iter().any(|o| o.get("name") == d.get("name") && o != d));
                if changed {
                    errs.push(FieldError::invalid("spec.drivers", json!(drivers(new)), "field is immutable"));
                }
            }
            Storage::Capacities => {
                errs.extend(immutable(new, old, &["nodeTopology"], "nodeTopology"));
                errs.extend(immutable(new, old, &["storageClassName"], "storageClassName"));
            }
            Storage::Attachments => errs.extend(immutable(new, old, &["spec"], "spec")),
        }
        errs
    }

    fn allow_unconditional_update(&self) -> bool {
        matches!(self, Storage::Classes)
    }

    fn columns(&self) -> &'static [Column] {
        match self {
            Storage::Classes => CLASS_COLUMNS,
            Storage::Drivers => DRIVER_COLUMNS,
            Storage::Nodes => NODE_COLUMNS,
            Storage::Capacities => CAPACITY_COLUMNS,
            Storage::Attachments => ATTACHMENT_COLUMNS,
        }
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let name = json!(meta::name(obj));
        let age = table::age(obj, now);
        match self {
            Storage::Classes => {
                let default = ["storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"]
                    .iter()
                    .any(|a| meta::str_at(obj, &["metadata", "annotations", a]) == Some("true"));
                let name = if default { format!("{} (default)", meta::name(obj)) } else { meta::name(obj).to_string() };
                vec![
                    json!(name),
                    json!(table::str_or(obj, &["provisioner"], "")),
                    json!(table::str_or(obj, &["reclaimPolicy"], "Delete")),
                    json!(table::str_or(obj, &["volumeBindingMode"], "Immediate")),
                    json!(bool_or(obj, &["allowVolumeExpansion"], false)),
                    age,
                ]
            }
            Storage::Drivers => {
                let tokens = match meta::at(obj, &["spec", "tokenRequests"]).and_then(Value::as_array) {
                    None => "<unset>".to_string(),
                    Some(t) => t.iter().filter_map(|t| t.get("audience").and_then(Value::as_str)).collect::<Vec<_>>().join(","),
                };
                let modes: Vec<&str> =
                    meta::at(obj, &["spec", "volumeLifecycleModes"]).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
                vec![
                    name,
                    json!(bool_or(obj, &["spec", "attachRequired"], true)),
                    json!(bool_or(obj, &["spec", "podInfoOnMount"], false)),
                    json!(bool_or(obj, &["spec", "storageCapacity"], false)),
                    json!(tokens),
                    json!(bool_or(obj, &["spec", "requiresRepublish"], false)),
                    json!(if modes.is_empty() { "<none>".to_string() } else { modes.join(",") }),
                    age,
                ]
            }
            Storage::Nodes => vec![name, json!(meta::at(obj, &["spec", "drivers"]).and_then(Value::as_array).map_or(0, Vec::len)), age],
            Storage::Capacities => {
                let capacity = obj.get("capacity").and_then(Value::as_str).and_then(Quantity::parse).map_or("<unset>".into(), |q| q.canonical());
                vec![name, json!(table::str_or(obj, &["storageClassName"], "")), json!(capacity)]
            }
            Storage::Attachments => vec![
                name,
                json!(table::str_or(obj, &["spec", "attacher"], "")),
                json!(table::str_or(obj, &["spec", "source", "persistentVolumeName"], "")),
                json!(table::str_or(obj, &["spec", "nodeName"], "")),
                json!(bool_or(obj, &["status", "attached"], false)),
                age,
            ],
        }
    }
}

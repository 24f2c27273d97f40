//! DefaultStorageClass and DefaultIngressClass: a new persistent volume claim or ingress that
//! names no class gets the cluster's default one (the newest of those marked default, by
//! creation time, then name), as kube v1.33's plugins give it.

use serde_json::{Value, json};

use super::{Attributes, Lookup, Operation, Pending, Plugin};
use crate::meta;
use crate::rand::Rng;
use crate::status::ApiError;

/// The class marked default, if any; the newest of several (then the first by name).
fn default_class<'a>(classes: &'a [Value], annotations: &[&str]) -> Option<&'a Value> {
    let marked = classes.iter().filter(|c| annotations.iter().any(|a| meta::at(c, &["metadata", "annotations", a]).and_then(Value::as_str) == Some("true")));
    let created = |c: &Value| meta::str_at(c, &["metadata", "creationTimestamp"]).and_then(|t| t.parse::<jiff::Timestamp>().ok());
    marked.min_by(|a, b| created(b).cmp(&created(a)).then_with(|| meta::name(a).cmp(meta::name(b))))
}

#[derive(Debug)]
pub struct DefaultStorageClass;

impl Plugin for DefaultStorageClass {
    fn name(&self) -> &'static str {
        "DefaultStorageClass"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Create
    }

    fn lookups(&self, request: &Pending) -> Vec<Lookup> {
        let claims = request.info.group.is_empty() && request.info.resource == "persistentvolumeclaims" && request.subresource.is_none();
        if claims { vec![Lookup::StorageClasses] } else { Vec::new() }
    }

    fn admit(&self, a: &Attributes, obj: Option<&mut Value>, _rng: &mut Rng) -> Result<(), ApiError> {
        let Some(claim) = obj.filter(|_| a.is_core("persistentvolumeclaims")) else { return Ok(()) };
        let beta = meta::at(claim, &["metadata", "annotations", "volume.beta.kubernetes.io/storage-class"]).is_some();
        if beta || meta::at(claim, &["spec", "storageClassName"]).is_some_and(|c| !c.is_null()) {
            return Ok(());
        }
        let annotations = ["storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"];
        if let Some(class) = default_class(&a.found.storage_classes, &annotations) {
            meta::object_at(claim, &["spec"]).insert("storageClassName".into(), json!(meta::name(class)));
        }
        Ok(())
    }
}

#[derive(Debug)]
pub struct DefaultIngressClass;

impl Plugin for DefaultIngressClass {
    fn name(&self) -> &'static str {
        "DefaultIngressClass"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Create
    }

    fn lookups(&self, request: &Pending) -> Vec<Lookup> {
        let ingresses = request.info.group == "networking.k8s.io" && request.info.resource == "ingresses" && request.subresource.is_none();
        if ingresses { vec![Lookup::IngressClasses] } else { Vec::new() }
    }

    fn admit(&self, a: &Attributes, obj: Option<&mut Value>, _rng: &mut Rng) -> Result<(), ApiError> {
        let ingresses = a.info.group == "networking.k8s.io" && a.info.resource == "ingresses" && a.subresource.is_none();
        let Some(ingress) = obj.filter(|_| ingresses) else { return Ok(()) };
        let annotated = meta::at(ingress, &["metadata", "annotations", "kubernetes.io/ingress.class"]).is_some();
        if annotated || meta::at(ingress, &["spec", "ingressClassName"]).is_some_and(|c| !c.is_null()) {
            return Ok(());
        }
        if let Some(class) = default_class(&a.found.ingress_classes, &["ingressclass.kubernetes.io/is-default-class"]) {
            meta::object_at(ingress, &["spec"]).insert("ingressClassName".into(), json!(meta::name(class)));
        }
        Ok(())
    }
}

//! kube-apiserver's CRD registration controller and the aggregator's autoregister controller,
//! for custom resources: every version a CRD serves has a local APIService `<version>.<group>`
//! (`groupPriorityMinimum` 1000, `versionPriority` 100, labelled
//! `kube-aggregator.kubernetes.io/automanaged: "true"`), made when a CRD serves it, put back
//! when changed, deleted when no CRD serves it any more. An APIService of that name without
//! the label is the user's and left alone. Nothing is done until both the CRDs and the
//! APIServices have been listed, so that no APIService goes for want of a CRD not yet seen.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::apiservices::API_SERVICES;
use super::{Asker, Controllers, Watched};
use crate::meta;

const MANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

impl Controllers {
    /// Brings the CRDs' APIServices in line with the CRDs, one request per APIService at a time.
    pub(super) fn register_crd_versions(&mut self) {
        let listed = |w: Watched| self.reflectors.iter().any(|(k, r)| *k == w && r.listed());
        if !listed(Watched::Crds) || !listed(Watched::ApiServices) {
            return;
        }
        let mut wanted: BTreeMap<String, (String, String)> = BTreeMap::new();
        for crd in self.crds.values() {
            let group = meta::str_at(crd, &["spec", "group"]).unwrap_or_default();
            let versions = meta::at(crd, &["spec", "versions"]).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            for v in versions.iter().filter(|v| v.get("served").and_then(Value::as_bool) == Some(true)) {
                let version = v.get("name").and_then(Value::as_str).unwrap_or_default();
                wanted.insert(format!("{version}.{group}"), (group.to_string(), version.to_string()));
            }
        }
        let busy: Vec<String> =
            self.in_flight.values().filter_map(|a| if let Asker::Registration { name, .. } = a { Some(name.clone()) } else { None }).collect();
        let mut requests = Vec::new();
        for (name, (group, version)) in &wanted {
            let spec = json!({"group": group, "version": version, "groupPriorityMinimum": 1000, "versionPriority": 100});
            match self.api_services.get(name) {
                None => {
                    let object = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                        "metadata": {"name": name, "labels": {MANAGED: "true"}}, "spec": spec});
                    requests.push((name.clone(), "POST", API_SERVICES.to_string(), Some(object)));
                }
                Some(current) if managed(current) && current.get("spec") != Some(&spec) => {
                    let mut object = current.clone();
                    object["spec"] = spec;
                    requests.push((name.clone(), "PUT", format!("{API_SERVICES}/{name}"), Some(object)));
                }
                Some(_) => {}
            }
        }
        for (name, current) in &self.api_services {
            if managed(current) && !wanted.contains_key(name) {
                let options = json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": meta::uid(current)}});
                requests.push((name.clone(), "DELETE", format!("{API_SERVICES}/{name}"), Some(options)));
            }
        }
        for (name, method, path, body) in requests.into_iter().filter(|(name, ..)| !busy.contains(name)) {
            self.send(Asker::Registration { name, status: 0 }, method, path, "", body);
        }
    }
}

/// Whether an APIService is kept by this controller (not a user's, nor a built-in group's).
fn managed(api_service: &Value) -> bool {
    meta::str_at(api_service, &["metadata", "labels", MANAGED]) == Some("true")
}

//! The work on each namespace: what it needs in its state (its `default` service account,
//! its root CA configmap, or, once deleted, its collections emptied and its finalizer
//! removed), planned as steps sent one at a time, and what their answers teach.

use std::collections::VecDeque;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::namespace::{self, Collection, Tally};
use super::{Asker, Change, Controllers, FINALIZER, MAX_RETRY, RETRY, ROOT_CA};
use crate::meta;

/// One step of the work on a namespace.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Step {
    EnsureServiceAccount,
    EnsureRootCa,
    /// Put the published bundle back into the root CA configmap.
    UpdateRootCa {
        object: Value,
    },
    /// Delete every object of a namespaced collection.
    DeleteAll {
        collection: Collection,
    },
    /// Count what is left in each collection; then report it in the namespace's conditions,
    /// and finalize, or wait and start over.
    CountLeft {
        collections: VecDeque<Collection>,
        tally: Tally,
    },
    /// Write the namespace with new status conditions.
    UpdateConditions {
        object: Value,
    },
    /// Force-delete a pod if its node does not exist.
    CheckNode {
        pod: String,
        node: String,
    },
    ForceDeletePod {
        pod: String,
    },
    Finalize,
}

impl Controllers {
    pub(super) fn busy(&self, ns: &str) -> bool {
        self.in_flight.values().any(|a| matches!(a, Asker::Namespace { name, .. } if name == ns))
    }

    /// The work a namespace needs in its current state.
    pub(super) fn plan(&self, ns: &Value) -> VecDeque<Step> {
        let mut steps = VecDeque::new();
        if meta::deletion_timestamp(ns).is_some() {
            let ours = meta::at(ns, &["spec", "finalizers"]).and_then(Value::as_array).is_some_and(|f| f.iter().any(|x| x == FINALIZER));
            if self.enabled.namespaces && ours {
                steps.extend(self.collections.iter().map(|c| Step::DeleteAll { collection: c.clone() }));
                steps.push_back(Step::CountLeft { collections: self.collections.iter().cloned().collect(), tally: Tally::default() });
            }
            return steps;
        }
        if self.enabled.service_accounts {
            steps.push_back(Step::EnsureServiceAccount);
        }
        if self.enabled.root_ca {
            steps.push_back(Step::EnsureRootCa);
        }
        steps
    }

    pub(super) fn replan(&mut self, ns: &str) {
        let Some(object) = self.namespaces.get(ns) else { return };
        let steps = self.plan(object);
        self.work.insert(ns.to_string(), steps);
        self.next_step(ns);
    }

    pub(super) fn changed(&mut self, change: Change) {
        let name = meta::name(&change.object).to_string();
        if change.deleted {
            self.namespaces.remove(&name);
            self.work.remove(&name);
            self.retry.remove(&name);
            self.backoff.remove(&name);
            self.stale.remove(&name);
            return;
        }
        let known = self.namespaces.get(&name).is_some_and(|n| meta::resource_version(n) == meta::resource_version(&change.object));
        if known {
            return;
        }
        self.namespaces.insert(name.clone(), change.object);
        if self.busy(&name) {
            self.stale.insert(name);
        } else {
            self.replan(&name);
        }
    }

    /// The root CA configmap with the published bundle, when it holds another.
    pub(super) fn corrected_root_ca(&self, change: &Change) -> Option<Value> {
        if change.deleted || meta::str_at(&change.object, &["data", "ca.crt"]) == Some(self.ca_pem.as_str()) {
            return None;
        }
        let mut object = change.object.clone();
        meta::object_at(&mut object, &["data"]).insert("ca.crt".into(), json!(self.ca_pem));
        Some(object)
    }

    /// An object a live namespace must hold changed: deleted (make it again) or wrong (`fix`).
    pub(super) fn dependent_changed(&mut self, change: Change, fix: Option<Value>) {
        let ns = meta::namespace(&change.object).to_string();
        let live = self.namespaces.get(&ns).is_some_and(|n| meta::deletion_timestamp(n).is_none());
        if !live {
            return;
        }
        if let Some(object) = fix {
            self.queue(&ns, Step::UpdateRootCa { object });
            if !self.busy(&ns) {
                self.next_step(&ns);
            }
        } else if change.deleted {
            if self.busy(&ns) {
                self.stale.insert(ns);
            } else {
                self.replan(&ns);
            }
        }
    }

    pub(super) fn answered(&mut self, now: Timestamp, ns: &str, step: Step, status: u16, body: Value) {
        match step {
            Step::CountLeft { mut collections, mut tally } => {
                let collection = collections.pop_front().expect("a count step has a collection");
                if status == 200 {
                    let items = body.get("items").and_then(Value::as_array).cloned().unwrap_or_default();
                    tally.count(&collection.label, &items);
                    // List items carry no kind: the collection says what they are.
                    let pods = if collection.label == "pods." { items.as_slice() } else { &[] };
                    for pod in pods {
                        if let Some(node) = meta::str_at(pod, &["spec", "nodeName"]).filter(|n| !n.is_empty()) {
                            self.queue(ns, Step::CheckNode { pod: meta::name(pod).to_string(), node: node.to_string() });
                        }
                    }
                } else {
                    tally.failed();
                }
                if !collections.is_empty() {
                    return self.queue(ns, Step::CountLeft { collections, tally });
                }
                if let Some(object) = self.namespaces.get(ns).and_then(|n| namespace::with_conditions(n, &tally, now)) {
                    self.queue(ns, Step::UpdateConditions { object });
                }
                if tally.is_clear() {
                    self.queue(ns, Step::Finalize);
                } else {
                    let wait = self.backoff.get(ns).copied().unwrap_or(RETRY);
                    self.backoff.insert(ns.to_string(), (wait * 2).min(MAX_RETRY));
                    self.retry.insert(ns.to_string(), now + wait);
                }
            }
            // What the server answers is the namespace now; its own watch event is no news.
            Step::UpdateConditions { .. } if status == 200 => {
                self.namespaces.insert(ns.to_string(), body);
            }
            Step::CheckNode { pod, .. } if status == 404 => self.queue(ns, Step::ForceDeletePod { pod }),
            _ => {}
        }
    }

    pub(super) fn queue(&mut self, ns: &str, step: Step) {
        self.work.entry(ns.to_string()).or_default().push_back(step);
    }

    /// Sends the next request of a namespace's work.
    pub(super) fn next_step(&mut self, ns: &str) {
        let Some(step) = self.work.get_mut(ns).and_then(VecDeque::pop_front) else { return };
        let asker = |step: Step| Asker::Namespace { name: ns.to_string(), step, status: 0, body: Vec::new() };
        let in_ns = |collection: &Collection| collection.path.replace("{ns}", ns);
        match &step {
            Step::EnsureServiceAccount => {
                let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
                self.send(asker(step), "POST", format!("/api/v1/namespaces/{ns}/serviceaccounts"), "", Some(sa));
            }
            Step::EnsureRootCa => {
                let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": ROOT_CA, "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
                    "data": {"ca.crt": self.ca_pem}});
                self.send(asker(step), "POST", format!("/api/v1/namespaces/{ns}/configmaps"), "", Some(cm));
            }
            Step::UpdateRootCa { object } => {
                let (path, object) = (format!("/api/v1/namespaces/{ns}/configmaps/{ROOT_CA}"), object.clone());
                self.send(asker(step), "PUT", path, "", Some(object));
            }
            Step::DeleteAll { collection } => {
                let path = in_ns(collection);
                self.send(asker(step), "DELETE", path, "propagationPolicy=Background", None);
            }
            Step::UpdateConditions { object } => {
                let object = object.clone();
                self.send(asker(step), "PUT", format!("/api/v1/namespaces/{ns}/status"), "", Some(object));
            }
            Step::CountLeft { collections, .. } => {
                let path = in_ns(collections.front().expect("a count step has a collection"));
                self.send(asker(step), "GET", path, "", None);
            }
            Step::CheckNode { node, .. } => {
                let path = format!("/api/v1/nodes/{node}");
                self.send(asker(step), "GET", path, "", None);
            }
            Step::ForceDeletePod { pod } => {
                let path = format!("/api/v1/namespaces/{ns}/pods/{pod}");
                self.send(asker(step), "DELETE", path, "gracePeriodSeconds=0", None);
            }
            Step::Finalize => {
                let Some(mut object) = self.namespaces.get(ns).cloned() else { return };
                if let Some(Value::Array(f)) = object.pointer_mut("/spec/finalizers") {
                    f.retain(|x| x != FINALIZER);
                }
                self.send(asker(step), "PUT", format!("/api/v1/namespaces/{ns}/finalize"), "", Some(object));
            }
        }
    }
}

//! The apiextensions server's controllers, which run whatever `--controllers` says:
//! - naming and establishing: every CRD gets the status its names call for
//!   (`apiextensions::naming`);
//! - the `customresourcecleanup.apiextensions.k8s.io` finalizer: a CRD being deleted has its
//!   custom resources deleted (a delete of the collection per namespace they are in, then a
//!   look every few seconds until none is left), then its `Terminating` condition says so and
//!   the finalizer goes, which ends the CRD.

use std::collections::{BTreeSet, VecDeque};

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use super::{Asker, Controllers};
use crate::apiextensions::Definition;
use crate::apiextensions::naming::{set_condition, with_status};
use crate::controllers::reflector::Change;
use crate::meta;

pub(super) const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";
/// How long after a look that found custom resources left the next one is.
const LOOK_AGAIN: SignedDuration = SignedDuration::from_secs(5);

/// A request of the CRD controllers.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum CrdStep {
    /// The status the CRD's names call for.
    Names,
    /// `Terminating`: the deletion of its resources is in progress.
    InProgress,
    /// List what is left of its resources (`deleted`: after deleting them; what is left then
    /// waits for its own finalizers, and is looked for again later).
    List {
        deleted: bool,
    },
    /// Delete its resources in one namespace (`""`: cluster-scoped ones).
    Delete {
        namespace: String,
    },
    /// `Terminating` False, with why; the answer is the CRD to take the finalizer from.
    Done {
        reason: &'static str,
        message: &'static str,
    },
    RemoveFinalizer {
        crd: Value,
    },
}

impl Controllers {
    /// A CRD changed: the CRDs of its group get the status their names call for, and a CRD
    /// being deleted is cleaned up.
    pub(super) fn crd_changed(&mut self, now: Timestamp, change: Change) {
        let name = meta::name(&change.object).to_string();
        if change.deleted {
            self.crds.remove(&name);
            self.crd_written.remove(&name);
            self.crd_work.remove(&name);
            self.crd_retry.remove(&name);
        } else {
            self.crds.insert(name.clone(), change.object.clone());
        }
        let group = change.object.pointer("/spec/group").cloned();
        let members: Vec<String> = self.crds.iter().filter(|(_, c)| c.pointer("/spec/group") == group.as_ref()).map(|(n, _)| n.clone()).collect();
        for member in members {
            self.plan_crd(now, &member);
        }
    }

    /// The work a CRD needs now, unless a request for it is in flight (its answer plans again).
    fn plan_crd(&mut self, now: Timestamp, name: &str) {
        if self.crd_busy(name) || self.crd_work.get(name).is_some_and(|w| !w.is_empty()) {
            return;
        }
        let Some(crd) = self.crds.get(name) else { return };
        let cleaning = meta::deletion_timestamp(crd).is_some() && meta::finalizers(crd).iter().any(|f| f == CLEANUP_FINALIZER);
        let step = if cleaning {
            let in_progress = crd
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Terminating" && c["reason"] == "InstanceDeletionInProgress");
            if self.crd_retry.contains_key(name) {
                return;
            }
            if in_progress { CrdStep::List { deleted: false } } else { CrdStep::InProgress }
        } else {
            // A status written and stored differently would be written again and again: what
            // was written once is not written again.
            match self.with_names_status(name, now) {
                Some(next) if self.crd_written.get(name) != next.get("status") => {}
                _ => return,
            }
            CrdStep::Names
        };
        self.crd_work.entry(name.to_string()).or_default().push_back(step);
        self.next_crd_step(now, name);
    }

    /// The CRD `name` with the status its names and versions call for among the other CRDs of
    /// its group; `None` when that status is the one it has.
    fn with_names_status(&self, name: &str, now: Timestamp) -> Option<Value> {
        let crd = self.crds.get(name)?;
        let group = crd.pointer("/spec/group");
        let peers: Vec<&Value> = self.crds.iter().filter(|(n, c)| n.as_str() != name && c.pointer("/spec/group") == group).map(|(_, c)| c).collect();
        with_status(crd, &peers, now)
    }

    fn crd_busy(&self, name: &str) -> bool {
        self.in_flight.values().any(|a| matches!(a, Asker::Crd { name: n, .. } if n == name))
    }

    /// Sends the CRD's next request.
    pub(super) fn next_crd_step(&mut self, now: Timestamp, name: &str) {
        let Some(step) = self.crd_work.get_mut(name).and_then(VecDeque::pop_front) else { return };
        let Some(crd) = self.crds.get(name).cloned() else { return };
        let asker = |step: CrdStep| Asker::Crd { name: name.to_string(), step, status: 0, body: Vec::new() };
        let status_path = format!("{CRDS}/{name}/status");
        match &step {
            CrdStep::Names => {
                let Some(next) = self.with_names_status(name, now) else { return };
                self.crd_written.insert(name.to_string(), next.get("status").cloned().unwrap_or_default());
                self.send(asker(step), "PUT", status_path, "", Some(next));
            }
            CrdStep::InProgress => {
                let mut next = crd;
                set_condition(&mut next, "Terminating", ("True", "InstanceDeletionInProgress", "CustomResource deletion is in progress".into()), now);
                self.send(asker(step), "PUT", status_path, "", Some(next));
            }
            CrdStep::List { .. } => match instances_path(&crd, None) {
                Some(path) => self.send(asker(step), "GET", path, "", None),
                None => {
                    let done = CrdStep::Done { reason: "NeverEstablished", message: "resource was never established" };
                    self.crd_work.entry(name.to_string()).or_default().push_front(done);
                    self.next_crd_step(now, name);
                }
            },
            CrdStep::Delete { namespace } => {
                let path = instances_path(&crd, Some(namespace)).unwrap_or_default();
                self.send(asker(step), "DELETE", path, "", None);
            }
            CrdStep::Done { reason, message } => {
                let mut next = crd;
                set_condition(&mut next, "Terminating", ("False", reason, message.to_string()), now);
                self.send(asker(step), "PUT", status_path, "", Some(next));
            }
            CrdStep::RemoveFinalizer { crd } => {
                let mut next = crd.clone();
                let kept: Vec<String> = meta::finalizers(&next).into_iter().filter(|f| f != CLEANUP_FINALIZER).collect();
                meta::set_finalizers(&mut next, &kept);
                self.send(asker(step), "PUT", format!("{CRDS}/{name}"), "", Some(next));
            }
        }
    }

    /// What a CRD request's answer calls for next.
    pub(super) fn crd_answered(&mut self, now: Timestamp, name: &str, step: CrdStep, status: u16, body: Value) {
        // What a write answers is the CRD now: the next write starts from it.
        if status == 200 && matches!(step, CrdStep::Names | CrdStep::InProgress | CrdStep::Done { .. }) {
            self.crds.insert(name.to_string(), body.clone());
        }
        let work = self.crd_work.entry(name.to_string()).or_default();
        match step {
            CrdStep::InProgress if status == 200 => work.push_back(CrdStep::List { deleted: false }),
            CrdStep::List { deleted } if status == 200 => {
                let items = body.get("items").and_then(Value::as_array).cloned().unwrap_or_default();
                if items.is_empty() {
                    work.push_back(CrdStep::Done { reason: "InstanceDeletionCompleted", message: "removed all instances" });
                } else if deleted {
                    self.crd_retry.insert(name.to_string(), now + LOOK_AGAIN);
                } else {
                    let namespaces: BTreeSet<String> = items.iter().map(|i| meta::namespace(i).to_string()).collect();
                    work.extend(namespaces.into_iter().map(|namespace| CrdStep::Delete { namespace }));
                    work.push_back(CrdStep::List { deleted: true });
                }
            }
            CrdStep::Done { .. } if status == 200 => work.push_back(CrdStep::RemoveFinalizer { crd: body }),
            // Anything else (a conflict, a failure) waits for the CRD's next change, or a
            // look again.
            CrdStep::List { .. } | CrdStep::InProgress | CrdStep::Done { .. } => {
                self.crd_retry.insert(name.to_string(), now + LOOK_AGAIN);
            }
            CrdStep::Names | CrdStep::Delete { .. } | CrdStep::RemoveFinalizer { .. } => {}
        }
        if self.crd_work.get(name).is_some_and(|w| !w.is_empty()) {
            self.next_crd_step(now, name);
        } else {
            self.plan_crd(now, name);
        }
    }

    /// CRDs whose look again is due.
    pub(super) fn crd_retries_due(&mut self, now: Timestamp) {
        let due: Vec<String> = self.crd_retry.iter().filter(|(_, at)| **at <= now).map(|(n, _)| n.clone()).collect();
        for name in due {
            self.crd_retry.remove(&name);
            if !self.crd_busy(&name) && self.crd_work.get(&name).is_none_or(VecDeque::is_empty) {
                self.crd_work.entry(name.clone()).or_default().push_back(CrdStep::List { deleted: false });
                self.next_crd_step(now, &name);
            }
        }
    }
}

/// Where a CRD's resources are listed (`namespace` `None`: in every namespace) or deleted, at
/// its storage version if that is served, else its first served version; `None` when none is
/// served or the names were never accepted.
fn instances_path(crd: &Value, namespace: Option<&str>) -> Option<String> {
    let def = Definition::read(crd)?;
    if !def.established && !def.names_accepted {
        return None;
    }
    let version = def.storage_version().filter(|v| v.served).or_else(|| def.versions.iter().find(|v| v.served))?;
    let base = format!("/apis/{}/{}", def.group, version.name);
    Some(match namespace {
        Some(ns) if !ns.is_empty() => format!("{base}/namespaces/{ns}/{}", def.accepted.plural),
        _ => format!("{base}/{}", def.accepted.plural),
    })
}

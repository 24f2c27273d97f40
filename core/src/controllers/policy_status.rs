//! kube-controller-manager's `validatingadmissionpolicy-status-controller`: a
//! ValidatingAdmissionPolicy whose `metadata.generation` is newer than its
//! `status.observedGeneration` is type checked against the kinds it matches
//! (`admission::policies::type_checking`), and its status written by server-side apply with
//! kube's field manager, forcing: `observedGeneration` and `typeChecking` with its
//! `expressionWarnings` (none: `typeChecking: {}`). The check uses the catalog served when
//! the policy is looked at; a kind served later does not bring a policy back (as in kube,
//! only a new generation does).

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::{Asker, Change, Controllers};
use crate::admission::policies::type_checking::expression_warnings;
use crate::meta;

pub(super) const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";

/// The field manager of the controller's writes (kube's `ControllerName`).
const MANAGER: &str = "validatingadmissionpolicy-status";

/// How long after a failed write the policies are looked at again.
const RETRY: SignedDuration = SignedDuration::from_secs(5);

#[derive(Default)]
pub(super) struct PolicyStatus {
    /// The policies by name, as last seen.
    policies: BTreeMap<String, Value>,
    /// The generation whose status is being written, or was written and not yet seen, per
    /// policy.
    written: BTreeMap<String, i64>,
    /// Policies whose write is in flight.
    writing: BTreeSet<String>,
    /// When every policy is looked at again after a write failed.
    pub(super) retry: Option<Timestamp>,
}

impl PolicyStatus {
    /// The generation of `name` whose status is due, if one is.
    fn due(&self, name: &str) -> Option<i64> {
        let policy = self.policies.get(name)?;
        let generation = meta::at(policy, &["metadata", "generation"]).and_then(Value::as_i64).unwrap_or(0);
        let observed = meta::at(policy, &["status", "observedGeneration"]).and_then(Value::as_i64).unwrap_or(0);
        let written = self.written.get(name).copied().unwrap_or(0);
        (generation > observed && generation > written).then_some(generation)
    }
}

impl Controllers {
    pub(super) fn policy_changed(&mut self, change: Change) {
        let name = meta::name(&change.object).to_string();
        if change.deleted {
            self.policy_status.policies.remove(&name);
            self.policy_status.written.remove(&name);
        } else {
            // Once the status written is seen, a status set back by someone else is due again.
            let observed = meta::at(&change.object, &["status", "observedGeneration"]).and_then(Value::as_i64).unwrap_or(0);
            if self.policy_status.written.get(&name).is_some_and(|w| observed >= *w) {
                self.policy_status.written.remove(&name);
            }
            self.policy_status.policies.insert(name.clone(), change.object);
            self.write_policy_status(&name);
        }
    }

    /// Looks at every policy.
    pub(super) fn write_all_policy_statuses(&mut self) {
        let names: Vec<String> = self.policy_status.policies.keys().cloned().collect();
        for name in names {
            self.write_policy_status(&name);
        }
    }

    /// Writes the status of the policy `name` if its generation is newer than its status.
    fn write_policy_status(&mut self, name: &str) {
        if self.policy_status.writing.contains(name) {
            return;
        }
        let Some(generation) = self.policy_status.due(name) else { return };
        let warnings = expression_warnings(&self.policy_status.policies[name], &self.catalog);
        let mut type_checking = json!({});
        if !warnings.is_empty() {
            type_checking["expressionWarnings"] = Value::Array(warnings);
        }
        let apply = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
            "status": {"observedGeneration": generation, "typeChecking": type_checking}});
        self.policy_status.written.insert(name.to_string(), generation);
        self.policy_status.writing.insert(name.to_string());
        let query = format!("fieldManager={MANAGER}&force=true");
        self.send(Asker::PolicyStatus { name: name.to_string(), status: 0 }, "PATCH", format!("{POLICIES}/{name}/status"), &query, Some(apply));
    }

    /// The write of `name`'s status was answered with `status`. The policy's watch event
    /// brings the status; a policy that changed meanwhile is looked at again now, and a
    /// failed write is made again a while later.
    pub(super) fn policy_status_answered(&mut self, now: Timestamp, name: &str, status: u16) {
        self.policy_status.writing.remove(name);
        if (200..300).contains(&status) {
            self.write_policy_status(name);
        } else {
            self.policy_status.written.remove(name);
            self.policy_status.retry = Some(now + RETRY);
        }
    }
}

//! kube-controller-manager's `clusterrole-aggregation` controller: a ClusterRole with an
//! `aggregationRule` holds the rules of the ClusterRoles its selectors pick (each selector in
//! turn, the roles it picks by name, itself left out), each rule once, and nothing else.
//! Any change to any ClusterRole makes every aggregated role be looked at again; one whose
//! rules differ from what it should hold is written by server-side apply, with kube's field
//! manager, forcing, so that `admin`, `edit` and `view` grant what the roles labelled
//! `rbac.authorization.k8s.io/aggregate-to-*` grant.

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::{Asker, Change, Controllers};
use crate::authz::rbac::Rule;
use crate::meta;
use crate::selector::LabelSelector;

pub(super) const CLUSTER_ROLES: &str = "/apis/rbac.authorization.k8s.io/v1/clusterroles";

/// The field manager of the controller's writes.
const MANAGER: &str = "clusterrole-aggregation-controller";

/// How long after a failed write the aggregated roles are looked at again.
const RETRY: SignedDuration = SignedDuration::from_secs(5);

#[derive(Default)]
pub(super) struct Aggregation {
    /// ClusterRoles by name, as last seen.
    roles: BTreeMap<String, Value>,
    /// Aggregated roles whose write is in flight.
    writing: BTreeSet<String>,
    /// Aggregated roles to look at again once their write is answered.
    stale: BTreeSet<String>,
    /// When every aggregated role is looked at again after a write failed.
    pub(super) retry: Option<Timestamp>,
}

impl Aggregation {
    /// The rules the aggregated role `name` should hold, when they are not what it holds.
    fn due(&self, name: &str) -> Option<Vec<Value>> {
        let role = self.roles.get(name)?;
        let selectors = role.get("aggregationRule")?.get("clusterRoleSelectors").and_then(Value::as_array).cloned().unwrap_or_default();
        let mut rules: Vec<Value> = Vec::new();
        let mut seen: Vec<Rule> = Vec::new();
        // A selector that does not parse writes nothing (kube's controller fails the role).
        let selectors: Vec<LabelSelector> = selectors.iter().map(LabelSelector::from_object).collect::<Result<_, _>>().ok()?;
        for selector in &selectors {
            for object in self.roles.iter().filter(|(other, _)| *other != name).map(|(_, o)| o) {
                let labels: Vec<(&str, &str)> = meta::at(object, &["metadata", "labels"])
                    .and_then(Value::as_object)
                    .map(|l| l.iter().filter_map(|(k, v)| Some((k.as_str(), v.as_str()?))).collect())
                    .unwrap_or_default();
                if !selector.matches(&labels) {
                    continue;
                }
                for rule in object.get("rules").and_then(Value::as_array).into_iter().flatten() {
                    let read = Rule::read(rule);
                    if !seen.contains(&read) {
                        seen.push(read);
                        rules.push(rule.clone());
                    }
                }
            }
        }
        let held: Vec<Rule> = role.get("rules").and_then(Value::as_array).into_iter().flatten().map(Rule::read).collect();
        (held != seen).then_some(rules)
    }
}

impl Controllers {
    pub(super) fn cluster_role_changed(&mut self, change: Change) {
        let name = meta::name(&change.object).to_string();
        if change.deleted {
            self.aggregation.roles.remove(&name);
        } else {
            self.aggregation.roles.insert(name, change.object);
        }
        self.aggregate_all();
    }

    /// Looks at every aggregated role.
    pub(super) fn aggregate_all(&mut self) {
        let aggregated: Vec<String> =
            self.aggregation.roles.iter().filter(|(_, r)| r.get("aggregationRule").is_some_and(|a| !a.is_null())).map(|(n, _)| n.clone()).collect();
        for name in aggregated {
            self.aggregate(&name);
        }
    }

    /// Writes what the aggregated role `name` should hold, if it does not.
    fn aggregate(&mut self, name: &str) {
        if self.aggregation.writing.contains(name) {
            self.aggregation.stale.insert(name.to_string());
            return;
        }
        let Some(rules) = self.aggregation.due(name) else { return };
        self.aggregation.writing.insert(name.to_string());
        let apply = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules});
        let query = format!("fieldManager={MANAGER}&force=true");
        self.send(Asker::Aggregation { name: name.to_string(), status: 0 }, "PATCH", format!("{CLUSTER_ROLES}/{name}"), &query, Some(apply));
    }

    /// The write of `name` was answered with `status`. The role's watch event brings what it
    /// holds now; a role that changed meanwhile is looked at again, and all of them a while
    /// after a write failed.
    pub(super) fn aggregation_answered(&mut self, now: Timestamp, name: &str, status: u16) {
        self.aggregation.writing.remove(name);
        if !(200..300).contains(&status) {
            self.aggregation.retry = Some(now + RETRY);
        }
        if self.aggregation.stale.remove(name) {
            self.aggregate(name);
        }
    }
}

//! What the namespace controller learns from a pass over a terminating namespace, and the
//! status conditions it reports from it, worded as kube's namespace deleter words them.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::catalog::Catalog;
use crate::meta;

/// A namespaced collection the controller empties.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Collection {
    /// Its path in a namespace, with `{ns}` for the namespace's name.
    pub path: String,
    /// `<resource>.<group>`, as condition messages name it (`pods.`, `deployments.apps`).
    pub label: String,
}

/// The collections a namespace deletion empties: every namespaced resource that can be
/// deleted by collection and is stored as itself.
pub(super) fn collections(catalog: &Catalog) -> Vec<Collection> {
    catalog
        .resources()
        .filter(|r| r.info.namespaced && r.info.stored() && r.info.stored_as.is_none() && r.info.has_verb("deletecollection"))
        .map(|r| {
            let base = if r.info.group.is_empty() { format!("/api/{}", r.info.version) } else { format!("/apis/{}/{}", r.info.group, r.info.version) };
            Collection { path: format!("{base}/namespaces/{{ns}}/{}", r.info.resource), label: format!("{}.{}", r.info.resource, r.info.group) }
        })
        .collect()
}

/// What is left in a namespace after a deletion pass.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Tally {
    /// Objects left per collection label.
    remaining: BTreeMap<String, usize>,
    /// Objects left per finalizer they carry.
    finalizers: BTreeMap<String, usize>,
    /// Collections that could not be listed.
    failed: usize,
}

impl Tally {
    pub fn count(&mut self, label: &str, items: &[Value]) {
        if !items.is_empty() {
            *self.remaining.entry(label.to_string()).or_default() += items.len();
        }
        for f in items.iter().flat_map(meta::finalizers) {
            *self.finalizers.entry(f).or_default() += 1;
        }
    }

    pub fn failed(&mut self) {
        self.failed += 1;
    }

    /// Nothing is left (as far as could be seen).
    pub fn is_clear(&self) -> bool {
        self.remaining.is_empty() && self.failed == 0
    }

    /// The conditions this pass shows, in kube's order: (type, status, reason, message).
    fn conditions(&self) -> [(&'static str, &'static str, &'static str, String); 5] {
        let listing = |m: &BTreeMap<String, usize>, fmt: fn(&str, usize) -> String| m.iter().map(|(k, n)| fmt(k, *n)).collect::<Vec<_>>().join(", ");
        let content = if self.remaining.is_empty() {
            ("False", "ContentRemoved", "All content successfully removed".to_string())
        } else {
            let what = listing(&self.remaining, |label, n| format!("{label} has {n} resource instances"));
            ("True", "SomeResourcesRemain", format!("Some resources are remaining: {what}"))
        };
        let finalizers = if self.finalizers.is_empty() {
            ("False", "ContentRemoved", "All content successfully removed".to_string())
        } else {
            let what = listing(&self.finalizers, |f, n| format!("{f} in {n} resource instances"));
            ("True", "SomeFinalizerRemain", format!("Some finalizers are remaining: {what}"))
        };
        [
            ("NamespaceDeletionDiscoveryFailure", "False", "ResourcesDiscovered", "All resources successfully discovered".into()),
            ("NamespaceDeletionGroupVersionParsingFailure", "False", "ParsedGroupVersions", "All legacy kube types successfully parsed".into()),
            ("NamespaceDeletionContentFailure", "False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization".into()),
            ("NamespaceContentRemaining", content.0, content.1, content.2),
            ("NamespaceFinalizersRemaining", finalizers.0, finalizers.1, finalizers.2),
        ]
    }
}

/// The namespace with its status conditions brought up to date with `tally`, or `None` when
/// they already say the same. A condition's transition time changes only with its status.
pub(super) fn with_conditions(ns: &Value, tally: &Tally, now: Timestamp) -> Option<Value> {
    let mut ns = ns.clone();
    let status = meta::object_at(&mut ns, &["status"]);
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let list = conditions.as_array_mut().expect("made an array above");
    let mut changed = false;
    for (ty, st, reason, message) in tally.conditions() {
        let fresh = json!({"type": ty, "status": st, "lastTransitionTime": now.to_string(), "reason": reason, "message": message});
        match list.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some(ty)) {
            None => {
                list.push(fresh);
                changed = true;
            }
            Some(old) if old["status"] != st || old["reason"] != reason || old["message"] != message.as_str() => {
                if old["status"] != st {
                    old["lastTransitionTime"] = fresh["lastTransitionTime"].clone();
                }
                old["status"] = json!(st);
                old["reason"] = json!(reason);
                old["message"] = json!(message);
                changed = true;
            }
            Some(_) => {}
        }
    }
    changed.then_some(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_name_what_is_left_and_change_only_when_it_does() {
        let t0: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        let t1: Timestamp = "2024-01-01T00:01:00Z".parse().unwrap();
        let mut tally = Tally::default();
        tally.count("pods.", &[json!({"metadata": {"finalizers": ["example.com/hold"]}}), json!({})]);
        tally.count("deployments.apps", &[]);
        assert!(!tally.is_clear());
        let ns = with_conditions(&json!({"metadata": {"name": "x"}}), &tally, t0).unwrap();
        let conditions = ns["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 5);
        assert_eq!(conditions[3]["message"], "Some resources are remaining: pods. has 2 resource instances");
        assert_eq!(conditions[4]["message"], "Some finalizers are remaining: example.com/hold in 1 resource instances");
        assert_eq!(with_conditions(&ns, &tally, t1), None, "nothing new, no update");

        let ns = with_conditions(&ns, &Tally::default(), t1).unwrap();
        let c = &ns["status"]["conditions"][3];
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str(), c["lastTransitionTime"].as_str()),
            (Some("False"), Some("ContentRemoved"), Some("2024-01-01T00:01:00Z"))
        );
        assert_eq!(ns["status"]["conditions"][0]["lastTransitionTime"], "2024-01-01T00:00:00Z", "an unchanged status keeps its time");
    }
}

//! kube-apiserver v1.33's bootstrap RBAC policy (its `rbac/bootstrap-roles` post-start hook):
//! the default ClusterRoles (`cluster-admin`, `admin`, `edit`, `view`, the `system:` roles of
//! components and of kube-controller-manager's controllers), their bindings, and the Roles and
//! RoleBindings of `kube-system` and `kube-public`, as `bootstrap_policy.json` holds them
//! (kube's default feature gates), and their reconciliation with what is stored: kube's
//! `reconciliation` package in its union mode, which adds what is missing and removes
//! nothing, and leaves alone an object annotated `rbac.authorization.kubernetes.io/autoupdate:
//! "false"`.

use serde_json::{Map, Value, json};

use super::coverage::{to_json, uncovered};
use super::rbac::{Kind, Rule};
use crate::meta;

/// The annotation that, set to `"false"`, keeps an object of the policy as an administrator
/// changed it.
pub const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";

/// The policy, as kube's golden files list it, less what every object carries (see
/// [`policy`]).
const POLICY: &str = include_str!("bootstrap_policy.json");

/// An object of the policy.
#[derive(Clone, Debug)]
pub struct PolicyObject {
    pub kind: Kind,
    pub object: Value,
}

/// The objects of the policy in kube's order: ClusterRoles, ClusterRoleBindings, Roles, then
/// RoleBindings; each with the label and annotation kube's `addDefaultMetadata` gives them.
pub fn policy() -> Vec<PolicyObject> {
    let all: Value = serde_json::from_str(POLICY).expect("the bootstrap policy is JSON");
    let mut out = Vec::new();
    for (kind, type_name) in
        [(Kind::ClusterRole, "ClusterRole"), (Kind::ClusterRoleBinding, "ClusterRoleBinding"), (Kind::Role, "Role"), (Kind::RoleBinding, "RoleBinding")]
    {
        for item in all[kind.resource()].as_array().into_iter().flatten() {
            let mut object = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": type_name});
            object.as_object_mut().expect("an object").extend(item.as_object().cloned().unwrap_or_default());
            let metadata = &mut object["metadata"];
            metadata["labels"]["kubernetes.io/bootstrapping"] = json!("rbac-defaults");
            metadata["annotations"][AUTOUPDATE] = json!("true");
            out.push(PolicyObject { kind, object });
        }
    }
    out
}

/// Whether `held` (the policy the authorizer reads) has every one of `objects` (the bootstrap
/// policy's), so that requests are decided by it.
pub fn in_effect(held: &super::Policy, objects: &[PolicyObject]) -> bool {
    objects.iter().all(|o| {
        let text = |k: &str| meta::str_at(&o.object, &["metadata", k]).unwrap_or_default();
        held.holds(o.kind, text("namespace"), text("name"))
    })
}

/// What an object of the policy that exists needs.
#[derive(Debug, PartialEq)]
pub enum Reconciled {
    Unchanged,
    /// Write this object (the stored one with what it missed).
    Update(Value),
    /// The binding refers to another role: delete it and create the expected one (a
    /// binding's `roleRef` cannot change).
    Recreate,
}

/// What `existing` needs to hold everything `expected` (its object in the policy) does.
pub fn reconcile(kind: Kind, existing: &Value, expected: &Value) -> Reconciled {
    if meta::str_at(existing, &["metadata", "annotations", AUTOUPDATE]) == Some("false") {
        return Reconciled::Unchanged;
    }
    if matches!(kind, Kind::RoleBinding | Kind::ClusterRoleBinding) && existing.get("roleRef") != expected.get("roleRef") {
        return Reconciled::Recreate;
    }
    let mut object = existing.clone();
    let mut changed = add_missing(&mut object, expected, "labels") | add_missing(&mut object, expected, "annotations");
    match kind {
        Kind::Role | Kind::ClusterRole => {
            let rules = |v: &Value| v.get("rules").and_then(Value::as_array).map(|a| a.iter().map(Rule::read).collect::<Vec<_>>()).unwrap_or_default();
            let missing = uncovered(&rules(existing), &rules(expected));
            changed |= append(&mut object, "rules", missing.iter().map(to_json).collect());
            match (expected.get("aggregationRule"), existing.get("aggregationRule")) {
                (None, Some(_)) => {
                    object.as_object_mut().map(|o| o.remove("aggregationRule"));
                    changed = true;
                }
                (Some(want), have) => {
                    let selectors = |v: Option<&Value>| v.and_then(|r| r.get("clusterRoleSelectors")).and_then(Value::as_array).cloned().unwrap_or_default();
                    let have = selectors(have);
                    let missing: Vec<Value> = selectors(Some(want)).into_iter().filter(|s| !have.contains(s)).collect();
                    if !missing.is_empty() {
                        let rule = object.as_object_mut().expect("an object").entry("aggregationRule").or_insert_with(|| json!({}));
                        changed |= append(rule, "clusterRoleSelectors", missing);
                    }
                }
                (None, None) => {}
            }
        }
        Kind::RoleBinding | Kind::ClusterRoleBinding => {
            // Subjects are compared field by field, an absent field as an empty one.
            let key = |s: &Value| ["kind", "apiGroup", "name", "namespace"].map(|k| s.get(k).and_then(Value::as_str).unwrap_or_default().to_string());
            let subjects = |v: &Value| v.get("subjects").and_then(Value::as_array).cloned().unwrap_or_default();
            let mut have: Vec<_> = subjects(existing).iter().map(key).collect();
            let mut missing: Vec<Value> = Vec::new();
            for s in subjects(expected) {
                if !have.contains(&key(&s)) {
                    have.push(key(&s));
                    missing.push(s);
                }
            }
            changed |= append(&mut object, "subjects", missing);
        }
    }
    if changed { Reconciled::Update(object) } else { Reconciled::Unchanged }
}

/// Adds the labels or annotations (`key`) of `expected` that `object` does not have; the
/// object's own values win. Whether it added any.
fn add_missing(object: &mut Value, expected: &Value, key: &str) -> bool {
    let Some(wanted) = meta::at(expected, &["metadata", key]).and_then(Value::as_object) else { return false };
    let meta = object.as_object_mut().expect("an object").entry("metadata").or_insert_with(|| json!({}));
    let have = meta.as_object_mut().expect("metadata is an object").entry(key).or_insert_with(|| Value::Object(Map::new()));
    if !have.is_object() {
        *have = Value::Object(Map::new());
    }
    let have = have.as_object_mut().expect("an object");
    let mut added = false;
    for (k, v) in wanted {
        if !have.contains_key(k) {
            have.insert(k.clone(), v.clone());
            added = true;
        }
    }
    added
}

/// Appends `items` to the list `key` of `object`; whether there were any.
fn append(object: &mut Value, key: &str, items: Vec<Value>) -> bool {
    if items.is_empty() {
        return false;
    }
    let list = object.as_object_mut().expect("an object").entry(key).or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    list.as_array_mut().expect("a list").extend(items);
    true
}

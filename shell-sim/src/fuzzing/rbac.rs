//! RBAC decisions under fuzzing: Roles, ClusterRoles and their bindings put and removed in any
//! order (names, namespaces, subjects and rules drawn from small sets, so that they meet), and
//! after each change, requests of users from the same sets decided by kapi's index and by
//! kube's algorithm written plainly here (every ClusterRoleBinding by name, then every
//! RoleBinding of the request's namespace): they must agree on the verdict, on the binding
//! that allows, and on whether a missing role is the reason.

use std::collections::BTreeMap;
use std::sync::Arc;

use arbitrary::{Arbitrary, Unstructured};
use kapi_core::auth::UserInfo;
use kapi_core::authz::rbac::{Kind, Rule};
use kapi_core::authz::{Attributes, Policy, Verdict};
use serde_json::{Value, json};

pub(super) const NAMES: &[&str] = &["a", "b", "c"];
pub(super) const NAMESPACES: &[&str] = &["dev", "prod"];
const USERS: &[&str] = &["alice", "bob", "system:serviceaccount:dev:robot", "system:serviceaccount:prod:robot"];
const GROUPS: &[&str] = &["team", "ops", "system:authenticated"];
const VERBS: &[&str] = &["get", "list", "create", "*"];
const API_GROUPS: &[&str] = &["", "apps", "*"];
const RESOURCES: &[&str] = &["pods", "pods/log", "*/status", "deployments", "*"];
const SUBRESOURCES: &[&str] = &["", "log", "status"];
const URLS: &[&str] = &["/healthz", "/apis/*", "/api**", "*"];
const PATHS: &[&str] = &["/healthz", "/apis/apps", "/api", "/metrics"];

pub(super) fn pick<'a>(u: &mut Unstructured, from: &[&'a str]) -> arbitrary::Result<&'a str> {
    Ok(from[u.choose_index(from.len())?])
}

/// Up to three of `from`.
fn some(u: &mut Unstructured, from: &[&str]) -> arbitrary::Result<Vec<String>> {
    (0..u.int_in_range(0u8..=3)?).map(|_| pick(u, from).map(str::to_string)).collect()
}

pub(super) fn rules(u: &mut Unstructured) -> arbitrary::Result<Value> {
    let mut rules = Vec::new();
    for _ in 0..u.int_in_range(0u8..=2)? {
        let mut rule = json!({"verbs": some(u, VERBS)?});
        if bool::arbitrary(u)? {
            rule["nonResourceURLs"] = json!(some(u, URLS)?);
        } else {
            rule["apiGroups"] = json!(some(u, API_GROUPS)?);
            rule["resources"] = json!(some(u, RESOURCES)?);
            if bool::arbitrary(u)? {
                rule["resourceNames"] = json!(some(u, NAMES)?);
            }
        }
        rules.push(rule);
    }
    Ok(Value::Array(rules))
}

pub(super) fn subjects(u: &mut Unstructured) -> arbitrary::Result<Value> {
    let mut subjects = Vec::new();
    for _ in 0..u.int_in_range(0u8..=3)? {
        subjects.push(match u.int_in_range(0u8..=3)? {
            0 => json!({"kind": "User", "name": pick(u, USERS)?}),
            1 => json!({"kind": "Group", "name": pick(u, GROUPS)?}),
            2 => json!({"kind": "ServiceAccount", "name": "robot", "namespace": pick(u, NAMESPACES)?}),
            _ => json!({"kind": "ServiceAccount", "name": "robot"}),
        });
    }
    Ok(Value::Array(subjects))
}

/// The objects as stored, by kind (its place in [`KINDS`]), namespace (empty for the
/// cluster's) and name.
pub(crate) type Objects = BTreeMap<(usize, String, String), Arc<Value>>;

pub(crate) const KINDS: [Kind; 4] = [Kind::Role, Kind::ClusterRole, Kind::RoleBinding, Kind::ClusterRoleBinding];

pub fn rbac(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let (mut policy, mut objects) = (Policy::default(), Objects::new());
    while !u.is_empty() {
        if change(&mut u, &mut policy, &mut objects).is_err() {
            return;
        }
        for _ in 0..3 {
            let Ok((user, attrs)) = request(&mut u) else { return };
            let (verdict, reason) = policy.authorize(&user, &attrs);
            let (expected, allowing, missing) = reference(&objects, &user, &attrs);
            assert_eq!(verdict, expected, "{user:?} {attrs:?} {objects:?}");
            match allowing {
                Some(binding) => assert!(reason.starts_with(&format!("RBAC: allowed by {binding} ")), "{reason} is not by {binding}"),
                None => assert_eq!(reason.is_empty(), !missing, "{reason:?}"),
            }
        }
    }
}

fn change(u: &mut Unstructured, policy: &mut Policy, objects: &mut Objects) -> arbitrary::Result<()> {
    let k = u.choose_index(KINDS.len())?;
    let kind = KINDS[k];
    let namespace = if matches!(kind, Kind::Role | Kind::RoleBinding) { pick(u, NAMESPACES)? } else { "" };
    let name = pick(u, NAMES)?;
    let key = (k, namespace.to_string(), name.to_string());
    if u.ratio(1, 4)? {
        policy.remove(kind, namespace, name);
        objects.remove(&key);
        return Ok(());
    }
    let mut obj = json!({"metadata": {"name": name}});
    if !namespace.is_empty() {
        obj["metadata"]["namespace"] = json!(namespace);
    }
    match kind {
        Kind::Role | Kind::ClusterRole => obj["rules"] = rules(u)?,
        Kind::RoleBinding | Kind::ClusterRoleBinding => {
            let role_kind = if kind == Kind::ClusterRoleBinding || bool::arbitrary(u)? { "ClusterRole" } else { "Role" };
            obj["roleRef"] = json!({"kind": role_kind, "name": pick(u, NAMES)?});
            obj["subjects"] = subjects(u)?;
        }
    }
    policy.put(kind, &obj);
    objects.insert(key, Arc::new(obj));
    Ok(())
}

pub(super) fn request(u: &mut Unstructured) -> arbitrary::Result<(UserInfo, Attributes)> {
    let user = UserInfo { name: pick(u, USERS)?.to_string(), groups: some(u, GROUPS)?, ..Default::default() };
    let attrs = if u.ratio(1, 4)? {
        Attributes { verb: pick(u, VERBS)?.to_string(), path: pick(u, PATHS)?.to_string(), ..Default::default() }
    } else {
        Attributes {
            verb: pick(u, &VERBS[..3])?.to_string(),
            group: pick(u, &API_GROUPS[..2])?.to_string(),
            resource: pick(u, &["pods", "deployments", "replicasets"])?.to_string(),
            subresource: pick(u, SUBRESOURCES)?.to_string(),
            namespace: pick(u, &["", "dev", "prod"])?.to_string(),
            name: pick(u, NAMES)?.to_string(),
            ..Attributes::resource("", "", "", "", "", "")
        }
    };
    Ok((user, attrs))
}

/// kube's RBAC authorizer, walking every binding: the verdict, the binding that allows (as
/// its reason names it), and whether a binding named a role that does not exist.
pub(crate) fn reference(objects: &Objects, user: &UserInfo, attrs: &Attributes) -> (Verdict, Option<String>, bool) {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let bindings = objects.iter().filter(|((k, ns, _), _)| match KINDS[*k] {
        Kind::ClusterRoleBinding => true,
        Kind::RoleBinding => !attrs.namespace.is_empty() && *ns == attrs.namespace,
        _ => false,
    });
    // ClusterRoleBindings (namespace "") first, then by name.
    let mut bindings: Vec<_> = bindings.collect();
    bindings.sort_by_key(|((_, ns, name), _)| (ns.clone(), name.clone()));
    let mut missing = false;
    for ((_, ns, name), b) in bindings {
        let applies = b["subjects"].as_array().into_iter().flatten().any(|subject| match s(subject, "kind").as_str() {
            "User" => s(subject, "name") == user.name,
            "Group" => user.groups.contains(&s(subject, "name")),
            "ServiceAccount" => {
                let sa_ns = if s(subject, "namespace").is_empty() { ns.clone() } else { s(subject, "namespace") };
                !sa_ns.is_empty() && user.name == format!("system:serviceaccount:{sa_ns}:{}", s(subject, "name"))
            }
            _ => false,
        });
        if !applies {
            continue;
        }
        let cluster_role = ns.is_empty() || s(&b["roleRef"], "kind") == "ClusterRole";
        let role_key = if cluster_role { (1, String::new(), s(&b["roleRef"], "name")) } else { (0, ns.clone(), s(&b["roleRef"], "name")) };
        let Some(role) = objects.get(&role_key) else {
            missing = true;
            continue;
        };
        if role["rules"].as_array().into_iter().flatten().any(|r| Rule::read(r).allows(attrs)) {
            let what = if ns.is_empty() { format!("ClusterRoleBinding \"{name}\"") } else { format!("RoleBinding \"{name}/{ns}\"") };
            return (Verdict::Allow, Some(what), missing);
        }
    }
    (Verdict::NoOpinion, None, missing)
}

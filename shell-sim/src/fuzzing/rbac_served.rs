//! RBAC through the server under fuzzing: a server whose requests RBAC authorizes (with kube's
//! bootstrap policy) has Roles, ClusterRoles and their bindings written and deleted over HTTP
//! in any order, and after each change users (impersonated, with any groups) make requests of
//! any verb, resource, subresource, namespace and name, and of non-resource paths. Each answer
//! must be what kube's RBAC walk over the objects the server holds at that moment decides: the
//! authorizers' 403 exactly when no binding allows the request. So a change takes effect for the very next
//! request (the watch caches feed the policy the server authorizes with), and no request is
//! decided by a policy older than one already seen.

use arbitrary::Unstructured;
use bytes::Bytes;
use kapi_core::auth::UserInfo;
use kapi_core::authz::Verdict;
use kapi_core::authz::rbac::Kind;
use kapi_core::pipeline::Request;
use serde_json::json;

use super::rbac::{KINDS, NAMES, NAMESPACES, Objects, pick, reference, request, rules, subjects};
use crate::{ADMIN_TOKEN, World, epoch, server_authorizing};

const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

fn collection(kind: Kind, namespace: &str) -> String {
    if namespace.is_empty() { format!("{RBAC}/{}", kind.resource()) } else { format!("{RBAC}/namespaces/{namespace}/{}", kind.resource()) }
}

pub fn rbac_served(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let mut w = World::new(server_authorizing("RBAC"), epoch(), 3);
    for ns in NAMESPACES {
        w.call("POST", "/api/v1/namespaces", "", Some(&json!({"metadata": {"name": ns}})), "application/json");
    }
    while !u.is_empty() {
        if change(&mut u, &mut w).is_err() {
            return;
        }
        let objects = stored(&mut w);
        for _ in 0..3 {
            let Ok((user, mut attrs)) = request(&mut u) else { return };
            if attrs.verb == "*" {
                continue;
            }
            let (method, path) = if !attrs.resource_request {
                attrs.verb = "get".into();
                ("GET", attrs.path.clone())
            } else {
                if attrs.verb != "get" {
                    (attrs.name, attrs.subresource) = (String::new(), String::new());
                }
                let base = if attrs.group.is_empty() { "/api/v1".to_string() } else { format!("/apis/{}/v1", attrs.group) };
                let mut path = if attrs.namespace.is_empty() { base } else { format!("{base}/namespaces/{}", attrs.namespace) };
                for part in [&attrs.resource, &attrs.name, &attrs.subresource].into_iter().filter(|p| !p.is_empty()) {
                    path = format!("{path}/{part}");
                }
                (if attrs.verb == "create" { "POST" } else { "GET" }, path)
            };
            let acting = acting_as(&user);
            let (expected, by, _) = reference(&objects, &acting, &attrs);
            let r = impersonating(&mut w, &user, method, &path);
            let status = r.head.status;
            // An authorizer's refusal, not admission's (a pod without its service account).
            let refused = status == 403 && String::from_utf8_lossy(&r.body).contains(&format!("User \\\"{}\\\" cannot", user.name));
            assert_eq!(
                !refused,
                expected == Verdict::Allow,
                "{method} {path} as {acting:?}: {status} {}, kube's walk says {expected:?} {by:?}",
                String::from_utf8_lossy(&r.body)
            );
        }
    }
}

/// The user kube's impersonation makes of `user`: a service account's groups when none are
/// asked, and `system:authenticated`.
fn acting_as(user: &UserInfo) -> UserInfo {
    let mut groups = user.groups.clone();
    if groups.is_empty()
        && let Some(ns) = user.name.strip_prefix("system:serviceaccount:").and_then(|rest| rest.split(':').next())
    {
        groups = vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{ns}")];
    }
    if !groups.iter().any(|g| g == "system:authenticated") {
        groups.push("system:authenticated".into());
    }
    UserInfo { groups, ..user.clone() }
}

fn impersonating(w: &mut World, user: &UserInfo, method: &str, path: &str) -> crate::Response {
    let mut headers = vec![("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}")), ("Impersonate-User".to_string(), user.name.clone())];
    headers.extend(user.groups.iter().map(|g| ("Impersonate-Group".to_string(), g.clone())));
    let body = if method == "POST" { Bytes::from_static(b"{}") } else { Bytes::new() };
    if method == "POST" {
        headers.push(("Content-Type".into(), "application/json".into()));
    }
    w.request(Request { method: method.into(), path: path.into(), headers, body, ..Default::default() })
}

/// A Role, ClusterRole or binding written (created anew) or deleted, as the administrator.
fn change(u: &mut Unstructured, w: &mut World) -> arbitrary::Result<()> {
    let kind = KINDS[u.choose_index(KINDS.len())?];
    let namespace = if matches!(kind, Kind::Role | Kind::RoleBinding) { pick(u, NAMESPACES)? } else { "" };
    let name = pick(u, NAMES)?;
    w.call("DELETE", &format!("{}/{name}", collection(kind, namespace)), "", None, "");
    if u.ratio(1, 4)? {
        return Ok(());
    }
    let mut obj = json!({"metadata": {"name": name}});
    match kind {
        Kind::Role | Kind::ClusterRole => obj["rules"] = rules(u)?,
        Kind::RoleBinding | Kind::ClusterRoleBinding => {
            let role_kind = if kind == Kind::ClusterRoleBinding || u.ratio(1, 2)? { "ClusterRole" } else { "Role" };
            obj["roleRef"] = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": pick(u, NAMES)?});
            obj["subjects"] = subjects(u)?;
            for s in obj["subjects"].as_array_mut().into_iter().flatten() {
                if s["kind"] != "ServiceAccount" {
                    s["apiGroup"] = json!("rbac.authorization.k8s.io");
                }
            }
        }
    }
    // What the server refuses (a rule without verbs, say) is simply not there.
    w.call("POST", &collection(kind, namespace), "", Some(&obj), "application/json");
    Ok(())
}

/// Every RBAC object the server holds now, as kube's walk reads them.
fn stored(w: &mut World) -> Objects {
    let mut objects = Objects::new();
    for (k, kind) in KINDS.iter().enumerate() {
        let list = w.call("GET", &format!("{RBAC}/{}", kind.resource()), "", None, "").json();
        for item in list["items"].as_array().into_iter().flatten() {
            let text = |f: &str| item["metadata"][f].as_str().unwrap_or_default().to_string();
            objects.insert((k, text("namespace"), text("name")), std::sync::Arc::new(item.clone()));
        }
    }
    objects
}

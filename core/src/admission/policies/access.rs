//! kube's check that whoever writes an admission policy or binding may read its params
//! (`pkg/registry/admissionregistration/*/authz.go`): a policy's writer must be allowed to
//! `get` every object of its `paramKind`, a binding's to `get` the object its `paramRef`
//! names (to `list` them, for a selector). Members of `system:masters` always may. Checked
//! when the object is otherwise valid; a refusal is a `Forbidden` field error (with the
//! authorizers' error when they met one, as kube returns it). A decision the
//! authorization webhook must make first is the review to ask it (the write waits for it).

use serde_json::Value;

use super::Policies;
use crate::auth::UserInfo;
use crate::authz::{Access, Ask, Attributes, PRIVILEGED_GROUP};
use crate::catalog::Catalog;
use crate::meta;
use crate::status::FieldError;

/// What is written: a policy, or a binding of the policies of `policies`.
pub enum Written<'a> {
    Policy,
    Binding(&'a Policies),
}

/// The group, version and resource of `api_version`'s `kind` as kube's resolver finds them:
/// `*` for what it cannot tell (an apiVersion that does not parse: all three).
fn resolved(catalog: &Catalog, api_version: &str, kind: &str) -> (String, String, String) {
    let parts: Vec<&str> = api_version.split('/').collect();
    let (group, version) = match parts.as_slice() {
        [version] => ("", *version),
        [group, version] => (*group, *version),
        _ => return ("*".into(), "*".into(), "*".into()),
    };
    let resource = catalog.resources_of(group, version).into_iter().find(|r| r.info.kind == kind).map_or("*".to_string(), |r| r.info.resource.clone());
    (group.into(), version.into(), resource)
}

/// Go's `%v` of the user (`&{alice  [system:authenticated] map[]}`).
fn go_user(user: &UserInfo) -> String {
    let extra: Vec<String> = user.extra.iter().map(|(k, v)| format!("{k}:[{}]", v.join(" "))).collect();
    format!("&{{{} {} [{}] map[{}]}}", user.name, user.uid, user.groups.join(" "), extra.join(" "))
}

/// kube's refusal of the write of `obj` (`old`: what an update replaces) by `user`, if the
/// chain does not let the user read its params; or the review the webhook must answer first.
pub fn check(written: Written<'_>, catalog: &Catalog, access: &Access, user: &UserInfo, obj: &Value, old: Option<&Value>) -> Result<Option<FieldError>, Ask> {
    if user.groups.iter().any(|g| g == PRIVILEGED_GROUP) {
        return Ok(None);
    }
    // kube's words when the chain does not allow it; the authorizers' error, if any, first.
    let refused = |q: &Attributes, path: &str, why: String| {
        let d = access.decide_or_ask(user, q)?;
        Ok(match (d.error.is_empty(), d.allowed) {
            (false, _) => Some(FieldError::forbidden(path, d.error)),
            (true, false) => Some(FieldError::forbidden(path, why)),
            (true, true) => None,
        })
    };
    match written {
        Written::Policy => {
            let Some(kind) = meta::at(obj, &["spec", "paramKind"]).filter(|k| k.is_object()) else { return Ok(None) };
            if old.and_then(|o| meta::at(o, &["spec", "paramKind"])) == Some(kind) {
                return Ok(None);
            }
            let (api_version, kind) = (meta::str_at(kind, &["apiVersion"]).unwrap_or_default(), meta::str_at(kind, &["kind"]).unwrap_or_default());
            let (group, version, resource) = resolved(catalog, api_version, kind);
            let q = Attributes { version, ..Attributes::resource("get", &group, &resource, "", "*", "*") };
            let why = format!(
                r#"user {} must have "get" permission on all objects of the referenced paramKind (kind={kind}, apiVersion={api_version})"#,
                go_user(user)
            );
            refused(&q, "spec.paramKind", why)
        }
        Written::Binding(policies) => {
            let Some(r) = meta::at(obj, &["spec", "paramRef"]).filter(|r| r.is_object()) else { return Ok(None) };
            let policy = policies.policy(meta::str_at(obj, &["spec", "policyName"]).unwrap_or_default());
            let (group, version, resource) = match policy.and_then(|p| p.param_kind.as_ref()) {
                Some((api_version, kind)) => resolved(catalog, api_version, kind),
                None => ("*".into(), "*".into(), "*".into()),
            };
            let name = meta::str_at(r, &["name"]).unwrap_or_default();
            let verb = if name.is_empty() { "list" } else { "get" };
            let namespace = meta::str_at(r, &["namespace"]).unwrap_or_default();
            let q = Attributes { version, ..Attributes::resource(verb, &group, &resource, "", namespace, name) };
            let why = format!(r#"user {} does not have "{verb}" permission on the object referenced by paramRef"#, go_user(user));
            refused(&q, "spec.paramRef", why)
        }
    }
}

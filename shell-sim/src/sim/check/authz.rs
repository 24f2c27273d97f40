//! Invariant 8: every decision of the RBAC authorizer on a member's request is what kube's
//! walk over every binding decides (`crate::fuzzing::rbac::reference`) with the RBAC objects
//! the store held at the revisions of the caches the authorizers' snapshot was made from; and
//! no request is allowed by a policy older than one its client was already answered by.
//!
//! A snapshot's revisions ([`Policy`]) are one per kind (Roles, ClusterRoles, RoleBindings,
//! ClusterRoleBindings), each that of its cache when last taken in; 0 for a kind not taken in
//! since the server started (none of its objects count). RBAC grants only: a snapshot that
//! lacks a kind allows less, never more, so "older" means a kind taken in at an earlier
//! revision than one the client already met.

use std::collections::BTreeMap;

use kapi_core::auth::UserInfo;
use kapi_core::authz::{Attributes, Verdict};

use super::{Call, Checked, Invariant, Target, violation};
use crate::fuzzing::rbac::{KINDS, Objects, reference};
use crate::sim::clients::rbac::MEMBERS;
use crate::sim::oracle::Oracle;
use crate::sim::server::Policy;

/// The newest policy each client has been answered by, kind by kind.
#[derive(Default)]
pub struct Policies {
    seen: BTreeMap<usize, Policy>,
}

impl Policies {
    /// What `client` has met so far (when it sends a request).
    pub fn seen(&self, client: usize) -> Policy {
        self.seen.get(&client).copied().unwrap_or_default()
    }

    /// Checks the answer to a member's request (`seen`: what its client had met when it sent
    /// it), then counts its policy as met.
    pub fn answered(&mut self, call: &Call, status: u16, seen: Policy, oracle: &Oracle) -> Checked {
        let (Some(member), Some(target)) = (call.member, &call.target) else { return Ok(()) };
        let person = &MEMBERS[member];
        let mut groups: Vec<String> = person.groups.iter().map(|g| g.to_string()).collect();
        groups.push("system:authenticated".into());
        let user = UserInfo { name: person.name.into(), groups, ..Default::default() };
        let attrs = attributes(call, target);
        let (verdict, by, _) = reference(&objects_at(oracle, &call.policy), &user, &attrs);
        let forbidden = status == 403;
        if forbidden == (verdict == Verdict::Allow) {
            return violation(
                Invariant::Authorization,
                format!(
                    "{} {} {:?} as {} answered {status}, but the RBAC objects at the revisions {:?} of its snapshot {}",
                    call.method,
                    attrs.verb,
                    call.target,
                    person.name,
                    call.policy,
                    by.map_or("allow nothing".to_string(), |b| format!("allow it by {b}"))
                ),
            );
        }
        if !forbidden && call.policy.iter().zip(seen).any(|(met, before)| *met != 0 && *met < before) {
            return violation(
                Invariant::Authorization,
                format!(
                    "{} {:?} as {} was allowed by the policy of revisions {:?}, after an answer by that of {seen:?}",
                    call.method, call.target, person.name, call.policy
                ),
            );
        }
        let met = self.seen.entry(call.caller).or_default();
        for (m, now) in met.iter_mut().zip(call.policy) {
            *m = (*m).max(now);
        }
        Ok(())
    }
}

/// What a member's request asks, as kube's request info makes it.
fn attributes(call: &Call, target: &Target) -> Attributes {
    let verb = match (call.method.as_str(), target.name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        _ => "deletecollection",
    };
    let (group, _) = target.kind.api_version().rsplit_once('/').unwrap_or(("", ""));
    let name = if call.method == "POST" { "" } else { target.name.as_deref().unwrap_or_default() };
    Attributes::resource(verb, group, target.kind.resource(), "", target.namespace.as_deref().unwrap_or_default(), name)
}

/// The RBAC objects of each kind at the revision the policy says (none where it says 0).
fn objects_at(oracle: &Oracle, policy: &Policy) -> Objects {
    let mut objects = Objects::new();
    for (k, (kind, revision)) in KINDS.iter().zip(policy).enumerate() {
        if *revision == 0 {
            continue;
        }
        for (_, facts) in oracle.state(format!("/registry/{}/", kind.resource()).as_bytes(), *revision) {
            let Some(object) = &facts.rbac else { continue };
            let text = |f: &str| object["metadata"][f].as_str().unwrap_or_default().to_string();
            objects.insert((k, text("namespace"), text("name")), object.clone());
        }
    }
    objects
}

//! Invariant 9: a quota is never exceeded by acknowledged writes. In a world whose namespaces
//! each have a ResourceQuota of `count/configmaps`, every configmap a client is told was
//! created leaves its namespace holding no more configmaps than the quota allows, at the
//! revision of that create; and a create refused by the quota is refused in kube's words.

use super::{Call, Checked, Invariant, identity, prefix, violation};
use crate::sim::kinds::Kind;
use crate::sim::oracle::Oracle;

/// The name of each namespace's quota.
pub const QUOTA: &str = "configmaps";

/// Whether `v`, the answer to `call`, is the quota's refusal of a configmap create.
pub fn refused(call: &Call, code: u16, v: &serde_json::Value) -> bool {
    let create = matches!(call.method.as_str(), "POST" | "PUT" | "PATCH");
    let configmaps = call.target.as_ref().is_some_and(|t| t.kind == Kind::ConfigMaps);
    let message = v["message"].as_str().unwrap_or_default();
    call.quota.is_some()
        && create
        && configmaps
        && code == 403
        && message.contains(&format!("is forbidden: exceeded quota: {QUOTA}, requested: count/configmaps=1"))
}

/// Checks a configmap's acknowledged creation (201) against its namespace's quota.
pub fn answered(call: &Call, code: u16, object: &serde_json::Value, oracle: &Oracle) -> Checked {
    let (Some(hard), 201) = (call.quota, code) else { return Ok(()) };
    let Some(target) = call.target.as_ref().filter(|t| t.kind == Kind::ConfigMaps) else { return Ok(()) };
    let Some((_, rv)) = identity(target.kind, object) else { return Ok(()) };
    let ns = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let held = oracle.state(&prefix(Kind::ConfigMaps, Some(ns)), rv).len() as u64;
    if held > hard {
        return violation(Invariant::Quota, format!("a configmap created at revision {rv} left {held} in namespace {ns}, whose quota allows {hard}"));
    }
    Ok(())
}

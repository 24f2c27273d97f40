//! Invariant 10: a webhook that did not answer never lets a write through. In a world with
//! admission webhooks, every configmap a client is told was created or updated was allowed by
//! the validating webhook (whose failure policy is `Fail`), as it was judged; a write the
//! webhook refused, or could not be asked about, is refused in kube's words.

use super::{Call, Checked, Invariant, violation};
use crate::sim::kinds::Kind;
use crate::sim::webhooks::{GUARD, WebhookServers, judged};

/// Whether the call writes a configmap in a world with webhooks.
fn guarded(call: &Call) -> bool {
    call.webhooks && matches!(call.method.as_str(), "POST" | "PUT" | "PATCH") && call.target.as_ref().is_some_and(|t| t.kind == Kind::ConfigMaps)
}

/// Whether `v`, the answer to `call`, is the guard's refusal (its 403) or kube's 500 for a
/// guard that could not be asked.
pub fn refused(call: &Call, code: u16, v: &serde_json::Value) -> bool {
    let message = v["message"].as_str().unwrap_or_default();
    guarded(call)
        && match code {
            403 => message == format!("admission webhook \"{GUARD}\" denied the request: v is a multiple of ten"),
            500 => message.starts_with(&format!("Internal error occurred: failed calling webhook \"{GUARD}\": failed to call webhook: Post ")),
            _ => false,
        }
}

/// Checks an acknowledged configmap write against what the guard allowed.
pub fn answered(call: &Call, code: u16, object: &serde_json::Value, servers: Option<&WebhookServers>) -> Checked {
    let Some(servers) = servers.filter(|_| guarded(call) && (200..300).contains(&code) && object["kind"] == "ConfigMap") else { return Ok(()) };
    if !servers.allowed(object) {
        return violation(Invariant::Admission, format!("a configmap write was acknowledged that the webhook {GUARD} never allowed: {:?}", judged(object)));
    }
    Ok(())
}

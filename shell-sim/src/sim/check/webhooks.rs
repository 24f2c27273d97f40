//! Invariant 10: what admission refuses is never acknowledged. In a world with admission
//! webhooks, every configmap a client is told was created or updated was allowed by the
//! validating webhook (whose failure policy is `Fail`), as it was judged; a write the webhook
//! refused, or could not be asked about, is refused in kube's words. In a world with the
//! validating admission policy [`POLICY`], no configmap acknowledged has a `v` that is a
//! multiple of seven; the policy refuses such a write in kube's words; and every configmap
//! acknowledged bears the stamp of the mutating admission policy of the same name.

use serde_json::{Value, json};

use super::{Call, Checked, Invariant, violation};
use crate::sim::kinds::Kind;
use crate::sim::webhooks::{GUARD, WebhookServers, judged};

/// Whether the call writes a configmap in a world with webhooks.
fn guarded(call: &Call) -> bool {
    call.webhooks && matches!(call.method.as_str(), "POST" | "PUT" | "PATCH") && call.target.as_ref().is_some_and(|t| t.kind == Kind::ConfigMaps)
}

/// The admission policy's name (and its binding's).
pub const POLICY: &str = "sim-guard";

/// The label the mutating admission policy stamps configmaps with (the webhooks' stamp
/// replaces the annotations).
const STAMP: &str = "sim.kapi.dev/stamped-by";

/// The policies and their bindings, for the world's setup: their path and body.
pub fn policy() -> [(&'static str, Value); 4] {
    let rules = json!([{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]);
    let validation = json!({"expression": "!has(object.data) || !has(object.data.v) || int(object.data.v) % 7 != 0", "message": "v is a multiple of seven"});
    [
        (
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": POLICY},
                "spec": {"matchConstraints": {"resourceRules": rules}, "validations": [validation]}}),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": POLICY},
                "spec": {"policyName": POLICY, "validationActions": ["Deny"]}}),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1alpha1/mutatingadmissionpolicies",
            json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicy", "metadata": {"name": POLICY},
                "spec": {"matchConstraints": {"resourceRules": rules}, "reinvocationPolicy": "Never", "mutations": [{"patchType": "ApplyConfiguration",
                    "applyConfiguration": {"expression": format!("Object{{metadata: Object.metadata{{labels: {{'{STAMP}': 'policy'}}}}}}")}}]}}),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1alpha1/mutatingadmissionpolicybindings",
            json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": POLICY},
                "spec": {"policyName": POLICY}}),
        ),
    ]
}

/// Whether `v`, the answer to `call`, is the guard's refusal (its 403) or kube's 500 for a
/// guard that could not be asked, or the policy's refusal (422).
pub fn refused(call: &Call, code: u16, v: &serde_json::Value) -> bool {
    let message = v["message"].as_str().unwrap_or_default();
    let policed =
        call.admission_policy && matches!(call.method.as_str(), "POST" | "PUT" | "PATCH") && call.target.as_ref().is_some_and(|t| t.kind == Kind::ConfigMaps);
    let by_policy = format!("is forbidden: ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: v is a multiple of seven");
    if policed && code == 422 && message.ends_with(&by_policy) {
        return true;
    }
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

/// Checks an acknowledged configmap write against the admission policy.
pub fn admitted_by_policy(call: &Call, code: u16, object: &Value) -> Checked {
    let written = matches!(call.method.as_str(), "POST" | "PUT" | "PATCH") && call.target.as_ref().is_some_and(|t| t.kind == Kind::ConfigMaps);
    if !(call.admission_policy && written && (200..300).contains(&code) && object["kind"] == "ConfigMap") {
        return Ok(());
    }
    let v = object["data"]["v"].as_str().and_then(|v| v.parse::<u64>().ok());
    if v.is_some_and(|v| v % 7 == 0) {
        return violation(Invariant::Admission, format!("a configmap write was acknowledged that the policy {POLICY} refuses: {:?}", judged(object)));
    }
    if object["metadata"]["labels"][STAMP] != "policy" {
        return violation(Invariant::Admission, format!("a configmap write was acknowledged without the stamp of the mutating policy {POLICY}: {object}"));
    }
    Ok(())
}

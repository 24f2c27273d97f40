//! Invariant 5: every response is a well-formed object or `metav1.Status`, with the code and
//! reason kube-apiserver gives for the situation the oracle says the request met (for a custom
//! resource, also the situation of its CRD: see [`super::crds`]).

use super::{Call, Checked, Invariant, crds, fail, violation};
use crate::sim::oracle::Oracle;

/// The reasons kube-apiserver pairs with each code.
fn reason_fits(code: u16, reason: &str) -> bool {
    matches!(
        (code, reason),
        (400, "BadRequest")
            | (404, "NotFound")
            | (409, "Conflict" | "AlreadyExists")
            | (410, "Expired" | "Gone")
            | (405, "MethodNotAllowed")
            | (403, "Forbidden")
            | (422, "Invalid")
            | (500, "InternalError" | "ServerTimeout")
            | (503, "ServiceUnavailable")
            | (504, "Timeout")
    )
}

/// The codes a simulated client's (always well-formed) request may get.
fn code_fits(call: &Call, code: u16) -> bool {
    let list = call.target.as_ref().is_some_and(|t| t.name.is_none());
    let expected = match (call.method.as_str(), list) {
        ("GET", true) => matches!(code, 200 | 410),
        ("GET", false) => matches!(code, 200 | 404),
        ("POST", _) => matches!(code, 201 | 409),
        ("PUT", _) => matches!(code, 200 | 404 | 409),
        ("PATCH", _) => matches!(code, 200 | 201 | 404 | 409),
        ("DELETE", _) => matches!(code, 200 | 202 | 404 | 409),
        _ => false,
    };
    // A custom resource's CRD may be gone, being deleted, or not known yet.
    let custom = call.target.as_ref().is_some_and(|t| t.kind.crd_version().is_some());
    // A member's request may be forbidden (whether rightly is invariant 8's).
    let member = call.member.is_some() && code == 403;
    expected || member || (call.faulty && matches!(code, 500 | 504)) || (custom && matches!(code, 404 | 405 | 503))
}

/// Whether `v` is kube's refusal of a write that came before a restarted server read the
/// admission webhooks' configurations again.
pub fn not_ready(call: &Call, code: u16, v: &serde_json::Value) -> bool {
    call.faulty && code == 403 && v["message"].as_str().is_some_and(|m| m.ends_with("is forbidden: not yet ready to handle request"))
}

/// Checks a whole (non-watch) response; returns its parsed body.
pub fn answered(call: &Call, code: u16, body: &[u8], oracle: &Oracle) -> Result<serde_json::Value, super::Violation> {
    let what = || format!("{} {:?} {:?}", call.method, call.target, call.query);
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Err(fail(Invariant::Response, format!("{} answered {code} with a body that is not JSON: {:?}", what(), String::from_utf8_lossy(body))));
    };
    if call.target.is_some()
        && !code_fits(call, code)
        && !super::quota::refused(call, code, &v)
        && !super::webhooks::refused(call, code, &v)
        && !not_ready(call, code, &v)
    {
        violation(Invariant::Response, format!("{} answered {code}: {v}", what()))?;
    }
    if (200..300).contains(&code) {
        if !v["kind"].is_string() || !v["apiVersion"].is_string() || !v["metadata"].is_object() {
            violation(Invariant::Response, format!("{} answered {code} with a malformed object: {v}", what()))?;
        }
        // An object (not a list, not a delete's Status) comes in the version asked for.
        if let Some(t) = call.target.as_ref().filter(|t| t.name.is_some() && v["kind"] != "Status")
            && (v["apiVersion"] != t.kind.api_version() || t.kind.misshapen(&v).is_some())
        {
            violation(Invariant::Response, format!("{} answered {code} with an object not in the version asked for: {v}", what()))?;
        }
    } else {
        let reason = v["reason"].as_str().unwrap_or("");
        if v["kind"] != "Status" || v["apiVersion"] != "v1" || v["status"] != "Failure" || v["code"] != code || !reason_fits(code, reason) {
            violation(Invariant::Response, format!("{} answered {code} with a malformed Status: {v}", what()))?;
        }
        if call.target.is_some() {
            situation(call, code, reason, oracle)?;
        }
    }
    Ok(v)
}

/// What a custom resource's CRD explains of an error; `None` where it explains nothing.
fn crd_situation(call: &Call, code: u16, oracle: &Oracle) -> Option<Checked> {
    let explained = match code {
        503 => crds::before_crds(call),
        // A create, or an apply that would create.
        405 => matches!(call.method.as_str(), "POST" | "PATCH") && crds::terminating(call, oracle),
        404 if crds::unserved(call, oracle) => true,
        // A collection is found wherever its CRD serves it.
        404 if call.key().is_none() && call.target.is_some() => false,
        _ => return None,
    };
    Some(if explained {
        Ok(())
    } else {
        violation(
            Invariant::Response,
            format!("{} {:?} answered {code}, which the CRD at the catalogs it met ({:?}) does not explain", call.method, call.target, call.catalogs),
        )
    })
}

/// The error must fit what the store held while the request ran.
fn situation(call: &Call, code: u16, reason: &str, oracle: &Oracle) -> Checked {
    if let Some(explained) = crd_situation(call, code, oracle) {
        return explained;
    }
    let Some(key) = call.key() else { return Ok(()) };
    let versions = oracle.versions_between(&key, call.start, call.end);
    let existed = versions.iter().any(Option::is_some);
    let absent = versions.iter().any(Option::is_none);
    let ok = match (call.method.as_str(), code, reason) {
        ("POST", 409, "AlreadyExists") => existed,
        // A read at resourceVersion=0 may be served from any past state.
        ("GET", 404, _) if call.param("resourceVersion").is_some() => true,
        ("PUT", 409, "Conflict") => {
            let rv = call.body["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse::<i64>().ok());
            versions.iter().any(|v| v.as_ref().map(|f| f.mod_revision) != rv)
        }
        (_, 404, _) => absent,
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        violation(
            Invariant::Response,
            format!(
                "{} {} answered {code} {reason}, but between revisions {} and {} the store held {:?}",
                call.method,
                String::from_utf8_lossy(&key),
                call.start,
                call.end,
                versions.iter().map(|v| v.as_ref().map(|f| f.mod_revision)).collect::<Vec<_>>()
            ),
        )
    }
}

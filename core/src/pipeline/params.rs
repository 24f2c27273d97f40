//! Query parameters of resource requests (`ListOptions`, `CreateOptions`, `PatchOptions`,
//! `DeleteOptions`), validated with kube-apiserver's messages.

use base64::Engine;
use serde_json::{Value, json};

use super::query::Query;
use crate::kv::Revision;
use crate::registry::{DeleteOptions, FieldValidation};
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, FieldError, GroupKind};

fn invalid(kind: &str, errs: Vec<FieldError>) -> ApiError {
    ApiError::invalid(&GroupKind { group: "meta.k8s.io".into(), kind: kind.into() }, "", &errs)
}

/// How a list's `resourceVersion` is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RvMatch {
    /// Unset: a consistent (most recent) read.
    Consistent,
    /// `0`: whatever the cache has.
    Any,
    NotOlderThan(Revision),
    Exact(Revision),
}

#[derive(Clone, Debug)]
pub struct ListOptions {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub rv: RvMatch,
    pub limit: i64,
    pub continue_token: Option<ContinueToken>,
    pub allow_bookmarks: bool,
    pub send_initial_events: Option<bool>,
    pub timeout_seconds: Option<i64>,
}

fn parse_rv(s: &str) -> Result<Revision, ApiError> {
    s.parse::<Revision>().map_err(|_| ApiError::bad_request(format!("invalid resource version {s:?}: strconv.ParseUint: parsing {s:?}: invalid syntax")))
}

/// `metav1.ListOptions` from the query, validated (`ValidateListOptions`).
pub fn list_options(q: &Query, watch: bool) -> Result<ListOptions, ApiError> {
    let labels = LabelSelector::parse(q.get("labelSelector").unwrap_or("")).map_err(ApiError::bad_request)?;
    let fields = FieldSelector::parse(q.get("fieldSelector").unwrap_or("")).map_err(ApiError::bad_request)?;
    let rv = q.get("resourceVersion").unwrap_or("").to_string();
    let rv_match = q.get("resourceVersionMatch").unwrap_or("").to_string();
    let cont = q.get("continue").unwrap_or("").to_string();
    let limit = q.int("limit").map_err(ApiError::bad_request)?.unwrap_or(0).max(0);
    let send_initial_events = q.bool("sendInitialEvents").map_err(ApiError::bad_request)?;
    let allow_bookmarks = q.bool("allowWatchBookmarks").map_err(ApiError::bad_request)?.unwrap_or(false);
    let timeout_seconds = q.int("timeoutSeconds").map_err(ApiError::bad_request)?;

    let mut errs = Vec::new();
    if watch {
        if send_initial_events.is_some() && rv_match != "NotOlderThan" {
            errs.push(FieldError::forbidden("resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"));
        }
        if !rv_match.is_empty() {
            if send_initial_events.is_none() {
                errs.push(FieldError::forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
            }
            if rv_match != "NotOlderThan" {
                errs.push(FieldError::not_supported("resourceVersionMatch", json!(rv_match), &["NotOlderThan"]));
            }
            if !cont.is_empty() {
                errs.push(FieldError::forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"));
            }
        }
        if send_initial_events == Some(true) && !allow_bookmarks {
            errs.push(FieldError::forbidden("allowWatchBookmarks", "allowWatchBookmarks must be set to true when sendInitialEvents is true"));
        }
    } else {
        if !rv_match.is_empty() {
            if rv.is_empty() {
                errs.push(FieldError::forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided"));
            }
            if !cont.is_empty() {
                errs.push(FieldError::forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"));
            }
            if rv_match != "Exact" && rv_match != "NotOlderThan" {
                errs.push(FieldError::not_supported("resourceVersionMatch", json!(rv_match), &["Exact", "NotOlderThan", ""]));
            }
            if rv_match == "Exact" && rv == "0" {
                errs.push(FieldError::forbidden("resourceVersionMatch", "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""));
            }
        }
        if send_initial_events.is_some() {
            errs.push(FieldError::forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"));
        }
    }
    if !errs.is_empty() {
        return Err(invalid("ListOptions", errs));
    }
    let continue_token = if cont.is_empty() {
        None
    } else {
        if !rv.is_empty() && rv != "0" {
            return Err(ApiError::bad_request("specifying resource version is not allowed when using continue"));
        }
        Some(ContinueToken::decode(&cont)?)
    };
    let rv_kind = match (rv.as_str(), rv_match.as_str()) {
        ("", _) => RvMatch::Consistent,
        ("0", _) => RvMatch::Any,
        (n, "Exact") => RvMatch::Exact(parse_rv(n)?),
        (n, "NotOlderThan") => RvMatch::NotOlderThan(parse_rv(n)?),
        // The legacy form: a resourceVersion with a limit is an exact read.
        (n, _) if limit > 0 && !watch => RvMatch::Exact(parse_rv(n)?),
        (n, _) => RvMatch::NotOlderThan(parse_rv(n)?),
    };
    Ok(ListOptions { labels, fields, rv: rv_kind, limit, continue_token, allow_bookmarks, send_initial_events, timeout_seconds })
}

/// A list's continue token: `{"v":"meta.k8s.io/v1","rv":N,"start":"<key after the prefix>"}`,
/// base64url without padding, as kube-apiserver writes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContinueToken {
    pub rv: Revision,
    /// The key to continue from, relative to the list's prefix.
    pub start: String,
}

impl ContinueToken {
    pub fn encode(&self) -> String {
        let raw = json!({"v": "meta.k8s.io/v1", "rv": self.rv, "start": self.start});
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(&raw).expect("JSON trees serialize"))
    }

    pub fn decode(s: &str) -> Result<ContinueToken, ApiError> {
        let bad = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).map_err(|e| bad(&e.to_string()))?;
        let v: Value = serde_json::from_slice(&bytes).map_err(|e| bad(&e.to_string()))?;
        if v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
            return Err(bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"));
        }
        let rv = v.get("rv").and_then(Value::as_i64).ok_or_else(|| bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))?;
        // kapi issues no token for an inconsistent continuation (kube's rv -1), so a revision
        // below 1 was never one of its own.
        if rv <= 0 {
            return Err(bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"));
        }
        let start = v.get("start").and_then(Value::as_str).unwrap_or_default().to_string();
        if start.is_empty() || start.split('/').any(|seg| seg == ".." || seg == ".") || start.starts_with('/') {
            return Err(bad("continue key is not valid"));
        }
        Ok(ContinueToken { rv, start })
    }
}

/// `CreateOptions`/`UpdateOptions`/`PatchOptions`: dry run, field manager, field validation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteOptions {
    pub dry_run: bool,
    pub field_manager: String,
    pub field_validation: FieldValidation,
    pub force: Option<bool>,
}

fn printable(s: &str) -> bool {
    s.chars().all(|c| !c.is_control())
}

/// The write options of a request; `kind` names the options type in errors.
pub fn write_options(q: &Query, kind: &str, user_agent: &str) -> Result<WriteOptions, ApiError> {
    let mut errs = Vec::new();
    let dry: Vec<&str> = q.all("dryRun").collect();
    if dry.iter().any(|d| *d != "All") {
        errs.push(FieldError::not_supported("dryRun", json!(dry), &["All"]));
    }
    let field_manager = q.get("fieldManager").unwrap_or("").to_string();
    if field_manager.len() > 128 {
        errs.push(FieldError::too_long("fieldManager", 128));
    }
    if !printable(&field_manager) {
        errs.push(FieldError::invalid("fieldManager", json!(field_manager), "must only contain printable characters"));
    }
    let field_validation = match q.get("fieldValidation").unwrap_or("") {
        "" | "Warn" => FieldValidation::Warn,
        "Ignore" => FieldValidation::Ignore,
        "Strict" => FieldValidation::Strict,
        other => {
            errs.push(FieldError::not_supported("fieldValidation", json!(other), &["Ignore", "Warn", "Strict"]));
            FieldValidation::Warn
        }
    };
    let force = q.bool("force").map_err(ApiError::bad_request)?;
    if !errs.is_empty() {
        return Err(invalid(kind, errs));
    }
    let field_manager =
        if field_manager.is_empty() { user_agent.split('/').next().unwrap_or("").chars().filter(|c| !c.is_control()).collect() } else { field_manager };
    Ok(WriteOptions { dry_run: !dry.is_empty(), field_manager, field_validation, force })
}

/// `DeleteOptions` from the body (if any) and the query, whose options win over the body's
/// (its `dryRun` adds to the body's).
pub fn delete_options(q: &Query, body: Option<&Value>) -> Result<(DeleteOptions, bool), ApiError> {
    let mut options = match body {
        Some(Value::Object(o)) => o.clone(),
        _ => serde_json::Map::new(),
    };
    if let Some(g) = q.int("gracePeriodSeconds").map_err(ApiError::bad_request)? {
        options.insert("gracePeriodSeconds".into(), json!(g));
    }
    if let Some(p) = q.get("propagationPolicy") {
        options.insert("propagationPolicy".into(), json!(p));
    }
    if let Some(o) = q.bool("orphanDependents").map_err(ApiError::bad_request)? {
        options.insert("orphanDependents".into(), json!(o));
    }
    let mut dry: Vec<Value> = q.all("dryRun").map(|d| json!(d)).collect();
    if !dry.is_empty() {
        dry.extend(options.get("dryRun").and_then(Value::as_array).into_iter().flatten().cloned());
        options.insert("dryRun".into(), Value::Array(dry));
    }
    DeleteOptions::read(&Value::Object(options))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_options_follow_kube() {
        let o = list_options(&Query::parse("resourceVersion=10&limit=5"), false).unwrap();
        assert_eq!(o.rv, RvMatch::Exact(10));
        let e = list_options(&Query::parse("resourceVersionMatch=Exact"), false).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        );
        let w = list_options(&Query::parse("sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"), true).unwrap();
        assert_eq!(w.send_initial_events, Some(true));
        assert!(list_options(&Query::parse("labelSelector=a%20b"), false).is_err());
    }

    #[test]
    fn continue_tokens_round_trip() {
        let t = ContinueToken { rv: 42, start: "default/b\u{0}".into() };
        assert_eq!(ContinueToken::decode(&t.encode()).unwrap(), t);
        assert_eq!(ContinueToken::decode("bm9wZQ").unwrap_err().code, 400);
        let negative = ContinueToken { rv: -7, start: "default/b".into() }.encode();
        let e = ContinueToken::decode(&negative).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (400, "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"));
    }

    #[test]
    fn write_options_default_the_manager_from_the_user_agent() {
        let o = write_options(&Query::parse("dryRun=All"), "CreateOptions", "kubectl/v1.32.4 (linux/amd64) kubernetes/x").unwrap();
        assert!(o.dry_run);
        assert_eq!(o.field_manager, "kubectl");
        let e = write_options(&Query::parse("fieldValidation=Loud"), "CreateOptions", "").unwrap_err();
        assert_eq!(e.code, 422);
    }
}

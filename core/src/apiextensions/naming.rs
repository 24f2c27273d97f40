//! The names a CRD's resources are served under, and when they are served: the apiextensions
//! server's naming controller (`NamesAccepted`, `status.acceptedNames`) and establishing
//! controller (`Established`), as one decision on a CRD and the other CRDs of its group.

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::meta;

/// The CRD with the status the controllers would write, or `None` when its status is right.
/// `peers` are the other CRDs of the same group (`spec.group`): a name one of them was granted
/// is not granted again. Names are checked in kube's order (plural, singular, short names,
/// kind, list kind); each conflict leaves the accepted name as it was and the last one found
/// says why the names are not accepted.
pub fn with_status(crd: &Value, peers: &[&Value], now: Timestamp) -> Option<Value> {
    let requested = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let accepted = crd.pointer("/status/acceptedNames").cloned().unwrap_or(json!({}));
    let mut resources: Vec<String> = Vec::new();
    let mut kinds: Vec<String> = Vec::new();
    for peer in peers {
        let names = peer.pointer("/status/acceptedNames").cloned().unwrap_or(json!({}));
        for key in ["plural", "singular"] {
            resources.extend(text(&names, key));
        }
        resources.extend(list(&names, "shortNames"));
        for key in ["kind", "listKind"] {
            kinds.extend(text(&names, key));
        }
    }
    let mut granted = Map::new();
    let mut conflict: Option<(&str, String)> = None;
    let singular_default = text(&requested, "kind").map(|k| k.to_lowercase());
    let list_kind_default = text(&requested, "kind").map(|k| format!("{k}List"));
    let checks: [(&str, &str, Option<String>, &Vec<String>); 4] = [
        ("plural", "PluralConflict", text(&requested, "plural"), &resources),
        ("singular", "SingularConflict", text(&requested, "singular").or(singular_default), &resources),
        ("kind", "KindConflict", text(&requested, "kind"), &kinds),
        ("listKind", "ListKindConflict", text(&requested, "listKind").or(list_kind_default), &kinds),
    ];
    for (key, reason, wanted, used) in checks {
        let wanted = wanted.unwrap_or_default();
        let before = text(&accepted, key).unwrap_or_default();
        let name = if wanted == before || !used.contains(&wanted) {
            wanted
        } else {
            conflict = Some((reason, format!("{wanted:?} is already in use")));
            before
        };
        // `plural` and `kind` are always written; the others are left out when empty.
        if !name.is_empty() || matches!(key, "plural" | "kind") {
            granted.insert(key.into(), json!(name));
        }
        if key == "singular" {
            // Short names come between singular and kind in kube's order.
            let wanted_short = list(&requested, "shortNames");
            let before_short = list(&accepted, "shortNames");
            if wanted_short != before_short {
                let taken: Vec<String> =
                    wanted_short.iter().filter(|s| !before_short.contains(s) && resources.contains(s)).map(|s| format!("{s:?} is already in use")).collect();
                match taken.len() {
                    0 => {}
                    1 => conflict = Some(("ShortNamesConflict", taken[0].clone())),
                    _ => conflict = Some(("ShortNamesConflict", format!("[{}]", taken.join(", ")))),
                }
                let short = if taken.is_empty() { wanted_short } else { before_short };
                if !short.is_empty() {
                    granted.insert("shortNames".into(), json!(short));
                }
            } else if !before_short.is_empty() {
                granted.insert("shortNames".into(), json!(before_short));
            }
        }
    }
    let categories = list(&requested, "categories");
    if !categories.is_empty() {
        granted.insert("categories".into(), json!(categories));
    }
    let names_accepted = match &conflict {
        None => ("True", "NoConflicts", "no conflicts found".to_string()),
        Some((reason, message)) => ("False", *reason, message.clone()),
    };
    let accepted_now = names_accepted.0 == "True";
    let mut next = crd.clone();
    set_condition(&mut next, "NamesAccepted", names_accepted, now);
    let established = condition(&next, "Established");
    if established.as_deref() != Some("True") {
        let state = if accepted_now {
            ("True", "InitialNamesAccepted", "the initial names have been accepted".to_string())
        } else {
            ("False", "NotAccepted", "not all names are accepted".to_string())
        };
        set_condition(&mut next, "Established", state, now);
    }
    meta::object_at(&mut next, &["status"]).insert("acceptedNames".into(), Value::Object(granted));
    (next.get("status") != crd.get("status")).then_some(next)
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string)
}

fn list(v: &Value, key: &str) -> Vec<String> {
    v.get(key).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
}

fn condition(crd: &Value, ty: &str) -> Option<String> {
    crd.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == ty)?.get("status")?.as_str().map(str::to_string)
}

/// kube's `SetCRDCondition`: a new condition is added; an existing one takes the new status,
/// reason and message, and a new transition time only when its status changed.
pub(crate) fn set_condition(crd: &mut Value, ty: &str, (status, reason, message): (&str, &str, String), now: Timestamp) {
    let at = json!(now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
    let status_obj = meta::object_at(crd, &["status"]);
    let conditions = status_obj.entry("conditions").or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let Value::Array(conditions) = conditions else { return };
    match conditions.iter_mut().find(|c| c["type"] == ty) {
        Some(c) => {
            if c["status"] != status || c.get("lastTransitionTime").is_none() {
                c["lastTransitionTime"] = at;
            }
            c["status"] = json!(status);
            c["reason"] = json!(reason);
            c["message"] = json!(message);
        }
        None => conditions.push(json!({"type": ty, "status": status, "lastTransitionTime": at, "reason": reason, "message": message})),
    }
}

//! Strategic merge patch (`k8s.io/apimachinery/pkg/util/strategicpatch`): JSON merge patch
//! where lists with a `merge` patch strategy merge item by item (by their merge key, or as sets
//! of primitives), with the `$patch`, `$retainKeys`, `$setElementOrder/` and
//! `$deleteFromPrimitiveList/` directives. Strategies come from the schema.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::schema::{Definition, Property, Type, schema};
use crate::status::ApiError;

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

/// Applies a strategic merge patch to an object of definition `def`.
pub fn strategic_merge_patch(current: &Value, doc: &Value, def: &Definition) -> Result<Value, ApiError> {
    let patch = doc.as_object().ok_or_else(|| ApiError::bad_request("Invalid JSON document: a strategic merge patch must be a JSON object"))?;
    let mut out = current.clone();
    let Value::Object(orig) = &mut out else { return Err(ApiError::bad_request("the object is not a JSON object")) };
    if merge_map(orig, patch, Some(&def.name))? {
        return Ok(Value::Object(Map::new()));
    }
    Ok(out)
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::bad_request(msg)
}

/// The definition of the objects a property holds (itself, or its list items or map values).
fn element_definition(prop: Option<&Property>) -> Option<String> {
    let mut ty = &prop?.ty;
    loop {
        match ty {
            Type::Object(name) => return Some(name.to_string()),
            Type::Array { items, .. } => ty = items,
            Type::Map { values, .. } => ty = values,
            _ => return None,
        }
    }
}

fn is_directive(k: &str) -> bool {
    k == PATCH || k == RETAIN_KEYS || k.starts_with(SET_ELEMENT_ORDER) || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
}

/// Patch values taken whole still must not carry directives into the object.
fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.iter().filter(|(k, v)| !is_directive(k) && !v.is_null()).map(|(k, v)| (k.clone(), strip_directives(v))).collect()),
        Value::Array(a) => Value::Array(a.iter().filter(|v| v.get(PATCH).and_then(Value::as_str) != Some("delete")).map(strip_directives).collect()),
        other => other.clone(),
    }
}

/// Merges `patch` into `orig`; returns true when the patch deletes the whole map.
fn merge_map(orig: &mut Map<String, Value>, patch: &Map<String, Value>, def_name: Option<&str>) -> Result<bool, ApiError> {
    match patch.get(PATCH).and_then(Value::as_str) {
        Some("replace") => {
            *orig = patch.iter().filter(|(k, _)| k.as_str() != PATCH).map(|(k, v)| (k.clone(), strip_directives(v))).collect();
            return Ok(false);
        }
        Some("delete") => return Ok(true),
        Some("merge") | None => {}
        Some(other) => return Err(bad(format!("Unknown patch type: {other}"))),
    }
    let def = def_name.and_then(|n| schema().get(n));
    // The server's order of lists the patch reorders, before the merge changes them.
    let server_orders: Vec<(String, Vec<Value>)> = patch
        .keys()
        .filter_map(|k| k.strip_prefix(SET_ELEMENT_ORDER))
        .map(|f| (f.to_string(), orig.get(f).and_then(Value::as_array).cloned().unwrap_or_default()))
        .collect();
    for (k, pv) in patch {
        if is_directive(k) {
            continue;
        }
        if pv.is_null() {
            orig.remove(k);
            continue;
        }
        let prop = def.and_then(|d| d.properties.get(k));
        let Some(ov) = orig.get_mut(k) else {
            orig.insert(k.clone(), strip_directives(pv));
            continue;
        };
        match (ov, pv) {
            (Value::Object(om), Value::Object(pm)) => {
                let elem = element_definition(prop);
                // Maps of objects (no properties of their own) merge value by value.
                let is_map_of_objects = matches!(prop.map(|p| &p.ty), Some(Type::Map { values, .. }) if matches!(**values, Type::Object(_)));
                if is_map_of_objects {
                    for (mk, mv) in pm {
                        match (om.get_mut(mk), mv) {
                            (_, Value::Null) => {
                                om.remove(mk);
                            }
                            (Some(Value::Object(inner)), Value::Object(pinner)) => {
                                if merge_map(inner, pinner, elem.as_deref())? {
                                    om.remove(mk);
                                }
                            }
                            _ => {
                                om.insert(mk.clone(), strip_directives(mv));
                            }
                        }
                    }
                } else if merge_map(om, pm, elem.as_deref())? {
                    orig.remove(k);
                }
            }
            (Value::Array(oa), Value::Array(pa)) => {
                let merged = merge_list(oa, pa, prop, k)?;
                *oa = merged;
            }
            (ov, pv) => *ov = strip_directives(pv),
        }
    }
    for (k, pv) in patch {
        if let Some(field) = k.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            let doomed = pv.as_array().ok_or_else(|| bad(format!("{k} must be a list")))?;
            if let Some(Value::Array(a)) = orig.get_mut(field) {
                let doomed: BTreeSet<String> = doomed.iter().map(Value::to_string).collect();
                a.retain(|v| !doomed.contains(&v.to_string()));
            }
        }
    }
    for (k, order) in patch {
        if let Some(field) = k.strip_prefix(SET_ELEMENT_ORDER) {
            let order = order.as_array().ok_or_else(|| bad(format!("{k} must be a list")))?;
            let prop = def.and_then(|d| d.properties.get(field));
            let key = prop.and_then(|p| p.patch_merge_key.clone());
            let server = server_orders.iter().find(|(f, _)| f == field).map(|(_, o)| o.as_slice()).unwrap_or(&[]);
            if let Some(Value::Array(list)) = orig.get_mut(field) {
                *list = set_element_order(list, order, server, key.as_deref());
            }
        }
    }
    if let Some(retain) = patch.get(RETAIN_KEYS) {
        let keys: Vec<&str> = retain.as_array().ok_or_else(|| bad("$retainKeys must be a list"))?.iter().filter_map(Value::as_str).collect();
        for (k, _) in patch.iter().filter(|(k, v)| !is_directive(k) && !v.is_null()) {
            if !keys.contains(&k.as_str()) {
                return Err(ApiError::new(422, "Invalid", format!("The patch has field {k} which is not in $retainKeys")));
            }
        }
        orig.retain(|k, _| keys.contains(&k.as_str()));
    }
    Ok(false)
}

fn merge_list(orig: &[Value], patch: &[Value], prop: Option<&Property>, field: &str) -> Result<Vec<Value>, ApiError> {
    let strategy = prop.and_then(|p| p.patch_strategy.as_deref()).unwrap_or("");
    let merging = strategy.split(',').any(|s| s == "merge");
    if patch.iter().any(|v| v.get(PATCH).and_then(Value::as_str) == Some("replace")) {
        return Ok(patch.iter().filter(|v| v.get(PATCH).is_none()).map(strip_directives).collect());
    }
    if !merging {
        return Ok(patch.iter().map(strip_directives).collect());
    }
    let key = prop.and_then(|p| p.patch_merge_key.clone());
    let all_primitive = patch.iter().all(|v| !v.is_object());
    if all_primitive && key.is_none() || patch.iter().all(|v| !v.is_object() && !v.is_array()) && orig.iter().all(|v| !v.is_object()) {
        let mut out = orig.to_vec();
        let mut seen: BTreeSet<String> = out.iter().map(Value::to_string).collect();
        for v in patch {
            if seen.insert(v.to_string()) {
                out.push(v.clone());
            }
        }
        return Ok(out);
    }
    let key = key.ok_or_else(|| bad(format!("merging an object in a list but no merge key for field {field}")))?;
    let elem = element_definition(prop);
    // Items by merge key (indexes of those still there, in order); a removed item leaves a
    // hole, so a list of any length merges in O(n log n).
    let mut out: Vec<Option<Value>> = orig.iter().cloned().map(Some).collect();
    let mut index: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, o) in orig.iter().enumerate() {
        if let Some(k) = o.get(&key) {
            index.entry(k.to_string()).or_default().push(i);
        }
    }
    for item in patch {
        let Value::Object(pm) = item else {
            return Err(bad(format!("the list {field} merges objects, found {item}")));
        };
        let kv = pm.get(&key).ok_or_else(|| bad(format!("map: {item} does not contain declared merge key: {key}")))?;
        let at = index.entry(kv.to_string()).or_default();
        match (pm.get(PATCH).and_then(Value::as_str), at.first().copied()) {
            (Some("delete"), _) => {
                for i in at.drain(..) {
                    out[i] = None;
                }
            }
            (_, Some(i)) => {
                if let Some(Value::Object(om)) = &mut out[i]
                    && merge_map(om, pm, elem.as_deref())?
                {
                    out[i] = None;
                    at.remove(0);
                }
            }
            (_, None) => {
                at.push(out.len());
                out.push(Some(strip_directives(item)));
            }
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// The first index of each item of `list`, by its merge key (items without one are left out)
/// or, without a key, by the whole item.
fn positions(list: &[Value], key: Option<&str>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (i, x) in list.iter().enumerate() {
        if let Some(id) = identity(x, key) {
            out.entry(id).or_insert(i);
        }
    }
    out
}

fn identity(item: &Value, key: Option<&str>) -> Option<String> {
    match key {
        Some(k) => item.get(k).map(Value::to_string),
        None => Some(item.to_string()),
    }
}

/// `normalizeElementOrder`: the items named by the patch in its order, the others (present only
/// on the server) interleaved where they were.
fn set_element_order(merged: &[Value], order: &[Value], server: &[Value], key: Option<&str>) -> Vec<Value> {
    let (order_at, server_at) = (positions(order, key), positions(server, key));
    let position_in = |at: &BTreeMap<String, usize>, v: &Value| identity(v, key).and_then(|id| at.get(&id).copied());
    let (mut in_patch, server_only): (Vec<Value>, Vec<Value>) = merged.iter().cloned().partition(|v| position_in(&order_at, v).is_some());
    in_patch.sort_by_cached_key(|v| position_in(&order_at, v).unwrap_or(usize::MAX));
    let less = |l: &Value, r: &Value| match (position_in(&server_at, l), position_in(&server_at, r)) {
        (Some(a), Some(b)) => a < b,
        _ => false,
    };
    let mut out = Vec::with_capacity(merged.len());
    let (mut i, mut j) = (0, 0);
    while i < server_only.len() || j < in_patch.len() {
        if j >= in_patch.len() || (i < server_only.len() && less(&server_only[i], &in_patch[j])) {
            out.push(server_only[i].clone());
            i += 1;
        } else {
            out.push(in_patch[j].clone());
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod_def() -> &'static Definition {
        schema().get("io.k8s.api.core.v1.Pod").unwrap()
    }

    #[test]
    fn merges_containers_by_name() {
        let cur = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}});
        let p = json!({"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}]}});
        let out = strategic_merge_patch(&cur, &p, pod_def()).unwrap();
        assert_eq!(out["spec"]["containers"], json!([{"name": "a", "image": "x"}, {"name": "b", "image": "z"}, {"name": "c", "image": "w"}]));
        let del = json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}});
        let out = strategic_merge_patch(&cur, &del, pod_def()).unwrap();
        assert_eq!(out["spec"]["containers"], json!([{"name": "b", "image": "y"}]));
    }

    #[test]
    fn replaces_lists_without_strategy_and_unions_primitive_sets() {
        let cur = json!({"metadata": {"finalizers": ["a"]}, "spec": {"containers": [{"name": "a", "args": ["1", "2"]}]}});
        let p = json!({"metadata": {"finalizers": ["b"]}, "spec": {"containers": [{"name": "a", "args": ["3"]}]}});
        let out = strategic_merge_patch(&cur, &p, pod_def()).unwrap();
        assert_eq!(out["spec"]["containers"][0]["args"], json!(["3"]));
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
    }

    #[test]
    fn set_element_order_and_retain_keys() {
        let d = schema().get("io.k8s.api.apps.v1.Deployment").unwrap();
        let cur = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
            "template": {"spec": {"containers": [{"name": "a"}, {"name": "s"}, {"name": "b"}]}}}});
        let p = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": null},
            "template": {"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}}}});
        let out = strategic_merge_patch(&cur, &p, d).unwrap();
        assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
        let names: Vec<&str> = out["spec"]["template"]["spec"]["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, vec!["s", "b", "a"]);
    }
}

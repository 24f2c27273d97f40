//! Fuzzed writes: patches of every type and server-side apply, on a fresh configmap or
//! deployment per input, through the whole request pipeline.
//!
//! The encodings let a few bytes describe what an attacker may send within kube's 3 MiB body
//! limit. A JSON patch operation is one byte, so a run of one byte (which libFuzzer inserts in
//! one mutation) is one operation many times: byte 5, or any byte that is 5 modulo 32, copies
//! `/metadata` to the end of its own finalizers and doubles the object. A document follows the
//! kind's schema, mostly, and its lists and maps may have up to 65,535 distinct members (the
//! 40,000 finalizers and 100,000 configmap keys that once took quadratic time). Run under
//! libFuzzer with a memory and a time limit per input (`scripts/fuzz`), amplification and
//! gross slowness are findings.

use std::cell::RefCell;

use arbitrary::Unstructured;
use bytes::Bytes;
use kapi_core::pipeline::Request;
use kapi_core::schema::{DefName, ListType, Type, schema};
use serde_json::{Map, Value, json};

use super::{KeptWorld, serve_and_check, with_world_in};
use crate::{ADMIN_TOKEN, World, default_server, epoch};

/// The most a generated document may weigh, serialized: kube's `--max-request-body-bytes`.
const BODY_LIMIT: usize = 3 * 1024 * 1024;
/// Inputs one world serves (each makes its own objects) before a fresh world replaces it.
const INPUTS_PER_WORLD: u32 = 256;

thread_local! {
    static WORLD: KeptWorld = const { RefCell::new(None) };
    static SERIAL: RefCell<u64> = const { RefCell::new(0) };
}

/// JSON patch operations; an operation byte picks one (its low 5 bits). Mostly operations that
/// succeed on the fresh objects, so that a patch goes on past its first few.
const OPERATIONS: [&str; 32] = [
    r#"{"op":"add","path":"/metadata/labels/k","value":"x"}"#,
    r#"{"op":"add","path":"/metadata/annotations","value":{"k":"v"}}"#,
    r#"{"op":"add","path":"/metadata/finalizers/-","value":"example.com/g"}"#,
    r#"{"op":"add","path":"/metadata/labels","value":{}}"#,
    r#"{"op":"copy","from":"/metadata/labels","path":"/metadata/annotations"}"#,
    r#"{"op":"copy","from":"/metadata","path":"/metadata/finalizers/-"}"#,
    r#"{"op":"copy","from":"/metadata/finalizers","path":"/metadata/finalizers/-"}"#,
    r#"{"op":"copy","from":"/metadata","path":"/metadata/a"}"#,
    r#"{"op":"copy","from":"/metadata/labels","path":"/metadata/labels/b"}"#,
    r#"{"op":"move","from":"/metadata/labels","path":"/metadata/annotations"}"#,
    r#"{"op":"move","from":"/metadata/finalizers/0","path":"/metadata/finalizers/-"}"#,
    r#"{"op":"replace","path":"/metadata/finalizers","value":[]}"#,
    r#"{"op":"replace","path":"/metadata/labels","value":{"k":"v"}}"#,
    r#"{"op":"remove","path":"/metadata/labels"}"#,
    r#"{"op":"remove","path":"/metadata/finalizers/0"}"#,
    r#"{"op":"test","path":"/metadata/finalizers/0","value":"example.com/f"}"#,
    r#"{"op":"test","path":"/metadata/name","value":"x"}"#,
    r#"{"op":"add","path":"/data","value":{"k":"v"}}"#,
    r#"{"op":"add","path":"/data/k","value":"x"}"#,
    r#"{"op":"copy","from":"/metadata/labels","path":"/data"}"#,
    r#"{"op":"add","path":"/spec/replicas","value":3}"#,
    r#"{"op":"add","path":"/spec/template/spec/containers/-","value":{"name":"d","image":"x"}}"#,
    r#"{"op":"copy","from":"/spec/template/spec/containers/0","path":"/spec/template/spec/containers/-"}"#,
    r#"{"op":"copy","from":"/spec/template/spec","path":"/spec/template/spec/containers/0/env"}"#,
    r#"{"op":"remove","path":"/spec/template/spec/containers/0"}"#,
    r#"{"op":"replace","path":"/spec/selector","value":{"matchLabels":{"app":"b"}}}"#,
    r#"{"op":"add","path":"/status","value":{"replicas":1}}"#,
    r#"{"op":"add","path":"/metadata/ownerReferences","value":[]}"#,
    r#"{"op":"add","path":"/metadata/name","value":"other"}"#,
    r#"{"op":"add","path":"","value":{}}"#,
    r#"{"op":"move","from":"/metadata","path":"/metadata/a"}"#,
    r#"{"op":"copy","from":"","path":"/metadata/a"}"#,
];
/// Keys a document is made of, mostly: the fields and patch directives the server reads.
const WORDS: &[&str] = &[
    "metadata",
    "name",
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
    "data",
    "binaryData",
    "spec",
    "replicas",
    "selector",
    "matchLabels",
    "template",
    "containers",
    "initContainers",
    "image",
    "ports",
    "containerPort",
    "protocol",
    "env",
    "value",
    "volumes",
    "strategy",
    "type",
    "status",
    "managedFields",
    "manager",
    "operation",
    "fieldsV1",
    "f:data",
    "$patch",
    "replace",
    "delete",
    "merge",
    "$retainKeys",
    "$setElementOrder/containers",
    "$setElementOrder/finalizers",
    "$deleteFromPrimitiveList/finalizers",
    "k",
    "a",
];

/// The object an input writes to.
#[derive(Clone, Copy)]
enum Target {
    ConfigMap,
    Deployment,
}

impl Target {
    fn definition(self) -> &'static str {
        match self {
            Target::ConfigMap => "io.k8s.api.core.v1.ConfigMap",
            Target::Deployment => "io.k8s.api.apps.v1.Deployment",
        }
    }

    fn path(self) -> &'static str {
        match self {
            Target::ConfigMap => "/api/v1/namespaces/default/configmaps",
            Target::Deployment => "/apis/apps/v1/namespaces/default/deployments",
        }
    }

    fn object(self, name: &str) -> Value {
        match self {
            Target::ConfigMap => {
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"k": "v"}, "finalizers": ["example.com/f"]}, "data": {"k": "v"}})
            }
            Target::Deployment => json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "finalizers": ["example.com/f"]},
                "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": {"metadata": {"labels": {"app": "a"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}]}}}}),
        }
    }
}

pub(super) fn request(method: &str, path: String, query: &str, content_type: &str, body: Vec<u8>) -> Request {
    Request {
        method: method.into(),
        path,
        query: query.into(),
        headers: vec![("Authorization".into(), format!("Bearer {ADMIN_TOKEN}")), ("Content-Type".into(), content_type.into())],
        body: Bytes::from(body),
        ..Default::default()
    }
}

fn world() -> World {
    World::new(default_server(), epoch(), 1)
}

/// A name no earlier input on this thread used.
fn fresh_name() -> String {
    SERIAL.with(|s| {
        *s.borrow_mut() += 1;
        format!("f{}", s.borrow())
    })
}

/// One or two patches of a fresh object, then a small one (so that what they made is updated:
/// an update of a big object compares its big managed fields), each a JSON patch (one byte per operation, the input's rest), a merge or a
/// strategic merge patch (a generated document), with any `fieldValidation`.
pub fn patch(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok((target, validation)) = (|| Ok::<_, arbitrary::Error>((u.int_in_range(0..=1)?, u.int_in_range(0..=2)?)))() else { return };
    let target = if target == 0 { Target::ConfigMap } else { Target::Deployment };
    let mut patches = Vec::new();
    while patches.len() < 2 {
        let Ok(kind) = u.int_in_range(0..=2) else { break };
        patches.push(match kind {
            0 => ("application/json-patch+json", json_patch(u.bytes(u.len()).unwrap_or_default())),
            1 => ("application/merge-patch+json", document(&mut u, target)),
            _ => ("application/strategic-merge-patch+json", document(&mut u, target)),
        });
    }
    let query = ["fieldValidation=Strict", "fieldValidation=Warn", "fieldValidation=Ignore"][validation];
    with_world_in(&WORLD, INPUTS_PER_WORLD, world, |w| {
        let name = fresh_name();
        let created = w.request(request("POST", target.path().into(), "", "application/json", serde_json::to_vec(&target.object(&name)).expect("JSON")));
        assert_eq!(created.head.status, 201, "{}", String::from_utf8_lossy(&created.body));
        for (content_type, body) in patches {
            serve_and_check(w, request("PATCH", format!("{}/{name}", target.path()), query, content_type, body));
        }
        // An update of whatever the object has become (managed fields compared, old and new).
        let touch = br#"{"metadata":{"labels":{"touched":"yes"}}}"#.to_vec();
        serve_and_check(w, request("PATCH", format!("{}/{name}", target.path()), "", "application/merge-patch+json", touch));
    });
}

/// Server-side apply of up to three generated configurations to a fresh object, by two
/// managers, forced or not.
pub fn apply(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(target) = u.int_in_range(0..=1) else { return };
    let target = if target == 0 { Target::ConfigMap } else { Target::Deployment };
    let mut applies = Vec::new();
    for _ in 0..3 {
        let (Ok(manager), Ok(force)) = (u.choose(&["a", "b"]), u.arbitrary::<bool>()) else { break };
        applies.push((manager, force, document(&mut u, target)));
    }
    with_world_in(&WORLD, INPUTS_PER_WORLD, world, |w| {
        let name = fresh_name();
        for (manager, force, doc) in applies {
            let mut config: Value = serde_json::from_slice(&doc).unwrap_or(Value::Null);
            if !config.is_object() {
                config = json!({});
            }
            let base = target.object(&name);
            config["apiVersion"] = base["apiVersion"].clone();
            config["kind"] = base["kind"].clone();
            if !config["metadata"].is_object() {
                config["metadata"] = json!({});
            }
            config["metadata"]["name"] = json!(name);
            let query = format!("fieldManager={manager}{}", if force { "&force=true" } else { "" });
            let body = serde_json::to_vec(&config).expect("JSON");
            serve_and_check(w, request("PATCH", format!("{}/{name}", target.path()), &query, "application/apply-patch+yaml", body));
        }
    });
}

/// A JSON patch of one operation per byte.
fn json_patch(ops: &[u8]) -> Vec<u8> {
    let mut out = Vec::from(&b"["[..]);
    for (i, &b) in ops.iter().take(kapi_core::patch::MAX_JSON_PATCH_OPERATIONS + 1).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(OPERATIONS[usize::from(b) % OPERATIONS.len()].as_bytes());
    }
    out.push(b']');
    out
}

/// A generated JSON document for `target`, serialized; under [`BODY_LIMIT`].
fn document(u: &mut Unstructured, target: Target) -> Vec<u8> {
    let mut budget = BODY_LIMIT;
    let ty = Type::Object(DefName::new(target.definition()));
    let doc = shaped(u, &ty, 0, &mut budget).unwrap_or(Value::Null);
    serde_json::to_vec(&doc).expect("JSON trees serialize")
}

/// A node in the shape of `ty`, mostly: one in 32 is any node, so that shapes the schema
/// does not allow are tried too. Lists and maps are small or have up to 65,536 distinct members.
fn shaped(u: &mut Unstructured, ty: &Type, depth: u32, budget: &mut usize) -> arbitrary::Result<Value> {
    if depth >= 8 || *budget < 1024 || u.ratio(1, 32)? {
        return node(u, depth, budget);
    }
    let value = match ty {
        Type::Boolean => json!(u.arbitrary::<bool>()?),
        Type::Int32 | Type::Int64 | Type::Number => json!(u.int_in_range(-3i64..=100_000)?),
        Type::Quantity | Type::IntOrString => json!(u.choose(&["1", "100m", "1Gi", "25%", "-1", "1e3"])?),
        Type::Object(name) => {
            let Some(def) = schema().get(name) else { return node(u, depth, budget) };
            let fields: Vec<(&String, &Type)> = def.properties.iter().map(|(k, p)| (k, &p.ty)).collect();
            let mut map = Map::new();
            for _ in 0..if fields.is_empty() { 0 } else { u.int_in_range(0..=4)? } {
                let (key, field_ty) = u.choose(&fields)?;
                map.insert(key.to_string(), shaped(u, field_ty, depth + 1, budget)?);
            }
            Value::Object(map)
        }
        Type::Array { items, list_type, map_keys } => {
            let item = shaped(u, items, depth + 1, budget)?;
            if u.arbitrary()? {
                let n = u.int_in_range(0..=3)?;
                Value::Array(vec![item; n])
            } else {
                let n = many(u, serialized_len(&item) + 16, budget)?;
                Value::Array((0..n).map(|i| distinct(&item, i, *list_type, map_keys)).collect())
            }
        }
        Type::Map { values, .. } => {
            let item = shaped(u, values, depth + 1, budget)?;
            let n = if u.arbitrary()? { u.int_in_range(0..=3)? } else { many(u, serialized_len(&item) + 12, budget)? };
            Value::Object((0..n).map(|i| (format!("example.com/k{i}"), item.clone())).collect())
        }
        _ => json!(if u.arbitrary()? { u.choose(WORDS)?.to_string() } else { u.arbitrary::<String>()? }),
    };
    *budget = budget.saturating_sub(serialized_len(&value).min(64));
    Ok(value)
}

/// The `i`th of many list members made from `item`: distinct where the list's kind needs its
/// members distinct (a set's values, a map list's keys).
fn distinct(item: &Value, i: usize, list_type: ListType, map_keys: &[String]) -> Value {
    match (list_type, item) {
        (ListType::Map, Value::Object(fields)) => {
            let mut fields = fields.clone();
            for key in map_keys {
                let unique = if fields.get(key).is_some_and(Value::is_number) { json!(i % 65_535 + 1) } else { json!(format!("k{i}")) };
                fields.insert(key.clone(), unique);
            }
            Value::Object(fields)
        }
        (ListType::Set, _) | (_, Value::String(_)) => json!(format!("example.com/f{i}")),
        _ => item.clone(),
    }
}

/// One node of a document, costing `budget` about its serialized size.
fn node(u: &mut Unstructured, depth: u32, budget: &mut usize) -> arbitrary::Result<Value> {
    let leaves_only = depth >= 6 || *budget < 64;
    let value = match u.int_in_range(0..=if leaves_only { 4 } else { 9 })? {
        0 => Value::Null,
        1 => json!(u.arbitrary::<bool>()?),
        2 => json!(u.int_in_range(-3i64..=100_000)?),
        3 => json!(u.choose(WORDS)?),
        4 => json!(u.arbitrary::<String>()?),
        5 => {
            let mut map = Map::new();
            for _ in 0..u.int_in_range(0..=4)? {
                let key = if u.ratio(3, 4)? { u.choose(WORDS)?.to_string() } else { u.arbitrary()? };
                map.insert(key, node(u, depth + 1, budget)?);
            }
            Value::Object(map)
        }
        6 => Value::Array((0..u.int_in_range(0..=4)?).map(|_| node(u, depth + 1, budget)).collect::<arbitrary::Result<_>>()?),
        // Many distinct strings (finalizers, a primitive list).
        7 => {
            let n = many(u, 24, budget)?;
            Value::Array((0..n).map(|i| json!(format!("example.com/f{i}"))).collect())
        }
        // Many distinct keyed objects (containers, ports: lists merged by key).
        8 => {
            let item = node(u, depth + 1, budget)?;
            let n = many(u, serialized_len(&item) + 40, budget)?;
            Value::Array((0..n).map(|i| json!({"name": format!("n{i}"), "containerPort": i % 65535 + 1, "value": item})).collect())
        }
        // A map of many distinct keys (a configmap's data, labels).
        _ => {
            let item = node(u, depth + 1, budget)?;
            let n = many(u, serialized_len(&item) + 12, budget)?;
            Value::Object((0..n).map(|i| (format!("k{i}"), item.clone())).collect())
        }
    };
    *budget = budget.saturating_sub(if value.is_array() || value.is_object() { 2 } else { serialized_len(&value) });
    Ok(value)
}

/// A count below 65,536 of members costing `each`, within the budget (which it takes): a power
/// of two and up to as much again, so that every size is reached.
fn many(u: &mut Unstructured, each: usize, budget: &mut usize) -> arbitrary::Result<usize> {
    let power = 1usize << u.int_in_range(0..=15)?;
    let n = (power + u.int_in_range(0..=power - 1)?).min(*budget / each.max(1));
    *budget -= n * each;
    Ok(n)
}

fn serialized_len(v: &Value) -> usize {
    serde_json::to_vec(v).map_or(0, |b| b.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_byte_is_one_operation_and_every_byte_is_one() {
        let ops: Value = serde_json::from_slice(&json_patch(&(0..=255).collect::<Vec<u8>>())).unwrap();
        assert_eq!(ops.as_array().unwrap().len(), 256);
        assert_eq!(ops[5 + 32], json!({"op": "copy", "from": "/metadata", "path": "/metadata/finalizers/-"}));
    }

    #[test]
    fn documents_stay_under_the_body_limit() {
        let data: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8 | 0xf0).collect();
        for target in [Target::ConfigMap, Target::Deployment] {
            assert!(document(&mut Unstructured::new(&data), target).len() <= BODY_LIMIT + 1024);
        }
    }
}

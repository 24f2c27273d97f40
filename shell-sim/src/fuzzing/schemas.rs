//! Fuzzed CRD schemas: a generated schema (structural or not, with list and map types, bounds,
//! patterns, formats, junctors, defaults and selectable fields) and objects mostly of it. Every
//! input goes through the core's checks of the CRD, pruning, defaulting and validation by the
//! schema, and server-side apply typed by it; an input that starts with [`THROUGH_THE_PIPELINE`] also goes
//! through the whole request pipeline (the CRD created, the catalog it changes, custom resources
//! created, applied and patched, and the OpenAPI document of their version), which takes a
//! thousand times longer.

use std::cell::RefCell;

use arbitrary::Unstructured;
use kapi_core::apiextensions::{CHECKED_FORMATS, Structural, validate_version_parts};
use kapi_core::controllers::Enabled;
use kapi_core::ssa::{self, Applier, Typing};
use serde_json::{Map, Value, json};

use super::writes::request;
use super::{KeptWorld, serve_and_check, with_world_in};
use crate::{World, default_server, epoch};

/// CRDs one world serves before a fresh world replaces it (each input adds one).
const INPUTS_PER_WORLD: u32 = 32;
/// The first byte of an input that is also served through a world.
pub const THROUGH_THE_PIPELINE: u8 = b'P';
/// How deep a generated schema nests.
const MAX_DEPTH: u32 = 4;

thread_local! {
    static WORLD: KeptWorld = const { RefCell::new(None) };
    static SERIAL: RefCell<u64> = const { RefCell::new(0) };
}

const NAMES: [&str; 6] = ["a", "b", "name", "spec", "status", "metadata"];
const TYPES: [&str; 8] = ["object", "array", "string", "integer", "number", "boolean", "", "null"];
const PATTERNS: [&str; 4] = ["^a", "[", "(a+)+$", "^[a-z]{2,3}$"];
/// Formats kube does not check, or spells with a dash, beside the ones it checks.
const OTHER_FORMATS: [&str; 3] = ["date-time", "int32", "bogus"];
const JUNCTORS: [&str; 4] = ["allOf", "anyOf", "oneOf", "not"];
const LIST_TYPES: [&str; 4] = ["atomic", "set", "map", "bogus"];
const PATHS: [&str; 7] = [".spec.a", ".a", ".spec", "a", ".metadata.name", ".a[0]", ".spec.name"];

fn world() -> World {
    let mut w = World::new(default_server(), epoch(), 1);
    w.start_controllers(Enabled::NONE);
    w
}

pub(super) type Result<T> = arbitrary::Result<T>;

/// A schema of (at `depth`) any type, with some of the keywords of that type.
pub(super) fn schema(u: &mut Unstructured, depth: u32) -> Result<Value> {
    let ty = if depth == 0 { "object" } else { *u.choose(&TYPES)? };
    let mut s = Map::new();
    if !ty.is_empty() {
        s.insert("type".into(), json!(ty));
    }
    match ty {
        "object" if depth < MAX_DEPTH => {
            if u.arbitrary()? {
                let mut props = Map::new();
                for _ in 0..u.int_in_range(0..=3)? {
                    props.insert(u.choose(&NAMES)?.to_string(), schema(u, depth + 1)?);
                }
                s.insert("properties".into(), Value::Object(props));
            } else if u.arbitrary()? {
                s.insert("additionalProperties".into(), schema(u, depth + 1)?);
            }
            for flag in ["x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource"] {
                if u.ratio(1, 6)? {
                    s.insert(flag.into(), json!(true));
                }
            }
            if u.ratio(1, 6)? {
                s.insert("x-kubernetes-map-type".into(), json!(*u.choose(&["atomic", "granular"])?));
            }
            if u.ratio(1, 4)? {
                s.insert("required".into(), json!([*u.choose(&NAMES)?]));
            }
            if u.ratio(1, 6)? {
                s.insert("maxProperties".into(), json!(u.int_in_range(0..=3)?));
            }
        }
        "array" if depth < MAX_DEPTH => {
            s.insert("items".into(), schema(u, depth + 1)?);
            if u.arbitrary()? {
                s.insert("x-kubernetes-list-type".into(), json!(*u.choose(&LIST_TYPES)?));
                s.insert("x-kubernetes-list-map-keys".into(), json!([*u.choose(&NAMES)?]));
            }
            if u.ratio(1, 4)? {
                s.insert("maxItems".into(), json!(u.int_in_range(0..=3)?));
            }
        }
        "string" => {
            if u.ratio(1, 3)? {
                s.insert("pattern".into(), json!(*u.choose(&PATTERNS)?));
            }
            if u.ratio(1, 3)? {
                s.insert("format".into(), json!(format(u)?));
            }
            if u.ratio(1, 4)? {
                s.insert("maxLength".into(), json!(u.int_in_range(0..=4)?));
            }
            if u.ratio(1, 4)? {
                s.insert("enum".into(), json!(["a", "bb"]));
            }
        }
        "integer" | "number" => {
            for bound in ["minimum", "maximum", "multipleOf"] {
                if u.ratio(1, 4)? {
                    s.insert(bound.into(), json!(u.int_in_range(-3..=3)?));
                }
            }
        }
        _ => {}
    }
    if u.ratio(1, 8)? {
        let junctor = *u.choose(&JUNCTORS)?;
        let mut branches = Vec::new();
        for _ in 0..u.int_in_range(1..=2)? {
            branches.push(value_validation(u)?);
        }
        let branches = if junctor == "not" { branches.swap_remove(0) } else { Value::Array(branches) };
        s.insert(junctor.into(), branches);
    }
    if u.ratio(1, 6)? {
        s.insert("nullable".into(), json!(true));
    }
    if u.ratio(1, 8)? {
        s.insert("x-kubernetes-int-or-string".into(), json!(true));
    }
    if depth > 0 && u.ratio(1, 6)? {
        let default = value(u, &Value::Object(s.clone()), depth)?;
        s.insert("default".into(), default);
    }
    Ok(Value::Object(s))
}

/// A format name: mostly one kube checks.
fn format(u: &mut Unstructured) -> Result<&'static str> {
    Ok(if u.ratio(1, 4)? { *u.choose(&OTHER_FORMATS)? } else { *u.choose(&CHECKED_FORMATS)? })
}

/// A branch of a junctor: a check of a value, without structure of its own.
fn value_validation(u: &mut Unstructured) -> Result<Value> {
    Ok(match u.int_in_range(0..=4)? {
        0 => json!({"required": [*u.choose(&NAMES)?]}),
        1 => json!({"maxLength": u.int_in_range(0..=3)?}),
        2 => json!({"minimum": u.int_in_range(-2..=2)?}),
        3 => json!({"format": format(u)?}),
        _ => json!({"properties": {*u.choose(&NAMES)?: {"pattern": *u.choose(&PATTERNS)?}}}),
    })
}

/// A value of `schema`, mostly: now and then one of another type, or null.
pub(super) fn value(u: &mut Unstructured, schema: &Value, depth: u32) -> Result<Value> {
    if u.ratio(1, 10)? {
        return Ok(u.choose(&[Value::Null, json!("x"), json!(7), json!([1]), json!({"a": 1})])?.clone());
    }
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or_default();
    Ok(match ty {
        "object" if depth <= MAX_DEPTH => {
            let mut m = Map::new();
            for (k, s) in schema.get("properties").and_then(Value::as_object).into_iter().flatten() {
                if u.ratio(3, 4)? {
                    m.insert(k.clone(), value(u, s, depth + 1)?);
                }
            }
            if let Some(extra) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                for _ in 0..u.int_in_range(0..=2)? {
                    m.insert(u.choose(&NAMES)?.to_string(), value(u, extra, depth + 1)?);
                }
            }
            if u.ratio(1, 5)? {
                m.insert("unknown".into(), json!(1));
            }
            Value::Object(m)
        }
        "array" if depth <= MAX_DEPTH => {
            let items = schema.get("items").cloned().unwrap_or_default();
            let mut out = Vec::new();
            for _ in 0..u.int_in_range(0..=3)? {
                out.push(value(u, &items, depth + 1)?);
            }
            Value::Array(out)
        }
        "string" if u.ratio(1, 3)? => json!(u.arbitrary::<&str>()?),
        "string" => json!(*u.choose(&["a", "bb", "", "2024-01-01T00:00:00Z", "10.0.0.1", "a@b.c", "http://a/b", "1h30m", "not a date"])?),
        "integer" => json!(u.int_in_range(-4..=4)?),
        "number" => json!(f64::from(u.int_in_range(-8..=8)?) / 2.0),
        "boolean" => json!(u.arbitrary::<bool>()?),
        _ => json!(*u.choose(&["x", "1"])?),
    })
}

/// A CRD of a generated schema, then up to three custom resources of it, each created, applied
/// by one of two managers and merge-patched.
pub fn custom_resources(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(schema) = schema(&mut u, 0) else { return };
    let mut selectable = Vec::new();
    for _ in 0..u.int_in_range(0..=2).unwrap_or(0) {
        let Ok(path) = u.choose(&PATHS) else { break };
        selectable.push(json!({"jsonPath": path}));
    }
    let mut objects = Vec::new();
    for _ in 0..3 {
        let (Ok(manager), Ok(force), Ok(obj)) = (u.choose(&["a", "b"]), u.arbitrary::<bool>(), value(&mut u, &schema, 0)) else { break };
        objects.push((*manager, force, obj));
    }
    let spec = json!({"versions": [{"name": "v1", "schema": {"openAPIV3Schema": schema}, "selectableFields": selectable,
        "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.a", "statusReplicasPath": ".status.a"}},
        "additionalPrinterColumns": [{"name": "A", "type": "integer", "jsonPath": ".spec.a"}]}]});
    validate_version_parts(&spec);
    let structural = Structural::read(&schema);
    let typing = Typing::Custom { schema: Some(&structural), status: true };
    let mut live: Option<Value> = None;
    for (i, (manager, force, obj)) in objects.iter().enumerate() {
        let mut obj = if obj.is_object() { obj.clone() } else { json!({}) };
        obj["apiVersion"] = json!("fuzz.kapi.dev/v1");
        obj["kind"] = json!("Thing");
        obj["metadata"] = json!({"name": "t"});
        structural.prune_object(&mut obj);
        structural.default_object(&mut obj);
        structural.validate(&obj);
        let now = epoch() + jiff::SignedDuration::from_secs(i as i64);
        let by = Applier { typing, group_version: "fuzz.kapi.dev/v1", subresource: "", manager, force: *force, now };
        if let Ok(applied) = ssa::apply(live.as_ref(), &obj, &by) {
            let mut updated = applied.clone();
            updated["metadata"]["labels"] = json!({"touched": "yes"});
            ssa::record_update(Some(&applied), &mut updated, typing, "editor", None, now);
            live = Some(updated);
        }
    }
    if data.first() != Some(&THROUGH_THE_PIPELINE) {
        return;
    }
    with_world_in(&WORLD, INPUTS_PER_WORLD, world, |w| {
        let serial = SERIAL.with(|s| {
            *s.borrow_mut() += 1;
            *s.borrow()
        });
        let group = format!("f{serial}.fuzz.kapi.dev");
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": format!("things.{group}")},
            "spec": {"group": group, "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema},
                    "selectableFields": selectable, "subresources": {"status": {}}}]}});
        let body = serde_json::to_vec(&crd).expect("JSON");
        let created = serve_and_check(w, request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions".into(), "", "application/json", body));
        if created.head.status != 201 {
            return;
        }
        let collection = format!("/apis/{group}/v1/namespaces/default/things");
        for (i, (manager, force, obj)) in objects.into_iter().enumerate() {
            let mut obj = if obj.is_object() { obj } else { json!({}) };
            obj["apiVersion"] = json!(format!("{group}/v1"));
            obj["kind"] = json!("Thing");
            obj["metadata"] = json!({"name": format!("t{i}")});
            let item = format!("{collection}/t{i}");
            let body = serde_json::to_vec(&obj).expect("JSON");
            serve_and_check(w, request("POST", collection.clone(), "fieldValidation=Warn", "application/json", body.clone()));
            let query = format!("fieldManager={manager}{}", if force { "&force=true" } else { "" });
            serve_and_check(w, request("PATCH", item.clone(), &query, "application/apply-patch+yaml", body));
            let touch = br#"{"metadata":{"labels":{"touched":"yes"}},"spec":{"a":1}}"#.to_vec();
            serve_and_check(w, request("PATCH", item, "fieldValidation=Strict", "application/merge-patch+json", touch));
        }
        serve_and_check(w, request("GET", collection, "fieldSelector=spec.a%3D1", "", Vec::new()));
        serve_and_check(w, request("GET", format!("/openapi/v3/apis/{group}/v1"), "", "", Vec::new()));
    });
}

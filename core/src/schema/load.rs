//! Parsing of the generated definitions file into [`Schema`].

use std::sync::Arc;

use serde_json::{Map, Value};

use super::*;

/// Definitions whose JSON form is not an object of their properties.
fn scalar_of(name: &str) -> Option<Type> {
    Some(match name {
        "io.k8s.apimachinery.pkg.apis.meta.v1.Time" => Type::Time,
        "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime" => Type::MicroTime,
        "io.k8s.apimachinery.pkg.api.resource.Quantity" => Type::Quantity,
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString" => Type::IntOrString,
        "io.k8s.apimachinery.pkg.runtime.RawExtension"
        | "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1"
        | "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON"
        | "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray"
        | "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool"
        | "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray" => Type::Any,
        _ => return None,
    })
}

fn ref_name(v: &Value) -> Option<&str> {
    v.get("$ref")?.as_str()?.strip_prefix("#/definitions/")
}

fn type_of(v: &Value) -> Type {
    if let Some(name) = ref_name(v) {
        return scalar_of(name).unwrap_or_else(|| Type::Object(DefName::new(name)));
    }
    let format = v.get("format").and_then(Value::as_str).unwrap_or("");
    match v.get("type").and_then(Value::as_str).unwrap_or("") {
        "string" => match format {
            "byte" => Type::Bytes,
            "date-time" => Type::Time,
            "int-or-string" => Type::IntOrString,
            _ => Type::String,
        },
        "integer" if format == "int32" => Type::Int32,
        "integer" => Type::Int64,
        "number" => Type::Number,
        "boolean" => Type::Boolean,
        "array" => {
            let items = v.get("items").map(type_of).unwrap_or(Type::Any);
            let list_type = match v.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("set") => ListType::Set,
                Some("map") => ListType::Map,
                _ => ListType::Atomic,
            };
            let map_keys = strings(v.get("x-kubernetes-list-map-keys"));
            Type::Array { items: Box::new(items), list_type, map_keys }
        }
        "object" => match v.get("additionalProperties") {
            Some(values) => Type::Map { values: Box::new(type_of(values)), atomic: v.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic") },
            None => Type::Any,
        },
        _ => Type::Any,
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default()
}

fn proto_kind(s: &str) -> ProtoKind {
    match s {
        "int32" => ProtoKind::Int32,
        "int64" => ProtoKind::Int64,
        "bool" => ProtoKind::Bool,
        "string" => ProtoKind::String,
        "bytes" => ProtoKind::Bytes,
        "double" => ProtoKind::Double,
        "message" => ProtoKind::Message,
        other => match other.strip_prefix("map:") {
            Some(values) => ProtoKind::Map(Box::new(proto_kind(values))),
            None => panic!("unknown protobuf kind {other} in the schema"),
        },
    }
}

fn proto_field(v: &Value) -> Option<ProtoField> {
    let p = v.get("x-kapi-proto")?.as_array()?;
    Some(ProtoField {
        tag: p.first()?.as_u64()? as u32,
        kind: proto_kind(p.get(1)?.as_str()?),
        message: p.get(2).and_then(Value::as_str).map(str::to_string),
        via: v.get("x-kapi-proto-via").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_u64).map(|t| t as u32).collect()).unwrap_or_default(),
    })
}

fn text(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn definition(name: &str, v: &Value) -> Definition {
    let order = strings(v.get("x-kapi-order"));
    let properties = v
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(pname, p)| {
                    let prop = Property {
                        name: pname.clone(),
                        ty: type_of(p),
                        description: text(p, "description"),
                        patch_strategy: p.get("x-kubernetes-patch-strategy").and_then(Value::as_str).map(str::to_string),
                        patch_merge_key: p.get("x-kubernetes-patch-merge-key").and_then(Value::as_str).map(str::to_string),
                        proto: proto_field(p),
                        position: order.iter().position(|k| k == pname).map(|i| i as u32),
                        json_key: crate::codec::json::member_key(pname),
                    };
                    (pname.clone(), prop)
                })
                .collect::<Lookup<_>>()
        })
        .unwrap_or_default();
    let gvks = v
        .get("x-kubernetes-group-version-kind")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|g| Gvk { group: text(g, "group"), version: text(g, "version"), kind: text(g, "kind") }).collect())
        .unwrap_or_default();
    Definition {
        layout: ProtoLayout::of(&properties),
        name: name.to_string(),
        description: text(v, "description"),
        scalar: scalar_of(name),
        properties,
        order,
        required: strings(v.get("required")),
        atomic: v.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic"),
        gvks,
        proto: v.get("x-kapi-proto-message").is_some(),
    }
}

pub(super) fn load(text: &str) -> Schema {
    let raw: Map<String, Value> = serde_json::from_str(text).expect("the bundled schema is valid JSON");
    let mut defs = Vec::with_capacity(raw.len());
    let mut positions = Lookup::with_capacity_and_hasher(raw.len(), Default::default());
    let mut by_kind: Lookup<Vec<(String, String, Arc<Definition>)>> = Lookup::default();
    for (name, v) in &raw {
        let def = Arc::new(definition(name, v));
        for g in &def.gvks {
            // A kind listed by several definitions (e.g. meta/v1 Status, DeleteOptions for
            // every group): the one in meta wins, it is the one the wire carries.
            let listed = by_kind.entry(g.kind.clone()).or_default();
            match listed.iter_mut().find(|(group, version, _)| *group == g.group && *version == g.version) {
                Some(entry) if name.starts_with("io.k8s.apimachinery.pkg.apis.meta.") => entry.2 = def.clone(),
                Some(_) => {}
                None => listed.push((g.group.clone(), g.version.clone(), def.clone())),
            }
        }
        positions.insert(name.clone(), defs.len() as u32);
        defs.push(def);
    }
    Schema { defs, positions, by_kind, raw }
}

//! The OpenAPI definitions of a custom resource's kind and list kind, as kube's apiextensions
//! server builds them for its documents (`pkg/controller/openapi/builder`): the version's schema
//! with kube's own `apiVersion`, `kind` and `metadata`, so that `kubectl explain` finds them.

use serde_json::{Map, Value, json};

use super::definition::Names;
use crate::schema::schema;

const OBJECT_META: &str = "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

/// A kind's definitions where the built-in schema has none, in swagger-2.0 form (references to
/// `#/definitions/`), as `/openapi/v2` serves them; `/openapi/v3` serves them converted.
#[derive(Debug, Clone, PartialEq)]
pub struct KindDefinitions {
    /// The kind's name (`com.example.v1.Widget`) and definition.
    pub object: (String, Value),
    /// What `/openapi/v2` serves for the kind: without properties where the schema keeps unknown
    /// fields at its root (kubectl would otherwise refuse every field it does not list).
    pub object_v2: Value,
    pub list: (String, Value),
}

/// kube's name of a kind's model: the group reversed, then the version and the kind.
pub fn model_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

/// A property of a built-in definition, for the descriptions kube's builder copies.
fn builtin_property(definition: &str, property: &str) -> Value {
    schema().raw_definitions().get(definition).and_then(|d| d.pointer(&format!("/properties/{property}"))).cloned().unwrap_or_else(|| json!({"type": "string"}))
}

fn group_version_kind(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "kind": kind, "version": version}])
}

/// The definitions of a version's kind (`schema`: its `openAPIV3Schema`, if it gives one;
/// `selectable`: its selectable fields, named without the leading dot) and list kind.
pub fn kind_definitions(group: &str, version: &str, names: &Names, schema: Option<&Value>, selectable: &[String]) -> KindDefinitions {
    let name = model_name(group, version, &names.kind);
    let list_name = model_name(group, version, &names.list_kind);
    let gvk = group_version_kind(group, version, &names.kind);
    // kube marks the kind with what field selectors may name, beside its group, version and kind.
    let extensions = |def: &mut Map<String, Value>| {
        def.insert("x-kubernetes-group-version-kind".into(), gvk.clone());
        if !selectable.is_empty() {
            let fields: Vec<Value> = selectable.iter().map(|f| json!({"fieldPath": f})).collect();
            def.insert("x-kubernetes-selectable-fields".into(), Value::Array(fields));
        }
    };
    let type_meta = |m: &mut Map<String, Value>| {
        m.insert("apiVersion".into(), builtin_property("io.k8s.api.core.v1.ConfigMap", "apiVersion"));
        m.insert("kind".into(), builtin_property("io.k8s.api.core.v1.ConfigMap", "kind"));
    };
    let metadata = |reference: &str, described_like: &str| {
        let description = builtin_property(described_like, "metadata").get("description").cloned().unwrap_or_default();
        json!({"$ref": reference, "description": description})
    };

    let mut bare = Map::new();
    bare.insert("type".into(), json!("object"));
    extensions(&mut bare);
    let bare = Value::Object(bare);
    let kind = |v2: bool| match schema {
        Some(Value::Object(s)) => {
            let mut def = s.clone();
            if v2 {
                for_swagger_2(&mut def);
            }
            let properties = def.entry("properties").or_insert_with(|| json!({}));
            if let Value::Object(p) = properties {
                for nested in p.values_mut() {
                    add_embedded_properties(nested, v2);
                }
                p.insert("metadata".into(), metadata(OBJECT_META, "io.k8s.api.core.v1.ConfigMap"));
                type_meta(p);
            }
            for key in ["items", "additionalProperties"] {
                if let Some(nested) = def.get_mut(key) {
                    add_embedded_properties(nested, v2);
                }
            }
            extensions(&mut def);
            Value::Object(def)
        }
        _ => bare.clone(),
    };
    let object = kind(false);
    let preserves_unknown = schema.and_then(|s| s.get("x-kubernetes-preserve-unknown-fields")) == Some(&Value::Bool(true));
    let object_v2 = if preserves_unknown { bare } else { kind(true) };

    let mut list_properties = Map::new();
    list_properties.insert(
        "items".into(),
        json!({"description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", names.plural),
            "items": {"$ref": format!("#/definitions/{name}")}, "type": "array"}),
    );
    list_properties.insert("metadata".into(), metadata(LIST_META, "io.k8s.api.core.v1.ConfigMapList"));
    type_meta(&mut list_properties);
    let list = json!({"description": format!("{} is a list of {}", names.list_kind, names.kind), "required": ["items"], "type": "object",
        "properties": list_properties, "x-kubernetes-group-version-kind": group_version_kind(group, version, &names.list_kind)});
    KindDefinitions { object: (name, object), object_v2, list: (list_name, list) }
}

/// kube's `ToStructuralOpenAPIV2`: what swagger 2.0 (and kubectl reading it) cannot take is
/// dropped, each node before what it nests: junctors; the type, items and properties of a
/// nullable node; the items and properties of one that keeps unknown fields; the type of an
/// array left without items; and from `required`, the properties that may be null.
fn for_swagger_2(m: &mut Map<String, Value>) {
    for junctor in ["allOf", "oneOf", "anyOf", "not"] {
        m.remove(junctor);
    }
    let flag = |m: &Map<String, Value>, k: &str| m.get(k) == Some(&Value::Bool(true));
    if flag(m, "nullable") {
        for key in ["type", "nullable", "items", "properties"] {
            m.remove(key);
        }
    }
    if flag(m, "x-kubernetes-preserve-unknown-fields") {
        m.remove("items");
        m.remove("properties");
    }
    if m.get("type").and_then(Value::as_str) == Some("array") && !m.contains_key("items") {
        m.remove("type");
    }
    let nullable = |s: &Value| s.get("nullable") == Some(&Value::Bool(true));
    let may_be_null: Vec<String> =
        m.get("properties").and_then(Value::as_object).into_iter().flatten().filter(|(_, p)| nullable(p)).map(|(k, _)| k.clone()).collect();
    let any_may_be_null = m.get("additionalProperties").is_some_and(nullable);
    if let Some(Value::Array(required)) = m.get_mut("required") {
        required.retain(|r| !any_may_be_null && !r.as_str().is_some_and(|r| may_be_null.iter().any(|n| n == r)));
        if required.is_empty() {
            m.remove("required");
        }
    }
    for (key, nested) in m.iter_mut() {
        match (key.as_str(), nested) {
            ("items" | "additionalProperties", Value::Object(n)) => for_swagger_2(n),
            ("properties", Value::Object(properties)) => properties.values_mut().filter_map(Value::as_object_mut).for_each(for_swagger_2),
            _ => {}
        }
    }
}

/// kube's `addEmbeddedProperties`: an embedded resource's schema gets kube's `apiVersion`, `kind`
/// and `metadata` (the two first required), wherever it nests; not for `/openapi/v2` where it
/// keeps unknown fields (kubectl would refuse those fields).
fn add_embedded_properties(s: &mut Value, v2: bool) {
    let Value::Object(m) = s else { return };
    for key in ["items", "additionalProperties"] {
        if let Some(nested) = m.get_mut(key) {
            add_embedded_properties(nested, v2);
        }
    }
    if let Some(Value::Object(properties)) = m.get_mut("properties") {
        for nested in properties.values_mut() {
            add_embedded_properties(nested, v2);
        }
    }
    let flag = |k: &str| m.get(k) == Some(&Value::Bool(true));
    if !flag("x-kubernetes-embedded-resource") || (v2 && flag("x-kubernetes-preserve-unknown-fields")) {
        return;
    }
    let description = builtin_property("io.k8s.api.core.v1.ConfigMap", "metadata").get("description").cloned().unwrap_or_default();
    let properties = m.entry("properties").or_insert_with(|| json!({}));
    if let Value::Object(p) = properties {
        p.insert("apiVersion".into(), builtin_property("io.k8s.api.core.v1.ConfigMap", "apiVersion"));
        p.insert("kind".into(), builtin_property("io.k8s.api.core.v1.ConfigMap", "kind"));
        p.insert("metadata".into(), json!({"$ref": OBJECT_META, "description": description}));
    }
    let required = m.entry("required").or_insert_with(|| json!([]));
    if let Value::Array(r) = required {
        for name in ["kind", "apiVersion"] {
            if !r.iter().any(|x| x == name) {
                r.push(json!(name));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_is_its_schema_with_kubes_type_and_object_meta() {
        let names = Names { plural: "widgets".into(), singular: "widget".into(), kind: "Widget".into(), list_kind: "WidgetList".into(), ..Default::default() };
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}});
        let defs = kind_definitions("example.com", "v1", &names, Some(&schema), &[]);
        assert_eq!(defs.object.0, "com.example.v1.Widget");
        let object = &defs.object.1;
        assert_eq!(object["properties"]["spec"]["properties"]["size"]["type"], "integer");
        assert_eq!(object["properties"]["metadata"]["$ref"], OBJECT_META);
        assert_eq!(object["properties"]["kind"]["type"], "string");
        assert_eq!(object["x-kubernetes-group-version-kind"], json!([{"group": "example.com", "kind": "Widget", "version": "v1"}]));
        assert_eq!(&defs.object_v2, object);
        assert_eq!(defs.list.0, "com.example.v1.WidgetList");
        assert_eq!(defs.list.1["properties"]["items"]["items"]["$ref"], "#/definitions/com.example.v1.Widget");
        assert!(object.get("x-kubernetes-selectable-fields").is_none());
    }

    #[test]
    fn embedded_resources_get_kubes_type_meta_and_metadata() {
        let names = Names { kind: "Widget".into(), list_kind: "WidgetList".into(), ..Default::default() };
        let template = json!({"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true});
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"template": template,
            "items": {"type": "array", "items": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}}}}}}});
        let defs = kind_definitions("example.com", "v1", &names, Some(&schema), &[]);
        let template = &defs.object.1["properties"]["spec"]["properties"]["template"];
        assert_eq!(template["properties"]["metadata"]["$ref"], OBJECT_META);
        assert_eq!(template["required"], json!(["kind", "apiVersion"]));
        let item = &defs.object.1["properties"]["spec"]["properties"]["items"]["items"];
        assert_eq!(item["properties"]["kind"]["type"], "string");
        let v2 = &defs.object_v2["properties"]["spec"]["properties"];
        assert!(v2["template"].get("properties").is_none(), "v2 adds nothing where unknown fields are kept");
        assert_eq!(v2["items"]["items"]["required"], json!(["kind", "apiVersion"]));
    }

    #[test]
    fn swagger_2_gets_what_kubectl_can_read() {
        let names = Names { kind: "Widget".into(), list_kind: "WidgetList".into(), ..Default::default() };
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["a", "b"], "anyOf": [{"required": ["a"]}],
            "properties": {"a": {"type": "string", "nullable": true}, "b": {"type": "integer"},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"x": {"type": "string"}}},
                "list": {"type": "array", "nullable": true, "items": {"type": "string"}}}}}});
        let defs = kind_definitions("example.com", "v1", &names, Some(&schema), &[]);
        let spec = &defs.object_v2["properties"]["spec"];
        assert_eq!(spec["required"], json!(["b"]));
        assert!(spec.get("anyOf").is_none());
        assert_eq!(spec["properties"]["a"], json!({}));
        assert_eq!(spec["properties"]["free"], json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
        assert_eq!(spec["properties"]["list"], json!({}));
        assert_eq!(defs.object.1["properties"]["spec"]["anyOf"], json!([{"required": ["a"]}]), "v3 keeps it all");
    }

    #[test]
    fn selectable_fields_are_named_in_the_kinds_extension_as_kube_names_them() {
        let names = Names { kind: "Shirt".into(), list_kind: "ShirtList".into(), ..Default::default() };
        let fields = ["spec.color".to_string(), "spec.size".to_string()];
        let want = json!([{"fieldPath": "spec.color"}, {"fieldPath": "spec.size"}]);
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
        let defs = kind_definitions("tests.example.com", "v1", &names, Some(&schema), &fields);
        assert_eq!(defs.object.1["x-kubernetes-selectable-fields"], want);
        let keeps_all = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        assert_eq!(kind_definitions("tests.example.com", "v1", &names, Some(&keeps_all), &fields).object_v2["x-kubernetes-selectable-fields"], want);
    }
}

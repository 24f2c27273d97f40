//! `/openapi/v2` in protobuf: the swagger document as gnostic's `openapi.v2.Document`, the form
//! client-go's `OpenAPISchema()` asks for (kubectl validates kinds missing from OpenAPI v3 with
//! it; helm validates manifests with it).
//!
//! The JSON document is walked with a table of gnostic's messages (their field numbers); the
//! messages that are a choice between forms (`oneof`) are picked by the JSON's shape, as
//! gnostic's own reader picks them. Extension values (`x-...`), defaults, enums and examples are
//! `Any`s holding YAML, as gnostic writes them.

use std::sync::LazyLock;

use prost::encoding::{WireType, encode_key, encode_varint};
use serde_json::{Map, Value};

/// A gnostic message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum M {
    Document,
    Info,
    Paths,
    PathItem,
    Operation,
    ParametersItem,
    /// A parameter defined once, for `$ref`s (`#/parameters/<name>`).
    Parameter,
    BodyParameter,
    QueryParameter,
    PathParameter,
    PrimitivesItems,
    Responses,
    ResponseValue,
    Response,
    Schema,
    SecurityDefinitionsItem,
    /// `{name: [scopes]}`.
    SecurityRequirement,
    ApiKeySecurity,
    Tag,
    ExternalDocs,
    /// `repeated string value = 1` (`StringArray`, `TypeItem`).
    Strings,
    /// A value as YAML (`Any.yaml`).
    Any,
}

/// How a JSON member is written.
#[derive(Clone, Copy, Debug)]
enum F {
    Str,
    Bool,
    Double,
    Int,
    Strs,
    Msg(M),
    Msgs(M),
    /// An object whose members become a wrapper message of `Named*{name = 1, value = 2}` at
    /// field 1 (`Definitions`, `Properties`, `SecurityDefinitions`, ...).
    Wrapped(M),
    /// Each member becomes a `Named*{name = 1, value = 2}` at this field.
    Entries(M),
}

/// Which members a field takes: one by name, the `x-` extensions, or every other member.
#[derive(Clone, Copy, Debug)]
enum Key {
    Is(&'static str),
    Extension,
    Other,
}

use F::*;
use Key::*;

/// The members of a non-body parameter in gnostic's order, numbered from 1 in query (and
/// form) parameters; path (and header) parameters have no `allowEmptyValue` and number the
/// rest one lower.
const PARAMETER: [(&str, F); 23] = [
    ("required", Bool),
    ("in", Str),
    ("description", Str),
    ("name", Str),
    ("allowEmptyValue", Bool),
    ("type", Str),
    ("format", Str),
    ("items", Msg(M::PrimitivesItems)),
    ("collectionFormat", Str),
    ("default", Msg(M::Any)),
    ("maximum", Double),
    ("exclusiveMaximum", Bool),
    ("minimum", Double),
    ("exclusiveMinimum", Bool),
    ("maxLength", Int),
    ("minLength", Int),
    ("pattern", Str),
    ("maxItems", Int),
    ("minItems", Int),
    ("uniqueItems", Bool),
    ("enum", Msgs(M::Any)),
    ("multipleOf", Double),
    ("x-", Entries(M::Any)),
];

fn parameter_table(allow_empty: bool) -> Vec<(Key, u32, F)> {
    PARAMETER
        .iter()
        .filter(|(name, _)| allow_empty || *name != "allowEmptyValue")
        .zip(1..)
        .map(|(&(name, form), tag)| (if name == "x-" { Extension } else { Is(name) }, tag, form))
        .collect()
}

static QUERY_PARAMETER: LazyLock<Vec<(Key, u32, F)>> = LazyLock::new(|| parameter_table(true));
static PATH_PARAMETER: LazyLock<Vec<(Key, u32, F)>> = LazyLock::new(|| parameter_table(false));

/// `(member, field number, form)` of each table-driven message.
fn table(m: M) -> &'static [(Key, u32, F)] {
    match m {
        M::Document => &[
            (Is("swagger"), 1, Str),
            (Is("info"), 2, Msg(M::Info)),
            (Is("host"), 3, Str),
            (Is("basePath"), 4, Str),
            (Is("schemes"), 5, Strs),
            (Is("consumes"), 6, Strs),
            (Is("produces"), 7, Strs),
            (Is("paths"), 8, Msg(M::Paths)),
            (Is("definitions"), 9, Wrapped(M::Schema)),
            (Is("parameters"), 10, Wrapped(M::Parameter)),
            (Is("responses"), 11, Wrapped(M::Response)),
            (Is("security"), 12, Msgs(M::SecurityRequirement)),
            (Is("securityDefinitions"), 13, Wrapped(M::SecurityDefinitionsItem)),
            (Is("tags"), 14, Msgs(M::Tag)),
            (Is("externalDocs"), 15, Msg(M::ExternalDocs)),
            (Extension, 16, Entries(M::Any)),
        ],
        M::Info => {
            &[(Is("title"), 1, Str), (Is("version"), 2, Str), (Is("description"), 3, Str), (Is("termsOfService"), 4, Str), (Extension, 7, Entries(M::Any))]
        }
        M::Paths => &[(Extension, 1, Entries(M::Any)), (Other, 2, Entries(M::PathItem))],
        M::PathItem => &[
            (Is("$ref"), 1, Str),
            (Is("get"), 2, Msg(M::Operation)),
            (Is("put"), 3, Msg(M::Operation)),
            (Is("post"), 4, Msg(M::Operation)),
            (Is("delete"), 5, Msg(M::Operation)),
            (Is("options"), 6, Msg(M::Operation)),
            (Is("head"), 7, Msg(M::Operation)),
            (Is("patch"), 8, Msg(M::Operation)),
            (Is("parameters"), 9, Msgs(M::ParametersItem)),
            (Extension, 10, Entries(M::Any)),
        ],
        M::Operation => &[
            (Is("tags"), 1, Strs),
            (Is("summary"), 2, Str),
            (Is("description"), 3, Str),
            (Is("externalDocs"), 4, Msg(M::ExternalDocs)),
            (Is("operationId"), 5, Str),
            (Is("produces"), 6, Strs),
            (Is("consumes"), 7, Strs),
            (Is("parameters"), 8, Msgs(M::ParametersItem)),
            (Is("responses"), 9, Msg(M::Responses)),
            (Is("schemes"), 10, Strs),
            (Is("deprecated"), 11, Bool),
            (Is("security"), 12, Msgs(M::SecurityRequirement)),
            (Extension, 13, Entries(M::Any)),
        ],
        M::BodyParameter => &[
            (Is("description"), 1, Str),
            (Is("name"), 2, Str),
            (Is("in"), 3, Str),
            (Is("required"), 4, Bool),
            (Is("schema"), 5, Msg(M::Schema)),
            (Extension, 6, Entries(M::Any)),
        ],
        M::QueryParameter => &QUERY_PARAMETER,
        M::PathParameter => &PATH_PARAMETER,
        M::PrimitivesItems => &[
            (Is("type"), 1, Str),
            (Is("format"), 2, Str),
            (Is("items"), 3, Msg(M::PrimitivesItems)),
            (Is("collectionFormat"), 4, Str),
            (Is("default"), 5, Msg(M::Any)),
            (Is("enum"), 16, Msgs(M::Any)),
            (Extension, 18, Entries(M::Any)),
        ],
        M::Responses => &[(Extension, 2, Entries(M::Any)), (Other, 1, Entries(M::ResponseValue))],
        M::Response => &[(Is("description"), 1, Str), (Extension, 5, Entries(M::Any))],
        M::Schema => &[
            (Is("$ref"), 1, Str),
            (Is("format"), 2, Str),
            (Is("title"), 3, Str),
            (Is("description"), 4, Str),
            (Is("default"), 5, Msg(M::Any)),
            (Is("multipleOf"), 6, Double),
            (Is("maximum"), 7, Double),
            (Is("exclusiveMaximum"), 8, Bool),
            (Is("minimum"), 9, Double),
            (Is("exclusiveMinimum"), 10, Bool),
            (Is("maxLength"), 11, Int),
            (Is("minLength"), 12, Int),
            (Is("pattern"), 13, Str),
            (Is("maxItems"), 14, Int),
            (Is("minItems"), 15, Int),
            (Is("uniqueItems"), 16, Bool),
            (Is("maxProperties"), 17, Int),
            (Is("minProperties"), 18, Int),
            (Is("required"), 19, Strs),
            (Is("enum"), 20, Msgs(M::Any)),
            (Is("allOf"), 24, Msgs(M::Schema)),
            (Is("properties"), 25, Wrapped(M::Schema)),
            (Is("discriminator"), 26, Str),
            (Is("readOnly"), 27, Bool),
            (Is("externalDocs"), 29, Msg(M::ExternalDocs)),
            (Is("example"), 30, Msg(M::Any)),
            (Extension, 31, Entries(M::Any)),
        ],
        M::SecurityRequirement => &[(Other, 1, Entries(M::Strings))],
        M::ApiKeySecurity => &[(Is("type"), 1, Str), (Is("name"), 2, Str), (Is("in"), 3, Str), (Is("description"), 4, Str), (Extension, 5, Entries(M::Any))],
        M::Tag => &[(Is("name"), 1, Str), (Is("description"), 2, Str), (Is("externalDocs"), 3, Msg(M::ExternalDocs)), (Extension, 4, Entries(M::Any))],
        M::ExternalDocs => &[(Is("description"), 1, Str), (Is("url"), 2, Str), (Extension, 3, Entries(M::Any))],
        M::ParametersItem | M::Parameter | M::ResponseValue | M::SecurityDefinitionsItem | M::Strings | M::Any => &[],
    }
}

/// The swagger 2.0 document `doc` as a serialized `openapi.v2.Document`.
pub fn encode(doc: &Value) -> Vec<u8> {
    message(M::Document, doc)
}

fn message(m: M, v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    match m {
        M::Any => {
            let yaml = serde_norway::to_string(v).unwrap_or_default();
            bytes_field(2, yaml.as_bytes(), &mut out);
        }
        M::Strings => {
            let values: Vec<&str> = match v {
                Value::String(s) => vec![s],
                Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            for s in values {
                bytes_field(1, s.as_bytes(), &mut out);
            }
        }
        // A `$ref` or an inline parameter; inline ones by where they go.
        M::ParametersItem => match v.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let mut reference = Vec::new();
                bytes_field(1, r.as_bytes(), &mut reference);
                bytes_field(2, &reference, &mut out);
            }
            None => bytes_field(1, &message(M::Parameter, v), &mut out),
        },
        // Where it goes decides its form.
        M::Parameter => {
            out = match v.get("in").and_then(Value::as_str) {
                Some("body") => wrap(1, &message(M::BodyParameter, v)),
                Some("query") => wrap(2, &wrap(3, &message(M::QueryParameter, v))),
                Some("formData") => wrap(2, &wrap(2, &message(M::QueryParameter, v))),
                Some("header") => wrap(2, &wrap(1, &message(M::PathParameter, v))),
                _ => wrap(2, &wrap(4, &message(M::PathParameter, v))),
            }
        }
        M::ResponseValue => match v.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let mut reference = Vec::new();
                bytes_field(1, r.as_bytes(), &mut reference);
                bytes_field(2, &reference, &mut out);
            }
            None => bytes_field(1, &response(v), &mut out),
        },
        // kube's documents declare bearer tokens only, as an API key.
        M::SecurityDefinitionsItem => {
            if v.get("type").and_then(Value::as_str) == Some("apiKey") {
                bytes_field(2, &message(M::ApiKeySecurity, v), &mut out);
            }
        }
        M::Response => out = response(v),
        M::Schema => {
            fields(m, v, &mut out);
            schema_choices(v, &mut out);
        }
        _ => fields(m, v, &mut out),
    }
    out
}

/// A `Response`: its table, and its schema as a `SchemaItem`.
fn response(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    fields(M::Response, v, &mut out);
    if let Some(schema) = v.get("schema") {
        bytes_field(2, &wrap(1, &message(M::Schema, schema)), &mut out);
    }
    out
}

/// The members of a schema that are a choice of forms.
fn schema_choices(v: &Value, out: &mut Vec<u8>) {
    match v.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut item = Vec::new();
            encode_key(2, WireType::Varint, &mut item);
            encode_varint(u64::from(*b), &mut item);
            bytes_field(21, &item, out);
        }
        Some(schema @ Value::Object(_)) => bytes_field(21, &wrap(1, &message(M::Schema, schema)), out),
        _ => {}
    }
    if let Some(t) = v.get("type") {
        bytes_field(22, &message(M::Strings, t), out);
    }
    let items: Vec<&Value> = match v.get("items") {
        Some(Value::Array(a)) => a.iter().collect(),
        Some(one) => vec![one],
        None => Vec::new(),
    };
    if !items.is_empty() {
        let mut item = Vec::new();
        for i in items {
            bytes_field(1, &message(M::Schema, i), &mut item);
        }
        bytes_field(23, &item, out);
    }
}

fn fields(m: M, v: &Value, out: &mut Vec<u8>) {
    let Some(obj) = v.as_object() else { return };
    for &(key, tag, form) in table(m) {
        match key {
            Is(name) => {
                if let Some(value) = obj.get(name) {
                    field(tag, form, name, value, out);
                }
            }
            Extension => members(obj, |k| k.starts_with("x-")).for_each(|(k, value)| field(tag, form, k, value, out)),
            Other => {
                let named: Vec<&str> = table(m).iter().filter_map(|(k, _, _)| if let Is(n) = k { Some(*n) } else { None }).collect();
                members(obj, |k| !k.starts_with("x-") && !named.contains(&k)).for_each(|(k, value)| field(tag, form, k, value, out));
            }
        }
    }
}

fn members<'a>(obj: &'a Map<String, Value>, keep: impl Fn(&str) -> bool + 'a) -> impl Iterator<Item = (&'a str, &'a Value)> + 'a {
    obj.iter().filter(move |(k, _)| keep(k)).map(|(k, v)| (k.as_str(), v))
}

/// Writes one member; `name` is its key (the name of a `Named*` entry).
fn field(tag: u32, form: F, name: &str, v: &Value, out: &mut Vec<u8>) {
    match form {
        Str => {
            if let Some(s) = v.as_str().filter(|s| !s.is_empty()) {
                bytes_field(tag, s.as_bytes(), out);
            }
        }
        Bool => {
            if v.as_bool() == Some(true) {
                encode_key(tag, WireType::Varint, out);
                encode_varint(1, out);
            }
        }
        Double => {
            if let Some(x) = v.as_f64() {
                encode_key(tag, WireType::SixtyFourBit, out);
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        Int => {
            if let Some(x) = v.as_i64() {
                encode_key(tag, WireType::Varint, out);
                encode_varint(x as u64, out);
            }
        }
        Strs => {
            for s in v.as_array().into_iter().flatten().filter_map(Value::as_str) {
                bytes_field(tag, s.as_bytes(), out);
            }
        }
        Msg(m) => bytes_field(tag, &message(m, v), out),
        Msgs(m) => {
            for item in v.as_array().into_iter().flatten() {
                bytes_field(tag, &message(m, item), out);
            }
        }
        Wrapped(m) => {
            let mut wrapper = Vec::new();
            for (k, value) in v.as_object().into_iter().flatten() {
                bytes_field(1, &named(k, m, value), &mut wrapper);
            }
            bytes_field(tag, &wrapper, out);
        }
        Entries(m) => bytes_field(tag, &named(name, m, v), out),
    }
}

/// A `Named*{name = 1, value = 2}` entry.
fn named(name: &str, m: M, v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    bytes_field(1, name.as_bytes(), &mut out);
    bytes_field(2, &message(m, v), &mut out);
    out
}

/// `bytes` as a message with one length-delimited field.
fn wrap(tag: u32, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    bytes_field(tag, bytes, &mut out);
    out
}

fn bytes_field(tag: u32, bytes: &[u8], out: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use prost::encoding::{decode_key, decode_varint};
    use serde_json::json;

    use super::*;

    /// The length-delimited fields of a message, as (field number, bytes).
    fn fields_of(mut buf: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        while !buf.is_empty() {
            let (tag, wire) = decode_key(&mut buf).unwrap();
            match wire {
                WireType::LengthDelimited => {
                    let len = decode_varint(&mut buf).unwrap() as usize;
                    out.push((tag, buf[..len].to_vec()));
                    buf = &buf[len..];
                }
                WireType::Varint => {
                    decode_varint(&mut buf).unwrap();
                }
                WireType::SixtyFourBit => buf = &buf[8..],
                other => panic!("unexpected wire type {other:?}"),
            }
        }
        out
    }

    fn field(buf: &[u8], tag: u32) -> Vec<u8> {
        fields_of(buf).into_iter().find(|(t, _)| *t == tag).unwrap_or_else(|| panic!("no field {tag}")).1
    }

    #[test]
    fn documents_follow_gnostics_field_numbers() {
        let doc = json!({
            "swagger": "2.0",
            "paths": {"/api/v1/namespaces/{name}": {"parameters": [
                {"name": "name", "in": "path", "required": true, "type": "string"},
                {"name": "body", "in": "body", "schema": {"$ref": "#/definitions/X"}},
                {"name": "pretty", "in": "query", "type": "string"}]}},
            "definitions": {"X": {"type": "object", "properties": {"n": {"type": "integer", "format": "int32"}},
                "additionalProperties": false, "x-kubernetes-group-version-kind": [{"group": "", "kind": "X", "version": "v1"}]}},
        });
        let bytes = encode(&doc);
        assert_eq!(field(&bytes, 1), b"2.0");

        let named = field(&field(&bytes, 9), 1);
        assert_eq!(field(&named, 1), b"X");
        let schema = field(&named, 2);
        assert_eq!(field(&field(&schema, 22), 1), b"object", "type is a TypeItem");
        let property = field(&field(&schema, 25), 1);
        assert_eq!(field(&field(&field(&property, 2), 22), 1), b"integer");
        let extension = field(&schema, 31);
        assert_eq!(field(&extension, 1), b"x-kubernetes-group-version-kind");
        assert!(String::from_utf8(field(&field(&extension, 2), 2)).unwrap().contains("kind: X"), "extension values are YAML");

        let path = field(&field(&bytes, 8), 2);
        assert_eq!(field(&path, 1), b"/api/v1/namespaces/{name}");
        let parameters: Vec<Vec<u8>> = fields_of(&field(&path, 2)).into_iter().filter(|(t, _)| *t == 9).map(|(_, b)| b).collect();
        let path_param = field(&field(&field(&parameters[0], 1), 2), 4);
        assert_eq!(field(&path_param, 4), b"name", "a path parameter is NonBodyParameter.path_parameter_sub_schema");
        assert_eq!(field(&path_param, 5), b"string");
        let query_param = field(&field(&field(&parameters[2], 1), 2), 3);
        assert_eq!(field(&query_param, 6), b"string", "query parameters number their type after allowEmptyValue");
        let body = field(&field(&parameters[1], 1), 1);
        assert_eq!(field(&field(&body, 5), 1), b"#/definitions/X", "a body parameter holds its schema");
    }
}

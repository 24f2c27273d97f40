//! The configuration files kube-apiserver reads (`--authorization-config`,
//! `--authentication-config`: kinds of `apiserver.config.k8s.io`), decoded as kube's strict
//! universal decoder decodes them: YAML or JSON; `apiVersion` and `kind` required and known;
//! each field of the Go type it fills, with Go's error for a value of another JSON type
//! (`json: cannot unmarshal number into Go struct field WebhookConfiguration.authorizers.webhook.timeout
//! of type string`); then fields the type does not have, all of them
//! (`strict decoding error: unknown field "authorizers[0].webhook.foo"`).
//!
//! A file's reader walks its tree with a [`Decoder`], naming at each object the Go struct it
//! fills and the fields that struct has.

use jiff::SignedDuration;
use serde_json::{Map, Value};

/// The scheme of `apiserver.config.k8s.io`'s kinds, as kube's "not registered" errors name it.
pub const APISERVER_SCHEME: &str = "k8s.io/apiserver/pkg/apis/apiserver/load/load.go:31";

/// The tree of a file of `kind`, if its `apiVersion` is one of `versions` (else kube's error
/// naming `scheme`); an empty file is an empty object (kube decodes it as its defaults).
pub fn read(data: &[u8], kind: &str, versions: &[&str], scheme: &str) -> Result<Value, String> {
    if data.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Map::new()));
    }
    let tree: Value = serde_norway::from_slice(data).map_err(|e| format!("error converting YAML to JSON: {e}"))?;
    let Value::Object(map) = &tree else {
        return Err(crate::codec::go_json::not_type_meta(&tree));
    };
    let field = |k: &str| map.get(k).and_then(Value::as_str).unwrap_or_default();
    let raw = serde_json::to_string(&tree).expect("JSON trees serialize");
    if field("kind").is_empty() {
        return Err(format!("Object 'Kind' is missing in '{raw}'"));
    }
    if field("apiVersion").is_empty() {
        return Err(format!("Object 'apiVersion' is missing in '{raw}'"));
    }
    if field("kind") != kind || !versions.contains(&field("apiVersion")) {
        return Err(format!("no kind {:?} is registered for version {:?} in scheme {scheme:?}", field("kind"), field("apiVersion")));
    }
    Ok(tree)
}

/// Where a value lies: its JSON path (`authorizers[0].webhook`, what unknown fields are named
/// by) and Go's (`authorizers.webhook`, what type errors name).
#[derive(Clone, Debug, Default)]
pub struct At {
    json: String,
    go: String,
}

impl At {
    /// A field of the object here.
    pub fn field(&self, name: &str) -> At {
        let join = |p: &str| if p.is_empty() { name.to_string() } else { format!("{p}.{name}") };
        At { json: join(&self.json), go: join(&self.go) }
    }

    /// The `i`th item of the list here.
    pub fn index(&self, i: usize) -> At {
        At { json: format!("{}[{i}]", self.json), go: self.go.clone() }
    }
}

/// Reads a tree into Go's types, keeping the first type error and every unknown field.
#[derive(Default)]
pub struct Decoder {
    /// The Go package of the version read (`v1`), which Go's errors name types by.
    package: String,
    type_error: Option<String>,
    unknown: Vec<String>,
}

/// A struct being read: its fields, by JSON name, and the Go type's name.
pub struct Struct<'v> {
    fields: Option<&'v Map<String, Value>>,
    name: &'static str,
    at: At,
}

impl<'v> Struct<'v> {
    fn get(&self, field: &str) -> Option<&'v Value> {
        self.fields?.get(field).filter(|v| !v.is_null())
    }

    /// Whether the field is present and not null (a Go pointer that is set).
    pub fn has(&self, field: &str) -> bool {
        self.get(field).is_some()
    }

    pub fn at(&self, field: &str) -> At {
        self.at.field(field)
    }
}

impl Decoder {
    /// A decoder of the tree [`read`] gave.
    pub fn new(tree: &Value) -> Decoder {
        let version = tree.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        Decoder { package: version.rsplit('/').next().unwrap_or_default().to_string(), ..Decoder::default() }
    }

    /// The top struct `name` of the tree, with `known` its fields.
    pub fn root<'v>(&mut self, tree: &'v Value, name: &'static str, known: &[&str]) -> Struct<'v> {
        self.object(Some(tree), At::default(), "", name, known)
    }

    /// The struct `name` at `v` (`null`: all its fields zero) in a field of `owner`, with
    /// `known` its fields.
    pub fn object<'v>(&mut self, v: Option<&'v Value>, at: At, owner: &str, name: &'static str, known: &[&str]) -> Struct<'v> {
        let fields = match v {
            Some(Value::Object(map)) => {
                for key in map.keys().filter(|k| !known.contains(&k.as_str())) {
                    self.unknown.push(at.field(key).json);
                }
                Some(map)
            }
            None | Some(Value::Null) => None,
            Some(other) => {
                let go_type = format!("{}.{name}", self.package);
                self.mistyped(other, &at, owner, &go_type);
                None
            }
        };
        Struct { fields, name, at }
    }

    /// A struct field of `s`.
    pub fn nested<'v>(&mut self, s: &Struct<'v>, field: &str, name: &'static str, known: &[&str]) -> Struct<'v> {
        self.object(s.get(field), s.at(field), s.name, name, known)
    }

    /// A string field.
    pub fn string(&mut self, s: &Struct, field: &str) -> String {
        match s.get(field) {
            None => String::new(),
            Some(Value::String(text)) => text.clone(),
            Some(other) => {
                self.mistyped(other, &s.at(field), s.name, "string");
                String::new()
            }
        }
    }

    /// A boolean field.
    pub fn bool(&mut self, s: &Struct, field: &str) -> bool {
        match s.get(field) {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                self.mistyped(other, &s.at(field), s.name, "bool");
                false
            }
        }
    }

    /// An `int32` field (zero when absent), with Go's error for a number it cannot hold.
    pub fn int32(&mut self, s: &Struct, field: &str) -> i32 {
        self.integer(s, field, "int32", |i| i32::try_from(i).is_ok()).map_or(0, |i| i as i32)
    }

    /// An `*int64` field (`None` when absent), with Go's error for a number it cannot hold.
    pub fn int64(&mut self, s: &Struct, field: &str) -> Option<i64> {
        self.integer(s, field, "int64", |_| true)
    }

    /// An integer field of Go type `go_type`, whose values `fits` (`None` when absent or not
    /// one, with Go's error).
    pub fn integer(&mut self, s: &Struct, field: &str, go_type: &str, fits: fn(i64) -> bool) -> Option<i64> {
        match s.get(field) {
            None => None,
            Some(Value::Number(n)) => {
                let held = n.as_i64().filter(|i| fits(*i));
                if held.is_none() {
                    let message = format!("json: cannot unmarshal number {n} into Go struct field {}.{} of type {go_type}", s.name, s.at(field).go);
                    self.type_error.get_or_insert(message);
                }
                held
            }
            Some(other) => {
                self.mistyped(other, &s.at(field), s.name, go_type);
                None
            }
        }
    }

    /// A list of strings.
    pub fn strings(&mut self, s: &Struct, field: &str) -> Vec<String> {
        let at = s.at(field);
        self.items(s, field, "[]string")
            .into_iter()
            .filter_map(|(_, item)| match item {
                Value::String(text) => Some(text.clone()),
                Value::Null => Some(String::new()),
                other => {
                    self.mistyped(other, &at, s.name, "string");
                    None
                }
            })
            .collect()
    }

    /// The items of a list field, each with where it lies.
    pub fn items<'v>(&mut self, s: &Struct<'v>, field: &str, go_type: &str) -> Vec<(At, &'v Value)> {
        match s.get(field) {
            None => Vec::new(),
            Some(Value::Array(items)) => items.iter().enumerate().map(|(i, item)| (s.at(field).index(i), item)).collect(),
            Some(other) => {
                self.mistyped(other, &s.at(field), s.name, go_type);
                Vec::new()
            }
        }
    }

    /// A `metav1.Duration` field: a string Go's `time.ParseDuration` reads (zero when absent).
    pub fn duration(&mut self, s: &Struct, field: &str) -> SignedDuration {
        match s.get(field) {
            None => SignedDuration::ZERO,
            Some(Value::String(text)) => crate::pipeline::limits::parse_go_duration(text).unwrap_or_else(|e| {
                self.type_error.get_or_insert(e);
                SignedDuration::ZERO
            }),
            Some(other) => {
                self.mistyped(other, &s.at(field), s.name, "string");
                SignedDuration::ZERO
            }
        }
    }

    fn mistyped(&mut self, v: &Value, at: &At, strukt: &str, go_type: &str) {
        let message = crate::codec::go_json::mistyped(v, &format!("{strukt}.{}", at.go), go_type);
        self.type_error.get_or_insert(message);
    }

    /// What a lenient decoding (Go's universal decoder, which ignores unknown fields) came
    /// to: the first type error.
    pub fn finish_leniently(self) -> Result<(), String> {
        self.type_error.map_or(Ok(()), Err)
    }

    /// What the decoding came to: the first type error, else the unknown fields.
    pub fn finish(self) -> Result<(), String> {
        if let Some(e) = self.type_error {
            return Err(e);
        }
        if self.unknown.is_empty() {
            return Ok(());
        }
        let fields: Vec<String> = self.unknown.iter().map(|f| format!("unknown field {f:?}")).collect();
        Err(format!("strict decoding error: {}", fields.join(", ")))
    }
}

/// What Go's JSON decoder calls a value's type in its errors.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VERSIONS: [&str; 1] = ["apiserver.config.k8s.io/v1"];

    #[test]
    fn kind_and_version_are_required_and_known() {
        assert_eq!(read(b"", "AuthorizationConfiguration", &VERSIONS, APISERVER_SCHEME).unwrap(), serde_json::json!({}));
        assert!(
            read(b"apiVersion: apiserver.config.k8s.io/v1\n", "AuthorizationConfiguration", &VERSIONS, APISERVER_SCHEME)
                .unwrap_err()
                .starts_with("Object 'Kind' is missing in '{")
        );
        assert!(
            read(b"kind: AuthorizationConfiguration\n", "AuthorizationConfiguration", &VERSIONS, APISERVER_SCHEME)
                .unwrap_err()
                .starts_with("Object 'apiVersion' is missing")
        );
        let other =
            read(b"kind: AuthorizationConfiguration\napiVersion: apiserver.k8s.io/v1beta1\n", "AuthorizationConfiguration", &VERSIONS, APISERVER_SCHEME)
                .unwrap_err();
        assert!(other.starts_with("no kind \"AuthorizationConfiguration\" is registered for version \"apiserver.k8s.io/v1beta1\""), "{other}");
        assert!(
            read(
                b"{\"kind\":\"AuthorizationConfiguration\",\"apiVersion\":\"apiserver.config.k8s.io/v1\"}",
                "AuthorizationConfiguration",
                &VERSIONS,
                APISERVER_SCHEME
            )
            .is_ok()
        );
    }

    #[test]
    fn type_errors_come_first_then_every_unknown_field() {
        let tree = serde_json::json!({"a": {"n": 5, "x": 1}, "y": 2});
        let mut d = Decoder::default();
        let root = d.root(&tree, "Root", &["a"]);
        let a = d.nested(&root, "a", "Inner", &["n"]);
        assert_eq!(d.string(&a, "n"), "");
        assert_eq!(d.finish().unwrap_err(), "json: cannot unmarshal number into Go struct field Inner.a.n of type string");
        let mut d = Decoder::default();
        let root = d.root(&tree, "Root", &["a"]);
        d.nested(&root, "a", "Inner", &["n"]);
        assert_eq!(d.finish().unwrap_err(), "strict decoding error: unknown field \"y\", unknown field \"a.x\"");
        let list = serde_json::json!({"l": [{"z": 1}]});
        let mut d = Decoder::default();
        let root = d.root(&list, "Root", &["l"]);
        for (at, item) in d.items(&root, "l", "[]Item") {
            d.object(Some(item), at, "Root", "Item", &[]);
        }
        assert_eq!(d.finish().unwrap_err(), "strict decoding error: unknown field \"l[0].z\"");
    }
}

//! A CRD version's structural schema (its `openAPIV3Schema`), as kube's apiextensions server
//! applies it to custom resources: unknown fields pruned (`pkg/apiserver/schema/pruning`) and
//! defaults set (`pkg/apiserver/schema/defaulting`).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde_json::{Map, Value};

use super::pattern::Pattern;
use super::rules::Rule;
use crate::schema::ListType;

/// One node of a structural schema.
#[derive(Clone, Debug, PartialEq)]
pub struct Structural {
    /// `type`: `object`, `array`, `string`, `integer`, `number`, `boolean`, or empty.
    pub ty: String,
    pub properties: BTreeMap<String, Structural>,
    /// `additionalProperties` as a schema: every key of the object is of it.
    pub additional: Option<Box<Structural>>,
    pub items: Option<Box<Structural>>,
    /// `x-kubernetes-list-type` (atomic when not given), and `x-kubernetes-list-map-keys`.
    pub list_type: ListType,
    pub map_keys: Vec<String>,
    /// `x-kubernetes-map-type: atomic`: the object is replaced whole by apply.
    pub atomic: bool,
    /// `x-kubernetes-preserve-unknown-fields`: fields not described are kept.
    pub preserve_unknown: bool,
    /// `x-kubernetes-embedded-resource`: an object with its own apiVersion, kind and metadata.
    pub embedded: bool,
    pub nullable: bool,
    pub default: Option<Value>,
    pub pattern: Option<Pattern>,
    /// `format`, when it is one kube checks (it drops the others from the schema).
    pub format: Option<String>,
    /// `allOf`, `anyOf`, `oneOf` and `not`: validation only; pruning and defaulting follow
    /// the schema's own properties.
    pub all_of: Vec<Structural>,
    pub any_of: Vec<Structural>,
    pub one_of: Vec<Structural>,
    pub not: Option<Box<Structural>>,
    /// `x-kubernetes-validations`: the CEL rules of the node.
    pub rules: Vec<Rule>,
    /// This node or one below it (not under junctors) has rules.
    pub rules_below: bool,
    /// The schema as written, for the validation of its other keywords.
    pub raw: Value,
}

/// The schema of a version that gives none: everything is kept.
pub static UNDESCRIBED: Structural = Structural {
    ty: String::new(),
    properties: BTreeMap::new(),
    additional: None,
    items: None,
    list_type: ListType::Atomic,
    map_keys: Vec::new(),
    atomic: false,
    preserve_unknown: true,
    embedded: false,
    nullable: false,
    default: None,
    pattern: None,
    format: None,
    all_of: Vec::new(),
    any_of: Vec::new(),
    one_of: Vec::new(),
    not: None,
    rules: Vec::new(),
    rules_below: false,
    raw: Value::Null,
};

impl Structural {
    /// Reads a schema.
    pub fn read(v: &Value) -> Structural {
        let flag = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
        let schema = |k: &str| v.get(k).filter(|s| s.is_object()).map(|s| Box::new(Structural::read(s)));
        let schemas = |k: &str| v.get(k).and_then(Value::as_array).into_iter().flatten().filter(|s| s.is_object()).map(Structural::read).collect();
        let mut node = Structural {
            ty: v.get("type").and_then(Value::as_str).unwrap_or_default().to_string(),
            properties: v.get("properties").and_then(Value::as_object).into_iter().flatten().map(|(k, s)| (k.clone(), Structural::read(s))).collect(),
            additional: schema("additionalProperties"),
            items: schema("items"),
            list_type: match v.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("set") => ListType::Set,
                Some("map") => ListType::Map,
                _ => ListType::Atomic,
            },
            map_keys: crate::meta::strings(v.get("x-kubernetes-list-map-keys")),
            atomic: v.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic"),
            preserve_unknown: flag("x-kubernetes-preserve-unknown-fields") || v.get("additionalProperties") == Some(&Value::Bool(true)),
            embedded: flag("x-kubernetes-embedded-resource"),
            nullable: flag("nullable"),
            default: v.get("default").cloned(),
            pattern: v.get("pattern").and_then(Value::as_str).map(Pattern::new),
            format: v.get("format").and_then(Value::as_str).filter(|f| super::formats::is_checked(f)).map(str::to_string),
            all_of: schemas("allOf"),
            any_of: schemas("anyOf"),
            one_of: schemas("oneOf"),
            not: schema("not"),
            rules: Rule::read_all(v),
            rules_below: false,
            raw: v.clone(),
        };
        node.rules_below = !node.rules.is_empty()
            || node.properties.values().any(|p| p.rules_below)
            || node.additional.as_deref().is_some_and(|a| a.rules_below)
            || node.items.as_deref().is_some_and(|i| i.rules_below);
        node
    }

    /// Whether reading an object by this schema may change it: the schema drops fields it
    /// does not describe, or sets defaults.
    pub fn applies_on_read(&self) -> bool {
        self.prunes() || self.has_defaults()
    }

    /// Whether the schema drops fields somewhere: an object that neither keeps unknown fields
    /// nor takes any key (`additionalProperties`).
    fn prunes(&self) -> bool {
        let object = self.ty == "object" || !self.properties.is_empty();
        (object && !self.preserve_unknown && self.additional.is_none())
            || self.properties.values().any(Structural::prunes)
            || self.additional.as_deref().is_some_and(Structural::prunes)
            || self.items.as_deref().is_some_and(Structural::prunes)
    }

    fn has_defaults(&self) -> bool {
        self.default.is_some()
            || self.properties.values().any(Structural::has_defaults)
            || self.additional.as_deref().is_some_and(Structural::has_defaults)
            || self.items.as_deref().is_some_and(Structural::has_defaults)
    }

    pub fn is_array(&self) -> bool {
        self.ty == "array" || self.items.is_some()
    }

    /// Drops what the schema does not describe from a custom resource (its `apiVersion`,
    /// `kind` and `metadata` are the object's own) and returns the paths dropped, as
    /// `fieldValidation` reports them (`spec.foo`, `spec.items[0].bar`).
    pub fn prune_object(&self, obj: &mut Value) -> Vec<String> {
        let mut dropped = Vec::new();
        if let Value::Object(m) = obj {
            self.prune_members(m, "", true, &mut dropped);
        }
        dropped
    }

    /// Drops what the schema does not describe from a value of this node (of an embedded
    /// resource, keeping its own type meta and metadata); whether anything was dropped.
    pub fn prune_value(&self, v: &mut Value) -> bool {
        let mut dropped = Vec::new();
        self.prune(v, "", &mut dropped);
        !dropped.is_empty()
    }

    fn prune(&self, v: &mut Value, path: &str, dropped: &mut Vec<String>) {
        match v {
            Value::Object(m) => self.prune_members(m, path, self.embedded, dropped),
            Value::Array(items) => {
                if let Some(item) = &self.items {
                    for (i, x) in items.iter_mut().enumerate() {
                        item.prune(x, &format!("{path}[{i}]"), dropped);
                    }
                }
            }
            _ => {}
        }
    }

    /// The members of an object; `resource`: it has its own type meta and metadata (the
    /// root, an embedded resource), which are kept.
    fn prune_members(&self, m: &mut Map<String, Value>, path: &str, resource: bool, dropped: &mut Vec<String>) {
        let keys: Vec<String> = m.keys().cloned().collect();
        for k in keys {
            let at = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
            // A resource's own type meta and metadata, whatever the schema says of them (kube's
            // pruning skips them at a resource root; embedded metadata is coerced instead).
            let own = match (k.as_str(), m.get(&k)) {
                ("apiVersion" | "kind", Some(Value::String(_))) | ("metadata", Some(Value::Object(_))) => resource,
                _ => false,
            };
            if own {
                if k == "metadata"
                    && !path.is_empty()
                    && let Some(Value::Object(meta)) = m.get_mut(&k)
                {
                    prune_object_meta(meta, &at, dropped);
                }
                continue;
            }
            let schema = self.properties.get(&k).or(self.additional.as_deref());
            match schema {
                Some(s) => s.prune(m.get_mut(&k).expect("a key of the map"), &at, dropped),
                None if self.preserve_unknown => {}
                None => {
                    m.remove(&k);
                    dropped.push(at);
                }
            }
        }
    }

    /// Sets the defaults the schema gives for members an object lacks (or has as `null` where
    /// the schema does not allow null), outside in; a `null` the schema neither allows nor
    /// defaults is dropped.
    pub fn default_object(&self, obj: &mut Value) {
        match obj {
            Value::Object(m) => {
                m.retain(|k, v| !(v.is_null() && self.properties.get(k).or(self.additional.as_deref()).is_some_and(|s| !s.nullable && s.default.is_none())));
                for (k, s) in &self.properties {
                    let missing = m.get(k).is_none_or(|v| v.is_null() && !s.nullable);
                    if missing && let Some(d) = &s.default {
                        m.insert(k.clone(), d.clone());
                    }
                }
                for (k, v) in m.iter_mut() {
                    if let Some(s) = self.properties.get(k).or(self.additional.as_deref()) {
                        s.default_object(v);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(s) = &self.items {
                    for x in items {
                        s.default_object(x);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The fields of `ObjectMeta`: what an embedded resource's metadata keeps.
static OBJECT_META_FIELDS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let def = crate::schema::schema().raw_definitions().get("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
    def.and_then(|d| d.get("properties")).and_then(Value::as_object).map(|p| p.keys().cloned().collect()).unwrap_or_default()
});

/// Drops from an embedded resource's metadata (at `at`) what `ObjectMeta` does not have, as
/// kube's coercion of embedded metadata does.
fn prune_object_meta(meta: &mut Map<String, Value>, at: &str, dropped: &mut Vec<String>) {
    meta.retain(|k, _| {
        let known = OBJECT_META_FIELDS.iter().any(|f| f == k);
        if !known {
            dropped.push(format!("{at}.{k}"));
        }
        known
    });
}

//! What a mutation's result does to the object it mutates (kube's `mutating/patch`): an
//! ApplyConfiguration (`Object{...}`) merged in as structured-merge-diff merges two typed
//! objects (`smd.go`), or the operations of a JSON patch (`list(JSONPatch)`) applied
//! (`json_patch.go`); each result decoded as the kind, as kube decodes it.

use serde_json::{Value, json};

use crate::catalog::Resource;
use crate::cel::mutation::{JSON_PATCH, struct_paths, to_json};
use crate::status::{ApiError, quote};

/// Why a mutation did not apply.
#[derive(Debug)]
pub enum Failure {
    /// The policy's error (a refusal if it fails closed), in kube's words.
    Error(String),
    /// The request's: the write fails with it, whatever the policy's failure policy.
    Status(ApiError),
}

/// What is mutated: an object of a resource, or of the kind of its own a subresource reads
/// and writes (`own`: its definition; a Scale, a Binding).
#[derive(Clone, Copy)]
pub struct Kind<'a> {
    pub resource: &'a Resource,
    pub own: Option<&'static str>,
}

impl Kind<'_> {
    /// The fields of `obj` the kind does not have, pruned, as kube's decoders find them (a
    /// type error: the decoder's message); and whether the kind is a custom resource's (kube
    /// decodes those without a schema, and prunes later without a word).
    fn unknown_fields(self, obj: &mut Value) -> Result<(Vec<String>, bool), String> {
        let definition = match self.own {
            Some(own) => own,
            None => match self.resource.strategy.prune_unknown(obj) {
                Some(unknown) => return Ok((unknown, true)),
                None => &self.resource.info.definition,
            },
        };
        crate::schema::normalize::normalize(crate::schema::schema(), definition, obj).map(|f| (f.unknown_fields, false))
    }

    fn typing(&self) -> crate::ssa::Typing<'_> {
        match self.own {
            Some(_) => crate::ssa::Typing::BuiltIn,
            None => self.resource.strategy.typing(),
        }
    }
}

/// The object `live` with the ApplyConfiguration `result` merged in.
pub fn apply_configuration(kind: Kind<'_>, live: &Value, result: &crate::cel::Value) -> Result<Value, Failure> {
    let crate::cel::Value::Struct(root) = result else {
        return Err(Failure::Error(format!("unexpected return value type: {}", crate::cel::type_name(result))));
    };
    let mut paths = Vec::new();
    struct_paths(result, "", &mut paths);
    let root_name = root.name().to_string();
    let mismatched: Vec<String> = paths
        .iter()
        .filter(|(name, at)| *name != format!("{root_name}{at}"))
        .map(|(name, at)| {
            format!("type mismatch: unexpected type name {name:?}, expected \"{root_name}{at}\", which matches field name path from root {root_name} type")
        })
        .collect();
    if !mismatched.is_empty() {
        return Err(Failure::Error(mismatched.join("\n")));
    }
    let mut patch = to_json(result).map_err(Failure::Error)?;
    for key in ["apiVersion", "kind"] {
        patch[key] = live.get(key).cloned().unwrap_or_default();
    }
    let (unknown, _) =
        kind.unknown_fields(&mut patch).map_err(|e| Failure::Error(format!("error applying patch: failed to convert patch object to typed object: {e}")))?;
    if !unknown.is_empty() {
        let each: Vec<String> = unknown.iter().map(|u| format!(".{u}: field not declared in schema")).collect();
        let joined = if each.len() == 1 { each[0].clone() } else { format!("errors:\n  {}", each.join("\n  ")) };
        return Err(Failure::Error(format!("error applying patch: failed to convert patch object to typed object: {joined}")));
    }
    crate::ssa::merge_patch(live, &patch, &kind.typing()).map_err(|e| Failure::Error(format!("error applying patch: {e}")))
}

/// The object `live` with the JSON patch `result` applied; `None` when one of its `test`
/// operations fails (kube then leaves the object as it was, without an error).
pub fn json_patch(kind: Kind<'_>, live: &Value, result: &crate::cel::Value) -> Result<Option<Value>, Failure> {
    let crate::cel::Value::List(items) = result else {
        return Err(Failure::Error(format!("unexpected return value type: {}", crate::cel::type_name(result))));
    };
    let mut ops = Vec::with_capacity(items.len());
    for item in items.iter() {
        let crate::cel::Value::Struct(s) = item else { return Err(Failure::Error(format!("unexpected JSONPatch type: {}", crate::cel::type_name(item)))) };
        if s.name() != JSON_PATCH {
            return Err(Failure::Error(format!("unexpected JSONPatch type: {}", s.name())));
        }
        let fields = to_json(item).map_err(|e| Failure::Error(format!("JSONPath valueExpression evaluated to a type that could not marshal to JSON: {e}")))?;
        let text = |k: &str| fields.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let mut op = json!({"op": text("op"), "path": text("path")});
        if !text("from").is_empty() {
            op["from"] = json!(text("from"));
        }
        if let Some(v) = fields.get("value") {
            op["value"] = v.clone();
        }
        ops.push(op);
    }
    let mut patched = match crate::patch::apply_json_patch(live, &Value::Array(ops)) {
        Ok(p) => p,
        Err(crate::patch::JsonPatchFailure::TestFailed(_)) => return Ok(None),
        Err(crate::patch::JsonPatchFailure::Failed(e) | crate::patch::JsonPatchFailure::Undecodable(e)) => {
            return Err(Failure::Error(format!("JSON Patch: {e}")));
        }
        Err(crate::patch::JsonPatchFailure::TooMuchCopied) => {
            return Err(Failure::Error("JSON Patch: Unable to copy, would exceed the accumulated copy size limit".into()));
        }
        Err(crate::patch::JsonPatchFailure::NotAList | crate::patch::JsonPatchFailure::TooMany(_)) => {
            return Err(Failure::Error(format!("JSON Patch: more than {} operations", crate::patch::MAX_JSON_PATCH_OPERATIONS)));
        }
    };
    if !patched.is_object() {
        let what = match patched {
            Value::Array(_) => "array",
            Value::String(_) => "string",
            Value::Number(_) => "number",
            Value::Bool(_) => "bool",
            _ => "null",
        };
        return Err(Failure::Status(ApiError::internal(format!("json: cannot unmarshal {what} into Go value of type map[string]interface {{}}"))));
    }
    // What a patch makes of `apiVersion` and `kind` is lost on the way back to the kind.
    for key in ["apiVersion", "kind"] {
        patched[key] = live.get(key).cloned().unwrap_or_default();
    }
    // kube decodes the patched object strictly (a custom resource's: pruned, without a word).
    let (unknown, custom) = kind.unknown_fields(&mut patched).map_err(|e| Failure::Status(ApiError::internal(e)))?;
    if !unknown.is_empty() && !custom {
        let each: Vec<String> = unknown.iter().map(|u| format!("unknown field {}", quote(u))).collect();
        return Err(Failure::Status(ApiError::internal(format!("strict decoding error: {}", each.join(", ")))));
    }
    Ok(Some(patched))
}

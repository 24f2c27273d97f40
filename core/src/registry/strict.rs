//! Decoding checks of an incoming object and kube's strict decoding findings: unknown fields
//! (pruned) and repeated keys, ignored, warned about or refused as `fieldValidation` says,
//! in kube's words and order.
//!
//! - A create's or update's object (the request body): findings in document order, a key that
//!   is both repeated and unknown (or inside an unknown field) reported only as unknown;
//!   refused with 400 `<Kind> in version "<v>" cannot be handled as a <Kind>: strict decoding
//!   error: ...`.
//! - A patched object: the patch's own findings first (its repeated keys; a JSON patch's keys
//!   an operation does not have), then the patched object's unknown fields; refused with 422
//!   `Invalid`, field `patch`, the patched object (or the patch) as the value.
//! - Server-side apply's configuration: unknown fields only, 400 `strict decoding error: ...`.

use std::collections::BTreeSet;

use bytes::Bytes;
use serde_json::Value;

use super::{FieldValidation, WriteOp};
use crate::codec::strict;
use crate::schema::{normalize::normalize, schema};
use crate::status::{ApiError, FieldError, GroupKind, quote};

/// One strict decoding finding of a request body, as kube words it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// How many keys come before it in the body.
    pub ordinal: usize,
    pub path: String,
    /// `duplicate field "spec.paused"`, `json patch unknown field "[0].foo"`.
    pub message: String,
}

/// What strict decoding of a request body found before the object was typed.
#[derive(Clone, Debug, Default)]
pub struct BodyFindings {
    pub findings: Vec<Finding>,
    /// The body, to place unknown fields among the findings (a create's or update's).
    pub body: Bytes,
}

impl BodyFindings {
    /// A create's or update's JSON body: its repeated keys.
    pub fn of_object(body: &Bytes, duplicates: Vec<strict::Duplicate>) -> BodyFindings {
        let findings =
            duplicates.into_iter().map(|d| Finding { message: format!("duplicate field {}", quote(&d.path)), ordinal: d.ordinal, path: d.path }).collect();
        BodyFindings { findings, body: body.clone() }
    }

    /// A merge or strategic merge patch: its repeated keys.
    pub fn of_patch(duplicates: Vec<strict::Duplicate>) -> BodyFindings {
        BodyFindings { body: Bytes::new(), ..BodyFindings::of_object(&Bytes::new(), duplicates) }
    }

    /// A JSON patch: the keys its operations repeat or do not have (`op`, `path`, `from`,
    /// `value`), in document order.
    pub fn of_json_patch(body: &Bytes, doc: &Value, duplicates: Vec<strict::Duplicate>) -> BodyFindings {
        let mut unknown = BTreeSet::new();
        for (i, op) in doc.as_array().into_iter().flatten().enumerate() {
            for key in op.as_object().into_iter().flat_map(|o| o.keys()) {
                if !["op", "path", "from", "value"].contains(&key.as_str()) {
                    unknown.insert(format!("[{i}].{key}"));
                }
            }
        }
        let placed = strict::ordinals(body, &unknown);
        let mut findings: Vec<Finding> = duplicates
            .into_iter()
            .map(|d| Finding { message: format!("json patch duplicate field {}", quote(&d.path)), ordinal: d.ordinal, path: d.path })
            .chain(unknown.into_iter().map(|path| Finding {
                message: format!("json patch unknown field {}", quote(&path)),
                ordinal: placed.get(&path).copied().unwrap_or(usize::MAX),
                path,
            }))
            .collect();
        findings.sort_by_key(|f| f.ordinal);
        BodyFindings { findings, body: Bytes::new() }
    }
}

/// Where the object being type-checked came from.
pub(super) enum Source<'a> {
    /// A create's or update's body.
    Body,
    /// A patch applied to the stored object; the value kube shows for it in a 422.
    Patched(&'a dyn Fn() -> String),
    /// A server-side apply configuration.
    Apply,
}

impl WriteOp {
    /// Type-checks an incoming object against the kind, pruning unknown fields and reporting
    /// them with the body's findings as `fieldValidation` says.
    pub(super) fn decode_check(&mut self, obj: &mut Value, source: Source) -> Result<(), ApiError> {
        let res = self.res.clone();
        let info = &res.info;
        self.decode_as(obj, &info.definition, &info.kind, &info.version, source)
    }

    pub(super) fn decode_as(&mut self, obj: &mut Value, definition: &str, kind: &str, version: &str, source: Source) -> Result<(), ApiError> {
        let cannot_handle = |e: &str| ApiError::bad_request(format!("{kind} in version {} cannot be handled as a {kind}: {e}", quote(version)));
        let unknown = match self.res.strategy.prune_unknown(obj) {
            Some(unknown) => unknown,
            None => normalize(schema(), definition, obj).map_err(|e| cannot_handle(&e))?.unknown_fields,
        };
        let findings = match source {
            Source::Apply => Vec::new(),
            _ => self.ctx.body_findings.findings.clone(),
        };
        if (unknown.is_empty() && findings.is_empty()) || self.ctx.field_validation == FieldValidation::Ignore {
            return Ok(());
        }
        let messages = match source {
            Source::Body => self.in_document_order(findings, unknown),
            Source::Patched(_) | Source::Apply => {
                findings.into_iter().map(|f| f.message).chain(unknown.iter().map(|u| format!("unknown field {}", quote(u)))).collect()
            }
        };
        if self.ctx.field_validation == FieldValidation::Warn {
            self.warnings.extend(messages);
            return Ok(());
        }
        let error = format!("strict decoding error: {}", messages.join(", "));
        Err(match source {
            Source::Body => cannot_handle(&error),
            Source::Patched(shown) => ApiError::invalid(&GroupKind::default(), "", &[FieldError::invalid("patch", Value::String(shown()), error)]),
            Source::Apply => ApiError::bad_request(error),
        })
    }

    /// A body's findings and unknown fields in the order Go's decoder meets them; a repeated
    /// key inside an unknown field is skipped with it, as Go's decoder skips it.
    fn in_document_order(&self, findings: Vec<Finding>, unknown: Vec<String>) -> Vec<String> {
        let within = |path: &str, u: &str| path.strip_prefix(u).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']));
        let findings = findings.into_iter().filter(|f| !unknown.iter().any(|u| within(&f.path, u)));
        let body = &self.ctx.body_findings.body;
        let placed = if unknown.is_empty() || body.is_empty() { Default::default() } else { strict::ordinals(body, &unknown.iter().cloned().collect()) };
        let mut all: Vec<(usize, String)> = findings.map(|f| (f.ordinal, f.message)).collect();
        all.extend(unknown.iter().map(|u| (placed.get(u).copied().unwrap_or(usize::MAX), format!("unknown field {}", quote(u)))));
        all.sort_by_key(|(ordinal, _)| *ordinal);
        all.into_iter().map(|(_, m)| m).collect()
    }
}

/// A JSON tree as Go's `fmt` prints the `map[string]interface{}` it decodes to with `%+v`
/// (`map[spec:map[paused:false]]`: keys sorted, lists in brackets, null as `<nil>`).
pub fn go_format(v: &Value) -> String {
    let mut out = String::new();
    write_go(v, &mut out);
    out
}

fn write_go(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => out.push_str(&i.to_string()),
            (None, Some(f)) => out.push_str(&go_float(f)),
            (None, None) => out.push_str(&n.to_string()),
        },
        Value::String(s) => out.push_str(s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write_go(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push_str("map[");
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                write_go(item, out);
            }
            out.push(']');
        }
    }
}

/// A float64 as Go's `%v` prints it (`strconv.FormatFloat(f, 'g', -1, 64)`): the shortest
/// digits, in exponent form from exponent 21 on or below -4.
fn go_float(f: f64) -> String {
    let exp = if f == 0.0 { 0 } else { f.abs().log10().floor() as i32 };
    if (-4..21).contains(&exp) {
        return format!("{f}");
    }
    let s = format!("{f:e}");
    let (mantissa, e) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    format!("{mantissa}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn values_print_as_go_prints_them() {
        let v = json!({"spec": {"paused": false, "b": [1, 2.5, "x", null], "big": 1e21, "small": 0.00001}});
        assert_eq!(go_format(&v), "map[spec:map[b:[1 2.5 x <nil>] big:1e+21 paused:false small:1e-05]]");
    }

    #[test]
    fn json_patch_findings_in_document_order() {
        let body = Bytes::from_static(br#"[{"op":"add","path":"/a","foo":1},{"op":"add","path":"/b","path":"/c"}]"#);
        let (doc, dups) = strict::decode(&body).unwrap();
        let messages: Vec<String> = BodyFindings::of_json_patch(&body, &doc, dups).findings.into_iter().map(|f| f.message).collect();
        assert_eq!(messages, [r#"json patch unknown field "[0].foo""#, r#"json patch duplicate field "[1].path""#]);
    }
}

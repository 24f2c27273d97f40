//! The three patch formats of `kubectl patch`: JSON patch (RFC 6902), JSON merge patch
//! (RFC 7386) and strategic merge patch, with kube-apiserver's errors.

mod strategic;

use serde_json::Value;

use crate::status::ApiError;

pub use strategic::strategic_merge_patch;

/// kube's cap on the operations of one JSON patch.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;
/// kube's cap on the bytes the `copy` operations of one JSON patch add up to
/// (`JSONPatchMaxCopyBytes`, evanphx/json-patch's `AccumulatedCopySizeLimit`).
pub const MAX_JSON_PATCH_COPY_BYTES: usize = 3 * 1024 * 1024;

/// A failure to apply a patch: kube's `NewGenericServerResponse(422, ...)` with the patch's
/// own error left out, as kube leaves it out (`details` is empty).
pub fn unprocessable() -> ApiError {
    ApiError { details: Some(Box::default()), ..ApiError::new(422, "Invalid", "the server rejected our request due to an error in our request") }
}

/// RFC 6902, with kube's answers for a patch that is not one or does not apply.
pub fn json_patch(current: &Value, doc: &Value) -> Result<Value, ApiError> {
    apply_json_patch(current, doc).map_err(|e| match e {
        JsonPatchFailure::NotAList => ApiError::bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch"),
        JsonPatchFailure::TooMany(n) => {
            ApiError::request_entity_too_large(&format!("The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {n}"))
        }
        JsonPatchFailure::Undecodable(e) => ApiError::bad_request(e),
        JsonPatchFailure::TooMuchCopied | JsonPatchFailure::Failed(_) | JsonPatchFailure::TestFailed(_) => unprocessable(),
    })
}

/// Why a JSON patch was not applied.
#[derive(Debug, PartialEq)]
pub enum JsonPatchFailure {
    NotAList,
    /// More than [`MAX_JSON_PATCH_OPERATIONS`] operations.
    TooMany(usize),
    /// An operation that is not one.
    Undecodable(String),
    /// Its `copy`s add up to more than [`MAX_JSON_PATCH_COPY_BYTES`].
    TooMuchCopied,
    /// An operation that does not apply, and why.
    Failed(String),
    /// A `test` operation found another value (at this path).
    TestFailed(String),
}

/// RFC 6902 applied to `current`, within kube's limits.
pub fn apply_json_patch(current: &Value, doc: &Value) -> Result<Value, JsonPatchFailure> {
    let ops = doc.as_array().ok_or(JsonPatchFailure::NotAList)?;
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(JsonPatchFailure::TooMany(ops.len()));
    }
    let patch: json_patch::Patch = serde_json::from_value(doc.clone()).map_err(|e| JsonPatchFailure::Undecodable(e.to_string()))?;
    let mut out = current.clone();
    // Operations one at a time, so that what `copy`s add up to is known before each is made:
    // copies of the document into itself would double it at every step.
    let mut copied = 0usize;
    for op in patch.0 {
        if let json_patch::PatchOperation::Copy(c) = &op {
            copied = copied.saturating_add(out.pointer(c.from.as_str()).map_or(0, json_size));
            if copied > MAX_JSON_PATCH_COPY_BYTES {
                return Err(JsonPatchFailure::TooMuchCopied);
            }
        }
        let op = match as_evanphx(&out, op)? {
            Some(op) => op,
            None => continue,
        };
        json_patch::patch(&mut out, std::slice::from_ref(&op)).map_err(|e| match e.kind {
            json_patch::PatchErrorKind::TestFailed => JsonPatchFailure::TestFailed(op.path().to_string()),
            _ => JsonPatchFailure::Failed(evanphx_words(&op, &e)),
        })?;
    }
    Ok(out)
}

/// `op` as kube's JSON patch library (evanphx/json-patch v4) applies it to `doc`, where it
/// parts from RFC 6902: a `replace` of a key an object lacks adds it; a `test` of such a key
/// fails (passes, and is `None`, for a test of `null`); removing one is an error of its own;
/// an object or list the path goes through that is missing is `doc is missing path`.
fn as_evanphx(doc: &Value, op: json_patch::PatchOperation) -> Result<Option<json_patch::PatchOperation>, JsonPatchFailure> {
    use json_patch::PatchOperation;
    let path = op.path().to_string();
    let Some((parent, key)) = path.rsplit_once('/') else { return Ok(Some(op)) };
    let key = key.replace("~1", "/").replace("~0", "~");
    let missing = match doc.pointer(parent) {
        None => true,
        Some(Value::Object(m)) if !m.contains_key(&key) => false,
        Some(_) => return Ok(Some(op)),
    };
    match (op, missing) {
        (PatchOperation::Replace(_), true) => {
            Err(JsonPatchFailure::Failed(format!("replace operation does not apply: doc is missing path: {path}: missing value")))
        }
        (PatchOperation::Replace(r), false) => Ok(Some(PatchOperation::Add(json_patch::AddOperation { path: r.path, value: r.value }))),
        (PatchOperation::Test(_), true) => Err(JsonPatchFailure::Failed(format!("test operation does not apply: is missing path: {path}: missing value"))),
        (PatchOperation::Test(t), false) if t.value.is_null() => Ok(None),
        (PatchOperation::Test(_), false) => Err(JsonPatchFailure::TestFailed(path)),
        (PatchOperation::Remove(_), false) => {
            Err(JsonPatchFailure::Failed(format!("error in remove for path: '{path}': Unable to remove nonexistent key: {key}: missing value")))
        }
        (op, _) => Ok(Some(op)),
    }
}

/// Why `op` did not apply, in the words of kube's JSON patch library (evanphx/json-patch).
fn evanphx_words(op: &json_patch::PatchOperation, e: &json_patch::PatchError) -> String {
    use json_patch::{PatchErrorKind, PatchOperation};
    let path = op.path().to_string();
    match (op, &e.kind) {
        (PatchOperation::Add(_), PatchErrorKind::InvalidPointer) => format!("add operation does not apply: doc is missing path: {path:?}: missing value"),
        (PatchOperation::Remove(_), PatchErrorKind::InvalidPointer) => format!("remove operation does not apply: doc is missing path: {path:?}: missing value"),
        (PatchOperation::Replace(_), PatchErrorKind::InvalidPointer) => format!("replace operation does not apply: doc is missing key: {path}: missing value"),
        (PatchOperation::Move(m), PatchErrorKind::InvalidFromPointer) => {
            format!("move operation does not apply: doc is missing from path: {}: missing value", m.from)
        }
        (PatchOperation::Copy(c), PatchErrorKind::InvalidFromPointer) => {
            format!("copy operation does not apply: doc is missing from path: {}: missing value", c.from)
        }
        _ => e.to_string(),
    }
}

/// The length of `v` written as JSON, without writing it anywhere.
pub fn json_size(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    serde_json::to_writer(&mut n, v).expect("JSON trees serialize");
    n.0
}

/// RFC 7386.
pub fn merge_patch(current: &Value, doc: &Value) -> Value {
    let mut out = current.clone();
    json_patch::merge(&mut out, doc);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn json_and_merge_patches() {
        let cur = json!({"metadata": {"labels": {"a": "1"}}, "data": {"k": "v"}});
        let p = json!([{"op": "replace", "path": "/data/k", "value": "w"}, {"op": "remove", "path": "/metadata/labels/a"}]);
        assert_eq!(json_patch(&cur, &p).unwrap(), json!({"metadata": {"labels": {}}, "data": {"k": "w"}}));
        let bad = json!([{"op": "test", "path": "/data/k", "value": "x"}]);
        let e = json_patch(&cur, &bad).unwrap_err();
        assert_eq!((e.code, e.reason), (422, "Invalid"));
        assert_eq!(merge_patch(&cur, &json!({"data": {"k": null, "n": "1"}})), json!({"metadata": {"labels": {"a": "1"}}, "data": {"n": "1"}}));
    }

    #[test]
    fn json_patches_apply_as_kubes_library_applies_them() {
        let cur = json!({"metadata": {"labels": {"a": "1"}}, "data": {"k": "v"}});
        let apply = |ops: Value| apply_json_patch(&cur, &ops);
        // A replace of a key the object lacks adds it; a test of one fails, or passes for null.
        assert_eq!(apply(json!([{"op": "replace", "path": "/data/n", "value": "w"}])).unwrap()["data"], json!({"k": "v", "n": "w"}));
        assert_eq!(apply(json!([{"op": "test", "path": "/data/n", "value": "w"}])), Err(JsonPatchFailure::TestFailed("/data/n".into())));
        assert_eq!(apply(json!([{"op": "test", "path": "/data/n", "value": null}])), Ok(cur.clone()));
        let failed = |ops: Value| match apply(ops) {
            Err(JsonPatchFailure::Failed(why)) => why,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            failed(json!([{"op": "remove", "path": "/data/n"}])),
            "error in remove for path: '/data/n': Unable to remove nonexistent key: n: missing value"
        );
        assert_eq!(failed(json!([{"op": "remove", "path": "/spec/n"}])), "remove operation does not apply: doc is missing path: \"/spec/n\": missing value");
        assert_eq!(
            failed(json!([{"op": "replace", "path": "/spec/n", "value": 1}])),
            "replace operation does not apply: doc is missing path: /spec/n: missing value"
        );
        assert_eq!(failed(json!([{"op": "test", "path": "/spec/n", "value": 1}])), "test operation does not apply: is missing path: /spec/n: missing value");
        assert_eq!(
            failed(json!([{"op": "add", "path": "/spec/n", "value": 1}])),
            "add operation does not apply: doc is missing path: \"/spec/n\": missing value"
        );
        assert_eq!(failed(json!([{"op": "move", "from": "/x", "path": "/y"}])), "move operation does not apply: doc is missing from path: /x: missing value");
    }

    #[test]
    fn copies_that_double_the_document_stop_at_the_copy_limit() {
        let cur = json!({"metadata": {"name": "x", "labels": {"a": "b".repeat(1000)}}});
        let ops: Vec<Value> = (0..40).map(|i| json!({"op": "copy", "from": "/metadata", "path": format!("/metadata/m{i}")})).collect();
        let Err(e) = json_patch(&cur, &Value::Array(ops)) else { panic!("40 doublings were applied") };
        assert_eq!((e.code, e.message.as_str()), (422, "the server rejected our request due to an error in our request"));
        let few: Vec<Value> = (0..3).map(|_| json!({"op": "copy", "from": "/metadata/labels", "path": "/metadata/m"})).collect();
        assert!(json_patch(&cur, &Value::Array(few)).is_ok());
    }
}

//! The three patch formats of `kubectl patch`: JSON patch (RFC 6902), JSON merge patch
//! (RFC 7386) and strategic merge patch, with kube-apiserver's errors.

mod strategic;

use serde_json::Value;

use crate::status::{ApiError, StatusCause, StatusDetails};

pub use strategic::strategic_merge_patch;

/// kube's cap on the operations of one JSON patch.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// A failure to apply a patch: 422 with the reason in a cause, as kube's
/// `NewGenericServerResponse(422, ...)` words it.
pub fn unprocessable(err: impl std::fmt::Display) -> ApiError {
    ApiError {
        details: Some(Box::new(StatusDetails {
            causes: vec![StatusCause { reason: "UnexpectedServerResponse".into(), message: err.to_string(), field: String::new() }],
            ..Default::default()
        })),
        ..ApiError::new(422, "Invalid", "the server rejected our request due to an error in our request")
    }
}

/// RFC 6902.
pub fn json_patch(current: &Value, doc: &Value) -> Result<Value, ApiError> {
    let ops = doc.as_array().ok_or_else(|| ApiError::bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch"))?;
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(ApiError::request_entity_too_large(&format!(
            "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
            ops.len()
        )));
    }
    let patch: json_patch::Patch = serde_json::from_value(doc.clone()).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let mut out = current.clone();
    json_patch::patch(&mut out, &patch).map_err(unprocessable)?;
    Ok(out)
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
}

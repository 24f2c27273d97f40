//! A webhook's answer as kube's REST client decodes it (client-go's `Result.Into`, through
//! the legacy codec): as JSON when its first byte other than a space is `{`, else as YAML
//! converted to JSON (a document that is `null` is an empty object); its `apiVersion` and
//! `kind` are read first, then the object. The errors are kube's words.

use serde_json::{Map, Value};

use crate::codec::go_json;

/// The object `body` holds, or the error of kube's decoding.
pub fn decode(body: &[u8]) -> Result<Map<String, Value>, String> {
    let json = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let tree =
        if json { go_json::parse(body)? } else { serde_norway::from_slice::<Value>(body).map_err(|e| format!("error converting YAML to JSON: yaml: {e}"))? };
    let object = match tree {
        Value::Null => Map::new(),
        Value::Object(object) => object,
        other => return Err(go_json::not_type_meta(&other)),
    };
    for k in ["apiVersion", "kind"] {
        if let Some(v) = object.get(k).filter(|v| !v.is_null() && !v.is_string()) {
            return Err(format!("couldn't get version/kind; json parse error: {}", go_json::mistyped(v, &format!(".{k}"), "string")));
        }
    }
    Ok(object)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::decode;

    #[test]
    fn answers_decode_as_kubes_client_decodes_them() {
        assert_eq!(decode(b" {\"kind\": \"AdmissionReview\"}"), Ok(json!({"kind": "AdmissionReview"}).as_object().unwrap().clone()));
        assert_eq!(
            decode(b"kind: ImageReview\nstatus: {allowed: true}\n"),
            Ok(json!({"kind": "ImageReview", "status": {"allowed": true}}).as_object().unwrap().clone())
        );
        assert_eq!(decode(b"null"), Ok(serde_json::Map::new()));
        let type_meta = "Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }";
        assert_eq!(decode(b"[]"), Err(format!("couldn't get version/kind; json parse error: json: cannot unmarshal array into {type_meta}")));
        assert_eq!(decode(b"not json"), Err(format!("couldn't get version/kind; json parse error: json: cannot unmarshal string into {type_meta}")));
        assert_eq!(
            decode(b"{\"response\": nul}"),
            Err("couldn't get version/kind; json parse error: invalid character '}' in literal null (expecting 'l')".into())
        );
        assert_eq!(
            decode(b"{\"apiVersion\": 1}"),
            Err("couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .apiVersion of type string".into())
        );
    }
}

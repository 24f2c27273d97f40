//! Content negotiation: `Content-Type` of request bodies and `Accept` of responses, with the
//! `as=Table` / `as=PartialObjectMetadata(List)` conversions kube-apiserver offers.

use std::collections::BTreeMap;

use super::{Format, IncludeTable, Output, View};
use crate::registry::PatchType;
use crate::status::ApiError;

/// The media types kube lists when it refuses one.
pub const SUPPORTED: &[&str] = &["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"];
/// What custom resources are read and written as.
pub const UNSTRUCTURED: &[&str] = &["application/json", "application/yaml"];

/// One entry of an `Accept` header.
#[derive(Clone, Debug, PartialEq)]
pub struct MediaRange {
    pub mime: String,
    pub params: BTreeMap<String, String>,
    q: f32,
}

impl MediaRange {
    pub fn param(&self, k: &str) -> Option<&str> {
        self.params.get(k).map(String::as_str)
    }
}

/// Parses a media type list, most preferred first (by `q`, then order).
pub fn parse_accept(header: &str) -> Vec<MediaRange> {
    let mut out: Vec<MediaRange> = header
        .split(',')
        .filter_map(|part| {
            let mut pieces = part.split(';');
            let mime = pieces.next()?.trim().to_ascii_lowercase();
            if mime.is_empty() {
                return None;
            }
            let mut params = BTreeMap::new();
            let mut q = 1.0;
            for p in pieces {
                if let Some((k, v)) = p.split_once('=') {
                    let k = k.trim().to_ascii_lowercase();
                    let v = v.trim().trim_matches('"').to_string();
                    if k == "q" {
                        q = v.parse().unwrap_or(1.0);
                    } else {
                        params.insert(k, v);
                    }
                }
            }
            Some(MediaRange { mime, params, q })
        })
        .collect();
    out.sort_by(|a, b| b.q.partial_cmp(&a.q).unwrap_or(std::cmp::Ordering::Equal));
    out
}

fn format_of(mime: &str) -> Option<Format> {
    match mime {
        "application/json" | "*/*" | "application/*" | "json" => Some(Format::Json),
        "application/yaml" | "application/x-yaml" | "text/yaml" => Some(Format::Yaml),
        "application/vnd.kubernetes.protobuf" => Some(Format::Protobuf),
        _ => None,
    }
}

/// What a response carries: one object, or a list or watch of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Object,
    List,
    Watch,
}

/// Picks the response encoding and view from `Accept`; 406 when none is possible.
/// `include_object` is the `includeObject` parameter for tables; without `objects_in_protobuf`
/// (custom resources) objects are not written as protobuf, only their metadata.
pub fn negotiate_output(accept: Option<&str>, target: Target, include_object: IncludeTable, objects_in_protobuf: bool) -> Result<Output, ApiError> {
    let accept = accept.map(str::trim).filter(|a| !a.is_empty()).unwrap_or("application/json");
    for r in parse_accept(accept) {
        let Some(format) = format_of(&r.mime) else { continue };
        if target == Target::Watch && format == Format::Yaml {
            continue;
        }
        let view = match r.param("as") {
            None => View::Object,
            Some(kind) => {
                let group = r.param("g").unwrap_or("");
                let version = r.param("v").unwrap_or("");
                if group != "meta.k8s.io" || !(version == "v1" || version == "v1beta1") {
                    continue;
                }
                match (kind, target) {
                    ("Table", _) if format != Format::Protobuf => View::Table(include_object),
                    ("PartialObjectMetadata", Target::Object) => View::Metadata,
                    ("PartialObjectMetadataList", Target::List | Target::Watch) => View::Metadata,
                    ("PartialObjectMetadata", Target::Watch) => View::Metadata,
                    _ => continue,
                }
            }
        };
        if format == Format::Protobuf && view == View::Object && !objects_in_protobuf {
            continue;
        }
        return Ok(Output { format, view });
    }
    Err(ApiError::not_acceptable(if objects_in_protobuf { SUPPORTED } else { UNSTRUCTURED }))
}

/// The encoding of a request body.
pub fn request_format(content_type: Option<&str>) -> Result<Format, ApiError> {
    let mime = content_type.and_then(|c| c.split(';').next()).map(|m| m.trim().to_ascii_lowercase()).unwrap_or_default();
    match mime.as_str() {
        "" | "application/json" => Ok(Format::Json),
        "application/yaml" | "application/x-yaml" | "text/yaml" => Ok(Format::Yaml),
        "application/vnd.kubernetes.protobuf" => Ok(Format::Protobuf),
        _ => Err(ApiError::unsupported_media_type(SUPPORTED)),
    }
}

/// The patch type of a PATCH body.
pub fn patch_type(content_type: Option<&str>, force: bool) -> Result<PatchType, ApiError> {
    let mime = content_type.and_then(|c| c.split(';').next()).map(|m| m.trim().to_ascii_lowercase()).unwrap_or_default();
    Ok(match mime.as_str() {
        "application/json-patch+json" => PatchType::Json,
        "application/merge-patch+json" => PatchType::Merge,
        "application/strategic-merge-patch+json" => PatchType::Strategic,
        "application/apply-patch+yaml" => PatchType::Apply { force },
        _ => return Err(ApiError::patch_type_not_consumed()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_get_asks_for_tables() {
        let a = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        let o = negotiate_output(Some(a), Target::List, IncludeTable::Metadata, true).unwrap();
        assert_eq!(o, Output { format: Format::Json, view: View::Table(IncludeTable::Metadata) });
    }

    #[test]
    fn metadata_informers_and_protobuf() {
        let a = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        let o = negotiate_output(Some(a), Target::List, IncludeTable::Metadata, true).unwrap();
        assert_eq!(o, Output { format: Format::Protobuf, view: View::Metadata });
        let o = negotiate_output(Some("application/vnd.kubernetes.protobuf,application/json"), Target::Object, IncludeTable::Metadata, true).unwrap();
        assert_eq!(o.format, Format::Protobuf);
        assert_eq!(negotiate_output(Some("text/html"), Target::Object, IncludeTable::Metadata, true).unwrap_err().code, 406);
        assert_eq!(negotiate_output(None, Target::Object, IncludeTable::Metadata, true).unwrap(), Output::JSON);
    }
}

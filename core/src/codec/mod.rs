//! Wire formats: JSON, YAML and Kubernetes protobuf, the views of an object a client may ask
//! for (the object, a Table, its metadata), and content negotiation.

pub mod go_json;
pub mod json;
pub mod negotiate;
pub mod protobuf;
pub mod strict;

use bytes::Bytes;
use serde_json::Value;

use crate::schema::schema;
use crate::table::IncludeObject;

pub const JSON: &str = "application/json";
pub const YAML: &str = "application/yaml";
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// An encoding of objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Format {
    Json,
    Yaml,
    Protobuf,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => JSON,
            Format::Yaml => YAML,
            Format::Protobuf => PROTOBUF,
        }
    }

    /// The content type of a watch stream in this format.
    pub fn stream_content_type(self) -> &'static str {
        match self {
            Format::Protobuf => "application/vnd.kubernetes.protobuf;stream=watch",
            _ => JSON,
        }
    }
}

/// What a client asked to see of each object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum View {
    Object,
    /// `as=Table`: server-side printed rows.
    Table(IncludeTable),
    /// `as=PartialObjectMetadata` / `PartialObjectMetadataList`.
    Metadata,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IncludeTable {
    None,
    Metadata,
    Object,
}

impl From<IncludeObject> for IncludeTable {
    fn from(i: IncludeObject) -> Self {
        match i {
            IncludeObject::None => IncludeTable::None,
            IncludeObject::Metadata => IncludeTable::Metadata,
            IncludeObject::Object => IncludeTable::Object,
        }
    }
}

impl From<IncludeTable> for IncludeObject {
    fn from(i: IncludeTable) -> Self {
        match i {
            IncludeTable::None => IncludeObject::None,
            IncludeTable::Metadata => IncludeObject::Metadata,
            IncludeTable::Object => IncludeObject::Object,
        }
    }
}

/// The negotiated response: encoding and view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Output {
    pub format: Format,
    pub view: View,
}

impl Output {
    pub const JSON: Output = Output { format: Format::Json, view: View::Object };
}

/// Encodes one object (JSON tree with `apiVersion`/`kind`) in a format, as the body of a
/// response: JSON as kube writes it, ending with a newline as Go's `json.Encoder` ends it.
pub fn encode(value: &Value, format: Format) -> Result<Bytes, String> {
    Ok(match format {
        Format::Json => {
            let mut out = json::to_vec(value);
            out.push(b'\n');
            Bytes::from(out)
        }
        Format::Yaml => Bytes::from(serde_norway::to_string(value).map_err(|e| e.to_string())?),
        Format::Protobuf => Bytes::from(protobuf::encode(schema(), value)?),
    })
}

/// Decodes a request body in a format into a JSON tree.
pub fn decode(body: &[u8], format: Format) -> Result<Value, String> {
    match format {
        Format::Json => serde_json::from_slice(body).map_err(|e| e.to_string()),
        Format::Yaml => {
            let v: Value = serde_norway::from_slice(body).map_err(|e| format!("error converting YAML to JSON: {e}"))?;
            Ok(v)
        }
        Format::Protobuf => protobuf::decode(schema(), body),
    }
}

//! Watch stream frames: one event in JSON (`{"type":...,"object":...}` lines) or protobuf
//! (length-prefixed `metav1.WatchEvent` messages), for each view a watcher may ask for.

use bytes::{BufMut, Bytes, BytesMut};
use jiff::Timestamp;
use serde_json::{Value, json};

use std::sync::Arc;

use super::object::{CachedObject, Shared};
use crate::catalog::Resource;
use crate::codec::{Format, IncludeTable, Output, View, protobuf};
use crate::kv::Revision;
use crate::schema::schema;
use crate::status::ApiError;
use crate::table;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
            EventType::Bookmark => "BOOKMARK",
            EventType::Error => "ERROR",
        }
    }
}

/// A frame around object bytes already in the stream's format.
fn frame(format: Format, ty: EventType, object: &[u8]) -> Bytes {
    match format {
        Format::Protobuf => {
            let mut raw_ext = Vec::with_capacity(object.len() + 8);
            put_len(&mut raw_ext, 1, object);
            let mut ev = Vec::with_capacity(raw_ext.len() + 16);
            put_len(&mut ev, 1, ty.as_str().as_bytes());
            put_len(&mut ev, 2, &raw_ext);
            let mut out = BytesMut::with_capacity(ev.len() + 4);
            out.put_u32(ev.len() as u32);
            out.put_slice(&ev);
            out.freeze()
        }
        _ => {
            let mut out = BytesMut::with_capacity(object.len() + 32);
            out.put_slice(b"{\"type\":\"");
            out.put_slice(ty.as_str().as_bytes());
            out.put_slice(b"\",\"object\":");
            out.put_slice(object);
            out.put_slice(b"}\n");
            out.freeze()
        }
    }
}

fn put_len(out: &mut Vec<u8>, tag: u32, b: &[u8]) {
    prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, out);
    prost::encoding::encode_varint(b.len() as u64, out);
    out.extend_from_slice(b);
}

fn encode_value(v: &Value, format: Format) -> Result<Bytes, String> {
    match format {
        Format::Protobuf => protobuf::encode(schema(), v).map(Bytes::from),
        _ => Ok(Bytes::from(crate::codec::json::to_vec(v))),
    }
}

/// A Table of one object, with or without column definitions.
pub fn table_of(res: &Resource, objects: &[Value], include: IncludeTable, headers: bool, rv: &str, now: Timestamp) -> Value {
    let columns: Value = if headers { Value::Array(res.strategy.column_definitions()) } else { Value::Null };
    let rows: Vec<Value> = objects.iter().map(|o| table::row_json(res.strategy.row(o, now), o, include.into())).collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv},
        "columnDefinitions": columns,
        "rows": rows,
    })
}

/// The frame of one event for a watcher's output. `headers` asks tables for their columns.
pub fn event_frame(res: &Resource, output: Output, ty: EventType, obj: &CachedObject, headers: bool, now: Timestamp) -> Result<Bytes, String> {
    let bytes = match output.view {
        View::Object => match output.format {
            Format::Protobuf => obj.proto()?,
            _ => obj.json.clone(),
        },
        View::Metadata => encode_value(&table::partial_metadata(&obj.value()), output.format)?,
        View::Table(include) => {
            let v = obj.value();
            let t = table_of(res, std::slice::from_ref(&v), include, headers, &obj.rv.to_string(), now);
            encode_value(&t, Format::Json)?
        }
    };
    Ok(frame(output.format, ty, &bytes))
}

/// The frames a watch starts with (its initial objects, or the events it resumes from, and the
/// bookmark that ends initial events), made one at a time as the connection writes them.
/// It holds the cached objects themselves, shared with the cache, so a watcher that does not
/// read holds a pointer per object rather than a copy of the collection.
pub struct Backlog {
    res: Arc<Resource>,
    output: Output,
    events: std::vec::IntoIter<(EventType, Shared)>,
    /// The first table frame carries the column definitions.
    headers: bool,
    end: Option<Bytes>,
    now: Timestamp,
}

impl Backlog {
    pub fn new(res: Arc<Resource>, output: Output, events: Vec<(EventType, Shared)>, end: Option<Bytes>, now: Timestamp) -> Backlog {
        let headers = matches!(output.view, View::Table(_));
        Backlog { res, output, events: events.into_iter(), headers, end, now }
    }

    /// Whether there is nothing to send.
    pub fn is_empty(&self) -> bool {
        self.events.len() == 0 && self.end.is_none()
    }

    /// Whether a table frame with column definitions is among the frames (a live frame after
    /// them then needs none).
    pub fn sends_headers(&self) -> bool {
        self.headers && self.events.len() > 0
    }
}

impl Iterator for Backlog {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        for (ty, obj) in self.events.by_ref() {
            if let Ok(frame) = event_frame(&self.res, self.output, ty, &obj, self.headers, self.now) {
                self.headers = false;
                return Some(frame);
            }
        }
        self.end.take()
    }
}

impl std::fmt::Debug for Backlog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Backlog({} events)", self.events.len())
    }
}

/// A bookmark: an empty object of the kind carrying only a resourceVersion.
pub fn bookmark_frame(res: &Resource, output: Output, rv: Revision, initial_events_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
    if initial_events_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let (api_version, kind) = match output.view {
        View::Metadata => ("meta.k8s.io/v1".to_string(), "PartialObjectMetadata".to_string()),
        _ => (res.info.api_version(), res.info.kind.to_string()),
    };
    let obj = json!({"kind": kind, "apiVersion": api_version, "metadata": metadata});
    let bytes = match output.format {
        Format::Protobuf => protobuf::encode(schema(), &obj).map(Bytes::from).unwrap_or_default(),
        _ => Bytes::from(crate::codec::json::to_vec(&obj)),
    };
    frame(output.format, EventType::Bookmark, &bytes)
}

/// An `ERROR` event carrying a Status.
pub fn error_frame(output: Output, err: &ApiError) -> Bytes {
    let status = err.to_status();
    let bytes = match output.format {
        Format::Protobuf => protobuf::encode(schema(), &status).map(Bytes::from).unwrap_or_default(),
        _ => Bytes::from(crate::codec::json::to_vec(&status)),
    };
    frame(output.format, EventType::Error, &bytes)
}

//! Response bodies: one object in the negotiated format and view, errors as `Status`, and
//! lists streamed page by page from shared, pre-encoded objects.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::cache::{CachedObject, Shared, table_of};
use crate::catalog::Resource;
use crate::codec::{self, Format, IncludeTable, Output, View, protobuf};
use crate::kv::Revision;
use crate::schema::schema;
use crate::status::ApiError;
use crate::table;

/// A response head: status and headers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn new(status: u16, content_type: &str) -> Head {
        Head { status, headers: vec![("Content-Type".into(), content_type.to_string())] }
    }

    pub fn with(mut self, name: &str, value: impl Into<String>) -> Head {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    pub fn content_type(&self) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("content-type")).map(|(_, v)| v.as_str())
    }
}

/// The head of an error's answer: its code, and `Retry-After` when the error says when to try
/// again, as kube's `ErrorNegotiated` writes it.
pub fn error_head(e: &crate::status::ApiError, content_type: &str) -> Head {
    let head = Head::new(e.code, content_type);
    match e.details.as_ref().map(|d| d.retry_after_seconds).filter(|s| *s > 0) {
        Some(secs) => head.with("Retry-After", secs.to_string()),
        None => head,
    }
}

/// The media type kube answers with for an output.
pub fn content_type(output: Output, list: bool) -> String {
    let base = output.format.content_type();
    match output.view {
        View::Object => base.to_string(),
        View::Table(_) => format!("{base};as=Table;v=v1;g=meta.k8s.io"),
        View::Metadata => format!("{base};as={};v=v1;g=meta.k8s.io", if list { "PartialObjectMetadataList" } else { "PartialObjectMetadata" }),
    }
}

/// One object as the client asked to see it.
pub fn object_body(res: &Resource, obj: &Value, output: Output, now: Timestamp) -> Result<(String, Bytes), ApiError> {
    let encoded = match output.view {
        View::Object => codec::encode(obj, output.format),
        View::Metadata => codec::encode(&table::partial_metadata(obj), output.format),
        View::Table(include) => {
            let rv = crate::meta::resource_version(obj).to_string();
            codec::encode(&table_of(res, std::slice::from_ref(obj), include, true, &rv, now), Format::Json)
        }
    };
    let bytes = encoded.map_err(ApiError::internal)?;
    Ok((content_type(output, false), bytes))
}

/// A `Status` (error or success) in a format; protobuf when the client reads protobuf.
pub fn status_body(status: &Value, format: Format) -> (String, Bytes) {
    let format = if format == Format::Yaml { Format::Json } else { format };
    match codec::encode(status, format) {
        Ok(b) => (format.content_type().to_string(), b),
        Err(_) => ("application/json".into(), Bytes::from(codec::json::to_vec(status))),
    }
}

/// A page of a list: the items and what the list metadata says about the rest.
#[derive(Clone, Debug, Default)]
pub struct Page {
    pub items: Vec<Shared>,
    pub revision: Revision,
    pub continue_token: Option<String>,
    pub remaining: Option<i64>,
}

/// Objects per streamed chunk.
const CHUNK: usize = 64;

/// A list body, produced chunk by chunk: memory is one chunk, whatever the list's size.
pub struct ListBody {
    res: Arc<Resource>,
    output: Output,
    items: VecDeque<Shared>,
    /// Protobuf lists: the items' messages, encoded up front to size the envelope.
    proto_items: Option<VecDeque<Bytes>>,
    first: bool,
    head: Option<Bytes>,
    tail: Option<Bytes>,
    now: Timestamp,
}

/// List metadata as kube writes it (`ListMeta`'s field order).
fn list_meta_json(meta: &Value) -> String {
    let mut out = Vec::new();
    codec::json::write_as(&mut out, "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta", meta);
    String::from_utf8(out).expect("JSON is UTF-8")
}

fn list_meta(page: &Page) -> Value {
    let mut m = json!({"resourceVersion": page.revision.to_string()});
    if let Some(c) = &page.continue_token {
        m["continue"] = json!(c);
    }
    if let Some(r) = page.remaining {
        m["remainingItemCount"] = json!(r);
    }
    m
}

impl ListBody {
    /// The body of `page` for `output`; YAML lists are encoded whole.
    pub fn new(res: Arc<Resource>, output: Output, page: Page, now: Timestamp) -> Result<ListBody, ApiError> {
        let meta = list_meta(&page);
        let (kind, api_version) = match output.view {
            View::Metadata => ("PartialObjectMetadataList".to_string(), "meta.k8s.io/v1".to_string()),
            View::Table(_) => ("Table".to_string(), "meta.k8s.io/v1".to_string()),
            View::Object => (res.info.list_kind(), res.info.api_version()),
        };
        let mut body = ListBody { res, output, items: page.items.into_iter().collect(), proto_items: None, first: true, head: None, tail: None, now };
        match (output.format, output.view) {
            (Format::Yaml, _) => {
                let objects: Vec<Shared> = body.items.drain(..).collect();
                let items: Vec<Value> = objects
                    .iter()
                    .map(|o| {
                        let mut item = body.view_of(o);
                        if output.view == View::Object
                            && let Some(m) = item.as_object_mut()
                        {
                            m.remove("kind");
                            m.remove("apiVersion");
                        }
                        item
                    })
                    .collect();
                let whole = match output.view {
                    View::Table(include) => {
                        let rv = meta["resourceVersion"].as_str().unwrap_or_default().to_string();
                        table_of(&body.res, &items, include, true, &rv, now)
                    }
                    _ => json!({"apiVersion": api_version, "kind": kind, "metadata": meta, "items": items}),
                };
                body.head = Some(codec::encode(&whole, Format::Yaml).map_err(ApiError::internal)?);
            }
            (Format::Protobuf, _) => {
                let items: Vec<Bytes> = body.items.iter().map(|o| body.proto_item(o)).collect::<Result<_, _>>()?;
                let mut list_meta_msg = Vec::new();
                let list_meta_def = schema().get("io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta").expect("ListMeta");
                list_meta_msg.extend(protobuf::encode_message(schema(), list_meta_def, &meta).map_err(ApiError::internal)?);
                let mut raw_len = field_len(list_meta_msg.len());
                raw_len += items.iter().map(|i| field_len(i.len())).sum::<usize>();
                // Envelope and list message up to the items, which follow one chunk at a time.
                let mut type_meta = Vec::new();
                put_len(&mut type_meta, 1, api_version.as_bytes());
                put_len(&mut type_meta, 2, kind.as_bytes());
                let mut head = BytesMut::new();
                head.extend_from_slice(protobuf::MAGIC);
                let mut v = Vec::new();
                put_len(&mut v, 1, &type_meta);
                prost::encoding::encode_key(2, prost::encoding::WireType::LengthDelimited, &mut v);
                prost::encoding::encode_varint(raw_len as u64, &mut v);
                put_len(&mut v, 1, &list_meta_msg);
                head.extend_from_slice(&v);
                body.head = Some(head.freeze());
                body.items.clear();
                body.proto_items = Some(items.into());
            }
            (_, View::Table(_)) => {
                let columns: Value = Value::Array(body.res.strategy.column_definitions());
                let head = format!(
                    "{{\"kind\":\"Table\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{},\"columnDefinitions\":{},\"rows\":[",
                    list_meta_json(&meta),
                    columns
                );
                body.head = Some(Bytes::from(head));
                body.tail = Some(Bytes::from_static(b"]}\n"));
            }
            _ => {
                let head = format!("{{\"kind\":{},\"apiVersion\":{},\"metadata\":{},\"items\":[", json!(kind), json!(api_version), list_meta_json(&meta));
                body.head = Some(Bytes::from(head));
                body.tail = Some(Bytes::from_static(b"]}\n"));
            }
        }
        Ok(body)
    }

    fn view_of(&self, o: &CachedObject) -> Value {
        match self.output.view {
            View::Metadata => table::partial_metadata(&o.value()),
            _ => o.value(),
        }
    }

    fn proto_item(&self, o: &CachedObject) -> Result<Bytes, ApiError> {
        let enveloped = match self.output.view {
            View::Metadata => Bytes::from(protobuf::encode(schema(), &table::partial_metadata(&o.value())).map_err(ApiError::internal)?),
            _ => o.proto().map_err(ApiError::internal)?,
        };
        let (_, _, raw) = protobuf::open_envelope(&enveloped).map_err(ApiError::internal)?;
        Ok(Bytes::copy_from_slice(raw))
    }

    /// The next piece of the body, or `None` when it is all out.
    pub fn next_chunk(&mut self) -> Option<Bytes> {
        if let Some(h) = self.head.take() {
            return Some(h);
        }
        if let Some(items) = self.proto_items.as_mut() {
            if items.is_empty() {
                return None;
            }
            let mut out = Vec::new();
            for _ in 0..CHUNK {
                let Some(i) = items.pop_front() else { break };
                put_len(&mut out, 2, &i);
            }
            return Some(Bytes::from(out));
        }
        if self.items.is_empty() {
            return self.tail.take();
        }
        // Sized up front for objects served as they are cached: growing by doubling copied the
        // bytes once more (a tenth of a large LIST's time went to copying them).
        let size = match self.output.view {
            View::Object => self.items.iter().take(CHUNK).map(|o| o.json.len() + 1).sum(),
            View::Metadata | View::Table(_) => 0,
        };
        let mut out = BytesMut::with_capacity(size);
        for _ in 0..CHUNK {
            let Some(o) = self.items.pop_front() else { break };
            if !self.first {
                out.extend_from_slice(b",");
            }
            self.first = false;
            match self.output.view {
                // kube's list items carry no type meta: the cached object without its leading
                // `kind` and `apiVersion`, copied once.
                View::Object => match type_meta_end(&o.json) {
                    Some(rest) => {
                        out.extend_from_slice(b"{");
                        out.extend_from_slice(&o.json[rest..]);
                    }
                    None => out.extend_from_slice(&o.json),
                },
                View::Metadata => out.extend_from_slice(&codec::json::to_vec(&table::partial_metadata(&o.value()))),
                View::Table(include) => {
                    let v = o.value();
                    let row = table::row_json(self.res.strategy.row(&v, self.now), &v, IncludeTable::into(include));
                    out.extend_from_slice(&serde_json::to_vec(&row).expect("JSON trees serialize"));
                }
            }
        }
        Some(out.freeze())
    }
}

/// Where an object's members after its leading `"kind":"…","apiVersion":"…"` start (the
/// next member, or the closing brace), for objects written as kube writes them; `None` for
/// bytes that do not start so.
fn type_meta_end(json: &[u8]) -> Option<usize> {
    let member = |at: usize, key: &[u8]| -> Option<usize> {
        let rest = json.get(at..)?.strip_prefix(key)?;
        let end = rest.iter().position(|&c| c == b'"' || c == b'\\')?;
        (rest[end] == b'"').then_some(at + key.len() + end + 1)
    };
    let after_kind = member(1, br#""kind":""#).filter(|_| json.first() == Some(&b'{'))?;
    let after_version = json.get(after_kind).filter(|&&c| c == b',').and_then(|_| member(after_kind + 1, br#""apiVersion":""#))?;
    match json.get(after_version) {
        Some(b',') => Some(after_version + 1),
        Some(b'}') => Some(after_version),
        _ => None,
    }
}

fn field_len(n: usize) -> usize {
    1 + prost::encoding::encoded_len_varint(n as u64) + n
}

fn put_len(out: &mut Vec<u8>, tag: u32, b: &[u8]) {
    prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, out);
    prost::encoding::encode_varint(b.len() as u64, out);
    out.extend_from_slice(b);
}

/// The texts of a response's `Warning` headers, as kube's recorder keeps them: each once,
/// empty ones left out; once they pass 4096 characters in all, each is cut to 256, and those
/// that still do not fit are dropped.
pub(super) fn warning_texts(warnings: &[String]) -> Vec<String> {
    const MAX_TOTAL: usize = 4096;
    const MAX_EACH: usize = 256;
    let cut = |w: &str| w.chars().take(MAX_EACH).collect::<String>();
    // A write may carry a warning per member of a list (tens of thousands): what is kept is
    // also in a set, and its size counted as it grows.
    let mut out: Vec<String> = Vec::new();
    let mut kept: std::collections::BTreeSet<String> = Default::default();
    let mut total = 0;
    let mut truncated = false;
    for w in warnings.iter().filter(|w| !w.is_empty()) {
        if kept.contains(w.as_str()) {
            continue;
        }
        if !truncated && total + w.chars().count() > MAX_TOTAL {
            truncated = true;
            out = out.iter().map(|o| cut(o)).collect();
            kept = out.iter().cloned().collect();
            total = out.iter().map(|o| o.chars().count()).sum();
        }
        let w = if truncated { cut(w) } else { w.clone() };
        let size = w.chars().count();
        if total + size <= MAX_TOTAL && kept.insert(w.clone()) {
            total += size;
            out.push(w);
        }
    }
    out
}

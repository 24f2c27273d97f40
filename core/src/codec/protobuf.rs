//! Kubernetes' protobuf wire format for built-in kinds, transcoded to and from JSON trees using the
//! field numbers in the schema: the `k8s\0` magic, a `runtime.Unknown` envelope carrying the type
//! meta, and the kind's message.
//!
//! Go writes every non-pointer field, so a zero value on the wire may be a field the client never
//! set. Decoding therefore leaves out empty strings of optional fields and the zero counters and
//! flags Go's JSON encoder omits (`OMIT_ZERO`), and keeps the zeros of pointer fields, which mean
//! something (`replicas: 0`, `automountServiceAccountToken: false`).

use base64::Engine;
use bytes::Buf;
use prost::encoding::{WireType, decode_key, decode_varint, encode_key, encode_varint};
use serde_json::{Map, Value};

use crate::schema::{Definition, Property, ProtoKind, ProtoLayout, Schema, Slot, Type};

/// The prefix of every protobuf-encoded Kubernetes object.
pub const MAGIC: &[u8] = b"k8s\0";

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Optional non-pointer scalars whose zero Go's JSON encoder leaves out (`omitempty`).
const OMIT_ZERO: &[(&str, &str)] = &[
    ("meta.v1.ObjectMeta", "generation"),
    ("meta.v1.Condition", "observedGeneration"),
    ("core.v1.PodSpec", "hostNetwork"),
    ("core.v1.PodSpec", "hostPID"),
    ("core.v1.PodSpec", "hostIPC"),
    ("core.v1.Container", "stdin"),
    ("core.v1.Container", "stdinOnce"),
    ("core.v1.Container", "tty"),
    ("core.v1.EphemeralContainer", "stdin"),
    ("core.v1.EphemeralContainer", "stdinOnce"),
    ("core.v1.EphemeralContainer", "tty"),
    ("core.v1.ContainerPort", "hostPort"),
    ("core.v1.VolumeMount", "readOnly"),
    ("core.v1.Probe", "initialDelaySeconds"),
    ("core.v1.Probe", "timeoutSeconds"),
    ("core.v1.Probe", "periodSeconds"),
    ("core.v1.Probe", "successThreshold"),
    ("core.v1.Probe", "failureThreshold"),
    ("core.v1.ServicePort", "nodePort"),
    ("core.v1.ServiceSpec", "publishNotReadyAddresses"),
    ("core.v1.ServiceSpec", "healthCheckNodePort"),
    ("core.v1.NodeSpec", "unschedulable"),
    ("core.v1.Event", "count"),
    ("core.v1.EventSeries", "count"),
    ("core.v1.ContainerImage", "sizeBytes"),
    ("core.v1.ContainerStateTerminated", "signal"),
    ("core.v1.PodStatus", "observedGeneration"),
    ("core.v1.PodCondition", "observedGeneration"),
    ("apps.v1.DeploymentSpec", "minReadySeconds"),
    ("apps.v1.DeploymentSpec", "paused"),
    ("apps.v1.DeploymentStatus", "observedGeneration"),
    ("apps.v1.DeploymentStatus", "replicas"),
    ("apps.v1.DeploymentStatus", "updatedReplicas"),
    ("apps.v1.DeploymentStatus", "readyReplicas"),
    ("apps.v1.DeploymentStatus", "availableReplicas"),
    ("apps.v1.DeploymentStatus", "unavailableReplicas"),
    ("apps.v1.ReplicaSetSpec", "minReadySeconds"),
    ("apps.v1.ReplicaSetStatus", "fullyLabeledReplicas"),
    ("apps.v1.ReplicaSetStatus", "readyReplicas"),
    ("apps.v1.ReplicaSetStatus", "availableReplicas"),
    ("apps.v1.ReplicaSetStatus", "observedGeneration"),
    ("apps.v1.StatefulSetSpec", "minReadySeconds"),
    ("apps.v1.StatefulSetStatus", "observedGeneration"),
    ("apps.v1.StatefulSetStatus", "readyReplicas"),
    ("apps.v1.StatefulSetStatus", "currentReplicas"),
    ("apps.v1.StatefulSetStatus", "updatedReplicas"),
    ("apps.v1.StatefulSetStatus", "availableReplicas"),
    ("apps.v1.DaemonSetSpec", "minReadySeconds"),
    ("apps.v1.DaemonSetStatus", "observedGeneration"),
    ("apps.v1.DaemonSetStatus", "updatedNumberScheduled"),
    ("apps.v1.DaemonSetStatus", "numberAvailable"),
    ("apps.v1.DaemonSetStatus", "numberUnavailable"),
    ("batch.v1.JobStatus", "active"),
    ("batch.v1.JobStatus", "succeeded"),
    ("batch.v1.JobStatus", "failed"),
    ("events.v1.Event", "deprecatedCount"),
];

fn omits_zero(def: &Definition, field: &str) -> bool {
    OMIT_ZERO.iter().any(|(d, f)| *f == field && def.name.ends_with(d))
}

// ---------------------------------------------------------------------------------------------
// Envelope

/// Encodes `value` (an object whose `apiVersion`/`kind` name a built-in kind) in the envelope.
pub fn encode(schema: &Schema, value: &Value) -> Result<Vec<u8>, String> {
    let api_version = value.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or_default();
    let (group, version) = split_api_version(api_version);
    let def = schema.for_gvk(group, version, kind).filter(|d| d.proto).ok_or_else(|| {
        format!("object {api_version}/{kind} does not implement the protobuf marshalling interface and cannot be encoded to a protobuf message")
    })?;
    let raw = encode_message(schema, def, value)?;
    Ok(envelope(api_version, kind, &raw))
}

/// `k8s\0` + `runtime.Unknown{typeMeta, raw}`.
pub fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::with_capacity(api_version.len() + kind.len() + 4);
    put_bytes(&mut type_meta, 1, api_version.as_bytes());
    put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = Vec::with_capacity(raw.len() + type_meta.len() + 16);
    out.extend_from_slice(MAGIC);
    put_bytes(&mut out, 1, &type_meta);
    put_bytes(&mut out, 2, raw);
    out
}

/// Splits the envelope: `(apiVersion, kind, raw message)`.
pub fn open_envelope(data: &[u8]) -> Result<(String, String, &[u8]), String> {
    let body = data.strip_prefix(MAGIC).ok_or("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]")?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for field in Fields::new(body) {
        let (tag, value) = field?;
        match (tag, value) {
            (1, Wire::Len(tm)) => {
                for f in Fields::new(tm) {
                    match f? {
                        (1, Wire::Len(b)) => api_version = utf8(b)?,
                        (2, Wire::Len(b)) => kind = utf8(b)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Len(b)) => raw = b,
            _ => {}
        }
    }
    Ok((api_version, kind, raw))
}

/// Decodes an enveloped object to JSON, with `apiVersion` and `kind` set.
pub fn decode(schema: &Schema, data: &[u8]) -> Result<Value, String> {
    let (api_version, kind, raw) = open_envelope(data)?;
    let (group, version) = split_api_version(&api_version);
    let def =
        schema.for_gvk(group, version, &kind).filter(|d| d.proto).ok_or_else(|| format!("no kind \"{kind}\" is registered for version \"{api_version}\""))?;
    let mut obj = decode_message(schema, def, raw)?;
    obj.insert("apiVersion".into(), Value::String(api_version));
    obj.insert("kind".into(), Value::String(kind));
    Ok(Value::Object(obj))
}

pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding

fn put_bytes(out: &mut Vec<u8>, tag: u32, b: &[u8]) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(b.len() as u64, out);
    out.extend_from_slice(b);
}

fn put_varint(out: &mut Vec<u8>, tag: u32, v: u64) {
    encode_key(tag, WireType::Varint, out);
    encode_varint(v, out);
}

/// Encodes the message of `def` (no envelope) from a JSON object.
pub fn encode_message(schema: &Schema, def: &Definition, value: &Value) -> Result<Vec<u8>, String> {
    let obj = value.as_object().ok_or_else(|| format!("{} must be an object", def.short_name()))?;
    let mut out = Vec::new();
    encode_layout(schema, def, &def.layout, obj, &mut out)?;
    Ok(out)
}

fn encode_layout(schema: &Schema, def: &Definition, layout: &ProtoLayout, obj: &Map<String, Value>, out: &mut Vec<u8>) -> Result<(), String> {
    for (tag, slot) in &layout.fields {
        match slot {
            Slot::Property(name) => {
                if let (Some(v), Some(prop)) = (obj.get(name), def.properties.get(name)) {
                    encode_field(schema, prop, *tag, v, out)?;
                }
            }
            Slot::Embedded(inner) => {
                let mut buf = Vec::new();
                encode_layout(schema, def, inner, obj, &mut buf)?;
                put_bytes(out, *tag, &buf);
            }
        }
    }
    Ok(())
}

fn encode_field(schema: &Schema, prop: &Property, tag: u32, v: &Value, out: &mut Vec<u8>) -> Result<(), String> {
    let pf = prop.proto.as_ref().expect("only fields with numbers are laid out");
    match (&pf.kind, v) {
        (_, Value::Null) => Ok(()),
        (ProtoKind::Map(values), Value::Object(m)) => {
            let value_type = match &prop.ty {
                Type::Map { values, .. } => values.as_ref(),
                _ => &Type::Any,
            };
            for (k, item) in m {
                let mut entry = Vec::new();
                put_bytes(&mut entry, 1, k.as_bytes());
                encode_single(schema, values, value_type, pf.message.as_deref(), 2, item, &mut entry)?;
                put_bytes(out, tag, &entry);
            }
            Ok(())
        }
        (kind, Value::Array(items)) if !matches!(prop.ty, Type::Any) && pf.message.is_none() => {
            let item_type = match &prop.ty {
                Type::Array { items, .. } => items.as_ref(),
                other => other,
            };
            for item in items {
                encode_single(schema, kind, item_type, None, tag, item, out)?;
            }
            Ok(())
        }
        (kind, v) => encode_single(schema, kind, &prop.ty, pf.message.as_deref(), tag, v, out),
    }
}

fn bad(v: &Value, what: &str) -> String {
    format!("cannot encode {v} as {what}")
}

fn encode_single(schema: &Schema, kind: &ProtoKind, ty: &Type, message: Option<&str>, tag: u32, v: &Value, out: &mut Vec<u8>) -> Result<(), String> {
    match kind {
        ProtoKind::String => match v {
            Value::String(s) => put_bytes(out, tag, s.as_bytes()),
            other => put_bytes(out, tag, other.to_string().as_bytes()),
        },
        ProtoKind::Int32 | ProtoKind::Int64 => {
            let n = v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)).ok_or_else(|| bad(v, "an integer"))?;
            put_varint(out, tag, n as u64);
        }
        ProtoKind::Bool => put_varint(out, tag, v.as_bool().ok_or_else(|| bad(v, "a boolean"))? as u64),
        ProtoKind::Double => {
            encode_key(tag, WireType::SixtyFourBit, out);
            out.extend_from_slice(&v.as_f64().ok_or_else(|| bad(v, "a number"))?.to_le_bytes());
        }
        ProtoKind::Bytes => {
            let s = v.as_str().ok_or_else(|| bad(v, "bytes"))?;
            put_bytes(out, tag, &B64.decode(s).map_err(|e| e.to_string())?);
        }
        ProtoKind::Message => {
            let buf = encode_embedded(schema, ty, message, v)?;
            put_bytes(out, tag, &buf);
        }
        ProtoKind::Map(_) => return Err(bad(v, "a nested map")),
    }
    Ok(())
}

/// The bytes of a message-typed value.
fn encode_embedded(schema: &Schema, ty: &Type, message: Option<&str>, v: &Value) -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    if message.is_some() {
        // Wrapper messages (`ExtraValue`, `Verbs`): a list of strings in field 1.
        for item in v.as_array().ok_or_else(|| bad(v, "a list"))? {
            put_bytes(&mut buf, 1, item.as_str().unwrap_or_default().as_bytes());
        }
        return Ok(buf);
    }
    match ty {
        Type::Time | Type::MicroTime => {
            let s = v.as_str().ok_or_else(|| bad(v, "a time"))?;
            let ts: jiff::Timestamp = s.parse().map_err(|e| format!("{e}"))?;
            put_varint(&mut buf, 1, ts.as_second() as u64);
            let nanos = ts.subsec_nanosecond();
            if matches!(ty, Type::MicroTime) && nanos != 0 {
                put_varint(&mut buf, 2, (nanos / 1000 * 1000) as u64);
            }
        }
        Type::Quantity => put_bytes(&mut buf, 1, v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()).as_bytes()),
        Type::IntOrString => match v {
            Value::String(s) => {
                put_varint(&mut buf, 1, 1);
                put_varint(&mut buf, 2, 0);
                put_bytes(&mut buf, 3, s.as_bytes());
            }
            other => {
                put_varint(&mut buf, 1, 0);
                put_varint(&mut buf, 2, other.as_i64().ok_or_else(|| bad(other, "an int or string"))? as u64);
                put_bytes(&mut buf, 3, b"");
            }
        },
        Type::Any => put_bytes(&mut buf, 1, &serde_json::to_vec(v).map_err(|e| e.to_string())?),
        Type::Object(name) => {
            let def = schema.def(name).ok_or_else(|| format!("unknown type {name}"))?;
            let obj = v.as_object().ok_or_else(|| bad(v, name))?;
            encode_layout(schema, def, &def.layout, obj, &mut buf)?;
        }
        Type::Array { items, .. } => return encode_embedded(schema, items, None, v),
        other => return Err(format!("cannot encode {other:?} as a message")),
    }
    Ok(buf)
}

// ---------------------------------------------------------------------------------------------
// Decoding

#[derive(Debug)]
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    /// No Kubernetes field uses it; skipped.
    Fixed32,
    Len(&'a [u8]),
}

/// The fields of a message, in wire order.
struct Fields<'a> {
    buf: &'a [u8],
}

impl<'a> Fields<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Fields { buf }
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Wire<'a>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() {
            return None;
        }
        Some(self.read())
    }
}

impl<'a> Fields<'a> {
    fn read(&mut self) -> Result<(u32, Wire<'a>), String> {
        let err = |e: prost::DecodeError| e.to_string();
        let (tag, wt) = decode_key(&mut self.buf).map_err(err)?;
        let v = match wt {
            WireType::Varint => Wire::Varint(decode_varint(&mut self.buf).map_err(err)?),
            WireType::SixtyFourBit => {
                if self.buf.len() < 8 {
                    return Err("unexpected EOF".into());
                }
                Wire::Fixed64(self.buf.get_u64_le())
            }
            WireType::ThirtyTwoBit => {
                if self.buf.len() < 4 {
                    return Err("unexpected EOF".into());
                }
                self.buf.advance(4);
                Wire::Fixed32
            }
            WireType::LengthDelimited => {
                let len = decode_varint(&mut self.buf).map_err(err)? as usize;
                if self.buf.len() < len {
                    return Err("unexpected EOF".into());
                }
                let (head, rest) = self.buf.split_at(len);
                self.buf = rest;
                Wire::Len(head)
            }
            WireType::StartGroup | WireType::EndGroup => return Err("proto: groups are not supported".into()),
        };
        Ok((tag, v))
    }
}

fn utf8(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "proto: invalid UTF-8 string".to_string())
}

/// Decodes the message of `def` into a JSON object (without `apiVersion`/`kind`).
pub fn decode_message(schema: &Schema, def: &Definition, data: &[u8]) -> Result<Map<String, Value>, String> {
    let mut obj = Map::new();
    decode_layout(schema, def, &def.layout, data, &mut obj)?;
    drop_meaningless_zeros(def, &mut obj);
    Ok(obj)
}

fn decode_layout(schema: &Schema, def: &Definition, layout: &ProtoLayout, data: &[u8], obj: &mut Map<String, Value>) -> Result<(), String> {
    for field in Fields::new(data) {
        let (tag, wire) = field?;
        match layout.slot(tag) {
            Some(Slot::Property(name)) => {
                let prop = &def.properties[name];
                decode_field(schema, prop, wire, obj)?;
            }
            Some(Slot::Embedded(inner)) => {
                if let Wire::Len(b) = wire {
                    decode_layout(schema, def, inner, b, obj)?;
                }
            }
            None => {}
        }
    }
    Ok(())
}

fn decode_field(schema: &Schema, prop: &Property, wire: Wire, obj: &mut Map<String, Value>) -> Result<(), String> {
    let pf = prop.proto.as_ref().expect("laid out fields have numbers");
    let name = prop.name.clone();
    match &pf.kind {
        ProtoKind::Map(values) => {
            let Wire::Len(entry) = wire else { return Err(format!("proto: wrong wireType for field {name}")) };
            let value_type = match &prop.ty {
                Type::Map { values, .. } => values.as_ref().clone(),
                _ => Type::Any,
            };
            let mut key = String::new();
            let mut value = None;
            for f in Fields::new(entry) {
                match f? {
                    (1, Wire::Len(k)) => key = utf8(k)?,
                    (2, w) => value = decode_single(schema, values, &value_type, pf.message.as_deref(), w)?,
                    _ => {}
                }
            }
            let m = obj.entry(name).or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(m) = m {
                m.insert(key, value.unwrap_or_else(|| zero_of(values)));
            }
        }
        kind => {
            let (is_list, item_type) = match &prop.ty {
                Type::Array { items, .. } if pf.message.is_none() => (true, items.as_ref().clone()),
                other => (false, other.clone()),
            };
            if is_list {
                // Packed repeated scalars hold several values in one length-delimited field.
                let packed = matches!((kind, &wire), (ProtoKind::Int32 | ProtoKind::Int64 | ProtoKind::Bool | ProtoKind::Double, Wire::Len(_)));
                let list = obj.entry(name).or_insert_with(|| Value::Array(Vec::new()));
                let Value::Array(list) = list else { unreachable!() };
                if packed {
                    let Wire::Len(mut b) = wire else { unreachable!() };
                    while !b.is_empty() {
                        let n = if *kind == ProtoKind::Double {
                            if b.len() < 8 {
                                return Err("unexpected EOF".into());
                            }
                            Wire::Fixed64(b.get_u64_le())
                        } else {
                            Wire::Varint(decode_varint(&mut b).map_err(|e| e.to_string())?)
                        };
                        list.extend(decode_single(schema, kind, &item_type, None, n)?);
                    }
                } else {
                    list.push(decode_single(schema, kind, &item_type, None, wire)?.unwrap_or_else(|| zero_of(kind)));
                }
            } else if let Some(v) = decode_single(schema, kind, &item_type, pf.message.as_deref(), wire)? {
                obj.insert(name, v);
            } else {
                obj.remove(&name);
            }
        }
    }
    Ok(())
}

fn zero_of(kind: &ProtoKind) -> Value {
    match kind {
        ProtoKind::Int32 | ProtoKind::Int64 | ProtoKind::Double => Value::from(0),
        ProtoKind::Bool => Value::Bool(false),
        ProtoKind::Message => Value::Object(Map::new()),
        _ => Value::String(String::new()),
    }
}

/// One decoded value; `None` for a value that has no JSON form (an empty time).
fn decode_single(schema: &Schema, kind: &ProtoKind, ty: &Type, message: Option<&str>, wire: Wire) -> Result<Option<Value>, String> {
    let wrong = || Err(format!("proto: wrong wireType for a {kind:?} field"));
    Ok(Some(match (kind, wire) {
        (ProtoKind::String, Wire::Len(b)) => Value::String(utf8(b)?),
        (ProtoKind::Bytes, Wire::Len(b)) => Value::String(B64.encode(b)),
        (ProtoKind::Int32, Wire::Varint(n)) => Value::from(n as i64 as i32),
        (ProtoKind::Int64, Wire::Varint(n)) => Value::from(n as i64),
        (ProtoKind::Bool, Wire::Varint(n)) => Value::Bool(n != 0),
        (ProtoKind::Double, Wire::Fixed64(n)) => serde_json::Number::from_f64(f64::from_bits(n)).map(Value::Number).unwrap_or(Value::Null),
        (ProtoKind::Message, Wire::Len(b)) => return decode_embedded(schema, ty, message, b),
        _ => return wrong(),
    }))
}

fn decode_embedded(schema: &Schema, ty: &Type, message: Option<&str>, b: &[u8]) -> Result<Option<Value>, String> {
    if message.is_some() {
        let mut items = Vec::new();
        for f in Fields::new(b) {
            if let (1, Wire::Len(s)) = f? {
                items.push(Value::String(utf8(s)?));
            }
        }
        return Ok(Some(Value::Array(items)));
    }
    Ok(match ty {
        Type::Time | Type::MicroTime => {
            if b.is_empty() {
                return Ok(None);
            }
            let (mut secs, mut nanos) = (0i64, 0i32);
            for f in Fields::new(b) {
                match f? {
                    (1, Wire::Varint(n)) => secs = n as i64,
                    (2, Wire::Varint(n)) => nanos = n as i64 as i32,
                    _ => {}
                }
            }
            let micro = matches!(ty, Type::MicroTime);
            let ts = jiff::Timestamp::new(secs, if micro { nanos } else { 0 }).map_err(|e| e.to_string())?;
            Some(Value::String(crate::schema::normalize::format_time(ts, micro)))
        }
        Type::Quantity => {
            let mut s = String::new();
            for f in Fields::new(b) {
                if let (1, Wire::Len(q)) = f? {
                    s = utf8(q)?;
                }
            }
            Some(Value::String(s))
        }
        Type::IntOrString => {
            let (mut t, mut i, mut s) = (0u64, 0i64, String::new());
            for f in Fields::new(b) {
                match f? {
                    (1, Wire::Varint(n)) => t = n,
                    (2, Wire::Varint(n)) => i = n as i64 as i32 as i64,
                    (3, Wire::Len(x)) => s = utf8(x)?,
                    _ => {}
                }
            }
            Some(if t == 1 { Value::String(s) } else { Value::from(i) })
        }
        Type::Any => {
            let mut raw: &[u8] = &[];
            for f in Fields::new(b) {
                if let (1, Wire::Len(r)) = f? {
                    raw = r;
                }
            }
            if raw.is_empty() {
                return Ok(None);
            }
            Some(serde_json::from_slice(raw).map_err(|e| format!("raw extension is not JSON: {e}"))?)
        }
        Type::Object(name) => {
            let def = schema.def(name).ok_or_else(|| format!("unknown type {name}"))?;
            Some(Value::Object(decode_message(schema, def, b)?))
        }
        Type::Array { items, .. } => return decode_embedded(schema, items, None, b),
        other => return Err(format!("proto: {other:?} is not a message")),
    })
}

/// Leaves out what Go's JSON encoder would have left out of an object decoded from the wire.
fn drop_meaningless_zeros(def: &Definition, obj: &mut Map<String, Value>) {
    obj.retain(|name, v| {
        let required = def.required.iter().any(|r| r == name);
        match v {
            Value::String(s) if s.is_empty() => required,
            Value::Number(n) if n.as_f64() == Some(0.0) => required || !omits_zero(def, name),
            Value::Bool(false) => required || !omits_zero(def, name),
            Value::Array(a) if a.is_empty() => required,
            Value::Object(m) if m.is_empty() => required || matches!(def.properties.get(name).map(|p| &p.ty), Some(Type::Object(_))),
            _ => true,
        }
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::schema;

    #[test]
    fn round_trips_a_deployment() {
        let d = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
                "creationTimestamp": "2024-01-02T03:04:05Z", "generation": 3},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx", "args": ["a", "b"],
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "resources": {"limits": {"cpu": "500m"}}}],
                        "automountServiceAccountToken": false}}},
        });
        let bytes = encode(schema(), &d).unwrap();
        assert!(bytes.starts_with(MAGIC));
        assert_eq!(decode(schema(), &bytes).unwrap(), d);
    }

    #[test]
    fn drops_go_zero_values_but_keeps_pointer_zeros() {
        let def = schema().for_gvk("apps", "v1", "Deployment").unwrap();
        // What Go writes for an object whose only set fields are name and replicas=0.
        let mut meta = Vec::new();
        put_bytes(&mut meta, 1, b"web");
        put_bytes(&mut meta, 2, b"");
        put_varint(&mut meta, 7, 0);
        put_bytes(&mut meta, 8, b"");
        let mut spec = Vec::new();
        put_varint(&mut spec, 1, 0);
        put_varint(&mut spec, 5, 0);
        put_varint(&mut spec, 7, 0);
        let mut msg = Vec::new();
        put_bytes(&mut msg, 1, &meta);
        put_bytes(&mut msg, 2, &spec);
        let obj = decode_message(schema(), def, &msg).unwrap();
        assert_eq!(Value::Object(obj), json!({"metadata": {"name": "web"}, "spec": {"replicas": 0}}));
    }

    #[test]
    fn embedded_structs_and_wrappers() {
        let api = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "metadata": {}, "spec": {"token": "t"},
            "status": {"authenticated": true, "user": {"username": "u", "extra": {"k": ["a", "b"]}}}});
        assert_eq!(decode(schema(), &encode(schema(), &api).unwrap()).unwrap(), api);
        let cm_env = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "cm", "optional": true}}]}]}});
        assert_eq!(decode(schema(), &encode(schema(), &cm_env).unwrap()).unwrap(), cm_env);
    }
}

//! JSON as kube-apiserver writes it. Go's `encoding/json` writes a struct's fields in their
//! declaration order (`kind`, `apiVersion`, `metadata`, `spec`, `status`, ...), a map's keys
//! sorted, and escapes `<`, `>`, `&`, U+2028 and U+2029 in strings; the schema's `x-kapi-order`
//! keeps each definition's field order. Objects of no known definition (custom resources,
//! free-form JSON) keep their keys sorted, as kube writes unstructured objects.

use serde_json::{Map, Value};

use crate::schema::{Definition, Property, Schema, Type, schema};

/// `value` as kube writes it, its definition found from its `apiVersion` and `kind`.
pub fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write(&mut out, value);
    out
}

/// Appends `value` as kube writes it, its definition found from its `apiVersion` and `kind`.
pub fn write(out: &mut Vec<u8>, value: &Value) {
    Writer::new(out).value(value, None);
}

/// Appends an object of definition `def` (a definition name) as kube writes it.
pub fn write_as(out: &mut Vec<u8>, def: &str, value: &Value) {
    let mut w = Writer::new(out);
    match value {
        Value::Object(m) => match w.schema.get(def) {
            Some(def) if !def.order.is_empty() => w.object(m, def),
            _ => w.map(m, None),
        },
        v => w.value(v, None),
    }
}

/// The bytes [`write_str`] looks at twice: quotes, backslashes, controls, `<`, `>`, `&`, and the
/// first byte of U+2028 and U+2029.
const SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t[b'<' as usize] = true;
    t[b'>' as usize] = true;
    t[b'&' as usize] = true;
    t[0xE2] = true;
    t
};

/// Whether any of the eight bytes in `x` may be one of [`SPECIAL`]: a control or non-ASCII
/// byte, or one of `"&<>\\` (`"` and `&` differ in one bit, as do `<` and `>`). Exact for
/// "none": a byte below 0x20 or a zero byte is found by the borrow of a subtraction, which
/// only the lowest such byte is sure to show, and that is enough.
fn may_be_special(x: u64) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let every = |b: u8| u64::from_le_bytes([b; 8]);
    let zero_bytes = |v: u64| v.wrapping_sub(every(1)) & !v;
    let control_or_high = x.wrapping_sub(every(0x20)) | x;
    let quote_or_ampersand = zero_bytes((x | every(0x04)) ^ every(b'&'));
    let angle = zero_bytes((x | every(0x02)) ^ every(b'>'));
    let backslash = zero_bytes(x ^ every(b'\\'));
    (control_or_high | quote_or_ampersand | angle | backslash) & HIGH != 0
}

/// Whether `bytes` may need escaping, eight bytes at a time (the last ones padded with spaces).
fn may_need_escapes(bytes: &[u8]) -> bool {
    let mut chunks = bytes.chunks_exact(8);
    if chunks.by_ref().any(|c| may_be_special(u64::from_le_bytes(c.try_into().expect("eight bytes")))) {
        return true;
    }
    let rest = chunks.remainder();
    let mut last = [b' '; 8];
    last[..rest.len()].copy_from_slice(rest);
    may_be_special(u64::from_le_bytes(last))
}

/// Appends a JSON string as Go's encoder writes it: most strings need no escapes and are
/// copied whole.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    if may_need_escapes(s.as_bytes()) {
        write_escaped(out, s.as_bytes());
    } else {
        out.extend_from_slice(s.as_bytes());
    }
    out.push(b'"');
}

/// `name` as a member key: the string and a colon.
pub fn member_key(name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(name.len() + 3);
    write_str(&mut key, name);
    key.push(b':');
    key
}

/// Appends the UTF-8 text `bytes` with Go's escapes, one byte at a time.
fn write_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        // Most bytes need nothing: one table look-up decides.
        if !SPECIAL[b as usize] {
            i += 1;
            continue;
        }
        let escape: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0x08 => Some(b"\\b"),
            0x0c => Some(b"\\f"),
            _ => None,
        };
        let unicode = b < 0x20 || b == b'<' || b == b'>' || b == b'&';
        // U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
        let separator = b == 0xE2 && bytes.get(i + 1) == Some(&0x80) && matches!(bytes.get(i + 2), Some(0xA8 | 0xA9));
        if escape.is_none() && !unicode && !separator {
            i += 1;
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        if let Some(e) = escape {
            out.extend_from_slice(e);
            i += 1;
        } else if separator {
            out.extend_from_slice(if bytes[i + 2] == 0xA8 { b"\\u2028" } else { b"\\u2029" });
            i += 3;
        } else {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(b >> 4) as usize]);
            out.push(HEX[(b & 0xf) as usize]);
            i += 1;
        }
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
}

struct Writer<'o, 'v> {
    schema: &'static Schema,
    out: &'o mut Vec<u8>,
    /// Emptied buffers for a struct's members, kept for the next struct written.
    spare: Vec<Vec<(u32, Member<'v>)>>,
}

impl<'o, 'v> Writer<'o, 'v> {
    fn new(out: &'o mut Vec<u8>) -> Self {
        Writer { schema: schema(), out, spare: Vec::new() }
    }

    /// Writes `v` as a value of type `ty`; without a type, an object naming a known kind is
    /// written as that kind (list items, watch events and embedded objects).
    fn value(&mut self, v: &'v Value, ty: Option<&'static Type>) {
        match v {
            Value::Null => self.out.extend_from_slice(b"null"),
            Value::Bool(b) => self.out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Number(n) => serde_json::to_writer(&mut *self.out, n).expect("numbers serialize"),
            Value::String(s) => write_str(self.out, s),
            Value::Array(items) => {
                let item_ty = match ty {
                    Some(Type::Array { items, .. }) => Some(&**items),
                    _ => None,
                };
                self.out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    self.value(item, item_ty);
                }
                self.out.push(b']');
            }
            Value::Object(m) => match ty {
                Some(Type::Object(name)) => match self.schema.def(name) {
                    Some(def) if !def.order.is_empty() => self.object(m, def),
                    _ => self.map(m, None),
                },
                Some(Type::Map { values, .. }) => self.map(m, Some(values)),
                _ => match self.kind_of(m) {
                    Some(def) => self.object(m, def),
                    None => self.map(m, None),
                },
            },
        }
    }

    fn kind_of(&self, m: &Map<String, Value>) -> Option<&'static Definition> {
        let api_version = m.get("apiVersion")?.as_str()?;
        let kind = m.get("kind")?.as_str()?;
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        self.schema.for_gvk(group, version, kind).map(|d| &**d).filter(|d| !d.order.is_empty())
    }

    /// A struct: its fields in declaration order, then any others sorted.
    fn object(&mut self, m: &'v Map<String, Value>, def: &'static Definition) {
        let mut members = self.spare.pop().unwrap_or_default();
        ordered(m, def, &mut members);
        self.members(members.drain(..).map(|(_, member)| member));
        self.spare.push(members);
    }

    /// A map (or an object of no known definition): keys sorted, as serde_json keeps them.
    fn map(&mut self, m: &'v Map<String, Value>, values: Option<&'static Type>) {
        self.members(m.iter().map(|(k, v)| Member { name: k, json_key: None, value: v, ty: values }));
    }

    fn members(&mut self, members: impl Iterator<Item = Member<'v>>) {
        self.out.push(b'{');
        for (i, member) in members.enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            self.key(&member);
            self.value(member.value, member.ty);
        }
        self.out.push(b'}');
    }

    /// A member's key and colon.
    fn key(&mut self, member: &Member) {
        match member.json_key {
            Some(key) => self.out.extend_from_slice(key),
            None => {
                write_str(self.out, member.name);
                self.out.push(b':');
            }
        }
    }
}

/// An object's member: its name, its value, and its type where the object's definition says.
#[derive(Clone, Copy)]
struct Member<'v> {
    name: &'v str,
    /// The name written as a key, where the object's definition has it.
    json_key: Option<&'static [u8]>,
    value: &'v Value,
    ty: Option<&'static Type>,
}

impl<'v> Member<'v> {
    fn of(name: &'v str, value: &'v Value, property: Option<&'static Property>) -> Self {
        Member { name, json_key: property.map(|p| &p.json_key[..]), value, ty: property.map(|p| &p.ty) }
    }
}

static NULL: Value = Value::Null;

/// A struct's members in the order kube writes them: its fields in declaration order, then any
/// others sorted (as the map keeps them), each with its place; one look-up of each member's
/// property, and a sort of the members present rather than a walk of every field the kind has.
/// An object's metadata always has a `creationTimestamp` (a `metav1.Time` value, `null` when
/// zero), as Go writes it. Into `keyed`, which is empty.
fn ordered<'v>(m: &'v Map<String, Value>, def: &'static Definition, keyed: &mut Vec<(u32, Member<'v>)>) {
    keyed.reserve(m.len() + 1);
    for (k, v) in m {
        let property = def.properties.get(k);
        keyed.push((property.and_then(|p| p.position).unwrap_or(u32::MAX), Member::of(k, v, property)));
    }
    if def.name == OBJECT_META && !m.contains_key("creationTimestamp") {
        let property = def.properties.get("creationTimestamp");
        keyed.push((property.and_then(|p| p.position).unwrap_or(u32::MAX), Member::of("creationTimestamp", &NULL, property)));
    }
    if !keyed.is_sorted_by_key(|(at, _)| *at) {
        keyed.sort_by_key(|(at, _)| *at);
    }
}

/// An object's members as kube writes them: in a struct's order, or sorted without a definition.
fn members_of<'v>(m: &'v Map<String, Value>, def: Option<&'static Definition>) -> Vec<Member<'v>> {
    match def {
        Some(def) => {
            let mut keyed = Vec::new();
            ordered(m, def, &mut keyed);
            keyed.into_iter().map(|(_, member)| member).collect()
        }
        None => m.iter().map(|(k, v)| Member::of(k, v, None)).collect(),
    }
}

/// Whether a member of an object's metadata is written before `resourceVersion`: in
/// `ObjectMeta`'s field order for built-in kinds (`typed`), in sorted order for others.
pub fn precedes_resource_version(typed: bool, key: &str) -> bool {
    if typed { matches!(key, "name" | "generateName" | "namespace" | "selfLink" | "uid") } else { key < "resourceVersion" }
}

/// Where `metadata.resourceVersion` goes in an object written without it: at byte `at`, after
/// a member (`after_member`: a comma before it) or before one (a comma after it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap {
    pub at: usize,
    pub after_member: bool,
    pub before_member: bool,
}

/// Appends an object as kube writes it but without `metadata.resourceVersion` and
/// `metadata.selfLink` (what storage keeps), and says where the resourceVersion goes; `None`
/// when the object has no metadata object.
pub fn write_without_version(out: &mut Vec<u8>, value: &Value) -> Option<Gap> {
    let mut w = Writer::new(out);
    let Value::Object(top) = value else {
        w.value(value, None);
        return None;
    };
    let def = w.kind_of(top);
    let meta_def = def.and_then(|_| w.schema.get(OBJECT_META)).map(|d| &**d);
    let mut gap = None;
    w.out.push(b'{');
    for (i, member) in members_of(top, def).into_iter().enumerate() {
        if i > 0 {
            w.out.push(b',');
        }
        w.key(&member);
        match member.value {
            Value::Object(m) if member.name == "metadata" => {
                let members: Vec<Member> = members_of(m, meta_def).into_iter().filter(|m| m.name != "resourceVersion" && m.name != "selfLink").collect();
                let before = members.iter().take_while(|m| precedes_resource_version(def.is_some(), m.name)).count();
                w.out.push(b'{');
                for (j, m) in members.iter().enumerate() {
                    if j == before {
                        gap = Some(Gap { at: w.out.len(), after_member: false, before_member: true });
                    }
                    if j > 0 {
                        w.out.push(b',');
                    }
                    w.key(m);
                    w.value(m.value, m.ty);
                }
                if before == members.len() || before > 0 {
                    gap = Some(Gap { at: gap.map_or(w.out.len(), |g| g.at), after_member: before > 0, before_member: false });
                }
                w.out.push(b'}');
            }
            v => w.value(v, member.ty),
        }
    }
    w.out.push(b'}');
    gap
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(v: &Value) -> String {
        String::from_utf8(to_vec(v)).unwrap()
    }

    #[test]
    fn built_in_kinds_are_written_in_go_struct_order() {
        let pod = json!({"status": {"phase": "Pending"}, "spec": {"containers": [{"name": "c", "image": "nginx", "args": ["a"]}]},
            "metadata": {"uid": "u", "name": "p", "resourceVersion": "5", "labels": {"b": "1", "a": "2"}}, "apiVersion": "v1", "kind": "Pod"});
        assert_eq!(
            text(&pod),
            r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","uid":"u","resourceVersion":"5","creationTimestamp":null,"labels":{"a":"2","b":"1"}},"spec":{"containers":[{"name":"c","image":"nginx","args":["a"]}]},"status":{"phase":"Pending"}}"#
        );
    }

    #[test]
    fn status_is_written_as_kube_writes_it() {
        let status = json!({"apiVersion": "v1", "code": 404, "details": {"kind": "pods", "name": "x"}, "kind": "Status", "message": "m", "metadata": {}, "reason": "NotFound", "status": "Failure"});
        assert_eq!(
            text(&status),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"m","reason":"NotFound","details":{"name":"x","kind":"pods"},"code":404}"#
        );
    }

    #[test]
    fn unknown_kinds_keep_sorted_keys_and_strings_are_escaped_as_go_does() {
        let cr = json!({"kind": "Widget", "apiVersion": "example.com/v1", "spec": {"z": 1, "a": "<b>&\u{2028}\u{1}\"\\\n"}});
        assert_eq!(text(&cr), r#"{"apiVersion":"example.com/v1","kind":"Widget","spec":{"a":"\u003cb\u003e\u0026\u2028\u0001\"\\\n","z":1}}"#);
    }

    /// The escaping of Go's encoder, one byte at a time.
    fn go_escaped(s: &str) -> String {
        let mut out = String::from('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 || matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}') => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    proptest::proptest! {
        #[test]
        fn strings_are_escaped_as_go_does_whatever_their_bytes(s in "[ -~\u{0}-\u{1f}\u{80}-\u{3000}]{0,40}") {
            let mut out = Vec::new();
            write_str(&mut out, &s);
            proptest::prop_assert_eq!(String::from_utf8(out).unwrap(), go_escaped(&s));
        }

        #[test]
        fn eight_plain_bytes_are_skipped_and_any_special_one_is_seen(bytes in proptest::array::uniform8(0u8..=255)) {
            let x = u64::from_le_bytes(bytes);
            let special = bytes.iter().any(|b| SPECIAL[*b as usize]);
            let ascii = bytes.iter().all(u8::is_ascii);
            proptest::prop_assert!(!special || may_be_special(x));
            proptest::prop_assert_eq!(may_be_special(x), special || !ascii);
        }
    }
}

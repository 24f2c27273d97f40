//! Conversion webhooks under fuzzing: a CRD whose two versions a stand-in webhook converts,
//! with answers that come from the input (any status and body, or a ConversionReview whose
//! uid, result and converted objects are bent: another apiVersion, kind, name or uid, labels
//! and annotations of any shape, metadata that is not an object), and writes and reads of
//! both versions. Whatever the webhook says, every request is answered with a status, and an
//! object is always read at its storage version.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use arbitrary::{Arbitrary, Unstructured};
use bytes::Bytes;
use jiff::SignedDuration;
use kapi_core::controllers::Enabled;
use kapi_core::webhook::{WebhookAnswer, WebhookCall};
use serde_json::{Value, json};

use super::{KeptWorld, serve_input};
use crate::{World, default_server, epoch};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const NAMES: &[&str] = &["a", "b", "c"];

/// How the stand-in webhook answers one call.
#[derive(Debug, Clone)]
enum Answer {
    /// Converted as asked, each object bent as given.
    Review {
        same_uid: bool,
        success: bool,
        bends: Vec<Bend>,
        drop_one: bool,
    },
    Raw {
        status: u16,
        body: Vec<u8>,
    },
    Unreachable(String),
}

/// What the webhook changes in a converted object.
#[derive(Debug, Clone)]
enum Bend {
    ApiVersion(String),
    Kind(String),
    Name(String),
    Uid(String),
    Labels(Vec<(String, String)>),
    LabelNotString(String, i64),
    Annotations(Vec<(String, String)>),
    Metadata(i64),
    NoMetadata,
    Spec(String, String),
}

impl Bend {
    fn apply(&self, o: &mut Value) {
        match self {
            Bend::ApiVersion(v) => o["apiVersion"] = json!(v),
            Bend::Kind(k) => o["kind"] = json!(k),
            Bend::Name(n) => o["metadata"]["name"] = json!(n),
            Bend::Uid(u) => o["metadata"]["uid"] = json!(u),
            Bend::Labels(l) => o["metadata"]["labels"] = json!(l.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<String, Value>>()),
            Bend::LabelNotString(k, v) => o["metadata"]["labels"] = json!({k: v}),
            Bend::Annotations(a) => {
                o["metadata"]["annotations"] = json!(a.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<String, Value>>())
            }
            Bend::Metadata(n) => o["metadata"] = json!(n),
            Bend::NoMetadata => {
                if let Some(m) = o.as_object_mut() {
                    m.remove("metadata");
                }
            }
            Bend::Spec(k, v) => o["spec"] = json!({k: v}),
        }
    }
}

impl Answer {
    fn give(&self, call: &WebhookCall) -> Result<WebhookAnswer, String> {
        let review: Value = serde_json::from_slice(&call.body).map_err(|e| e.to_string())?;
        let request = &review["request"];
        let body = match self {
            Answer::Unreachable(e) => return Err(e.clone()),
            Answer::Raw { status, body } => return Ok(WebhookAnswer { status: *status, body: Bytes::from(body.clone()), ..Default::default() }),
            Answer::Review { same_uid, success, bends, drop_one } => {
                let desired = request["desiredAPIVersion"].clone();
                let mut objects: Vec<Value> = request["objects"].as_array().cloned().unwrap_or_default();
                for (o, bend) in objects.iter_mut().zip(bends.iter().map(Some).chain(std::iter::repeat(None))) {
                    o["apiVersion"] = desired.clone();
                    if let Some(b) = bend {
                        b.apply(o);
                    }
                }
                if *drop_one {
                    objects.pop();
                }
                let uid = if *same_uid { request["uid"].clone() } else { json!("other") };
                let result = if *success { json!({"status": "Success"}) } else { json!({"status": "Failure", "message": "no"}) };
                json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": {"uid": uid, "result": result, "convertedObjects": objects}})
            }
        };
        Ok(WebhookAnswer { status: 200, body: Bytes::from(body.to_string()), ..Default::default() })
    }
}

/// One request: its verb, version and object.
#[derive(Debug)]
enum Op {
    Create { v2: bool, name: u8, labels: Vec<(String, String)> },
    Get { v2: bool, name: u8, cached: bool },
    List { v2: bool, cached: bool },
    Patch { v2: bool, name: u8, value: String },
    Delete { v2: bool, name: u8 },
    DeleteAll { v2: bool },
    Wait,
}

#[derive(Debug)]
struct Input {
    answers: Vec<Answer>,
    ops: Vec<Op>,
}

impl<'a> Arbitrary<'a> for Answer {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Answer> {
        Ok(match u.int_in_range(0..=3u8)? {
            0 => Answer::Raw { status: u.arbitrary()?, body: u.arbitrary()? },
            1 => Answer::Unreachable(u.arbitrary()?),
            _ => Answer::Review { same_uid: u.ratio(7, 8)?, success: u.ratio(7, 8)?, bends: u.arbitrary()?, drop_one: u.ratio(1, 8)? },
        })
    }
}

impl<'a> Arbitrary<'a> for Bend {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Bend> {
        Ok(match u.int_in_range(0..=9u8)? {
            0 => Bend::ApiVersion(u.arbitrary()?),
            1 => Bend::Kind(u.arbitrary()?),
            2 => Bend::Name(u.arbitrary()?),
            3 => Bend::Uid(u.arbitrary()?),
            4 => Bend::Labels(u.arbitrary()?),
            5 => Bend::LabelNotString(u.arbitrary()?, u.arbitrary()?),
            6 => Bend::Annotations(u.arbitrary()?),
            7 => Bend::Metadata(u.arbitrary()?),
            8 => Bend::NoMetadata,
            _ => Bend::Spec(u.arbitrary()?, u.arbitrary()?),
        })
    }
}

impl<'a> Arbitrary<'a> for Op {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Op> {
        let v2 = u.arbitrary()?;
        Ok(match u.int_in_range(0..=6u8)? {
            0 => Op::Create { v2, name: u.arbitrary()?, labels: u.arbitrary()? },
            1 => Op::Get { v2, name: u.arbitrary()?, cached: u.arbitrary()? },
            2 => Op::List { v2, cached: u.arbitrary()? },
            3 => Op::Patch { v2, name: u.arbitrary()?, value: u.arbitrary()? },
            4 => Op::Delete { v2, name: u.arbitrary()? },
            5 => Op::DeleteAll { v2 },
            _ => Op::Wait,
        })
    }
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Input> {
        Ok(Input { answers: u.arbitrary()?, ops: u.arbitrary()? })
    }
}

pub fn conversion(data: &[u8]) {
    serve_input(&WORLD, INPUTS_PER_WORLD, data, world, serve);
}

thread_local! {
    static WORLD: KeptWorld = const { RefCell::new(None) };
}
/// Inputs served by one world before a fresh one (the objects of earlier inputs stay).
const INPUTS_PER_WORLD: u32 = 50;

fn world() -> World {
    let mut w = World::new(default_server(), epoch(), 9);
    w.start_controllers(Enabled::NONE);
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}});
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "tabs.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "tabs", "kind": "Tab"},
            "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://hook.example/convert"}, "conversionReviewVersions": ["v1"]}},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": schema}, {"name": "v2", "served": true, "storage": false, "schema": schema}]}});
    let r = w.call("POST", CRDS, "", Some(&crd), "application/json");
    assert_eq!(r.head.status, 201);
    w
}

fn serve(w: &mut World, input: Input) {
    let answers = Arc::new(Mutex::new((input.answers, 0usize)));
    w.webhook = Some(Box::new(move |call: &WebhookCall| {
        let mut a = answers.lock().expect("one thread");
        let (list, next) = &mut *a;
        if list.is_empty() {
            return Err("connection refused".into());
        }
        *next += 1;
        list[*next % list.len()].give(call)
    }));
    let path = |v2: bool| format!("/apis/example.com/{}/namespaces/default/tabs", if v2 { "v2" } else { "v1" });
    let name = |n: u8| NAMES[usize::from(n) % NAMES.len()];
    for op in input.ops.iter().take(12) {
        let r = match op {
            Op::Create { v2, name: n, labels } => {
                let labels: serde_json::Map<String, Value> = labels.iter().take(3).map(|(k, v)| (k.clone(), json!(v))).collect();
                let obj = json!({"apiVersion": format!("example.com/{}", if *v2 { "v2" } else { "v1" }), "kind": "Tab",
                    "metadata": {"name": name(*n), "labels": labels}, "spec": {"x": 1}});
                w.call("POST", &path(*v2), "", Some(&obj), "application/json")
            }
            Op::Get { v2, name: n, cached } => w.call("GET", &format!("{}/{}", path(*v2), name(*n)), if *cached { "resourceVersion=0" } else { "" }, None, ""),
            Op::List { v2, cached } => w.call("GET", &path(*v2), if *cached { "resourceVersion=0" } else { "" }, None, ""),
            Op::Patch { v2, name: n, value } => {
                let patch = json!({"spec": {"y": value}});
                w.call("PATCH", &format!("{}/{}", path(*v2), name(*n)), "", Some(&patch), "application/merge-patch+json")
            }
            Op::Delete { v2, name: n } => w.call("DELETE", &format!("{}/{}", path(*v2), name(*n)), "", None, ""),
            Op::DeleteAll { v2 } => w.call("DELETE", &path(*v2), "", None, ""),
            Op::Wait => {
                w.advance(SignedDuration::from_secs(2));
                continue;
            }
        };
        assert!((200..600).contains(&r.head.status), "status {}", r.head.status);
    }
    // Objects are always read at their storage version, whatever the webhook said.
    let r = w.call("GET", &path(false), "", None, "");
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

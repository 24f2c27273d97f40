//! Admission webhooks under fuzzing: a mutating and a validating webhook (both
//! `failurePolicy: Fail`) on configmaps, whose answers come from the input: any status and
//! body, a transport error, or an AdmissionReview bent in every field kube checks (uid, kind,
//! `allowed`, a status of any shape, warnings, a patch type, and patches of any bytes, of
//! generated operations, or of `copy` operations that double the object at every step). The
//! configmaps are created, updated, patched and deleted. Pods are created too, their images
//! reviewed by ImagePolicyWebhook's backend, whose answers (any status and body, a transport
//! error, or an ImageReview allowing or not) also come from the input. Whatever the webhooks
//! and the backend say, every request is answered with a `Status` or an object, no configmap
//! write is acknowledged unless the validating webhook answered it with a well-formed review
//! that allowed it, and no pod is created unless the backend allowed its images.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use arbitrary::{Arbitrary, Unstructured};
use base64::Engine;
use bytes::Bytes;
use kapi_core::controllers::Enabled;
use kapi_core::webhook::{WebhookAnswer, WebhookCall};
use serde_json::{Value, json};

use super::{KeptWorld, serve_input};
use crate::{World, default_server, epoch};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const NAMES: &[&str] = &["a", "b", "c"];

/// A webhook's answer to one call.
#[derive(Debug)]
enum Answer {
    Review { same_uid: bool, right_kind: bool, allowed: bool, status: Status, warnings: Vec<String>, patch_type: Option<String>, patch: Option<Patch> },
    Raw { status: u16, body: Vec<u8> },
    Unreachable(String),
}

/// A refusal's `status`, of any shape.
#[derive(Debug)]
enum Status {
    None,
    Fields { code: i64, reason: String, message: String },
    NotAnObject(i64),
}

#[derive(Debug)]
enum Patch {
    /// Any bytes, base64'd.
    Raw(Vec<u8>),
    Ops(Vec<Op>),
    /// `copy` of the whole object into itself, this many times.
    Doubling(u8),
}

/// One JSON patch operation.
#[derive(Debug)]
struct Op {
    op: u8,
    path: Path,
    value: String,
}

#[derive(Debug)]
enum Path {
    Label(String),
    Data(String),
    Any(String),
}

impl Op {
    fn json(&self) -> Value {
        let path = match &self.path {
            Path::Label(k) => format!("/metadata/labels/{}", k.replace('~', "~0").replace('/', "~1")),
            Path::Data(k) => format!("/data/{}", k.replace('~', "~0").replace('/', "~1")),
            Path::Any(p) => p.clone(),
        };
        let op = ["add", "remove", "replace", "move", "copy", "test"][usize::from(self.op) % 6];
        json!({"op": op, "path": path, "value": self.value, "from": "/data"})
    }
}

impl Answer {
    /// The answer to `call`, and whether it is a well-formed review allowing the write.
    fn give(&self, call: &WebhookCall, mutating: bool) -> (Result<WebhookAnswer, String>, bool) {
        let review: Value = serde_json::from_slice(&call.body).unwrap_or_default();
        let (same_uid, right_kind, allowed, status, warnings, patch_type, patch) = match self {
            Answer::Unreachable(e) => return (Err(e.clone()), false),
            Answer::Raw { status, body } => return (Ok(WebhookAnswer { status: *status, body: Bytes::from(body.clone()), ..Default::default() }), false),
            Answer::Review { same_uid, right_kind, allowed, status, warnings, patch_type, patch } => {
                (same_uid, right_kind, allowed, status, warnings, patch_type, patch)
            }
        };
        let uid = if *same_uid { review["request"]["uid"].clone() } else { json!("other") };
        let mut response = json!({"uid": uid, "allowed": allowed, "warnings": warnings});
        match status {
            Status::None => {}
            Status::Fields { code, reason, message } => response["status"] = json!({"code": code, "reason": reason, "message": message}),
            Status::NotAnObject(n) => response["status"] = json!(n),
        }
        if let Some(t) = patch_type {
            response["patchType"] = json!(t);
        }
        let patch = patch.as_ref().map(|p| match p {
            Patch::Raw(b) => b.clone(),
            Patch::Ops(ops) => Value::Array(ops.iter().take(64).map(Op::json).collect()).to_string().into_bytes(),
            Patch::Doubling(n) => {
                let copies: Vec<Value> = (0..*n).map(|i| json!({"op": "copy", "from": "", "path": format!("/data/c{i}")})).collect();
                Value::Array(copies).to_string().into_bytes()
            }
        });
        if let Some(bytes) = &patch {
            response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
        }
        let kind = if *right_kind { "AdmissionReview" } else { "Status" };
        let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": kind, "response": response});
        // kube refuses a validating webhook's patch only when it has bytes (`len(Patch) > 0`).
        let no_patch = patch.is_none_or(|b| b.is_empty()) && patch_type.is_none();
        // A status that is no `metav1.Status` fails the call, as Go's decoding does.
        let typed = match status {
            Status::None => true,
            Status::Fields { code, .. } => i32::try_from(*code).is_ok(),
            Status::NotAnObject(_) => false,
        };
        let valid = *same_uid && *right_kind && *allowed && typed && (mutating || no_patch);
        (Ok(WebhookAnswer { status: 200, body: Bytes::from(body.to_string()), content_type: "application/json".into() }), valid)
    }
}

/// The image policy backend's answer to one review.
#[derive(Debug)]
enum ImageAnswer {
    /// An ImageReview: `status`, `allowed` and `reason` of any JSON type when not `typed`.
    Review {
        typed: bool,
        allowed: bool,
        reason: String,
    },
    Raw {
        status: u16,
        body: Vec<u8>,
    },
    Unreachable(String),
}

impl ImageAnswer {
    /// The answer, and whether it allows the images.
    fn give(&self) -> (Result<WebhookAnswer, String>, bool) {
        let (typed, allowed, reason) = match self {
            ImageAnswer::Unreachable(e) => return (Err(e.clone()), false),
            ImageAnswer::Raw { status, body } => return (Ok(WebhookAnswer { status: *status, body: Bytes::from(body.clone()), ..Default::default() }), false),
            ImageAnswer::Review { typed, allowed, reason } => (*typed, *allowed, reason),
        };
        let status = if typed { json!({"allowed": allowed, "reason": reason}) } else { json!({"allowed": reason, "reason": allowed}) };
        let body = json!({"apiVersion": "imagepolicy.k8s.io/v1alpha1", "kind": "ImageReview", "status": status});
        (Ok(WebhookAnswer { status: 200, body: Bytes::from(body.to_string()), content_type: "application/json".into() }), typed && allowed)
    }
}

/// One request on a configmap, or a pod's create.
#[derive(Debug)]
enum Write {
    Create { name: u8, labels: Vec<(String, String)> },
    Update { name: u8, value: String },
    Patch { name: u8, value: String },
    Delete { name: u8 },
    Pod { images: Vec<String>, annotation: String },
}

#[derive(Debug)]
struct Input {
    mutating: Vec<Answer>,
    validating: Vec<Answer>,
    images: Vec<ImageAnswer>,
    writes: Vec<Write>,
}

impl<'a> Arbitrary<'a> for Answer {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Answer> {
        Ok(match u.int_in_range(0..=5u8)? {
            0 => Answer::Raw { status: u.arbitrary()?, body: u.arbitrary()? },
            1 => Answer::Unreachable(u.arbitrary()?),
            _ => {
                let patch = if u.ratio(1, 4)? { Some(u.arbitrary()?) } else { None };
                let typed = if patch.is_some() { u.ratio(7, 8)? } else { u.ratio(1, 8)? };
                Answer::Review {
                    same_uid: u.ratio(7, 8)?,
                    right_kind: u.ratio(7, 8)?,
                    allowed: u.ratio(3, 4)?,
                    status: u.arbitrary()?,
                    warnings: u.arbitrary()?,
                    patch_type: if typed { Some(if u.ratio(3, 4)? { "JSONPatch".into() } else { u.arbitrary()? }) } else { None },
                    patch,
                }
            }
        })
    }
}

impl<'a> Arbitrary<'a> for Status {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Status> {
        Ok(match u.int_in_range(0..=2u8)? {
            0 => Status::None,
            1 => Status::Fields { code: u.arbitrary()?, reason: u.arbitrary()?, message: u.arbitrary()? },
            _ => Status::NotAnObject(u.arbitrary()?),
        })
    }
}

impl<'a> Arbitrary<'a> for Patch {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Patch> {
        Ok(match u.int_in_range(0..=2u8)? {
            0 => Patch::Raw(u.arbitrary()?),
            1 => Patch::Ops(u.arbitrary()?),
            _ => Patch::Doubling(u.arbitrary()?),
        })
    }
}

impl<'a> Arbitrary<'a> for Op {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Op> {
        let path = match u.int_in_range(0..=2u8)? {
            0 => Path::Label(u.arbitrary()?),
            1 => Path::Data(u.arbitrary()?),
            _ => Path::Any(u.arbitrary()?),
        };
        Ok(Op { op: u.arbitrary()?, path, value: u.arbitrary()? })
    }
}

impl<'a> Arbitrary<'a> for ImageAnswer {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<ImageAnswer> {
        Ok(match u.int_in_range(0..=4u8)? {
            0 => ImageAnswer::Raw { status: u.arbitrary()?, body: u.arbitrary()? },
            1 => ImageAnswer::Unreachable(u.arbitrary()?),
            _ => ImageAnswer::Review { typed: u.ratio(7, 8)?, allowed: u.ratio(2, 3)?, reason: u.arbitrary()? },
        })
    }
}

impl<'a> Arbitrary<'a> for Write {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Write> {
        let name = u.arbitrary()?;
        Ok(match u.int_in_range(0..=4u8)? {
            0 => Write::Create { name, labels: u.arbitrary()? },
            1 => Write::Update { name, value: u.arbitrary()? },
            2 => Write::Patch { name, value: u.arbitrary()? },
            3 => Write::Delete { name },
            _ => Write::Pod { images: u.arbitrary()?, annotation: u.arbitrary()? },
        })
    }
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Input> {
        Ok(Input { mutating: u.arbitrary()?, validating: u.arbitrary()?, images: u.arbitrary()?, writes: u.arbitrary()? })
    }
}

pub fn admission_webhooks(data: &[u8]) {
    serve_input(&WORLD, INPUTS_PER_WORLD, data, world, serve);
}

thread_local! {
    static WORLD: KeptWorld = const { RefCell::new(None) };
}
/// Inputs served by one world before a fresh one (the objects of earlier inputs stay).
const INPUTS_PER_WORLD: u32 = 50;

/// The image policy backend's kubeconfig, the one file the world's configuration names.
const BACKEND: &str = "clusters: [{name: c, cluster: {server: 'https://images.example/policy', insecure-skip-tls-verify: true}}]
contexts: [{name: x, context: {cluster: c}}]
current-context: x
";

fn world() -> World {
    let mut setup = default_server();
    // Answers are not kept, so that each input's backend decides its pods. ServiceAccount,
    // off, lets pods be created without their service account.
    let config = b"imagePolicy: {kubeConfigFile: backend.kubeconfig, allowTTL: -1, denyTTL: -1}".to_vec();
    let configs = [("ImagePolicyWebhook".to_string(), config)].into_iter().collect();
    let read = |_: &str| Ok(BACKEND.as_bytes().to_vec());
    let chain =
        kapi_core::admission::Chain::from_flags(&["ImagePolicyWebhook".into()], &["ServiceAccount".into()], &configs, &read).expect("a valid configuration");
    Arc::get_mut(&mut setup.server).expect("not shared yet").admission = Arc::new(chain);
    let mut w = World::new(setup, epoch(), 13);
    w.start_controllers(Enabled::NONE);
    let rules = json!([{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]);
    for (kind, resource) in
        [("MutatingWebhookConfiguration", "mutatingwebhookconfigurations"), ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations")]
    {
        let hook = json!({"name": format!("{resource}.fuzz.example"), "clientConfig": {"url": format!("https://hook.example/{resource}")},
            "rules": rules, "sideEffects": "None", "admissionReviewVersions": ["v1"]});
        let config = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": "fuzz"}, "webhooks": [hook]});
        let r = w.call("POST", &format!("/apis/admissionregistration.k8s.io/v1/{resource}"), "", Some(&config), "application/json");
        assert_eq!(r.head.status, 201);
    }
    w
}

/// What was asked for one request: whether the validating webhook (or, for a pod, the backend) allowed it.
type Allowed = Arc<Mutex<bool>>;

fn serve(w: &mut World, input: Input) {
    let allowed: Allowed = Arc::default();
    let seen = allowed.clone();
    let answers = Arc::new(Mutex::new((input.mutating, input.validating, input.images, 0usize)));
    w.webhook = Some(Box::new(move |call: &WebhookCall| {
        let mut a = answers.lock().expect("one thread");
        let (mutating, validating, images, next) = &mut *a;
        *next += 1;
        if call.path.starts_with("/policy") {
            let Some(answer) = images.get(*next % images.len().max(1)) else { return Err("connection refused".into()) };
            let (answer, allows) = answer.give();
            *seen.lock().expect("one thread") = allows;
            return answer;
        }
        let is_mutating = call.path.starts_with("/mutating");
        let list = if is_mutating { mutating } else { validating };
        if list.is_empty() {
            return Err("connection refused".into());
        }
        let (answer, valid) = list[*next % list.len()].give(call, is_mutating);
        if !is_mutating {
            *seen.lock().expect("one thread") = valid;
        }
        answer
    }));
    let name = |n: u8| NAMES[usize::from(n) % NAMES.len()];
    for write in input.writes.iter().take(10) {
        *allowed.lock().expect("one thread") = false;
        let r = match write {
            Write::Create { name: n, labels } => {
                let labels: serde_json::Map<String, Value> = labels.iter().take(3).map(|(k, v)| (k.clone(), json!(v))).collect();
                let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name(*n), "labels": labels}, "data": {"k": "v"}});
                w.call("POST", CONFIGMAPS, "", Some(&obj), "application/json")
            }
            Write::Update { name: n, value } => {
                let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name(*n)}, "data": {"k": value}});
                w.call("PUT", &format!("{CONFIGMAPS}/{}", name(*n)), "", Some(&obj), "application/json")
            }
            Write::Patch { name: n, value } => {
                w.call("PATCH", &format!("{CONFIGMAPS}/{}", name(*n)), "", Some(&json!({"data": {"k": value}})), "application/merge-patch+json")
            }
            Write::Delete { name: n } => w.call("DELETE", &format!("{CONFIGMAPS}/{}", name(*n)), "", None, ""),
            Write::Pod { images, annotation } => {
                let containers: Vec<Value> = images.iter().take(3).enumerate().map(|(i, image)| json!({"name": format!("c{i}"), "image": image})).collect();
                let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "p-", "annotations": {"a.image-policy.k8s.io/b": annotation}},
                    "spec": {"containers": containers}});
                w.call("POST", "/api/v1/namespaces/default/pods", "", Some(&pod), "application/json")
            }
        };
        let code = r.head.status;
        assert!((200..600).contains(&code), "status {code}");
        let body: Value = serde_json::from_slice(&r.body).unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&r.body)));
        if code >= 400 {
            assert_eq!((body["kind"].as_str(), body["code"].as_u64()), (Some("Status"), Some(u64::from(code))), "{body}");
        } else {
            assert!(*allowed.lock().expect("one thread"), "{write:?} acknowledged ({code}) though the webhook or backend did not allow it: {body}");
        }
    }
}

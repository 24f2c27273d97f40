//! Mutating admission policies under fuzzing: a policy whose mutations are drawn from the
//! input (ApplyConfigurations of objects built from CEL's syntax over what a policy sees, with
//! right and wrong type names, known and unknown fields; JSON patches of every operation on
//! paths that exist, do not, or name what a ConfigMap must keep; any text), with a failure
//! policy and a reinvocation policy, then configmaps written with data drawn from the input.
//! The guard validating policy of `admission_policies` refuses configmaps holding the key
//! `deny`, which a mutation may add. Whatever the mutations do, every request is answered
//! with a `Status` or an object, no acknowledged write holds `deny` (the validating policies
//! see the mutated object), and what a write acknowledged is what a read then finds.

use std::cell::RefCell;

use arbitrary::{Arbitrary, Unstructured};
use kapi_core::controllers::Enabled;
use serde_json::{Value, json};

use super::admission_policies::{CONFIGMAPS, Write, checked, data, guarded, name};
use super::cel_rules::expression;
use super::{KeptWorld, serve_input};
use crate::{World, epoch, server_with_mutating_policies};

const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1alpha1/mutatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1alpha1/mutatingadmissionpolicybindings";

/// What a mutation's values are built of.
const ATOMS: [&str; 10] =
    ["object.data", "object.data.a", "object.metadata.name", "oldObject", "request.operation", "namespaceObject.metadata.name", "'deny'", "'a'", "1", "[1]"];

/// ApplyConfigurations (`#`: a value built of [`ATOMS`], `@`: a key of the input).
const APPLIED: [&str; 8] = [
    "Object{data: {'@': string(#)}}",
    "Object{data: {'@': #}}",
    "Object{metadata: Object.metadata{labels: {'@': 'x'}, annotations: {'a': string(#)}}}",
    "Object{metadata: Object.metadata{finalizers: ['example.com/f']}}",
    "Object{spec: Object.spec{replicas: #}}",
    "Object{metadata: Object.metadatax{name: 'x'}}",
    "Object{data: Object.data{a: 'x'}, ?binaryData: optional.none()}",
    "Object{metadata: Object.metadata{name: string(#)}}",
];

const OPS: [&str; 7] = ["add", "remove", "replace", "test", "move", "copy", "merge"];
const PATHS: [&str; 12] = [
    "/data/@",
    "/data",
    "/data/-",
    "/metadata/labels",
    "/metadata/labels/@",
    "/metadata/name",
    "/kind",
    "/apiVersion",
    "",
    "/x/y",
    "/data/a/b",
    "/metadata/uid",
];

/// One mutation: its patch type and expression.
fn mutation(u: &mut Unstructured) -> arbitrary::Result<Value> {
    let key = *u.choose(&["a", "b", "deny", "max"])?;
    let value = |u: &mut Unstructured| expression(u, &ATOMS, 3).map_err(|_| arbitrary::Error::NotEnoughData);
    if u.arbitrary()? {
        let e = match u.ratio(1, 10)? {
            true => u.arbitrary::<&str>()?.to_string(),
            false => u.choose(&APPLIED)?.replace('@', key).replace('#', &value(u)?),
        };
        return Ok(json!({"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": e}}));
    }
    let mut ops = Vec::new();
    for _ in 0..u.int_in_range(1..=3)? {
        let (op, path) = (*u.choose(&OPS)?, u.choose(&PATHS)?.replace('@', &format!("' + jsonpatch.escapeKey('{key}') + '")));
        let mut fields = format!("op: '{op}', path: '{path}'");
        if matches!(op, "move" | "copy") {
            fields.push_str(&format!(", from: '{}'", u.choose(&PATHS)?.replace('@', key)));
        }
        if u.arbitrary()? {
            fields.push_str(&format!(", value: {}", value(u)?));
        }
        ops.push(format!("JSONPatch{{{fields}}}"));
    }
    Ok(json!({"patchType": "JSONPatch", "jsonPatch": {"expression": format!("[{}]", ops.join(", "))}}))
}

#[derive(Debug)]
struct Input {
    policy: Value,
    writes: Vec<Write>,
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Input> {
        let mutations = (0..u.int_in_range(1..=3)?).map(|_| mutation(u)).collect::<arbitrary::Result<Vec<_>>>()?;
        let spec = json!({
            "failurePolicy": *u.choose(&["Fail", "Ignore"])?,
            "reinvocationPolicy": *u.choose(&["Never", "IfNeeded"])?,
            "matchConstraints": {"resourceRules": [{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]},
            "mutations": mutations,
        });
        Ok(Input {
            policy: json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicy", "metadata": {"name": "m-fuzz"}, "spec": spec}),
            writes: u.arbitrary()?,
        })
    }
}

pub fn mutating_policies(data: &[u8]) {
    serve_input(&WORLD, INPUTS_PER_WORLD, data, world, serve);
}

thread_local! {
    static WORLD: KeptWorld = const { RefCell::new(None) };
}
/// Inputs served by one world before a fresh one (the objects of earlier inputs stay).
const INPUTS_PER_WORLD: u32 = 50;

/// A world serving and running mutating policies, with the guard policy and a binding of the
/// fuzzed policy (which each input creates anew).
fn world() -> World {
    let mut w = World::new(server_with_mutating_policies(true, true), epoch(), 19);
    w.start_controllers(Enabled::NONE);
    guarded(&mut w);
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": "m-fuzz"},
        "spec": {"policyName": "m-fuzz"}});
    assert_eq!(w.call("POST", BINDINGS, "", Some(&binding), "application/json").head.status, 201);
    w
}

fn serve(w: &mut World, input: Input) {
    w.call("DELETE", &format!("{POLICIES}/m-fuzz"), "", None, "");
    checked(&w.call("POST", POLICIES, "", Some(&input.policy), "application/json"), "the policy");
    for write in input.writes.iter().take(8) {
        let r = match write {
            Write::Create { name: n, data: d } | Write::Update { name: n, data: d } => {
                let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name(*n)}, "data": data(d)});
                match write {
                    Write::Create { .. } => w.call("POST", CONFIGMAPS, "", Some(&obj), "application/json"),
                    _ => w.call("PUT", &format!("{CONFIGMAPS}/{}", name(*n)), "", Some(&obj), "application/json"),
                }
            }
            Write::Delete { name: n } => w.call("DELETE", &format!("{CONFIGMAPS}/{}", name(*n)), "", None, ""),
        };
        if !checked(&r, &format!("{write:?}")) || matches!(write, Write::Delete { .. }) {
            continue;
        }
        let written: Value = serde_json::from_slice(&r.body).expect("checked: JSON");
        assert!(written["data"].get("deny").is_none(), "{write:?} acknowledged though the guard policy refuses it: {written}");
        assert_eq!((written["kind"].as_str(), written["apiVersion"].as_str()), (Some("ConfigMap"), Some("v1")), "{written}");
        let stored_name = written["metadata"]["name"].as_str().unwrap_or_default();
        let read = w.call("GET", &format!("{CONFIGMAPS}/{stored_name}"), "", None, "");
        if read.head.status == 404 {
            // An update that took a terminating object's last finalizer away deleted it, and
            // answered with it as it was last stored (kube's answer).
            assert!(written["metadata"].get("deletionTimestamp").is_some(), "{write:?}: acknowledged, then not found: {written}");
            continue;
        }
        let read: Value = serde_json::from_slice(&read.body).unwrap_or_default();
        assert_eq!(read, written, "{write:?}: what was acknowledged is not what is stored");
    }
}

//! Validating admission policies under fuzzing: a policy drawn from the input (its match
//! conditions, variables, validations, message expressions and audit annotations built from
//! CEL's syntax over what a policy's expressions see, or any text; a failure policy; a
//! parameter kind or none) with a binding (a parameter by name or by selector, or none; any
//! validation actions), then configmaps written with data drawn from the input. Beside it a
//! guard policy refuses configmaps that hold the key `deny`. Whatever the fuzzed policy is
//! (refused when created, failing, over its cost limits), every request is answered with a
//! `Status` or an object, and no write of a configmap holding `deny` is acknowledged.

use std::cell::RefCell;

use arbitrary::{Arbitrary, Unstructured};
use kapi_core::controllers::Enabled;
use serde_json::{Value, json};

use super::cel_rules::expression;
use super::{KeptWorld, serve_input};
use crate::{World, default_server, epoch};

pub(super) const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
const NAMES: &[&str] = &["a", "b", "c"];
const KEYS: &[&str] = &["deny", "max", "a", "b"];

/// What a policy's expressions are built of.
const ATOMS: [&str; 18] = [
    "object",
    "oldObject",
    "object.data",
    "object.data.a",
    "object.metadata.name",
    "oldObject.data",
    "params",
    "params.data",
    "params.data.max",
    "request.operation",
    "request.userInfo.username",
    "request.name",
    "namespaceObject.metadata.name",
    "variables.v",
    "variables.w",
    "'a'",
    "1",
    "[1, 2]",
];

/// What an expression may name: `params` only with `paramKind`, `variables` only where they
/// are declared (not in match conditions), as kube checks a policy.
struct Scope {
    params: bool,
    variables: bool,
}

/// One expression: mostly built (of a few parts, most of the time: a policy any of whose
/// expressions does not check is refused), now and then any text.
fn text(u: &mut Unstructured, scope: &Scope) -> arbitrary::Result<String> {
    if u.ratio(1, 8)? {
        return Ok(u.arbitrary::<&str>()?.to_string());
    }
    let atoms: Vec<&str> =
        ATOMS.iter().copied().filter(|a| (scope.params || !a.starts_with("params")) && (scope.variables || !a.starts_with("variables"))).collect();
    let start = if u.ratio(3, 4)? { 4 } else { 2 };
    expression(u, &atoms, start).map_err(|_| arbitrary::Error::NotEnoughData)
}

/// One expression of a type (`wrap`'s `#` is the expression built, most of the time: a policy
/// whose expressions give other types is refused).
fn typed(u: &mut Unstructured, scope: &Scope, wrap: &str) -> arbitrary::Result<String> {
    let e = text(u, scope)?;
    Ok(if u.ratio(1, 5)? { e } else { wrap.replace('#', &e) })
}

fn texts(u: &mut Unstructured, scope: &Scope, at_most: u8, wrap: &str) -> arbitrary::Result<Vec<String>> {
    let n = u.int_in_range(0..=at_most)?;
    (0..n).map(|_| typed(u, scope, wrap)).collect()
}

/// Conditions that check (a `#`: a string of the input), so that a policy's other parts are
/// reached more often.
const CHECKED: [&str; 8] = [
    "object.data.a == '#'",
    "!has(object.data) || size(object.data) < 3",
    "object.data.all(k, k != '#')",
    "request.operation == 'CREATE' || oldObject.data.a != '#'",
    "params.data.max == '#'",
    "variables.v == '#'",
    "object.metadata.name.startsWith('#')",
    "namespaceObject.metadata.name == 'default'",
];

/// A bool that checks, or a generated one.
fn condition(u: &mut Unstructured, scope: &Scope, wrap: &str) -> arbitrary::Result<String> {
    if u.ratio(1, 2)? {
        return typed(u, scope, wrap);
    }
    let usable: Vec<&str> =
        CHECKED.iter().copied().filter(|c| (scope.params || !c.starts_with("params")) && (scope.variables || !c.starts_with("variables"))).collect();
    Ok(u.choose(&usable)?.replace('#', u.choose(&["a", "b", "1", ""])?))
}

/// How an expression is made a bool.
const BOOL: [&str; 3] = ["string(#) != ''", "has(object.data) && size(#) < 3", "# == #"];

/// A write of a configmap.
#[derive(Debug)]
pub(super) enum Write {
    Create { name: u8, data: Vec<(u8, String)> },
    Update { name: u8, data: Vec<(u8, String)> },
    Delete { name: u8 },
}

impl<'a> Arbitrary<'a> for Write {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Write> {
        let name = u.arbitrary()?;
        Ok(match u.int_in_range(0..=2u8)? {
            0 => Write::Create { name, data: u.arbitrary()? },
            1 => Write::Update { name, data: u.arbitrary()? },
            _ => Write::Delete { name },
        })
    }
}

#[derive(Debug)]
struct Input {
    policy: Value,
    binding: Value,
    params: Vec<(u8, String)>,
    writes: Vec<Write>,
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Input> {
        let with_params: bool = u.arbitrary()?;
        let (conditions_scope, scope) = (Scope { params: with_params, variables: false }, Scope { params: with_params, variables: true });
        let boolean = *u.choose(&BOOL)?;
        let conditions: Vec<String> = (0..u.int_in_range(0..=1)?).map(|_| condition(u, &conditions_scope, boolean)).collect::<arbitrary::Result<_>>()?;
        let conditions: Vec<Value> = conditions.into_iter().enumerate().map(|(i, e)| json!({"name": format!("c{i}"), "expression": e})).collect();
        let variables: Vec<Value> = texts(u, &scope, 2, "#")?.into_iter().zip(["v", "w"]).map(|(e, n)| json!({"name": n, "expression": e})).collect();
        let mut validations = Vec::new();
        for _ in 0..u.int_in_range(1..=2)? {
            let mut v = json!({"expression": condition(u, &scope, boolean)?});
            if u.arbitrary()? {
                v["messageExpression"] = json!(typed(u, &scope, "string(#)")?);
            }
            if u.arbitrary()? {
                v["reason"] = json!(*u.choose(&["Forbidden", "Invalid", "RequestEntityTooLarge"])?);
            }
            validations.push(v);
        }
        let audits: Vec<Value> = texts(u, &scope, 1, "string(#)")?.into_iter().map(|e| json!({"key": "k", "valueExpression": e})).collect();
        let mut spec = json!({
            "failurePolicy": *u.choose(&["Fail", "Ignore"])?,
            "matchConstraints": {"resourceRules": [{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]},
            "matchConditions": conditions, "variables": variables, "validations": validations, "auditAnnotations": audits,
        });
        if with_params {
            spec["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        }
        let mut binding = json!({"policyName": "a-fuzz", "validationActions": [*u.choose(&["Deny", "Warn", "Audit"])?]});
        if with_params && u.arbitrary()? {
            let action = *u.choose(&["Deny", "Allow"])?;
            binding["paramRef"] = match u.arbitrary()? {
                true => json!({"name": "params", "parameterNotFoundAction": action}),
                false => json!({"selector": {"matchLabels": {"params": "yes"}}, "parameterNotFoundAction": action}),
            };
        }
        Ok(Input {
            policy: json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "a-fuzz"}, "spec": spec}),
            binding: json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "a-fuzz"}, "spec": binding}),
            params: u.arbitrary()?,
            writes: u.arbitrary()?,
        })
    }
}

pub fn admission_policies(data: &[u8]) {
    serve_input(&WORLD, INPUTS_PER_WORLD, data, world, serve);
}

thread_local! {
    static WORLD: KeptWorld = const { RefCell::new(None) };
}
/// Inputs served by one world before a fresh one (the objects of earlier inputs stay).
const INPUTS_PER_WORLD: u32 = 50;

/// A world with the guard policy: configmaps holding the key `deny` are refused.
fn world() -> World {
    let mut w = World::new(default_server(), epoch(), 17);
    w.start_controllers(Enabled::NONE);
    guarded(&mut w);
    w
}

/// Adds the guard policy to `w`.
pub(super) fn guarded(w: &mut World) {
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "guard"},
        "spec": {"matchConstraints": {"resourceRules": [{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]},
            "matchConditions": [{"name": "written", "expression": "object != null"}],
            "validations": [{"expression": "!has(object.data) || !('deny' in object.data)"}]}});
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "guard"},
        "spec": {"policyName": "guard", "validationActions": ["Deny"]}});
    for (path, body) in [(POLICIES, policy), (BINDINGS, binding)] {
        assert_eq!(w.call("POST", path, "", Some(&body), "application/json").head.status, 201);
    }
}

/// Checks an answer is a `Status` or an object; whether the write was acknowledged.
pub(super) fn checked(r: &crate::Response, what: &str) -> bool {
    let code = r.head.status;
    assert!((200..600).contains(&code), "status {code} for {what}");
    let body: Value = serde_json::from_slice(&r.body).unwrap_or_else(|_| panic!("not JSON for {what}: {}", String::from_utf8_lossy(&r.body)));
    if code >= 400 {
        assert_eq!((body["kind"].as_str(), body["code"].as_u64()), (Some("Status"), Some(u64::from(code))), "{what}: {body}");
    }
    code < 400
}

/// A configmap's data of the input's pairs.
pub(super) fn data(pairs: &[(u8, String)]) -> Value {
    pairs.iter().take(4).map(|(k, v)| (KEYS[usize::from(*k) % KEYS.len()].to_string(), json!(v))).collect::<serde_json::Map<String, Value>>().into()
}

/// A configmap's name of the input's byte.
pub(super) fn name(n: u8) -> &'static str {
    NAMES[usize::from(n) % NAMES.len()]
}

fn serve(w: &mut World, input: Input) {
    for path in [format!("{BINDINGS}/a-fuzz"), format!("{POLICIES}/a-fuzz")] {
        w.call("DELETE", &path, "", None, "");
    }
    checked(&w.call("POST", POLICIES, "", Some(&input.policy), "application/json"), "the policy");
    checked(&w.call("POST", BINDINGS, "", Some(&input.binding), "application/json"), "the binding");
    let params = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "params", "namespace": "default", "labels": {"params": "yes"}},
        "data": data(&input.params)});
    checked(&w.call("PUT", &format!("{CONFIGMAPS}/params"), "", Some(&params), "application/json"), "the params");
    for write in input.writes.iter().take(8) {
        let (r, denied) = match write {
            Write::Create { name: n, data: d } | Write::Update { name: n, data: d } => {
                let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name(*n)}, "data": data(d)});
                let denied = obj["data"].get("deny").is_some();
                let r = match write {
                    Write::Create { .. } => w.call("POST", CONFIGMAPS, "", Some(&obj), "application/json"),
                    _ => w.call("PUT", &format!("{CONFIGMAPS}/{}", name(*n)), "", Some(&obj), "application/json"),
                };
                (r, denied)
            }
            Write::Delete { name: n } => (w.call("DELETE", &format!("{CONFIGMAPS}/{}", name(*n)), "", None, ""), false),
        };
        let acknowledged = checked(&r, &format!("{write:?}"));
        assert!(!(acknowledged && denied), "{write:?} acknowledged though the guard policy refuses it: {}", String::from_utf8_lossy(&r.body));
    }
}

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::admission::Operation;
use crate::resources::{Settings, catalog};

fn policy(name: &str, version: &str, spec: Value) -> Value {
    json!({"metadata": {"name": name, "resourceVersion": version}, "spec": spec})
}

fn binding(name: &str, policy: &str, spec: Value) -> Value {
    let mut b = json!({"metadata": {"name": name}, "spec": {"policyName": policy, "validationActions": ["Deny"]}});
    for (k, v) in spec.as_object().unwrap() {
        b["spec"][k] = v.clone();
    }
    b
}

const RULES: &str = r#"{"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]}"#;

fn spec(extra: Value) -> Value {
    let mut s = json!({"matchConstraints": serde_json::from_str::<Value>(RULES).unwrap(), "validations": [{"expression": "true"}]});
    for (k, v) in extra.as_object().unwrap() {
        s[k] = v.clone();
    }
    s
}

#[test]
fn policies_meet_writes_only_through_bindings_in_name_order() {
    let cat = catalog(&Settings::default());
    let empty = Policies::unread(&cat);
    assert!(!empty.synced(), "served policies are to be read first");
    let p = empty.with(Source::Policies, &[policy("b", "1", spec(json!({}))), policy("a", "1", spec(json!({}))), policy("lonely", "1", spec(json!({})))], &cat);
    assert!(!p.synced());
    let p = p.with(
        Source::PolicyBindings,
        &[binding("z", "a", json!({})), binding("y", "a", json!({})), binding("x", "b", json!({})), binding("orphan", "gone", json!({}))],
        &cat,
    );
    assert!(p.synced());
    let names: Vec<(&str, Vec<&str>)> = p.hooks.iter().map(|h| (h.policy.name.as_str(), h.bindings.iter().map(|b| b.name.as_str()).collect())).collect();
    assert_eq!(names, [("a", vec!["y", "z"]), ("b", vec!["x"])]);
}

#[test]
fn a_policy_is_compiled_again_only_when_its_resource_version_changes() {
    let cat = catalog(&Settings::default());
    let p = Policies::unread(&cat).with(Source::PolicyBindings, &[binding("b", "p", json!({}))], &cat);
    let first = p.with(Source::Policies, &[policy("p", "5", spec(json!({})))], &cat);
    let same = first.with(Source::Policies, &[policy("p", "5", spec(json!({})))], &cat);
    assert!(Arc::ptr_eq(&first.hooks[0].policy, &same.hooks[0].policy));
    let changed = same.with(Source::Policies, &[policy("p", "6", spec(json!({"validations": [{"expression": "1 +"}]})))], &cat);
    assert!(changed.hooks[0].policy.validations[0].expression.expression.is_err());
}

#[test]
fn params_are_found_by_kind_and_looked_up_where_the_binding_says() {
    let cat = catalog(&Settings::default());
    let spec = spec(json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}}));
    let p = Policies::unread(&cat)
        .with(
            Source::Policies,
            &[policy("p", "1", spec), policy("q", "1", super::tests::spec(json!({"paramKind": {"apiVersion": "example.com/v1", "kind": "Nope"}})))],
            &cat,
        )
        .with(
            Source::PolicyBindings,
            &[
                binding("by-name", "p", json!({"paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}})),
                binding("elsewhere", "p", json!({"paramRef": {"namespace": "config", "selector": {}, "parameterNotFoundAction": "Allow"}})),
                binding("q", "q", json!({"paramRef": {"name": "x", "parameterNotFoundAction": "Allow"}})),
            ],
            &cat,
        );
    assert_eq!(p.hooks[0].params, Ok(Some(ParamResource { group: "".into(), version: "v1".into(), resource: "configmaps".into(), namespaced: true })));
    assert_eq!(p.hooks[1].params, Err("failed to find resource referenced by paramKind: 'example.com/v1, Kind=Nope'".into()));
    let info = &cat.get("", "v1", "configmaps").unwrap().info;
    let pending = Pending { operation: Operation::Create, info, subresource: None, namespace: Some("dev"), name: None, object: None, dry_run: false };
    let resource = || (String::new(), "v1".to_string(), "configmaps".to_string());
    assert_eq!(
        p.lookups(&pending),
        [
            Lookup::Namespace("dev".into()),
            Lookup::Params { resource: resource(), namespace: Some("dev".into()), name: Some("limits".into()) },
            Lookup::Params { resource: resource(), namespace: Some("config".into()), name: None },
        ]
    );
    // A write the policies' rules cannot name reads no parameters.
    let secrets = &cat.get("", "v1", "secrets").unwrap().info;
    assert_eq!(p.lookups(&Pending { info: secrets, ..pending }), [Lookup::Namespace("dev".into())]);
}

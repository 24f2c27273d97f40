//! The validatingadmissionpolicy-status-controller: a policy's `status.typeChecking` gets
//! kube's type check of its validations against the kinds it matches, for each generation.

use kapi_core::controllers::Enabled;
use kapi_sim::{World, default_server, epoch};
use serde_json::{Value, json};

const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";

fn world() -> World {
    let mut w = World::new(default_server(), epoch(), 11);
    w.start_controllers(Enabled { policy_status: true, ..Enabled::NONE });
    w
}

fn policy(name: &str, rules: Value, spec: Value) -> Value {
    let mut body = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
        "spec": {"matchConstraints": {"resourceRules": rules}},
    });
    for (k, v) in spec.as_object().unwrap() {
        body["spec"][k] = v.clone();
    }
    body
}

fn deployments() -> Value {
    json!([{"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}])
}

fn status(w: &mut World, name: &str) -> Value {
    let r = w.call("GET", &format!("{POLICIES}/{name}"), "", None, "");
    assert_eq!(r.head.status, 200);
    r.json()["status"].clone()
}

/// The policy's `status.typeChecking.expressionWarnings`.
fn warnings(w: &mut World, name: &str) -> Value {
    status(w, name)["typeChecking"]["expressionWarnings"].clone()
}

fn create(w: &mut World, body: Value) {
    let r = w.call("POST", POLICIES, "", Some(&body), "application/json");
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
}

#[test]
fn a_policy_that_checks_gets_an_empty_type_checking() {
    let mut w = world();
    create(&mut w, policy("correct", deployments(), json!({"validations": [{"expression": "object.spec.replicas > 1"}]})));
    assert_eq!(status(&mut w, "correct"), json!({"observedGeneration": 1, "typeChecking": {}}));
    let r = w.call("GET", &format!("{POLICIES}/correct"), "", None, "");
    let managers: Vec<Value> = r.json()["metadata"]["managedFields"].as_array().unwrap().iter().map(|m| m["manager"].clone()).collect();
    assert!(managers.contains(&json!("validatingadmissionpolicy-status")), "{managers:?}");
}

#[test]
fn type_confusion_is_warned_per_expression_and_kind_in_kubes_words() {
    let mut w = world();
    // kube's e2e "should type check validation expressions".
    let spec = json!({"validations": [{"expression": "object.spec.replicas > '1'", "messageExpression": "'wants replicas > 1, got ' + object.spec.replicas"}]});
    create(&mut w, policy("confused", deployments(), spec));
    let warnings = warnings(&mut w, "confused");
    assert_eq!(
        warnings,
        json!([
            {"fieldRef": "spec.validations[0].expression",
             "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:22: found no matching overload for '_>_' applied to '(int, string)'\n | object.spec.replicas > '1'\n | .....................^\n"},
            {"fieldRef": "spec.validations[0].messageExpression",
             "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:28: found no matching overload for '_+_' applied to '(string, int)'\n | 'wants replicas > 1, got ' + object.spec.replicas\n | ...........................^\n"},
        ])
    );
}

#[test]
fn every_kind_matched_exactly_is_checked_in_order_and_wildcards_are_not() {
    let mut w = world();
    let rules = json!([
        {"operations": ["*"], "apiGroups": ["apps", ""], "apiVersions": ["v1"], "resources": ["replicasets", "deployments", "pods", "pods/status", "*"]},
        {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["v1"], "resources": ["configmaps"]},
    ]);
    create(&mut w, policy("replicas", rules, json!({"validations": [{"expression": "object.replicas > 1"}, {"expression": "object.metadata.name != ''"}]})));
    let warnings = warnings(&mut w, "replicas");
    let line = |gvk: &str| format!("{gvk}: ERROR: <input>:1:7: undefined field 'replicas'\n | object.replicas > 1\n | ......^\n");
    let want = [line("/v1, Kind=Pod"), line("apps/v1, Kind=Deployment"), line("apps/v1, Kind=ReplicaSet")].join("\n");
    assert_eq!(warnings, json!([{"fieldRef": "spec.validations[0].expression", "warning": want}]));
}

#[test]
fn params_and_variables_are_typed_too() {
    let mut w = world();
    let spec = json!({
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "variables": [{"name": "replicas", "expression": "object.spec.replicas"}],
        "validations": [
            {"expression": "variables.replicas <= params.data.max"},
            {"expression": "params.spec == null"},
            {"expression": "object.metadata.labels['tier'] == params.data.tier && variables.missing"},
        ],
    });
    create(&mut w, policy("typed", deployments(), spec));
    let warnings = warnings(&mut w, "typed");
    assert_eq!(
        warnings,
        json!([
            {"fieldRef": "spec.validations[0].expression",
             "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:20: found no matching overload for '_<=_' applied to '(int, string)'\n | variables.replicas <= params.data.max\n | ...................^\n"},
            {"fieldRef": "spec.validations[1].expression",
             "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'spec'\n | params.spec == null\n | ......^\n"},
            {"fieldRef": "spec.validations[2].expression",
             "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:64: undefined field 'missing'\n | object.metadata.labels['tier'] == params.data.tier && variables.missing\n | ...............................................................^\n"},
        ])
    );
}

#[test]
fn a_new_generation_is_checked_again() {
    let mut w = world();
    create(&mut w, policy("changing", deployments(), json!({"validations": [{"expression": "object.spec.replicas > 1"}]})));
    let mut current = w.call("GET", &format!("{POLICIES}/changing"), "", None, "").json();
    current["spec"]["validations"][0]["expression"] = json!("object.spec.replica > 1");
    let r = w.call("PUT", &format!("{POLICIES}/changing"), "", Some(&current), "application/json");
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let s = status(&mut w, "changing");
    assert_eq!(s["observedGeneration"], 2);
    assert_eq!(s["typeChecking"]["expressionWarnings"][0]["fieldRef"], "spec.validations[0].expression");
    assert!(s["typeChecking"]["expressionWarnings"][0]["warning"].as_str().unwrap().contains("undefined field 'replica'"), "{s}");
}

#[test]
fn a_custom_resource_is_typed_by_its_schema_with_the_whole_metadata() {
    let mut w = world();
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}});
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}]}});
    let r = w.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "", Some(&crd), "application/json");
    assert_eq!(r.head.status, 201);
    let rules = json!([{"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["gadgets"]}]);
    let spec = json!({"validations": [
        {"expression": "object.metadata.labels['tier'] == 'web' && object.spec.size > 1 && object.kind == 'Gadget'"},
        {"expression": "object.spec.size > 'a'"},
    ]});
    create(&mut w, policy("gadgets", rules, spec));
    let warnings = warnings(&mut w, "gadgets");
    assert_eq!(
        warnings,
        json!([{"fieldRef": "spec.validations[1].expression",
            "warning": "example.com/v1, Kind=Gadget: ERROR: <input>:1:18: found no matching overload for '_>_' applied to '(int, string)'\n | object.spec.size > 'a'\n | .................^\n"}])
    );
}

#[test]
fn a_kind_not_served_is_not_checked_and_a_param_kind_not_served_is_not_declared() {
    let mut w = world();
    let rules = json!([{"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["nothings"]},
        {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]);
    let spec = json!({"paramKind": {"apiVersion": "example.com/v1", "kind": "Nothing"}, "validations": [{"expression": "object.nothing == params.x"}]});
    create(&mut w, policy("nothing", rules, spec));
    let warnings = warnings(&mut w, "nothing");
    let want = "/v1, Kind=ConfigMap: ERROR: <input>:1:7: undefined field 'nothing'\n | object.nothing == params.x\n | ......^\n\
        ERROR: <input>:1:19: undeclared reference to 'params' (in container '')\n | object.nothing == params.x\n | ..................^\n";
    assert_eq!(warnings, json!([{"fieldRef": "spec.validations[0].expression", "warning": want}]));
}

#[test]
fn a_kind_whose_schema_nests_itself_is_typed_down_to_where_it_does() {
    let mut w = world();
    let rules = json!([{"operations": ["CREATE"], "apiGroups": ["apiextensions.k8s.io"], "apiVersions": ["v1"], "resources": ["customresourcedefinitions"]}]);
    let spec = json!({"validations": [
        {"expression": "object.spec.versions[0].schema.openAPIV3Schema.type == 1"},
        {"expression": "object.spec.versions[0].schema.openAPIV3Schema.properties['a'].type == 1"},
    ]});
    create(&mut w, policy("crds", rules, spec));
    let warnings = warnings(&mut w, "crds");
    assert_eq!(warnings.as_array().unwrap().len(), 1, "{warnings}");
    assert_eq!(warnings[0]["fieldRef"], "spec.validations[0].expression");
    assert!(warnings[0]["warning"].as_str().unwrap().contains("found no matching overload for '_==_' applied to '(string, int)'"), "{warnings}");
}

#[test]
fn the_core_group_stands_for_every_group_and_singular_names_resolve() {
    let mut w = world();
    let rules = json!([{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["events", "Namespace"]}]);
    create(&mut w, policy("events", rules, json!({"validations": [{"expression": "object.nothing"}]})));
    let warning = warnings(&mut w, "events")[0]["warning"].as_str().unwrap().to_string();
    let kinds: Vec<&str> = warning.lines().filter_map(|l| l.split_once(": ERROR").map(|(k, _)| k)).collect();
    assert_eq!(kinds, ["/v1, Kind=Event", "/v1, Kind=Namespace", "events.k8s.io/v1, Kind=Event"]);
}

#[test]
fn a_variable_giving_an_object_is_declared_dyn_and_one_giving_a_map_keeps_its_values() {
    let mut w = world();
    let spec = json!({
        "variables": [{"name": "spec", "expression": "object.spec"}, {"name": "labels", "expression": "object.metadata.labels"}],
        "validations": [{"expression": "variables.spec.replicaz > 1"}, {"expression": "variables.labels['tier'] > 1"}],
    });
    create(&mut w, policy("vars", deployments(), spec));
    let warnings = warnings(&mut w, "vars");
    assert_eq!(warnings.as_array().unwrap().len(), 1, "{warnings}");
    assert_eq!(warnings[0]["fieldRef"], "spec.validations[1].expression");
    assert!(warnings[0]["warning"].as_str().unwrap().contains("found no matching overload for '_>_' applied to '(string, int)'"), "{warnings}");
}

//! Mutating admission policies (admissionregistration.k8s.io/v1alpha1, kube's alpha
//! MutatingAdmissionPolicy) through the core's request pipeline: served only with
//! `--runtime-config`, run only with the feature gate; kube's checks of a policy; what an
//! ApplyConfiguration and a JSON patch do to a write; reinvocation; kube's refusals.

use kapi_core::controllers::Enabled;
use kapi_sim::{Response, World, epoch, server_with_mutating_policies};
use serde_json::{Value, json};

const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1alpha1/mutatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1alpha1/mutatingadmissionpolicybindings";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// A server serving v1alpha1 (`served`) with the feature gate `gate`.
fn world_with(served: bool, gate: bool) -> World {
    let mut w = World::new(server_with_mutating_policies(served, gate), epoch(), 11);
    w.start_controllers(Enabled::NONE);
    w
}

fn world() -> World {
    world_with(true, true)
}

fn text(r: &Response) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

fn body(r: &Response) -> Value {
    serde_json::from_slice(&r.body).unwrap_or_default()
}

fn create(w: &mut World, path: &str, body: &Value) -> Response {
    w.call("POST", path, "", Some(body), "application/json")
}

fn created(w: &mut World, path: &str, body: Value) -> Value {
    let r = create(w, path, &body);
    assert_eq!(r.head.status, 201, "{}", text(&r));
    self::body(&r)
}

/// A policy on configmaps' creates and updates with these mutations (`patchType` and
/// expression), `spec` added.
fn policy(w: &mut World, name: &str, mutations: &[(&str, &str)], spec: Value) {
    let mutations: Vec<Value> = mutations
        .iter()
        .map(|(t, e)| match *t {
            "JSONPatch" => json!({"patchType": t, "jsonPatch": {"expression": e}}),
            _ => json!({"patchType": t, "applyConfiguration": {"expression": e}}),
        })
        .collect();
    let mut body = json!({
        "apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicy", "metadata": {"name": name},
        "spec": {
            "matchConstraints": {"resourceRules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]},
            "mutations": mutations, "reinvocationPolicy": "Never",
        },
    });
    for (k, v) in spec.as_object().unwrap() {
        body["spec"][k] = v.clone();
    }
    created(w, POLICIES, body);
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": format!("{name}-binding")},
        "spec": {"policyName": name},
    });
    created(w, BINDINGS, binding);
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}})
}

const ANNOTATE: &str = "Object{metadata: Object.metadata{annotations: {'mutated-by': 'policy'}}}";

#[test]
fn the_api_is_served_only_with_the_runtime_config_and_the_policies_run_only_with_the_gate() {
    let mut w = world_with(false, true);
    assert_eq!(w.call("GET", "/apis/admissionregistration.k8s.io/v1alpha1", "", None, "").head.status, 404);
    let group = body(&w.call("GET", "/apis/admissionregistration.k8s.io", "", None, ""));
    assert_eq!(group["versions"].as_array().map(Vec::len), Some(1), "{group}");

    let mut w = world_with(true, false);
    let list = body(&w.call("GET", "/apis/admissionregistration.k8s.io/v1alpha1", "", None, ""));
    let names: Vec<&str> = list["resources"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, ["mutatingadmissionpolicies", "mutatingadmissionpolicybindings"]);
    let group = body(&w.call("GET", "/apis/admissionregistration.k8s.io", "", None, ""));
    assert_eq!(group["preferredVersion"]["version"], "v1", "{group}");
    policy(&mut w, "annotate", &[("ApplyConfiguration", ANNOTATE)], json!({}));
    let cm = created(&mut w, CONFIGMAPS, configmap("off"));
    assert!(cm["metadata"].get("annotations").is_none(), "the gate is off: {cm}");

    let mut w = world();
    policy(&mut w, "annotate", &[("ApplyConfiguration", ANNOTATE)], json!({}));
    let got = body(&w.call("GET", &format!("{POLICIES}/annotate"), "", None, ""));
    assert_eq!(got["spec"]["failurePolicy"], "Fail");
    assert_eq!(got["spec"]["matchConstraints"]["matchPolicy"], "Equivalent");
    assert_eq!(got["metadata"]["generation"], 1);
    let cm = created(&mut w, CONFIGMAPS, configmap("on"));
    assert_eq!(cm["metadata"]["annotations"], json!({"mutated-by": "policy"}));
}

#[test]
fn a_policy_is_checked_as_kube_checks_it() {
    let mut w = world();
    let bad = json!({
        "apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicy", "metadata": {"name": "bad"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]},
            "mutations": [
                {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "\"I'm a teapot!\""}},
                {"patchType": "JSONPatch", "applyConfiguration": {"expression": "[]"}},
                {"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: 1}]"}},
                {"patchType": "Merge"},
            ],
        },
    });
    let r = create(&mut w, POLICIES, &bad);
    assert_eq!(r.head.status, 422, "{}", text(&r));
    let causes: Vec<String> = body(&r)["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{}: {}", c["field"].as_str().unwrap(), c["message"].as_str().unwrap()))
        .collect();
    let expected = [
        "spec.matchConstraints.resourceRules.operations: Unsupported value: \"DELETE\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"UPDATE\"",
        "spec.mutations[0].applyConfiguration.expression: Invalid value: \"\\\"I'm a teapot!\\\"\": must evaluate to Object but got string",
        "spec.mutations[1].jsonPatch: Required value: must be specified when patchType is JSONPatch",
        "spec.mutations[1].applyConfiguration: Invalid value: \"{applyConfiguration}\": must not be specified when patchType is JSONPatch",
        "spec.mutations[3].patchType: Unsupported value: \"Merge\": supported values: \"ApplyConfiguration\", \"JSONPatch\"",
        "spec.reinvocationPolicy: Required value",
    ];
    for e in expected {
        assert!(causes.iter().any(|c| c == e), "{e} not in {causes:#?}");
    }
    assert!(causes.iter().any(|c| c.starts_with("spec.mutations[2].jsonPatch.expression: Invalid value: \"[JSONPatch{op: 1}]\": compilation failed: ERROR: <input>:1:14: expected type of field 'op' is 'string' but provided type is 'int'")), "{causes:#?}");
    let none = json!({
        "apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicy", "metadata": {"name": "none"},
        "spec": {"matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}, "reinvocationPolicy": "Never"},
    });
    let r = create(&mut w, POLICIES, &none);
    assert!(text(&r).contains("spec.mutations: Required value: mutations must contain at least one item"), "{}", text(&r));
}

#[test]
fn an_apply_configuration_merges_and_a_json_patch_applies() {
    let mut w = world();
    policy(
        &mut w,
        "both",
        &[
            ("ApplyConfiguration", "Object{data: {'b': string(size(object.data))}}"),
            (
                "JSONPatch",
                "[JSONPatch{op: 'add', path: '/metadata/labels', value: {}}, JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('example.com/team'), value: 'web'}]",
            ),
            // A failed test leaves the object as it was, without an error.
            ("JSONPatch", "[JSONPatch{op: 'add', path: '/data/c', value: 'x'}, JSONPatch{op: 'test', path: '/data/a', value: 'no'}]"),
        ],
        json!({}),
    );
    let cm = created(&mut w, CONFIGMAPS, configmap("cm"));
    assert_eq!(cm["data"], json!({"a": "1", "b": "1"}), "{cm}");
    assert_eq!(cm["metadata"]["labels"], json!({"example.com/team": "web"}));
    // On update too, each mutation seeing the object as the one before left it.
    let mut updated = cm.clone();
    updated["data"]["z"] = json!("2");
    let r = w.call("PUT", &format!("{CONFIGMAPS}/cm"), "", Some(&updated), "application/json");
    assert_eq!(body(&r)["data"], json!({"a": "1", "b": "3", "z": "2"}), "{}", text(&r));
}

#[test]
fn failures_are_refused_in_kubes_words_unless_the_policy_ignores_them() {
    let mut w = world();
    policy(&mut w, "unknown", &[("ApplyConfiguration", "Object{spec: Object.spec{replicas: 1}}")], json!({}));
    let r = create(&mut w, CONFIGMAPS, &configmap("a"));
    assert_eq!(r.head.status, 403, "{}", text(&r));
    let b = body(&r);
    assert_eq!(b["reason"], "Invalid");
    assert_eq!(
        b["message"],
        "policy 'unknown' with binding 'unknown-binding' denied request: error applying patch: failed to convert patch object to typed object: .spec: field not declared in schema"
    );
    assert_eq!(b["details"]["causes"][0]["message"], b["message"]);
    w.call("DELETE", &format!("{POLICIES}/unknown"), "", None, "");

    policy(&mut w, "ignored", &[("JSONPatch", "[JSONPatch{op: 'remove', path: '/data/nope'}]")], json!({"failurePolicy": "Ignore"}));
    assert_eq!(create(&mut w, CONFIGMAPS, &configmap("b")).head.status, 201);
    w.call("DELETE", &format!("{POLICIES}/ignored"), "", None, "");

    // A JSON patch whose result is no ConfigMap: kube's strict decoding, a 500.
    policy(&mut w, "strict", &[("JSONPatch", "[JSONPatch{op: 'add', path: '/datax', value: 1}]")], json!({"failurePolicy": "Ignore"}));
    let r = create(&mut w, CONFIGMAPS, &configmap("c"));
    assert_eq!(r.head.status, 500, "{}", text(&r));
    assert_eq!(body(&r)["message"], "Internal error occurred: strict decoding error: unknown field \"datax\"");
    w.call("DELETE", &format!("{POLICIES}/strict"), "", None, "");

    policy(&mut w, "missing", &[("JSONPatch", "[JSONPatch{op: 'replace', path: '/metadata/labels/x', value: 'y'}]")], json!({}));
    let r = create(&mut w, CONFIGMAPS, &configmap("d"));
    assert_eq!(
        body(&r)["message"],
        "policy 'missing' with binding 'missing-binding' denied request: JSON Patch: replace operation does not apply: doc is missing path: /metadata/labels/x: missing value"
    );
}

#[test]
fn a_change_reinvokes_the_policies_that_ask_for_it_once() {
    let mut w = world();
    let count = "Object{metadata: Object.metadata{annotations: {'foo': string(int(object.metadata.?annotations.foo.orValue('0')) + 1)}}}";
    for (name, reinvoke) in [("p1", "IfNeeded"), ("p2", "IfNeeded"), ("p3", "Never")] {
        policy(&mut w, name, &[("ApplyConfiguration", count)], json!({"reinvocationPolicy": reinvoke}));
    }
    let cm = created(&mut w, CONFIGMAPS, configmap("counted"));
    // Three in the first round, then p1 and p2 again (kube's integration test).
    assert_eq!(cm["metadata"]["annotations"]["foo"], "5", "{cm}");
}

#[test]
fn match_conditions_and_params_decide_what_a_policy_does() {
    let mut w = world();
    created(&mut w, CONFIGMAPS, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"team": "blue"}}));
    policy(
        &mut w,
        "team",
        &[("ApplyConfiguration", "Object{metadata: Object.metadata{labels: {'team': params.data.team}}}")],
        json!({
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConditions": [{"name": "not-settings", "expression": "object.metadata.name != 'settings'"}],
        }),
    );
    let mut binding = body(&w.call("GET", &format!("{BINDINGS}/team-binding"), "", None, ""));
    binding["spec"]["paramRef"] = json!({"name": "settings", "namespace": "default"});
    let r = w.call("PUT", &format!("{BINDINGS}/team-binding"), "", Some(&binding), "application/json");
    assert_eq!(r.head.status, 200, "{}", text(&r));
    assert_eq!(body(&r)["spec"]["paramRef"]["parameterNotFoundAction"], "Deny");
    let cm = created(&mut w, CONFIGMAPS, configmap("labelled"));
    assert_eq!(cm["metadata"]["labels"], json!({"team": "blue"}));
    let r = w.call(
        "PUT",
        &format!("{CONFIGMAPS}/settings"),
        "",
        Some(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"team": "red"}})),
        "application/json",
    );
    assert!(body(&r)["metadata"].get("labels").is_none(), "the condition is false: {}", text(&r));
}

#[test]
fn a_policy_on_the_scale_subresource_mutates_the_scale() {
    let mut w = world();
    let rules = json!({"resourceRules": [{"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments/scale"]}]});
    policy(
        &mut w,
        "cap",
        &[("ApplyConfiguration", "Object{spec: Object.spec{replicas: object.spec.replicas > 3 ? 3 : object.spec.replicas}}")],
        json!({"matchConstraints": rules}),
    );
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 1,
        "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    created(&mut w, "/apis/apps/v1/namespaces/default/deployments", deployment);
    let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 10}});
    let r = w.call("PUT", "/apis/apps/v1/namespaces/default/deployments/web/scale", "", Some(&scale), "application/json");
    assert_eq!(body(&r)["spec"]["replicas"], 3, "{}", text(&r));
    let got = body(&w.call("GET", "/apis/apps/v1/namespaces/default/deployments/web", "", None, ""));
    assert_eq!(got["spec"]["replicas"], 3);
}

#[test]
fn a_finalizer_a_policy_puts_back_keeps_a_terminating_object() {
    let mut w = world();
    policy(&mut w, "finalize", &[("ApplyConfiguration", "Object{metadata: Object.metadata{finalizers: ['example.com/f']}}")], json!({}));
    created(&mut w, CONFIGMAPS, configmap("kept"));
    let r = w.call("DELETE", &format!("{CONFIGMAPS}/kept"), "", None, "");
    assert_eq!(r.head.status, 200, "{}", text(&r));
    let mut cm = body(&w.call("GET", &format!("{CONFIGMAPS}/kept"), "", None, ""));
    cm["metadata"]["finalizers"] = json!([]);
    let r = w.call("PUT", &format!("{CONFIGMAPS}/kept"), "", Some(&cm), "application/json");
    assert_eq!(body(&r)["metadata"]["finalizers"], json!(["example.com/f"]), "{}", text(&r));
    let r = w.call("GET", &format!("{CONFIGMAPS}/kept"), "", None, "");
    assert_eq!(r.head.status, 200, "{}", text(&r));
}

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

fn deployment(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": {"replicas": 1,
        "selector": {"matchLabels": {"app": name}}, "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
}

fn on_deployments() -> Value {
    json!({"matchConstraints": {"resourceRules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]}})
}

#[test]
fn an_apply_configuration_merges_as_server_side_apply_and_the_result_is_defaulted() {
    let mut w = world();
    let sidecar = "Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{containers: [Object.spec.template.spec.containers{name: 'sidecar', image: 'busybox'}]}}}}";
    let from_namespace = "Object{metadata: Object.metadata{labels: {'namespace': namespaceObject.metadata.name, 'op': request.operation}}}";
    policy(&mut w, "sidecar", &[("ApplyConfiguration", sidecar), ("ApplyConfiguration", from_namespace)], on_deployments());
    let d = created(&mut w, DEPLOYMENTS, deployment("web"));
    let containers = &d["spec"]["template"]["spec"]["containers"];
    // Items of a list-map merge by key: the sidecar joins the container, and is defaulted.
    assert_eq!(containers.as_array().map(|c| c.iter().map(|c| c["name"].as_str().unwrap()).collect::<Vec<_>>()), Some(vec!["c", "sidecar"]), "{d}");
    assert_eq!((containers[1]["imagePullPolicy"].as_str(), containers[1]["terminationMessagePath"].as_str()), (Some("Always"), Some("/dev/termination-log")));
    assert_eq!(d["metadata"]["labels"], json!({"namespace": "default", "op": "CREATE"}));
}

#[test]
fn an_atomic_struct_or_a_misnamed_type_is_refused_and_every_error_is_a_cause() {
    let mut w = world();
    let selector = "Object{spec: Object.spec{selector: Object.spec.selector{matchLabels: {'a': 'b'}}}}";
    policy(&mut w, "atomic", &[("ApplyConfiguration", selector), ("ApplyConfiguration", "Object{spec: Object.specx{}}")], on_deployments());
    let r = create(&mut w, DEPLOYMENTS, &deployment("web"));
    assert_eq!(r.head.status, 403, "{}", text(&r));
    let causes: Vec<String> = body(&r)["details"]["causes"].as_array().unwrap().iter().map(|c| c["message"].as_str().unwrap().to_string()).collect();
    let prefix = "policy 'atomic' with binding 'atomic-binding' denied request: ";
    assert_eq!(
        causes,
        [
            format!("{prefix}error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.selector"),
            format!(
                "{prefix}type mismatch: unexpected type name \"Object.specx\", expected \"Object.spec\", which matches field name path from root Object type"
            ),
        ]
    );
    assert_eq!(body(&r)["message"], causes[0].as_str());
}

#[test]
fn what_a_policy_covers_is_settled_before_any_mutation_and_deletes_are_not_mutated() {
    let mut w = world();
    policy(&mut w, "a-label", &[("ApplyConfiguration", "Object{metadata: Object.metadata{labels: {'x': 'y'}}}")], json!({}));
    // Its objectSelector matches what the first policy makes, not what the write was.
    policy(&mut w, "b-labelled", &[("ApplyConfiguration", "Object{metadata: Object.metadata{annotations: {'seen': 'x'}}}")], json!({}));
    let mut binding = body(&w.call("GET", &format!("{BINDINGS}/b-labelled-binding"), "", None, ""));
    binding["spec"]["matchResources"] = json!({"objectSelector": {"matchLabels": {"x": "y"}}});
    assert_eq!(w.call("PUT", &format!("{BINDINGS}/b-labelled-binding"), "", Some(&binding), "application/json").head.status, 200);
    let cm = created(&mut w, CONFIGMAPS, configmap("first"));
    assert_eq!((cm["metadata"]["labels"].clone(), cm["metadata"].get("annotations")), (json!({"x": "y"}), None), "{cm}");
    // An update of the object that has the label now is covered by both.
    let r = w.call("PUT", &format!("{CONFIGMAPS}/first"), "", Some(&cm), "application/json");
    assert_eq!(body(&r)["metadata"]["annotations"], json!({"seen": "x"}), "{}", text(&r));

    policy(
        &mut w,
        "c-failing",
        &[("JSONPatch", "[JSONPatch{op: 'remove', path: '/nope/x'}]")],
        json!({"matchConstraints": {"resourceRules": [{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]}}),
    );
    assert_eq!(w.call("DELETE", &format!("{CONFIGMAPS}/first"), "", None, "").head.status, 200);
}

#[test]
fn a_mutation_and_its_conditions_ask_the_authorizer() {
    let mut w = world();
    let annotate = "Object{metadata: Object.metadata{annotations: {'may-delete': string(authorizer.requestResource.check('delete').allowed())}}}";
    let conditions = json!({"matchConditions": [{"name": "healthy", "expression": "authorizer.path('/healthz').check('get').allowed()"}]});
    policy(&mut w, "who", &[("ApplyConfiguration", annotate)], conditions);
    let made = created(&mut w, CONFIGMAPS, configmap("c"));
    assert_eq!(made["metadata"]["annotations"]["may-delete"], "true", "{made}");
}

#[test]
fn a_subresources_own_kind_is_mutated_as_that_kind() {
    // A Binding is patched as a Binding; a TokenRequest is mutated as sent, before kube's
    // defaults and validation of it.
    let mut w = world();
    let on = |resource: &str| json!({"matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": [resource]}]}});
    policy(&mut w, "retarget", &[("JSONPatch", "[JSONPatch{op: 'replace', path: '/target/name', value: 'n2'}]")], on("pods/binding"));
    policy(&mut w, "short", &[("JSONPatch", "[JSONPatch{op: 'add', path: '/spec/expirationSeconds', value: 60}]")], on("serviceaccounts/token"));
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    created(&mut w, "/api/v1/namespaces/default/serviceaccounts", account);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    created(&mut w, "/api/v1/namespaces/default/pods", pod);
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}});
    let r = create(&mut w, "/api/v1/namespaces/default/pods/p/binding", &binding);
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(w.call("GET", "/api/v1/namespaces/default/pods/p", "", None, "").json()["spec"]["nodeName"], "n2");
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let r = create(&mut w, "/api/v1/namespaces/default/serviceaccounts/default/token", &request);
    assert_eq!(r.head.status, 422, "{}", text(&r));
    assert!(text(&r).contains("spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"), "{}", text(&r));
}

#[test]
fn an_eviction_is_carried_out_as_its_mutating_admission_left_it() {
    // kube's eviction storage reads the Eviction the mutating admission made: its name is
    // checked then, and its delete options (here a dry run) are those the pod is deleted with.
    let mut w = world();
    let on =
        json!({"matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/eviction"]}]}});
    let rehearse = "[JSONPatch{op: 'replace', path: '/metadata/name', value: 'p'}, JSONPatch{op: 'add', path: '/deleteOptions', value: {'dryRun': ['All']}}]";
    policy(&mut w, "rehearse", &[("JSONPatch", rehearse)], on);
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    created(&mut w, "/api/v1/namespaces/default/serviceaccounts", account);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    created(&mut w, "/api/v1/namespaces/default/pods", pod);
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "other", "namespace": "default"}});
    let r = create(&mut w, "/api/v1/namespaces/default/pods/p/eviction", &eviction);
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(w.call("GET", "/api/v1/namespaces/default/pods/p", "", None, "").head.status, 200, "a dry run keeps the pod");
}

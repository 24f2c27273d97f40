//! Validating admission policies through the core's request pipeline: which writes a policy
//! and its bindings cover, what its expressions see (the object, the old object, the request,
//! the namespace, parameters, variables), and how a failed validation comes back to the
//! client (kube's codes, reasons, messages and warnings) for each validation action and
//! failure policy.

use kapi_core::controllers::Enabled;
use kapi_sim::{Response, World, default_server, epoch};
use serde_json::{Value, json};

const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const SECRETS: &str = "/api/v1/namespaces/default/secrets";

fn world() -> World {
    let mut w = World::new(default_server(), epoch(), 11);
    w.start_controllers(Enabled::NONE);
    w
}

fn text(r: &Response) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

fn warnings(r: &Response) -> Vec<String> {
    r.head.headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case("Warning")).map(|(_, v)| v.clone()).collect()
}

fn create(w: &mut World, path: &str, body: &Value) -> Response {
    w.call("POST", path, "", Some(body), "application/json")
}

fn created(w: &mut World, path: &str, body: Value) {
    let r = create(w, path, &body);
    assert_eq!(r.head.status, 201, "{}", text(&r));
}

/// A policy on configmaps (the rules of `rules`, if given), with `spec` added.
fn policy(w: &mut World, name: &str, spec: Value) {
    let mut body = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
        "spec": {"matchConstraints": {"resourceRules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]}},
    });
    for (k, v) in spec.as_object().unwrap() {
        body["spec"][k] = v.clone();
    }
    created(w, POLICIES, body);
}

fn binding(w: &mut World, name: &str, policy: &str, spec: Value) {
    let mut body = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
        "spec": {"policyName": policy, "validationActions": ["Deny"]},
    });
    for (k, v) in spec.as_object().unwrap() {
        body["spec"][k] = v.clone();
    }
    created(w, BINDINGS, body);
}

fn configmap(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

#[test]
fn a_failed_validation_denies_in_kubes_words_with_its_reason() {
    let mut w = world();
    policy(
        &mut w,
        "small",
        json!({"validations": [
            {"expression": "size(object.data) <= 2"},
            {"expression": "!('secret' in object.data)", "message": "no secrets in configmaps", "reason": "Forbidden"},
            {"expression": "object.metadata.name.startsWith('cm-')", "messageExpression": "'name ' + object.metadata.name + ' lacks the prefix'"},
        ]}),
    );
    binding(&mut w, "small-binding", "small", json!({}));

    let r = create(&mut w, CONFIGMAPS, &configmap("cm-big", json!({"a": "1", "b": "2", "c": "3"})));
    assert_eq!(r.head.status, 422, "{}", text(&r));
    let status = r.json();
    assert_eq!(status["reason"], "Invalid");
    let message = "configmaps \"cm-big\" is forbidden: ValidatingAdmissionPolicy 'small' with binding 'small-binding' denied request: failed expression: size(object.data) <= 2";
    assert_eq!(status["message"], message);
    assert_eq!(status["details"], json!({"name": "cm-big", "kind": "configmaps", "causes": [{"message": message.split_once("forbidden: ").unwrap().1}]}));

    let r = create(&mut w, CONFIGMAPS, &configmap("cm-secret", json!({"secret": "x"})));
    assert_eq!((r.head.status, r.json()["reason"].as_str()), (403, Some("Forbidden")), "{}", text(&r));
    assert!(r.json()["message"].as_str().unwrap().ends_with("denied request: no secrets in configmaps"), "{}", text(&r));

    let r = create(&mut w, CONFIGMAPS, &configmap("plain", json!({})));
    assert_eq!(r.head.status, 422, "{}", text(&r));
    assert!(r.json()["message"].as_str().unwrap().ends_with("denied request: name plain lacks the prefix"), "{}", text(&r));

    created(&mut w, CONFIGMAPS, configmap("cm-fine", json!({"a": "1"})));
    // An update is validated too; a delete is not covered by the rules.
    let r = w.call("PATCH", &format!("{CONFIGMAPS}/cm-fine"), "", Some(&json!({"data": {"b": "2", "c": "3"}})), "application/merge-patch+json");
    assert_eq!(r.head.status, 422, "{}", text(&r));
    assert_eq!(w.call("DELETE", &format!("{CONFIGMAPS}/cm-fine"), "", None, "").head.status, 200);
    // Other resources are not covered.
    created(&mut w, SECRETS, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"a": "1", "b": "2", "c": "3"}}));
}

#[test]
fn validation_actions_deny_warn_or_leave_it_to_the_audit_log() {
    let mut w = world();
    policy(&mut w, "labelled", json!({"validations": [{"expression": "has(object.metadata.labels)", "message": "label it"}]}));
    binding(&mut w, "warn", "labelled", json!({"validationActions": ["Warn"]}));
    binding(&mut w, "audit", "labelled", json!({"validationActions": ["Audit"]}));

    let r = create(&mut w, CONFIGMAPS, &configmap("bare", json!({})));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(warnings(&r), ["299 - \"Validation failed for ValidatingAdmissionPolicy 'labelled' with binding 'warn': label it\""]);

    binding(&mut w, "deny", "labelled", json!({"validationActions": ["Deny", "Audit"]}));
    let r = create(&mut w, CONFIGMAPS, &configmap("bare-2", json!({})));
    assert_eq!(r.head.status, 422, "{}", text(&r));
    assert!(r.json()["message"].as_str().unwrap().contains("with binding 'deny' denied request: label it"), "{}", text(&r));
    // A later binding's warning reaches the client along with the denial.
    assert_eq!(warnings(&r).len(), 1, "{:?}", warnings(&r));
}

#[test]
fn params_come_from_the_object_a_binding_names_or_selects() {
    let mut w = world();
    policy(
        &mut w,
        "limited",
        json!({
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["secrets"]}]},
            "validations": [{"expression": "size(object.data) <= int(params.data.max)", "messageExpression": "'at most ' + params.data.max + ' keys'"}],
        }),
    );
    binding(&mut w, "by-name", "limited", json!({"paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}}));
    let secret = |name: &str, n: usize| {
        let data: serde_json::Map<String, Value> = (0..n).map(|i| (format!("k{i}"), json!("dg=="))).collect();
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": data})
    };

    // Without its parameter, a binding whose action for that is Deny denies.
    let r = create(&mut w, SECRETS, &secret("s0", 1));
    assert_eq!(r.head.status, 422, "{}", text(&r));
    assert_eq!(
        r.json()["message"],
        "secrets \"s0\" is forbidden: ValidatingAdmissionPolicy 'limited' with binding 'by-name' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    );

    created(
        &mut w,
        CONFIGMAPS,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits", "labels": {"limits": "yes"}}, "data": {"max": "2"}}),
    );
    created(&mut w, SECRETS, secret("s1", 2));
    let r = create(&mut w, SECRETS, &secret("s2", 3));
    assert_eq!(r.head.status, 422, "{}", text(&r));
    assert!(r.json()["message"].as_str().unwrap().ends_with("denied request: at most 2 keys"), "{}", text(&r));

    // A selector finds every parameter it matches: each must allow the write.
    w.call("DELETE", &format!("{BINDINGS}/by-name"), "", None, "");
    binding(&mut w, "by-label", "limited", json!({"paramRef": {"selector": {"matchLabels": {"limits": "yes"}}, "parameterNotFoundAction": "Allow"}}));
    created(
        &mut w,
        CONFIGMAPS,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "stricter", "labels": {"limits": "yes"}}, "data": {"max": "1"}}),
    );
    let r = create(&mut w, SECRETS, &secret("s3", 2));
    assert_eq!(r.head.status, 422, "{}", text(&r));
    assert!(r.json()["message"].as_str().unwrap().ends_with("denied request: at most 1 keys"), "{}", text(&r));
    created(&mut w, SECRETS, secret("s4", 1));

    // With none selected and `Allow`, the binding is skipped.
    for name in ["limits", "stricter"] {
        assert_eq!(w.call("DELETE", &format!("{CONFIGMAPS}/{name}"), "", None, "").head.status, 200);
    }
    created(&mut w, SECRETS, secret("s5", 9));
}

#[test]
fn a_policy_whose_param_kind_is_not_served_fails_closed() {
    let mut w = world();
    policy(&mut w, "lost", json!({"paramKind": {"apiVersion": "example.com/v1", "kind": "Limits"}, "validations": [{"expression": "true"}]}));
    binding(&mut w, "lost-binding", "lost", json!({"paramRef": {"name": "x", "parameterNotFoundAction": "Allow"}}));
    let r = create(&mut w, CONFIGMAPS, &configmap("c", json!({})));
    assert_eq!(r.head.status, 422, "{}", text(&r));
    assert_eq!(
        r.json()["message"],
        "configmaps \"c\" is forbidden: ValidatingAdmissionPolicy 'lost' denied request: failed to configure policy: failed to find resource referenced by paramKind: 'example.com/v1, Kind=Limits'"
    );
}

#[test]
fn variables_conditions_the_request_and_the_namespace_are_seen() {
    let mut w = world();
    created(&mut w, "/api/v1/namespaces", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod", "labels": {"env": "prod"}}}));
    policy(
        &mut w,
        "owned",
        json!({
            "matchConditions": [{"name": "not-admin", "expression": "request.userInfo.username != 'nobody'"}],
            "variables": [
                {"name": "prod", "expression": "namespaceObject.metadata.?labels.env.orValue('') == 'prod'"},
                {"name": "owner", "expression": "object.metadata.?labels.owner.orValue('')"},
            ],
            "validations": [{"expression": "!variables.prod || variables.owner != ''", "messageExpression": "request.operation + ' in ' + namespaceObject.metadata.name + ' needs an owner'"}],
        }),
    );
    binding(&mut w, "owned", "owned", json!({}));
    let r = create(&mut w, "/api/v1/namespaces/prod/configmaps", &configmap("c", json!({})));
    assert_eq!(r.head.status, 422, "{}", text(&r));
    assert!(r.json()["message"].as_str().unwrap().ends_with("denied request: CREATE in prod needs an owner"), "{}", text(&r));
    created(&mut w, CONFIGMAPS, configmap("c", json!({})));
    let mut owned = configmap("c", json!({}));
    owned["metadata"]["labels"] = json!({"owner": "me"});
    created(&mut w, "/api/v1/namespaces/prod/configmaps", owned);

    // A condition that does not hold skips the policy.
    policy(
        &mut w,
        "never",
        json!({"matchConditions": [{"name": "no", "expression": "request.namespace == 'elsewhere'"}], "validations": [{"expression": "false"}]}),
    );
    binding(&mut w, "never", "never", json!({}));
    created(&mut w, CONFIGMAPS, configmap("d", json!({})));
}

#[test]
fn errors_go_to_the_failure_policy() {
    let mut w = world();
    policy(&mut w, "strict", json!({"validations": [{"expression": "object.data.missing == 'x'"}]}));
    binding(&mut w, "strict", "strict", json!({}));
    let r = create(&mut w, CONFIGMAPS, &configmap("c", json!({})));
    assert_eq!(r.head.status, 422, "{}", text(&r));
    assert_eq!(
        r.json()["message"],
        "configmaps \"c\" is forbidden: ValidatingAdmissionPolicy 'strict' with binding 'strict' denied request: expression 'object.data.missing == 'x'' resulted in error: no such key: missing"
    );
    w.call("DELETE", &format!("{POLICIES}/strict"), "", None, "");
    policy(&mut w, "lenient", json!({"failurePolicy": "Ignore", "validations": [{"expression": "object.data.missing == 'x'"}]}));
    binding(&mut w, "lenient", "lenient", json!({}));
    created(&mut w, CONFIGMAPS, configmap("c", json!({})));
}

#[test]
fn an_expression_over_the_cost_limit_is_cancelled() {
    let mut w = world();
    policy(
        &mut w,
        "costly",
        json!({"validations": [{"expression": "object.data.all(k, object.data.all(j, object.data.all(i, k != '' && j != '' && i != '')))"}]}),
    );
    binding(&mut w, "costly", "costly", json!({}));
    created(&mut w, CONFIGMAPS, configmap("small", json!({"a": "1"})));
    let large: Value = (0..200).map(|i| (format!("k{i}"), json!("v"))).collect::<serde_json::Map<String, Value>>().into();
    let r = create(&mut w, CONFIGMAPS, &configmap("large", large.clone()));
    assert_eq!(r.head.status, 422, "{}", text(&r));
    assert!(r.json()["message"].as_str().unwrap().ends_with("resulted in error: operation cancelled: actual cost limit exceeded"), "{}", text(&r));

    // Each cancelled evaluation has cost the limit of a call; ten spend the policy's budget.
    let costly = "object.data.all(k, object.data.all(j, object.data.all(i, k != '' && j != '' && i != '')))";
    let validations: Vec<Value> = (0..11).map(|_| json!({"expression": costly})).collect();
    let r = w.call("PATCH", &format!("{POLICIES}/costly"), "", Some(&json!({"spec": {"validations": validations}})), "application/merge-patch+json");
    assert_eq!(r.head.status, 200, "{}", text(&r));
    let r = create(&mut w, CONFIGMAPS, &configmap("large", large));
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .ends_with("denied request: validation failed due to running out of cost budget, no further validation rules will be run"),
        "{}",
        text(&r)
    );
}

#[test]
fn policies_and_bindings_are_never_validated_by_policies() {
    let mut w = world();
    let mut body = json!({"validations": [{"expression": "false"}]});
    body["matchConstraints"] = json!({"resourceRules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]});
    policy(&mut w, "everything", body);
    binding(&mut w, "everything", "everything", json!({}));
    // What the policy covers is denied; the policies and bindings themselves are not.
    assert_eq!(create(&mut w, CONFIGMAPS, &configmap("c", json!({}))).head.status, 422);
    assert_eq!(w.call("DELETE", &format!("{BINDINGS}/everything"), "", None, "").head.status, 200);
    created(&mut w, CONFIGMAPS, configmap("c", json!({})));
}

#[test]
fn expressions_that_do_not_compile_or_give_the_wrong_type_are_refused() {
    let mut w = world();
    let body = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "bad"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]},
            "matchConditions": [{"name": "c", "expression": "request.bogus"}],
            "variables": [{"name": "1x", "expression": "1"}],
            "validations": [
                {"expression": "1"},
                {"expression": "params.max > 1"},
                {"expression": "true", "messageExpression": "1"},
            ],
            "auditAnnotations": [{"key": "k", "valueExpression": "true"}],
        },
    });
    let r = create(&mut w, POLICIES, &body);
    assert_eq!(r.head.status, 422, "{}", text(&r));
    let message = r.json()["message"].as_str().unwrap().to_string();
    assert!(message.starts_with("ValidatingAdmissionPolicy.admissionregistration.k8s.io \"bad\" is invalid: ["), "{message}");
    for part in [
        "spec.matchConditions[0].expression: Invalid value: \"request.bogus\": compilation failed: ERROR: <input>:1:8: undefined field 'bogus'",
        "spec.variables[0].name: Invalid value: \"1x\": name is not a valid CEL identifier",
        "spec.validations[0].expression: Invalid value: \"1\": must evaluate to bool but got int",
        "spec.validations[1].expression: Invalid value: \"params.max > 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params'",
        "spec.validations[2].messageExpression: Invalid value: \"1\": must evaluate to string but got int",
        "spec.auditAnnotations[0].valueExpression: Invalid value: \"true\": must evaluate to one of [string null_type] but got bool",
    ] {
        assert!(message.contains(part), "{part} not in {message}");
    }
}

#[test]
fn a_variable_that_fails_fails_only_what_reads_it() {
    let mut w = world();
    policy(
        &mut w,
        "lazy",
        json!({
            "variables": [{"name": "r", "expression": "object.data.r"}],
            "validations": [{"expression": "!has(object.data.r) || variables.r != 'bad'", "message": "r is bad"}],
        }),
    );
    binding(&mut w, "lazy", "lazy", json!({}));
    // The variable fails on a configmap without `r`, but the validation never reads it then.
    created(&mut w, CONFIGMAPS, configmap("plain", json!({})));
    let r = create(&mut w, CONFIGMAPS, &configmap("bad", json!({"r": "bad"})));
    assert!(r.json()["message"].as_str().unwrap().ends_with("denied request: r is bad"), "{}", text(&r));

    policy(&mut w, "eager", json!({"variables": [{"name": "r", "expression": "object.data.r"}], "validations": [{"expression": "variables.r == 'x'"}]}));
    binding(&mut w, "eager", "eager", json!({}));
    let r = create(&mut w, CONFIGMAPS, &configmap("other", json!({})));
    assert_eq!(r.head.status, 422, "{}", text(&r));
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .ends_with("denied request: expression 'variables.r == 'x'' resulted in error: composited variable \"r\" fails to evaluate: no such key: r"),
        "{}",
        text(&r)
    );
}

#[test]
fn bindings_and_messages_are_validated_as_kube_validates_them() {
    let mut w = world();
    let body = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "b"},
        "spec": {"policyName": "p", "validationActions": ["Deny", "Deny"],
            "paramRef": {"name": "n", "selector": {}, "parameterNotFoundAction": "Allow"},
            "matchResources": {"matchPolicy": "Sometimes"}},
    });
    let r = create(&mut w, BINDINGS, &body);
    assert_eq!(r.head.status, 422, "{}", text(&r));
    let message = r.json()["message"].as_str().unwrap().to_string();
    for part in [
        "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
        "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
        "spec.validationActions[1]: Duplicate value: \"Deny\"",
        "spec.matchResouces.matchPolicy: Unsupported value: \"Sometimes\"",
    ] {
        assert!(message.contains(part), "{part} not in {message}");
    }
    // A message expression has no authorizer; a message may end with a line break (YAML's `|`).
    let body = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "m"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "true", "message": "fine\n", "messageExpression": "string(authorizer)"}],
        },
    });
    let r = create(&mut w, POLICIES, &body);
    assert_eq!(r.head.status, 422, "{}", text(&r));
    let message = r.json()["message"].as_str().unwrap().to_string();
    assert!(message.contains("spec.validations[0].messageExpression: Invalid value: \"string(authorizer)\": compilation failed: ERROR: <input>:1:8: undeclared reference to 'authorizer'"), "{message}");
    assert!(!message.contains("spec.validations[0].message:"), "{message}");
}

/// A world whose requests RBAC authorizes, where carol may write policies and bindings, and
/// read configmaps of `default` only if `reads`.
fn carols_world(reads: bool) -> World {
    let mut w = World::new(kapi_sim::rbac_server(), epoch(), 11);
    w.start_controllers(Enabled::NONE);
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "policy-writer"},
        "rules": [{"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingadmissionpolicies", "validatingadmissionpolicybindings"], "verbs": ["*"]}]});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "carol"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "policy-writer"}, "subjects": [{"kind": "User", "name": "carol"}]});
    created(&mut w, "/apis/rbac.authorization.k8s.io/v1/clusterroles", role);
    created(&mut w, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding);
    if reads {
        let reader = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "configmap-reader"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]});
        let bound = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "carol-reads"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "configmap-reader"}, "subjects": [{"kind": "User", "name": "carol"}]});
        created(&mut w, "/apis/rbac.authorization.k8s.io/v1/clusterroles", reader);
        created(&mut w, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", bound);
    }
    w
}

#[test]
fn who_writes_a_policy_or_binding_with_params_must_be_able_to_read_them() {
    let spec = json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}, "validations": [{"expression": "true"}],
        "matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]}});
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "p"}, "spec": spec});
    let mut w = carols_world(false);
    let r = w.call_with_token("carol-token", "POST", POLICIES, Some(policy.clone()));
    assert_eq!(r.head.status, 422, "{}", text(&r));
    let cause = serde_json::from_slice::<Value>(&r.body).unwrap()["details"]["causes"][0].clone();
    assert_eq!(cause["reason"], "FieldValueForbidden");
    assert_eq!(
        cause["message"],
        "Forbidden: user &{carol 3 [system:authenticated] map[]} must have \"get\" permission on all objects of the referenced paramKind (kind=ConfigMap, apiVersion=v1)"
    );
    // An administrator may; carol may bind it to nothing she cannot read either.
    created(&mut w, POLICIES, policy.clone());
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "b"},
        "spec": {"policyName": "p", "validationActions": ["Deny"], "paramRef": {"selector": {}, "namespace": "default", "parameterNotFoundAction": "Allow"}}});
    let r = w.call_with_token("carol-token", "POST", BINDINGS, Some(binding.clone()));
    let message = serde_json::from_slice::<Value>(&r.body).unwrap()["message"].clone();
    assert!(
        message.as_str().unwrap().ends_with(
            "is invalid: spec.paramRef: Forbidden: user &{carol 3 [system:authenticated] map[]} does not have \"list\" permission on the object referenced by paramRef"
        ),
        "{message}"
    );

    let mut w = carols_world(true);
    assert_eq!(w.call_with_token("carol-token", "POST", POLICIES, Some(policy)).head.status, 201);
    assert_eq!(w.call_with_token("carol-token", "POST", BINDINGS, Some(binding)).head.status, 201);
}

#[test]
fn expressions_check_with_the_authorizer_what_the_requester_may_do() {
    // Carol may read configmaps; only who may also read its secret may write a configmap.
    let mut w = carols_world(true);
    let writer = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "configmap-writer"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]});
    let bound = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "carol-writes"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "configmap-writer"}, "subjects": [{"kind": "User", "name": "carol"}]});
    created(&mut w, "/apis/rbac.authorization.k8s.io/v1/clusterroles", writer);
    created(&mut w, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", bound);
    policy(
        &mut w,
        "secret-readers",
        json!({
            "variables": [{"name": "secret", "expression": "authorizer.group('').resource('secrets').namespace(request.namespace).name(object.metadata.name)"}],
            "validations": [
                {"expression": "variables.secret.check('get').allowed()", "messageExpression": "'may not read secret ' + object.metadata.name"},
                {"expression": "authorizer.requestResource.check('create').allowed() && !authorizer.requestResource.check('delete').allowed() || request.userInfo.username != 'carol'"},
                {"expression": "authorizer.path('/metrics').check('get').reason() == ''"},
            ],
        }),
    );
    binding(&mut w, "secret-readers", "secret-readers", json!({}));
    let r = w.call_with_token("carol-token", "POST", CONFIGMAPS, Some(configmap("db", json!({}))));
    assert_eq!(r.head.status, 422, "{}", text(&r));
    assert_eq!(
        r.json()["message"],
        "configmaps \"db\" is forbidden: ValidatingAdmissionPolicy 'secret-readers' with binding 'secret-readers' denied request: may not read secret db"
    );
    // An administrator may do anything.
    created(&mut w, CONFIGMAPS, configmap("admin", json!({})));
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "db-secret", "namespace": "default"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["db"], "verbs": ["get"]}]});
    let bound = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "carol-db", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "db-secret"}, "subjects": [{"kind": "User", "name": "carol"}]});
    created(&mut w, "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", role);
    created(&mut w, "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", bound);
    let r = w.call_with_token("carol-token", "POST", CONFIGMAPS, Some(configmap("db", json!({}))));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    let r = w.call_with_token("carol-token", "POST", CONFIGMAPS, Some(configmap("cache", json!({}))));
    assert_eq!(r.head.status, 422, "{}", text(&r));
}

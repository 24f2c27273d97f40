use std::collections::BTreeSet;

use super::*;

fn regular(path: &str) -> Result<bool, String> {
    match path {
        "/etc/kapi/webhook.kubeconfig" => Ok(true),
        "/etc/kapi" => Ok(false),
        other => Err(format!("stat {other}: no such file or directory")),
    }
}

fn load(text: &str) -> Result<Config, String> {
    Config::load(text.as_bytes(), &regular, &BTreeSet::new())
}

const HEAD: &str = "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\n";

fn webhook(fields: &str) -> String {
    format!("{HEAD}authorizers:\n- type: Webhook\n  name: hook\n  webhook:\n{fields}")
}

const GOOD_WEBHOOK: &str = "    timeout: 3s\n    subjectAccessReviewVersion: v1\n    failurePolicy: Deny\n    connectionInfo:\n      type: KubeConfigFile\n      kubeConfigFile: /etc/kapi/webhook.kubeconfig\n";

#[test]
fn a_whole_file_is_read_with_kubes_defaults() {
    let text = format!(
        "{HEAD}authorizers:\n- type: Node\n  name: node\n- type: Webhook\n  name: hook\n  webhook:\n{GOOD_WEBHOOK}    matchConditionSubjectAccessReviewVersion: v1\n    matchConditions:\n    - expression: has(request.resourceAttributes)\n- type: RBAC\n  name: rbac\n"
    );
    let config = load(&text).unwrap();
    assert_eq!(config.authorizers.iter().map(|a| a.kind.as_str()).collect::<Vec<_>>(), ["Node", "Webhook", "RBAC"]);
    let w = config.authorizers[1].webhook.as_ref().unwrap();
    assert_eq!((w.authorized_ttl, w.unauthorized_ttl, w.timeout), (SignedDuration::from_mins(5), SignedDuration::from_secs(30), SignedDuration::from_secs(3)));
    assert_eq!(w.match_conditions, ["has(request.resourceAttributes)"]);
    assert_eq!(config.fixed_types(), BTreeSet::from(["Node".to_string(), "RBAC".to_string()]));
    // JSON is YAML, and every version reads the same.
    let json =
        r#"{"apiVersion":"apiserver.config.k8s.io/v1beta1","kind":"AuthorizationConfiguration","authorizers":[{"type":"AlwaysAllow","name":"alwaysallow"}]}"#;
    assert_eq!(load(json).unwrap().authorizers[0].kind, "AlwaysAllow");
}

#[test]
fn decoding_is_strict() {
    assert_eq!(
        load(&format!("{HEAD}authorizers:\n- type: RBAC\n  name: rbac\n  color: red\n")).unwrap_err(),
        "failed to load AuthorizationConfiguration from file: strict decoding error: unknown field \"authorizers[0].color\""
    );
    assert_eq!(
        load(&webhook("    timeout: 30\n")).unwrap_err(),
        "failed to load AuthorizationConfiguration from file: json: cannot unmarshal number into Go struct field WebhookConfiguration.authorizers.webhook.timeout of type string"
    );
    assert_eq!(load(&webhook("    timeout: soon\n")).unwrap_err(), "failed to load AuthorizationConfiguration from file: time: invalid duration \"soon\"");
    // An empty file is kube's defaults: no authorizers.
    assert_eq!(load("").unwrap_err(), "authorizers: Required value: at least one authorization mode must be defined");
}

#[test]
fn kubes_validation_in_its_words() {
    let err = |text: &str| load(text).unwrap_err();
    assert_eq!(err(&format!("{HEAD}authorizers: []\n")), "authorizers: Required value: at least one authorization mode must be defined");
    assert_eq!(
        err(&format!("{HEAD}authorizers:\n- type: Foo\n  name: foo\n")),
        "authorizers[0].type: Unsupported value: \"Foo\": supported values: \"ABAC\", \"AlwaysAllow\", \"AlwaysDeny\", \"Node\", \"RBAC\", \"Webhook\""
    );
    assert_eq!(
        err(&format!("{HEAD}authorizers:\n- type: RBAC\n  name: rbac\n- type: RBAC\n  name: rbac2\n")),
        "authorizers[1].type: Duplicate value: \"RBAC\""
    );
    assert_eq!(err(&format!("{HEAD}authorizers:\n- type: RBAC\n")), "authorizers[0].name: Required value");
    assert!(
        err(&format!("{HEAD}authorizers:\n- type: Webhook\n  name: Bad_Name\n  webhook:\n{GOOD_WEBHOOK}"))
            .starts_with("authorizers[0].name: Invalid value: \"Bad_Name\": authorizer name is invalid: a lowercase RFC 1123 subdomain")
    );
    assert_eq!(err(&format!("{HEAD}authorizers:\n- type: Webhook\n  name: w\n")), "authorizers[0].webhook: Required value: required when type=Webhook");
    assert_eq!(
        err(&format!("{HEAD}authorizers:\n- type: RBAC\n  name: rbac\n  webhook:\n{GOOD_WEBHOOK}")),
        "authorizers[0].webhook: Invalid value: \"non-null\": may only be specified when type=Webhook"
    );
    assert_eq!(
        err(&webhook("    timeout: 1m\n    connectionInfo:\n      type: KubeConfigFile\n      kubeConfigFile: relative\n")),
        "[authorizers[0].timeout: Invalid value: \"1m0s\": must be > 0s and <= 30s, authorizers[0].subjectAccessReviewVersion: Required value, authorizers[0].failurePolicy: Required value, authorizers[0].connectionInfo.kubeConfigFile: Invalid value: \"relative\": must be an absolute path]"
    );
    let with = |extra: &str| err(&webhook(&format!("{GOOD_WEBHOOK}{extra}")));
    assert_eq!(with("    authorizedTTL: -1s\n"), "authorizers[0].authorizedTTL: Invalid value: \"-1s\": must be > 0s");
    assert_eq!(
        with("    matchConditions:\n    - expression: request.user\n"),
        "[authorizers[0].matchConditionSubjectAccessReviewVersion: Required value: required if match conditions are specified, authorizers[0].matchConditions[0].expression: Invalid value: \"request.user\": must evaluate to bool but got string]"
    );
    assert_eq!(
        with(
            "    matchConditionSubjectAccessReviewVersion: v1\n    matchConditions:\n    - expression: \"true\"\n    - expression: \"true\"\n    - expression: \" \"\n"
        ),
        "[authorizers[0].matchConditions[1].expression: Duplicate value: \"true\", authorizers[0].matchConditions[2].expression: Required value]"
    );
    let missing = err(&webhook(&GOOD_WEBHOOK.replace("/etc/kapi/webhook.kubeconfig", "/etc/missing")));
    assert_eq!(
        missing,
        "authorizers[0].connectionInfo.kubeConfigFile: Invalid value: \"/etc/missing\": error loading file: stat /etc/missing: no such file or directory"
    );
    let folder = err(&webhook(&GOOD_WEBHOOK.replace("/etc/kapi/webhook.kubeconfig", "/etc/kapi")));
    assert_eq!(folder, "authorizers[0].connectionInfo.kubeConfigFile: Invalid value: \"/etc/kapi\": must be a regular file");
    let unknown = err(&webhook(&GOOD_WEBHOOK.replace("type: KubeConfigFile", "type: Foo")));
    assert!(
        unknown.starts_with("authorizers[0].connectionInfo.type: Unsupported value: apiserver.WebhookConnectionInfo{Type:\"Foo\", KubeConfigFile:(*string)(0x"),
        "{unknown}"
    );
    assert!(unknown.ends_with(": supported values: \"InClusterConfig\", \"KubeConfigFile\""), "{unknown}");
}

#[test]
fn names_are_the_types_and_reloads_keep_the_fixed_types() {
    assert_eq!(load(&format!("{HEAD}authorizers:\n- type: RBAC\n  name: roles\n")).unwrap_err(), "expected name rbac for authorizer RBAC instead of roles");
    let required = BTreeSet::from(["Node".to_string(), "RBAC".to_string()]);
    assert_eq!(
        Config::load(format!("{HEAD}authorizers:\n- type: AlwaysAllow\n  name: alwaysallow\n").as_bytes(), &regular, &required).unwrap_err(),
        "missing required types: [Node RBAC]"
    );
}

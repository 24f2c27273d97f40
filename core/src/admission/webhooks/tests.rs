use serde_json::{Value, json};

use super::review::{denied, read, version};
use super::*;
use crate::admission::matching::matches;
use crate::admission::{Attributes, Found, Operation};
use crate::auth::UserInfo;
use crate::resources::{Settings, catalog};
use crate::webhook::WebhookAnswer;

fn hook(rules: Value) -> Hook {
    let w = json!({"name": "w.example.com", "rules": rules, "sideEffects": "None", "admissionReviewVersions": ["v1beta1", "v1"],
        "clientConfig": {"url": "https://h.example/x"}});
    Hook::read(&w, "c/w.example.com/0", "c")
}

/// Whether `hook` matches `op` of `resource` (`group`), at `subresource`, in `namespace`.
fn matched(hook: &Hook, (group, resource): (&str, &str), subresource: Option<&str>, namespace: &str, op: Operation) -> bool {
    let cat = catalog(&Settings::default());
    let info = &cat.resources().find(|r| r.info.group == group && r.info.resource == resource).unwrap().info;
    let (user, found) = (UserInfo::default(), Found::default());
    let a = Attributes { subresource, ..Attributes::of(op, info, namespace, "n", &user, None, &found) };
    matches(&hook.matching, &a, Some(&json!({"metadata": {"name": "n"}})), &[]).unwrap().is_some()
}

#[test]
fn rules_match_as_kubes_matcher_reads_them() {
    let rule = |resources: Value, scope: &str| {
        hook(json!([{"operations": ["CREATE"], "apiGroups": ["", "apps"], "apiVersions": ["v1"], "resources": resources, "scope": scope}]))
    };
    let pods = ("", "pods");
    // `*` is every resource but no subresource; `pods/*` is pods and its subresources.
    assert!(matched(&rule(json!(["*"]), "*"), pods, None, "dev", Operation::Create));
    assert!(!matched(&rule(json!(["*"]), "*"), pods, Some("status"), "dev", Operation::Create));
    assert!(matched(&rule(json!(["pods/*"]), "*"), pods, Some("status"), "dev", Operation::Create));
    assert!(matched(&rule(json!(["pods/*"]), "*"), pods, None, "dev", Operation::Create));
    assert!(matched(&rule(json!(["*/status"]), "*"), ("apps", "deployments"), Some("status"), "dev", Operation::Create));
    assert!(!matched(&rule(json!(["*/status"]), "*"), ("apps", "deployments"), Some("scale"), "dev", Operation::Create));
    assert!(!matched(&rule(json!(["pods"]), "*"), pods, None, "dev", Operation::Update));
    assert!(!matched(&rule(json!(["*"]), "*"), ("batch", "jobs"), None, "dev", Operation::Create));
    // Scopes: a namespace itself is cluster-scoped.
    assert!(!matched(&rule(json!(["pods"]), "Cluster"), pods, None, "dev", Operation::Create));
    assert!(matched(&rule(json!(["namespaces"]), "Cluster"), ("", "namespaces"), None, "", Operation::Create));
    assert!(!matched(&rule(json!(["namespaces"]), "Namespaced"), ("", "namespaces"), None, "", Operation::Create));
    assert!(matched(&rule(json!(["nodes"]), "Cluster"), ("", "nodes"), None, "", Operation::Create));
}

#[test]
fn configurations_are_ordered_by_name_and_webhooks_as_listed() {
    let config = |name: &str, hooks: &[&str]| {
        let hooks: Vec<Value> = hooks.iter().map(|h| json!({"name": h})).collect();
        json!({"metadata": {"name": name}, "webhooks": hooks})
    };
    let (b, a) = (config("b", &["x.example.com", "x.example.com"]), config("a", &["z.example.com", "y.example.com"]));
    let hooks = Hooks::default().with(false, [&b, &a]);
    let uids: Vec<&str> = hooks.validating.iter().map(|h| h.uid.as_str()).collect();
    assert_eq!(uids, ["a/z.example.com/0", "a/y.example.com/0", "b/x.example.com/0", "b/x.example.com/1"]);
    assert!(hooks.mutating.is_empty());
    // Defaults as kube's dispatcher reads an undefaulted webhook: fail closed, Equivalent.
    assert!(!hooks.validating[0].ignore_failures && hooks.validating[0].matching.equivalent && hooks.validating[0].timeout_seconds == 10);
}

#[test]
fn refusals_and_bad_answers_are_put_in_kubes_words() {
    let h = hook(json!([]));
    assert_eq!(version(&h), Ok("v1beta1"));
    let e = denied(&h, None);
    assert_eq!((e.code, e.reason, e.message.as_str()), (400, "", "admission webhook \"w.example.com\" denied the request without explanation"));
    let e = denied(&h, Some(&json!({"code": 200, "reason": "NotAcceptable"})));
    assert_eq!((e.code, e.reason, e.message.as_str()), (400, "NotAcceptable", "admission webhook \"w.example.com\" denied the request: NotAcceptable"));
    let e = denied(&h, Some(&json!({"code": 422, "reason": "Invalid", "message": "no", "details": {"causes": [{"field": "spec", "message": "bad"}]}})));
    assert_eq!(
        (e.code, e.message.as_str(), e.details.unwrap().causes[0].field.as_str()),
        (422, "admission webhook \"w.example.com\" denied the request: no", "spec")
    );

    let answer = |body: Value| Ok(WebhookAnswer { status: 200, body: serde_json::to_vec(&body).unwrap().into(), content_type: "application/json".into() });
    let v1 = |response: Value| answer(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}));
    let why = |r: Result<WebhookAnswer, String>, mutating: bool| read(&h, "v1", "u", mutating, &r).unwrap_err();
    let prefix = "failed calling webhook \"w.example.com\": received invalid webhook response: ";
    assert_eq!(why(answer(json!({"kind": "AdmissionReview"})), false), format!("{prefix}webhook response was absent"));
    assert_eq!(why(v1(json!({"uid": "x"})), false), format!("{prefix}expected response.uid=\"u\", got \"x\""));
    let wrong = answer(json!({"apiVersion": "v1", "kind": "Status", "response": {"uid": "u"}}));
    assert_eq!(why(wrong, false), format!("{prefix}expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got /v1, Kind=Status"));
    assert_eq!(why(v1(json!({"uid": "u", "patch": "W10="})), true), format!("{prefix}webhook returned response.patch but not response.patchType"));
    assert_eq!(why(v1(json!({"uid": "u", "patchType": "JSONPatch"})), true), format!("{prefix}webhook returned response.patchType but not response.patch"));
    assert_eq!(
        why(v1(json!({"uid": "u", "patch": "W10=", "patchType": "JSONPatch"})), false),
        format!("{prefix}validating webhook may not return response.patch")
    );
    let allowed = read(&h, "v1", "u", false, &v1(json!({"uid": "u", "allowed": true, "patch": ""}))).unwrap();
    assert_eq!((allowed.allowed, allowed.patch), (true, None), "an empty patch is no patch (kube's `len(Patch) > 0`)");
    let empty = Ok(WebhookAnswer { status: 200, body: Default::default(), content_type: "application/json".into() });
    assert_eq!(
        why(empty, false),
        "failed calling webhook \"w.example.com\": failed to call webhook: 0-length response with status code: 200 and content type: application/json"
    );
    let ok = read(&h, "v1", "u", true, &v1(json!({"uid": "u", "allowed": true, "patch": "W10=", "patchType": "JSONPatch", "warnings": ["w"]}))).unwrap();
    assert_eq!((ok.allowed, ok.patch.as_deref(), ok.warnings), (true, Some(&b"[]"[..]), vec!["w".to_string()]));
}

#[test]
fn answers_of_other_json_types_than_kubes_fail_the_call_in_gos_words() {
    let h = hook(json!([]));
    let answer = |body: Value| Ok(WebhookAnswer { status: 200, body: serde_json::to_vec(&body).unwrap().into(), content_type: "application/json".into() });
    let v1 = |response: Value| answer(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}));
    let why = |r: Result<WebhookAnswer, String>, mutating: bool| read(&h, "v1", "u", mutating, &r).unwrap_err();
    let prefix = "failed calling webhook \"w.example.com\": failed to call webhook: ";
    let go = |field: &str, kind: &str, go_type: &str| format!("{prefix}json: cannot unmarshal {kind} into Go struct field {field} of type {go_type}");
    assert_eq!(
        why(answer(json!([])), false),
        format!(
            "{prefix}couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}"
        )
    );
    let broken = Ok(WebhookAnswer { status: 200, body: b"{\"response\": nul}".to_vec().into(), content_type: "application/json".into() });
    assert_eq!(why(broken, false), format!("{prefix}couldn't get version/kind; json parse error: invalid character '}}' in literal null (expecting 'l')"));
    assert_eq!(why(v1(json!(7)), false), go("AdmissionReview.response", "number", "v1.AdmissionResponse"));
    assert_eq!(why(v1(json!({"uid": "u", "allowed": "true"})), false), go("AdmissionResponse.response.allowed", "string", "bool"));
    assert_eq!(why(v1(json!({"uid": 1, "allowed": true})), false), go("AdmissionResponse.response.uid", "number", "types.UID"));
    assert_eq!(why(v1(json!({"uid": "u", "status": "no"})), false), go("AdmissionResponse.response.status", "string", "v1.Status"));
    assert_eq!(why(v1(json!({"uid": "u", "status": {"code": "403"}})), false), go("Status.response.status.code", "string", "int32"));
    assert_eq!(
        why(v1(json!({"uid": "u", "status": {"code": 1.5}})), false),
        format!("{prefix}json: cannot unmarshal number 1.5 into Go struct field Status.response.status.code of type int32")
    );
    assert_eq!(why(v1(json!({"uid": "u", "status": {"message": ["no"]}})), false), go("Status.response.status.message", "array", "string"));
    assert_eq!(why(v1(json!({"uid": "u", "warnings": "w"})), false), go("AdmissionResponse.response.warnings", "string", "[]string"));
    assert_eq!(why(v1(json!({"uid": "u", "warnings": ["w", 1]})), false), go("AdmissionResponse.response.warnings", "number", "string"));
    assert_eq!(why(v1(json!({"uid": "u", "auditAnnotations": {"a": 1}})), false), go("AdmissionResponse.response.auditAnnotations", "number", "string"));
    assert_eq!(why(v1(json!({"uid": "u", "patch": 5})), true), go("AdmissionResponse.response.patch", "number", "[]uint8"));
    assert_eq!(why(v1(json!({"uid": "u", "patch": "W1!=", "patchType": "JSONPatch"})), true), format!("{prefix}illegal base64 data at input byte 2"));
    assert_eq!(why(v1(json!({"uid": "u", "patch": "W10", "patchType": "JSONPatch"})), true), format!("{prefix}illegal base64 data at input byte 0"));
    let v1beta1 = read(&h, "v1beta1", "u", true, &answer(json!({"response": {"patchType": 1}}))).unwrap_err();
    assert_eq!(v1beta1, go("AdmissionResponse.response.patchType", "number", "v1beta1.PatchType"));
    // A null is no value; a patch may break lines and leave its last symbol's unused bits set.
    let nulls = json!({"uid": "u", "allowed": true, "status": null, "warnings": null, "patch": "W1\n1=", "patchType": "JSONPatch"});
    let ok = read(&h, "v1", "u", true, &v1(nulls)).unwrap();
    assert_eq!((ok.allowed, ok.status, ok.patch.as_deref()), (true, None, Some(&b"[]"[..])));
    let lists = json!({"uid": "u", "allowed": true, "warnings": ["w", null], "auditAnnotations": {"a": null}, "patch": [91, 93], "patchType": "JSONPatch"});
    let ok = read(&h, "v1", "u", true, &v1(lists)).unwrap();
    assert_eq!((ok.warnings, ok.patch.as_deref()), (vec!["w".to_string()], Some(&b"[]"[..])), "a patch may be a list of bytes too");
    // An answer not starting with `{` is read as YAML, as kube's client reads it.
    let body = |text: &str| Ok(WebhookAnswer { status: 200, body: text.as_bytes().to_vec().into(), content_type: "application/json".into() });
    let yaml = body("apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\nresponse: {uid: u, allowed: true}\n");
    assert!(read(&h, "v1", "u", false, &yaml).unwrap().allowed);
    assert_eq!(why(body("null"), false), "failed calling webhook \"w.example.com\": received invalid webhook response: webhook response was absent");
}

#[test]
fn a_review_is_written_as_its_json_tree_would_be_and_its_uid_names_what_it_asks() {
    let hook = hook(json!([]));
    let request =
        json!({"dryRun": false, "kind": {"kind": "Pod"}, "name": "p", "namespace": "ns", "operation": "CREATE", "userInfo": {"username": "u", "uid": ""}});
    let obj = json!({"metadata": {"name": "p", "uid": ""}, "spec": {"containers": []}});
    let (uid, bytes) = super::review::body(&hook, "validating", "v1", &request, Some(&obj), None, 7);
    let review: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(serde_json::to_vec(&review).unwrap(), bytes.to_vec(), "keys in order, as serde_json writes the tree");
    assert_eq!(review["request"]["uid"], json!(uid));
    assert_eq!((&review["request"]["object"], &review["request"]["oldObject"], &review["apiVersion"]), (&obj, &Value::Null, &json!("admission.k8s.io/v1")));
    let mut unnamed = review.clone();
    unnamed["request"]["uid"] = json!("");
    let drawn = crate::rand::Rng::of(&[&7u64.to_be_bytes()[..], hook.uid.as_bytes(), b"validating", &serde_json::to_vec(&unnamed).unwrap()].concat()).uuid();
    assert_eq!(uid, drawn);
    let (other, _) = super::review::body(&hook, "validating", "v1", &request, Some(&json!({"metadata": {"name": "q"}})), None, 7);
    assert_ne!(uid, other);
}

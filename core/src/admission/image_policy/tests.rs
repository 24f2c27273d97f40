//! ImagePolicyWebhook's configuration, reviews and answers, as kube's.

use serde_json::{Value, json};

use super::*;
use crate::admission::Found;
use crate::auth::UserInfo;
use crate::resources::{Settings, catalog};

const KUBECONFIG: &str = "
clusters: [{name: images, cluster: {server: 'https://images.example:8443/policy', certificate-authority: ca.pem}}]
users: [{name: kapi, user: {token: secret}}]
contexts: [{name: default, context: {cluster: images, user: kapi}}]
current-context: default
";

/// The files of the tests: the kubeconfig at `/etc/kapi/images.kubeconfig`, its CA beside it.
fn files(path: &str) -> Result<Vec<u8>, String> {
    match path {
        "/etc/kapi/images.kubeconfig" => Ok(KUBECONFIG.as_bytes().to_vec()),
        "/etc/kapi/ca.pem" => Ok(b"PEM".to_vec()),
        _ => Err(format!("open {path}: no such file or directory")),
    }
}

fn plugin(config: &str) -> Result<ImagePolicyWebhook, String> {
    ImagePolicyWebhook::new(Some(config.as_bytes()), &files)
}

#[test]
fn its_configuration_is_checked_as_kube_checks_it() {
    let init = "couldn't init admission plugin \"ImagePolicyWebhook\": ";
    assert_eq!(ImagePolicyWebhook::new(None, &files).unwrap_err(), format!("{init}no config specified"));
    let p = plugin("imagePolicy: {kubeConfigFile: /etc/kapi/images.kubeconfig}").unwrap();
    assert_eq!((p.allow_ttl, p.deny_ttl, p.default_allow), (SignedDuration::from_mins(5), SignedDuration::from_secs(30), false));
    assert_eq!(p.backend.target.url, "https://images.example:8443");
    // client-go's `?timeout=` of its client's 30 s.
    assert_eq!((p.backend.path.as_str(), p.backend.target.ca_bundle.as_deref()), ("/policy?timeout=30s", Some("PEM")));
    let p = plugin(r#"{"imagePolicy": {"kubeConfigFile": "/etc/kapi/images.kubeconfig", "allowTTL": -1, "denyTTL": 1800, "defaultAllow": true}}"#).unwrap();
    assert_eq!((p.allow_ttl, p.deny_ttl, p.default_allow), (SignedDuration::ZERO, SignedDuration::from_mins(30), true));
    let refused = |config: &str| plugin(config).unwrap_err().strip_prefix(init).unwrap().to_string();
    assert_eq!(refused("imagePolicy: {allowTTL: 3600}"), "valid value is between 1s and 30m0s, got 1h0m0s");
    assert_eq!(refused("imagePolicy: {denyTTL: 3600, retryBackoff: -5}"), "valid value is between 1ns and 5m0s, got -5ms");
    assert_eq!(
        refused("imagePolicy: {allowTTL: 50s}"),
        "json: cannot unmarshal string into Go struct field imagePolicyWebhookConfig.imagePolicy.allowTTL of type time.Duration"
    );
    assert_eq!(refused("imagePolicy: {kubeConfigFile: /etc/kapi/none}"), "open /etc/kapi/none: no such file or directory");
}

/// A pod of `images` with `annotations`, in `ns`.
fn pod(images: &[&str], annotations: Value) -> Value {
    let containers: Vec<Value> = images.iter().enumerate().map(|(i, image)| json!({"name": format!("c{i}"), "image": image})).collect();
    json!({"metadata": {"name": "web", "namespace": "ns", "annotations": annotations}, "spec": {"containers": containers, "initContainers": [{"name": "init", "image": "busybox"}]}})
}

fn pods(cat: &crate::catalog::Catalog) -> &crate::catalog::ResourceInfo {
    &cat.resources().find(|r| r.info.group.is_empty() && r.info.resource == "pods").unwrap().info
}

fn answer(status: u16, body: Value) -> Result<WebhookAnswer, String> {
    Ok(WebhookAnswer { status, body: Bytes::from(body.to_string()), content_type: "application/json".into() })
}

#[test]
fn a_pod_waits_for_the_backends_review_whose_answer_is_kept() {
    let cat = catalog(&Settings::default());
    let (info, user, found) = (pods(&cat), UserInfo::default(), Found::default());
    let a = Attributes::of(Operation::Create, info, "ns", "web", &user, None, &found);
    let p = plugin("imagePolicy: {kubeConfigFile: /etc/kapi/images.kubeconfig, denyTTL: -1}").unwrap();
    let review = |obj: &mut Value, answers: &Answers| p.validate_asking(&a, Some(obj), answers, &mut Vec::new());
    let mut obj = pod(&["nginx:1.27"], json!({"team.image-policy.k8s.io/ticket": "42", "other": "x"}));

    let Err(Halt::Ask(calls)) = review(&mut obj, &Answers::new()) else { panic!("asks the backend") };
    let call = calls[0].call(None).unwrap();
    assert_eq!((call.target.url.as_str(), call.path.as_str(), call.timeout), ("https://images.example:8443", "/policy?timeout=30s", crate::webhook::TIMEOUT));
    assert_eq!(call.credentials.as_ref().and_then(|c| c.token.as_deref()), Some("secret"));
    let sent: Value = serde_json::from_slice(&call.body).unwrap();
    let spec =
        json!({"containers": [{"image": "nginx:1.27"}, {"image": "busybox"}], "annotations": {"team.image-policy.k8s.io/ticket": "42"}, "namespace": "ns"});
    assert_eq!(
        sent,
        json!({"apiVersion": "imagepolicy.k8s.io/v1alpha1", "kind": "ImageReview", "metadata": {"creationTimestamp": null}, "spec": spec, "status": {"allowed": false}})
    );

    let answered = |a: Result<WebhookAnswer, String>| Answers::from([(calls[0].uid.clone(), a)]);
    assert!(review(&mut obj, &answered(answer(200, json!({"status": {"allowed": true}})))).is_ok());
    assert!(review(&mut obj, &Answers::new()).is_ok(), "an allowing answer is kept");

    // A denial (not kept: denyTTL -1) is kube's 403, with the backend's reason or without.
    let mut other = pod(&["evil:latest"], json!({}));
    let Err(Halt::Ask(calls)) = review(&mut other, &Answers::new()) else { panic!("another review") };
    let mut denied = |body: Value| match review(&mut other, &Answers::from([(calls[0].uid.clone(), answer(200, body))])) {
        Err(Halt::Refused(e)) => (e.code, e.message),
        _ => panic!("refused"),
    };
    let why = "pods \"web\" is forbidden: image policy webhook backend denied one or more images: not signed";
    assert_eq!(denied(json!({"status": {"allowed": false, "reason": "not signed"}})), (403, why.to_string()));
    assert_eq!(denied(json!({"status": {}})), (403, "pods \"web\" is forbidden: one or more images rejected by webhook backend".to_string()));
    assert!(matches!(review(&mut other, &Answers::new()), Err(Halt::Ask(_))), "a denial with denyTTL -1 is not kept");
}

#[test]
fn a_backend_that_fails_refuses_the_pod_or_with_default_allow_annotates_it() {
    let cat = catalog(&Settings::default());
    let (info, user, found) = (pods(&cat), UserInfo::default(), Found::default());
    let a = Attributes::of(Operation::Update, info, "ns", "web", &user, None, &found);
    for (answer, why) in [
        (
            Err("Post \"https://images.example:8443/policy\": dial tcp: connect: connection refused".to_string()),
            "Post \"https://images.example:8443/policy\": dial tcp: connect: connection refused",
        ),
        (answer(500, json!("boom")), "an error on the server (\"unknown\") has prevented the request from succeeding"),
        (answer(207, json!({})), "the server responded with the status code 207 but did not return more information"),
        (
            answer(200, json!([])),
            "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }",
        ),
        (answer(200, json!({"status": "x"})), "json: cannot unmarshal string into Go struct field ImageReview.status of type v1alpha1.ImageReviewStatus"),
        (
            answer(200, json!({"status": {"allowed": "yes"}})),
            "json: cannot unmarshal string into Go struct field ImageReviewStatus.status.allowed of type bool",
        ),
        (Ok(WebhookAnswer { status: 200, ..Default::default() }), "0-length response with status code: 200 and content type: "),
    ] {
        for default_allow in [false, true] {
            let p = plugin(&format!("imagePolicy: {{kubeConfigFile: /etc/kapi/images.kubeconfig, defaultAllow: {default_allow}}}")).unwrap();
            let mut obj = pod(&["nginx"], json!({}));
            let Err(Halt::Ask(calls)) = p.validate_asking(&a, Some(&mut obj), &Answers::new(), &mut Vec::new()) else { panic!("asks") };
            let answers = Answers::from([(calls[0].uid.clone(), answer.clone())]);
            let r = p.validate_asking(&a, Some(&mut obj), &answers, &mut Vec::new());
            match r {
                Ok(()) => assert!(default_allow && obj["metadata"]["annotations"][FAILED_OPEN] == "true"),
                Err(Halt::Refused(e)) => assert_eq!((default_allow, e.code, e.message), (false, 403, format!("pods \"web\" is forbidden: {why}"))),
                Err(Halt::Ask(_)) => panic!("a failed call is not asked again within the write"),
            }
        }
    }
    // Other resources and subresources are not reviewed; ephemeral containers are, alone.
    let p = plugin("imagePolicy: {kubeConfigFile: /etc/kapi/images.kubeconfig}").unwrap();
    let status = Attributes { subresource: Some("status"), ..Attributes::of(Operation::Update, info, "ns", "web", &user, None, &found) };
    assert!(p.validate_asking(&status, Some(&mut pod(&["nginx"], json!({}))), &Answers::new(), &mut Vec::new()).is_ok());
    let ephemeral = Attributes { subresource: Some("ephemeralcontainers"), ..status };
    let mut debugged = pod(&["nginx"], json!({}));
    debugged["spec"]["ephemeralContainers"] = json!([{"name": "debug", "image": "busybox:1.36"}]);
    let Err(Halt::Ask(calls)) = p.validate_asking(&ephemeral, Some(&mut debugged), &Answers::new(), &mut Vec::new()) else { panic!("asks") };
    let sent: Value = serde_json::from_slice(&calls[0].body).unwrap();
    assert_eq!(sent["spec"]["containers"], json!([{"image": "busybox:1.36"}]));
}

use jiff::Timestamp;
use serde_json::{Value, json};

use super::policy::Request;
use super::*;
use crate::pipeline::Head;

fn policy(yaml: &str) -> Result<Policy, String> {
    Policy::read(format!("apiVersion: audit.k8s.io/v1\nkind: Policy\n{yaml}").as_bytes())
}

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo { name: name.into(), groups: groups.iter().map(|g| g.to_string()).collect(), ..UserInfo::default() }
}

/// A resource request by `u`.
fn on<'a>(u: &'a UserInfo, verb: &'a str, (group, resource, subresource): (&'a str, &'a str, &'a str), namespace: &'a str, name: &'a str) -> Request<'a> {
    Request { user: u, verb, resource_request: true, path: "", namespace, group, resource, subresource, name }
}

#[test]
fn a_policy_is_read_and_checked_as_kube_reads_it() {
    assert_eq!(policy("rules: []").unwrap_err(), "loaded illegal policy with 0 rules");
    assert_eq!(policy("rules: [{users: [a]}]").unwrap_err(), "rules[0].level: Required value");
    assert_eq!(
        policy("rules: [{level: Everything}]").unwrap_err(),
        "rules[0].level: Unsupported value: \"Everything\": supported values: \"None\", \"Metadata\", \"Request\", \"RequestResponse\""
    );
    assert_eq!(
        policy("omitStages: [Sent]\nrules: [{level: None}]").unwrap_err(),
        "omitStages[0]: Invalid value: \"Sent\": allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic"
    );
    assert_eq!(
        policy("rules: [{level: Metadata, nonResourceURLs: ['/healthz'], namespaces: [a]}]").unwrap_err(),
        "rules[0].nonResourceURLs: Invalid value: []string{\"/healthz\"}: rules cannot apply to both regular resources and non-resource URLs"
    );
    assert_eq!(
        policy("rules: [{level: Metadata, nonResourceURLs: ['healthz', '/a*b']}]").unwrap_err(),
        "[rules[0].nonResourceURLs[0]: Invalid value: \"healthz\": non-resource URL rules must begin with a '/' character, \
         rules[0].nonResourceURLs[1]: Invalid value: \"/a*b\": non-resource URL wildcards '*' must be the final character of the rule]"
    );
    let wrong = Policy::read(b"apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: [{level: None}]").unwrap_err();
    assert_eq!(wrong, "unknown group version field audit.k8s.io/v1beta1, Kind=Policy in policy");
}

#[test]
fn the_first_rule_that_matches_gives_the_level() {
    let p = policy(
        "omitStages: [RequestReceived]
rules:
- {level: None, users: ['system:kube-proxy'], verbs: [watch]}
- {level: RequestResponse, resources: [{group: '', resources: [secrets], resourceNames: [s1]}], omitManagedFields: true}
- {level: Request, resources: [{group: apps, resources: ['*/scale']}], omitStages: [ResponseStarted]}
- {level: Metadata, resources: [{group: '', resources: ['pods/*']}], namespaces: [dev]}
- {level: Metadata, nonResourceURLs: ['/healthz*']}
- {level: Request, userGroups: ['system:masters']}",
    )
    .unwrap();
    let (proxy, admin, bob) = (user("system:kube-proxy", &[]), user("admin", &["system:masters"]), user("bob", &[]));
    let level = |r: &Request| p.evaluate(r).level;
    assert_eq!(level(&on(&proxy, "watch", ("", "endpoints", ""), "", "")), Level::None);
    assert_eq!(level(&on(&bob, "get", ("", "secrets", ""), "dev", "s1")), Level::RequestResponse);
    // resourceNames narrow the rule; no rule matches: None.
    assert_eq!(level(&on(&bob, "get", ("", "secrets", ""), "dev", "s2")), Level::None);
    assert_eq!(level(&on(&bob, "update", ("apps", "deployments", "scale"), "dev", "d")), Level::Request);
    assert_eq!(level(&on(&bob, "update", ("apps", "deployments", ""), "dev", "d")), Level::None);
    assert_eq!(level(&on(&bob, "get", ("", "pods", "log"), "dev", "p")), Level::Metadata);
    assert_eq!(level(&on(&bob, "get", ("", "pods", ""), "dev", "p")), Level::Metadata);
    assert_eq!(level(&on(&bob, "get", ("", "pods", ""), "prod", "p")), Level::None);
    let health = Request { resource_request: false, path: "/healthz/etcd", ..on(&bob, "get", ("", "", ""), "", "") };
    assert_eq!(level(&health), Level::Metadata);
    assert_eq!(level(&on(&admin, "delete", ("", "nodes", ""), "", "n")), Level::Request);
    // The policy's omitted stages join each rule's; a rule's omitManagedFields overrides it.
    let scale = p.evaluate(&on(&bob, "update", ("apps", "deployments", "scale"), "dev", "d"));
    assert_eq!(scale.omit_stages, [Stage::ResponseStarted, Stage::RequestReceived]);
    assert!(p.evaluate(&on(&bob, "get", ("", "secrets", ""), "dev", "s1")).omit_managed_fields);
}

fn received() -> Received {
    Received {
        audit_id: "id-1".into(),
        request_uri: "/api/v1/namespaces/dev/configmaps?fieldManager=kubectl".into(),
        verb: "create".into(),
        user: user("bob", &["system:authenticated"]),
        source_ips: source_ips(Some("10.0.0.1, 10.0.0.2"), None, "127.0.0.1:50000"),
        user_agent: "kubectl/v1.32".into(),
        object_ref: Some(ObjectRef { resource: "configmaps".into(), namespace: "dev".into(), api_version: "v1".into(), ..ObjectRef::default() }),
        at: Timestamp::from_second(1_800_000_000).unwrap(),
    }
}

fn event(line: &Bytes) -> Value {
    assert_eq!(line.last(), Some(&b'\n'));
    serde_json::from_slice(line).unwrap()
}

#[test]
fn a_request_has_an_event_at_each_stage_the_policy_keeps() {
    let now = Timestamp::from_second(1_800_000_001).unwrap();
    let config = |level: Level, omit: &[Stage]| Config { level, omit_stages: omit.to_vec(), omit_managed_fields: false };
    let body = json!({"kind": "ConfigMap", "metadata": {"name": "c", "managedFields": [{"manager": "kubectl"}]}});
    let (mut r, line) = Recorder::start(config(Level::Metadata, &[]), received(), now).unwrap();
    let first = event(&line.unwrap());
    assert_eq!(
        first,
        json!({"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": "id-1", "stage": "RequestReceived",
            "requestURI": "/api/v1/namespaces/dev/configmaps?fieldManager=kubectl", "verb": "create",
            "user": {"username": "bob", "groups": ["system:authenticated"]}, "sourceIPs": ["10.0.0.1", "10.0.0.2", "127.0.0.1"],
            "userAgent": "kubectl/v1.32", "objectRef": {"resource": "configmaps", "namespace": "dev", "apiVersion": "v1"},
            "requestReceivedTimestamp": "2027-01-15T08:00:00.000000Z", "stageTimestamp": "2027-01-15T08:00:01.000000Z"})
    );
    // The object the handler decoded names it, at every level.
    r.request_object(body.clone());
    r.annotate("authorization.k8s.io/decision", "allow");
    r.annotate("authorization.k8s.io/decision", "forbid");
    r.impersonated(&user("alice", &[]));
    assert!(r.responded(&Head::new(201, "application/json"), false, now).is_none());
    r.body(b"{\"kind\":\"ConfigMap\"}");
    let done = event(&r.complete(now).unwrap());
    assert_eq!(done["stage"], "ResponseComplete");
    assert_eq!(done["responseStatus"], json!({"metadata": {}, "code": 201}));
    assert_eq!(done["annotations"], json!({"authorization.k8s.io/decision": "allow"}));
    assert_eq!(done["impersonatedUser"], json!({"username": "alice"}));
    assert_eq!(done["objectRef"]["name"], "c");
    assert!(done.get("requestObject").is_none() && done.get("responseObject").is_none(), "{done}");
    assert!(r.complete(now).is_none(), "once");

    // A Status answer is the event's status; RequestResponse records both objects.
    let strip = Config { omit_managed_fields: true, ..config(Level::RequestResponse, &[Stage::RequestReceived]) };
    let (mut r, line) = Recorder::start(strip, received(), now).unwrap();
    assert!(line.is_none());
    r.request_object(body);
    r.responded(&Head::new(409, "application/json"), false, now);
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "configmaps \"c\" already exists",
        "reason": "AlreadyExists", "details": {"name": "c", "kind": "configmaps"}, "code": 409});
    r.body(status.to_string().as_bytes());
    let done = event(&r.complete(now).unwrap());
    assert_eq!(
        done["responseStatus"],
        json!({"metadata": {}, "status": "Failure", "message": "configmaps \"c\" already exists", "reason": "AlreadyExists",
            "details": {"name": "c", "kind": "configmaps"}, "code": 409})
    );
    assert_eq!(done["requestObject"], json!({"kind": "ConfigMap", "metadata": {"name": "c"}}));
    assert_eq!(done["responseObject"], status);

    // A watch's answer starts; None records nothing.
    let (mut r, _) = Recorder::start(config(Level::Request, &[]), received(), now).unwrap();
    assert_eq!(event(&r.responded(&Head::new(200, "application/json"), true, now).unwrap())["stage"], "ResponseStarted");
    assert!(Recorder::start(config(Level::None, &[]), received(), now).is_none());
    // kube's SourceIPs: what is not an address left out, the last repeated not again.
    assert_eq!(source_ips(Some("bogus, 10.0.0.1"), Some("10.1.1.1"), "[::1]:443"), ["10.0.0.1", "10.1.1.1", "::1"]);
    assert_eq!(source_ips(Some("10.0.0.1"), Some("10.0.0.1"), "10.0.0.1:5"), ["10.0.0.1"]);
}

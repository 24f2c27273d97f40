//! kube's Node authorizer, with RBAC after it (`--authorization-mode=Node,RBAC`): a kubelet,
//! `system:node:<name>` in `system:nodes`, reads the secrets, config maps, claims and volumes
//! of the pods bound to its node and nothing else, its own Node and lease, and pods through a
//! `spec.nodeName` field selector; what changes (a pod deleted, another bound) takes effect at
//! once. Every refusal is kube's 403 with the Node authorizer's reason.

use kapi_sim::{ADMIN_TOKEN, Response, World, epoch, server_authorizing};
use serde_json::{Value, json};

fn world() -> World {
    World::new(server_authorizing("Node,RBAC"), epoch(), 7)
}

fn create(w: &mut World, path: &str, body: Value) {
    let r = w.call("POST", path, "", Some(&body), "application/json");
    assert_eq!(r.head.status, 201, "{path}: {}", String::from_utf8_lossy(&r.body));
}

/// A request as the kubelet of `node` (the administrator impersonating it).
fn as_node(w: &mut World, node: &str, method: &str, path: &str, query: &str, body: Option<Value>) -> Response {
    let mut headers = vec![
        ("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}")),
        ("Impersonate-User".to_string(), format!("system:node:{node}")),
        ("Impersonate-Group".to_string(), "system:nodes".to_string()),
    ];
    if body.is_some() {
        headers.push(("Content-Type".into(), "application/json".into()));
    }
    let body = body.map(|b| bytes::Bytes::from(b.to_string())).unwrap_or_default();
    w.request(kapi_core::pipeline::Request { method: method.into(), path: path.into(), query: query.into(), headers, body, ..Default::default() })
}

fn status(w: &mut World, node: &str, path: &str, query: &str) -> u16 {
    as_node(w, node, "GET", path, query, None).head.status
}

fn refusal(w: &mut World, node: &str, path: &str, query: &str) -> String {
    let r = as_node(w, node, "GET", path, query, None);
    assert_eq!(r.head.status, 403, "{path}: {}", String::from_utf8_lossy(&r.body));
    r.json()["message"].as_str().unwrap().to_string()
}

const NS: &str = "/api/v1/namespaces/default";

fn pod(name: &str, node: &str, secret: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeName": node, "serviceAccountName": "robot", "containers": [{"name": "c", "image": "i",
            "envFrom": [{"configMapRef": {"name": "settings"}}]}],
            "volumes": [{"name": "s", "secret": {"secretName": secret}}, {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}})
}

fn setup_objects(w: &mut World) {
    for secret in ["app-secret", "other-secret", "volume-secret"] {
        create(w, &format!("{NS}/secrets"), json!({"metadata": {"name": secret}}));
    }
    create(w, &format!("{NS}/configmaps"), json!({"metadata": {"name": "settings"}}));
    create(w, &format!("{NS}/serviceaccounts"), json!({"metadata": {"name": "robot"}}));
    create(
        w,
        &format!("{NS}/persistentvolumeclaims"),
        json!({"metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
    );
    create(
        w,
        "/api/v1/persistentvolumes",
        json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
        "claimRef": {"namespace": "default", "name": "data"},
        "csi": {"driver": "d.example.com", "volumeHandle": "h", "nodePublishSecretRef": {"name": "volume-secret", "namespace": "default"}}}}),
    );
    create(w, &format!("{NS}/pods"), pod("web", "n1", "app-secret"));
    let mut unbound = pod("pending", "", "other-secret");
    unbound["spec"].as_object_mut().unwrap().remove("nodeName");
    create(w, &format!("{NS}/pods"), unbound);
}

#[test]
fn a_node_reads_what_its_pods_need_and_nothing_else() {
    let mut w = world();
    setup_objects(&mut w);
    for path in [
        format!("{NS}/secrets/app-secret"),
        format!("{NS}/configmaps/settings"),
        format!("{NS}/persistentvolumeclaims/data"),
        "/api/v1/persistentvolumes/pv1".to_string(),
        format!("{NS}/secrets/volume-secret"),
        format!("{NS}/pods/web"),
    ] {
        assert_eq!(status(&mut w, "n1", &path, ""), 200, "{path}");
    }
    assert_eq!(
        refusal(&mut w, "n1", &format!("{NS}/secrets/other-secret"), ""),
        "secrets \"other-secret\" is forbidden: User \"system:node:n1\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\": no relationship found between node 'n1' and this object"
    );
    assert_eq!(
        refusal(&mut w, "n2", &format!("{NS}/secrets/app-secret"), ""),
        "secrets \"app-secret\" is forbidden: User \"system:node:n2\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\": no relationship found between node 'n2' and this object"
    );
    assert!(
        refusal(&mut w, "n1", &format!("{NS}/secrets"), "")
            .ends_with("cannot list resource \"secrets\" in API group \"\" in the namespace \"default\": No Object name found")
    );
    assert!(refusal(&mut w, "n1", &format!("{NS}/persistentvolumeclaims/data/status"), "").ends_with(": can only get/update/patch this type"));
    assert!(refusal(&mut w, "n1", &format!("{NS}/serviceaccounts/robot"), "").ends_with(": not allowed to get service accounts"));

    // Pods: through a spec.nodeName selector naming itself, or one bound to it by name.
    assert_eq!(status(&mut w, "n1", "/api/v1/pods", "fieldSelector=spec.nodeName%3Dn1"), 200);
    assert_eq!(status(&mut w, "n1", "/api/v1/pods", "fieldSelector=spec.nodeName%3Dn1&watch=true&timeoutSeconds=1"), 200);
    assert!(
        refusal(&mut w, "n1", "/api/v1/pods", "fieldSelector=spec.nodeName%3Dn2").ends_with(": can only list/watch pods with spec.nodeName field selector")
    );
    assert!(refusal(&mut w, "n1", &format!("{NS}/pods/pending"), "").ends_with(": no relationship found between node 'n1' and this object"));

    // Its own Node and lease; the static rules of system:node for the rest.
    assert_eq!(status(&mut w, "n1", "/api/v1/nodes/n1", ""), 404, "allowed, and not there");
    assert!(refusal(&mut w, "n1", "/api/v1/nodes/n2", "").ends_with(": node 'n1' cannot read 'n2', only its own Node object"));
    assert!(refusal(&mut w, "n1", "/api/v1/nodes", "").ends_with(": node 'n1' cannot read all nodes, only its own Node object"));
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}});
    assert_eq!(as_node(&mut w, "n1", "POST", "/api/v1/nodes", "", Some(node)).head.status, 201);
    assert_eq!(status(&mut w, "n1", "/api/v1/nodes/n1", ""), 200);
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "n1"}, "spec": {"holderIdentity": "n1"}});
    assert_eq!(as_node(&mut w, "n1", "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", "", Some(lease)).head.status, 201);
    assert!(
        refusal(&mut w, "n1", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n2", "")
            .ends_with(": can only access node lease with the same name as the requesting node")
    );
    assert_eq!(status(&mut w, "n1", &format!("{NS}/services"), ""), 200, "system:node's rules read services");
    assert!(
        refusal(&mut w, "n1", "/apis/apps/v1/deployments", "").ends_with("cannot list resource \"deployments\" in API group \"apps\" at the cluster scope"),
        "no reason: neither Node nor RBAC has one"
    );

    // Tokens for the service accounts of its pods.
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"audiences": ["api"]}});
    assert_eq!(as_node(&mut w, "n1", "POST", &format!("{NS}/serviceaccounts/robot/token"), "", Some(request.clone())).head.status, 201);
    assert_eq!(as_node(&mut w, "n2", "POST", &format!("{NS}/serviceaccounts/robot/token"), "", Some(request)).head.status, 403);
}

#[test]
fn what_a_node_may_read_follows_its_pods() {
    let mut w = world();
    setup_objects(&mut w);
    let secret = format!("{NS}/secrets/app-secret");
    assert_eq!(status(&mut w, "n2", &secret, ""), 403);
    create(&mut w, &format!("{NS}/pods"), pod("web-2", "n2", "app-secret"));
    assert_eq!(status(&mut w, "n2", &secret, ""), 200, "a pod bound to n2 needs it");
    assert_eq!(status(&mut w, "n1", &secret, ""), 200);

    assert_eq!(w.call("DELETE", &format!("{NS}/pods/web"), "gracePeriodSeconds=0", None, "").head.status, 200);
    assert_eq!(status(&mut w, "n1", &secret, ""), 403, "its only pod needing it is gone");
    assert_eq!(status(&mut w, "n1", "/api/v1/persistentvolumes/pv1", ""), 403, "and with it the claim, and the volume");
    assert_eq!(status(&mut w, "n2", &secret, ""), 200);

    // A mirror pod (made by a kubelet from a file) references nothing.
    let mut mirror = pod("static", "n3", "other-secret");
    mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "hash"});
    create(&mut w, &format!("{NS}/pods"), mirror);
    assert_eq!(status(&mut w, "n3", &format!("{NS}/pods/static"), ""), 200);
    assert_eq!(status(&mut w, "n3", &format!("{NS}/secrets/other-secret"), ""), 403);
}

#[test]
fn a_nodes_rules_cannot_be_listed_and_others_are_left_to_rbac() {
    let mut w = world();
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}});
    let r = as_node(&mut w, "n1", "POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", "", Some(review.clone()));
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let status = &r.json()["status"];
    assert_eq!(
        (status["incomplete"].clone(), status["evaluationError"].clone()),
        (json!(true), json!("node authorizer does not support user rule resolution"))
    );

    let everywhere = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {}});
    let r = as_node(&mut w, "n1", "POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", "", Some(everywhere));
    assert_eq!((r.head.status, r.json()["message"].clone()), (400, json!("no namespace on request")));

    // A user named like a node, without the group, is no node.
    let mut headers = vec![
        ("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}")),
        ("Impersonate-User".to_string(), "system:node:n1".to_string()),
        ("Content-Type".to_string(), "application/json".to_string()),
    ];
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "list", "resource": "pods", "fieldSelector": {"rawSelector": "spec.nodeName=n1"}}}});
    let body = bytes::Bytes::from(sar.to_string());
    let r = w.request(kapi_core::pipeline::Request {
        method: "POST".into(),
        path: "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews".into(),
        headers: headers.clone(),
        body: body.clone(),
        ..Default::default()
    });
    assert_eq!(r.json()["status"]["allowed"], json!(false));
    headers.push(("Impersonate-Group".to_string(), "system:nodes".to_string()));
    let r = w.request(kapi_core::pipeline::Request {
        method: "POST".into(),
        path: "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews".into(),
        headers,
        body,
        ..Default::default()
    });
    assert_eq!(r.json()["status"]["allowed"], json!(true), "the review's field selector is the node's");
}

#[test]
fn a_reviews_field_selector_is_checked_and_what_does_not_parse_is_said() {
    let mut w = world();
    let review = |selector: Value| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": "system:node:n1", "groups": ["system:nodes"], "resourceAttributes": {"verb": "list", "resource": "pods", "fieldSelector": selector}}})
    };
    let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let r = w.call(
        "POST",
        path,
        "",
        Some(&review(json!({"rawSelector": "a=b", "requirements": [{"key": "a", "operator": "In", "values": ["b"]}]}))),
        "application/json",
    );
    assert_eq!(r.head.status, 422);
    assert_eq!(
        r.json()["message"],
        "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes.fieldSelector.rawSelector: Invalid value: \"a=b\": may not specified at the same time as requirements"
    );
    let r = w.call("POST", path, "", Some(&review(json!({}))), "application/json");
    assert!(r.json()["message"].as_str().unwrap().ends_with(
        "spec.resourceAttributes.fieldSelector.requirements: Required value: when spec.resourceAttributes.fieldSelector is specified, requirements or rawSelector is required"
    ));

    // A requirement that does not convert is dropped, the rest kept, and the review says so.
    let r = w.call(
        "POST",
        path,
        "",
        Some(&review(json!({"requirements": [{"key": "spec.nodeName", "operator": "In", "values": ["n1"]}, {"key": "x", "operator": "Exists"}]}))),
        "application/json",
    );
    let status = &r.json()["status"];
    assert_eq!(status["allowed"], json!(true));
    assert_eq!(status["evaluationError"], "spec.resourceAttributes.fieldSelector partially ignored due to parse error");
    let r = w.call("POST", path, "", Some(&review(json!({"rawSelector": "spec.nodeName=n1=x"}))), "application/json");
    let status = &r.json()["status"];
    assert_eq!(
        (status["allowed"].clone(), status["evaluationError"].clone()),
        (json!(false), json!("spec.resourceAttributes.fieldSelector ignored due to parse error"))
    );
}

#[test]
fn a_kubelet_asks_tokens_only_for_the_audiences_its_pods_volumes_name() {
    // NodeRestriction follows the pod's claim to its volume and the volume's CSI driver, whose
    // tokenRequests name the audiences the kubelet may ask for (kube's beta
    // ServiceAccountNodeAudienceRestriction, on by default).
    let mut setup = server_authorizing("Node,RBAC");
    let chain = kapi_core::admission::Chain::from_flags(&["NodeRestriction".into()], &[], &Default::default(), &kapi_core::admission::no_files).unwrap();
    std::sync::Arc::get_mut(&mut setup.server).expect("not shared yet").admission = std::sync::Arc::new(chain);
    let mut w = World::new(setup, epoch(), 7);
    setup_objects(&mut w);
    create(&mut w, "/apis/storage.k8s.io/v1/csidrivers", json!({"metadata": {"name": "d.example.com"}, "spec": {"tokenRequests": [{"audience": "vault"}]}}));
    create(
        &mut w,
        &format!("{NS}/persistentvolumeclaims"),
        json!({"metadata": {"name": "bound"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeName": "pv1"}}),
    );
    let mut web = pod("vaulted", "n1", "app-secret");
    web["spec"]["volumes"] = json!([{"name": "data", "persistentVolumeClaim": {"claimName": "bound"}}]);
    create(&mut w, &format!("{NS}/pods"), web);
    let uid = w.call("GET", &format!("{NS}/pods/vaulted"), "", None, "").json()["metadata"]["uid"].clone();
    let token = |audience: &str| {
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"audiences": [audience], "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "vaulted", "uid": uid}}})
    };
    let path = format!("{NS}/serviceaccounts/robot/token");
    let r = as_node(&mut w, "n1", "POST", &path, "", Some(token("vault")));
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let r = as_node(&mut w, "n1", "POST", &path, "", Some(token("other")));
    assert_eq!(r.head.status, 403, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.json()["message"],
        "serviceaccounts \"robot\" is forbidden: audience \"other\" not found in pod spec volume, system:node:n1 is not authorized to request tokens for this audience"
    );
}

//! The kinds of kube-apiserver v1.33 beyond the everyday ones, through the core's request
//! pipeline: an operator's install creates every object it ships, HorizontalPodAutoscalers are
//! one object served at two versions, what kube creates at start is there, and the rules of
//! the new kinds answer with kube's codes and messages.

use bytes::Bytes;
use kapi_core::pipeline::Request;
use kapi_sim::{ADMIN_TOKEN, Response, World, default_server, epoch};
use serde_json::{Value, json};

fn world() -> World {
    World::new(default_server(), epoch(), 7)
}

fn call(w: &mut World, method: &str, path: &str, body: Option<Value>) -> Response {
    let ct = if method == "PATCH" { "application/merge-patch+json" } else { "application/json" };
    w.call(method, path, "", body.as_ref(), if body.is_some() { ct } else { "" })
}

fn created(w: &mut World, path: &str, body: Value) -> Value {
    let r = call(w, "POST", path, Some(body));
    assert_eq!(r.head.status, 201, "POST {path}: {}", String::from_utf8_lossy(&r.body));
    r.json()
}

fn message(r: &Response) -> String {
    r.json()["message"].as_str().unwrap_or_default().to_string()
}

/// The 19 objects of a typical operator's install, as `kubectl apply -f` posts them.
fn operator_install() -> Vec<(&'static str, Value)> {
    vec![
        ("/api/v1/namespaces", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "op"}})),
        ("/api/v1/namespaces/op/serviceaccounts", json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "operator"}})),
        (
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"},
                "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                    "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "operator"},
                "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["*"]}, {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "operator"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "operator"},
                "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": "op"}]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/op/roles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "leader"},
                "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"]}]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/op/rolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "leader"},
                "roleRef": {"kind": "Role", "name": "leader"}, "subjects": [{"kind": "ServiceAccount", "name": "operator"}]}),
        ),
        (
            "/apis/apps/v1/namespaces/op/deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "operator"},
                "spec": {"selector": {"matchLabels": {"app": "op"}}, "template": {"metadata": {"labels": {"app": "op"}},
                    "spec": {"serviceAccountName": "operator", "priorityClassName": "operator-critical", "containers": [{"name": "op", "image": "example/op:1"}]}}}}),
        ),
        (
            "/api/v1/namespaces/op/services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "operator"}, "spec": {"selector": {"app": "op"}, "ports": [{"port": 8443}]}}),
        ),
        (
            "/apis/networking.k8s.io/v1/namespaces/op/ingresses",
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "operator"},
                "spec": {"rules": [{"host": "op.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "operator", "port": {"number": 8443}}}}]}}]}}),
        ),
        (
            "/apis/networking.k8s.io/v1/namespaces/op/networkpolicies",
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "operator"},
                "spec": {"podSelector": {"matchLabels": {"app": "op"}}, "ingress": [{"ports": [{"port": 8443}]}]}}),
        ),
        (
            "/apis/policy/v1/namespaces/op/poddisruptionbudgets",
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "operator"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "op"}}}}),
        ),
        (
            "/apis/autoscaling/v2/namespaces/op/horizontalpodautoscalers",
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "operator"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "operator"}, "maxReplicas": 3}}),
        ),
        (
            "/api/v1/namespaces/op/persistentvolumeclaims",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        ),
        (
            "/apis/storage.k8s.io/v1/storageclasses",
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"}, "provisioner": "example.com/fast"}),
        ),
        (
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "operator-critical"}, "value": 1000000}),
        ),
        (
            "/api/v1/namespaces/op/resourcequotas",
            json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "quota"}, "spec": {"hard": {"pods": "10", "requests.cpu": "4"}}}),
        ),
        (
            "/api/v1/namespaces/op/limitranges",
            json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits"},
                "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"cpu": "100m"}}]}}),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "replicas"},
                "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}]},
                    "validations": [{"expression": "object.spec.replicas <= 5"}]}}),
        ),
    ]
}

#[test]
fn an_operator_install_creates_every_object_it_ships() {
    let mut w = world();
    let objects = operator_install();
    assert_eq!(objects.len(), 19);
    for (path, body) in objects {
        let obj = created(&mut w, path, body);
        let got = w.call("GET", &format!("{path}/{}", obj["metadata"]["name"].as_str().unwrap()), "", None, "");
        assert_eq!(got.head.status, 200, "{path}");
    }
    // Defaults kube applies to what the install left out.
    let get = |w: &mut World, path: &str| w.call("GET", path, "", None, "").json();
    let np = get(&mut w, "/apis/networking.k8s.io/v1/namespaces/op/networkpolicies/operator");
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress"]));
    assert_eq!(np["spec"]["ingress"][0]["ports"][0]["protocol"], "TCP");
    let binding = get(&mut w, "/apis/rbac.authorization.k8s.io/v1/namespaces/op/rolebindings/leader");
    assert_eq!(binding["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
    assert_eq!(binding["subjects"][0]["apiGroup"], "");
    let sc = get(&mut w, "/apis/storage.k8s.io/v1/storageclasses/fast");
    assert_eq!((sc["reclaimPolicy"].as_str(), sc["volumeBindingMode"].as_str()), (Some("Delete"), Some("Immediate")));
    let lr = get(&mut w, "/api/v1/namespaces/op/limitranges/limits");
    assert_eq!(lr["spec"]["limits"][0]["default"], json!({"cpu": "2"}));
    assert_eq!(lr["spec"]["limits"][0]["defaultRequest"], json!({"cpu": "2"}));
    let pvc = get(&mut w, "/api/v1/namespaces/op/persistentvolumeclaims/data");
    assert_eq!((pvc["status"]["phase"].as_str(), pvc["spec"]["volumeMode"].as_str()), (Some("Pending"), Some("Filesystem")));
    let vap = get(&mut w, "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/replicas");
    assert_eq!(vap["spec"]["failurePolicy"], "Fail");
    assert_eq!(vap["spec"]["matchConstraints"]["matchPolicy"], "Equivalent");
    assert_eq!(vap["metadata"]["generation"], 1);
    let crd = get(&mut w, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com");
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
}

#[test]
fn a_horizontal_pod_autoscaler_is_one_object_at_two_versions() {
    let mut w = world();
    let v1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers";
    let v2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";
    let target = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"});
    created(
        &mut w,
        v1,
        json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "cpu"},
        "spec": {"scaleTargetRef": target, "maxReplicas": 4, "targetCPUUtilizationPercentage": 70}}),
    );
    let as_v2 = w.call("GET", &format!("{v2}/cpu"), "", None, "").json();
    assert_eq!(as_v2["apiVersion"], "autoscaling/v2");
    assert_eq!(
        as_v2["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}])
    );
    assert_eq!(as_v2["spec"]["minReplicas"], 1);

    // What v1 cannot say travels in kube's annotations and comes back whole.
    let memory = json!({"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}});
    created(
        &mut w,
        v2,
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "mem"},
        "spec": {"scaleTargetRef": target, "maxReplicas": 4, "metrics": [memory],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}}),
    );
    let as_v1 = w.call("GET", &format!("{v1}/mem"), "", None, "").json();
    assert_eq!(as_v1["apiVersion"], "autoscaling/v1");
    assert!(as_v1["spec"].get("targetCPUUtilizationPercentage").is_none());
    assert_eq!(
        as_v1["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"],
        r#"[{"resource":{"name":"memory","targetAverageValue":"500Mi"},"type":"Resource"}]"#
    );
    let r = call(&mut w, "PATCH", &format!("{v1}/mem"), Some(json!({"spec": {"maxReplicas": 6}})));
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let back = w.call("GET", &format!("{v2}/mem"), "", None, "").json();
    assert_eq!(back["spec"]["maxReplicas"], 6);
    assert_eq!(back["spec"]["metrics"], json!([memory]));
    assert_eq!(back["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"], 60);
    assert!(back["metadata"].get("annotations").is_none(), "v2 never shows the round-trip annotations: {back}");

    // Lists and watches of either version see every object in that version.
    let list = w.call("GET", v1, "", None, "").json();
    assert_eq!(list["kind"], "HorizontalPodAutoscalerList");
    assert_eq!(list["apiVersion"], "autoscaling/v1");
    assert!(
        list["items"].as_array().unwrap().iter().all(|i| i.get("apiVersion").is_none() && i["spec"].get("metrics").is_none()),
        "v1 items, without type meta as kube lists them"
    );
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let watch = w.call("GET", v1, &format!("watch=1&resourceVersion={rv}"), None, "").watch.expect("a watch");
    call(&mut w, "PATCH", &format!("{v2}/cpu"), Some(json!({"spec": {"maxReplicas": 9}})));
    let (frames, _) = w.frames(watch);
    let event: Value = serde_json::from_slice(frames.last().expect("an event")).unwrap();
    assert_eq!(event["object"]["apiVersion"], "autoscaling/v1");
    assert_eq!(event["object"]["spec"]["maxReplicas"], 9);
    assert_eq!(event["object"]["spec"]["targetCPUUtilizationPercentage"], 70);

    // Validation speaks of the stored form, whatever version was sent, as kube's does.
    let r = call(
        &mut w,
        "POST",
        v1,
        Some(json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "bad"},
        "spec": {"scaleTargetRef": target, "minReplicas": 5, "maxReplicas": 2}})),
    );
    assert_eq!(r.head.status, 422);
    assert_eq!(
        message(&r),
        "HorizontalPodAutoscaler.autoscaling \"bad\" is invalid: spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"
    );
}

#[test]
fn what_kube_apiserver_creates_at_start_is_there() {
    let mut w = world();
    let names = |w: &mut World, path: &str| -> Vec<String> {
        w.call("GET", path, "", None, "").json()["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(names(&mut w, "/apis/scheduling.k8s.io/v1/priorityclasses"), ["system-cluster-critical", "system-node-critical"]);
    let schemas = names(&mut w, "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas");
    assert_eq!(schemas.len(), 13);
    assert!(schemas.contains(&"exempt".to_string()) && schemas.contains(&"catch-all".to_string()));
    assert_eq!(names(&mut w, "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations").len(), 8);
    let services = names(&mut w, "/apis/apiregistration.k8s.io/v1/apiservices");
    assert!(services.contains(&"v1.".to_string()) && services.contains(&"v2.autoscaling".to_string()), "{services:?}");
    let local = w.call("GET", "/apis/apiregistration.k8s.io/v1/apiservices/v1.apps", "", None, "").json();
    assert_eq!(local["status"]["conditions"][0]["reason"], "Local");
    assert_eq!(local["spec"]["groupPriorityMinimum"], 17800);
    // The addresses services hold are IPAddress objects, as kube's allocator makes them.
    let ip = w.call("GET", "/apis/networking.k8s.io/v1/ipaddresses/10.0.0.1", "", None, "").json();
    assert_eq!(ip["spec"]["parentRef"], json!({"group": "", "resource": "services", "namespace": "default", "name": "kubernetes"}));
    // A system class may not be made up, nor a user's raised above the system's.
    let r = call(
        &mut w,
        "POST",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        Some(json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "system-mine"}, "value": 10})),
    );
    assert_eq!(r.head.status, 422);
    assert_eq!(
        message(&r),
        "PriorityClass.scheduling.k8s.io \"system-mine\" is invalid: metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class"
    );
}

#[test]
fn rules_of_the_new_kinds_answer_as_kube_does() {
    let mut w = world();
    let r = call(
        &mut w,
        "POST",
        "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
        Some(json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "i"}, "spec": {"rules": [{"http": {"paths": [{"path": "/", "backend": {"service": {"name": "s", "port": {"number": 80}}}}]}}]}})),
    );
    assert_eq!(r.head.status, 422);
    assert_eq!(message(&r), "Ingress.networking.k8s.io \"i\" is invalid: spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified");

    let pdb = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
    created(&mut w, pdb, json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "p"}, "spec": {"maxUnavailable": "50%"}}));
    let r = call(
        &mut w,
        "PUT",
        &format!("{pdb}/p"),
        Some(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "p"}, "spec": {"maxUnavailable": "150%"}})),
    );
    assert_eq!(r.head.status, 422, "kube's PDBs take no update without a resourceVersion");
    assert_eq!(message(&r), "poddisruptionbudgets.policy \"p\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update");

    let rb = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";
    created(
        &mut w,
        rb,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "b"},
        "roleRef": {"kind": "ClusterRole", "name": "view"}, "subjects": [{"kind": "User", "name": "alice"}]}),
    );
    let r = call(&mut w, "PATCH", &format!("{rb}/b"), Some(json!({"roleRef": {"name": "edit"}})));
    assert_eq!(r.head.status, 422);
    assert!(message(&r).contains("roleRef: Invalid value: ") && message(&r).ends_with(": cannot change roleRef"), "{}", message(&r));
    // RBAC objects are made by a PUT to a name that does not exist yet (kube's AllowCreateOnUpdate).
    let r = call(
        &mut w,
        "PUT",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/reader",
        Some(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "reader"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})),
    );
    assert_eq!(r.head.status, 201);

    // Namespaces are deleted one by one, as kube serves them.
    let r = call(&mut w, "DELETE", "/api/v1/namespaces", None);
    assert_eq!(r.head.status, 405);

    // A ReplicationController scales through its Scale, selector and all.
    let rcs = "/api/v1/namespaces/default/replicationcontrollers";
    let rc = created(
        &mut w,
        rcs,
        json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc"},
        "spec": {"template": {"metadata": {"labels": {"app": "rc"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
    );
    assert_eq!(rc["spec"]["selector"], json!({"app": "rc"}), "the selector defaults to the template's labels");
    assert_eq!(rc["spec"]["replicas"], 1);
    let r = call(&mut w, "PATCH", &format!("{rcs}/rc/scale"), Some(json!({"spec": {"replicas": 3}})));
    assert_eq!(r.json()["status"]["selector"], "app=rc");
    assert_eq!(w.call("GET", &format!("{rcs}/rc"), "", None, "").json()["spec"]["replicas"], 3);
}

#[test]
fn running_pods_take_debug_containers_and_resizes_only_through_their_subresources() {
    let mut w = world();
    created(&mut w, "/api/v1/namespaces/default/serviceaccounts", json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}));
    let pods = "/api/v1/namespaces/default/pods";
    created(
        &mut w,
        pods,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx",
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}}]}}),
    );
    let debug = json!({"spec": {"ephemeralContainers": [{"name": "debug", "image": "busybox", "targetContainerName": "c"}]}});
    let r = w.request(Request {
        method: "PATCH".into(),
        path: format!("{pods}/p/ephemeralcontainers"),
        headers: vec![("Authorization".into(), format!("Bearer {ADMIN_TOKEN}")), ("Content-Type".into(), "application/strategic-merge-patch+json".into())],
        body: Bytes::from(debug.to_string()),
        ..Default::default()
    });
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["spec"]["ephemeralContainers"][0]["name"], "debug");
    let r =
        call(&mut w, "PATCH", &format!("{pods}/p/ephemeralcontainers"), Some(json!({"spec": {"ephemeralContainers": [{"name": "debug", "image": "alpine"}]}})));
    assert_eq!(r.head.status, 422);
    assert!(message(&r).contains("spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debug\" may not be changed"), "{}", message(&r));

    let resize = |cpu: &str| json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}, "limits": {"cpu": cpu, "memory": "64Mi"}}}]}});
    let r = w.request(Request {
        method: "PATCH".into(),
        path: format!("{pods}/p/resize"),
        headers: vec![("Authorization".into(), format!("Bearer {ADMIN_TOKEN}")), ("Content-Type".into(), "application/strategic-merge-patch+json".into())],
        body: Bytes::from(resize("200m").to_string()),
        ..Default::default()
    });
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["spec"]["containers"][0]["resources"]["limits"]["cpu"], "200m");
    assert_eq!(r.json()["spec"]["containers"][0]["image"], "nginx");
}

fn pod(name: &str, labels: Value, ready: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
}

fn evict(w: &mut World, name: &str) -> Response {
    call(
        w,
        "POST",
        &format!("/api/v1/namespaces/default/pods/{name}/eviction"),
        Some(json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}})),
    )
}

/// A running pod, as a kubelet would report it: created, then its status set.
fn running_pod(w: &mut World, name: &str, labels: Value, ready: bool) {
    let body = pod(name, labels, ready);
    created(w, "/api/v1/namespaces/default/pods", body.clone());
    let r = call(w, "PATCH", &format!("/api/v1/namespaces/default/pods/{name}/status"), Some(json!({"status": body["status"]})));
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

fn budget_status(w: &mut World, allowed: i64, current: i64, desired: i64) {
    let pdb = "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web";
    let status = json!({"status": {"observedGeneration": 1, "disruptionsAllowed": allowed, "currentHealthy": current, "desiredHealthy": desired, "expectedPods": current}});
    let r = call(w, "PATCH", &format!("{pdb}/status"), Some(status));
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

#[test]
fn evictions_spend_the_disruption_budget_and_stop_when_it_is_spent() {
    let mut w = world();
    created(&mut w, "/api/v1/namespaces/default/serviceaccounts", json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}));
    for name in ["a", "b", "c"] {
        running_pod(&mut w, name, json!({"app": "web"}), true);
    }
    running_pod(&mut w, "loner", json!({"app": "other"}), true);
    // No budget selects it: the pod goes, its DisruptionTarget condition set first.
    let r = evict(&mut w, "loner");
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json(), json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}));
    assert_eq!(w.call("GET", "/api/v1/namespaces/default/pods/loner", "", None, "").head.status, 404);

    let pdbs = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
    created(
        &mut w,
        pdbs,
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}}),
    );
    // A budget its controller has not looked at yet: try again in 10 s.
    let r = evict(&mut w, "a");
    assert_eq!(r.head.status, 429);
    assert!(r.head.headers.iter().any(|(k, v)| k == "Retry-After" && v == "10"), "{:?}", r.head.headers);
    let body = r.json();
    assert_eq!(body["message"], "Cannot evict pod as it would violate the pod's disruption budget.");
    assert_eq!(
        body["details"]["causes"][0],
        json!({"reason": "DisruptionBudget", "message": "The disruption budget web is still being processed by the server."})
    );

    budget_status(&mut w, 1, 3, 2);
    let r = evict(&mut w, "a");
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let budget = w.call("GET", &format!("{pdbs}/web"), "", None, "").json();
    assert_eq!(budget["status"]["disruptionsAllowed"], 0);
    assert!(budget["status"]["disruptedPods"].get("a").is_some(), "{budget}");
    assert_eq!(budget["status"]["conditions"][0]["reason"], "InsufficientPods");
    // The allowance is spent: the next eviction waits for the budget's controller.
    let r = evict(&mut w, "b");
    assert_eq!(r.head.status, 429);
    assert_eq!(r.json()["details"]["causes"][0]["message"], "The disruption budget web needs 2 healthy pods and has 3 currently");
    assert!(!r.head.headers.iter().any(|(k, _)| k == "Retry-After"));
    assert_eq!(w.call("GET", "/api/v1/namespaces/default/pods/b", "", None, "").head.status, 200);

    // An unready pod goes while the budget has the healthy pods it needs.
    running_pod(&mut w, "sick", json!({"app": "web"}), false);
    budget_status(&mut w, 0, 2, 2);
    assert_eq!(evict(&mut w, "sick").head.status, 201);

    let r = call(
        &mut w,
        "POST",
        "/api/v1/namespaces/default/pods/b/eviction",
        Some(json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "c"}})),
    );
    assert_eq!(r.head.status, 400);
    assert_eq!(message(&r), "name in URL does not match name in Eviction object");
    assert_eq!(evict(&mut w, "nope").head.status, 404);
}

#[test]
fn a_binding_names_the_pod_it_binds() {
    let mut w = world();
    created(&mut w, "/api/v1/namespaces/default/serviceaccounts", json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}));
    created(
        &mut w,
        "/api/v1/namespaces/default/pods",
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
    );
    let r = call(
        &mut w,
        "POST",
        "/api/v1/namespaces/default/bindings",
        Some(json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}})),
    );
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(w.call("GET", "/api/v1/namespaces/default/pods/p", "", None, "").json()["spec"]["nodeName"], "n1");
    let r = call(
        &mut w,
        "POST",
        "/api/v1/namespaces/default/bindings",
        Some(json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "ghost"}, "target": {"kind": "Node", "name": "n1"}})),
    );
    assert_eq!(r.head.status, 404);
    assert_eq!(w.call("GET", "/api/v1/namespaces/default/bindings", "", None, "").head.status, 405);
}

/// Found by the simulator (seed 0 of its first sweep with HPAs): a manager that applied an
/// HPA at v2 (where `scaleTargetRef` is granular) and applies it again at v1 (where it is
/// atomic) keeps the reference; structured-merge-diff removes nothing inside an atomic value.
#[test]
fn one_manager_applying_at_both_versions_keeps_the_atomic_reference() {
    let mut w = world();
    let target = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"});
    let v2 = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
        "spec": {"scaleTargetRef": target, "minReplicas": 1, "maxReplicas": 16,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 36}}}]}});
    let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
        "spec": {"scaleTargetRef": target, "minReplicas": 1, "maxReplicas": 7, "targetCPUUtilizationPercentage": 18}});
    let apply = |w: &mut World, version: &str, body: &Value| {
        w.call(
            "PATCH",
            &format!("/apis/autoscaling/{version}/namespaces/default/horizontalpodautoscalers/h"),
            "fieldManager=m",
            Some(body),
            "application/apply-patch+yaml",
        )
    };
    assert_eq!(apply(&mut w, "v2", &v2).head.status, 201);
    let r = apply(&mut w, "v1", &v1);
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["spec"]["scaleTargetRef"], target);
}

/// componentstatuses probe the scheduler and the controller-manager (nothing listens in the
/// simulation, so both are unhealthy with Go's words for it) and report storage's health.
#[test]
fn component_statuses_are_probed_at_each_read() {
    let mut w = world();
    let r = call(&mut w, "GET", "/api/v1/componentstatuses", None);
    assert_eq!(r.head.status, 200);
    assert!(r.head.headers.iter().any(|(k, v)| k == "Warning" && v.contains("v1 ComponentStatus is deprecated in v1.19+")));
    let list = r.json();
    assert_eq!(list["kind"], "ComponentStatusList");
    let names: Vec<&str> = list["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["controller-manager", "etcd-0", "scheduler"]);
    let scheduler = call(&mut w, "GET", "/api/v1/componentstatuses/scheduler", None).json();
    assert_eq!(
        scheduler["conditions"],
        json!([{"type": "Healthy", "status": "False", "message": "Get \"https://127.0.0.1:10259/healthz\": dial tcp 127.0.0.1:10259: connect: connection refused"}])
    );
    assert_eq!(call(&mut w, "GET", "/api/v1/componentstatuses/etcd-0", None).json()["conditions"][0]["status"], "True");
    assert_eq!(call(&mut w, "GET", "/api/v1/componentstatuses/nope", None).head.status, 404);
    assert_eq!(call(&mut w, "POST", "/api/v1/componentstatuses", Some(json!({"metadata": {"name": "x"}}))).head.status, 405);
    let filtered = w.call("GET", "/api/v1/componentstatuses", "fieldSelector=metadata.name%3Detcd-0", None, "").json();
    assert_eq!(filtered["items"].as_array().unwrap().len(), 1);
}

/// Found by the control-plane test: a RawExtension (a ControllerRevision's data) comes back
/// byte for byte, nulls included, or the DaemonSet controller sees every revision it made as a
/// hash collision.
#[test]
fn raw_extensions_keep_their_nulls() {
    let mut w = world();
    let data = json!({"spec": {"template": {"$patch": "replace", "metadata": {"creationTimestamp": null, "labels": {"app": "a"}}}}});
    let rev = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "agent-1"}, "revision": 1, "data": data});
    let created = created(&mut w, "/apis/apps/v1/namespaces/default/controllerrevisions", rev);
    assert_eq!(created["data"], data);
    let got = call(&mut w, "GET", "/apis/apps/v1/namespaces/default/controllerrevisions/agent-1", None).json();
    assert_eq!(got["data"], data);
    let listed = w.call("GET", "/apis/apps/v1/namespaces/default/controllerrevisions", "resourceVersion=0", None, "").json();
    assert_eq!(listed["items"][0]["data"], data);
}

/// `pods/status` takes the client's status and metadata (labels, annotations), as kube's pod
/// status strategy does, but never its spec or owner references.
#[test]
fn a_pod_status_update_keeps_new_labels_but_not_spec_or_owners() {
    let mut w = world();
    created(&mut w, "/api/v1/namespaces/default/serviceaccounts", json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}));
    running_pod(&mut w, "p", json!({"app": "a"}), true);
    let patch = json!({"metadata": {"labels": {"app": "b"}, "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u"}]},
        "spec": {"activeDeadlineSeconds": 5}, "status": {"message": "hello"}});
    let r = call(&mut w, "PATCH", "/api/v1/namespaces/default/pods/p/status", Some(patch));
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let pod = r.json();
    assert_eq!((pod["metadata"]["labels"]["app"].clone(), pod["status"]["message"].clone()), (json!("b"), json!("hello")));
    assert!(pod["metadata"]["ownerReferences"].is_null() && pod["spec"]["activeDeadlineSeconds"].is_null(), "{pod}");
    assert_eq!(pod["status"]["qosClass"], "BestEffort");
}

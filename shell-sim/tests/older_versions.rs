//! The versions kube v1.25 removed that v1.20 components still use (policy/v1beta1,
//! batch/v1beta1, discovery.k8s.io/v1beta1): off by default, served behind `--runtime-config`
//! as kube v1.24 served them, each stored as its v1 object and converted in every answer.

use kapi_core::resources::{RuntimeConfig, Settings, registered_group_versions};
use kapi_sim::{Response, World, default_server, epoch, server_with};
use serde_json::{Value, json};

const ON: &str = "policy/v1beta1=true,batch/v1beta1=true,discovery.k8s.io/v1beta1=true";

fn world(runtime_config: &str) -> World {
    let runtime_config = RuntimeConfig::parse(runtime_config, &registered_group_versions()).expect("a valid --runtime-config");
    World::new(server_with(&Settings { runtime_config, ..Settings::default() }), epoch(), 7)
}

fn call(w: &mut World, method: &str, path: &str, body: Option<Value>) -> Response {
    w.call(method, path, "", body.as_ref(), if body.is_some() { "application/json" } else { "" })
}

fn warnings(r: &Response) -> Vec<&str> {
    r.head.headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case("warning")).map(|(_, v)| v.as_str()).collect()
}

#[test]
fn older_versions_are_off_by_default() {
    let mut w = World::new(default_server(), epoch(), 7);
    assert_eq!(call(&mut w, "GET", "/apis/policy/v1beta1/poddisruptionbudgets", None).head.status, 404);
    let group = call(&mut w, "GET", "/apis/batch", None).json();
    assert_eq!(group["versions"].as_array().unwrap().len(), 1, "{group}");
}

#[test]
fn runtime_config_serves_them_after_v1_which_stays_preferred() {
    let mut w = world(ON);
    for (group, older) in [("policy", "policy/v1beta1"), ("batch", "batch/v1beta1"), ("discovery.k8s.io", "discovery.k8s.io/v1beta1")] {
        let doc = call(&mut w, "GET", &format!("/apis/{group}"), None).json();
        let versions: Vec<&str> = doc["versions"].as_array().unwrap().iter().map(|v| v["groupVersion"].as_str().unwrap()).collect();
        assert_eq!(versions, vec![format!("{group}/v1").as_str(), older], "{doc}");
        assert_eq!(doc["preferredVersion"]["version"], "v1");
        let service = call(&mut w, "GET", &format!("/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.{group}"), None);
        assert_eq!(service.head.status, 200, "the local APIService of {older}");
    }
    // api/all=false with v1 re-enabled leaves the v1beta1 versions off again.
    let mut w = world("api/all=false,v1=true,policy/v1beta1=true");
    assert_eq!(call(&mut w, "GET", "/apis/policy/v1beta1/poddisruptionbudgets", None).head.status, 200);
    assert_eq!(call(&mut w, "GET", "/apis/policy/v1/poddisruptionbudgets", None).head.status, 404);
    assert_eq!(call(&mut w, "GET", "/api/v1/namespaces", None).head.status, 200);
}

#[test]
fn a_v1beta1_budget_with_an_empty_selector_selects_no_pod_at_v1() {
    let mut w = world(ON);
    let beta = "/apis/policy/v1beta1/namespaces/default/poddisruptionbudgets";
    let r = call(
        &mut w,
        "POST",
        beta,
        Some(json!({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "metadata": {"name": "none"}, "spec": {"minAvailable": 1, "selector": {}}})),
    );
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["apiVersion"], "policy/v1beta1");
    assert_eq!(r.json()["spec"]["selector"], json!({}));
    assert_eq!(
        warnings(&r),
        vec!["299 - \"policy/v1beta1 PodDisruptionBudget is deprecated in v1.21+, unavailable in v1.25+; use policy/v1 PodDisruptionBudget\""]
    );
    let v1 = call(&mut w, "GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/none", None).json();
    assert_eq!(v1["apiVersion"], "policy/v1");
    assert_eq!(
        v1["spec"]["selector"],
        json!({"matchExpressions": [{"key": "pdb.kubernetes.io/deprecated-v1beta1-empty-selector-match", "operator": "Exists"}]})
    );

    // A v1 budget selecting every pod reads at v1beta1 as the selector that says so.
    call(
        &mut w,
        "POST",
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        Some(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "all"}, "spec": {"maxUnavailable": 1, "selector": {}}})),
    );
    let list = call(&mut w, "GET", beta, None).json();
    assert_eq!((list["kind"].as_str(), list["apiVersion"].as_str()), (Some("PodDisruptionBudgetList"), Some("policy/v1beta1")));
    let all = list["items"].as_array().unwrap().iter().find(|i| i["metadata"]["name"] == "all").expect("listed at v1beta1").clone();
    assert_eq!(
        all["spec"]["selector"],
        json!({"matchExpressions": [{"key": "pdb.kubernetes.io/deprecated-v1beta1-empty-selector-match", "operator": "DoesNotExist"}]})
    );

    // Watches at v1beta1 convert each event; validation speaks of the v1 rules.
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let watch = w.call("GET", beta, &format!("watch=1&resourceVersion={rv}"), None, "").watch.expect("a watch");
    let patch = json!({"spec": {"minAvailable": 2}});
    let r = w.call("PATCH", &format!("{beta}/none"), "", Some(&patch), "application/merge-patch+json");
    assert_eq!(r.head.status, 200);
    let (frames, _) = w.frames(watch);
    let event: Value = serde_json::from_slice(frames.last().expect("an event")).unwrap();
    assert_eq!(event["object"]["apiVersion"], "policy/v1beta1");
    assert_eq!(event["object"]["spec"], json!({"minAvailable": 2, "selector": {}}));
    let bad = json!({"spec": {"maxUnavailable": "150%"}});
    let r = w.call("PATCH", &format!("{beta}/none"), "", Some(&bad), "application/merge-patch+json");
    assert_eq!(r.head.status, 422);
}

#[test]
fn v1beta1_cron_jobs_and_endpoint_slices_are_their_v1_objects() {
    let mut w = world(ON);
    let template = json!({"spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}});
    let r = call(
        &mut w,
        "POST",
        "/apis/batch/v1beta1/namespaces/default/cronjobs",
        Some(
            json!({"apiVersion": "batch/v1beta1", "kind": "CronJob", "metadata": {"name": "tick"}, "spec": {"schedule": "*/1 * * * *", "jobTemplate": template}}),
        ),
    );
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let v1 = call(&mut w, "GET", "/apis/batch/v1/namespaces/default/cronjobs/tick", None).json();
    assert_eq!(v1["apiVersion"], "batch/v1");
    assert_eq!((v1["spec"]["concurrencyPolicy"].as_str(), v1["spec"]["successfulJobsHistoryLimit"].as_i64()), (Some("Allow"), Some(3)));

    let r = call(
        &mut w,
        "POST",
        "/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices",
        Some(json!({"apiVersion": "discovery.k8s.io/v1beta1", "kind": "EndpointSlice", "metadata": {"name": "web-1"}, "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.5"], "topology": {"kubernetes.io/hostname": "n1", "topology.kubernetes.io/zone": "z"}}],
            "ports": [{"port": 80}]})),
    );
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["endpoints"][0]["topology"], json!({"kubernetes.io/hostname": "n1", "topology.kubernetes.io/zone": "z"}));
    let v1 = call(&mut w, "GET", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/web-1", None).json();
    assert_eq!(v1["endpoints"][0], json!({"addresses": ["10.0.0.5"], "nodeName": "n1", "zone": "z"}));
    assert_eq!(v1["ports"][0], json!({"name": "", "port": 80, "protocol": "TCP"}));
}

//! The API's behaviour through the core's request pipeline, in the simulator's world: what
//! clients see for each verb, with kube-apiserver's codes, reasons and messages.

use std::sync::Arc;

use bytes::Bytes;
use jiff::SignedDuration;
use kapi_core::pipeline::Request;
use kapi_sim::{ADMIN_TOKEN, Response, World, default_server, epoch};
use serde_json::{Value, json};

fn world() -> World {
    World::new(default_server(), epoch(), 7)
}

fn call(w: &mut World, method: &str, path: &str, query: &str, body: Option<Value>, content_type: &str) -> Response {
    w.call(method, path, query, body.as_ref(), content_type)
}

fn get(w: &mut World, path: &str) -> Response {
    call(w, "GET", path, "", None, "")
}

fn post(w: &mut World, path: &str, body: Value) -> Response {
    call(w, "POST", path, "", Some(body), "application/json")
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

#[test]
fn create_get_conflict_and_not_found() {
    let mut w = world();
    let r = post(&mut w, CMS, cm("a", json!({"k": "v"})));
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let created = r.json();
    assert!(!created["metadata"]["uid"].as_str().unwrap().is_empty());
    assert_eq!(created["metadata"]["namespace"], "default");
    assert!(created["metadata"]["resourceVersion"].as_str().unwrap().parse::<i64>().unwrap() > 0);
    assert_eq!(created["metadata"]["managedFields"][0]["manager"], "kapi-test");

    let r = post(&mut w, CMS, cm("a", json!({})));
    assert_eq!(r.head.status, 409);
    assert_eq!(r.json()["reason"], "AlreadyExists");
    assert_eq!(r.json()["message"], "configmaps \"a\" already exists");

    let r = get(&mut w, &format!("{CMS}/a"));
    assert_eq!(r.json()["data"]["k"], "v");
    let r = get(&mut w, &format!("{CMS}/nope"));
    assert_eq!(r.head.status, 404);
    assert_eq!(r.json()["message"], "configmaps \"nope\" not found");
    assert_eq!(r.json()["details"], json!({"name": "nope", "kind": "configmaps"}));
}

#[test]
fn generate_name_and_validation() {
    let mut w = world();
    let r = post(&mut w, CMS, json!({"metadata": {"generateName": "gen-"}}));
    assert_eq!(r.head.status, 201);
    let name = r.json()["metadata"]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
    let r = post(&mut w, CMS, cm("Bad_Name", json!({})));
    assert_eq!(r.head.status, 422);
    assert_eq!(r.json()["reason"], "Invalid");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain")
    );
    let r = post(&mut w, "/api/v1/namespaces/missing/configmaps", cm("x", json!({})));
    assert_eq!(r.head.status, 404);
    assert_eq!(r.json()["message"], "namespaces \"missing\" not found");
}

#[test]
fn updates_check_resource_versions() {
    let mut w = world();
    let created = post(&mut w, CMS, cm("a", json!({"k": "1"}))).json();
    let mut stale = created.clone();
    stale["data"]["k"] = json!("2");
    let r = call(&mut w, "PUT", &format!("{CMS}/a"), "", Some(stale.clone()), "application/json");
    assert_eq!(r.head.status, 200);
    assert_eq!(r.json()["data"]["k"], "2");
    stale["data"]["k"] = json!("3");
    let r = call(&mut w, "PUT", &format!("{CMS}/a"), "", Some(stale), "application/json");
    assert_eq!(r.head.status, 409);
    assert_eq!(
        r.json()["message"],
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );
}

#[test]
fn the_four_patch_types() {
    let mut w = world();
    post(&mut w, CMS, cm("a", json!({"k": "1"})));
    let p = |w: &mut World, ct: &str, q: &str, body: Value| call(w, "PATCH", &format!("{CMS}/a"), q, Some(body), ct);
    let r = p(&mut w, "application/merge-patch+json", "", json!({"data": {"m": "2"}}));
    assert_eq!(r.json()["data"], json!({"k": "1", "m": "2"}));
    let r = p(&mut w, "application/json-patch+json", "", json!([{"op": "remove", "path": "/data/k"}]));
    assert_eq!(r.json()["data"], json!({"m": "2"}));
    let r = p(&mut w, "application/strategic-merge-patch+json", "", json!({"metadata": {"labels": {"x": "y"}}}));
    assert_eq!(r.json()["metadata"]["labels"], json!({"x": "y"}));
    // The merge patch above made "kapi-test" the owner of data.m: applying another value conflicts.
    let r = p(&mut w, "application/apply-patch+yaml", "fieldManager=me", cm("a", json!({"m": "3"})));
    assert_eq!(r.head.status, 409);
    let r = p(&mut w, "application/apply-patch+yaml", "fieldManager=me&force=true", cm("a", json!({"m": "3"})));
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["data"]["m"], "3");
    let r = p(&mut w, "application/json-patch+json", "", json!([{"op": "test", "path": "/data/m", "value": "nope"}]));
    assert_eq!(r.head.status, 422);
    let r = p(&mut w, "text/plain", "", json!({}));
    assert_eq!(r.head.status, 415);
}

#[test]
fn server_side_apply_conflicts_and_force() {
    let mut w = world();
    let path = format!("{CMS}/a");
    let apply = |w: &mut World, manager: &str, force: bool, data: Value| {
        let q = format!("fieldManager={manager}{}", if force { "&force=true" } else { "" });
        call(w, "PATCH", &path, &q, Some(cm("a", data)), "application/apply-patch+yaml")
    };
    assert_eq!(apply(&mut w, "alice", false, json!({"k": "1"})).head.status, 201);
    let r = apply(&mut w, "bob", false, json!({"k": "2"}));
    assert_eq!(r.head.status, 409);
    assert_eq!(r.json()["message"], "Apply failed with 1 conflict: conflict with \"alice\": .data.k");
    let r = apply(&mut w, "bob", true, json!({"k": "2"}));
    assert_eq!(r.head.status, 200);
    let managers: Vec<Value> = r.json()["metadata"]["managedFields"].as_array().unwrap().iter().map(|e| e["manager"].clone()).collect();
    assert_eq!(managers, vec![json!("bob")]);
}

#[test]
fn delete_with_finalizers_and_dry_run() {
    let mut w = world();
    let mut o = cm("a", json!({}));
    o["metadata"]["finalizers"] = json!(["example.com/hold"]);
    post(&mut w, CMS, o);
    let r = call(&mut w, "DELETE", &format!("{CMS}/a"), "", None, "");
    assert_eq!(r.head.status, 200);
    assert!(r.json()["metadata"]["deletionTimestamp"].is_string(), "kept with a deletion timestamp");
    assert_eq!(get(&mut w, &format!("{CMS}/a")).head.status, 200);
    let r = call(&mut w, "PATCH", &format!("{CMS}/a"), "", Some(json!({"metadata": {"finalizers": null}})), "application/merge-patch+json");
    assert_eq!(r.head.status, 200);
    // The answer is the object storage deleted (kube's deleteWithoutFinalizers), not a Status:
    // the garbage collector reads it as PartialObjectMetadata.
    assert_eq!((r.json()["kind"].as_str(), r.json()["metadata"]["finalizers"].clone()), (Some("ConfigMap"), json!(["example.com/hold"])));
    assert_eq!(get(&mut w, &format!("{CMS}/a")).head.status, 404, "the last finalizer's removal deletes it");

    post(&mut w, CMS, cm("b", json!({})));
    let r = call(&mut w, "DELETE", &format!("{CMS}/b"), "dryRun=All", None, "");
    assert_eq!(r.head.status, 200);
    assert_eq!(r.json()["status"], "Success");
    assert_eq!(get(&mut w, &format!("{CMS}/b")).head.status, 200, "dry run kept it");
    let r = call(&mut w, "POST", CMS, "dryRun=All", Some(cm("c", json!({}))), "application/json");
    assert_eq!(r.head.status, 201);
    assert_eq!(get(&mut w, &format!("{CMS}/c")).head.status, 404);
}

/// With a store whose progress notifications may overtake events (etcd before 3.4.31), a
/// consistent LIST and its continuations read storage, as kube-apiserver's do.
#[test]
fn consistent_lists_read_storage_when_the_cache_cannot_prove_freshness() {
    let mut setup = kapi_sim::default_server();
    Arc::get_mut(&mut setup.server).expect("not shared yet").consistent_list_from_cache = false;
    let mut w = World::new(setup, epoch(), 7);
    for i in 0..3 {
        post(&mut w, CMS, cm(&format!("c{i}"), json!({})));
    }
    // A write the caches never hear of: only storage has it.
    let mut hidden = cm("hidden", json!({}));
    hidden["metadata"]["namespace"] = json!("default");
    let unseen = serde_json::to_vec(&hidden).unwrap();
    let put = kapi_core::kv::TxnOp::Put { key: Bytes::from_static(b"/registry/configmaps/default/hidden"), value: unseen.into(), lease: 0 };
    w.model.apply(w.now(), &kapi_core::kv::KvRequest::Txn(kapi_core::kv::TxnRequest { success: vec![put], ..Default::default() })).0.unwrap();
    let names = |l: &Value| l["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let l = call(&mut w, "GET", CMS, "", None, "").json();
    assert_eq!(names(&l), ["c0", "c1", "c2", "hidden"]);
    assert_eq!(l["metadata"]["resourceVersion"], w.model.revision().to_string());
    let first = call(&mut w, "GET", CMS, "limit=2", None, "").json();
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    let rest = call(&mut w, "GET", CMS, &format!("limit=10&continue={token}"), None, "").json();
    assert_eq!(names(&rest), ["c2", "hidden"]);
    assert_eq!(rest["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"]);
    let cached = call(&mut w, "GET", CMS, "resourceVersion=0", None, "").json();
    assert_eq!(names(&cached), ["c0", "c1", "c2"], "resourceVersion=0 still reads the cache");
}

/// Admission looks namespaces up in the watch cache, as kube's plugins read informers, and
/// reads storage only for one the cache does not have: a namespace created a moment ago is
/// usable at once, and a create does not wait for a storage read of its namespace.
#[test]
fn admission_reads_namespaces_from_the_cache_and_storage_for_one_it_lacks() {
    let mut w = world();
    let direct = |w: &mut World, op: kapi_core::kv::TxnOp| {
        let txn = kapi_core::kv::KvRequest::Txn(kapi_core::kv::TxnRequest { success: vec![op], ..Default::default() });
        w.model.apply(w.now(), &txn).0.unwrap();
    };
    // Storage has "fresh", the cache has not heard of it yet.
    let fresh = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fresh"}, "status": {"phase": "Active"}});
    let key = Bytes::from_static(b"/registry/namespaces/fresh");
    direct(&mut w, kapi_core::kv::TxnOp::Put { key: key.clone(), value: serde_json::to_vec(&fresh).unwrap().into(), lease: 0 });
    assert_eq!(post(&mut w, "/api/v1/namespaces/fresh/configmaps", cm("a", json!({}))).head.status, 201);
    // The cache has "cached"; storage loses it behind the cache's back: the cache answers.
    assert_eq!(post(&mut w, "/api/v1/namespaces", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "cached"}})).head.status, 201);
    direct(&mut w, kapi_core::kv::TxnOp::Delete { key: Bytes::from_static(b"/registry/namespaces/cached") });
    assert_eq!(post(&mut w, "/api/v1/namespaces/cached/configmaps", cm("b", json!({}))).head.status, 201);
    // Neither has "nowhere".
    let r = post(&mut w, "/api/v1/namespaces/nowhere/configmaps", cm("c", json!({})));
    assert_eq!(r.head.status, 404);
    assert_eq!(r.json()["message"], "namespaces \"nowhere\" not found");
}

#[test]
fn lists_paginate_and_select() {
    let mut w = world();
    for i in 0..5 {
        let mut o = cm(&format!("c{i}"), json!({}));
        o["metadata"]["labels"] = json!({"parity": if i % 2 == 0 { "even" } else { "odd" }});
        post(&mut w, CMS, o);
    }
    let r = call(&mut w, "GET", CMS, "limit=2", None, "");
    let l = r.json();
    assert_eq!(l["kind"], "ConfigMapList");
    assert_eq!(l["items"].as_array().unwrap().len(), 2);
    assert_eq!(l["metadata"]["remainingItemCount"], 3);
    let token = l["metadata"]["continue"].as_str().unwrap().to_string();
    let rv = l["metadata"]["resourceVersion"].clone();
    let r = call(&mut w, "GET", CMS, &format!("limit=10&continue={token}"), None, "");
    let l2 = r.json();
    assert_eq!(l2["items"].as_array().unwrap().len(), 3);
    assert_eq!(l2["metadata"]["resourceVersion"], rv, "pages come from one revision");
    let r = call(&mut w, "GET", CMS, "labelSelector=parity%3Deven", None, "");
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 3);
    let r = call(&mut w, "GET", CMS, "fieldSelector=metadata.name%3Dc1", None, "");
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 1);
    let r = call(&mut w, "GET", CMS, "fieldSelector=data.k%3Dv", None, "");
    assert_eq!(r.head.status, 400);
}

#[test]
fn watch_streams_events_after_a_list() {
    let mut w = world();
    post(&mut w, CMS, cm("a", json!({})));
    let rv = get(&mut w, CMS).json()["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let r = call(&mut w, "GET", CMS, &format!("watch=1&resourceVersion={rv}"), None, "");
    let id = r.watch.unwrap();
    post(&mut w, CMS, cm("b", json!({})));
    call(&mut w, "DELETE", &format!("{CMS}/a"), "", None, "");
    let (frames, _) = w.frames(id);
    let types: Vec<String> = frames.iter().map(|f| serde_json::from_slice::<Value>(f).unwrap()["type"].as_str().unwrap().to_string()).collect();
    assert_eq!(types, vec!["ADDED", "DELETED"]);
    w.advance(SignedDuration::from_secs(4000));
    assert!(w.frames(id).1, "the watch ends at its timeout");
}

#[test]
fn tables_and_metadata_views() {
    let mut w = world();
    post(&mut w, CMS, cm("a", json!({"x": "1", "y": "2"})));
    let mut req = Request {
        method: "GET".into(),
        path: CMS.into(),
        headers: vec![
            ("Authorization".into(), format!("Bearer {ADMIN_TOKEN}")),
            ("Accept".into(), "application/json;as=Table;v=v1;g=meta.k8s.io,application/json".into()),
        ],
        ..Default::default()
    };
    let t = w.request(req.clone()).json();
    assert_eq!(t["kind"], "Table");
    let names: Vec<&str> = t["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["Name", "Data", "Age"]);
    let row = &t["rows"].as_array().unwrap().iter().find(|r| r["cells"][0] == "a").unwrap();
    assert_eq!(row["cells"][1], 2);
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
    req.headers[1].1 = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io".into();
    let m = w.request(req).json();
    assert_eq!(m["kind"], "PartialObjectMetadataList");
    assert!(m["items"][0].get("data").is_none());
}

#[test]
fn protobuf_round_trip() {
    let mut w = world();
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pb"}, "data": {"k": "v"}});
    let bytes = kapi_core::codec::protobuf::encode(kapi_core::schema::schema(), &obj).unwrap();
    let r = w.request(Request {
        method: "POST".into(),
        path: CMS.into(),
        headers: vec![
            ("Authorization".into(), format!("Bearer {ADMIN_TOKEN}")),
            ("Content-Type".into(), "application/vnd.kubernetes.protobuf".into()),
            ("Accept".into(), "application/vnd.kubernetes.protobuf,application/json".into()),
        ],
        body: Bytes::from(bytes),
        ..Default::default()
    });
    assert_eq!(r.head.status, 201);
    assert_eq!(r.head.content_type(), Some("application/vnd.kubernetes.protobuf"));
    let back = kapi_core::codec::protobuf::decode(kapi_core::schema::schema(), &r.body).unwrap();
    assert_eq!(back["data"]["k"], "v");
    assert_eq!(get(&mut w, &format!("{CMS}/pb")).json()["data"]["k"], "v");

    // A collection deleted by a protobuf client comes back as a protobuf list.
    let r = w.request(Request {
        method: "DELETE".into(),
        path: CMS.into(),
        headers: vec![("Authorization".into(), format!("Bearer {ADMIN_TOKEN}")), ("Accept".into(), "application/vnd.kubernetes.protobuf".into())],
        ..Default::default()
    });
    assert_eq!(r.head.status, 200);
    assert_eq!(r.head.content_type(), Some("application/vnd.kubernetes.protobuf"));
    let list = kapi_core::codec::protobuf::decode(kapi_core::schema::schema(), &r.body).unwrap();
    assert_eq!(list["kind"], "ConfigMapList");
    assert_eq!(list["items"][0]["metadata"]["name"], "pb");
}

#[test]
fn deprecated_endpoints_answer_with_a_warning() {
    let mut w = world();
    let warning = |r: &Response| r.head.headers.iter().find(|(k, _)| k == "Warning").map(|(_, v)| v.clone());
    let expected = Some("299 - \"v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice\"".to_string());
    assert_eq!(warning(&get(&mut w, "/api/v1/namespaces/default/endpoints/kubernetes")), expected);
    assert_eq!(warning(&get(&mut w, "/api/v1/endpoints")), expected);
    assert_eq!(warning(&get(&mut w, "/api/v1/namespaces/default/endpoints/none")), expected, "errors from the handler carry it too");
    assert_eq!(warning(&get(&mut w, "/apis/discovery.k8s.io/v1/endpointslices")), None);
}

#[test]
fn deployments_scale_and_status() {
    let mut w = world();
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}});
    let base = "/apis/apps/v1/namespaces/default/deployments";
    let r = post(&mut w, base, d);
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let created = r.json();
    assert_eq!(created["spec"]["replicas"], 1);
    assert_eq!(created["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
    assert_eq!(created["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(created["metadata"]["generation"], 1);
    let scale = get(&mut w, &format!("{base}/web/scale")).json();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["status"]["selector"], "app=web");
    let r = call(&mut w, "PATCH", &format!("{base}/web/scale"), "", Some(json!({"spec": {"replicas": 3}})), "application/merge-patch+json");
    assert_eq!(r.json()["spec"]["replicas"], 3);
    let d = get(&mut w, &format!("{base}/web")).json();
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(d["metadata"]["generation"], 2);
    let mut s = d.clone();
    s["status"] = json!({"replicas": 3, "readyReplicas": 2});
    s["spec"]["replicas"] = json!(9);
    let r = call(&mut w, "PUT", &format!("{base}/web/status"), "", Some(s), "application/json");
    assert_eq!(r.head.status, 200);
    let d = r.json();
    assert_eq!(d["status"]["readyReplicas"], 2);
    assert_eq!(d["spec"]["replicas"], 3, "a status update does not change spec");
    let bad = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bad"},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": {"app": "y"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let r = post(&mut w, base, bad);
    assert_eq!(r.head.status, 422);
    assert!(r.json()["message"].as_str().unwrap().contains("`selector` does not match template `labels`"));
}

#[test]
fn statefulsets_and_daemonsets_get_update_strategy_defaults() {
    let mut w = world();
    let spec = json!({"selector": {"matchLabels": {"app": "a"}}, "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}});
    let ss = post(&mut w, "/apis/apps/v1/namespaces/default/statefulsets", json!({"metadata": {"name": "s"}, "spec": spec})).json();
    assert_eq!(ss["spec"]["updateStrategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}));
    let ds = post(&mut w, "/apis/apps/v1/namespaces/default/daemonsets", json!({"metadata": {"name": "d"}, "spec": spec})).json();
    assert_eq!(ds["spec"]["updateStrategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}));
    let mut on_delete = spec.clone();
    on_delete["updateStrategy"] = json!({"type": "OnDelete"});
    let ds = post(&mut w, "/apis/apps/v1/namespaces/default/daemonsets", json!({"metadata": {"name": "o"}, "spec": on_delete})).json();
    assert_eq!(ds["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
}

#[test]
fn pods_get_defaults_admission_and_binding() {
    let mut w = world();
    post(&mut w, "/api/v1/namespaces/default/serviceaccounts", json!({"metadata": {"name": "default"}}));
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let r = post(&mut w, "/api/v1/namespaces/default/pods", pod);
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let p = r.json();
    assert_eq!(p["spec"]["serviceAccountName"], "default");
    assert_eq!(p["spec"]["restartPolicy"], "Always");
    assert_eq!(p["spec"]["containers"][0]["imagePullPolicy"], "Always");
    assert_eq!(p["status"]["phase"], "Pending");
    assert_eq!(p["status"]["qosClass"], "BestEffort");
    assert_eq!(p["spec"]["tolerations"].as_array().unwrap().len(), 2);
    assert!(p["spec"]["volumes"][0]["name"].as_str().unwrap().starts_with("kube-api-access-"));
    let r = post(
        &mut w,
        "/api/v1/namespaces/default/pods/p/binding",
        json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}}),
    );
    assert_eq!(r.head.status, 201);
    assert_eq!(get(&mut w, "/api/v1/namespaces/default/pods/p").json()["spec"]["nodeName"], "n1");
    let r = call(&mut w, "DELETE", "/api/v1/namespaces/default/pods/p", "", None, "");
    assert_eq!(r.head.status, 200);
    assert!(r.json()["metadata"]["deletionTimestamp"].is_string(), "a scheduled pod terminates gracefully");
}

#[test]
fn services_get_cluster_ips() {
    let mut w = world();
    let k = get(&mut w, "/api/v1/namespaces/default/services/kubernetes").json();
    assert_eq!(k["spec"]["clusterIP"], "10.0.0.1");
    let svc = |name: &str, ip: Option<&str>| {
        let mut s = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": {"ports": [{"port": 80}]}});
        if let Some(ip) = ip {
            s["spec"]["clusterIP"] = json!(ip);
        }
        s
    };
    let a = post(&mut w, "/api/v1/namespaces/default/services", svc("a", None)).json();
    let ip = a["spec"]["clusterIP"].as_str().unwrap().to_string();
    assert!(ip.starts_with("10.0.0.") && ip != "10.0.0.1", "{ip}");
    assert_eq!(a["spec"]["ports"][0]["targetPort"], 80);
    let r = post(&mut w, "/api/v1/namespaces/default/services", svc("b", Some(&ip)));
    assert_eq!(r.head.status, 422, "{}", String::from_utf8_lossy(&r.body));
    call(&mut w, "DELETE", "/api/v1/namespaces/default/services/a", "", None, "");
    let r = post(&mut w, "/api/v1/namespaces/default/services", svc("b", Some(&ip)));
    assert_eq!(r.head.status, 201, "a deleted service gives its IP back");
}

#[test]
fn namespaces_terminate_and_immortal_ones_stay() {
    let mut w = world();
    post(&mut w, "/api/v1/namespaces", json!({"metadata": {"name": "tmp"}}));
    let r = call(&mut w, "DELETE", "/api/v1/namespaces/tmp", "", None, "");
    assert_eq!(r.head.status, 200);
    assert_eq!(r.json()["status"]["phase"], "Terminating");
    let r = post(&mut w, "/api/v1/namespaces/tmp/configmaps", cm("x", json!({})));
    assert_eq!(r.head.status, 403);
    let r = call(&mut w, "DELETE", "/api/v1/namespaces/default", "", None, "");
    assert_eq!(r.head.status, 403);
    assert_eq!(r.json()["message"], "namespaces \"default\" is forbidden: this namespace may not be deleted");
}

#[test]
fn access_reviews_answer_from_the_authorizer() {
    let mut w = world();
    let r = post(
        &mut w,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}),
    );
    assert_eq!(r.head.status, 201);
    assert_eq!(r.json()["status"]["allowed"], true);
    let r = post(&mut w, "/apis/authentication.k8s.io/v1/selfsubjectreviews", json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}));
    assert_eq!(r.json()["status"]["userInfo"]["username"], "admin");
}

/// A request with a raw body (so that it can repeat keys), as the admin.
fn raw(w: &mut World, method: &str, path: &str, query: &str, content_type: &str, body: &str) -> Response {
    w.request(Request {
        method: method.into(),
        path: path.into(),
        query: query.into(),
        headers: vec![("Authorization".into(), format!("Bearer {ADMIN_TOKEN}")), ("Content-Type".into(), content_type.into())],
        body: Bytes::from(body.to_string()),
        ..Default::default()
    })
}

fn warnings(r: &Response) -> Vec<String> {
    r.head.headers.iter().filter(|(k, _)| k == "Warning").map(|(_, v)| serde_json::from_str::<String>(v.trim_start_matches("299 - ")).unwrap()).collect()
}

/// kube's field validation integration test's typed cases (test/integration/apiserver/field_validation_test.go).
#[test]
fn field_validation_reports_repeated_and_unknown_fields_as_kube_does() {
    const BODY: &str = r#"{"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "dupename", "name": "NAME", "labels": {"app": "nginx"}, "unknownMeta": "metaVal"},
        "spec": {"unknown1": "val1", "unknownDupe": "valDupe", "unknownDupe": "valDupe2", "paused": true, "paused": false,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx:latest",
                "unknownNested": "val1", "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]}}}}"#;
    let expected = [
        r#"duplicate field "metadata.name""#,
        r#"unknown field "metadata.unknownMeta""#,
        r#"unknown field "spec.unknown1""#,
        r#"unknown field "spec.unknownDupe""#,
        r#"duplicate field "spec.paused""#,
        r#"unknown field "spec.template.spec.containers[0].unknownNested""#,
        r#"duplicate field "spec.template.spec.containers[0].imagePullPolicy""#,
    ];
    let base = "/apis/apps/v1/namespaces/default/deployments";
    let mut w = world();
    let r = raw(&mut w, "POST", base, "fieldValidation=Strict", "application/json", &BODY.replace("NAME", "strict"));
    assert_eq!(r.head.status, 400);
    assert_eq!(r.json()["message"], format!(r#"Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: {}"#, expected.join(", ")));
    for query in ["fieldValidation=Warn", ""] {
        let name = format!("warn{}", query.len());
        let r = raw(&mut w, "POST", base, query, "application/json", &BODY.replace("NAME", &name));
        assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(warnings(&r), expected);
        assert_eq!(r.json()["spec"]["paused"], false, "the last of repeated keys counts");
        let r = raw(&mut w, "PUT", &format!("{base}/{name}"), query, "application/json", &BODY.replace("NAME", &name));
        assert_eq!((r.head.status, warnings(&r)), (200, expected.map(String::from).to_vec()));
    }
    let r = raw(&mut w, "POST", base, "fieldValidation=Ignore", "application/json", &BODY.replace("NAME", "ignore"));
    assert_eq!((r.head.status, warnings(&r)), (201, vec![]));

    // Patches: the patch's repeated keys first, then the patched object's unknown fields.
    let merge = r#"{"spec": {"unknown1": "val1", "unknownDupe": "valDupe", "unknownDupe": "valDupe2", "paused": true, "paused": false,
        "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:latest", "unknownNested": "val1", "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]}}}}"#;
    let patch_expected = [
        r#"duplicate field "spec.unknownDupe""#,
        r#"duplicate field "spec.paused""#,
        r#"duplicate field "spec.template.spec.containers[0].imagePullPolicy""#,
        r#"unknown field "spec.template.spec.containers[0].unknownNested""#,
        r#"unknown field "spec.unknown1""#,
        r#"unknown field "spec.unknownDupe""#,
    ];
    for ct in ["application/merge-patch+json", "application/strategic-merge-patch+json"] {
        let r = raw(&mut w, "PATCH", &format!("{base}/ignore"), "fieldValidation=Strict", ct, merge);
        assert_eq!(r.head.status, 422, "{ct}");
        let status = r.json();
        let message = status["message"].as_str().unwrap();
        assert!(message.starts_with(r#" "" is invalid: patch: Invalid value: ""#), "{message}");
        assert!(message.ends_with(&format!("strict decoding error: {}", patch_expected.join(", "))), "{message}");
        assert_eq!(status["details"]["causes"][0]["field"], "patch");
        let r = raw(&mut w, "PATCH", &format!("{base}/ignore"), "", ct, merge);
        assert_eq!((r.head.status, warnings(&r)), (200, patch_expected.map(String::from).to_vec()), "{ct}");
    }
    let smp = raw(
        &mut w,
        "PATCH",
        &format!("{base}/ignore"),
        "fieldValidation=Strict",
        "application/strategic-merge-patch+json",
        r#"{"spec": {"paused": true, "paused": false}}"#,
    );
    assert!(
        smp.json()["message"]
            .as_str()
            .unwrap()
            .starts_with(r#" "" is invalid: patch: Invalid value: "map[spec:map[paused:false]]": strict decoding error: duplicate field "spec.paused""#)
    );
    let json_patch = r#"[{"op": "add", "path": "/spec/unknown1", "value": "val1", "foo": "bar"},
        {"op": "add", "path": "/spec/unknown2", "path": "/spec/unknown3", "value": "val1"},
        {"op": "add", "path": "/spec/paused", "value": true}]"#;
    let r = raw(&mut w, "PATCH", &format!("{base}/ignore"), "fieldValidation=Warn", "application/json-patch+json", json_patch);
    assert_eq!(
        (r.head.status, warnings(&r)),
        (
            200,
            [
                r#"json patch unknown field "[0].foo""#,
                r#"json patch duplicate field "[1].path""#,
                r#"unknown field "spec.unknown1""#,
                r#"unknown field "spec.unknown3""#
            ]
            .map(String::from)
            .to_vec()
        )
    );
}

/// kube's checks of enumerated fields: (path, body) → the one cause's field and message.
#[test]
fn enumerated_fields_are_checked_as_kube_checks_them() {
    let mut w = world();
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    assert_eq!(post(&mut w, "/api/v1/namespaces/default/serviceaccounts", sa).head.status, 201);
    let svc = |name: &str, spec: Value| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec});
    let pod = |name: &str, spec: Value| {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        p["spec"].as_object_mut().unwrap().extend(spec.as_object().unwrap().clone());
        p
    };
    let template = json!({"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let cases = [
        (
            "/api/v1/namespaces/default/services",
            svc("etp", json!({"type": "NodePort", "ports": [{"port": 80}], "externalTrafficPolicy": "Bogus"})),
            "spec.externalTrafficPolicy",
            r#"Unsupported value: "Bogus": supported values: "Cluster", "Local""#,
        ),
        (
            "/api/v1/namespaces/default/services",
            svc("etp2", json!({"ports": [{"port": 80}], "externalTrafficPolicy": "Local"})),
            "spec.externalTrafficPolicy",
            r#"Invalid value: "Local": may only be set for externally-accessible services"#,
        ),
        (
            "/api/v1/namespaces/default/services",
            svc("itp", json!({"ports": [{"port": 80}], "internalTrafficPolicy": "Near"})),
            "spec.internalTrafficPolicy",
            r#"Unsupported value: "Near": supported values: "Cluster", "Local""#,
        ),
        (
            "/api/v1/namespaces/default/services",
            svc("fam", json!({"ports": [{"port": 80}], "ipFamilies": ["IPv5"]})),
            "spec.ipFamilies[0]",
            r#"Unsupported value: "IPv5": supported values: "IPv4", "IPv6""#,
        ),
        (
            "/api/v1/namespaces/default/pods",
            pod("tol", json!({"tolerations": [{"key": "k", "operator": "Maybe"}]})),
            "spec.tolerations[0].operator",
            r#"Unsupported value: "Maybe": supported values: "Equal", "Exists""#,
        ),
        (
            "/api/v1/namespaces/default/pods",
            pod("tol2", json!({"tolerations": [{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}, {"key": "k", "effect": "Later"}]})),
            "spec.tolerations[1].effect",
            r#"Unsupported value: "Later": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute""#,
        ),
        (
            "/api/v1/namespaces/default/pods",
            pod("tsc", json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Sometimes"}]})),
            "spec.topologySpreadConstraints[0].whenUnsatisfiable",
            r#"Unsupported value: "Sometimes": supported values: "DoNotSchedule", "ScheduleAnyway""#,
        ),
        (
            "/api/v1/namespaces/default/pods",
            pod("side", json!({"initContainers": [{"name": "i", "image": "x", "restartPolicy": "Never"}]})),
            "spec.initContainers[0].restartPolicy",
            r#"Unsupported value: "Never": supported values: "Always""#,
        ),
        (
            "/api/v1/namespaces/default/pods",
            pod("sec", json!({"securityContext": {"seccompProfile": {"type": "Strict"}}})),
            "spec.securityContext.seccompProfile.type",
            r#"Unsupported value: "Strict": supported values: "Localhost", "RuntimeDefault", "Unconfined""#,
        ),
        (
            "/api/v1/namespaces/default/pods",
            pod("os", json!({"os": {"name": "plan9"}})),
            "spec.os",
            r#"Unsupported value: "plan9": supported values: "linux", "windows""#,
        ),
        (
            "/apis/apps/v1/namespaces/default/statefulsets",
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template, "podManagementPolicy": "Random"}}),
            "spec.podManagementPolicy",
            r#"Invalid value: "Random": must be 'OrderedReady' or 'Parallel'"#,
        ),
        (
            "/apis/apps/v1/namespaces/default/daemonsets",
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template, "updateStrategy": {"type": "Sometimes"}}}),
            "spec.updateStrategy",
            r#"Unsupported value: "apps.DaemonSetUpdateStrategy{Type:\"Sometimes\", RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}": supported values: "RollingUpdate", "OnDelete""#,
        ),
        (
            "/api/v1/namespaces/default/endpoints",
            json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "e"}, "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80, "protocol": "QUIC"}]}]}),
            "subsets[0].ports[0].protocol",
            r#"Unsupported value: "QUIC": supported values: "SCTP", "TCP", "UDP""#,
        ),
    ];
    for (path, body, field, message) in cases {
        let r = post(&mut w, path, body);
        assert_eq!(r.head.status, 422, "{field}: {}", String::from_utf8_lossy(&r.body));
        let causes = r.json()["details"]["causes"].clone();
        assert_eq!(causes, json!([{"reason": causes[0]["reason"], "field": field, "message": message}]), "{field}");
    }
    // A service that stops being reachable from outside drops the policy it no longer takes.
    let r =
        post(&mut w, "/api/v1/namespaces/default/services", svc("np", json!({"type": "NodePort", "ports": [{"port": 80}], "externalTrafficPolicy": "Local"})));
    assert_eq!(r.head.status, 201);
    let r = call(&mut w, "PATCH", "/api/v1/namespaces/default/services/np", "", Some(json!({"spec": {"type": "ClusterIP"}})), "application/merge-patch+json");
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["spec"].get("externalTrafficPolicy"), None);
}

/// Found by the fuzz target `request`: a watch's timeout past what a timestamp holds panicked.
#[test]
fn a_watch_timeout_past_the_end_of_time_is_no_timeout() {
    let mut w = world();
    let r = call(&mut w, "GET", CMS, "watch=true&timeoutSeconds=9223372036854775807", None, "");
    assert_eq!(r.head.status, 200);
    assert!(r.watch.is_some());
}

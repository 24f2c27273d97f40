//! The `kube` crate (a typed client like client-go) against the binary.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kapi_tests::Kapi;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

async fn client(k: &Kapi) -> Client {
    let kc = Kubeconfig::read_from(k.kubeconfig()).unwrap();
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.unwrap();
    Client::try_from(config).unwrap()
}

fn cm(name: &str, v: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "data": {"k": v}})).unwrap()
}

#[tokio::test]
async fn typed_crud_and_conflicts() {
    let k = Kapi::start();
    let api: Api<ConfigMap> = Api::namespaced(client(&k).await, "default");
    let created = api.create(&PostParams::default(), &cm("a", "1")).await.unwrap();
    assert!(created.metadata.uid.is_some());
    let mut got = api.get("a").await.unwrap();
    got.data.as_mut().unwrap().insert("k".into(), "2".into());
    api.replace("a", &PostParams::default(), &got).await.unwrap();
    let stale = api.replace("a", &PostParams::default(), &got).await.unwrap_err();
    match stale {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert_eq!(s.reason, "Conflict");
        }
        other => panic!("{other}"),
    }
    let patched = api.patch("a", &PatchParams::apply("tester").force(), &Patch::Apply(cm("a", "3"))).await.unwrap();
    assert_eq!(patched.data.unwrap()["k"], "3");
    api.delete("a", &DeleteParams::default()).await.unwrap();
    assert!(api.get_opt("a").await.unwrap().is_none());
}

#[tokio::test]
async fn watch_resumes_from_a_list() {
    let k = Kapi::start();
    let api: Api<ConfigMap> = Api::namespaced(client(&k).await, "default");
    api.create(&PostParams::default(), &cm("before", "1")).await.unwrap();
    let list = api.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let mut stream = api.watch(&WatchParams::default().timeout(10), &rv).await.unwrap().boxed();
    api.create(&PostParams::default(), &cm("after", "1")).await.unwrap();
    api.delete("before", &DeleteParams::default()).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(5), stream.try_next()).await.unwrap().unwrap() {
            // The root CA publisher may add `kube-root-ca.crt` meanwhile.
            Some(WatchEvent::Added(o)) if o.metadata.name.as_deref() != Some("kube-root-ca.crt") => seen.push(format!("ADDED {}", o.metadata.name.unwrap())),
            Some(WatchEvent::Deleted(o)) => seen.push(format!("DELETED {}", o.metadata.name.unwrap())),
            Some(_) => {}
            None => break,
        }
    }
    assert_eq!(seen, vec!["ADDED after", "DELETED before"]);
}

#[tokio::test]
async fn delete_collection_by_label() {
    let k = Kapi::start();
    let api: Api<ConfigMap> = Api::namespaced(client(&k).await, "default");
    for (name, tier) in [("a", "web"), ("b", "web"), ("c", "db")] {
        let mut c = cm(name, "1");
        c.metadata.labels = Some([("tier".to_string(), tier.to_string())].into());
        api.create(&PostParams::default(), &c).await.unwrap();
    }
    let deleted = api.delete_collection(&DeleteParams::default(), &ListParams::default().labels("tier=web")).await.unwrap();
    let names: Vec<String> = deleted.left().unwrap().items.into_iter().filter_map(|c| c.metadata.name).collect();
    assert_eq!(names, vec!["a", "b"]);
    let left: Vec<String> = api.list(&ListParams::default().labels("tier")).await.unwrap().items.into_iter().filter_map(|c| c.metadata.name).collect();
    assert_eq!(left, vec!["c"]);
}

#[tokio::test]
async fn deployments_through_the_typed_client() {
    let k = Kapi::start();
    let api: Api<Deployment> = Api::namespaced(client(&k).await, "default");
    let d: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &d).await.unwrap();
    assert_eq!(created.spec.unwrap().replicas, Some(1));
    let scale = api.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    let pages = api.list(&ListParams::default().limit(1)).await.unwrap();
    assert_eq!(pages.items.len(), 1);
}

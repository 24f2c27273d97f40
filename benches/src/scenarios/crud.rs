//! create, get, update (read-modify-write, conflicts counted) and delete of N objects.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use http::Method;
use serde_json::{Value, json};

use super::{name, pool};
use crate::Api;
use crate::client::Client;
use crate::report::Row;

const PREFIX: &str = "bench";

/// Makes sure the namespace and its `default` service account exist: pods need the account,
/// and a server's controller (if it runs one) may not have made it yet when the first pod comes.
/// What exists is not created again (a user RBAC lets work in a namespace may not create one).
pub async fn namespace(client: &Client, namespace: &str) -> anyhow::Result<()> {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    for (path, name, body) in [("/api/v1/namespaces".to_string(), namespace, ns), (format!("/api/v1/namespaces/{namespace}/serviceaccounts"), "default", sa)] {
        if client.call(Method::GET, &format!("{path}/{name}"), None).await.0 == Some(200) {
            continue;
        }
        let (outcome, answer, _) = client.call(Method::POST, &path, Some(serde_json::to_vec(&body)?.into())).await;
        if !matches!(outcome, Some(201 | 409)) {
            anyhow::bail!("POST {path}: {outcome:?} {}", String::from_utf8_lossy(&answer));
        }
    }
    Ok(())
}

/// Installs the CRD of custom resources and waits until it is established (30 s at most).
pub async fn custom_resources(client: &Client) -> anyhow::Result<()> {
    let crd = crate::objects::widget_crd();
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (outcome, answer, _) = client.call(Method::POST, path, Some(serde_json::to_vec(&crd)?.into())).await;
    if !matches!(outcome, Some(201 | 409)) {
        anyhow::bail!("POST {path}: {outcome:?} {}", String::from_utf8_lossy(&answer));
    }
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    while Instant::now() < deadline {
        let (_, answer, _) = client.call(Method::GET, &format!("{path}/benchwidgets.kapi.dev"), None).await;
        let crd: Value = serde_json::from_slice(&answer).unwrap_or_default();
        let established = crd["status"]["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == "Established" && c["status"] == "True");
        let (served, _, _) = client.call(Method::GET, &crate::objects::Kind::Widget.collection("default"), None).await;
        if established && served == Some(200) {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    anyhow::bail!("benchwidgets.kapi.dev was not established within 30 s")
}

pub async fn create(api: &Api, client: Client) -> anyhow::Result<Vec<Row>> {
    namespace(&client, &api.namespace).await?;
    if api.kind == crate::objects::Kind::Widget {
        custom_resources(&client).await?;
    }
    let (kind, size, path) = (api.kind, api.size, api.kind.collection(&api.namespace));
    let (rec, elapsed) = pool(api.concurrency, api.count, move |i| {
        let (client, path) = (client.clone(), path.clone());
        async move {
            let (outcome, _, d) = client.call(Method::POST, &path, Some(kind.body(&name(PREFIX, i), size))).await;
            (outcome, d)
        }
    })
    .await;
    Ok(vec![Row::new("create", &format!("{kind:?}").to_lowercase(), &rec, elapsed).with("body_bytes", kind.body(&name(PREFIX, 0), size).len())])
}

pub async fn get(api: &Api, client: Client) -> anyhow::Result<Vec<Row>> {
    let (count, path) = (api.count, api.kind.collection(&api.namespace));
    let (rec, elapsed) = pool(api.concurrency, api.ops.unwrap_or(count), move |i| {
        let (client, path) = (client.clone(), path.clone());
        async move {
            let (outcome, _, d) = client.call(Method::GET, &format!("{path}/{}", name(PREFIX, i % count)), None).await;
            (outcome, d)
        }
    })
    .await;
    Ok(vec![Row::new("get", "get", &rec, elapsed)])
}

/// GET, change an annotation, PUT; a 409 is a conflict and the cycle starts again. The latency
/// is the whole cycle's.
pub async fn update(api: &Api, client: Client) -> anyhow::Result<Vec<Row>> {
    let (count, path) = (api.count, api.kind.collection(&api.namespace));
    let conflicts = Arc::new(AtomicU64::new(0));
    let seen = conflicts.clone();
    let (rec, elapsed) = pool(api.concurrency, api.ops.unwrap_or(count), move |i| {
        let (client, path, conflicts) = (client.clone(), format!("{path}/{}", name(PREFIX, i % count)), conflicts.clone());
        async move {
            let start = Instant::now();
            loop {
                let (outcome, body, _) = client.call(Method::GET, &path, None).await;
                if outcome != Some(200) {
                    return (outcome, start.elapsed());
                }
                let Ok(mut obj) = serde_json::from_slice::<Value>(&body) else { return (None, start.elapsed()) };
                obj["metadata"]["annotations"]["kapi.dev/update"] = Value::String(i.to_string());
                let body = serde_json::to_vec(&obj).expect("JSON trees serialize");
                let (outcome, _, _) = client.call(Method::PUT, &path, Some(body.into())).await;
                if outcome == Some(409) {
                    conflicts.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                return (outcome, start.elapsed());
            }
        }
    })
    .await;
    let kind = format!("{:?}", api.kind).to_lowercase();
    Ok(vec![Row::new("update", "read-modify-write", &rec, elapsed).with("conflicts", seen.load(Ordering::Relaxed)).with("kind", kind)])
}

pub async fn delete(api: &Api, client: Client) -> anyhow::Result<Vec<Row>> {
    let path = api.kind.collection(&api.namespace);
    let (rec, elapsed) = pool(api.concurrency, api.count, move |i| {
        let (client, path) = (client.clone(), path.clone());
        async move {
            let (outcome, _, d) = client.call(Method::DELETE, &format!("{path}/{}", name(PREFIX, i)), None).await;
            (outcome, d)
        }
    })
    .await;
    Ok(vec![Row::new("delete", "delete", &rec, elapsed)])
}

//! Many CustomResourceDefinitions: --count CRDs installed one after another, each in a group of
//! its own with a schema of a typical operator's size (about 3 KiB: spec and status of a dozen
//! fields, a CEL rule, a printer column, `/status` and `/scale`), each timed from its POST until
//! it is `Established` and its resources answer a LIST. Aggregated discovery, one group
//! version's discovery, the OpenAPI v3 index and one group version's OpenAPI document are read
//! before and after, so that what the count costs them shows. With `--server-pid`, the first row carries the server's RSS growth.

use std::time::{Duration, Instant};

use http::Method;
use serde_json::{Value, json};

use crate::Api;
use crate::client::Client;
use crate::report::{Recorder, Row};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
/// Aggregated discovery, or the group list from a server without it, as kubectl asks.
const DISCOVERY: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
/// Reads of each document, before and after.
const READS: usize = 20;

fn group(prefix: &str, i: usize) -> String {
    format!("{prefix}{i:05}.crds.kapi.dev")
}

/// A CRD like an operator's.
fn crd(group: &str) -> Value {
    let string = json!({"type": "string", "maxLength": 253});
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "required": ["image"],
            "x-kubernetes-validations": [{"rule": "self.replicas <= self.maxReplicas", "message": "replicas may not exceed maxReplicas"}],
            "properties": {
                "image": string, "replicas": {"type": "integer", "minimum": 0, "default": 1}, "maxReplicas": {"type": "integer", "default": 10},
                "paused": {"type": "boolean"}, "serviceAccountName": string, "priorityClassName": string,
                "resources": {"type": "object", "properties": {"limits": {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": true}},
                    "requests": {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": true}}}},
                "env": {"type": "array", "maxItems": 64, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "required": ["name"], "properties": {"name": string, "value": {"type": "string"}}}},
                "selector": {"type": "object", "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}}},
                "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
        "status": {"type": "object", "properties": {
            "replicas": {"type": "integer"}, "readyReplicas": {"type": "integer"}, "selector": {"type": "string"}, "observedGeneration": {"type": "integer"},
            "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                "items": {"type": "object", "required": ["type", "status"], "properties": {
                    "type": string, "status": {"type": "string", "enum": ["True", "False", "Unknown"]}, "reason": string,
                    "message": {"type": "string"}, "lastTransitionTime": {"type": "string", "format": "date-time"}}}}}}}});
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": format!("apps.{group}")},
        "spec": {"group": group, "scope": "Namespaced", "names": {"plural": "apps", "singular": "app", "kind": "App", "shortNames": ["ap"], "categories": ["all"]},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}},
                "additionalPrinterColumns": [{"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"}]}]}})
}

/// Whether the CRD of `group` is established and its resources served.
async fn served(client: &Client, group: &str) -> bool {
    let (_, answer, _) = client.call(Method::GET, &format!("{CRDS}/apps.{group}"), None).await;
    let crd: Value = serde_json::from_slice(&answer).unwrap_or_default();
    let established = crd["status"]["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == "Established" && c["status"] == "True");
    established && client.call(Method::GET, &format!("/apis/{group}/v1/apps?limit=1"), None).await.0 == Some(200)
}

/// Reads discovery and OpenAPI; one row each, named with `when`.
async fn reads(client: &Client, when: &str, sample_group: &str) -> Vec<Row> {
    let documents = [
        ("discovery", "/apis".to_string(), DISCOVERY),
        ("discovery-group", format!("/apis/{sample_group}/v1"), "application/json"),
        ("openapi-index", "/openapi/v3".to_string(), "application/json"),
        ("openapi-group", format!("/openapi/v3/apis/{sample_group}/v1"), "application/json"),
    ];
    let mut rows = Vec::new();
    for (name, path, accept) in documents {
        let (mut rec, start, mut bytes) = (Recorder::default(), Instant::now(), 0);
        for _ in 0..READS {
            let (outcome, body, d) = client.get_accepting(&path, accept).await;
            bytes = body.len();
            rec.record(outcome, d);
        }
        rows.push(Row::new("crds", &format!("{name}-{when}"), &rec, start.elapsed()).with("body_bytes", bytes));
    }
    rows
}

pub async fn crds(api: &Api, client: Client) -> anyhow::Result<Vec<Row>> {
    let prefix = super::run_prefix("g").replace('-', "");
    let first = group(&prefix, 0);
    let (outcome, answer, _) = client.call(Method::POST, CRDS, Some(serde_json::to_vec(&crd(&first))?.into())).await;
    if outcome != Some(201) {
        anyhow::bail!("POST {CRDS}: {outcome:?} {}", String::from_utf8_lossy(&answer));
    }
    while !served(&client, &first).await {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let before = reads(&client, "before", &first).await;
    let (mut rec, start) = (Recorder::default(), Instant::now());
    for i in 1..api.count.max(2) {
        let group = group(&prefix, i);
        let t = Instant::now();
        let (outcome, answer, _) = client.call(Method::POST, CRDS, Some(serde_json::to_vec(&crd(&group))?.into())).await;
        if outcome != Some(201) {
            anyhow::bail!("POST {CRDS} ({group}): {outcome:?} {}", String::from_utf8_lossy(&answer));
        }
        let deadline = t + Duration::from_secs(30);
        while !served(&client, &group).await {
            if Instant::now() > deadline {
                anyhow::bail!("{group} was not served within 30 s of its create");
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        rec.record(Some(201), t.elapsed());
    }
    let installed = Row::new("crds", "create-until-served", &rec, start.elapsed());
    let after = reads(&client, "after", &first).await;
    Ok(std::iter::once(installed).chain(before).chain(after).collect())
}

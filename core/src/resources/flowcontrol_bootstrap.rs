//! The flow schemas and priority levels kube-apiserver v1.33 keeps in every cluster
//! (`k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap/default.go`): the mandatory ones, always
//! brought back to kube's spec, and the suggested ones, made again when deleted.

use serde_json::{Value, json};

const AUTOUPDATE: &str = "apf.kubernetes.io/autoupdate-spec";

/// Whether an object is one kube keeps at its spec whatever a user did to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    Mandatory,
    Suggested,
}

fn object(kind: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": kind, "metadata": {"name": name, "annotations": {AUTOUPDATE: "true"}}, "spec": spec})
}

fn limited(name: &str, shares: i64, lendable: i64, queues: i64, hand: i64) -> Value {
    object(
        "PriorityLevelConfiguration",
        name,
        json!({"type": "Limited", "limited": {"nominalConcurrencyShares": shares, "lendablePercent": lendable,
            "limitResponse": {"type": "Queue", "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": 50}}}}),
    )
}

fn group(name: &str) -> Value {
    json!({"kind": "Group", "group": {"name": name}})
}

fn user(name: &str) -> Value {
    json!({"kind": "User", "user": {"name": name}})
}

fn service_account(namespace: &str, name: &str) -> Value {
    json!({"kind": "ServiceAccount", "serviceAccount": {"namespace": namespace, "name": name}})
}

/// Every resource and every non-resource URL.
fn everything(subjects: Vec<Value>) -> Value {
    json!([{"subjects": subjects,
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": true}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}])
}

fn resource_rule(verbs: &[&str], group: &str, resources: &[&str], cluster_scope: bool) -> Value {
    json!({"verbs": verbs, "apiGroups": [group], "resources": resources, "namespaces": ["*"], "clusterScope": cluster_scope})
}

fn schema(name: &str, level: &str, precedence: i64, distinguisher: Option<&str>, rules: Value) -> Value {
    let mut spec = json!({"priorityLevelConfiguration": {"name": level}, "matchingPrecedence": precedence, "rules": rules});
    if let Some(d) = distinguisher {
        spec["distinguisherMethod"] = json!({"type": d});
    }
    object("FlowSchema", name, spec)
}

const EVERYONE: [&str; 2] = ["system:unauthenticated", "system:authenticated"];

/// Priority levels first (schemas refer to them), each with how it is kept.
pub fn priority_levels() -> Vec<(Keep, Value)> {
    vec![
        (Keep::Suggested, limited("system", 30, 33, 64, 6)),
        (Keep::Suggested, limited("node-high", 40, 25, 64, 6)),
        (Keep::Suggested, limited("leader-election", 10, 0, 16, 4)),
        (Keep::Suggested, limited("workload-high", 40, 50, 128, 6)),
        (Keep::Suggested, limited("workload-low", 100, 90, 128, 6)),
        (Keep::Suggested, limited("global-default", 20, 50, 128, 6)),
        (
            Keep::Mandatory,
            object(
                "PriorityLevelConfiguration",
                "catch-all",
                json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "lendablePercent": 0, "limitResponse": {"type": "Reject"}}}),
            ),
        ),
        (
            Keep::Mandatory,
            object("PriorityLevelConfiguration", "exempt", json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}})),
        ),
    ]
}

pub fn flow_schemas() -> Vec<(Keep, Value)> {
    let everyone: Vec<Value> = EVERYONE.iter().map(|g| group(g)).collect();
    let leader_users = vec![user("system:kube-controller-manager"), user("system:kube-scheduler"), service_account("kube-system", "*")];
    let get_create_update = ["get", "create", "update"];
    vec![
        (Keep::Suggested, schema("system-nodes", "system", 500, Some("ByUser"), everything(vec![group("system:nodes")]))),
        (
            Keep::Suggested,
            schema(
                "system-node-high",
                "node-high",
                400,
                Some("ByUser"),
                json!([{"subjects": [group("system:nodes")], "resourceRules": [
                    resource_rule(&["*"], "", &["nodes", "nodes/status"], true),
                    resource_rule(&["*"], "coordination.k8s.io", &["leases"], false)]}]),
            ),
        ),
        (
            Keep::Suggested,
            schema(
                "probes",
                "exempt",
                2,
                None,
                json!([{"subjects": everyone, "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}]}]),
            ),
        ),
        (
            Keep::Suggested,
            schema(
                "system-leader-election",
                "leader-election",
                100,
                Some("ByUser"),
                json!([{"subjects": leader_users, "resourceRules": [resource_rule(&get_create_update, "coordination.k8s.io", &["leases"], false)]}]),
            ),
        ),
        (
            Keep::Suggested,
            schema(
                "workload-leader-election",
                "leader-election",
                200,
                Some("ByUser"),
                json!([{"subjects": [service_account("kube-system", "*")], "resourceRules": [
                    resource_rule(&get_create_update, "", &["endpoints", "configmaps"], false),
                    resource_rule(&get_create_update, "coordination.k8s.io", &["leases"], false)]}]),
            ),
        ),
        (
            Keep::Suggested,
            schema(
                "endpoint-controller",
                "workload-high",
                150,
                Some("ByUser"),
                json!([{"subjects": [user("system:kube-controller-manager"), service_account("kube-system", "endpoint-controller"),
                    service_account("kube-system", "endpointslicemirroring-controller")],
                    "resourceRules": [resource_rule(&get_create_update, "", &["endpoints"], false)]}]),
            ),
        ),
        (
            Keep::Suggested,
            schema("kube-controller-manager", "workload-high", 800, Some("ByNamespace"), everything(vec![user("system:kube-controller-manager")])),
        ),
        (Keep::Suggested, schema("kube-scheduler", "workload-high", 800, Some("ByNamespace"), everything(vec![user("system:kube-scheduler")]))),
        (
            Keep::Suggested,
            schema("kube-system-service-accounts", "workload-high", 900, Some("ByNamespace"), everything(vec![service_account("kube-system", "*")])),
        ),
        (Keep::Suggested, schema("service-accounts", "workload-low", 9000, Some("ByUser"), everything(vec![group("system:serviceaccounts")]))),
        (Keep::Suggested, schema("global-default", "global-default", 9900, Some("ByUser"), everything(EVERYONE.iter().map(|g| group(g)).collect()))),
        (Keep::Mandatory, schema("exempt", "exempt", 1, None, everything(vec![group("system:masters")]))),
        (Keep::Mandatory, schema("catch-all", "catch-all", 10000, Some("ByUser"), everything(EVERYONE.iter().map(|g| group(g)).collect()))),
    ]
}

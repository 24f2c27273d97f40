//! What objects use of quotas, and the ResourceQuota plugin's charges and refusals in kube's
//! words.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::*;
use crate::admission::{Attributes, Chain, Found, Operation};
use crate::auth::UserInfo;
use crate::resources::{Settings, catalog};

fn now() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

fn shown(list: &Resources) -> String {
    pretty(list)
}

fn pod(containers: Value) -> Value {
    json!({"metadata": {"name": "p", "namespace": "dev"}, "spec": {"containers": containers}})
}

#[test]
fn a_pod_uses_its_containers_requests_and_limits_with_its_overhead() {
    let mut p = pod(json!([
        {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "500m"}}},
        {"name": "b", "resources": {"requests": {"cpu": "250m", "hugepages-2Mi": "4Mi", "example.com/gpu": "1"}}}
    ]));
    p["spec"]["initContainers"] = json!([{"name": "init", "resources": {"requests": {"cpu": "2"}}}]);
    p["spec"]["overhead"] = json!({"cpu": "100m"});
    assert_eq!(
        shown(&Evaluator::Pods.usage(&p, now())),
        "count/pods=1,cpu=2100m,hugepages-2Mi=4Mi,limits.cpu=600m,memory=64Mi,pods=1,requests.cpu=2100m,requests.example.com/gpu=1,requests.hugepages-2Mi=4Mi,requests.memory=64Mi"
    );
    p["status"] = json!({"phase": "Succeeded"});
    assert_eq!(shown(&Evaluator::Pods.usage(&p, now())), "count/pods=1");

    // What a container was given counts when more than it asks for; a grace that never ends
    // keeps a deleted pod counted.
    let mut resized = pod(json!([{"name": "a", "resources": {"requests": {"cpu": "1"}}}]));
    resized["status"] = json!({"containerStatuses": [{"name": "a", "resources": {"requests": {"cpu": "2"}}}]});
    resized["metadata"]["deletionTimestamp"] = json!("9999-12-31T23:59:59Z");
    resized["metadata"]["deletionGracePeriodSeconds"] = json!(i64::MAX);
    assert_eq!(shown(&Evaluator::Pods.usage(&resized, now())), "count/pods=1,cpu=2,pods=1,requests.cpu=2");
    // A quantity too large to add up exactly is more than any quota.
    let huge = pod(json!([{"name": "a", "resources": {"requests": {"example.com/gpu": "1e37"}}}]));
    let q = quota("gpus", json!({"requests.example.com/gpu": "4"}), json!({"requests.example.com/gpu": "1"}));
    assert!(charge("pods", &huge, None, vec![q]).unwrap_err().contains("exceeded quota: gpus"));
}

#[test]
fn services_and_claims_use_what_kube_counts() {
    let svc = json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80, "nodePort": 30000}, {"port": 443}], "allocateLoadBalancerNodePorts": false}});
    assert_eq!(shown(&Evaluator::Services.usage(&svc, now())), "count/services=1,services=1,services.loadbalancers=1,services.nodeports=1");
    let claim = json!({"spec": {"storageClassName": "fast", "resources": {"requests": {"storage": "1500m"}}}});
    assert_eq!(
        shown(&Evaluator::Claims.usage(&claim, now())),
        "count/persistentvolumeclaims=1,fast.storageclass.storage.k8s.io/persistentvolumeclaims=1,fast.storageclass.storage.k8s.io/requests.storage=2,persistentvolumeclaims=1,requests.storage=2"
    );
    assert_eq!(Evaluator::of("apps", "deployments"), Some(Evaluator::Count(vec!["count/deployments.apps".into()])));
    assert_eq!(Evaluator::of("", "events"), None);
}

fn quota(name: &str, hard: Value, used: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": "dev", "resourceVersion": "7"}, "spec": {"hard": hard}, "status": {"hard": hard, "used": used}})
}

/// The charges of creating `obj` (`resource` of the core group) with `quotas` in its namespace.
fn charge(resource: &str, obj: &Value, old: Option<&Value>, quotas: Vec<Value>) -> Result<Vec<Value>, String> {
    let cat = catalog(&Settings::default());
    let info = &cat.resources().find(|r| r.info.group.is_empty() && r.info.resource == resource).unwrap().info;
    let chain = Chain::from_flags(&[], &[], &Default::default(), &crate::admission::no_files).unwrap();
    let found = Found { resource_quotas: quotas, ..Found::default() };
    let user = UserInfo::default();
    let op = if old.is_some() { Operation::Update } else { Operation::Create };
    let a = Attributes::of(op, info, "dev", "p", &user, old, &found);
    chain
        .charge(&a, Some(obj), now())
        .map(|c| c.into_iter().map(|c| c.quota["status"]["used"].clone()).collect())
        .map_err(|e| format!("{} {}", e.code, e.message))
}

#[test]
fn a_create_is_charged_to_the_quotas_that_count_it_or_refused_in_kubes_words() {
    let p = pod(json!([{"name": "app", "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "500m"}}}]));
    let compute = quota("compute", json!({"requests.cpu": "2", "pods": "10"}), json!({"requests.cpu": "1", "pods": "3"}));
    let counts = quota("counts", json!({"configmaps": "1"}), json!({"configmaps": "0"}));
    assert_eq!(charge("pods", &p, None, vec![compute, counts.clone()]).unwrap(), vec![json!({"requests.cpu": "1500m", "pods": "4"})]);

    let full = quota("compute", json!({"requests.cpu": "2"}), json!({"requests.cpu": "1800m"}));
    assert_eq!(
        charge("pods", &p, None, vec![full]).unwrap_err(),
        "403 pods \"p\" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=1800m, limited: requests.cpu=2"
    );
    let limits = quota("limits", json!({"limits.memory": "1Gi", "requests.cpu": "1"}), json!({"limits.memory": "0", "requests.cpu": "0"}));
    assert_eq!(charge("pods", &p, None, vec![limits]).unwrap_err(), "403 pods \"p\" is forbidden: failed quota: limits: must specify limits.memory for: app");
    let unknown = json!({"metadata": {"name": "new", "namespace": "dev"}, "spec": {"hard": {"pods": "1"}}, "status": {"hard": {"pods": "1"}}});
    assert_eq!(charge("pods", &p, None, vec![unknown]).unwrap_err(), "403 pods \"p\" is forbidden: status unknown for quota: new, resources: pods");
    // Not yet synced by the controller: counts nothing.
    let unsynced = json!({"metadata": {"name": "new", "namespace": "dev"}, "spec": {"hard": {"pods": "0"}}});
    assert_eq!(charge("pods", &p, None, vec![unsynced]).unwrap(), Vec::<Value>::new());

    let cm = json!({"metadata": {"name": "c", "namespace": "dev"}});
    assert_eq!(charge("configmaps", &cm, None, vec![counts]).unwrap(), vec![json!({"configmaps": "1"})]);
    let taken = quota("counts", json!({"count/configmaps": "1"}), json!({"count/configmaps": "1"}));
    assert_eq!(
        charge("configmaps", &cm, None, vec![taken]).unwrap_err(),
        "403 configmaps \"p\" is forbidden: exceeded quota: counts, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1"
    );
}

#[test]
fn scopes_choose_the_pods_a_quota_counts_and_updates_pay_only_what_they_add() {
    let best_effort = pod(json!([{"name": "app"}]));
    let burstable = pod(json!([{"name": "app", "resources": {"requests": {"cpu": "1"}}}]));
    let mut scoped = quota("be", json!({"pods": "1"}), json!({"pods": "1"}));
    scoped["spec"]["scopes"] = json!(["BestEffort"]);
    assert!(charge("pods", &best_effort, None, vec![scoped.clone()]).unwrap_err().contains("exceeded quota: be"));
    assert_eq!(charge("pods", &burstable, None, vec![scoped]).unwrap(), Vec::<Value>::new());
    let mut priority = quota("prio", json!({"pods": "5"}), json!({"pods": "0"}));
    priority["spec"]["scopeSelector"] = json!({"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]});
    let mut high = burstable.clone();
    high["spec"]["priorityClassName"] = json!("high");
    assert_eq!(charge("pods", &burstable, None, vec![priority.clone()]).unwrap(), Vec::<Value>::new());
    assert_eq!(charge("pods", &high, None, vec![priority]).unwrap(), vec![json!({"pods": "1"})]);

    // A service becoming a NodePort pays its node ports, not another service.
    let svc = |t: &str| json!({"metadata": {"name": "s", "namespace": "dev", "resourceVersion": "3"}, "spec": {"type": t, "ports": [{"port": 80}]}});
    let q = quota("svc", json!({"services": "1", "services.nodeports": "1"}), json!({"services": "1", "services.nodeports": "0"}));
    assert_eq!(charge("services", &svc("NodePort"), Some(&svc("ClusterIP")), vec![q]).unwrap(), vec![json!({"services": "1", "services.nodeports": "1"})]);
}

/// The charge of creating `obj` with the plugin configured by `config`, and no quotas.
fn limited(config: &str, resource: &str, obj: &Value) -> Result<(), String> {
    let cat = catalog(&Settings::default());
    let info = &cat.resources().find(|r| r.info.group.is_empty() && r.info.resource == resource).unwrap().info;
    let configs = [("ResourceQuota".to_string(), config.as_bytes().to_vec())].into_iter().collect();
    let chain = Chain::from_flags(&[], &[], &configs, &crate::admission::no_files)?;
    let found = Found::default();
    let user = UserInfo::default();
    let a = Attributes::of(Operation::Create, info, "dev", "p", &user, None, &found);
    chain.charge(&a, Some(obj), now()).map(|_| ()).map_err(|e| format!("{} {:?} {}", e.code, e.reason, e.message))
}

#[test]
fn limited_resources_need_a_quota_that_covers_them() {
    let config = r#"
apiVersion: apiserver.config.k8s.io/v1
kind: ResourceQuotaConfiguration
limitedResources:
- resource: persistentvolumeclaims
  matchContains: [".storageclass.storage.k8s.io/requests.storage"]
- resource: pods
  matchScopes:
  - {scopeName: PriorityClass, operator: In, values: [cluster-services]}
"#;
    let claim = json!({"metadata": {"name": "c", "namespace": "dev"}, "spec": {"storageClassName": "gold", "resources": {"requests": {"storage": "1Gi"}}}});
    assert_eq!(
        limited(config, "persistentvolumeclaims", &claim).unwrap_err(),
        "403 \"Forbidden\" persistentvolumeclaims \"p\" is forbidden: insufficient quota to consume: gold.storageclass.storage.k8s.io/requests.storage"
    );
    let mut critical = pod(json!([{"name": "app"}]));
    critical["spec"]["priorityClassName"] = json!("cluster-services");
    assert_eq!(limited(config, "pods", &critical).unwrap_err(), "500 \"\" insufficient quota to match these scopes: [{PriorityClass In [cluster-services]}]");
    limited(config, "pods", &pod(json!([{"name": "app"}]))).unwrap();

    let legacy = "apiVersion: resourcequota.admission.k8s.io/v1beta1\nkind: Configuration\nlimitedResources: [{apiGroup: '', matchContains: [x]}]\n";
    assert_eq!(
        limited(legacy, "pods", &critical).unwrap_err(),
        "couldn't init admission plugin \"ResourceQuota\": limitedResources[0].resource: Required value"
    );
    let wrong = "apiVersion: apiserver.config.k8s.io/v1\nkind: Configuration\n";
    assert!(limited(wrong, "pods", &critical).unwrap_err().contains("no kind \"Configuration\" is registered for version \"apiserver.config.k8s.io/v1\""));
}

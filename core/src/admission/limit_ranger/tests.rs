use serde_json::json;

use super::*;
use crate::admission::{Attributes, Found};
use crate::auth::UserInfo;
use crate::catalog::Catalog;
use crate::resources::{Settings, catalog};

fn range(limits: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr", "namespace": "dev"}, "spec": {"limits": limits}})
}

fn pod(containers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "dev"}, "spec": {"containers": containers}})
}

/// Admits then validates `obj` (a `resource` of the core group) against `ranges`.
fn admit(cat: &Catalog, resource: &str, op: Operation, ranges: Vec<Value>, obj: &mut Value) -> Result<(), String> {
    let info = &cat.get("", "v1", resource).unwrap().info;
    let found = Found { limit_ranges: ranges, ..Found::default() };
    let user = UserInfo::default();
    let a = Attributes::of(op, info, "dev", "p", &user, None, &found);
    LimitRanger.admit(&a, Some(obj), &mut Rng::new(1)).map_err(|e| e.message.clone())?;
    LimitRanger.validate(&a, Some(obj), &mut Vec::new()).map_err(|e| e.message)
}

#[test]
fn containers_get_the_defaults_they_lack_and_the_annotation_says_which() {
    let cat = catalog(&Settings::default());
    let lr = range(json!([{"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"}, "defaultRequest": {"cpu": "100m", "memory": "128Mi"}}]));
    let mut p = pod(json!([{"name": "web", "image": "nginx", "resources": {"limits": {"memory": "512Mi"}}}, {"name": "side", "image": "x"}]));
    p["spec"]["initContainers"] = json!([{"name": "setup", "image": "x", "resources": {"requests": {"cpu": "50m"}}}]);
    admit(&cat, "pods", Operation::Create, vec![lr], &mut p).unwrap();
    assert_eq!(p["spec"]["containers"][0]["resources"], json!({"limits": {"memory": "512Mi", "cpu": "500m"}, "requests": {"cpu": "100m", "memory": "128Mi"}}));
    assert_eq!(p["spec"]["initContainers"][0]["resources"]["requests"], json!({"cpu": "50m", "memory": "128Mi"}));
    assert_eq!(
        p["metadata"]["annotations"][ANNOTATION],
        "LimitRanger plugin set: cpu, memory request for container web; cpu limit for container web; cpu, memory request for container side; cpu, memory limit for container side; memory request for init container setup; cpu, memory limit for init container setup"
    );
}

#[test]
fn bounds_are_checked_with_kubes_messages() {
    let cat = catalog(&Settings::default());
    let err = |limits: Value, containers: Value| admit(&cat, "pods", Operation::Create, vec![range(limits)], &mut pod(containers)).unwrap_err();
    let c = |requests: Value, limits: Value| json!([{"name": "c", "image": "x", "resources": {"requests": requests, "limits": limits}}]);
    assert_eq!(
        err(json!([{"type": "Container", "min": {"cpu": "100m"}}]), c(json!({"cpu": "50m"}), json!({}))),
        "pods \"p\" is forbidden: minimum cpu usage per Container is 100m, but request is 50m"
    );
    assert_eq!(
        err(json!([{"type": "Container", "max": {"memory": "1Gi"}}]), c(json!({}), json!({"memory": "2Gi"}))),
        "pods \"p\" is forbidden: maximum memory usage per Container is 1Gi, but limit is 2Gi"
    );
    assert_eq!(
        err(json!([{"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}}]), c(json!({"cpu": "100m"}), json!({"cpu": "400m"}))),
        "pods \"p\" is forbidden: cpu max limit to request ratio per Container is 2, but provided ratio is 4.000000"
    );
    assert_eq!(
        err(
            json!([{"type": "Pod", "max": {"cpu": "1"}}]),
            json!([{"name": "a", "image": "x"}, {"name": "b", "image": "x", "resources": {"limits": {"cpu": "2"}}}])
        ),
        "pods \"p\" is forbidden: maximum cpu usage per Pod is 1, but limit is 2"
    );
    assert_eq!(
        err(
            json!([{"type": "Pod", "max": {"cpu": "1"}, "min": {"memory": "1Mi"}}]),
            json!([{"name": "a", "image": "x", "resources": {"limits": {"cpu": "700m"}}}, {"name": "b", "image": "x", "resources": {"limits": {"cpu": "700m"}}}])
        ),
        "pods \"p\" is forbidden: [minimum memory usage per Pod is 1Mi.  No request is specified, maximum cpu usage per Pod is 1, but limit is 1400m]"
    );
    // What passes.
    assert!(
        admit(
            &cat,
            "pods",
            Operation::Create,
            vec![range(json!([{"type": "Container", "max": {"cpu": "1"}}]))],
            &mut pod(c(json!({"cpu": "1"}), json!({"cpu": "1"})))
        )
        .is_ok()
    );
}

#[test]
fn claims_are_bounded_by_their_requests_on_create_and_update() {
    let cat = catalog(&Settings::default());
    let lr = range(json!([{"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "5Gi"}}]));
    let mut claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "p", "namespace": "dev"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}});
    for op in [Operation::Create, Operation::Update] {
        assert_eq!(
            admit(&cat, "persistentvolumeclaims", op, vec![lr.clone()], &mut claim).unwrap_err(),
            "persistentvolumeclaims \"p\" is forbidden: maximum storage usage per PersistentVolumeClaim is 5Gi, but request is 10Gi"
        );
    }
    claim["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
    assert!(admit(&cat, "persistentvolumeclaims", Operation::Create, vec![lr], &mut claim).is_ok());
}

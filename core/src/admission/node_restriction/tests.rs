use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::admission::{Attributes, Chain, Found, Halt, Lookup, Operation, Pending, no_files};
use crate::auth::UserInfo;
use crate::authz::rbac::{Kind, Policy};
use crate::authz::{Access, Asked, Authorizer, Snapshot};
use crate::rand::Rng;
use crate::resources::{Settings, catalog};

fn kubelet() -> UserInfo {
    UserInfo { name: "system:node:n1".into(), groups: vec!["system:nodes".into()], ..UserInfo::default() }
}

/// An authorizer by RBAC alone, with `rules` granted to the kubelet.
fn access(rules: Value) -> Access {
    let mut rbac = Policy::default();
    rbac.put(Kind::ClusterRole, &json!({"metadata": {"name": "audiences"}, "rules": rules}));
    rbac.put(
        Kind::ClusterRoleBinding,
        &json!({"metadata": {"name": "n1"}, "roleRef": {"kind": "ClusterRole", "name": "audiences"}, "subjects": [{"kind": "User", "name": "system:node:n1"}]}),
    );
    Access {
        authorizer: Arc::new(Authorizer::parse("RBAC").unwrap()),
        state: Snapshot { rbac, ..Default::default() },
        asked: Asked::default(),
        now: jiff::Timestamp::UNIX_EPOCH,
    }
}

fn token(audiences: Value) -> Value {
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {"name": "default", "namespace": "dev"},
        "spec": {"audiences": audiences, "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "p1"}}})
}

/// The kubelet's pod `web` on n1, with `volumes`.
fn pod(volumes: Value) -> Value {
    json!({"metadata": {"name": "web", "namespace": "dev", "uid": "p1"}, "spec": {"nodeName": "n1", "volumes": volumes}})
}

#[test]
fn a_kubelet_asks_tokens_only_for_the_audiences_its_pods_volumes_name() {
    let cat = catalog(&Settings::default());
    let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let chain = Chain::from_flags(&owned(&["NodeRestriction"]), &[], &BTreeMap::new(), &no_files).unwrap();
    let info = &cat.get("", "v1", "serviceaccounts").unwrap().info;
    let user = kubelet();
    let denied = access(json!([]));
    let ask = |chain: &Chain, request: &Value, lookups: &[(Lookup, Option<Arc<Value>>)], access: &Access| {
        let found = Found::of(lookups);
        let a =
            Attributes { subresource: Some("token"), access: Some(access), ..Attributes::of(Operation::Create, info, "dev", "default", &user, None, &found) };
        chain.admit(&a, Some(&mut request.clone()), &mut Rng::new(1)).map_err(|h| match h {
            Halt::Refused(e) => format!("{} {}", e.code, e.message),
            Halt::Ask(_) => "asks".into(),
        })
    };
    let with_pod = |volumes: Value| vec![(Lookup::Pod { namespace: "dev".into(), name: "web".into() }, Some(Arc::new(pod(volumes))))];
    let forbidden = |why: &str| Err(format!("403 serviceaccounts \"default\" is forbidden: {why}"));

    // A projected token names the audience (none: the API server's).
    let projected = with_pod(json!([{"name": "t", "projected": {"sources": [{"serviceAccountToken": {"audience": "vault", "path": "t"}}]}}]));
    assert_eq!(ask(&chain, &token(json!(["vault"])), &projected, &denied), Ok(()));
    assert_eq!(
        ask(&chain, &token(json!([])), &projected, &denied),
        forbidden("audience \"\" not found in pod spec volume, system:node:n1 is not authorized to request tokens for this audience")
    );
    let api_access = with_pod(json!([{"name": "a", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}]));
    assert_eq!(ask(&chain, &token(json!([])), &api_access, &denied), Ok(()));
    assert_eq!(ask(&chain, &token(json!(["a", "b"])), &projected, &denied), forbidden("node may only request 0 or 1 audiences"));

    // Or a CSI driver's tokenRequests, through the pod's claim and its volume.
    let claimed = json!([{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]);
    let request = token(json!(["vault"]));
    let pending = Pending {
        operation: Operation::Create,
        info,
        subresource: Some("token"),
        namespace: Some("dev"),
        name: Some("default"),
        object: Some(&request),
        dry_run: false,
    };
    let mut lookups = with_pod(claimed);
    let claim = Lookup::Claim { namespace: "dev".into(), name: "data".into() };
    assert_eq!(chain.lookups_after(&pending, &user, &lookups), std::slice::from_ref(&claim));
    assert_eq!(ask(&chain, &request, &lookups, &denied), forbidden("error validating audience \"vault\": persistentvolumeclaim \"data\" not found"));
    lookups.push((claim, Some(Arc::new(json!({"metadata": {"name": "data"}, "spec": {"volumeName": "pv1"}})))));
    assert_eq!(chain.lookups_after(&pending, &user, &lookups), [Lookup::Volume("pv1".into())]);
    lookups.push((Lookup::Volume("pv1".into()), Some(Arc::new(json!({"metadata": {"name": "pv1"}, "spec": {"csi": {"driver": "secrets.example.com"}}})))));
    let driver = Lookup::CsiDriver("secrets.example.com".into());
    assert_eq!(chain.lookups_after(&pending, &user, &lookups), std::slice::from_ref(&driver));
    assert_eq!(
        ask(&chain, &request, &lookups, &denied),
        forbidden("error validating audience \"vault\": csidriver.storage.k8s.io \"secrets.example.com\" not found")
    );
    lookups.push((driver, Some(Arc::new(json!({"metadata": {"name": "secrets.example.com"}, "spec": {"tokenRequests": [{"audience": "vault"}]}})))));
    assert!(chain.lookups_after(&pending, &user, &lookups).is_empty());
    assert_eq!(ask(&chain, &request, &lookups, &denied), Ok(()));
    assert_eq!(
        ask(&chain, &token(json!(["other"])), &lookups, &denied),
        forbidden("audience \"other\" not found in pod spec volume, system:node:n1 is not authorized to request tokens for this audience")
    );
    // Another user's token requests are not followed.
    assert!(chain.lookups_after(&pending, &UserInfo { name: "bob".into(), ..UserInfo::default() }, &with_pod(json!([]))).is_empty());

    // An in-tree volume is its CSI driver, as kube migrates it.
    let in_tree = with_pod(json!([{"name": "f", "azureFile": {"secretName": "s", "shareName": "x"}}]));
    let request = token(json!(["files"]));
    let pending = Pending { object: Some(&request), ..pending };
    assert_eq!(chain.lookups_after(&pending, &user, &in_tree), [Lookup::CsiDriver("file.csi.azure.com".into())]);

    // The authorizer may let the node ask for an audience by name, for a service account.
    let granted =
        access(json!([{"verbs": ["request-serviceaccounts-token-audience"], "apiGroups": [""], "resources": ["other"], "resourceNames": ["default"]}]));
    assert_eq!(ask(&chain, &token(json!(["other"])), &projected, &granted), Ok(()));

    // Without kube's feature gate, any audience goes.
    let gates = crate::features::FeatureGates { service_account_node_audience_restriction: false, ..Default::default() };
    let ungated = Chain::from_flags(&owned(&["NodeRestriction"]), &[], &BTreeMap::new(), &no_files).unwrap().gated(&gates);
    assert_eq!(ask(&ungated, &token(json!(["other"])), &projected, &denied), Ok(()));
    assert!(ungated.lookups_after(&pending, &user, &in_tree).is_empty());
}

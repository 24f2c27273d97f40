//! The smaller plugins, each through the chain as the registry runs it: mutating, then
//! validating.

use serde_json::{Value, json};

use super::*;
use crate::catalog::Catalog;
use crate::resources::{Settings, catalog};

fn chain(enable: &[&str]) -> Chain {
    configured(enable, &[]).unwrap()
}

/// kube's default plugins and `enable`, with `configs` (by plugin name).
fn configured(enable: &[&str], configs: &[(&str, &str)]) -> Result<Chain, String> {
    let configs = configs.iter().map(|(name, config)| (name.to_string(), config.as_bytes().to_vec())).collect();
    Chain::from_flags(&enable.iter().map(|s| s.to_string()).collect::<Vec<_>>(), &[], &configs, &no_files)
}

/// A refusal as `<code> <message>`.
fn refusal(h: Halt) -> String {
    match h {
        Halt::Refused(e) => format!("{} {}", e.code, e.message),
        Halt::Ask(calls) => format!("asks {} reviews", calls.len()),
    }
}

/// Runs `op` on `obj` (a `resource` of `group`) through `chain`, with `found` what the lookups found.
fn run(
    chain: &Chain,
    cat: &Catalog,
    (group, resource): (&str, &str),
    op: Operation,
    obj: &mut Value,
    old: Option<&Value>,
    found: &Found,
) -> Result<(), String> {
    let info = &cat.resources().find(|r| r.info.group == group && r.info.resource == resource).unwrap().info;
    let user = UserInfo::default();
    let name = crate::meta::name(obj).to_string();
    let namespace = crate::meta::namespace(obj).to_string();
    let a = Attributes::of(op, info, &namespace, &name, &user, old, found);
    chain.admit(&a, Some(obj), &mut Rng::new(7)).map_err(refusal)?;
    chain.validate(&a, Some(obj), &mut 0, &Answers::new(), &mut Vec::new()).map_err(refusal)
}

/// The namespace `dev`, found, without labels.
fn dev() -> Option<(String, Option<Arc<Value>>)> {
    Some(("dev".into(), Some(Arc::new(json!({"metadata": {"name": "dev"}})))))
}

fn class(name: &str, created: &str, default: bool) -> Value {
    let mut c = json!({"metadata": {"name": name, "creationTimestamp": created}, "provisioner": "x", "allowVolumeExpansion": name == "fast"});
    if default {
        c["metadata"]["annotations"] = json!({"storageclass.kubernetes.io/is-default-class": "true", "ingressclass.kubernetes.io/is-default-class": "true"});
    }
    c
}

#[test]
fn claims_get_the_newest_default_class_and_the_protection_finalizer() {
    let (cat, chain) = (catalog(&Settings::default()), chain(&[]));
    let found = Found {
        storage_classes: vec![
            class("old", "2020-01-01T00:00:00Z", true),
            class("fast", "2024-01-01T00:00:00Z", true),
            class("slow", "2025-01-01T00:00:00Z", false),
        ],
        ..Found::default()
    };
    let mut claim = json!({"metadata": {"name": "data", "namespace": "dev"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}});
    run(&chain, &cat, ("", "persistentvolumeclaims"), Operation::Create, &mut claim, None, &found).unwrap();
    assert_eq!(claim["spec"]["storageClassName"], "fast");
    assert_eq!(claim["metadata"]["finalizers"], json!(["kubernetes.io/pvc-protection"]));
    // An empty class is a choice: no default.
    let mut none = json!({"metadata": {"name": "d2", "namespace": "dev"}, "spec": {"storageClassName": ""}});
    run(&chain, &cat, ("", "persistentvolumeclaims"), Operation::Create, &mut none, None, &found).unwrap();
    assert_eq!(none["spec"]["storageClassName"], "");
    let mut volume = json!({"metadata": {"name": "pv", "finalizers": ["a"]}, "spec": {}});
    run(&chain, &cat, ("", "persistentvolumes"), Operation::Create, &mut volume, None, &found).unwrap();
    assert_eq!(volume["metadata"]["finalizers"], json!(["a", "kubernetes.io/pv-protection"]));

    // Growing a claim: bound, and of a class that expands.
    let bound = |class: &str, size: &str| json!({"metadata": {"name": "data", "namespace": "dev"}, "spec": {"storageClassName": class, "resources": {"requests": {"storage": size}}}, "status": {"phase": "Bound"}});
    assert!(run(&chain, &cat, ("", "persistentvolumeclaims"), Operation::Update, &mut bound("fast", "2Gi"), Some(&bound("fast", "1Gi")), &found).is_ok());
    assert_eq!(
        run(&chain, &cat, ("", "persistentvolumeclaims"), Operation::Update, &mut bound("slow", "2Gi"), Some(&bound("slow", "1Gi")), &found).unwrap_err(),
        "403 persistentvolumeclaims \"data\" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"
    );
    let mut pending = bound("fast", "1Gi");
    pending["status"]["phase"] = json!("Pending");
    assert_eq!(
        run(&chain, &cat, ("", "persistentvolumeclaims"), Operation::Update, &mut bound("fast", "2Gi"), Some(&pending), &found).unwrap_err(),
        "403 persistentvolumeclaims \"data\" is forbidden: Only bound persistent volume claims can be expanded"
    );
}

#[test]
fn ingresses_get_the_default_class_unless_they_name_one() {
    let (cat, chain) = (catalog(&Settings::default()), chain(&[]));
    let found = Found { ingress_classes: vec![class("nginx", "2024-01-01T00:00:00Z", true)], ..Found::default() };
    let mut ingress = json!({"metadata": {"name": "web", "namespace": "dev"}, "spec": {}});
    run(&chain, &cat, ("networking.k8s.io", "ingresses"), Operation::Create, &mut ingress, None, &found).unwrap();
    assert_eq!(ingress["spec"]["ingressClassName"], "nginx");
    let mut annotated = json!({"metadata": {"name": "web", "namespace": "dev", "annotations": {"kubernetes.io/ingress.class": ""}}, "spec": {}});
    run(&chain, &cat, ("networking.k8s.io", "ingresses"), Operation::Create, &mut annotated, None, &found).unwrap();
    assert!(annotated["spec"].get("ingressClassName").is_none());
}

#[test]
fn a_runtime_class_gives_its_overhead_and_scheduling() {
    let (cat, chain) = (catalog(&Settings::default()), chain(&[]));
    let runtime = json!({"metadata": {"name": "gvisor"}, "handler": "runsc", "overhead": {"podFixed": {"cpu": "250m"}},
        "scheduling": {"nodeSelector": {"sandbox": "yes"}, "tolerations": [{"key": "sandbox", "operator": "Exists"}]}});
    let found = Found { runtime_class: Some(Some(Arc::new(runtime))), service_account: Some(Some(Arc::new(json!({})))), namespace: dev(), ..Found::default() };
    let pod = |extra: Value| {
        let mut p = json!({"metadata": {"name": "p", "namespace": "dev"}, "spec": {"runtimeClassName": "gvisor", "containers": [{"name": "c", "image": "x"}]}});
        for (k, v) in extra.as_object().unwrap() {
            p["spec"][k] = v.clone();
        }
        p
    };
    let mut p = pod(json!({"nodeSelector": {"zone": "a"}}));
    run(&chain, &cat, ("", "pods"), Operation::Create, &mut p, None, &found).unwrap();
    assert_eq!(p["spec"]["overhead"], json!({"cpu": "250m"}));
    assert_eq!(p["spec"]["nodeSelector"], json!({"zone": "a", "sandbox": "yes"}));
    assert!(p["spec"]["tolerations"].as_array().unwrap().iter().any(|t| t["key"] == "sandbox"));
    assert_eq!(
        run(&chain, &cat, ("", "pods"), Operation::Create, &mut pod(json!({"nodeSelector": {"sandbox": "no"}})), None, &found).unwrap_err(),
        "403 pods \"p\" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[sandbox] = yes; pod.spec.nodeSelector[sandbox] = no"
    );
    assert_eq!(
        run(&chain, &cat, ("", "pods"), Operation::Create, &mut pod(json!({"overhead": {"cpu": "1"}})), None, &found).unwrap_err(),
        "403 pods \"p\" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
    );
    let missing = Found { runtime_class: Some(None), ..found.clone() };
    assert_eq!(
        run(&chain, &cat, ("", "pods"), Operation::Create, &mut pod(json!({})), None, &missing).unwrap_err(),
        "403 pods \"p\" is forbidden: pod rejected: RuntimeClass \"gvisor\" not found"
    );
}

#[test]
fn always_pull_images_forces_every_containers_policy() {
    let (cat, chain) = (catalog(&Settings::default()), chain(&["AlwaysPullImages"]));
    let found = Found { service_account: Some(Some(Arc::new(json!({})))), namespace: dev(), ..Found::default() };
    let mut p = json!({"metadata": {"name": "p", "namespace": "dev"}, "spec": {"containers": [{"name": "c", "image": "x", "imagePullPolicy": "IfNotPresent"}],
        "initContainers": [{"name": "i", "image": "y"}]}});
    run(&chain, &cat, ("", "pods"), Operation::Create, &mut p, None, &found).unwrap();
    assert_eq!((&p["spec"]["containers"][0]["imagePullPolicy"], &p["spec"]["initContainers"][0]["imagePullPolicy"]), (&json!("Always"), &json!("Always")));
    // An update that brings no new image is left alone.
    let mut same = p.clone();
    same["spec"]["containers"][0]["imagePullPolicy"] = json!("Never");
    run(&chain, &cat, ("", "pods"), Operation::Update, &mut same, Some(&p), &found).unwrap();
    assert_eq!(same["spec"]["containers"][0]["imagePullPolicy"], "Never");
}

#[test]
fn extended_resources_are_tolerated_and_hard_anti_affinity_kept_to_the_node() {
    let (cat, chain) = (catalog(&Settings::default()), chain(&["ExtendedResourceToleration", "LimitPodHardAntiAffinityTopology"]));
    let found = Found { service_account: Some(Some(Arc::new(json!({})))), namespace: dev(), ..Found::default() };
    let requests = |r: Value| json!({"name": "c", "image": "x", "resources": {"requests": r}});
    let mut p = json!({"metadata": {"name": "p", "namespace": "dev"}, "spec": {
        "containers": [requests(json!({"cpu": "1", "example.com/gpu": "1", "hugepages-2Mi": "1Mi", "kubernetes.io/x": "1"}))],
        "initContainers": [requests(json!({"acme.io/fpga": "1", "example.com/gpu": "2"}))],
        "tolerations": [{"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}, {"key": "other", "operator": "Exists"}]}});
    run(&chain, &cat, ("", "pods"), Operation::Create, &mut p, None, &found).unwrap();
    assert_eq!(
        p["spec"]["tolerations"],
        // DefaultTolerationSeconds runs first, in kube's order.
        json!([{"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, {"key": "other", "operator": "Exists"},
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "acme.io/fpga", "operator": "Exists", "effect": "NoSchedule"}])
    );
    let anti = |key: &str| json!({"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}, "topologyKey": key}]});
    let mut spread = json!({"metadata": {"name": "s", "namespace": "dev"}, "spec": {"containers": [{"name": "c", "image": "x"}],
        "affinity": {"podAntiAffinity": anti("kubernetes.io/hostname")}}});
    run(&chain, &cat, ("", "pods"), Operation::Create, &mut spread, None, &found).unwrap();
    spread["spec"]["affinity"]["podAntiAffinity"] = anti("topology.kubernetes.io/zone");
    assert_eq!(
        run(&chain, &cat, ("", "pods"), Operation::Create, &mut spread, None, &found).unwrap_err(),
        "403 pods \"s\" is forbidden: affinity.PodAntiAffinity.RequiredDuringScheduling has TopologyKey topology.kubernetes.io/zone but only key kubernetes.io/hostname is allowed"
    );
}

/// The namespace `dev`, found, with these annotations.
fn annotated(annotations: Value) -> Option<(String, Option<Arc<Value>>)> {
    Some(("dev".into(), Some(Arc::new(json!({"metadata": {"name": "dev", "annotations": annotations}})))))
}

fn placed(selector: Value, tolerations: Value, resources: Value) -> Value {
    json!({"metadata": {"name": "p", "namespace": "dev"}, "spec": {"nodeSelector": selector, "tolerations": tolerations,
        "containers": [{"name": "c", "image": "x", "resources": resources}]}})
}

#[test]
fn pod_node_selector_merges_the_namespaces_selector_within_its_whitelist() {
    let cat = catalog(&Settings::default());
    let config = "podNodeSelectorPluginConfig: {clusterDefaultNodeSelector: 'tier=any', dev: 'env=dev,zone=a,tier=any', other: 'x'}";
    let chain = configured(&["PodNodeSelector"], &[("PodNodeSelector", config)]).unwrap();
    let run_in = |namespace: Option<(String, Option<Arc<Value>>)>, pod: &mut Value| {
        let found = Found { service_account: Some(Some(Arc::new(json!({})))), namespace, ..Found::default() };
        run(&chain, &cat, ("", "pods"), Operation::Create, pod, None, &found)
    };
    let mut p = placed(json!({"zone": "a"}), json!([]), json!({}));
    run_in(annotated(json!({"scheduler.alpha.kubernetes.io/node-selector": "env=dev"})), &mut p).unwrap();
    assert_eq!(p["spec"]["nodeSelector"], json!({"env": "dev", "zone": "a"}));
    // Without the annotation, the cluster's default; with it empty, nothing.
    let mut p = placed(json!({}), json!([]), json!({}));
    run_in(dev(), &mut p).unwrap();
    assert_eq!(p["spec"]["nodeSelector"], json!({"tier": "any"}));
    let mut p = placed(json!({}), json!([]), json!({}));
    run_in(annotated(json!({"scheduler.alpha.kubernetes.io/node-selector": ""})), &mut p).unwrap();
    assert_eq!(p["spec"].get("nodeSelector"), None);
    assert_eq!(
        run_in(annotated(json!({"scheduler.alpha.kubernetes.io/node-selector": "env=prod"})), &mut placed(json!({"env": "dev"}), json!([]), json!({})))
            .unwrap_err(),
        "403 pods \"p\" is forbidden: pod node label selector conflicts with its namespace node label selector"
    );
    assert_eq!(
        run_in(dev(), &mut placed(json!({"zone": "b"}), json!([]), json!({}))).unwrap_err(),
        "403 pods \"p\" is forbidden: pod node label selector labels conflict with its namespace whitelist"
    );
    assert_eq!(
        run_in(annotated(json!({"scheduler.alpha.kubernetes.io/node-selector": "env=dev,"})), &mut placed(json!({}), json!([]), json!({}))).unwrap_err(),
        "500 invalid selector: []"
    );
    // NamespaceLifecycle refuses first (404); without it, kube's 500.
    let without = Chain::from_flags(&["PodNodeSelector".into()], &["NamespaceLifecycle".into()], &Default::default(), &no_files).unwrap();
    let found = Found { service_account: Some(Some(Arc::new(json!({})))), namespace: Some(("dev".into(), None)), ..Found::default() };
    assert_eq!(
        run(&without, &cat, ("", "pods"), Operation::Create, &mut placed(json!({}), json!([]), json!({})), None, &found).unwrap_err(),
        "500 Internal error occurred: namespace dev does not exist"
    );
}

#[test]
fn pod_toleration_restriction_adds_defaults_and_keeps_pods_within_the_whitelist() {
    let cat = catalog(&Settings::default());
    let config = "apiVersion: podtolerationrestriction.admission.k8s.io/v1alpha1\nkind: Configuration\ndefault: [{key: team, operator: Exists}]\nwhitelist: [{key: team, operator: Exists}, {operator: Exists, effect: NoExecute}]";
    let chain = configured(&["PodTolerationRestriction"], &[("PodTolerationRestriction", config)]).unwrap();
    let run_in = |namespace: Option<(String, Option<Arc<Value>>)>, op: Operation, pod: &mut Value| {
        let found = Found { service_account: Some(Some(Arc::new(json!({})))), namespace, ..Found::default() };
        let old = pod.clone();
        run(&chain, &cat, ("", "pods"), op, pod, (op == Operation::Update).then_some(&old), &found)
    };
    let not_ready = json!([{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]);
    // The cluster's default; a pod that asks for memory tolerates its pressure, and the
    // whitelist must allow that.
    let mut p = placed(json!({}), json!([]), json!({}));
    run_in(dev(), Operation::Create, &mut p).unwrap();
    assert_eq!(p["spec"]["tolerations"].as_array().unwrap()[2..], [json!({"key": "team", "operator": "Exists"})]);
    let burstable = json!({"requests": {"memory": "1Gi"}});
    assert_eq!(
        run_in(dev(), Operation::Create, &mut placed(json!({}), json!([]), burstable.clone())).unwrap_err(),
        "500 pod tolerations (possibly merged with namespace default tolerations) conflict with its cluster whitelist"
    );
    // The namespace's annotations, in place of the configuration's.
    let mine = json!({"scheduler.alpha.kubernetes.io/defaultTolerations": r#"[{"Key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]"#,
        "scheduler.alpha.kubernetes.io/tolerationsWhitelist": ""});
    let mut p = placed(json!({}), json!([]), burstable.clone());
    run_in(annotated(mine), Operation::Create, &mut p).unwrap();
    let mut expected = not_ready.as_array().unwrap().clone();
    expected.extend([
        json!({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}),
    ]);
    assert_eq!(p["spec"]["tolerations"], Value::Array(expected));
    let narrow = json!({"scheduler.alpha.kubernetes.io/tolerationsWhitelist": r#"[{"key": "node.kubernetes.io/memory-pressure", "operator": "Exists"}]"#});
    let mut p = placed(json!({}), json!([{"key": "team", "operator": "Exists"}]), burstable.clone());
    assert_eq!(
        run_in(annotated(narrow), Operation::Update, &mut p).unwrap_err(),
        "500 pod tolerations (possibly merged with namespace default tolerations) conflict with its namespace whitelist"
    );
    for (bad, error) in [
        (r#"{"key": "x"}"#, "json: cannot unmarshal object into Go value of type []v1.Toleration"),
        ("[x]", "invalid character 'x' looking for beginning of value"),
        (r#"[{"operator": 1}]"#, "json: cannot unmarshal number into Go struct field Toleration.operator of type v1.TolerationOperator"),
        (r#"[{"tolerationSeconds": 1.5}]"#, "json: cannot unmarshal number 1.5 into Go struct field Toleration.tolerationSeconds of type int64"),
    ] {
        let bad = json!({"scheduler.alpha.kubernetes.io/defaultTolerations": bad});
        assert_eq!(run_in(annotated(bad), Operation::Create, &mut placed(json!({}), json!([]), json!({}))).unwrap_err(), format!("500 {error}"));
    }
    let seconds = "apiVersion: podtolerationrestriction.admission.k8s.io/v1alpha1\nkind: Configuration\ndefault: [{key: a, tolerationSeconds: '30'}]";
    assert_eq!(
        configured(&["PodTolerationRestriction"], &[("PodTolerationRestriction", seconds)]).unwrap_err(),
        "couldn't init admission plugin \"PodTolerationRestriction\": json: cannot unmarshal string into Go struct field Toleration.default.tolerationSeconds of type int64"
    );
    assert_eq!(
        run_in(Some(("dev".into(), None)), Operation::Create, &mut placed(json!({}), json!([]), json!({}))).unwrap_err(),
        "404 namespaces \"dev\" not found"
    );
    let invalid = "apiVersion: podtolerationrestriction.admission.k8s.io/v1alpha1\nkind: Configuration\ndefault: [{key: a, operator: Foo}, {key: 'b c', operator: Exists}]";
    assert_eq!(
        configured(&["PodTolerationRestriction"], &[("PodTolerationRestriction", invalid)]).unwrap_err(),
        "couldn't init admission plugin \"PodTolerationRestriction\": invalid config: [podtolerationrestriction.default[0].operator: Unsupported value: \"Foo\": supported values: \"Equal\", \"Exists\" podtolerationrestriction.default[1].key: Invalid value: \"b c\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')]"
    );
}

#[test]
fn always_deny_refuses_every_write_and_always_admit_none() {
    let cat = catalog(&Settings::default());
    let mut cm = json!({"metadata": {"name": "c", "namespace": "dev"}});
    let found = Found { namespace: dev(), ..Found::default() };
    run(&chain(&["AlwaysAdmit"]), &cat, ("", "configmaps"), Operation::Create, &mut cm, None, &found).unwrap();
    assert_eq!(
        run(&chain(&["AlwaysDeny"]), &cat, ("", "configmaps"), Operation::Create, &mut cm, None, &found).unwrap_err(),
        "403 configmaps \"c\" is forbidden: admission control is denying all modifications"
    );
}

/// A CSR for `signer` whose request asks for organization `org`.
fn csr(signer: &str, org: &str) -> Value {
    use base64::Engine;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(rcgen::DnType::OrganizationName, org);
    params.distinguished_name.push(rcgen::DnType::CommonName, "bob");
    let request = params.serialize_request(&rcgen::KeyPair::generate().unwrap()).unwrap().pem().unwrap();
    json!({"metadata": {"name": "req"}, "spec": {"signerName": signer, "request": base64::engine::general_purpose::STANDARD.encode(request), "usages": ["client auth"]}})
}

#[test]
fn certificate_requests_are_held_to_their_signers() {
    use crate::authz::rbac::{Kind, Policy};
    use crate::authz::{Access, Asked, Authorizer, Snapshot};
    let cat = catalog(&Settings::default());
    let chain = chain(&[]);
    let info = &cat.get("certificates.k8s.io", "v1", "certificatesigningrequests").unwrap().info;
    let mut rbac = Policy::default();
    rbac.put(
        Kind::ClusterRole,
        &json!({"metadata": {"name": "approver"}, "rules": [{"verbs": ["approve"], "apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "resourceNames": ["example.com/*"]}]}),
    );
    rbac.put(
        Kind::ClusterRoleBinding,
        &json!({"metadata": {"name": "bob"}, "roleRef": {"kind": "ClusterRole", "name": "approver"}, "subjects": [{"kind": "User", "name": "bob"}]}),
    );
    let access = Access {
        authorizer: std::sync::Arc::new(Authorizer::parse("RBAC").unwrap()),
        state: Snapshot { rbac, ..Default::default() },
        asked: Asked::default(),
        now: jiff::Timestamp::UNIX_EPOCH,
    };
    let bob = UserInfo { name: "bob".into(), ..UserInfo::default() };
    let found = Found::default();
    let check = |op: Operation, subresource: Option<&str>, obj: &Value, old: Option<&Value>| {
        let a = Attributes { subresource, access: Some(&access), ..Attributes::of(op, info, "", "req", &bob, old, &found) };
        chain.validate(&a, Some(&mut obj.clone()), &mut 0, &Answers::new(), &mut Vec::new()).map_err(refusal)
    };
    // Approval needs `approve` on the signer, or on its domain.
    let theirs = csr("example.com/serving", "dev");
    assert!(check(Operation::Update, Some("approval"), &theirs, Some(&theirs)).is_ok());
    let client = csr("kubernetes.io/kube-apiserver-client", "dev");
    assert_eq!(
        check(Operation::Update, Some("approval"), &client, Some(&client)).unwrap_err(),
        "403 certificatesigningrequests.certificates.k8s.io \"req\" is forbidden: user not permitted to approve requests with signerName \"kubernetes.io/kube-apiserver-client\""
    );
    // Issuing a certificate needs `sign`; a status update that changes neither is let be.
    let mut issued = theirs.clone();
    issued["status"] = json!({"certificate": "Y2VydA=="});
    assert_eq!(
        check(Operation::Update, Some("status"), &issued, Some(&theirs)).unwrap_err(),
        "403 certificatesigningrequests.certificates.k8s.io \"req\" is forbidden: user not permitted to sign requests with signerName \"example.com/serving\""
    );
    assert!(check(Operation::Update, Some("status"), &theirs, Some(&theirs)).is_ok());
    // No system:masters certificates from the API server's client signer.
    assert!(check(Operation::Create, None, &client, None).is_ok());
    assert_eq!(
        check(Operation::Create, None, &csr("kubernetes.io/kube-apiserver-client", "system:masters"), None).unwrap_err(),
        "403 certificatesigningrequests.certificates.k8s.io \"req\" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"
    );
    assert!(check(Operation::Create, None, &csr("example.com/serving", "system:masters"), None).is_ok());
}

#[test]
fn node_restriction_keeps_kubelets_to_their_own_node() {
    let cat = catalog(&Settings::default());
    let chain = chain(&["NodeRestriction"]);
    let kubelet = UserInfo { name: "system:node:n1".into(), groups: vec!["system:nodes".into()], ..UserInfo::default() };
    let node = json!({"metadata": {"name": "n1", "uid": "u1", "labels": {"kubernetes.io/hostname": "n1"}}});
    let check = |(group, resource): (&str, &str), sub: Option<&str>, op: Operation, obj: &mut Value, old: Option<&Value>, found: &Found| {
        let info = &cat.resources().find(|r| r.info.group == group && r.info.resource == resource).unwrap().info;
        let name = crate::meta::name(obj).to_string();
        let ns = crate::meta::namespace(obj).to_string();
        let a = Attributes { subresource: sub, ..Attributes::of(op, info, &ns, &name, &kubelet, old, found) };
        chain.admit(&a, Some(obj), &mut Rng::new(1)).map_err(refusal)
    };
    let found = Found { node: Some(Some(Arc::new(node.clone()))), service_account: Some(Some(Arc::new(json!({})))), ..Found::default() };
    let mirror = |owner_uid: &str, volumes: Value| {
        json!({"metadata": {"name": "static", "namespace": "kube-system", "annotations": {"kubernetes.io/config.mirror": "x"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": owner_uid, "controller": true}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}], "volumes": volumes}})
    };
    assert!(check(("", "pods"), None, Operation::Create, &mut mirror("u1", json!([{"name": "v", "emptyDir": {}}])), None, &found).is_ok());
    assert_eq!(
        check(("", "pods"), None, Operation::Create, &mut mirror("u1", json!([{"name": "v", "secret": {"secretName": "s"}}])), None, &found).unwrap_err(),
        "403 pods \"static\" is forbidden: node \"n1\" can not create pods that reference secrets"
    );
    assert_eq!(
        check(("", "pods"), None, Operation::Create, &mut mirror("u2", json!([])), None, &found).unwrap_err(),
        "403 pods \"static\" is forbidden: node n1 UID mismatch: expected u2 got u1"
    );
    assert_eq!(check(("", "pods"), None, Operation::Create, &mut mirror("u1", json!([])), None, &Found::default()).unwrap_err(), "404 node \"n1\" not found");
    let mut plain = json!({"metadata": {"name": "web", "namespace": "dev"}, "spec": {"nodeName": "n1"}});
    assert_eq!(
        check(("", "pods"), None, Operation::Create, &mut plain, None, &found).unwrap_err(),
        "403 pods \"web\" is forbidden: pod does not have \"kubernetes.io/config.mirror\" annotation, node \"n1\" can only create mirror pods"
    );

    // Its own Node: the kubelet's labels, no taints.
    let mut relabelled = node.clone();
    relabelled["metadata"]["labels"] =
        json!({"kubernetes.io/hostname": "n1", "node.kubernetes.io/exclude-from-external-load-balancers": "", "node-role.kubernetes.io/master": ""});
    assert_eq!(
        check(("", "nodes"), None, Operation::Update, &mut relabelled, Some(&node), &found).unwrap_err(),
        "403 nodes \"n1\" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/master"
    );
    let mut tainted = node.clone();
    tainted["spec"] = json!({"taints": [{"key": "k", "effect": "NoSchedule"}]});
    assert_eq!(
        check(("", "nodes"), None, Operation::Update, &mut tainted, Some(&node), &found).unwrap_err(),
        "403 nodes \"n1\" is forbidden: node \"n1\" is not allowed to modify taints"
    );
    let mut other = json!({"metadata": {"name": "n2"}});
    assert_eq!(
        check(("", "nodes"), None, Operation::Create, &mut other, None, &found).unwrap_err(),
        "403 nodes \"n2\" is forbidden: node \"n1\" is not allowed to modify node \"n2\""
    );
    let mut lease = json!({"metadata": {"name": "n1", "namespace": "default"}});
    assert_eq!(
        check(("coordination.k8s.io", "leases"), None, Operation::Create, &mut lease, None, &found).unwrap_err(),
        "403 leases.coordination.k8s.io \"n1\" is forbidden: can only access leases in the \"kube-node-lease\" system namespace"
    );
    // A name to be generated is not its own.
    let mut generated = json!({"metadata": {"generateName": "n1", "namespace": "kube-node-lease"}});
    assert_eq!(
        check(("coordination.k8s.io", "leases"), None, Operation::Create, &mut generated, None, &found).unwrap_err(),
        "403 leases.coordination.k8s.io \"Unknown\" is forbidden: can only access node lease with the same name as the requesting node"
    );
    // Configmaps are not its business here (the Node authorizer's).
    assert!(check(("", "configmaps"), None, Operation::Create, &mut json!({"metadata": {"name": "c", "namespace": "dev"}}), None, &found).is_ok());

    // It evicts only the pods bound to it, which it must find.
    let bound = |node: &str| Found { pod: Some(Some(Arc::new(json!({"metadata": {"name": "web"}, "spec": {"nodeName": node}})))), ..Found::default() };
    let mut eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web", "namespace": "dev"}});
    assert!(check(("", "pods"), Some("eviction"), Operation::Create, &mut eviction, None, &bound("n1")).is_ok());
    assert_eq!(
        check(("", "pods"), Some("eviction"), Operation::Create, &mut eviction, None, &bound("n2")).unwrap_err(),
        "403 pods \"web\" is forbidden: node n1 can only evict pods with spec.nodeName set to itself"
    );
    let gone = Found { pod: Some(None), ..Found::default() };
    assert_eq!(check(("", "pods"), Some("eviction"), Operation::Create, &mut eviction, None, &gone).unwrap_err(), "404 pod \"web\" not found");
    let pending = Pending {
        operation: Operation::Create,
        info: &cat.get("", "v1", "pods").unwrap().info,
        subresource: Some("eviction"),
        namespace: Some("dev"),
        name: Some("web"),
        object: Some(&eviction),
        dry_run: false,
    };
    assert!(chain.lookups(&pending).contains(&Lookup::Pod { namespace: "dev".into(), name: "web".into() }));

    // It asks only tokens bound to a pod of its own, by the pod's uid.
    let running = |node: &str| {
        let pod = json!({"metadata": {"name": "web", "uid": "p1"}, "spec": {"nodeName": node}});
        Found { pod: Some(Some(Arc::new(pod))), ..Found::default() }
    };
    let token = |bound: Value| json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {"name": "default", "namespace": "dev"}, "spec": {"boundObjectRef": bound}});
    let mut for_web = token(json!({"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "p1"}));
    assert!(check(("", "serviceaccounts"), Some("token"), Operation::Create, &mut for_web, None, &running("n1")).is_ok());
    let refused = |obj: &mut Value, found: &Found| check(("", "serviceaccounts"), Some("token"), Operation::Create, obj, None, found).unwrap_err();
    assert_eq!(
        refused(&mut for_web, &running("n2")),
        "403 serviceaccounts \"default\" is forbidden: node requested token bound to a pod scheduled on a different node"
    );
    assert_eq!(refused(&mut token(Value::Null), &running("n1")), "403 serviceaccounts \"default\" is forbidden: node requested token not bound to a pod");
    assert_eq!(
        refused(&mut token(json!({"apiVersion": "v1", "kind": "Pod", "name": "web"})), &running("n1")),
        "403 serviceaccounts \"default\" is forbidden: node requested token with a pod binding without a uid"
    );
    assert_eq!(
        refused(&mut token(json!({"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "old"})), &running("n1")),
        "403 serviceaccounts \"default\" is forbidden: the UID in the bound object reference (old) does not match the UID in record. The object might have been deleted and then recreated"
    );
    assert_eq!(refused(&mut for_web, &gone), "404 pod \"web\" not found");
    let pending = Pending {
        info: &cat.get("", "v1", "serviceaccounts").unwrap().info,
        subresource: Some("token"),
        name: Some("default"),
        object: Some(&for_web),
        ..pending
    };
    assert!(chain.lookups(&pending).contains(&Lookup::Pod { namespace: "dev".into(), name: "web".into() }));
}

//! The admission chain as kube-apiserver's flags choose it: kube's default plugins, others
//! turned off with `--disable-admission-plugins`, and kube's refusals of flags it does not take.

use kapi_tests::{Kapi, refused_at_start};

const POD: &str = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}"#;

#[test]
fn the_default_plugins_run_and_the_flags_turn_them_off() {
    let k = Kapi::start();
    k.kubectl_in(&["create", "-f", "-"], POD);
    let pod = k.json(&["get", "pod", "web", "-o", "json"]);
    assert_eq!(pod["spec"]["serviceAccountName"], "default", "ServiceAccount");
    assert!(pod["spec"]["volumes"][0]["name"].as_str().unwrap().starts_with("kube-api-access-"), "{pod}");
    assert_eq!(pod["spec"]["tolerations"].as_array().unwrap().len(), 2, "DefaultTolerationSeconds");
    // NamespaceLifecycle: no create in a namespace that does not exist, kube's 404.
    let out = k.kubectl_with_input(&["create", "-n", "nowhere", "-f", "-"], POD);
    assert!(String::from_utf8_lossy(&out.stderr).contains("namespaces \"nowhere\" not found"), "{out:?}");
    let out = k.kubectl(&["delete", "namespace", "kube-system"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("namespaces \"kube-system\" is forbidden: this namespace may not be deleted"), "{out:?}");

    // (PodSecurity, like kube's, refuses a pod whose namespace it cannot find.)
    let k = Kapi::start_with(&["--disable-admission-plugins=ServiceAccount,DefaultTolerationSeconds,NamespaceLifecycle,PodSecurity"]);
    k.kubectl_in(&["create", "-f", "-"], POD);
    let pod = k.json(&["get", "pod", "web", "-o", "json"]);
    assert!(pod["spec"]["volumes"].is_null() && pod["spec"]["tolerations"].is_null(), "{pod}");
    k.kubectl_in(&["create", "-n", "nowhere", "-f", "-"], POD);
}

#[test]
fn flags_kube_refuses_are_refused() {
    assert!(refused_at_start(&["--enable-admission-plugins=Bogus"]).contains("enable-admission-plugins plugin \"Bogus\" is unknown"));
    assert!(
        refused_at_start(&["--enable-admission-plugins=Priority", "--disable-admission-plugins=Priority"])
            .contains("[Priority] in enable-admission-plugins and disable-admission-plugins overlapped")
    );
    assert!(
        refused_at_start(&["--admission-control=Priority", "--enable-admission-plugins=ServiceAccount"])
            .contains("admission-control and enable-admission-plugins/disable-admission-plugins flags are mutually exclusive")
    );
    assert!(
        refused_at_start(&["--enable-admission-plugins=ImagePolicyWebhook"])
            .contains("couldn't init admission plugin \"ImagePolicyWebhook\": no config specified")
    );
    assert!(
        refused_at_start(&["--enable-admission-plugins=EventRateLimit"])
            .contains("couldn't init admission plugin \"EventRateLimit\": limits: Invalid value: []eventratelimit.Limit(nil): must not be empty")
    );
}

#[test]
fn namespace_auto_provision_creates_the_namespace_a_create_is_in() {
    let k = Kapi::start_with(&["--enable-admission-plugins=NamespaceAutoProvision"]);
    k.ok(&["create", "configmap", "c", "-n", "team", "--from-literal=k=v"]);
    let ns = k.json(&["get", "namespace", "team", "-o", "json"]);
    assert_eq!(ns["status"]["phase"], "Active", "{ns}");
    // A dry run creates nothing, so NamespaceLifecycle finds no namespace.
    let refused = k.fails(&["create", "configmap", "c", "-n", "dry", "--dry-run=server"]);
    assert!(refused.contains("namespaces \"dry\" not found"), "{refused}");
}

#[test]
fn event_rate_limit_refuses_events_past_a_namespaces_burst() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("admission.yaml"),
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: EventRateLimit\n  configuration:\n    \
         apiVersion: eventratelimit.admission.k8s.io/v1alpha1\n    kind: Configuration\n    limits:\n    - {type: Namespace, qps: 1, burst: 2}\n",
    )
    .unwrap();
    let config = format!("--admission-control-config-file={}", dir.path().join("admission.yaml").display());
    let k = Kapi::start_with(&["--enable-admission-plugins=EventRateLimit", &config]);
    k.ok(&["create", "namespace", "dev"]);
    let event_in = |ns: &str, name: &str| {
        format!(
            r#"{{"apiVersion": "v1", "kind": "Event", "metadata": {{"name": "{name}", "namespace": "{ns}"}},
            "involvedObject": {{"kind": "Pod", "namespace": "{ns}", "name": "web"}}, "reason": "Test", "message": "m"}}"#
        )
    };
    let event = |name: &str| event_in("dev", name);
    // The burst goes at once (the clock is real, so a third may find a token come back).
    k.kubectl_in(&["create", "-f", "-"], &event("e1"));
    k.kubectl_in(&["create", "-f", "-"], &event("e2"));
    let refused = (3..30).find_map(|i| {
        let out = k.kubectl_with_input(&["create", "-f", "-"], &event(&format!("e{i}")));
        (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
    });
    let refused = refused.expect("an event past the burst is refused");
    assert!(refused.contains("Error from server (TooManyRequests)"), "{refused}");
    assert!(refused.contains("Too many requests: limit reached on type Namespace for key dev"), "{refused}");
    // Other namespaces and other kinds are not limited.
    k.ok(&["create", "configmap", "c", "-n", "dev"]);
    k.kubectl_in(&["create", "-f", "-"], &event_in("default", "d1"));
}

#[test]
fn namespaces_place_their_pods_and_owner_references_take_permissions() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("admission.yaml"),
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n\
         - name: PodNodeSelector\n  configuration:\n    podNodeSelectorPluginConfig: {clusterDefaultNodeSelector: tier=any}\n\
         - name: PodTolerationRestriction\n  path: tolerations.yaml\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("tolerations.yaml"),
        "apiVersion: podtolerationrestriction.admission.k8s.io/v1alpha1\nkind: Configuration\ndefault: [{key: team, operator: Exists}]\n",
    )
    .unwrap();
    let config = format!("--admission-control-config-file={}", dir.path().join("admission.yaml").display());
    let plugins = "--enable-admission-plugins=PodNodeSelector,PodTolerationRestriction,OwnerReferencesPermissionEnforcement";
    let k = Kapi::start_with(&[plugins, &config]);
    k.kubectl_in(
        &["create", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dev", "annotations": {
            "scheduler.alpha.kubernetes.io/node-selector": "env=dev",
            "scheduler.alpha.kubernetes.io/defaultTolerations": "[{\"key\": \"gpu\", \"operator\": \"Exists\", \"effect\": \"NoSchedule\"}]"}}}"#,
    );
    k.kubectl_in(&["create", "-n", "dev", "-f", "-"], POD);
    let pod = k.json(&["get", "pod", "web", "-n", "dev", "-o", "json"]);
    assert_eq!(pod["spec"]["nodeSelector"], serde_json::json!({"env": "dev"}), "{pod}");
    assert!(pod["spec"]["tolerations"].as_array().unwrap().iter().any(|t| t["key"] == "gpu"), "{pod}");
    // Elsewhere, the configuration's.
    k.kubectl_in(&["create", "-f", "-"], POD);
    let pod = k.json(&["get", "pod", "web", "-o", "json"]);
    assert_eq!(pod["spec"]["nodeSelector"], serde_json::json!({"tier": "any"}), "{pod}");
    assert!(pod["spec"]["tolerations"].as_array().unwrap().iter().any(|t| t["key"] == "team"), "{pod}");
    let elsewhere = POD.replace(r#""spec": {"#, r#""spec": {"nodeSelector": {"env": "prod"}, "#).replace("\"web\"", "\"api\"");
    let out = k.kubectl_with_input(&["create", "-n", "dev", "-f", "-"], &elsewhere);
    let refused = String::from_utf8_lossy(&out.stderr);
    assert!(refused.contains("pods \"api\" is forbidden: pod node label selector conflicts with its namespace node label selector"), "{refused}");

    // bob may create configmaps, not make them block their owner's deletion.
    k.ok(&["create", "role", "configmaps", "--verb=get,create", "--resource=configmaps"]);
    k.ok(&["create", "rolebinding", "bob", "--role=configmaps", "--user=bob"]);
    let owned = |block: bool| {
        format!(
            r#"{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "c{block}", "ownerReferences": [{{"apiVersion": "v1",
            "kind": "Pod", "name": "web", "uid": "{}", "blockOwnerDeletion": {block}}}]}}}}"#,
            pod["metadata"]["uid"].as_str().unwrap()
        )
    };
    let out = k.kubectl_with_input(&["create", "-f", "-", "--as=bob"], &owned(true));
    let refused = String::from_utf8_lossy(&out.stderr);
    assert!(
        refused
            .contains("configmaps \"ctrue\" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on"),
        "{refused}"
    );
    let out = k.kubectl_with_input(&["create", "-f", "-", "--as=bob"], &owned(false));
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn a_limit_range_defaults_and_bounds_what_containers_and_claims_ask_for() {
    let k = Kapi::start();
    k.ok(&["create", "namespace", "dev"]);
    k.kubectl_in(
        &["create", "-n", "dev", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits"}, "spec": {"limits": [
            {"type": "Container", "max": {"cpu": "1"}, "defaultRequest": {"cpu": "100m"}},
            {"type": "PersistentVolumeClaim", "max": {"storage": "5Gi"}}]}}"#,
    );
    k.kubectl_in(&["create", "-n", "dev", "-f", "-"], POD);
    let pod = k.json(&["get", "pod", "web", "-n", "dev", "-o", "json"]);
    // The LimitRange's default is its max (kube's defaulting of LimitRanges), its default
    // request what it says.
    assert_eq!(pod["spec"]["containers"][0]["resources"], serde_json::json!({"limits": {"cpu": "1"}, "requests": {"cpu": "100m"}}));
    assert_eq!(pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"], "LimitRanger plugin set: cpu request for container c; cpu limit for container c");
    let big = POD.replace(r#""name": "web""#, r#""name": "big""#).replace(r#""image": "nginx""#, r#""image": "nginx", "resources": {"limits": {"cpu": "2"}}"#);
    let out = k.kubectl_with_input(&["create", "-n", "dev", "-f", "-"], &big);
    assert!(String::from_utf8_lossy(&out.stderr).contains("pods \"big\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"), "{out:?}");
    let claim = r#"{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}}"#;
    let out = k.kubectl_with_input(&["create", "-n", "dev", "-f", "-"], claim);
    assert!(String::from_utf8_lossy(&out.stderr).contains("maximum storage usage per PersistentVolumeClaim is 5Gi, but request is 10Gi"), "{out:?}");
}

#[test]
fn claims_get_the_default_class_and_pods_their_runtime_class() {
    let k = Kapi::start();
    k.kubectl_in(
        &["create", "-f", "-"],
        r#"{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "example.com/disk"}"#,
    );
    k.kubectl_in(
        &["create", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}"#,
    );
    let claim = k.json(&["get", "pvc", "data", "-o", "json"]);
    assert_eq!(claim["spec"]["storageClassName"], "fast", "DefaultStorageClass");
    assert_eq!(claim["metadata"]["finalizers"], serde_json::json!(["kubernetes.io/pvc-protection"]), "StorageObjectInUseProtection");
    // PersistentVolumeClaimResize: a bound claim grows only where its class allows it.
    k.ok(&["patch", "pvc", "data", "--subresource=status", "-p", r#"{"status": {"phase": "Bound"}}"#]);
    let out = k.kubectl(&["patch", "pvc", "data", "-p", r#"{"spec": {"resources": {"requests": {"storage": "2Gi"}}}}"#]);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"),
        "{out:?}"
    );
    let sandboxed = POD.replace(r#""spec": {"#, r#""spec": {"runtimeClassName": "gvisor", "#);
    let out = k.kubectl_with_input(&["create", "-f", "-"], &sandboxed);
    assert!(String::from_utf8_lossy(&out.stderr).contains("pods \"web\" is forbidden: pod rejected: RuntimeClass \"gvisor\" not found"), "{out:?}");
    k.kubectl_in(
        &["create", "-f", "-"],
        r#"{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "gvisor"}, "handler": "runsc", "overhead": {"podFixed": {"memory": "64Mi"}}}"#,
    );
    k.kubectl_in(&["create", "-f", "-"], &sandboxed);
    assert_eq!(k.json(&["get", "pod", "web", "-o", "json"])["spec"]["overhead"], serde_json::json!({"memory": "64Mi"}), "RuntimeClass");
}

#[test]
fn pod_security_enforces_and_warns_by_namespace_labels() {
    let dir = tempfile::tempdir().unwrap();
    // The admission configuration names a relative file, read from the configuration's folder.
    std::fs::write(
        dir.path().join("admission.yaml"),
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  path: pod-security.yaml\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("pod-security.yaml"),
        "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\nexemptions:\n  namespaces: [trusted]\n",
    )
    .unwrap();
    let config = format!("--admission-control-config-file={}", dir.path().join("admission.yaml").display());
    let k = Kapi::start_with(&[&config]);
    k.ok(&["create", "namespace", "dev"]);
    k.kubectl_in(&["create", "-n", "dev", "-f", "-"], POD);
    // Tightening the namespace warns of the pod it has.
    let out = k.kubectl(&["label", "namespace", "dev", "pod-security.kubernetes.io/enforce=restricted"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{out:?}");
    assert!(stderr.contains("Warning: existing pods in namespace \"dev\" violate the new PodSecurity enforce level \"restricted:latest\""), "{stderr}");
    assert!(stderr.contains("Warning: web: allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile"), "{stderr}");

    let other = POD.replace(r#""name": "web""#, r#""name": "other""#);
    let out = k.kubectl_with_input(&["create", "-n", "dev", "-f", "-"], &other);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Error from server (Forbidden): error when creating \"STDIN\": pods \"other\" is forbidden: violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false)"),
        "{stderr}"
    );
    // A workload is warned of, not refused; a bad label is refused.
    let out = k.kubectl(&["create", "deployment", "-n", "dev", "web", "--image=nginx"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Warning: would violate PodSecurity \"restricted:latest\""), "{out:?}");
    let bad = k.fails(&["label", "namespace", "dev", "--overwrite", "pod-security.kubernetes.io/warn=strict"]);
    assert!(
        bad.contains("metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: \"strict\": must be one of privileged, baseline, restricted"),
        "{bad}"
    );

    // The exempt namespace takes any pod, and says so of its label.
    k.ok(&["create", "namespace", "trusted"]);
    let out = k.kubectl(&["label", "namespace", "trusted", "pod-security.kubernetes.io/enforce=restricted"]);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("namespace \"trusted\" is exempt from Pod Security, and the policy (enforce=restricted:latest) will be ignored"),
        "{out:?}"
    );
    k.kubectl_in(&["create", "-n", "trusted", "-f", "-"], POD);

    let bad_config = dir.path().join("bad.yaml");
    std::fs::write(&bad_config, "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  configuration:\n    apiVersion: pod-security.admission.config.k8s.io/v1\n    kind: PodSecurityConfiguration\n    defaults: {enforce: strict}\n").unwrap();
    let refused = refused_at_start(&[&format!("--admission-control-config-file={}", bad_config.display())]);
    assert!(refused.contains("PodSecurity configuration error: enforce: must be one of privileged, baseline, restricted"), "{refused}");
}

/// A CertificateSigningRequest for `signer` of a key and subject openssl makes in `dir`.
fn csr(dir: &std::path::Path, name: &str, signer: &str, subject: &str) -> String {
    use base64::Engine;
    let out = dir.join(format!("{name}.csr"));
    let made = std::process::Command::new("openssl")
        .args(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", subject, "-keyout"])
        .arg(dir.join(format!("{name}.key")))
        .arg("-out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let request = base64::engine::general_purpose::STANDARD.encode(std::fs::read(out).unwrap());
    format!(
        r#"{{"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {{"name": "{name}"}}, "spec": {{"signerName": "{signer}", "request": "{request}", "usages": ["client auth"]}}}}"#
    )
}

#[test]
fn certificate_requests_are_approved_only_by_who_may_approve_for_their_signer() {
    let dir = tempfile::tempdir().unwrap();
    let k = Kapi::start();
    k.kubectl_in(&["create", "-f", "-"], &csr(dir.path(), "web", "example.com/serving", "/CN=web"));
    k.ok(&["create", "clusterrole", "csr-approver", "--verb=get,list", "--resource=certificatesigningrequests"]);
    k.kubectl_in(
        &["apply", "-f", "-"],
        r#"{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "csr-approval"},
            "rules": [{"verbs": ["update"], "apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests/approval"]}]}"#,
    );
    k.ok(&["create", "clusterrolebinding", "bob-reads", "--clusterrole=csr-approver", "--user=bob"]);
    k.ok(&["create", "clusterrolebinding", "bob-approves", "--clusterrole=csr-approval", "--user=bob"]);
    let refused = k.fails(&["certificate", "approve", "web", "--as=bob"]);
    assert!(
        refused.contains("certificatesigningrequests.certificates.k8s.io \"web\" is forbidden: user not permitted to approve requests with signerName \"example.com/serving\""),
        "{refused}"
    );
    // `approve` on every signer of the domain lets him.
    k.kubectl_in(
        &["apply", "-f", "-"],
        r#"{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "csr-approval"},
            "rules": [{"verbs": ["update"], "apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests/approval"]},
                      {"verbs": ["approve"], "apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "resourceNames": ["example.com/*"]}]}"#,
    );
    k.ok(&["certificate", "approve", "web", "--as=bob"]);
    let approved = k.json(&["get", "csr", "web", "-o", "json"]);
    assert_eq!(approved["status"]["conditions"][0]["type"], "Approved", "{approved}");

    // Nobody gets a system:masters certificate from the API server's client signer.
    let masters = csr(dir.path(), "root", "kubernetes.io/kube-apiserver-client", "/O=system:masters/CN=root");
    let out = k.kubectl_with_input(&["create", "-f", "-"], &masters);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("\"root\" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"),
        "{out:?}"
    );
}

#[test]
fn node_restriction_keeps_a_kubelet_to_its_own_labels_node_and_token_audiences() {
    let k = Kapi::start_with(&["--enable-admission-plugins=NodeRestriction"]);
    for node in ["n1", "n2"] {
        k.kubectl_in(&["create", "-f", "-"], &format!(r#"{{"apiVersion": "v1", "kind": "Node", "metadata": {{"name": "{node}"}}}}"#));
    }
    let as_kubelet = ["--as=system:node:n1", "--as-group=system:nodes"];
    let kubelet = |args: &[&str]| k.kubectl(&[args, &as_kubelet[..]].concat());
    let out = kubelet(&["label", "node", "n1", "node.kubernetes.io/pool=a"]);
    assert!(out.status.success(), "{out:?}");
    let out = kubelet(&["label", "node", "n1", "node-role.kubernetes.io/control-plane="]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nodes \"n1\" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/control-plane"),
        "{out:?}"
    );
    let out = kubelet(&["taint", "node", "n1", "k=v:NoSchedule"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("node \"n1\" is not allowed to modify taints"), "{out:?}");
    let out = kubelet(&["label", "node", "n2", "node.kubernetes.io/pool=a"]);
    assert!(!out.status.success(), "{out:?}");

    // Its pod's tokens only for the audiences the pod's volumes name.
    k.ok(&["create", "serviceaccount", "robot"]);
    let pod = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}, "spec": {"nodeName": "n1", "serviceAccountName": "robot",
        "containers": [{"name": "c", "image": "nginx"}],
        "volumes": [{"name": "t", "projected": {"sources": [{"serviceAccountToken": {"audience": "vault", "path": "t"}}]}}]}}"#;
    k.kubectl_in(&["create", "-f", "-"], pod);
    let uid = k.json(&["get", "pod", "web", "-o", "json"])["metadata"]["uid"].as_str().unwrap().to_string();
    let token = |audience: &str| {
        kubelet(&[
            "create",
            "token",
            "robot",
            "--bound-object-kind=Pod",
            "--bound-object-name=web",
            &format!("--bound-object-uid={uid}"),
            &format!("--audience={audience}"),
        ])
    };
    let out = token("vault");
    assert!(out.status.success(), "{out:?}");
    let out = token("other");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "serviceaccounts \"robot\" is forbidden: audience \"other\" not found in pod spec volume, system:node:n1 is not authorized to request tokens for this audience"
        ),
        "{out:?}"
    );
}

#[test]
fn a_resource_quota_is_charged_atomically_and_given_back_by_its_controller() {
    let k = Kapi::start();
    k.ok(&["create", "namespace", "q"]);
    k.ok(&["create", "quota", "compute", "-n", "q", "--hard=pods=2,requests.cpu=1,count/secrets=3"]);
    let used = |what: &str| k.json(&["get", "quota", "compute", "-n", "q", "-o", "json"])["status"]["used"][what].clone();
    assert!(kapi_tests::eventually(std::time::Duration::from_secs(20), || used("pods") == "0"), "the controller fills in status.used");
    let pod = |name: &str, cpu: &str| {
        let resources = if cpu.is_empty() { String::new() } else { format!(r#", "resources": {{"requests": {{"cpu": "{cpu}"}}}}"#) };
        format!(
            r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}"}}, "spec": {{"containers": [{{"name": "c", "image": "nginx"{resources}}}]}}}}"#
        )
    };
    k.kubectl_in(&["create", "-n", "q", "-f", "-"], &pod("a", "500m"));
    assert_eq!((used("pods"), used("requests.cpu")), ("1".into(), "500m".into()), "admission charges the create");
    let quota = k.json(&["get", "quota", "compute", "-n", "q", "-o", "json", "--show-managed-fields"]);
    let entries = quota["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
    let charged = entries.iter().find(|e| e["manager"] == "kube-apiserver").unwrap_or_else(|| panic!("{entries:?}"));
    assert_eq!((&charged["operation"], &charged["subresource"]), (&serde_json::json!("Update"), &serde_json::json!("status")), "{charged}");
    assert_eq!(
        charged["fieldsV1"],
        serde_json::json!({"f:status": {"f:used": {"f:pods": {}, "f:requests.cpu": {}}}}),
        "admission's status write owns what it changed"
    );
    let out = k.kubectl_with_input(&["create", "-n", "q", "-f", "-"], &pod("b", "600m"));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("pods \"b\" is forbidden: exceeded quota: compute, requested: requests.cpu=600m, used: requests.cpu=500m, limited: requests.cpu=1"),
        "{out:?}"
    );
    let out = k.kubectl_with_input(&["create", "-n", "q", "-f", "-"], &pod("c", ""));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pods \"c\" is forbidden: failed quota: compute: must specify requests.cpu for: c"), "{out:?}");
    k.ok(&["delete", "pod", "a", "-n", "q", "--wait=false"]);
    assert!(
        kapi_tests::eventually(std::time::Duration::from_secs(20), || used("pods") == "0" && used("requests.cpu") == "0"),
        "the controller gives back what the deleted pod used"
    );

    // Eight creates at once for the last three secrets: exactly three land.
    let k = &k;
    let created: usize = std::thread::scope(|s| {
        let tries: Vec<_> = (0..8).map(|i| s.spawn(move || k.kubectl(&["create", "secret", "generic", &format!("s{i}"), "-n", "q"]))).collect();
        let outs: Vec<_> = tries.into_iter().map(|t| t.join().unwrap()).collect();
        // The others are refused by the quota, each as it then stood (never a conflict).
        for out in outs.iter().filter(|o| !o.status.success()) {
            assert!(String::from_utf8_lossy(&out.stderr).contains("exceeded quota: compute, requested: count/secrets=1"), "{out:?}");
        }
        outs.iter().filter(|o| o.status.success()).count()
    });
    assert_eq!(created, 3);
    assert_eq!(used("count/secrets"), "3");
    let out = k.kubectl(&["create", "secret", "generic", "late", "-n", "q"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("exceeded quota: compute, requested: count/secrets=1, used: count/secrets=3, limited: count/secrets=3"),
        "{out:?}"
    );
}

/// The image policy backend: images with `evil` in them denied, every review logged with the
/// client certificate that presented it.
const IMAGE_POLICY: &str = r#"
import json
FLAKY = [True, True]
def answer(h, review):
    subject = dict(x[0] for x in h.connection.getpeercert()["subject"])
    with open("reviews.log", "a") as f:
        f.write(json.dumps({"path": h.path, "client": subject.get("commonName"), "review": review}) + "\n")
    images = [c["image"] for c in review["spec"].get("containers", [])]
    if any("flaky" in i for i in images) and FLAKY:
        FLAKY.pop()
        return (500, "busy")
    if any("evil" in i for i in images):
        return {"apiVersion": review["apiVersion"], "kind": "ImageReview", "status": {"allowed": False, "reason": "evil images are not allowed"}}
    return {"apiVersion": review["apiVersion"], "kind": "ImageReview", "status": {"allowed": True}}
"#;

#[test]
fn an_image_policy_backend_reviews_the_images_of_pods() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    kapi_tests::openssl_pki(
        d,
        &[("hook", "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE"), ("apiserver", "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE")],
    );
    let port = kapi_tests::free_port();
    let backend = kapi_tests::python_webhook(d, port, IMAGE_POLICY, true);
    std::fs::write(
        d.join("images.kubeconfig"),
        format!(
            "clusters: [{{name: images, cluster: {{server: 'https://127.0.0.1:{port}/policy', certificate-authority: ca.crt}}}}]\n\
             users: [{{name: kapi, user: {{client-certificate: apiserver.crt, client-key: apiserver.key}}}}]\n\
             contexts: [{{name: default, context: {{cluster: images, user: kapi}}}}]\ncurrent-context: default\n"
        ),
    )
    .unwrap();
    let admission = |policy: &str| {
        let file = d.join("admission.yaml");
        std::fs::write(
            &file,
            format!(
                "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: ImagePolicyWebhook\n  configuration:\n    imagePolicy: {{kubeConfigFile: {}, {policy}}}\n",
                d.join("images.kubeconfig").display()
            ),
        )
        .unwrap();
        format!("--admission-control-config-file={}", file.display())
    };
    let refused = refused_at_start(&["--enable-admission-plugins=ImagePolicyWebhook", &admission("allowTTL: 3600")]);
    assert!(refused.contains("couldn't init admission plugin \"ImagePolicyWebhook\": valid value is between 1s and 30m0s, got 1h0m0s"), "{refused}");

    let k = Kapi::start_with(&["--enable-admission-plugins=ImagePolicyWebhook", &admission("allowTTL: 50, denyTTL: 50")]);
    k.ok(&["run", "web", "--image=nginx:1.27", "--annotations=team.image-policy.k8s.io/ticket=42"]);
    let out = k.kubectl(&["run", "bad", "--image=evil:1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "Error from server (Forbidden): pods \"bad\" is forbidden: image policy webhook backend denied one or more images: evil images are not allowed"
        ),
        "{stderr}"
    );
    let reviews = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(d.join("reviews.log")).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let seen = reviews();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!((seen[0]["path"].as_str(), seen[0]["client"].as_str()), (Some("/policy?timeout=30s"), Some("kapi-apiserver")));
    let spec = serde_json::json!({"containers": [{"image": "nginx:1.27"}], "annotations": {"team.image-policy.k8s.io/ticket": "42"}, "namespace": "default"});
    assert_eq!((&seen[0]["review"]["kind"], &seen[0]["review"]["spec"]), (&serde_json::json!("ImageReview"), &spec));
    // The answers are kept: the same images are not reviewed again within allowTTL.
    k.ok(&["run", "web2", "--image=nginx:1.27", "--annotations=team.image-policy.k8s.io/ticket=42"]);
    assert_eq!(reviews().len(), 2);
    // A backend failing for a while (a 500 twice) is tried again, as kube tries it.
    k.ok(&["run", "flaky", "--image=flaky:1"]);
    assert_eq!(reviews().len(), 5);
    // A backend that cannot be asked refuses the pod (defaultAllow is false).
    drop(backend);
    let out = k.kubectl(&["run", "other", "--image=redis"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Error from server (Forbidden): pods \"other\" is forbidden: Post \"https://127.0.0.1:"), "{stderr}");
}

#[test]
fn the_audit_log_records_each_request_as_its_policy_asks() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("audit.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n\
         - level: RequestResponse\n  resources: [{group: '', resources: [configmaps]}]\n\
         - level: None\n",
    )
    .unwrap();
    let log = dir.path().join("audit.log");
    let (p, l) = (policy.to_str().unwrap(), log.to_str().unwrap());
    let k = Kapi::start_with(&["--audit-policy-file", p, "--audit-log-path", l]);
    k.ok(&["create", "configmap", "c1", "--from-literal=k=v"]);
    let denied = k.kubectl(&["get", "configmap", "missing"]);
    assert!(!denied.status.success());
    let events = || -> Vec<serde_json::Value> { std::fs::read_to_string(&log).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect() };
    assert!(kapi_tests::eventually(std::time::Duration::from_secs(10), || events().len() >= 2), "{:?}", events());
    let all = events();
    let create = all.iter().find(|e| e["verb"] == "create" && e["requestObject"]["metadata"]["name"] == "c1").unwrap_or_else(|| panic!("{all:?}"));
    assert_eq!((&create["stage"], &create["level"]), (&serde_json::json!("ResponseComplete"), &serde_json::json!("RequestResponse")));
    assert_eq!(create["objectRef"], serde_json::json!({"resource": "configmaps", "namespace": "default", "name": "c1", "apiVersion": "v1"}));
    assert_eq!(create["responseStatus"]["code"], 201);
    assert_eq!(create["requestObject"]["data"]["k"], "v");
    assert_eq!(create["responseObject"]["metadata"]["name"], "c1");
    assert!(create["userAgent"].as_str().unwrap().starts_with("kubectl"), "{create}");
    assert_eq!(create["annotations"]["authorization.k8s.io/decision"], "allow");
    let get = all.iter().find(|e| e["verb"] == "get" && e["objectRef"]["name"] == "missing").unwrap_or_else(|| panic!("{all:?}"));
    assert_eq!(get["responseStatus"]["reason"], "NotFound");
    // Only configmaps (the server's own among them): kubectl's discovery is level None.
    assert!(all.iter().all(|e| e["objectRef"]["resource"] == "configmaps"), "{all:?}");

    // A policy kube would refuse stops the server from starting, in kube's words.
    std::fs::write(&policy, "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n").unwrap();
    let refused = refused_at_start(&["--audit-policy-file", p, "--audit-log-path", l]);
    assert!(refused.contains("loaded illegal policy with 0 rules"), "{refused}");
}

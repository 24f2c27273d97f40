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

    let k = Kapi::start_with(&["--disable-admission-plugins=ServiceAccount,DefaultTolerationSeconds,NamespaceLifecycle"]);
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
    assert!(refused_at_start(&["--enable-admission-plugins=EventRateLimit"]).contains("admission plugin \"EventRateLimit\" is not implemented by kapi yet"));
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

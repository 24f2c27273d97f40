//! PodSecurity as a client meets it: kube's messages for refused pods, warnings for
//! workloads and tightened namespaces, and the checks' details (kube's own test strings).

use serde_json::{Value, json};

use super::checks::{self, PodView};
use super::policy::{Level, LevelVersion, Version};
use super::*;
use crate::admission::{Found, Operation};
use crate::auth::UserInfo;
use crate::resources::{Settings, catalog};

fn namespace(labels: Value) -> Value {
    json!({"metadata": {"name": "dev", "labels": labels}})
}

/// Validates `obj`, a `resource` of `group`, in namespace `dev` labelled `labels`; the
/// refusal's code and message, or the warnings.
fn validate(
    plugin: &PodSecurity,
    (group, resource): (&str, &str),
    op: Operation,
    obj: &Value,
    old: Option<&Value>,
    labels: Value,
) -> Result<Vec<String>, String> {
    let cat = catalog(&Settings::default());
    let info = &cat.resources().find(|r| r.info.group == group && r.info.resource == resource).unwrap().info;
    let found = Found { namespace: Some(("dev".into(), Some(std::sync::Arc::new(namespace(labels))))), ..Found::default() };
    let user = UserInfo { name: "alice".into(), ..UserInfo::default() };
    let name = crate::meta::name(obj).to_string();
    let ns = if resource == "namespaces" { "" } else { "dev" };
    let a = Attributes::of(op, info, ns, &name, &user, old, &found);
    let mut warnings = Vec::new();
    plugin.validate(&a, Some(obj), &mut warnings).map_err(|e| format!("{} {}", e.code, e.message))?;
    Ok(warnings)
}

fn plain_pod() -> Value {
    json!({"metadata": {"name": "test"}, "spec": {"containers": [{"name": "test", "image": "nginx"}]}})
}

fn restricted_pod() -> Value {
    json!({"metadata": {"name": "ok"}, "spec": {
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "image": "nginx", "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]}})
}

const RESTRICTED_DETAIL: &str = "allowPrivilegeEscalation != false (container \"test\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container \"test\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or container \"test\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container \"test\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")";

#[test]
fn an_enforced_level_refuses_pods_in_kubes_words_and_warn_warns() {
    let plugin = PodSecurity::new(None).unwrap();
    let pods = ("", "pods");
    let restricted = json!({"pod-security.kubernetes.io/enforce": "restricted"});
    let refused = validate(&plugin, pods, Operation::Create, &plain_pod(), None, restricted.clone()).unwrap_err();
    assert_eq!(refused, format!("403 pods \"test\" is forbidden: violates PodSecurity \"restricted:latest\": {RESTRICTED_DETAIL}"));
    assert_eq!(validate(&plugin, pods, Operation::Create, &restricted_pod(), None, restricted).unwrap(), Vec::<String>::new());

    let mut privileged = plain_pod();
    privileged["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
    let baseline = json!({"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/warn": "restricted"});
    assert_eq!(
        validate(&plugin, pods, Operation::Create, &privileged, None, baseline.clone()).unwrap_err(),
        "403 pods \"test\" is forbidden: violates PodSecurity \"baseline:latest\": privileged (container \"test\" must not set securityContext.privileged=true)"
    );
    let warned = validate(&plugin, pods, Operation::Create, &plain_pod(), None, baseline.clone()).unwrap();
    assert_eq!(warned, [format!("would violate PodSecurity \"restricted:latest\": {RESTRICTED_DETAIL}")]);

    // Unlabelled namespaces are privileged; a workload is only ever warned of.
    assert!(validate(&plugin, pods, Operation::Create, &privileged, None, json!({})).unwrap().is_empty());
    let deployment = json!({"metadata": {"name": "web"}, "spec": {"template": {"spec": plain_pod()["spec"]}}});
    let warned = validate(&plugin, ("apps", "deployments"), Operation::Create, &deployment, None, baseline).unwrap();
    assert_eq!(warned, [format!("would violate PodSecurity \"restricted:latest\": {RESTRICTED_DETAIL}")]);
}

#[test]
fn only_updates_that_change_images_or_add_ephemeral_containers_are_checked() {
    let plugin = PodSecurity::new(None).unwrap();
    let restricted = json!({"pod-security.kubernetes.io/enforce": "restricted"});
    let old = plain_pod();
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"] = json!({"a": "b"});
    assert!(validate(&plugin, ("", "pods"), Operation::Update, &relabelled, Some(&old), restricted.clone()).is_ok());
    let mut new_image = old.clone();
    new_image["spec"]["containers"][0]["image"] = json!("nginx:2");
    assert!(validate(&plugin, ("", "pods"), Operation::Update, &new_image, Some(&old), restricted.clone()).unwrap_err().starts_with("403 "));
    let mut debugged = old.clone();
    debugged["spec"]["ephemeralContainers"] = json!([{"name": "debug", "image": "busybox"}]);
    assert!(validate(&plugin, ("", "pods"), Operation::Update, &debugged, Some(&old), restricted).is_err());
}

#[test]
fn exemptions_and_invalid_labels_are_kubes() {
    let config = b"apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\nexemptions: {usernames: [alice]}\n";
    let exempt = PodSecurity::new(Some(config)).unwrap();
    let restricted = json!({"pod-security.kubernetes.io/enforce": "restricted"});
    assert!(validate(&exempt, ("", "pods"), Operation::Create, &plain_pod(), None, restricted).is_ok());

    let plugin = PodSecurity::new(None).unwrap();
    // An invalid enforce level enforces restricted.
    let invalid = json!({"pod-security.kubernetes.io/enforce": "strict"});
    assert!(validate(&plugin, ("", "pods"), Operation::Create, &plain_pod(), None, invalid.clone()).unwrap_err().contains("\"restricted:latest\""));
    let ns = namespace(invalid);
    assert_eq!(
        validate(&plugin, ("", "namespaces"), Operation::Create, &json!({"metadata": {"name": "dev", "labels": ns["metadata"]["labels"]}}), None, json!({}))
            .unwrap_err(),
        "422 Namespace \"dev\" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted"
    );
    // An update that leaves the invalid label as it was goes through.
    let mut relabelled = ns.clone();
    relabelled["metadata"]["labels"]["team"] = json!("a");
    assert!(validate(&plugin, ("", "namespaces"), Operation::Update, &relabelled, Some(&ns), json!({})).is_ok());
}

#[test]
fn tightening_a_namespace_warns_of_the_pods_it_has() {
    let plugin = PodSecurity::new(None).unwrap();
    let cat = catalog(&Settings::default());
    let info = &cat.get("", "v1", "namespaces").unwrap().info;
    let owned = |name: &str, uid: &str| {
        let mut p = plain_pod();
        p["metadata"] = json!({"name": name, "ownerReferences": [{"controller": true, "uid": uid}]});
        p
    };
    let pods = vec![owned("web-b", "rs1"), owned("web-a", "rs1"), owned("web-c", "rs1"), restricted_pod(), owned("db-0", "sts")];
    let found = Found { pods, ..Found::default() };
    let old = json!({"metadata": {"name": "dev"}});
    let new = json!({"metadata": {"name": "dev", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}});
    let user = UserInfo::default();
    let a = Attributes::of(Operation::Update, info, "", "dev", &user, Some(&old), &found);
    let mut warnings = Vec::new();
    plugin.validate(&a, Some(&new), &mut warnings).unwrap();
    let reasons = "allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile";
    assert_eq!(
        warnings,
        [
            "existing pods in namespace \"dev\" violate the new PodSecurity enforce level \"restricted:latest\"".to_string(),
            format!("db-0 (and 3 other pods): {reasons}"),
        ]
    );
}

fn detail(lv: LevelVersion, spec: Value, meta: Value) -> String {
    checks::evaluate(lv, PodView { meta: &meta, spec: &spec }).details()
}

const BASELINE: LevelVersion = LevelVersion { level: Level::Baseline, version: Version::Latest };
const RESTRICTED: LevelVersion = LevelVersion { level: Level::Restricted, version: Version::Latest };

#[test]
fn each_check_says_what_kube_says() {
    let c = |name: &str, sc: Value| json!({"name": name, "image": "x", "securityContext": sc});
    let spec = json!({"hostNetwork": true, "hostIPC": true, "volumes": [{"name": "a", "hostPath": {"path": "/"}}],
        "containers": [{"name": "b", "image": "x", "ports": [{"hostPort": 20}, {"hostPort": 100}]},
                       c("c", json!({"capabilities": {"add": ["FOO", "CHOWN", "BAR"]}, "procMount": "Unmasked"}))],
        "securityContext": {"sysctls": [{"name": "a"}, {"name": "net.ipv4.tcp_rmem"}], "seLinuxOptions": {"type": "bad", "user": "u"}}});
    let annotations = json!({"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "unconfined"}});
    assert_eq!(
        detail(BASELINE, spec.clone(), annotations),
        "forbidden AppArmor profile (annotation must not set AppArmor profile type to \"container.apparmor.security.beta.kubernetes.io/c=\"unconfined\"\"), \
         non-default capabilities (container \"c\" must not include \"BAR\", \"FOO\" in securityContext.capabilities.add), \
         host namespaces (hostNetwork=true, hostIPC=true), hostPath volumes (volume \"a\"), \
         hostPort (container \"b\" uses hostPorts 100, 20), procMount (container \"c\" must not set securityContext.procMount to \"Unmasked\"), \
         seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type \"bad\"; user may not be set), forbidden sysctls (a)"
    );
    // At v1.31 the tcp_rmem sysctl was not allowed yet.
    let old = LevelVersion { level: Level::Baseline, version: Version::V1(31) };
    assert!(detail(old, spec.clone(), json!({})).ends_with("forbidden sysctls (a, net.ipv4.tcp_rmem)"));
    // Restricted replaces hostPath volumes and the baseline capabilities.
    let restricted = detail(RESTRICTED, spec, json!({}));
    assert!(restricted.contains("restricted volume types (volume \"a\" uses restricted volume type \"hostPath\")"), "{restricted}");
    assert!(
        restricted.contains(
            "unrestricted capabilities (containers \"b\", \"c\" must set securityContext.capabilities.drop=[\"ALL\"]; container \"c\" must not include \"BAR\", \"CHOWN\", \"FOO\" in securityContext.capabilities.add)"
        ),
        "{restricted}"
    );
    assert!(!restricted.contains("non-default capabilities"));

    let users = json!({"securityContext": {"runAsUser": 0, "runAsNonRoot": false, "seccompProfile": {"type": "Unconfined"}},
        "containers": [c("a", json!({"runAsUser": 0, "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}))]});
    assert_eq!(
        detail(RESTRICTED, users, json!({})),
        "runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false), runAsUser=0 (pod and container \"a\" must not set runAsUser=0), \
         seccompProfile (pod must not set securityContext.seccompProfile.type to \"Unconfined\")"
    );
    // Windows pods skip three restricted checks from v1.25.
    let windows = json!({"os": {"name": "windows"}, "securityContext": {"runAsNonRoot": true}, "containers": [{"name": "w", "image": "x"}]});
    assert_eq!(detail(RESTRICTED, windows, json!({})), "");
}

/// The audit annotations PodSecurity adds validating `obj` (a pod, or a `resource`) in `dev`
/// labelled `labels`, by `user`.
fn annotations(plugin: &PodSecurity, resource: &str, obj: &Value, labels: Value, user: &str) -> Vec<(String, String)> {
    let cat = catalog(&Settings::default());
    let info = &cat.resources().find(|r| r.info.resource == resource).unwrap().info;
    let found = Found { namespace: Some(("dev".into(), Some(std::sync::Arc::new(namespace(labels))))), ..Found::default() };
    let user = UserInfo { name: user.into(), ..UserInfo::default() };
    let name = crate::meta::name(obj).to_string();
    let a = Attributes::of(Operation::Create, info, "dev", &name, &user, None, &found);
    let _ = plugin.validate(&a, Some(obj), &mut Vec::new());
    a.annotations.take()
}

#[test]
fn the_audit_level_and_the_enforced_policy_annotate_the_request_as_kube_does() {
    let plugin = PodSecurity::new(None).unwrap();
    let key = |k: &str| format!("pod-security.kubernetes.io/{k}");
    let labels = json!({"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/audit": "restricted"});
    assert_eq!(
        annotations(&plugin, "pods", &plain_pod(), labels.clone(), "alice"),
        [
            (key("enforce-policy"), "baseline:latest".to_string()),
            (key("audit-violations"), format!("would violate PodSecurity \"restricted:latest\": {RESTRICTED_DETAIL}"))
        ]
    );
    // A refused pod is noted too; a workload's template only for the audit level.
    let mut privileged = plain_pod();
    privileged["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
    let noted = annotations(&plugin, "pods", &privileged, labels.clone(), "alice");
    assert_eq!(noted[0], (key("enforce-policy"), "baseline:latest".to_string()));
    assert!(noted[1].1.starts_with("would violate PodSecurity \"restricted:latest\": privileged"), "{noted:?}");
    let deployment = json!({"metadata": {"name": "d"}, "spec": {"template": plain_pod()}});
    let noted = annotations(&plugin, "deployments", &deployment, labels.clone(), "alice");
    assert_eq!(noted.len(), 1);
    assert_eq!(noted[0].0, key("audit-violations"));
    // Exemptions and bad labels say so.
    let config = b"apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\nexemptions: {usernames: [ci]}\n";
    let exempting = PodSecurity::new(Some(config)).unwrap();
    assert_eq!(annotations(&exempting, "pods", &plain_pod(), labels, "ci"), [(key("exempt"), "user".to_string())]);
    let bad = annotations(&plugin, "pods", &restricted_pod(), json!({"pod-security.kubernetes.io/enforce": "strict"}), "alice");
    assert_eq!(
        bad[0],
        (key("error"), "Failed to parse policy: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted".to_string())
    );
}

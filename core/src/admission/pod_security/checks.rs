//! The Pod Security Standards of kube v1.33 (`k8s.io/pod-security-admission/policy`): its
//! seventeen checks, which a level and version run and in which order, and each check's
//! reason and detail in kube's words (kube's order of reasons: the baseline checks by id,
//! then the restricted ones by id).

use std::collections::BTreeSet;

use serde_json::Value;

use super::policy::{Level, LevelVersion};

/// The newest policy version kube v1.33 knows: `latest`, and any later version, are it.
pub const NEWEST: u64 = 32;

/// A pod (or a pod template) as the checks see it.
#[derive(Clone, Copy)]
pub struct PodView<'a> {
    pub meta: &'a Value,
    pub spec: &'a Value,
}

/// What a check forbids: kube's `ForbiddenReason` and `ForbiddenDetail`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forbidden {
    pub reason: String,
    pub detail: String,
}

/// Every check a pod failed, in kube's order (`AggregateCheckResults`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict(pub Vec<Forbidden>);

impl Verdict {
    pub fn allowed(&self) -> bool {
        self.0.is_empty()
    }

    /// The reasons alone (`ForbiddenReason()`).
    pub fn reasons(&self) -> String {
        self.0.iter().map(|f| f.reason.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// Each reason with its detail (`ForbiddenDetail()`).
    pub fn details(&self) -> String {
        let parts: Vec<String> = self.0.iter().map(|f| if f.detail.is_empty() { f.reason.clone() } else { format!("{} ({})", f.reason, f.detail) }).collect();
        parts.join(", ")
    }
}

type CheckFn = fn(PodView, u64) -> Option<Forbidden>;

/// One check: the level it belongs to, the first version it applies to, and the baseline
/// check a restricted one replaces.
struct Check {
    restricted: bool,
    since: u64,
    replaces: Option<&'static str>,
    id: &'static str,
    run: CheckFn,
}

/// The checks, baseline then restricted, each by id (kube's evaluation order).
const CHECKS: [Check; 17] = [
    Check { restricted: false, since: 0, replaces: None, id: "appArmorProfile", run: app_armor_profile },
    Check { restricted: false, since: 0, replaces: None, id: "capabilities_baseline", run: capabilities_baseline },
    Check { restricted: false, since: 0, replaces: None, id: "hostNamespaces", run: host_namespaces },
    Check { restricted: false, since: 0, replaces: None, id: "hostPathVolumes", run: host_path_volumes },
    Check { restricted: false, since: 0, replaces: None, id: "hostPorts", run: host_ports },
    Check { restricted: false, since: 0, replaces: None, id: "privileged", run: privileged },
    Check { restricted: false, since: 0, replaces: None, id: "procMount", run: proc_mount },
    Check { restricted: false, since: 0, replaces: None, id: "seLinuxOptions", run: se_linux_options },
    Check { restricted: false, since: 0, replaces: None, id: "seccompProfile_baseline", run: seccomp_baseline },
    Check { restricted: false, since: 0, replaces: None, id: "sysctls", run: sysctls },
    Check { restricted: false, since: 0, replaces: None, id: "windowsHostProcess", run: windows_host_process },
    Check { restricted: true, since: 8, replaces: None, id: "allowPrivilegeEscalation", run: allow_privilege_escalation },
    Check { restricted: true, since: 22, replaces: Some("capabilities_baseline"), id: "capabilities_restricted", run: capabilities_restricted },
    Check { restricted: true, since: 0, replaces: Some("hostPathVolumes"), id: "restrictedVolumes", run: restricted_volumes },
    Check { restricted: true, since: 0, replaces: None, id: "runAsNonRoot", run: run_as_non_root },
    Check { restricted: true, since: 23, replaces: None, id: "runAsUser", run: run_as_user },
    Check { restricted: true, since: 19, replaces: Some("seccompProfile_baseline"), id: "seccompProfile_restricted", run: seccomp_restricted },
];

/// What a pod fails of a level at a version (`EvaluatePod` then `AggregateCheckResults`).
pub fn evaluate(lv: LevelVersion, pod: PodView) -> Verdict {
    let version = lv.version.minor().unwrap_or(NEWEST).min(NEWEST);
    let restricted = match lv.level {
        Level::Privileged => return Verdict::default(),
        Level::Baseline => false,
        Level::Restricted => true,
    };
    let applies = |c: &&Check| c.since <= version && (restricted || !c.restricted);
    let replaced: Vec<&str> = CHECKS.iter().filter(applies).filter_map(|c| c.replaces).collect();
    let failed = CHECKS.iter().filter(applies).filter(|c| !replaced.contains(&c.id)).filter_map(|c| (c.run)(pod, version)).collect();
    Verdict(failed)
}

/// `"a", "b"` (kube's `joinQuote`: no escaping).
fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let inner: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("\"{}\"", inner.join("\", \""))
}

fn plural<'s>(one: &'s str, many: &'s str, n: usize) -> &'s str {
    if n == 1 { one } else { many }
}

/// `container "a"`, `containers "a", "b"`.
fn containers_named(names: &[&str]) -> String {
    format!("{} {}", plural("container", "containers", names.len()), join_quote(names))
}

/// Init containers, containers, then ephemeral containers (kube's `visitContainers`).
fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers", "ephemeralContainers"].into_iter().flat_map(move |list| spec.get(list).and_then(Value::as_array).into_iter().flatten())
}

fn name(c: &Value) -> &str {
    c.get("name").and_then(Value::as_str).unwrap_or_default()
}

/// A field of a container's security context (`null` is absent).
fn container_sc<'a>(c: &'a Value, field: &str) -> Option<&'a Value> {
    c.get("securityContext").and_then(|sc| sc.get(field)).filter(|v| !v.is_null())
}

/// A field of the pod's security context.
fn pod_sc<'a>(spec: &'a Value, field: &str) -> Option<&'a Value> {
    container_sc(spec, field)
}

fn is_windows(spec: &Value) -> bool {
    spec.get("os").and_then(|os| os.get("name")).and_then(Value::as_str) == Some("windows")
}

fn str_of<'a>(v: Option<&'a Value>, field: &str) -> &'a str {
    v.and_then(|v| v.get(field)).and_then(Value::as_str).unwrap_or_default()
}

fn forbid(reason: &str, detail: String) -> Option<Forbidden> {
    Some(Forbidden { reason: reason.to_string(), detail })
}

/// The names of the containers `bad` picks.
fn bad_containers(spec: &Value, mut bad: impl FnMut(&Value) -> bool) -> Vec<&str> {
    containers(spec).filter(|c| bad(c)).map(name).collect()
}

fn privileged(p: PodView, _: u64) -> Option<Forbidden> {
    let bad = bad_containers(p.spec, |c| container_sc(c, "privileged") == Some(&Value::Bool(true)));
    if bad.is_empty() {
        return None;
    }
    forbid("privileged", format!("{} must not set securityContext.privileged=true", containers_named(&bad)))
}

fn host_namespaces(p: PodView, _: u64) -> Option<Forbidden> {
    let set: Vec<String> =
        ["hostNetwork", "hostPID", "hostIPC"].into_iter().filter(|f| p.spec.get(*f) == Some(&Value::Bool(true))).map(|f| format!("{f}=true")).collect();
    if set.is_empty() {
        return None;
    }
    forbid("host namespaces", set.join(", "))
}

fn volumes(spec: &Value) -> impl Iterator<Item = &Value> {
    spec.get("volumes").and_then(Value::as_array).into_iter().flatten()
}

fn has(v: &Value, field: &str) -> bool {
    v.get(field).is_some_and(|f| !f.is_null())
}

fn host_path_volumes(p: PodView, _: u64) -> Option<Forbidden> {
    let bad: Vec<&str> = volumes(p.spec).filter(|v| has(v, "hostPath")).map(name).collect();
    if bad.is_empty() {
        return None;
    }
    forbid("hostPath volumes", format!("{} {}", plural("volume", "volumes", bad.len()), join_quote(&bad)))
}

fn host_ports(p: PodView, _: u64) -> Option<Forbidden> {
    let mut bad = Vec::new();
    let mut ports = BTreeSet::new();
    for c in containers(p.spec) {
        let mut uses = false;
        for port in c.get("ports").and_then(Value::as_array).into_iter().flatten() {
            if let Some(n) = port.get("hostPort").and_then(Value::as_i64).filter(|n| *n != 0) {
                uses = true;
                ports.insert(n.to_string());
            }
        }
        if uses {
            bad.push(name(c));
        }
    }
    if bad.is_empty() {
        return None;
    }
    let ports: Vec<String> = ports.into_iter().collect();
    let detail = format!(
        "{} {} {} {} {}",
        plural("container", "containers", bad.len()),
        join_quote(&bad),
        plural("uses", "use", bad.len()),
        plural("hostPort", "hostPorts", ports.len()),
        ports.join(", ")
    );
    forbid("hostPort", detail)
}

/// The capabilities a container adds.
fn added(c: &Value) -> impl Iterator<Item = &str> {
    container_sc(c, "capabilities").and_then(|caps| caps.get("add")).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
}

const BASELINE_CAPABILITIES: [&str; 13] =
    ["AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"];

fn capabilities_baseline(p: PodView, _: u64) -> Option<Forbidden> {
    let mut bad = Vec::new();
    let mut caps = BTreeSet::new();
    for c in containers(p.spec) {
        let forbidden: Vec<&str> = added(c).filter(|cap| !BASELINE_CAPABILITIES.contains(cap)).collect();
        if !forbidden.is_empty() {
            bad.push(name(c));
            caps.extend(forbidden);
        }
    }
    if bad.is_empty() {
        return None;
    }
    let caps: Vec<&str> = caps.into_iter().collect();
    forbid("non-default capabilities", format!("{} must not include {} in securityContext.capabilities.add", containers_named(&bad), join_quote(&caps)))
}

fn capabilities_restricted(p: PodView, version: u64) -> Option<Forbidden> {
    if version >= 25 && is_windows(p.spec) {
        return None;
    }
    let (mut no_drop, mut adding) = (Vec::new(), Vec::new());
    let mut caps = BTreeSet::new();
    for c in containers(p.spec) {
        let Some(capabilities) = container_sc(c, "capabilities") else {
            no_drop.push(name(c));
            continue;
        };
        let drops_all = capabilities.get("drop").and_then(Value::as_array).into_iter().flatten().any(|d| d.as_str() == Some("ALL"));
        if !drops_all {
            no_drop.push(name(c));
        }
        let forbidden: Vec<&str> = added(c).filter(|cap| *cap != "NET_BIND_SERVICE").collect();
        if !forbidden.is_empty() {
            adding.push(name(c));
            caps.extend(forbidden);
        }
    }
    let mut parts = Vec::new();
    if !no_drop.is_empty() {
        parts.push(format!("{} must set securityContext.capabilities.drop=[\"ALL\"]", containers_named(&no_drop)));
    }
    if !adding.is_empty() {
        let caps: Vec<&str> = caps.into_iter().collect();
        parts.push(format!("{} must not include {} in securityContext.capabilities.add", containers_named(&adding), join_quote(&caps)));
    }
    if parts.is_empty() {
        return None;
    }
    forbid("unrestricted capabilities", parts.join("; "))
}

/// Who set something forbidden: `pod`, then the containers, joined by ` and `.
fn setters(pod: bool, bad: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    if pod {
        out.push("pod".to_string());
    }
    if !bad.is_empty() {
        out.push(containers_named(bad));
    }
    out
}

const APPARMOR_ANNOTATION: &str = "container.apparmor.security.beta.kubernetes.io/";

fn app_armor_profile(p: PodView, _: u64) -> Option<Forbidden> {
    let mut types = BTreeSet::new();
    let mut bad_type = |profile: Option<&Value>| match profile {
        Some(prof) if !matches!(str_of(Some(prof), "type"), "RuntimeDefault" | "Localhost") => {
            types.insert(str_of(Some(prof), "type").to_string());
            true
        }
        _ => false,
    };
    let pod = bad_type(pod_sc(p.spec, "appArmorProfile"));
    let bad: Vec<&str> = containers(p.spec).filter(|c| bad_type(container_sc(c, "appArmorProfile"))).map(name).collect();
    let annotations: BTreeSet<String> = p
        .meta
        .get("annotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(APPARMOR_ANNOTATION))
        .filter_map(|(k, v)| {
            let v = v.as_str().unwrap_or_default();
            let allowed = v.is_empty() || v == "runtime/default" || v.starts_with("localhost/");
            (!allowed).then(|| format!("{k}={}", crate::status::quote(v)))
        })
        .collect();
    let mut who = setters(pod, &bad);
    if !annotations.is_empty() {
        who.push(plural("annotation", "annotations", annotations.len()).to_string());
    }
    if who.is_empty() {
        return None;
    }
    let values: Vec<String> = types.into_iter().chain(annotations).collect();
    let reason = plural("forbidden AppArmor profile", "forbidden AppArmor profiles", values.len());
    forbid(reason, format!("{} must not set AppArmor profile type to {}", who.join(" and "), join_quote(&values)))
}

fn proc_mount(p: PodView, _: u64) -> Option<Forbidden> {
    let mut values = BTreeSet::new();
    let bad = bad_containers(p.spec, |c| match container_sc(c, "procMount").and_then(Value::as_str) {
        Some(m) if m != "Default" => {
            values.insert(m.to_string());
            true
        }
        _ => false,
    });
    if bad.is_empty() {
        return None;
    }
    let values: Vec<String> = values.into_iter().collect();
    forbid("procMount", format!("{} must not set securityContext.procMount to {}", containers_named(&bad), join_quote(&values)))
}

fn se_linux_options(p: PodView, version: u64) -> Option<Forbidden> {
    let mut types = BTreeSet::new();
    let (mut user, mut role) = (false, false);
    let mut bad_options = |opts: Option<&Value>| {
        let Some(opts) = opts else { return false };
        let kind = str_of(Some(opts), "type");
        let mut bad = false;
        if !(matches!(kind, "" | "container_t" | "container_init_t" | "container_kvm_t") || (version >= 31 && kind == "container_engine_t")) {
            types.insert(kind.to_string());
            bad = true;
        }
        if !str_of(Some(opts), "user").is_empty() {
            user = true;
            bad = true;
        }
        if !str_of(Some(opts), "role").is_empty() {
            role = true;
            bad = true;
        }
        bad
    };
    let pod = bad_options(pod_sc(p.spec, "seLinuxOptions"));
    let bad: Vec<&str> = containers(p.spec).filter(|c| bad_options(container_sc(c, "seLinuxOptions"))).map(name).collect();
    let who = setters(pod, &bad);
    if who.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    if !types.is_empty() {
        let types: Vec<String> = types.into_iter().collect();
        parts.push(format!("{} {}", plural("type", "types", types.len()), join_quote(&types)));
    }
    if user {
        parts.push("user may not be set".to_string());
    }
    if role {
        parts.push("role may not be set".to_string());
    }
    forbid("seLinuxOptions", format!("{} set forbidden securityContext.seLinuxOptions: {}", who.join(" and "), parts.join("; ")))
}

fn valid_seccomp_type(profile: &Value) -> bool {
    matches!(str_of(Some(profile), "type"), "RuntimeDefault" | "Localhost")
}

fn seccomp_baseline(p: PodView, version: u64) -> Option<Forbidden> {
    if version < 19 {
        return seccomp_annotations(p);
    }
    let mut values = BTreeSet::new();
    let mut bad_profile = |profile: Option<&Value>| match profile {
        Some(prof) if !valid_seccomp_type(prof) => {
            values.insert(str_of(Some(prof), "type").to_string());
            true
        }
        _ => false,
    };
    let pod = bad_profile(pod_sc(p.spec, "seccompProfile"));
    let bad: Vec<&str> = containers(p.spec).filter(|c| bad_profile(container_sc(c, "seccompProfile"))).map(name).collect();
    let who = setters(pod, &bad);
    if who.is_empty() {
        return None;
    }
    let values: Vec<String> = values.into_iter().collect();
    forbid("seccompProfile", format!("{} must not set securityContext.seccompProfile.type to {}", who.join(" and "), join_quote(&values)))
}

/// The seccomp check of versions before 1.19: the alpha annotations.
fn seccomp_annotations(p: PodView) -> Option<Forbidden> {
    let annotation = |key: &str| p.meta.get("annotations").and_then(|a| a.get(key)).and_then(Value::as_str).map(|v| (key.to_string(), v.to_string()));
    let mut found: Vec<(String, String)> = annotation("seccomp.security.alpha.kubernetes.io/pod").into_iter().collect();
    for c in containers(p.spec) {
        found.extend(annotation(&format!("container.seccomp.security.alpha.kubernetes.io/{}", name(c))));
    }
    let forbidden: BTreeSet<String> = found
        .into_iter()
        .filter(|(_, v)| !(v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/")))
        .map(|(k, v)| format!("{k}={}", crate::status::quote(&v)))
        .collect();
    if forbidden.is_empty() {
        return None;
    }
    let list: Vec<String> = forbidden.into_iter().collect();
    forbid("seccompProfile", format!("forbidden {} {}", plural("annotation", "annotations", list.len()), list.join(", ")))
}

/// The sysctls the baseline level allows at a version.
fn sysctl_allowed(name: &str, version: u64) -> bool {
    const SINCE: [(u64, &[&str]); 4] = [
        (
            0,
            &[
                "kernel.shm_rmid_forced",
                "net.ipv4.ip_local_port_range",
                "net.ipv4.tcp_syncookies",
                "net.ipv4.ping_group_range",
                "net.ipv4.ip_unprivileged_port_start",
            ],
        ),
        (27, &["net.ipv4.ip_local_reserved_ports"]),
        (29, &["net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"]),
        (32, &["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"]),
    ];
    SINCE.iter().any(|(since, names)| *since <= version && names.contains(&name))
}

fn sysctls(p: PodView, version: u64) -> Option<Forbidden> {
    let list = pod_sc(p.spec, "sysctls").and_then(Value::as_array);
    let bad: Vec<&str> = list.into_iter().flatten().map(name).filter(|n| !sysctl_allowed(n, version)).collect();
    if bad.is_empty() {
        return None;
    }
    forbid("forbidden sysctls", bad.join(", "))
}

/// A check of a security context field that neither the pod nor a container may set as
/// `bad` says: `<who> must not set <what>`.
fn neither_pod_nor_containers(p: PodView, field: &str, bad: fn(&Value) -> bool, reason: &str, what: &str) -> Option<Forbidden> {
    let pod = pod_sc(p.spec, field).is_some_and(bad);
    let containers = bad_containers(p.spec, |c| container_sc(c, field).is_some_and(bad));
    let who = setters(pod, &containers);
    if who.is_empty() {
        return None;
    }
    forbid(reason, format!("{} must not set {what}", who.join(" and ")))
}

fn windows_host_process(p: PodView, _: u64) -> Option<Forbidden> {
    let host_process = |w: &Value| w.get("hostProcess") == Some(&Value::Bool(true));
    neither_pod_nor_containers(p, "windowsOptions", host_process, "hostProcess", "securityContext.windowsOptions.hostProcess=true")
}

fn allow_privilege_escalation(p: PodView, version: u64) -> Option<Forbidden> {
    if version >= 25 && is_windows(p.spec) {
        return None;
    }
    let bad = bad_containers(p.spec, |c| container_sc(c, "allowPrivilegeEscalation") != Some(&Value::Bool(false)));
    if bad.is_empty() {
        return None;
    }
    forbid("allowPrivilegeEscalation != false", format!("{} must set securityContext.allowPrivilegeEscalation=false", containers_named(&bad)))
}

const ALLOWED_VOLUMES: [&str; 9] = ["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim", "projected", "secret"];

/// The volume sources kube names, in the order it looks for them.
const NAMED_VOLUMES: [&str; 21] = [
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
];

fn restricted_volumes(p: PodView, _: u64) -> Option<Forbidden> {
    let mut bad = Vec::new();
    let mut kinds = BTreeSet::new();
    for v in volumes(p.spec).filter(|v| !ALLOWED_VOLUMES.iter().any(|k| has(v, k))) {
        bad.push(name(v));
        kinds.insert(NAMED_VOLUMES.into_iter().find(|k| has(v, k)).unwrap_or("unknown"));
    }
    if bad.is_empty() {
        return None;
    }
    let kinds: Vec<&str> = kinds.into_iter().collect();
    let detail = format!(
        "{} {} {} {} {}",
        plural("volume", "volumes", bad.len()),
        join_quote(&bad),
        plural("uses", "use", bad.len()),
        plural("restricted volume type", "restricted volume types", kinds.len()),
        join_quote(&kinds)
    );
    forbid("restricted volume types", detail)
}

fn run_as_non_root(p: PodView, _: u64) -> Option<Forbidden> {
    let pod_says = pod_sc(p.spec, "runAsNonRoot").and_then(Value::as_bool);
    let (mut explicit, mut implicit) = (Vec::new(), Vec::new());
    for c in containers(p.spec) {
        match container_sc(c, "runAsNonRoot").and_then(Value::as_bool) {
            Some(false) => explicit.push(name(c)),
            Some(true) => {}
            None if pod_says != Some(true) => implicit.push(name(c)),
            None => {}
        }
    }
    let who = setters(pod_says == Some(false), &explicit);
    if !who.is_empty() {
        return forbid("runAsNonRoot != true", format!("{} must not set securityContext.runAsNonRoot=false", who.join(" and ")));
    }
    if implicit.is_empty() {
        return None;
    }
    forbid("runAsNonRoot != true", format!("pod or {} must set securityContext.runAsNonRoot=true", containers_named(&implicit)))
}

fn run_as_user(p: PodView, _: u64) -> Option<Forbidden> {
    neither_pod_nor_containers(p, "runAsUser", |v| v.as_i64() == Some(0), "runAsUser=0", "runAsUser=0")
}

fn seccomp_restricted(p: PodView, version: u64) -> Option<Forbidden> {
    if version >= 25 && is_windows(p.spec) {
        return None;
    }
    let mut values = BTreeSet::new();
    let pod_profile = pod_sc(p.spec, "seccompProfile");
    let pod_bad = pod_profile.is_some_and(|prof| !valid_seccomp_type(prof));
    if let Some(prof) = pod_profile.filter(|_| pod_bad) {
        values.insert(str_of(Some(prof), "type").to_string());
    }
    let pod_set = pod_profile.is_some() && !pod_bad;
    let (mut explicit, mut implicit) = (Vec::new(), Vec::new());
    for c in containers(p.spec) {
        match container_sc(c, "seccompProfile") {
            Some(prof) if !valid_seccomp_type(prof) => {
                explicit.push(name(c));
                values.insert(str_of(Some(prof), "type").to_string());
            }
            Some(_) => {}
            None if !pod_set => implicit.push(name(c)),
            None => {}
        }
    }
    let who = setters(pod_bad, &explicit);
    if !who.is_empty() {
        let values: Vec<String> = values.into_iter().collect();
        return forbid("seccompProfile", format!("{} must not set securityContext.seccompProfile.type to {}", who.join(" and "), join_quote(&values)));
    }
    if implicit.is_empty() {
        return None;
    }
    forbid(
        "seccompProfile",
        format!("pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"", containers_named(&implicit)),
    )
}

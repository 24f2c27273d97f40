//! The enumerated fields of a pod spec and its containers that kube checks, with kube's paths,
//! value lists (in the order kube prints them) and messages: tolerations, topology spread,
//! security profiles, sidecar restart policies, probe schemes, host path types, mount
//! propagation, preemption policy and OS.

use serde_json::{Value, json};

use crate::status::FieldError;
use crate::validation::{label_value, qualified_name, supported};

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn present<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key).filter(|v| !v.is_null())
}

/// The pod-level enums of the spec at `path`.
pub(super) fn validate_spec_enums(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for (i, v) in spec.get("volumes").and_then(Value::as_array).into_iter().flatten().enumerate() {
        if let Some(host_path) = present(v, "hostPath")
            && !str_of(host_path, "path").is_empty()
        {
            let allowed = ["", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"];
            supported(errs, host_path.get("type"), &format!("{path}.volumes[{i}].hostPath.type"), &allowed);
        }
    }
    if let Some(sc) = present(spec, "securityContext") {
        let scp = format!("{path}.securityContext");
        profiles(sc, &scp, errs);
        supported(errs, sc.get("fsGroupChangePolicy"), &format!("{scp}.fsGroupChangePolicy"), &["Always", "OnRootMismatch"]);
        supported(errs, sc.get("supplementalGroupsPolicy"), &format!("{scp}.supplementalGroupsPolicy"), &["Merge", "Strict"]);
        supported(errs, sc.get("seLinuxChangePolicy"), &format!("{scp}.seLinuxChangePolicy"), &["Recursive"]);
    }
    let tolerations = spec.get("tolerations").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    errs.extend(validate_tolerations(tolerations, &format!("{path}.tolerations")));
    for (i, c) in spec.get("topologySpreadConstraints").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let cp = format!("{path}.topologySpreadConstraints[{i}]");
        let skew = c.get("maxSkew").and_then(Value::as_i64).unwrap_or(0);
        if skew <= 0 {
            errs.push(FieldError::invalid(format!("{cp}.maxSkew"), json!(skew), "must be greater than zero"));
        }
        if str_of(c, "topologyKey").is_empty() {
            errs.push(FieldError::required(format!("{cp}.topologyKey"), "can not be empty"));
        }
        let action = str_of(c, "whenUnsatisfiable");
        if !["DoNotSchedule", "ScheduleAnyway"].contains(&action) {
            errs.push(FieldError::not_supported(format!("{cp}.whenUnsatisfiable"), json!(action), &["DoNotSchedule", "ScheduleAnyway"]));
        }
        if let Some(min) = present(c, "minDomains")
            && action != "DoNotSchedule"
        {
            errs.push(FieldError::invalid(
                format!("{cp}.minDomains"),
                min.clone(),
                format!("can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}"),
            ));
        }
        for policy in ["nodeAffinityPolicy", "nodeTaintsPolicy"] {
            supported(errs, c.get(policy), &format!("{cp}.{policy}"), &["Honor", "Ignore"]);
        }
    }
    if let Some(p) = present(spec, "preemptionPolicy") {
        if p.as_str() == Some("") {
            errs.push(FieldError::required(format!("{path}.preemptionPolicy"), ""));
        } else {
            supported(errs, Some(p), &format!("{path}.preemptionPolicy"), &["PreemptLowerPriority", "Never"]);
        }
    }
    if let Some(os) = present(spec, "os") {
        let name = str_of(os, "name");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{path}.os.name"), "cannot be empty"));
        } else if !["linux", "windows"].contains(&name) {
            errs.push(FieldError::not_supported(format!("{path}.os"), json!(name), &["linux", "windows"]));
        }
    }
}

/// kube's `ValidateTolerations` of the list at `path`.
pub fn validate_tolerations(tolerations: &[Value], path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, t) in tolerations.iter().enumerate() {
        toleration(t, &format!("{path}[{i}]"), &mut errs);
    }
    errs
}

/// `validateTolerations`, one toleration, in kube's order of checks.
fn toleration(t: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let (key, op, value, effect) = (str_of(t, "key"), str_of(t, "operator"), str_of(t, "value"), str_of(t, "effect"));
    if !key.is_empty() {
        errs.extend(qualified_name(key).into_iter().map(|msg| FieldError::invalid(format!("{path}.key"), json!(key), msg)));
    }
    if key.is_empty() && op != "Exists" {
        errs.push(FieldError::invalid(
            format!("{path}.operator"),
            json!(op),
            "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
        ));
    }
    if present(t, "tolerationSeconds").is_some() && effect != "NoExecute" {
        errs.push(FieldError::invalid(format!("{path}.effect"), json!(effect), "effect must be 'NoExecute' when `tolerationSeconds` is set"));
    }
    match op {
        "" | "Equal" => {
            let msgs = label_value(value);
            if !msgs.is_empty() {
                errs.push(FieldError::invalid(format!("{path}.operator"), json!(value), msgs.join(";")));
            }
        }
        "Exists" if !value.is_empty() => {
            errs.push(FieldError::invalid(format!("{path}.operator"), json!(value), "value must be empty when `operator` is 'Exists'"));
        }
        "Exists" => {}
        other => errs.push(FieldError::not_supported(format!("{path}.operator"), json!(other), &["Equal", "Exists"])),
    }
    if !effect.is_empty() {
        supported(errs, Some(&json!(effect)), &format!("{path}.effect"), &["NoSchedule", "PreferNoSchedule", "NoExecute"]);
    }
}

/// A security context's seccomp and AppArmor profiles, at `path`.
fn profiles(sc: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for (field, what) in [("seccompProfile", "seccomp"), ("appArmorProfile", "AppArmor")] {
        let Some(profile) = present(sc, field) else { continue };
        let ty = str_of(profile, "type");
        if ty.is_empty() {
            errs.push(FieldError::required(format!("{path}.{field}.type"), format!("type is required when {field} is set")));
        } else if !["Localhost", "RuntimeDefault", "Unconfined"].contains(&ty) {
            errs.push(FieldError::not_supported(format!("{path}.{field}.type"), json!(ty), &["Localhost", "RuntimeDefault", "Unconfined"]));
        } else if ty == "Localhost" && str_of(profile, "localhostProfile").trim().is_empty() {
            errs.push(FieldError::required(format!("{path}.{field}.localhostProfile"), format!("must be set when {what} type is Localhost")));
        }
    }
}

/// The enums of one container at `path`; `init` for init containers (whose `restartPolicy`
/// `Always` makes a sidecar).
pub(super) fn validate_container_enums(c: &Value, path: &str, init: bool, errs: &mut Vec<FieldError>) {
    let restart = present(c, "restartPolicy");
    if init {
        supported(errs, restart, &format!("{path}.restartPolicy"), &["Always"]);
        if restart.and_then(Value::as_str) != Some("Always") {
            for field in ["lifecycle", "livenessProbe", "readinessProbe", "startupProbe"] {
                if present(c, field).is_some() {
                    errs.push(FieldError::forbidden(format!("{path}.{field}"), "may not be set for init containers without restartPolicy=Always"));
                }
            }
        }
    } else if restart.is_some() {
        errs.push(FieldError::forbidden(format!("{path}.restartPolicy"), "may not be set for non-init containers"));
    }
    let handlers = ["livenessProbe", "readinessProbe", "startupProbe"].map(|p| (p.to_string(), present(c, p)));
    let hooks = ["postStart", "preStop"].map(|h| (format!("lifecycle.{h}"), c.get("lifecycle").and_then(|l| present(l, h))));
    for (name, handler) in handlers.iter().chain(hooks.iter()) {
        if let Some(get) = handler.and_then(|h| present(h, "httpGet")) {
            supported(errs, get.get("scheme"), &format!("{path}.{name}.httpGet.scheme"), &["HTTP", "HTTPS"]);
        }
    }
    if let Some(sc) = present(c, "securityContext") {
        let scp = format!("{path}.securityContext");
        profiles(sc, &scp, errs);
        supported(errs, sc.get("procMount"), &format!("{scp}.procMount"), &["Default", "Unmasked"]);
    }
    for m in c.get("volumeMounts").and_then(Value::as_array).into_iter().flatten() {
        // kube reports these without the mount's index.
        supported(errs, m.get("mountPropagation"), &format!("{path}.volumeMounts.mountPropagation"), &["Bidirectional", "HostToContainer", "None"]);
    }
}

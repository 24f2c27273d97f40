//! Defaults and validation of pod specs, shared by pods and every pod template (deployments,
//! replicasets, statefulsets, daemonsets, jobs, cronjobs): kube's `SetDefaults_PodSpec`,
//! `SetDefaults_Container` and the core of `ValidatePodSpec`.

use serde_json::{Map, Value, json};

use super::podspec_enums::{validate_container_enums, validate_spec_enums};
use crate::meta;
use crate::quantity::Quantity;
use crate::status::FieldError;
use crate::validation::supported;
use crate::validation::{dns1123_label, dns1123_subdomain, label_value, port_name, qualified_name};

const CONTAINER_LISTS: &[&str] = &["initContainers", "containers", "ephemeralContainers"];

/// `SetDefaults_PodSpec` and its nested defaults, on the spec object.
pub fn default_spec(spec: &mut Map<String, Value>) {
    spec.entry("dnsPolicy").or_insert_with(|| json!("ClusterFirst"));
    spec.entry("restartPolicy").or_insert_with(|| json!("Always"));
    spec.entry("securityContext").or_insert_with(|| json!({}));
    spec.entry("terminationGracePeriodSeconds").or_insert_with(|| json!(30));
    spec.entry("schedulerName").or_insert_with(|| json!("default-scheduler"));
    for list in CONTAINER_LISTS {
        if let Some(Value::Array(cs)) = spec.get_mut(*list) {
            for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                default_container(c);
            }
        }
    }
    if let Some(Value::Array(vols)) = spec.get_mut("volumes") {
        for v in vols.iter_mut().filter_map(Value::as_object_mut) {
            default_volume(v);
        }
    }
}

/// The pull policy kube picks for an image (`Always` for `:latest` or no tag).
pub fn default_pull_policy(image: &str) -> &'static str {
    let without_digest = image.split('@').next().unwrap_or(image);
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    match last.split_once(':') {
        Some((_, tag)) if tag != "latest" => "IfNotPresent",
        _ => "Always",
    }
}

fn default_container(c: &mut Map<String, Value>) {
    c.entry("terminationMessagePath").or_insert_with(|| json!("/dev/termination-log"));
    c.entry("terminationMessagePolicy").or_insert_with(|| json!("File"));
    let image = c.get("image").and_then(Value::as_str).unwrap_or_default().to_string();
    c.entry("imagePullPolicy").or_insert_with(|| json!(default_pull_policy(&image)));
    c.entry("resources").or_insert_with(|| json!({}));
    if let Some(Value::Array(ports)) = c.get_mut("ports") {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            p.entry("protocol").or_insert_with(|| json!("TCP"));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(Value::Object(p)) = c.get_mut(probe) {
            for (k, v) in [("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1), ("failureThreshold", 3)] {
                p.entry(k).or_insert_with(|| json!(v));
            }
            default_handler(p);
        }
    }
    if let Some(Value::Object(l)) = c.get_mut("lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(Value::Object(h)) = l.get_mut(hook) {
                default_handler(h);
            }
        }
    }
    if let Some(Value::Array(env)) = c.get_mut("env") {
        for e in env.iter_mut() {
            if let Some(Value::Object(f)) = e.pointer_mut("/valueFrom/fieldRef") {
                f.entry("apiVersion").or_insert_with(|| json!("v1"));
            }
        }
    }
}

fn default_handler(h: &mut Map<String, Value>) {
    if let Some(Value::Object(g)) = h.get_mut("httpGet") {
        g.entry("path").or_insert_with(|| json!("/"));
        g.entry("scheme").or_insert_with(|| json!("HTTP"));
    }
}

fn default_volume(v: &mut Map<String, Value>) {
    if v.keys().all(|k| k == "name") {
        v.insert("emptyDir".into(), json!({}));
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(Value::Object(s)) = v.get_mut(source) {
            s.entry("defaultMode").or_insert_with(|| json!(420));
        }
    }
    if let Some(Value::Object(s)) = v.get_mut("hostPath") {
        s.entry("type").or_insert_with(|| json!(""));
    }
    if let Some(items) = v.get_mut("downwardAPI").and_then(|d| d.get_mut("items")) {
        default_field_refs(items);
    }
    if let Some(Value::Array(sources)) = v.get_mut("projected").and_then(|p| p.get_mut("sources")) {
        for s in sources {
            if let Some(items) = s.pointer_mut("/downwardAPI/items") {
                default_field_refs(items);
            }
        }
    }
}

fn default_field_refs(items: &mut Value) {
    for i in items.as_array_mut().into_iter().flatten() {
        if let Some(Value::Object(f)) = i.get_mut("fieldRef") {
            f.entry("apiVersion").or_insert_with(|| json!("v1"));
        }
    }
}

/// `SetDefaults_Pod` beyond the spec: requests default to limits, host ports follow the host
/// network, service links are on.
pub fn default_pod_only(spec: &mut Map<String, Value>) {
    spec.entry("enableServiceLinks").or_insert_with(|| json!(true));
    let host_network = spec.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    for list in ["initContainers", "containers"] {
        let Some(Value::Array(cs)) = spec.get_mut(list) else { continue };
        for c in cs.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(limits) = c.get("resources").and_then(|r| r.get("limits")).cloned() {
                let res = c.entry("resources").or_insert_with(|| json!({}));
                if let (Value::Object(res), Value::Object(limits)) = (res, limits) {
                    let requests = res.entry("requests").or_insert_with(|| json!({}));
                    if let Value::Object(req) = requests {
                        for (k, v) in limits {
                            req.entry(k).or_insert(v);
                        }
                    }
                }
            }
            if host_network && let Some(Value::Array(ports)) = c.get_mut("ports") {
                for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                    if p.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0
                        && let Some(cp) = p.get("containerPort").cloned()
                    {
                        p.insert("hostPort".into(), cp);
                    }
                }
            }
        }
    }
}

/// How a spec is validated: pods require images, templates do not.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum SpecOf {
    Pod,
    Template,
}

/// `ValidatePodSpec` (the checks that matter in practice), at `path` (e.g. `spec`).
pub fn validate_spec(spec: &Value, path: &str, of: SpecOf) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let volumes = validate_volumes(spec, path, &mut errs);
    let containers = spec.get("containers").and_then(Value::as_array);
    if containers.is_none_or(|c| c.is_empty()) {
        errs.push(FieldError::required(format!("{path}.containers"), ""));
    }
    let mut names: Vec<String> = Vec::new();
    for list in ["initContainers", "containers"] {
        for (i, c) in spec.get(list).and_then(Value::as_array).into_iter().flatten().enumerate() {
            let cp = format!("{path}.{list}[{i}]");
            validate_container(c, &cp, of, &volumes, &mut names, &mut errs);
            validate_container_enums(c, &cp, list == "initContainers", &mut errs);
        }
    }
    supported(&mut errs, spec.get("restartPolicy"), &format!("{path}.restartPolicy"), &["Always", "OnFailure", "Never"]);
    supported(&mut errs, spec.get("dnsPolicy"), &format!("{path}.dnsPolicy"), &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"]);
    validate_spec_enums(spec, path, &mut errs);
    if let Some(ads) = spec.get("activeDeadlineSeconds").and_then(Value::as_i64)
        && ads <= 0
    {
        errs.push(FieldError::invalid(format!("{path}.activeDeadlineSeconds"), json!(ads), "must be between 1 and 2147483647, inclusive"));
    }
    for (k, v) in meta::string_map(spec.get("nodeSelector")) {
        for msg in qualified_name(k) {
            errs.push(FieldError::invalid(format!("{path}.nodeSelector"), json!(k), msg));
        }
        for msg in label_value(v) {
            errs.push(FieldError::invalid(format!("{path}.nodeSelector"), json!(v), msg));
        }
    }
    for field in ["serviceAccountName", "nodeName"] {
        if let Some(n) = spec.get(field).and_then(Value::as_str).filter(|s| !s.is_empty()) {
            for msg in dns1123_subdomain(n) {
                errs.push(FieldError::invalid(format!("{path}.{field}"), json!(n), msg));
            }
        }
    }
    if let Some(h) = spec.get("hostname").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        for msg in dns1123_label(h) {
            errs.push(FieldError::invalid(format!("{path}.hostname"), json!(h), msg));
        }
    }
    errs
}

/// Volume names, one source each; returns the names for mount checks.
fn validate_volumes(spec: &Value, path: &str, errs: &mut Vec<FieldError>) -> Vec<String> {
    let mut names = Vec::new();
    for (i, v) in spec.get("volumes").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let p = format!("{path}.volumes[{i}]");
        let name = v.get("name").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty() {
            errs.push(FieldError::required(format!("{p}.name"), ""));
        } else {
            for msg in dns1123_label(name) {
                errs.push(FieldError::invalid(format!("{p}.name"), json!(name), msg));
            }
            if names.iter().any(|n| n == name) {
                errs.push(FieldError::duplicate(format!("{p}.name"), json!(name)));
            }
            names.push(name.to_string());
        }
        let sources = v.as_object().map_or(0, |m| m.keys().filter(|k| *k != "name").count());
        if sources == 0 {
            errs.push(FieldError::required(p.clone(), "must specify a volume type"));
        } else if sources > 1 {
            errs.push(FieldError::forbidden(p.clone(), "may not specify more than 1 volume type"));
        }
    }
    names
}

fn validate_container(c: &Value, path: &str, of: SpecOf, volumes: &[String], names: &mut Vec<String>, errs: &mut Vec<FieldError>) {
    let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    } else {
        for msg in dns1123_label(name) {
            errs.push(FieldError::invalid(format!("{path}.name"), json!(name), msg));
        }
        if names.iter().any(|n| n == name) {
            errs.push(FieldError::duplicate(format!("{path}.name"), json!(name)));
        }
        names.push(name.to_string());
    }
    if of == SpecOf::Pod && c.get("image").and_then(Value::as_str).is_none_or(|s| s.trim().is_empty()) {
        errs.push(FieldError::required(format!("{path}.image"), ""));
    }
    supported(errs, c.get("imagePullPolicy"), &format!("{path}.imagePullPolicy"), &["Always", "IfNotPresent", "Never"]);
    supported(errs, c.get("terminationMessagePolicy"), &format!("{path}.terminationMessagePolicy"), &["File", "FallbackToLogsOnError"]);
    let mut port_names: Vec<&str> = Vec::new();
    for (i, p) in c.get("ports").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let pp = format!("{path}.ports[{i}]");
        let cp = p.get("containerPort").and_then(Value::as_i64).unwrap_or(0);
        if !(1..=65535).contains(&cp) {
            errs.push(FieldError::invalid(format!("{pp}.containerPort"), json!(cp), "must be between 1 and 65535, inclusive"));
        }
        if let Some(hp) = p.get("hostPort").and_then(Value::as_i64).filter(|h| *h != 0)
            && !(1..=65535).contains(&hp)
        {
            errs.push(FieldError::invalid(format!("{pp}.hostPort"), json!(hp), "must be between 1 and 65535, inclusive"));
        }
        supported(errs, p.get("protocol"), &format!("{pp}.protocol"), &["SCTP", "TCP", "UDP"]);
        if let Some(n) = p.get("name").and_then(Value::as_str).filter(|s| !s.is_empty()) {
            for msg in port_name(n) {
                errs.push(FieldError::invalid(format!("{pp}.name"), json!(n), msg));
            }
            if port_names.contains(&n) {
                errs.push(FieldError::duplicate(format!("{pp}.name"), json!(n)));
            }
            port_names.push(n);
        }
    }
    for (i, m) in c.get("volumeMounts").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let mp = format!("{path}.volumeMounts[{i}]");
        let n = m.get("name").and_then(Value::as_str).unwrap_or_default();
        if n.is_empty() {
            errs.push(FieldError::required(format!("{mp}.name"), ""));
        } else if !volumes.iter().any(|v| v == n) {
            errs.push(FieldError::not_found(format!("{mp}.name"), json!(n)));
        }
        if m.get("mountPath").and_then(Value::as_str).is_none_or(str::is_empty) {
            errs.push(FieldError::required(format!("{mp}.mountPath"), ""));
        }
    }
    for (i, e) in c.get("env").and_then(Value::as_array).into_iter().flatten().enumerate() {
        if e.get("name").and_then(Value::as_str).is_none_or(str::is_empty) {
            errs.push(FieldError::required(format!("{path}.env[{i}].name"), ""));
        }
    }
    validate_resources(c.get("resources"), &format!("{path}.resources"), errs);
}

/// Requests may not exceed limits.
fn validate_resources(r: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let Some(r) = r else { return };
    let limits = r.get("limits").and_then(Value::as_object);
    for (k, v) in r.get("requests").and_then(Value::as_object).into_iter().flatten() {
        let (Some(req), Some(lim)) = (v.as_str().and_then(Quantity::parse), limits.and_then(|l| l.get(k)).and_then(Value::as_str).and_then(Quantity::parse))
        else {
            continue;
        };
        if req > lim {
            errs.push(FieldError::invalid(format!("{path}.requests"), v.clone(), format!("must be less than or equal to {k} limit of {}", lim.canonical())));
        }
    }
}

/// A template's labels must be selected by its owner's selector (deployments and friends).
pub fn validate_template_selector(obj: &Value, errs: &mut Vec<FieldError>) {
    let Some(sel) = meta::at(obj, &["spec", "selector"]) else {
        errs.push(FieldError::required("spec.selector", ""));
        return;
    };
    let empty = sel.get("matchLabels").and_then(Value::as_object).is_none_or(|m| m.is_empty())
        && sel.get("matchExpressions").and_then(Value::as_array).is_none_or(|m| m.is_empty());
    if empty {
        errs.push(FieldError::invalid("spec.selector", sel.clone(), "empty selector is invalid for deployment"));
        return;
    }
    let Ok(selector) = crate::selector::LabelSelector::from_object(sel) else {
        errs.push(FieldError::invalid("spec.selector", sel.clone(), "invalid label selector"));
        return;
    };
    let labels = meta::string_map(meta::at(obj, &["spec", "template", "metadata", "labels"]));
    if !selector.matches(&labels) {
        errs.push(FieldError::invalid_string_map(
            "spec.template.metadata.labels",
            meta::at(obj, &["spec", "template", "metadata", "labels"]),
            "`selector` does not match template `labels`",
        ));
    }
}

/// The QoS class kube computes for a pod (`GetPodQOS`).
pub fn qos_class(spec: &Value) -> &'static str {
    let mut any = false;
    let mut guaranteed = true;
    for list in ["initContainers", "containers"] {
        for c in spec.get(list).and_then(Value::as_array).into_iter().flatten() {
            let req = c.pointer("/resources/requests").and_then(Value::as_object);
            let lim = c.pointer("/resources/limits").and_then(Value::as_object);
            for r in ["cpu", "memory"] {
                let rq = req.and_then(|m| m.get(r)).and_then(Value::as_str).and_then(Quantity::parse).filter(|q| q.milli_value() != 0);
                let lm = lim.and_then(|m| m.get(r)).and_then(Value::as_str).and_then(Quantity::parse).filter(|q| q.milli_value() != 0);
                any |= rq.is_some() || lm.is_some();
                match (rq, lm) {
                    (_, None) => guaranteed = false,
                    (Some(a), Some(b)) if a != b => guaranteed = false,
                    _ => {}
                }
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_follows_the_tag() {
        assert_eq!(default_pull_policy("nginx"), "Always");
        assert_eq!(default_pull_policy("nginx:latest"), "Always");
        assert_eq!(default_pull_policy("nginx:1.27"), "IfNotPresent");
        assert_eq!(default_pull_policy("registry:5000/app"), "Always");
        assert_eq!(default_pull_policy("app@sha256:abc"), "IfNotPresent");
    }

    #[test]
    fn container_checks() {
        let spec = json!({"containers": [{"name": "a"}, {"name": "a", "image": "x", "ports": [{"containerPort": 0}]}]});
        let errs: Vec<String> = validate_spec(&spec, "spec", SpecOf::Pod).iter().map(ToString::to_string).collect();
        assert!(errs.contains(&"spec.containers[0].image: Required value".to_string()), "{errs:?}");
        assert!(errs.contains(&"spec.containers[1].name: Duplicate value: \"a\"".to_string()));
        assert!(errs.contains(&"spec.containers[1].ports[0].containerPort: Invalid value: 0: must be between 1 and 65535, inclusive".to_string()));
    }

    #[test]
    fn qos() {
        let be = json!({"containers": [{"name": "a"}]});
        assert_eq!(qos_class(&be), "BestEffort");
        let g = json!({"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}}]});
        assert_eq!(qos_class(&g), "Guaranteed");
        let b = json!({"containers": [{"resources": {"requests": {"cpu": "1"}}}]});
        assert_eq!(qos_class(&b), "Burstable");
    }
}

//! autoscaling horizontalpodautoscalers (+`status`), served as v2 and v1 and stored once, as
//! v2 (kube's storage version): v1 objects are converted on the way in and out, carrying what
//! v1 cannot say in kube's round-trip annotations (`pkg/apis/autoscaling/v1/conversion.go`).

use serde_json::{Value, json};

use super::hpa_conversion::{to_v1, to_v2};
use super::{info, serve, status_subresource};
use crate::catalog::{Lifecycle, Resource, ResourceInfo, Strategy};
use crate::meta;
use crate::quantity::Quantity;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};
use crate::validation::{dns1123_label, path_segment_name, supported};

/// autoscaling/v2 first: the group's preferred version, as kube lists it.
pub fn resources() -> Vec<Resource> {
    let served = |version: &'static str| {
        let mut i: ResourceInfo = info("autoscaling", version, "HorizontalPodAutoscaler", "horizontalpodautoscalers", true);
        i.short_names = crate::catalog::names(&["hpa"]);
        i.categories = crate::catalog::names(&["all"]);
        i.subresources = vec![status_subresource(&i)];
        i
    };
    let mut v1 = served("v1");
    v1.stored_as = Some(("autoscaling".into(), "v2".into()));
    vec![serve(served("v2"), Hpa { v1: false }), serve(v1, Hpa { v1: true })]
}

struct Hpa {
    v1: bool,
}

const SPEC: &str = "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec";
const COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Reference", "string", Describe::Field(SPEC, "scaleTargetRef")),
    Column::new("Targets", "string", Describe::Field(SPEC, "metrics")),
    Column::new("MinPods", "string", Describe::Field(SPEC, "minReplicas")),
    Column::new("MaxPods", "string", Describe::Field(SPEC, "maxReplicas")),
    Column::new("Replicas", "string", Describe::Field("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus", "currentReplicas")),
    Column::AGE,
];

fn str_of<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    meta::str_at(v, path).unwrap_or_default()
}

fn positive_quantity(v: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(v) = v
        && v.as_str().and_then(Quantity::parse).is_some_and(|q| q.milli_value() <= 0)
    {
        errs.push(FieldError::invalid(path, v.clone(), "must be positive"));
    }
}

fn validate_target(t: &Value, path: &str, errs: &mut Vec<FieldError>) {
    match t.get("type").and_then(Value::as_str) {
        None | Some("") => errs.push(FieldError::required(format!("{path}.type"), "must specify a metric target type")),
        Some("Utilization" | "Value" | "AverageValue") => {}
        Some(other) => errs.push(FieldError::invalid(format!("{path}.type"), json!(other), "must be either Utilization, Value, or AverageValue")),
    }
    positive_quantity(t.get("value"), &format!("{path}.value"), errs);
    positive_quantity(t.get("averageValue"), &format!("{path}.averageValue"), errs);
    if let Some(u) = t.get("averageUtilization").and_then(Value::as_i64)
        && u < 1
    {
        errs.push(FieldError::invalid(format!("{path}.averageUtilization"), json!(u), "must be greater than 0"));
    }
}

fn validate_metric(m: &Value, at: &str, errs: &mut Vec<FieldError>) {
    const SOURCES: &[(&str, &str)] =
        &[("ContainerResource", "containerResource"), ("External", "external"), ("Object", "object"), ("Pods", "pods"), ("Resource", "resource")];
    let ty = m.get("type").and_then(Value::as_str).unwrap_or_default();
    let Some((_, member)) = SOURCES.iter().find(|(t, _)| *t == ty) else {
        if ty.is_empty() {
            errs.push(FieldError::required(format!("{at}.type"), "must specify a metric source type"));
        } else {
            errs.push(FieldError::not_supported(format!("{at}.type"), json!(ty), &SOURCES.iter().map(|(t, _)| *t).collect::<Vec<_>>()));
        }
        return;
    };
    for (_, other) in SOURCES {
        if other != member && m.get(*other).is_some_and(|v| !v.is_null()) {
            errs.push(FieldError::forbidden(format!("{at}.{other}"), "must populate the given metric source only"));
        }
    }
    let Some(source) = m.get(*member).filter(|v| !v.is_null()) else {
        errs.push(FieldError::required(format!("{at}.{member}"), "must populate information for the given metric source"));
        return;
    };
    let at = format!("{at}.{member}");
    let target = source.get("target").cloned().unwrap_or_default();
    validate_target(&target, &format!("{at}.target"), errs);
    if matches!(*member, "resource" | "containerResource") {
        if str_of(source, &["name"]).is_empty() {
            errs.push(FieldError::required(format!("{at}.name"), "must specify a resource name"));
        }
        if *member == "containerResource" {
            let c = str_of(source, &["container"]);
            if c.is_empty() {
                errs.push(FieldError::required(format!("{at}.container"), "must specify a container"));
            }
            for msg in dns1123_label(c).into_iter().filter(|_| !c.is_empty()) {
                errs.push(FieldError::invalid(format!("{at}.container"), json!(c), msg));
            }
        }
        let (util, avg) = (target.get("averageUtilization").is_some(), target.get("averageValue").is_some());
        if !util && !avg {
            errs.push(FieldError::required(format!("{at}.target.averageUtilization"), "must set either a target raw value or a target utilization"));
        }
        if util && avg {
            errs.push(FieldError::forbidden(format!("{at}.target.averageValue"), "may not set both a target raw value and a target utilization"));
        }
        return;
    }
    let name = str_of(source, &["metric", "name"]);
    if name.is_empty() {
        errs.push(FieldError::required(format!("{at}.metric.name"), "must specify a metric name"));
    }
    for msg in path_segment_name(name).into_iter().filter(|_| !name.is_empty()) {
        errs.push(FieldError::invalid(format!("{at}.metric.name"), json!(name), msg));
    }
    let (value, avg) = (target.get("value").is_some(), target.get("averageValue").is_some());
    match *member {
        "object" if !value && !avg => errs.push(FieldError::required(format!("{at}.target.averageValue"), "must set either a target value or averageValue")),
        "pods" if !avg => errs.push(FieldError::required(format!("{at}.target.averageValue"), "must specify a positive target averageValue")),
        "external" if !value && !avg => {
            errs.push(FieldError::required(format!("{at}.target.averageValue"), "must set either a target value for metric or a per-pod target"))
        }
        "external" if value && avg => {
            errs.push(FieldError::forbidden(format!("{at}.target.value"), "may not set both a target value for metric and a per-pod target"))
        }
        _ => {}
    }
}

fn validate_rules(rules: &Value, at: &str, errs: &mut Vec<FieldError>) {
    if let Some(w) = rules.get("stabilizationWindowSeconds").and_then(Value::as_i64) {
        if w < 0 {
            errs.push(FieldError::invalid(format!("{at}.stabilizationWindowSeconds"), json!(w), "must be greater than or equal to zero"));
        } else if w > 3600 {
            errs.push(FieldError::invalid(format!("{at}.stabilizationWindowSeconds"), json!(w), "must be less than or equal to 3600"));
        }
    }
    supported(errs, rules.get("selectPolicy"), &format!("{at}.selectPolicy"), &["Disabled", "Max", "Min"]);
    let policies = rules.get("policies").and_then(Value::as_array).cloned().unwrap_or_default();
    if policies.is_empty() {
        errs.push(FieldError::required(format!("{at}.policies"), "must specify at least one Policy"));
    }
    for (i, p) in policies.iter().enumerate() {
        let pat = format!("{at}.policies[{i}]");
        supported(errs, p.get("type"), &format!("{pat}.type"), &["Percent", "Pods"]);
        if p.get("value").and_then(Value::as_i64).unwrap_or(0) <= 0 {
            errs.push(FieldError::invalid(format!("{pat}.value"), p.get("value").cloned().unwrap_or(json!(0)), "must be greater than zero"));
        }
        match p.get("periodSeconds").and_then(Value::as_i64).unwrap_or(0) {
            s if s <= 0 => errs.push(FieldError::invalid(format!("{pat}.periodSeconds"), json!(s), "must be greater than zero")),
            s if s > 1800 => errs.push(FieldError::invalid(format!("{pat}.periodSeconds"), json!(s), "must be less than or equal to 1800")),
            _ => {}
        }
    }
}

/// `validateHorizontalPodAutoscalerSpec` on the stored (v2) form, as kube validates its
/// internal version whatever version was sent.
fn validate_v2(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let min = meta::at(obj, &["spec", "minReplicas"]).and_then(Value::as_i64);
    let max = meta::at(obj, &["spec", "maxReplicas"]).and_then(Value::as_i64).unwrap_or(0);
    if let Some(m) = min
        && m < 1
    {
        errs.push(FieldError::invalid("spec.minReplicas", json!(m), "must be greater than or equal to 1"));
    }
    if max < 1 {
        errs.push(FieldError::invalid("spec.maxReplicas", json!(max), "must be greater than 0"));
    }
    if min.is_some_and(|m| max < m) {
        errs.push(FieldError::invalid("spec.maxReplicas", json!(max), "must be greater than or equal to `minReplicas`"));
    }
    let target = meta::at(obj, &["spec", "scaleTargetRef"]).cloned().unwrap_or_default();
    for field in ["kind", "name"] {
        let v = str_of(&target, &[field]);
        if v.is_empty() {
            errs.push(FieldError::required(format!("spec.scaleTargetRef.{field}"), ""));
        }
        for msg in path_segment_name(v).into_iter().filter(|_| !v.is_empty()) {
            errs.push(FieldError::invalid(format!("spec.scaleTargetRef.{field}"), json!(v), msg));
        }
    }
    for (i, m) in meta::at(obj, &["spec", "metrics"]).and_then(Value::as_array).into_iter().flatten().enumerate() {
        validate_metric(m, &format!("spec.metrics[{i}]"), &mut errs);
    }
    for dir in ["scaleUp", "scaleDown"] {
        if let Some(rules) = meta::at(obj, &["spec", "behavior", dir]).filter(|r| !r.is_null()) {
            validate_rules(rules, &format!("spec.behavior.{dir}"), &mut errs);
        }
    }
    errs
}

/// `SetDefaults_HorizontalPodAutoscaler` of autoscaling/v2.
fn default_v2(obj: &mut Value) {
    let spec = meta::object_at(obj, &["spec"]);
    spec.entry("minReplicas").or_insert_with(|| json!(1));
    if spec.get("metrics").and_then(Value::as_array).is_none_or(Vec::is_empty) {
        spec.insert("metrics".into(), json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]));
    }
    let Some(Value::Object(behavior)) = spec.get_mut("behavior") else { return };
    let defaults = [
        ("scaleUp", json!(0), json!([{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}])),
        ("scaleDown", Value::Null, json!([{"type": "Percent", "value": 100, "periodSeconds": 15}])),
    ];
    for (dir, window, policies) in defaults {
        let Value::Object(rules) = behavior.entry(dir).or_insert_with(|| json!({})) else { continue };
        if !window.is_null() {
            rules.entry("stabilizationWindowSeconds").or_insert(window);
        }
        rules.entry("selectPolicy").or_insert_with(|| json!("Max"));
        rules.entry("policies").or_insert(policies);
    }
}

/// `formatHPAMetrics`: each metric's current value against its target, two at most.
fn targets(obj: &Value) -> String {
    let specs = meta::at(obj, &["spec", "metrics"]).and_then(Value::as_array).cloned().unwrap_or_default();
    if specs.is_empty() {
        return "<none>".into();
    }
    let statuses = meta::at(obj, &["status", "currentMetrics"]).and_then(Value::as_array).cloned().unwrap_or_default();
    let quantity = |v: Option<&Value>| v.and_then(Value::as_str).and_then(Quantity::parse).map(|q| q.canonical());
    let cells: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let status = statuses.get(i);
            let member = |ty: &str| match ty {
                "Resource" => "resource",
                "ContainerResource" => "containerResource",
                "Pods" => "pods",
                "Object" => "object",
                _ => "external",
            };
            let ty = str_of(m, &["type"]);
            let source = m.get(member(ty)).cloned().unwrap_or_default();
            let target = source.get("target").cloned().unwrap_or_default();
            let current = status.and_then(|s| s.get(member(ty))).and_then(|s| s.get("current")).cloned();
            let cur = |field: &str| current.as_ref().and_then(|c| quantity(c.get(field))).unwrap_or_else(|| "<unknown>".into());
            match ty {
                "External" | "Object" if target.get("averageValue").is_some() => {
                    format!("{}/{} (avg)", cur("averageValue"), quantity(target.get("averageValue")).unwrap_or_default())
                }
                "External" | "Object" => format!("{}/{}", cur("value"), quantity(target.get("value")).unwrap_or_default()),
                "Pods" => format!("{}/{}", cur("averageValue"), quantity(target.get("averageValue")).unwrap_or_default()),
                "Resource" | "ContainerResource" => {
                    let name = str_of(&source, &["name"]);
                    if target.get("averageValue").is_some() {
                        format!("{name}: {}/{}", cur("averageValue"), quantity(target.get("averageValue")).unwrap_or_default())
                    } else {
                        let c =
                            current.as_ref().and_then(|c| c.get("averageUtilization")).and_then(Value::as_i64).map_or("<unknown>".into(), |u| format!("{u}%"));
                        let t = target.get("averageUtilization").and_then(Value::as_i64).map_or("<auto>".into(), |u| format!("{u}%"));
                        format!("{name}: {c}/{t}")
                    }
                }
                _ => "<unknown type>".into(),
            }
        })
        .collect();
    let mut out = cells.iter().take(2).cloned().collect::<Vec<_>>().join(", ");
    if cells.len() > 2 {
        out.push_str(&format!(" + {} more...", cells.len() - 2));
    }
    out
}

impl Hpa {
    /// The object in its stored (v2) form.
    fn v2_view(&self, obj: &Value) -> Value {
        if self.v1 { to_v2(obj.clone()) } else { obj.clone() }
    }
}

impl Strategy for Hpa {
    fn stored_as_served(&self) -> bool {
        !self.v1
    }

    fn served_from_stored(&self, stored: Value) -> Value {
        if self.v1 { to_v1(stored) } else { stored }
    }

    fn stored_from_served(&self, served: &Value) -> Option<Value> {
        self.v1.then(|| to_v2(served.clone()))
    }

    fn default(&self, obj: &mut Value) {
        if self.v1 {
            meta::object_at(obj, &["spec"]).entry("minReplicas").or_insert_with(|| json!(1));
        } else {
            default_v2(obj);
        }
    }

    fn lifecycle(&self) -> Lifecycle {
        Lifecycle::Status
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_v2(&self.v2_view(obj))
    }

    fn validate_subresource_update(&self, _subresource: &str, new: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for field in ["currentReplicas", "desiredReplicas"] {
            if let Some(n) = meta::at(new, &["status", field]).and_then(Value::as_i64)
                && n < 0
            {
                errs.push(FieldError::invalid(format!("status.{field}"), json!(n), "must be greater than or equal to 0"));
            }
        }
        errs
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let v2 = self.v2_view(obj);
        let min = meta::at(&v2, &["spec", "minReplicas"]).and_then(Value::as_i64).map_or("<unset>".into(), |m| m.to_string());
        vec![
            json!(meta::name(obj)),
            json!(format!("{}/{}", str_of(&v2, &["spec", "scaleTargetRef", "kind"]), str_of(&v2, &["spec", "scaleTargetRef", "name"]))),
            json!(targets(&v2)),
            json!(min),
            json!(table::int_at(&v2, &["spec", "maxReplicas"])),
            json!(table::int_at(&v2, &["status", "currentReplicas"])),
            table::age(obj, now),
        ]
    }
}

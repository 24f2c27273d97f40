//! HorizontalPodAutoscaler between autoscaling/v2 (stored) and autoscaling/v1 (kube's
//! `pkg/apis/autoscaling/v1/conversion.go`): v1 says only a CPU utilization target; the other
//! metrics, the current metrics, the conditions and the scaling behavior travel in annotations
//! so that an object read and written back through v1 loses nothing.

use serde_json::{Map, Value, json};

use crate::meta;

const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";
const ROUND_TRIP: [&str; 4] = [METRICS, CURRENT_METRICS, CONDITIONS, BEHAVIOR];

/// The CPU utilization kube assumes when an autoscaler names no metric.
const DEFAULT_CPU_UTILIZATION: i64 = 80;

fn obj(pairs: Vec<(&str, Option<Value>)>) -> Value {
    Value::Object(pairs.into_iter().filter_map(|(k, v)| v.filter(|v| !v.is_null()).map(|v| (k.to_string(), v))).collect())
}

fn get(v: &Value, path: &[&str]) -> Option<Value> {
    meta::at(v, path).filter(|v| !v.is_null()).cloned()
}

fn is_cpu_utilization(m: &Value) -> bool {
    m.get("type").and_then(Value::as_str) == Some("Resource")
        && meta::str_at(m, &["resource", "name"]) == Some("cpu")
        && meta::at(m, &["resource", "target", "averageUtilization"]).is_some()
}

/// Where v1's annotation keeps each field of a metric source and where v2 keeps it: per
/// source type, its member's name and `(v1 field, v2 path)` pairs.
type Fields = &'static [(&'static str, &'static str, &'static [(&'static str, &'static [&'static str])])];

const SPEC_FIELDS: Fields = &[
    (
        "Resource",
        "resource",
        &[("name", &["name"]), ("targetAverageUtilization", &["target", "averageUtilization"]), ("targetAverageValue", &["target", "averageValue"])],
    ),
    (
        "ContainerResource",
        "containerResource",
        &[
            ("name", &["name"]),
            ("targetAverageUtilization", &["target", "averageUtilization"]),
            ("targetAverageValue", &["target", "averageValue"]),
            ("container", &["container"]),
        ],
    ),
    ("Pods", "pods", &[("metricName", &["metric", "name"]), ("targetAverageValue", &["target", "averageValue"]), ("selector", &["metric", "selector"])]),
    (
        "Object",
        "object",
        &[
            ("target", &["describedObject"]),
            ("metricName", &["metric", "name"]),
            ("targetValue", &["target", "value"]),
            ("selector", &["metric", "selector"]),
            ("averageValue", &["target", "averageValue"]),
        ],
    ),
    (
        "External",
        "external",
        &[
            ("metricName", &["metric", "name"]),
            ("metricSelector", &["metric", "selector"]),
            ("targetValue", &["target", "value"]),
            ("targetAverageValue", &["target", "averageValue"]),
        ],
    ),
];

const STATUS_FIELDS: Fields = &[
    (
        "Resource",
        "resource",
        &[("name", &["name"]), ("currentAverageUtilization", &["current", "averageUtilization"]), ("currentAverageValue", &["current", "averageValue"])],
    ),
    (
        "ContainerResource",
        "containerResource",
        &[
            ("name", &["name"]),
            ("currentAverageUtilization", &["current", "averageUtilization"]),
            ("currentAverageValue", &["current", "averageValue"]),
            ("container", &["container"]),
        ],
    ),
    ("Pods", "pods", &[("metricName", &["metric", "name"]), ("currentAverageValue", &["current", "averageValue"]), ("selector", &["metric", "selector"])]),
    (
        "Object",
        "object",
        &[
            ("target", &["describedObject"]),
            ("metricName", &["metric", "name"]),
            ("currentValue", &["current", "value"]),
            ("selector", &["metric", "selector"]),
            ("averageValue", &["current", "averageValue"]),
        ],
    ),
    (
        "External",
        "external",
        &[
            ("metricName", &["metric", "name"]),
            ("metricSelector", &["metric", "selector"]),
            ("currentValue", &["current", "value"]),
            ("currentAverageValue", &["current", "averageValue"]),
        ],
    ),
];

/// A v2 metric (spec or status) as v1's annotation spells it.
fn source_to_v1(m: &Value, fields: Fields) -> Value {
    let ty = m.get("type").cloned().unwrap_or_default();
    let Some((_, member, pairs)) = fields.iter().find(|(t, ..)| ty == *t) else { return obj(vec![("type", Some(ty))]) };
    let source = Value::Object(pairs.iter().filter_map(|(v1, path)| get(m, &[&[*member][..], path].concat()).map(|v| (v1.to_string(), v))).collect());
    obj(vec![("type", Some(ty)), (member, Some(source))])
}

/// A v1 annotation metric (spec or status) back in v2's shape.
fn source_to_v2(m: &Value, fields: Fields) -> Value {
    let ty = m.get("type").cloned().unwrap_or_default();
    let Some((_, member, pairs)) = fields.iter().find(|(t, ..)| ty == *t) else { return obj(vec![("type", Some(ty))]) };
    let mut out = obj(vec![("type", Some(ty.clone()))]);
    for (v1, path) in pairs.iter() {
        if let Some(v) = get(m, &[member, v1]) {
            let (last, parents) = path.split_last().expect("a path");
            meta::object_at(&mut out, &[&[*member][..], parents].concat()).insert(last.to_string(), v);
        }
    }
    out
}

/// A v1 annotation metric spec in v2's shape, with the target type v1 leaves implicit.
fn metric_to_v2(m: &Value) -> Value {
    let mut out = source_to_v2(m, SPEC_FIELDS);
    let ty = out.get("type").and_then(Value::as_str).unwrap_or_default().to_string();
    let Some((_, member, _)) = SPEC_FIELDS.iter().find(|(t, ..)| ty == *t) else { return out };
    let target = meta::object_at(&mut out, &[member, "target"]);
    let kind = match ty.as_str() {
        "Resource" | "ContainerResource" if target.contains_key("averageUtilization") => "Utilization",
        "Object" if !target.contains_key("averageValue") => "Value",
        "External" if target.contains_key("value") => "Value",
        _ => "AverageValue",
    };
    target.insert("type".into(), json!(kind));
    out
}

/// The behavior as kube writes it in the annotation: its internal Go type, which has no JSON
/// tags, so the keys are Go's field names in declaration order.
fn behavior_to_go(b: &Value) -> String {
    let rules = |dir: &str| match b.get(dir).filter(|r| !r.is_null()) {
        None => "null".to_string(),
        Some(r) => {
            let policies = match r.get("policies").and_then(Value::as_array) {
                None => "null".to_string(),
                Some(ps) => {
                    let items: Vec<String> = ps
                        .iter()
                        .map(|p| {
                            format!(
                                "{{\"Type\":{},\"Value\":{},\"PeriodSeconds\":{}}}",
                                p.get("type").unwrap_or(&json!("")),
                                p.get("value").unwrap_or(&json!(0)),
                                p.get("periodSeconds").unwrap_or(&json!(0))
                            )
                        })
                        .collect();
                    format!("[{}]", items.join(","))
                }
            };
            let field = |k: &str| r.get(k).cloned().unwrap_or(Value::Null).to_string();
            format!(
                "{{\"StabilizationWindowSeconds\":{},\"SelectPolicy\":{},\"Policies\":{policies},\"Tolerance\":{}}}",
                field("stabilizationWindowSeconds"),
                field("selectPolicy"),
                field("tolerance")
            )
        }
    };
    format!("{{\"ScaleUp\":{},\"ScaleDown\":{}}}", rules("scaleUp"), rules("scaleDown"))
}

/// The annotation's Go-named behavior back in v2's JSON names.
fn behavior_from_go(s: &str) -> Option<Value> {
    let go: Value = serde_json::from_str(s).ok()?;
    let rules = |dir: &str| {
        let r = go.get(dir).filter(|r| !r.is_null())?;
        let policies = r.get("Policies").and_then(Value::as_array).map(|ps| {
            Value::Array(
                ps.iter()
                    .map(|p| {
                        obj(vec![("type", p.get("Type").cloned()), ("value", p.get("Value").cloned()), ("periodSeconds", p.get("PeriodSeconds").cloned())])
                    })
                    .collect(),
            )
        });
        Some(obj(vec![
            ("stabilizationWindowSeconds", r.get("StabilizationWindowSeconds").cloned()),
            ("selectPolicy", r.get("SelectPolicy").cloned()),
            ("policies", policies),
            ("tolerance", r.get("Tolerance").cloned()),
        ]))
    };
    let b = obj(vec![("scaleUp", rules("ScaleUp")), ("scaleDown", rules("ScaleDown"))]);
    b.as_object().is_some_and(|m| !m.is_empty()).then_some(b)
}

fn annotations(obj: &mut Value) -> &mut Map<String, Value> {
    meta::object_at(obj, &["metadata", "annotations"])
}

fn drop_round_trip(obj: &mut Value) {
    if let Some(Value::Object(a)) = obj.get_mut("metadata").and_then(|m| m.get_mut("annotations")) {
        for k in ROUND_TRIP {
            a.remove(k);
        }
        if a.is_empty() {
            meta::remove_meta(obj, "annotations");
        }
    }
}

/// The stored (v2) object as autoscaling/v1 serves it.
pub fn to_v1(v2: Value) -> Value {
    let mut out = v2.clone();
    drop_round_trip(&mut out);
    if let Some(m) = out.as_object_mut() {
        m.insert("apiVersion".into(), json!("autoscaling/v1"));
        m.remove("spec");
        m.remove("status");
    }
    let metrics = meta::at(&v2, &["spec", "metrics"]).and_then(Value::as_array).cloned().unwrap_or_default();
    let cpu = metrics.iter().find(|m| m.get("type").and_then(Value::as_str) == Some("Resource") && meta::str_at(m, &["resource", "name"]) == Some("cpu"));
    out["spec"] = obj(vec![
        ("scaleTargetRef", get(&v2, &["spec", "scaleTargetRef"])),
        ("minReplicas", get(&v2, &["spec", "minReplicas"])),
        ("maxReplicas", Some(get(&v2, &["spec", "maxReplicas"]).unwrap_or(json!(0)))),
        ("targetCPUUtilizationPercentage", cpu.and_then(|m| get(m, &["resource", "target", "averageUtilization"]))),
    ]);
    let current = meta::at(&v2, &["status", "currentMetrics"]).and_then(Value::as_array).cloned().unwrap_or_default();
    let current_cpu = current
        .iter()
        .find(|m| m.get("type").and_then(Value::as_str) == Some("Resource") && meta::str_at(m, &["resource", "name"]) == Some("cpu"))
        .and_then(|m| get(m, &["resource", "current", "averageUtilization"]));
    if v2.get("status").is_some() {
        out["status"] = obj(vec![
            ("observedGeneration", get(&v2, &["status", "observedGeneration"])),
            ("lastScaleTime", get(&v2, &["status", "lastScaleTime"])),
            ("currentReplicas", Some(get(&v2, &["status", "currentReplicas"]).unwrap_or(json!(0)))),
            ("desiredReplicas", Some(get(&v2, &["status", "desiredReplicas"]).unwrap_or(json!(0)))),
            ("currentCPUUtilizationPercentage", current_cpu),
        ]);
    }
    let others: Vec<Value> = metrics.iter().filter(|m| !is_cpu_utilization(m)).map(|m| source_to_v1(m, SPEC_FIELDS)).collect();
    if !others.is_empty() {
        annotations(&mut out).insert(METRICS.into(), json!(Value::Array(others).to_string()));
    }
    if !current.is_empty() {
        annotations(&mut out).insert(CURRENT_METRICS.into(), json!(Value::Array(current.iter().map(|m| source_to_v1(m, STATUS_FIELDS)).collect()).to_string()));
    }
    if let Some(b) = get(&v2, &["spec", "behavior"]) {
        annotations(&mut out).insert(BEHAVIOR.into(), json!(behavior_to_go(&b)));
    }
    if let Some(c) = meta::at(&v2, &["status", "conditions"]).and_then(Value::as_array).filter(|c| !c.is_empty()) {
        annotations(&mut out).insert(CONDITIONS.into(), json!(Value::Array(c.clone()).to_string()));
    }
    out
}

/// An autoscaling/v1 object in its stored (v2) form.
pub fn to_v2(v1: Value) -> Value {
    let annotation = |k: &str| meta::str_at(&v1, &["metadata", "annotations", k]).and_then(|s| serde_json::from_str::<Value>(s).ok());
    let mut metrics: Vec<Value> = annotation(METRICS).and_then(|v| v.as_array().cloned()).unwrap_or_default().iter().map(metric_to_v2).collect();
    if let Some(cpu) = get(&v1, &["spec", "targetCPUUtilizationPercentage"]) {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": cpu}}}));
    }
    if metrics.is_empty() {
        metrics
            .push(json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}}}));
    }
    let behavior = meta::str_at(&v1, &["metadata", "annotations", BEHAVIOR]).and_then(behavior_from_go);
    let current = match annotation(CURRENT_METRICS).and_then(|v| v.as_array().cloned()) {
        Some(list) => Some(Value::Array(list.iter().map(|m| source_to_v2(m, STATUS_FIELDS)).collect())),
        None => get(&v1, &["status", "currentCPUUtilizationPercentage"])
            .map(|u| json!([{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": u}}}])),
    };
    let mut out = v1.clone();
    drop_round_trip(&mut out);
    if let Some(m) = out.as_object_mut() {
        m.insert("apiVersion".into(), json!("autoscaling/v2"));
        m.remove("spec");
        m.remove("status");
    }
    out["spec"] = obj(vec![
        ("scaleTargetRef", get(&v1, &["spec", "scaleTargetRef"])),
        ("minReplicas", get(&v1, &["spec", "minReplicas"])),
        ("maxReplicas", Some(get(&v1, &["spec", "maxReplicas"]).unwrap_or(json!(0)))),
        ("metrics", Some(Value::Array(metrics))),
        ("behavior", behavior),
    ]);
    if v1.get("status").is_some() {
        out["status"] = obj(vec![
            ("observedGeneration", get(&v1, &["status", "observedGeneration"])),
            ("lastScaleTime", get(&v1, &["status", "lastScaleTime"])),
            ("currentReplicas", Some(get(&v1, &["status", "currentReplicas"]).unwrap_or(json!(0)))),
            ("desiredReplicas", Some(get(&v1, &["status", "desiredReplicas"]).unwrap_or(json!(0)))),
            ("currentMetrics", current),
            ("conditions", annotation(CONDITIONS)),
        ]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_only_fields_survive_a_trip_through_v1() {
        let v2 = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h", "annotations": {"keep": "me"}},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"}, "minReplicas": 1, "maxReplicas": 5,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}},
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}],
                "behavior": {"scaleDown": {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}},
            "status": {"currentReplicas": 2, "desiredReplicas": 3,
                "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 12}}}],
                "conditions": [{"type": "AbleToScale", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "R", "message": "m"}]}});
        let v1 = to_v1(v2.clone());
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60);
        assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 12);
        assert_eq!(v1["metadata"]["annotations"][METRICS], r#"[{"resource":{"name":"memory","targetAverageValue":"100Mi"},"type":"Resource"}]"#);
        assert_eq!(
            v1["metadata"]["annotations"][BEHAVIOR],
            r#"{"ScaleUp":null,"ScaleDown":{"StabilizationWindowSeconds":null,"SelectPolicy":"Max","Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null}}"#
        );
        let back = to_v2(v1);
        assert_eq!(back["spec"]["metrics"], v2["spec"]["metrics"]);
        assert_eq!(back["spec"]["behavior"], v2["spec"]["behavior"]);
        assert_eq!(back["status"], v2["status"]);
        assert_eq!(back["metadata"], v2["metadata"]);
    }

    #[test]
    fn a_v1_object_without_a_target_gets_kubes_default_cpu_target() {
        let v2 = to_v2(json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3}}));
        assert_eq!(v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], DEFAULT_CPU_UTILIZATION);
        assert!(v2.get("status").is_none());
    }
}

//! flowcontrol.apiserver.k8s.io/v1 flow schemas and priority level configurations (+`status`)
//! as objects, with kube's defaults and validation; the ones kube creates at start are in
//! `flowcontrol_bootstrap`.

use serde_json::{Value, json};

use super::{info, serve, status_subresource};
use crate::catalog::{Lifecycle, Resource, Strategy};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};
use crate::validation::supported;

const G: &str = "flowcontrol.apiserver.k8s.io";

pub fn resources() -> Vec<Resource> {
    let mut schemas = info(G, "v1", "FlowSchema", "flowschemas", false);
    schemas.subresources = vec![status_subresource(&schemas)];
    let mut levels = info(G, "v1", "PriorityLevelConfiguration", "prioritylevelconfigurations", false);
    levels.subresources = vec![status_subresource(&levels)];
    vec![serve(schemas, Flow::Schemas), serve(levels, Flow::Levels)]
}

enum Flow {
    Schemas,
    Levels,
}

const FS_SPEC: &str = "io.k8s.api.flowcontrol.v1.FlowSchemaSpec";
const SCHEMA_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("PriorityLevel", "string", Describe::Field("io.k8s.api.flowcontrol.v1.PriorityLevelConfigurationReference", "name")),
    Column::new("MatchingPrecedence", "string", Describe::Field(FS_SPEC, "matchingPrecedence")),
    Column::new("DistinguisherMethod", "string", Describe::Field(FS_SPEC, "distinguisherMethod")),
    Column::AGE,
    Column::new("MissingPL", "string", Describe::Text("references a broken or non-existent PriorityLevelConfiguration")),
];

const QUEUING: &str = "io.k8s.api.flowcontrol.v1.QueuingConfiguration";
const LEVEL_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Type", "string", Describe::Field("io.k8s.api.flowcontrol.v1.PriorityLevelConfigurationSpec", "type")),
    Column::new(
        "NominalConcurrencyShares",
        "string",
        Describe::Field("io.k8s.api.flowcontrol.v1.LimitedPriorityLevelConfiguration", "nominalConcurrencyShares"),
    ),
    Column::new("Queues", "string", Describe::Field(QUEUING, "queues")),
    Column::new("HandSize", "string", Describe::Field(QUEUING, "handSize")),
    Column::new("QueueLengthLimit", "string", Describe::Field(QUEUING, "queueLengthLimit")),
    Column::AGE,
];

const VERBS: &[&str] = &["get", "list", "create", "update", "delete", "deletecollection", "patch", "watch", "proxy"];

fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect()
}

fn star_alone(list: &[&str], path: &str, what: &str, errs: &mut Vec<FieldError>) {
    if list.len() > 1 && list.contains(&"*") {
        errs.push(FieldError::invalid(path, json!(list), format!("if '*' is present, must not specify other {what}")));
    }
}

fn validate_verbs(rule: &Value, at: &str, errs: &mut Vec<FieldError>) {
    let verbs = strings(rule.get("verbs"));
    if verbs.is_empty() {
        errs.push(FieldError::required(format!("{at}.verbs"), "verbs must contain at least one value"));
    }
    star_alone(&verbs, &format!("{at}.verbs"), "verbs", errs);
    for v in verbs.iter().filter(|v| **v != "*") {
        if !VERBS.contains(v) {
            errs.push(FieldError::not_supported(format!("{at}.verbs"), json!(v), VERBS));
        }
    }
}

fn validate_schema(obj: &Value, errs: &mut Vec<FieldError>) {
    let precedence = meta::at(obj, &["spec", "matchingPrecedence"]).and_then(Value::as_i64).unwrap_or(0);
    if precedence <= 0 {
        errs.push(FieldError::invalid("spec.matchingPrecedence", json!(precedence), "must be a positive value"));
    } else if precedence > 10000 {
        errs.push(FieldError::invalid("spec.matchingPrecedence", json!(precedence), "must not be greater than 10000"));
    } else if precedence == 1 && meta::name(obj) != "exempt" {
        errs.push(FieldError::invalid("spec.matchingPrecedence", json!(precedence), "only the schema named 'exempt' may have matchingPrecedence 1"));
    }
    supported(errs, meta::at(obj, &["spec", "distinguisherMethod", "type"]), "spec.distinguisherMethod.type", &["ByNamespace", "ByUser"]);
    if meta::str_at(obj, &["spec", "priorityLevelConfiguration", "name"]).is_none_or(str::is_empty) {
        errs.push(FieldError::required("spec.priorityLevelConfiguration.name", "must reference a priority level"));
    }
    for (i, rule) in meta::at(obj, &["spec", "rules"]).and_then(Value::as_array).into_iter().flatten().enumerate() {
        let at = format!("spec.rules[{i}]");
        let subjects = rule.get("subjects").and_then(Value::as_array).cloned().unwrap_or_default();
        if subjects.is_empty() {
            errs.push(FieldError::required(format!("{at}.subjects"), "subjects must contain at least one value"));
        }
        for (j, s) in subjects.iter().enumerate() {
            let sat = format!("{at}.subjects[{j}]");
            let kinds = [("Group", "group"), ("ServiceAccount", "serviceAccount"), ("User", "user")];
            match kinds.iter().find(|(k, _)| s.get("kind").and_then(Value::as_str) == Some(k)) {
                None => errs.push(FieldError::not_supported(
                    format!("{sat}.kind"),
                    s.get("kind").cloned().unwrap_or(json!("")),
                    &["Group", "ServiceAccount", "User"],
                )),
                Some((kind, member)) => {
                    if s.get(*member).is_none_or(Value::is_null) {
                        errs.push(FieldError::required(format!("{sat}.{member}"), format!("{member} is required when subject kind is '{kind}'")));
                    }
                    for (other_kind, other) in kinds.iter().filter(|(_, m)| m != member) {
                        if s.get(*other).is_some_and(|v| !v.is_null()) {
                            errs.push(FieldError::forbidden(format!("{sat}.{other}"), format!("{other} is forbidden when subject kind is not '{other_kind}'")));
                        }
                    }
                }
            }
        }
        let (resource_rules, other_rules) = (rule.get("resourceRules").and_then(Value::as_array), rule.get("nonResourceRules").and_then(Value::as_array));
        if resource_rules.is_none_or(Vec::is_empty) && other_rules.is_none_or(Vec::is_empty) {
            errs.push(FieldError::required(at.clone(), "at least one of resourceRules and nonResourceRules has to be non-empty"));
        }
        for (j, r) in resource_rules.into_iter().flatten().enumerate() {
            let rat = format!("{at}.resourceRules[{j}]");
            validate_verbs(r, &rat, errs);
            for (field, what, msg) in [
                ("apiGroups", "api groups", "resource rules must supply at least one api group"),
                ("resources", "resources", "resource rules must supply at least one resource"),
            ] {
                let list = strings(r.get(field));
                if list.is_empty() {
                    errs.push(FieldError::required(format!("{rat}.{field}"), msg));
                }
                star_alone(&list, &format!("{rat}.{field}"), what, errs);
            }
            if strings(r.get("namespaces")).is_empty() && r.get("clusterScope").and_then(Value::as_bool) != Some(true) {
                errs.push(FieldError::required(format!("{rat}.namespaces"), "resource rules that are not cluster scoped must supply at least one namespace"));
            }
        }
        for (j, r) in other_rules.into_iter().flatten().enumerate() {
            let rat = format!("{at}.nonResourceRules[{j}]");
            validate_verbs(r, &rat, errs);
            let urls = strings(r.get("nonResourceURLs"));
            if urls.is_empty() {
                errs.push(FieldError::required(format!("{rat}.nonResourceURLs"), "nonResourceURLs must contain at least one value"));
            }
            star_alone(&urls, &format!("{rat}.nonResourceURLs"), "non-resource URLs", errs);
        }
    }
}

fn validate_level(obj: &Value, errs: &mut Vec<FieldError>) {
    let ty = meta::str_at(obj, &["spec", "type"]).unwrap_or_default();
    if (ty == "Exempt") != (meta::name(obj) == "exempt") {
        errs.push(FieldError::invalid("spec.type", json!(ty), "type must be 'Exempt' if and only if name is 'exempt'"));
    }
    let limited = meta::at(obj, &["spec", "limited"]).filter(|l| !l.is_null());
    match ty {
        "Exempt" if limited.is_some() => errs.push(FieldError::forbidden("spec.limited", "must be nil if the type is not Limited")),
        "Exempt" => {}
        "Limited" => match limited {
            None => errs.push(FieldError::required("spec.limited", "must not be empty when type is Limited")),
            Some(l) => {
                if l.get("nominalConcurrencyShares").and_then(Value::as_i64).is_some_and(|n| n <= 0) {
                    errs.push(FieldError::invalid("spec.limited.nominalConcurrencyShares", l["nominalConcurrencyShares"].clone(), "must be positive"));
                }
                if l.get("lendablePercent").and_then(Value::as_i64).is_some_and(|p| !(0..=100).contains(&p)) {
                    errs.push(FieldError::invalid("spec.limited.lendablePercent", l["lendablePercent"].clone(), "must be between 0 and 100, inclusive"));
                }
                let response = l.get("limitResponse").cloned().unwrap_or_default();
                let queuing = response.get("queuing").filter(|q| !q.is_null());
                match response.get("type").and_then(Value::as_str).unwrap_or_default() {
                    "Reject" if queuing.is_some() => {
                        errs.push(FieldError::forbidden("spec.limited.limitResponse.queuing", "must be nil if limited.limitResponse.type is not Limited"))
                    }
                    "Queue" if queuing.is_none() => {
                        errs.push(FieldError::required("spec.limited.limitResponse.queuing", "must not be empty if limited.limitResponse.type is Limited"))
                    }
                    "Reject" | "Queue" => {}
                    other => errs.push(FieldError::not_supported("spec.limited.limitResponse.type", json!(other), &["Queue", "Reject"])),
                }
                if let Some(q) = queuing {
                    for field in ["queueLengthLimit", "queues", "handSize"] {
                        if q.get(field).and_then(Value::as_i64).unwrap_or(0) <= 0 {
                            errs.push(FieldError::invalid(
                                format!("spec.limited.limitResponse.queuing.{field}"),
                                q.get(field).cloned().unwrap_or(json!(0)),
                                "must be positive",
                            ));
                        }
                    }
                    let (queues, hand) = (q.get("queues").and_then(Value::as_i64).unwrap_or(0), q.get("handSize").and_then(Value::as_i64).unwrap_or(0));
                    if hand > queues && queues > 0 {
                        errs.push(FieldError::invalid(
                            "spec.limited.limitResponse.queuing.handSize",
                            json!(hand),
                            format!("should not be greater than queues ({queues})"),
                        ));
                    }
                }
            }
        },
        other => errs.push(FieldError::not_supported("spec.type", json!(other), &["Exempt", "Limited"])),
    }
}

impl Strategy for Flow {
    fn default(&self, obj: &mut Value) {
        let spec = meta::object_at(obj, &["spec"]);
        match self {
            Flow::Schemas => {
                if spec.get("matchingPrecedence").and_then(Value::as_i64).unwrap_or(0) == 0 {
                    spec.insert("matchingPrecedence".into(), json!(1000));
                }
            }
            Flow::Levels => {
                if let Some(Value::Object(l)) = spec.get_mut("limited") {
                    l.entry("nominalConcurrencyShares").or_insert_with(|| json!(30));
                    l.entry("lendablePercent").or_insert_with(|| json!(0));
                    if let Some(Value::Object(q)) = l.get_mut("limitResponse").and_then(|r| r.get_mut("queuing")) {
                        for (k, v) in [("handSize", 8), ("queues", 64), ("queueLengthLimit", 50)] {
                            if q.get(k).and_then(Value::as_i64).unwrap_or(0) == 0 {
                                q.insert(k.into(), json!(v));
                            }
                        }
                    }
                }
                if let Some(Value::Object(e)) = spec.get_mut("exempt") {
                    e.entry("nominalConcurrencyShares").or_insert_with(|| json!(0));
                    e.entry("lendablePercent").or_insert_with(|| json!(0));
                }
            }
        }
    }

    fn lifecycle(&self) -> Lifecycle {
        Lifecycle::StatusAndGeneration
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        match self {
            Flow::Schemas => validate_schema(obj, &mut errs),
            Flow::Levels => validate_level(obj, &mut errs),
        }
        errs
    }

    fn columns(&self) -> &'static [Column] {
        match self {
            Flow::Schemas => SCHEMA_COLUMNS,
            Flow::Levels => LEVEL_COLUMNS,
        }
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let name = json!(meta::name(obj));
        match self {
            Flow::Schemas => {
                let missing = meta::at(obj, &["status", "conditions"])
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some("Dangling"))
                    .and_then(|c| c.get("status").cloned())
                    .unwrap_or(json!("?"));
                vec![
                    name,
                    json!(table::str_or(obj, &["spec", "priorityLevelConfiguration", "name"], "")),
                    json!(table::int_at(obj, &["spec", "matchingPrecedence"])),
                    json!(table::str_or(obj, &["spec", "distinguisherMethod", "type"], "<none>")),
                    table::age(obj, now),
                    missing,
                ]
            }
            Flow::Levels => {
                let cell = |path: &[&str]| meta::at(obj, path).filter(|v| v.is_i64()).cloned().unwrap_or(json!("<none>"));
                let q = ["spec", "limited", "limitResponse", "queuing"];
                vec![
                    name,
                    json!(table::str_or(obj, &["spec", "type"], "")),
                    cell(&["spec", "limited", "nominalConcurrencyShares"]),
                    cell(&[&q[..], &["queues"]].concat()),
                    cell(&[&q[..], &["handSize"]].concat()),
                    cell(&[&q[..], &["queueLengthLimit"]].concat()),
                    table::age(obj, now),
                ]
            }
        }
    }
}

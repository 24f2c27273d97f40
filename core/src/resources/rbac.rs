//! rbac.authorization.k8s.io/v1: roles, role bindings, cluster roles and cluster role bindings
//! as objects (kube's `pkg/registry/rbac` strategies and `pkg/apis/rbac/validation`). Who may
//! grant what (escalation checks) belongs to the authorizer.

use serde_json::{Value, json};

use super::{info, serve};
use crate::catalog::{Resource, Strategy};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};
use crate::validation::{NameCheck, dns1123_subdomain, label_selector, path_segment_name};

const G: &str = "rbac.authorization.k8s.io";

pub fn resources() -> Vec<Resource> {
    let kind = |kind: &'static str, resource: &'static str, namespaced: bool, strategy: Rbac| serve(info(G, "v1", kind, resource, namespaced), strategy);
    vec![
        kind("ClusterRoleBinding", "clusterrolebindings", false, Rbac::Binding { cluster: true }),
        kind("ClusterRole", "clusterroles", false, Rbac::Role { cluster: true }),
        kind("RoleBinding", "rolebindings", true, Rbac::Binding { cluster: false }),
        kind("Role", "roles", true, Rbac::Role { cluster: false }),
    ]
}

enum Rbac {
    Role { cluster: bool },
    Binding { cluster: bool },
}

const BINDING_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Role", "string", Describe::Field("io.k8s.api.rbac.v1.RoleBinding", "roleRef")),
    Column::AGE,
    Column::new("Users", "string", Describe::Text("Users in the roleBinding")).wide(),
    Column::new("Groups", "string", Describe::Text("Groups in the roleBinding")).wide(),
    Column::new("ServiceAccounts", "string", Describe::Text("ServiceAccounts in the roleBinding")).wide(),
];

const CLUSTER_BINDING_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Role", "string", Describe::Field("io.k8s.api.rbac.v1.ClusterRoleBinding", "roleRef")),
    Column::AGE,
    Column::new("Users", "string", Describe::Text("Users in the clusterRoleBinding")).wide(),
    Column::new("Groups", "string", Describe::Text("Groups in the clusterRoleBinding")).wide(),
    Column::new("ServiceAccounts", "string", Describe::Text("ServiceAccounts in the clusterRoleBinding")).wide(),
];

fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect()
}

fn validate_rules(obj: &Value, cluster: bool, errs: &mut Vec<FieldError>) {
    for (i, rule) in obj.get("rules").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let at = format!("rules[{i}]");
        if strings(rule.get("verbs")).is_empty() {
            errs.push(FieldError::required(format!("{at}.verbs"), "verbs must contain at least one value"));
        }
        let urls = strings(rule.get("nonResourceURLs"));
        if !urls.is_empty() {
            if !cluster {
                errs.push(FieldError::invalid(format!("{at}.nonResourceURLs"), json!(urls), "namespaced rules cannot apply to non-resource URLs"));
            }
            if ["apiGroups", "resources", "resourceNames"].iter().any(|k| !strings(rule.get(*k)).is_empty()) {
                errs.push(FieldError::invalid(
                    format!("{at}.nonResourceURLs"),
                    json!(urls),
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if rule.get("apiGroups").and_then(Value::as_array).is_none_or(Vec::is_empty) {
            errs.push(FieldError::required(format!("{at}.apiGroups"), "resource rules must supply at least one api group"));
        }
        if strings(rule.get("resources")).is_empty() {
            errs.push(FieldError::required(format!("{at}.resources"), "resource rules must supply at least one resource"));
        }
    }
    if let Some(agg) = obj.get("aggregationRule").filter(|a| !a.is_null()) {
        let selectors = agg.get("clusterRoleSelectors").and_then(Value::as_array).cloned().unwrap_or_default();
        if selectors.is_empty() {
            errs.push(FieldError::required("aggregationRule.clusterRoleSelectors", "at least one clusterRoleSelector required if aggregationRule is non-nil"));
        }
        for (i, s) in selectors.iter().enumerate() {
            errs.extend(label_selector(Some(s), &format!("aggregationRule.clusterRoleSelectors[{i}]")));
        }
    }
}

fn validate_binding(obj: &Value, cluster: bool, errs: &mut Vec<FieldError>) {
    let role_ref = obj.get("roleRef").cloned().unwrap_or_default();
    let group = role_ref.get("apiGroup").cloned().unwrap_or(json!(""));
    if group != G {
        errs.push(FieldError::not_supported("roleRef.apiGroup", group, &[G]));
    }
    let kinds: &[&str] = if cluster { &["ClusterRole"] } else { &["Role", "ClusterRole"] };
    crate::validation::supported(errs, Some(role_ref.get("kind").unwrap_or(&json!(""))), "roleRef.kind", kinds);
    let name = role_ref.get("name").and_then(Value::as_str).unwrap_or_default();
    if name.is_empty() {
        errs.push(FieldError::required("roleRef.name", ""));
    } else {
        for msg in path_segment_name(name) {
            errs.push(FieldError::invalid("roleRef.name", json!(name), msg));
        }
    }
    for (i, s) in obj.get("subjects").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let at = format!("subjects[{i}]");
        let name = s.get("name").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty() {
            errs.push(FieldError::required(format!("{at}.name"), ""));
        }
        let group = s.get("apiGroup").cloned().unwrap_or(json!(""));
        match s.get("kind").and_then(Value::as_str).unwrap_or_default() {
            "ServiceAccount" => {
                if !name.is_empty() {
                    for msg in dns1123_subdomain(name) {
                        errs.push(FieldError::invalid(format!("{at}.name"), json!(name), msg));
                    }
                }
                if group != "" {
                    errs.push(FieldError::not_supported(format!("{at}.apiGroup"), group, &[""]));
                }
                if cluster && s.get("namespace").and_then(Value::as_str).is_none_or(str::is_empty) {
                    errs.push(FieldError::required(format!("{at}.namespace"), ""));
                }
            }
            "User" | "Group" => {
                if group != G {
                    errs.push(FieldError::not_supported(format!("{at}.apiGroup"), group, &[G]));
                }
            }
            _ => errs.push(FieldError::not_supported(format!("{at}.kind"), s.get("kind").cloned().unwrap_or(json!("")), &["ServiceAccount", "User", "Group"])),
        }
    }
}

/// `rbac.SubjectsStrings`: users, groups and service accounts (`namespace/name`), comma separated.
fn subjects(obj: &Value) -> [String; 3] {
    let mut out: [Vec<String>; 3] = Default::default();
    for s in obj.get("subjects").and_then(Value::as_array).into_iter().flatten() {
        let name = s.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
        match s.get("kind").and_then(Value::as_str).unwrap_or_default() {
            "User" => out[0].push(name),
            "Group" => out[1].push(name),
            "ServiceAccount" => out[2].push(format!("{}/{name}", s.get("namespace").and_then(Value::as_str).unwrap_or_default())),
            _ => {}
        }
    }
    out.map(|v| v.join(", "))
}

impl Strategy for Rbac {
    fn default(&self, obj: &mut Value) {
        if let Rbac::Binding { .. } = self {
            if let Some(Value::Object(r)) = obj.get_mut("roleRef")
                && r.get("apiGroup").and_then(Value::as_str).is_none_or(str::is_empty)
            {
                r.insert("apiGroup".into(), json!(G));
            }
            for s in obj.get_mut("subjects").and_then(Value::as_array_mut).into_iter().flatten() {
                let Value::Object(s) = s else { continue };
                if s.get("apiGroup").and_then(Value::as_str).is_none_or(str::is_empty) {
                    let group = match s.get("kind").and_then(Value::as_str) {
                        Some("ServiceAccount") => "",
                        Some("User" | "Group") => G,
                        _ => continue,
                    };
                    s.insert("apiGroup".into(), json!(group));
                }
            }
        }
    }

    fn name_check(&self) -> NameCheck {
        path_segment_name
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        match self {
            Rbac::Role { cluster } => validate_rules(obj, *cluster, &mut errs),
            Rbac::Binding { cluster } => validate_binding(obj, *cluster, &mut errs),
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if let Rbac::Binding { .. } = self
            && new.get("roleRef") != old.get("roleRef")
        {
            errs.push(FieldError::invalid("roleRef", new.get("roleRef").cloned().unwrap_or_default(), "cannot change roleRef"));
        }
        errs
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn columns(&self) -> &'static [Column] {
        match self {
            Rbac::Role { .. } => table::DEFAULT_COLUMNS,
            Rbac::Binding { cluster: false } => BINDING_COLUMNS,
            Rbac::Binding { cluster: true } => CLUSTER_BINDING_COLUMNS,
        }
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        match self {
            Rbac::Role { .. } => vec![json!(meta::name(obj)), json!(table::created_at(obj))],
            Rbac::Binding { .. } => {
                let role =
                    format!("{}/{}", meta::str_at(obj, &["roleRef", "kind"]).unwrap_or_default(), meta::str_at(obj, &["roleRef", "name"]).unwrap_or_default());
                let [users, groups, sas] = subjects(obj);
                vec![json!(meta::name(obj)), json!(role), table::age(obj, now), json!(users), json!(groups), json!(sas)]
            }
        }
    }
}

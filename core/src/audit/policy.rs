//! An audit policy (`--audit-policy-file`, kube's `audit.k8s.io/v1` `Policy`): its rules, read
//! and checked as kube-apiserver reads them, and the level and omitted stages the first rule
//! that matches a request gives it (kube's `policyRuleEvaluator`).

use serde::Deserialize;

use crate::auth::UserInfo;
use crate::status::quote;

/// How much of a request an event records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    None,
    Metadata,
    Request,
    RequestResponse,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
            Level::RequestResponse => "RequestResponse",
        }
    }
}

/// Where in its handling a request's event is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    RequestReceived,
    ResponseStarted,
    ResponseComplete,
    Panic,
}

const STAGES: [(&str, Stage); 4] = [
    ("RequestReceived", Stage::RequestReceived),
    ("ResponseStarted", Stage::ResponseStarted),
    ("ResponseComplete", Stage::ResponseComplete),
    ("Panic", Stage::Panic),
];

impl Stage {
    pub fn name(self) -> &'static str {
        STAGES.iter().find(|(_, s)| *s == self).map(|(n, _)| *n).unwrap_or_default()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PolicyFile {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    rules: Vec<RuleFile>,
    #[serde(default)]
    omit_stages: Vec<String>,
    #[serde(default)]
    omit_managed_fields: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuleFile {
    #[serde(default)]
    level: String,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    user_groups: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default)]
    resources: Vec<GroupResources>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    non_resource_urls: Vec<String>,
    #[serde(default)]
    omit_stages: Vec<String>,
    omit_managed_fields: Option<bool>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupResources {
    #[serde(default)]
    group: String,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource_names: Vec<String>,
}

#[derive(Debug)]
struct Rule {
    level: Level,
    users: Vec<String>,
    user_groups: Vec<String>,
    verbs: Vec<String>,
    resources: Vec<GroupResources>,
    namespaces: Vec<String>,
    non_resource_urls: Vec<String>,
    /// The rule's own, with the policy's.
    omit_stages: Vec<Stage>,
    omit_managed_fields: bool,
}

/// A policy read from its file.
#[derive(Debug)]
pub struct Policy {
    rules: Vec<Rule>,
    omit_stages: Vec<Stage>,
    omit_managed_fields: bool,
}

/// What the policy makes of one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub level: Level,
    pub omit_stages: Vec<Stage>,
    pub omit_managed_fields: bool,
}

/// A request as the rules see it (kube's authorizer attributes).
pub struct Request<'a> {
    pub user: &'a UserInfo,
    pub verb: &'a str,
    pub resource_request: bool,
    pub path: &'a str,
    pub namespace: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub name: &'a str,
}

fn stages(names: &[String], path: &str, errors: &mut Vec<String>) -> Vec<Stage> {
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        match STAGES.iter().find(|(n, _)| n == name) {
            Some((_, s)) => out.push(*s),
            None => {
                errors.push(format!("{path}[{i}]: Invalid value: {}: allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic", quote(name)))
            }
        }
    }
    out
}

fn level(name: &str, path: &str, errors: &mut Vec<String>) -> Level {
    match name {
        "None" => Level::None,
        "Metadata" => Level::Metadata,
        "Request" => Level::Request,
        "RequestResponse" => Level::RequestResponse,
        "" => {
            errors.push(format!("{path}: Required value"));
            Level::None
        }
        other => {
            errors.push(format!("{path}: Unsupported value: {}: supported values: \"None\", \"Metadata\", \"Request\", \"RequestResponse\"", quote(other)));
            Level::None
        }
    }
}

fn go_list(items: &[String]) -> String {
    format!("[]string{{{}}}", items.iter().map(|s| quote(s)).collect::<Vec<_>>().join(", "))
}

impl Rule {
    fn read(r: RuleFile, i: usize, policy: &PolicyFile, errors: &mut Vec<String>) -> Rule {
        let path = format!("rules[{i}]");
        let level = level(&r.level, &format!("{path}.level"), errors);
        for (j, url) in r.non_resource_urls.iter().enumerate().filter(|(_, u)| *u != "*") {
            let at = format!("{path}.nonResourceURLs[{j}]: Invalid value: {}", quote(url));
            if !url.starts_with('/') {
                errors.push(format!("{at}: non-resource URL rules must begin with a '/' character"));
            }
            if url.len() > 1 && url[..url.len() - 1].contains('*') {
                errors.push(format!("{at}: non-resource URL wildcards '*' must be the final character of the rule"));
            }
        }
        for gr in &r.resources {
            if !gr.resource_names.is_empty() && gr.resources.is_empty() {
                errors.push(format!(
                    "{path}.resources.resourceNames: Invalid value: {}: using resourceNames requires at least one resource",
                    go_list(&gr.resource_names)
                ));
            }
        }
        let mut omit_stages = stages(&r.omit_stages, &format!("{path}.omitStages"), errors);
        if !r.non_resource_urls.is_empty() && (!r.resources.is_empty() || !r.namespaces.is_empty()) {
            errors.push(format!(
                "{path}.nonResourceURLs: Invalid value: {}: rules cannot apply to both regular resources and non-resource URLs",
                go_list(&r.non_resource_urls)
            ));
        }
        for s in stages(&policy.omit_stages, "", &mut Vec::new()) {
            if !omit_stages.contains(&s) {
                omit_stages.push(s);
            }
        }
        Rule {
            level,
            users: r.users,
            user_groups: r.user_groups,
            verbs: r.verbs,
            resources: r.resources,
            namespaces: r.namespaces,
            non_resource_urls: r.non_resource_urls,
            omit_stages,
            omit_managed_fields: r.omit_managed_fields.unwrap_or(policy.omit_managed_fields),
        }
    }

    /// kube's `ruleMatches`.
    fn matches(&self, r: &Request) -> bool {
        let has = |list: &[String], v: &str| list.iter().any(|s| s == v);
        if !self.users.is_empty() && !has(&self.users, &r.user.name) {
            return false;
        }
        if !self.user_groups.is_empty() && !r.user.groups.iter().any(|g| has(&self.user_groups, g)) {
            return false;
        }
        if !self.verbs.is_empty() && !has(&self.verbs, r.verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return r.resource_request && (self.namespaces.is_empty() || has(&self.namespaces, r.namespace)) && self.matches_resource(r);
        }
        if !self.non_resource_urls.is_empty() {
            return !r.resource_request && self.non_resource_urls.iter().any(|spec| path_matches(r.path, spec));
        }
        true
    }

    fn matches_resource(&self, r: &Request) -> bool {
        if self.resources.is_empty() {
            return true;
        }
        let combined = if r.subresource.is_empty() { r.resource.to_string() } else { format!("{}/{}", r.resource, r.subresource) };
        self.resources.iter().filter(|gr| gr.group == r.group || gr.group == "*").any(|gr| {
            gr.resources.is_empty()
                || (gr.resource_names.is_empty() || gr.resource_names.iter().any(|n| n == r.name))
                    && gr.resources.iter().any(|res| {
                        res == &combined
                            || res == "*"
                            || (!r.subresource.is_empty() && res.strip_prefix("*/") == Some(r.subresource))
                            || res.strip_suffix("/*") == Some(r.resource)
                    })
        })
    }
}

/// kube's `pathMatches`: `*`, the path itself, or a prefix ending in `*`.
fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*" || spec == path || spec.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
}

impl Policy {
    /// Reads a policy file (YAML or JSON) as kube-apiserver does, with its errors.
    pub fn read(bytes: &[u8]) -> Result<Policy, String> {
        let mut file: PolicyFile = serde_norway::from_slice(bytes).map_err(|e| format!("failed decoding: {e}"))?;
        if file.api_version != "audit.k8s.io/v1" || file.kind != "Policy" {
            return Err(format!("unknown group version field {}, Kind={} in policy", file.api_version, file.kind));
        }
        let mut errors = Vec::new();
        let omit_stages = stages(&file.omit_stages, "omitStages", &mut errors);
        let rules: Vec<Rule> = std::mem::take(&mut file.rules).into_iter().enumerate().map(|(i, r)| Rule::read(r, i, &file, &mut errors)).collect();
        if !errors.is_empty() {
            return Err(crate::authz::rbac::aggregate(&errors));
        }
        if rules.is_empty() {
            return Err("loaded illegal policy with 0 rules".into());
        }
        Ok(Policy { rules, omit_stages, omit_managed_fields: file.omit_managed_fields })
    }

    /// What the first rule that matches `r` makes of it; `None` level when none does.
    pub fn evaluate(&self, r: &Request) -> Config {
        match self.rules.iter().find(|rule| rule.matches(r)) {
            Some(rule) => Config { level: rule.level, omit_stages: rule.omit_stages.clone(), omit_managed_fields: rule.omit_managed_fields },
            None => Config { level: Level::None, omit_stages: self.omit_stages.clone(), omit_managed_fields: self.omit_managed_fields },
        }
    }
}

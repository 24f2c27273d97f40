//! Whether some rules grant everything other rules do (kube's `validation.Covers`, which the
//! reconciliation of the bootstrap policy and the checks against privilege escalation use):
//! the rules asked about are broken into atomic rules (one group, resource, verb and name, or
//! one URL and verb), and each must be granted by a single rule of the owner.

use serde_json::{Value, json};

use super::rbac::Rule;

/// `rule` as kube's `BreakdownRule` splits it: one rule per group, resource, verb (and
/// resource name, if it names any), then one per non-resource URL and verb.
pub fn breakdown(rule: &Rule) -> Vec<Rule> {
    let mut atoms = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let atom = |names: Vec<String>| Rule {
                    verbs: vec![verb.clone()],
                    api_groups: vec![group.clone()],
                    resources: vec![resource.clone()],
                    resource_names: names,
                    non_resource_urls: Vec::new(),
                };
                if rule.resource_names.is_empty() {
                    atoms.push(atom(Vec::new()));
                } else {
                    atoms.extend(rule.resource_names.iter().map(|n| atom(vec![n.clone()])));
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            atoms.push(Rule { verbs: vec![verb.clone()], non_resource_urls: vec![url.clone()], ..Rule::default() });
        }
    }
    atoms
}

/// The atomic rules of `wanted` that no rule of `owner` grants, in order; empty when
/// `owner` covers them all.
pub fn uncovered(owner: &[Rule], wanted: &[Rule]) -> Vec<Rule> {
    wanted.iter().flat_map(breakdown).filter(|atom| !owner.iter().any(|o| grants(o, atom))).collect()
}

/// kube's `ruleCovers`: whether `owner` grants all of `atom`.
fn grants(owner: &Rule, atom: &Rule) -> bool {
    let has = |set: &[String], x: &str| set.iter().any(|s| s == x);
    let all = |set: &[String], wanted: &[String]| wanted.iter().all(|w| has(set, w));
    let verbs = has(&owner.verbs, "*") || all(&owner.verbs, &atom.verbs);
    let groups = has(&owner.api_groups, "*") || all(&owner.api_groups, &atom.api_groups);
    let resources = has(&owner.resources, "*")
        || atom.resources.iter().all(|r| has(&owner.resources, r) || r.split_once('/').is_some_and(|(_, sub)| has(&owner.resources, &format!("*/{sub}"))));
    let urls = atom
        .non_resource_urls
        .iter()
        .all(|path| owner.non_resource_urls.iter().any(|o| o == path || (o.ends_with('*') && path.starts_with(o.trim_end_matches('*')))));
    let names = owner.resource_names.is_empty() || (!atom.resource_names.is_empty() && all(&owner.resource_names, &atom.resource_names));
    verbs && groups && resources && urls && names
}

/// A rule as the API writes a `PolicyRule`: its lists that are not empty (verbs always).
pub fn to_json(rule: &Rule) -> Value {
    let mut v = json!({"verbs": rule.verbs});
    for (key, list) in
        [("apiGroups", &rule.api_groups), ("resources", &rule.resources), ("resourceNames", &rule.resource_names), ("nonResourceURLs", &rule.non_resource_urls)]
    {
        if !list.is_empty() {
            v[key] = json!(list);
        }
    }
    v
}

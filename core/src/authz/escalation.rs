//! kube's prevention of privilege escalation through RBAC writes (the `policybased` storages
//! of roles, clusterroles, rolebindings and clusterrolebindings): a user may write a role only
//! with rules it holds itself, unless it may `escalate` roles; and bind a role only if it
//! holds the role's rules, unless it may `bind` that role. Members of `system:masters` may do
//! anything; an update that changes only what the garbage collector changes (owner
//! references, finalizers) is always allowed. Rules are held as RBAC grants them, whatever
//! the authorization modes.

use std::collections::BTreeSet;

use serde_json::Value;

use super::coverage::uncovered;
use super::rbac::{Kind, Rule, Wording};
use super::{Access, Attributes, PRIVILEGED_GROUP};
use crate::auth::UserInfo;
use crate::meta;
use crate::status::{ApiError, GroupResource, quote};

const GROUP: &str = "rbac.authorization.k8s.io";

/// What the check of a write of `kind` asks the chain first (kube's `RoleEscalationAuthorized`
/// and `BindingAuthorized`): whether the user may `escalate` the role the URL names, or `bind`
/// the role `obj` refers to; `None` for a binding whose object is not known (a patch's) or whose
/// role reference's kind is not a role's. A request with an authorization webhook asks it
/// before the write, so that the check finds its answer.
pub fn question(kind: Kind, namespace: &str, url_name: &str, obj: Option<&Value>) -> Option<Attributes> {
    match kind {
        Kind::Role | Kind::ClusterRole => {
            Some(Attributes { version: "*".into(), ..Attributes::resource("escalate", GROUP, kind.resource(), "", namespace, url_name) })
        }
        Kind::RoleBinding | Kind::ClusterRoleBinding => {
            let role_ref = |k: &str| meta::str_at(obj?, &["roleRef", k]).map(str::to_string);
            let resource = match role_ref("kind")?.as_str() {
                "Role" => "roles",
                "ClusterRole" => "clusterroles",
                _ => return None,
            };
            Some(Attributes::resource("bind", &role_ref("apiGroup").unwrap_or_default(), resource, "", namespace, &role_ref("name").unwrap_or_default()))
        }
    }
}

/// The request's part in a check.
pub struct Write<'a> {
    pub kind: Kind,
    pub user: &'a UserInfo,
    /// The request's namespace (`""` for ClusterRoles and ClusterRoleBindings) and the name in
    /// its URL (`""` for a create).
    pub namespace: &'a str,
    pub url_name: &'a str,
}

/// The checks read the authorizer chain (for `escalate` and `bind`, with what the
/// authorization webhook answered the request: see [`question`]) and the RBAC objects as they
/// are when the request came.
impl Access {
    /// Whether `w` may write `obj` in place of `old` (`None`: a create).
    pub fn check_escalation(&self, w: &Write, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
        if w.user.groups.iter().any(|g| g == PRIVILEGED_GROUP) || old.is_some_and(|old| only_collector_fields(obj, old)) {
            return Ok(());
        }
        let gr = GroupResource { group: GROUP.into(), resource: w.kind.resource().into() };
        let name = meta::name(obj);
        let forbidden = |why: &str| ApiError::forbidden(&gr, name, why);
        match w.kind {
            Kind::Role | Kind::ClusterRole => {
                if question(w.kind, w.namespace, w.url_name, None).is_some_and(|q| self.allows(w.user, &q)) {
                    return Ok(());
                }
                self.confirm(w.user, w.namespace, &rules_of(obj)).map_err(|e| forbidden(&e))?;
                // An aggregation rule can gather anything: only one who holds everything may set it.
                let aggregates = |v: &Value| v.pointer("/aggregationRule/clusterRoleSelectors").and_then(Value::as_array).is_some_and(|s| !s.is_empty());
                if w.kind == Kind::ClusterRole && (aggregates(obj) || old.is_some_and(aggregates)) {
                    let everything = [
                        Rule { verbs: vec!["*".into()], api_groups: vec!["*".into()], resources: vec!["*".into()], ..Rule::default() },
                        Rule { verbs: vec!["*".into()], non_resource_urls: vec!["*".into()], ..Rule::default() },
                    ];
                    self.confirm(w.user, w.namespace, &everything).map_err(|_| forbidden("must have cluster-admin privileges to use the aggregationRule"))?;
                }
                Ok(())
            }
            Kind::RoleBinding | Kind::ClusterRoleBinding => {
                let role_ref = |k: &str| meta::str_at(obj, &["roleRef", k]).unwrap_or_default();
                let (kind, role) = (role_ref("kind"), role_ref("name"));
                let Some(q) = question(w.kind, w.namespace, w.url_name, Some(obj)) else {
                    return Err(ApiError::internal(format!("unsupported role reference kind: {}", quote(kind))));
                };
                if self.allows(w.user, &q) {
                    return Ok(());
                }
                let resource = q.resource;
                let rules = self.state.rbac.role_rules(kind == "ClusterRole", w.namespace, role);
                let rules = rules.ok_or_else(|| ApiError::not_found(&GroupResource { group: GROUP.into(), resource }, role))?;
                self.confirm(w.user, w.namespace, &rules).map_err(|e| forbidden(&e))
            }
        }
    }

    /// kube's `ConfirmNoEscalation`: `user` holds every rule of `rules` in `namespace`, or the
    /// message that says what it lacks.
    fn confirm(&self, user: &UserInfo, namespace: &str, rules: &[Rule]) -> Result<(), String> {
        let (held, errors) = self.state.rbac.rules_for(user, namespace, Wording::Registry);
        let missing = uncovered(&held, rules);
        if missing.is_empty() {
            return Ok(());
        }
        let lines: BTreeSet<String> = compact(missing).iter().map(compact_string).collect();
        let mut message = format!(
            "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
            quote(&user.name),
            go_list(&user.groups),
            lines.into_iter().collect::<Vec<_>>().join("\n")
        );
        if !errors.is_empty() {
            // Go's %v of a slice of errors.
            message.push_str(&format!("; resolution errors: [{}]", errors.join(" ")));
        }
        Err(message)
    }
}

fn rules_of(obj: &Value) -> Vec<Rule> {
    obj.get("rules").and_then(Value::as_array).into_iter().flatten().map(Rule::read).collect()
}

/// kube's `CompactRules`: rules of one group, one resource and at most one name merged into
/// one with all their verbs, in order; the others as they are.
fn compact(rules: Vec<Rule>) -> Vec<Rule> {
    let mut out: Vec<Rule> = Vec::new();
    let mut simple: Vec<Rule> = Vec::new();
    for rule in rules {
        let is_simple = rule.api_groups.len() == 1 && rule.resources.len() == 1 && rule.resource_names.len() <= 1 && rule.non_resource_urls.is_empty();
        if !is_simple {
            out.push(rule);
            continue;
        }
        match simple.iter_mut().find(|s| (&s.api_groups, &s.resources, &s.resource_names) == (&rule.api_groups, &rule.resources, &rule.resource_names)) {
            Some(same) => same.verbs.extend(rule.verbs),
            None => simple.push(rule),
        }
    }
    out.extend(simple);
    out
}

/// kube's `CompactString`: the rule's lists that are not empty, as Go's `%q` prints them.
fn compact_string(rule: &Rule) -> String {
    let parts: Vec<String> = [
        ("APIGroups", &rule.api_groups),
        ("Resources", &rule.resources),
        ("NonResourceURLs", &rule.non_resource_urls),
        ("ResourceNames", &rule.resource_names),
        ("Verbs", &rule.verbs),
    ]
    .into_iter()
    .filter(|(_, list)| !list.is_empty())
    .map(|(name, list)| format!("{name}:{}", go_list(list)))
    .collect();
    format!("{{{}}}", parts.join(", "))
}

/// A list of strings as Go's `%q` prints it: `["a" "b"]`.
fn go_list(list: &[String]) -> String {
    format!("[{}]", list.iter().map(|s| quote(s)).collect::<Vec<_>>().join(" "))
}

/// kube's `IsOnlyMutatingGCFields`: `obj` is `old` but for its owner references, finalizers,
/// managed fields and self link (lists and maps that are empty or absent count as equal).
pub(crate) fn only_collector_fields(obj: &Value, old: &Value) -> bool {
    let mut obj = obj.clone();
    for field in ["ownerReferences", "finalizers", "managedFields", "selfLink"] {
        match meta::at(old, &["metadata", field]).cloned() {
            Some(v) => meta::set_meta(&mut obj, field, v),
            None => meta::remove_meta(&mut obj, field),
        }
    }
    semantic(&obj) == semantic(old)
}

/// `v` without the members that are null, empty lists or empty maps (Go's semantic equality
/// does not tell them from absent ones).
pub(crate) fn semantic(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), semantic(x)))
                .filter(|(_, x)| !(x.is_null() || x.as_array().is_some_and(Vec::is_empty) || x.as_object().is_some_and(|o| o.is_empty())))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(semantic).collect()),
        other => other.clone(),
    }
}

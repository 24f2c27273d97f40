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
use super::{Attributes, Authorizer, PRIVILEGED_GROUP, Snapshot};
use crate::auth::UserInfo;
use crate::meta;
use crate::status::{ApiError, GroupResource, quote};

const GROUP: &str = "rbac.authorization.k8s.io";

/// What the checks read: the authorizer chain (for `escalate` and `bind`) and the RBAC
/// objects as they are when the request came.
#[derive(Clone, Debug)]
pub struct Escalation {
    pub authorizer: Authorizer,
    pub state: Snapshot,
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

impl Escalation {
    /// Whether `w` may write `obj` in place of `old` (`None`: a create).
    pub fn check(&self, w: &Write, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
        if w.user.groups.iter().any(|g| g == PRIVILEGED_GROUP) || old.is_some_and(|old| only_collector_fields(obj, old)) {
            return Ok(());
        }
        let gr = GroupResource { group: GROUP.into(), resource: w.kind.resource().into() };
        let name = meta::name(obj);
        let forbidden = |why: &str| ApiError::forbidden(&gr, name, why);
        match w.kind {
            Kind::Role | Kind::ClusterRole => {
                if self.allowed(w.user, "escalate", GROUP, w.kind.resource(), w.url_name, w.namespace) {
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
                let resource = match kind {
                    "Role" => "roles",
                    "ClusterRole" => "clusterroles",
                    other => return Err(ApiError::internal(format!("unsupported role reference kind: {}", quote(other)))),
                };
                if self.allowed(w.user, "bind", role_ref("apiGroup"), resource, role, w.namespace) {
                    return Ok(());
                }
                let rules = self.state.rbac.role_rules(kind == "ClusterRole", w.namespace, role);
                let rules = rules.ok_or_else(|| ApiError::not_found(&GroupResource { group: GROUP.into(), resource: resource.into() }, role))?;
                self.confirm(w.user, w.namespace, &rules).map_err(|e| forbidden(&e))
            }
        }
    }

    /// Whether the chain allows `user` to `verb` the role (or roles) named.
    fn allowed(&self, user: &UserInfo, verb: &str, group: &str, resource: &str, name: &str, namespace: &str) -> bool {
        let attrs = Attributes::resource(verb, group, resource, "", namespace, name);
        self.authorizer.authorize(&self.state, user, &attrs).allowed
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
fn only_collector_fields(obj: &Value, old: &Value) -> bool {
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
fn semantic(v: &Value) -> Value {
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

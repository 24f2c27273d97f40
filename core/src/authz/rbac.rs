//! kube's RBAC authorizer over an index of the `rbac.authorization.k8s.io/v1` objects.
//!
//! kube's authorizer walks every ClusterRoleBinding (and every RoleBinding of the request's
//! namespace) for each request. kapi indexes bindings by the users and groups their subjects
//! name, then by namespace, so a decision reads only the bindings of the cluster and of the
//! request's namespace that name the request's user or one of its groups, whatever the number
//! of bindings. The index is persistent (imbl): a change to one
//! object makes a new policy sharing all the rest, so a server swaps in the next policy
//! without copying the whole.
//!
//! A decision is kube's: the first binding (ClusterRoleBindings by name, then the namespace's
//! RoleBindings by name) whose role has a rule that covers the request allows it, and says so
//! (`RBAC: allowed by ClusterRoleBinding "x" of ClusterRole "y" to User "alice"`); otherwise
//! RBAC has no opinion, giving as its reason the roles that bindings name but that do not
//! exist.

use std::sync::Arc;

use imbl::{OrdMap, OrdSet};
use serde_json::Value;

use super::{Attributes, Verdict};
use crate::auth::UserInfo;
use crate::meta;

/// The four kinds a policy is made of, by their resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Role,
    ClusterRole,
    RoleBinding,
    ClusterRoleBinding,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Role, Kind::ClusterRole, Kind::RoleBinding, Kind::ClusterRoleBinding];

    /// The resource (of `rbac.authorization.k8s.io/v1`) that holds this kind.
    pub fn resource(self) -> &'static str {
        match self {
            Kind::Role => "roles",
            Kind::ClusterRole => "clusterroles",
            Kind::RoleBinding => "rolebindings",
            Kind::ClusterRoleBinding => "clusterrolebindings",
        }
    }
}

/// A `PolicyRule`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

impl Rule {
    /// A rule as a role holds it (fields that are not lists of strings read as empty).
    pub fn read(v: &Value) -> Rule {
        let list = |k: &str| v.get(k).and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default();
        Rule {
            verbs: list("verbs"),
            api_groups: list("apiGroups"),
            resources: list("resources"),
            resource_names: list("resourceNames"),
            non_resource_urls: list("nonResourceURLs"),
        }
    }

    /// Whether the rule covers `a` (kube's `RuleAllows`).
    pub fn allows(&self, a: &Attributes) -> bool {
        let any = |list: &[String], want: &str| list.iter().any(|x| x == "*" || x == want);
        if !any(&self.verbs, &a.verb) {
            return false;
        }
        if !a.resource_request {
            return self.non_resource_urls.iter().any(|u| *u == a.path || (u.ends_with('*') && a.path.starts_with(u.trim_end_matches('*'))));
        }
        any(&self.api_groups, &a.group) && self.covers_resource(a) && (self.resource_names.is_empty() || self.resource_names.contains(&a.name))
    }

    /// kube's `ResourceMatches`: `*`, the resource (with its subresource, `pods/log`), or
    /// `*/<subresource>`.
    fn covers_resource(&self, a: &Attributes) -> bool {
        self.resources.iter().any(|r| {
            if r == "*" {
                return true;
            }
            let (resource, sub) = (a.resource.as_str(), a.subresource.as_str());
            if sub.is_empty() {
                return r == resource;
            }
            r.strip_suffix(sub).and_then(|p| p.strip_suffix('/')).is_some_and(|p| p == resource || p == "*")
        })
    }
}

/// Who a binding names.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Subject {
    User(String),
    Group(String),
    ServiceAccount { namespace: String, name: String },
}

impl Subject {
    /// A binding's subject; a ServiceAccount without a namespace is of the binding's.
    fn read(v: &Value, binding_namespace: &str) -> Option<Subject> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default();
        match s("kind") {
            "User" => Some(Subject::User(s("name").to_string())),
            "Group" => Some(Subject::Group(s("name").to_string())),
            "ServiceAccount" => {
                let namespace = if s("namespace").is_empty() { binding_namespace } else { s("namespace") };
                (!namespace.is_empty()).then(|| Subject::ServiceAccount { namespace: namespace.to_string(), name: s("name").to_string() })
            }
            _ => None,
        }
    }

    /// The user name or group name the subject matches, and whether it is a group.
    fn index_key(&self) -> (String, bool) {
        match self {
            Subject::User(n) => (n.clone(), false),
            Subject::Group(g) => (g.clone(), true),
            Subject::ServiceAccount { namespace, name } => (format!("system:serviceaccount:{namespace}:{name}"), false),
        }
    }

    fn applies_to(&self, user: &UserInfo) -> bool {
        match self {
            Subject::User(n) => *n == user.name,
            Subject::Group(g) => user.groups.contains(g),
            Subject::ServiceAccount { namespace, name } => {
                user.name.strip_prefix("system:serviceaccount:").and_then(|rest| rest.split_once(':')) == Some((namespace.as_str(), name.as_str()))
            }
        }
    }

    /// kube's `describeSubject`.
    fn describe(&self) -> String {
        match self {
            Subject::User(n) => format!("User {}", crate::status::quote(n)),
            Subject::Group(g) => format!("Group {}", crate::status::quote(g)),
            Subject::ServiceAccount { namespace, name } => format!("ServiceAccount {}", crate::status::quote(&format!("{name}/{namespace}"))),
        }
    }
}

/// A RoleBinding (in `namespace`) or ClusterRoleBinding (`namespace` empty).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Binding {
    /// `roleRef.kind` is `ClusterRole` (else `Role`).
    cluster_role: bool,
    role: String,
    subjects: Vec<Subject>,
}

/// Values by namespace (`""`: of the cluster), then name.
type Nested<T> = OrdMap<String, OrdMap<String, T>>;

/// Bindings by the user or group their subjects name, then namespace (`""` for
/// ClusterRoleBindings): their names.
type Index = OrdMap<String, OrdMap<String, OrdSet<String>>>;

/// The RBAC objects, indexed for decisions.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    roles: Nested<Arc<[Rule]>>,
    cluster_roles: OrdMap<String, Arc<[Rule]>>,
    /// RoleBindings by namespace, ClusterRoleBindings under `""`.
    bindings: Nested<Arc<Binding>>,
    /// The bindings that name a user (users, and service accounts by their user names) ...
    by_user: Index,
    /// ... or a group.
    by_group: Index,
}

impl Policy {
    /// The policy with `obj`, a `kind` object as stored, put in (replacing one of its name).
    pub fn put(&mut self, kind: Kind, obj: &Value) {
        let namespace = meta::str_at(obj, &["metadata", "namespace"]).unwrap_or_default().to_string();
        let name = meta::str_at(obj, &["metadata", "name"]).unwrap_or_default().to_string();
        match kind {
            Kind::Role | Kind::ClusterRole => {
                let rules: Arc<[Rule]> = obj.get("rules").and_then(Value::as_array).map(|r| r.iter().map(Rule::read).collect()).unwrap_or_default();
                if kind == Kind::Role {
                    self.roles.entry(namespace).or_default().insert(name, rules);
                } else {
                    self.cluster_roles.insert(name, rules);
                }
            }
            Kind::RoleBinding | Kind::ClusterRoleBinding => {
                let namespace = if kind == Kind::ClusterRoleBinding { String::new() } else { namespace };
                self.unbind(&namespace, &name);
                let subjects =
                    obj.get("subjects").and_then(Value::as_array).map(|s| s.iter().filter_map(|s| Subject::read(s, &namespace)).collect()).unwrap_or_default();
                let binding = Binding {
                    cluster_role: meta::str_at(obj, &["roleRef", "kind"]) == Some("ClusterRole") || kind == Kind::ClusterRoleBinding,
                    role: meta::str_at(obj, &["roleRef", "name"]).unwrap_or_default().to_string(),
                    subjects,
                };
                for subject in &binding.subjects {
                    let (who, group) = subject.index_key();
                    let index = if group { &mut self.by_group } else { &mut self.by_user };
                    index.entry(who).or_default().entry(namespace.clone()).or_default().insert(name.clone());
                }
                self.bindings.entry(namespace).or_default().insert(name, Arc::new(binding));
            }
        }
    }

    /// The policy without the `kind` object `namespace/name`.
    pub fn remove(&mut self, kind: Kind, namespace: &str, name: &str) {
        match kind {
            Kind::Role => drop(remove_nested(&mut self.roles, namespace, name)),
            Kind::ClusterRole => drop(self.cluster_roles.remove(name)),
            Kind::RoleBinding => self.unbind(namespace, name),
            Kind::ClusterRoleBinding => self.unbind("", name),
        }
    }

    /// Takes the binding `namespace/name` out of the policy and its index.
    fn unbind(&mut self, namespace: &str, name: &str) {
        let Some(old) = remove_nested(&mut self.bindings, namespace, name) else { return };
        for subject in &old.subjects {
            let (who, group) = subject.index_key();
            let index = if group { &mut self.by_group } else { &mut self.by_user };
            if let Some(by_namespace) = index.get_mut(&who) {
                if let Some(names) = by_namespace.get_mut(namespace) {
                    names.remove(name);
                    if names.is_empty() {
                        by_namespace.remove(namespace);
                    }
                }
                if by_namespace.is_empty() {
                    index.remove(&who);
                }
            }
        }
    }

    /// Visits, in kube's order (the cluster's bindings, then `namespace`'s, each by name), the
    /// bindings that apply to `user`: the binding's namespace and name, the subject that
    /// applies, and its role's rules (or, for a role that does not exist, kube's error), until
    /// `visit` says to stop.
    fn visit<'a>(&'a self, user: &UserInfo, namespace: &'a str, mut visit: impl FnMut(&str, &str, &Binding, &Subject, Option<&[Rule]>) -> bool) {
        let namespaces = ["", namespace];
        let scopes = &namespaces[..if namespace.is_empty() { 1 } else { 2 }];
        let mut candidates: Vec<(&str, &str)> = Vec::new();
        let subjects = std::iter::once((&self.by_user, &user.name)).chain(user.groups.iter().map(|g| (&self.by_group, g)));
        for (index, who) in subjects {
            let Some(by_namespace) = index.get(who) else { continue };
            for ns in scopes {
                candidates.extend(by_namespace.get(*ns).into_iter().flatten().map(|name| (*ns, name.as_str())));
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
        for (ns, name) in candidates {
            let Some(binding) = self.bindings.get(ns).and_then(|b| b.get(name)) else { continue };
            let Some(subject) = binding.subjects.iter().find(|s| s.applies_to(user)) else { continue };
            let rules = self.role_rules(binding.cluster_role, ns, &binding.role);
            if visit(ns, name, binding, subject, rules.as_deref()) {
                return;
            }
        }
    }

    /// Whether the policy holds the `kind` object `namespace`/`name`.
    pub fn holds(&self, kind: Kind, namespace: &str, name: &str) -> bool {
        match kind {
            Kind::Role => self.roles.get(namespace).is_some_and(|r| r.contains_key(name)),
            Kind::ClusterRole => self.cluster_roles.contains_key(name),
            Kind::RoleBinding => self.bindings.get(namespace).is_some_and(|b| b.contains_key(name)),
            Kind::ClusterRoleBinding => self.bindings.get("").is_some_and(|b| b.contains_key(name)),
        }
    }

    /// The rules of the ClusterRole (`cluster`) or the Role of `namespace` called `name`.
    pub fn role_rules(&self, cluster: bool, namespace: &str, name: &str) -> Option<Arc<[Rule]>> {
        if cluster { self.cluster_roles.get(name) } else { self.roles.get(namespace).and_then(|roles| roles.get(name)) }.cloned()
    }

    /// RBAC's verdict on `user` doing `attrs`, and its reason.
    pub fn authorize(&self, user: &UserInfo, attrs: &Attributes) -> (Verdict, String) {
        let (mut allowed, mut missing) = (None, Vec::new());
        self.visit(user, &attrs.namespace, |ns, name, binding, subject, rules| match rules {
            Some(rules) if rules.iter().any(|r| r.allows(attrs)) => {
                let (what, name) = if ns.is_empty() { ("ClusterRoleBinding", name.to_string()) } else { ("RoleBinding", format!("{name}/{ns}")) };
                let role_kind = if binding.cluster_role { "ClusterRole" } else { "Role" };
                let q = crate::status::quote;
                allowed = Some(format!("RBAC: allowed by {what} {} of {role_kind} {} to {}", q(&name), q(&binding.role), subject.describe()));
                true
            }
            Some(_) => false,
            None => {
                let error = not_found(binding, Wording::Lister);
                if !missing.contains(&error) {
                    missing.push(error);
                }
                false
            }
        });
        if let Some(reason) = allowed {
            return (Verdict::Allow, reason);
        }
        let reason = if missing.is_empty() { String::new() } else { format!("RBAC: {}", aggregate(&missing)) };
        (Verdict::NoOpinion, reason)
    }

    /// The rules `user` holds in `namespace` (the cluster's among them), and the errors met
    /// on the way (kube's `RulesFor`), worded as `wording` says.
    pub fn rules_for(&self, user: &UserInfo, namespace: &str, wording: Wording) -> (Vec<Rule>, Vec<String>) {
        let (mut rules, mut missing) = (Vec::new(), Vec::new());
        self.visit(user, namespace, |_, _, binding, _, found| {
            match found {
                Some(found) => rules.extend(found.iter().cloned()),
                None => {
                    let error = not_found(binding, wording);
                    if !missing.contains(&error) {
                        missing.push(error);
                    }
                }
            }
            false
        });
        (rules, missing)
    }
}

/// Who looks a binding's role up, which says how a missing one is reported: kube's
/// authorizer reads listers (`clusterrole.rbac.authorization.k8s.io "x" not found`), its
/// checks of RBAC writes the registry (`clusterroles.rbac.authorization.k8s.io ...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wording {
    Lister,
    Registry,
}

fn not_found(binding: &Binding, wording: Wording) -> String {
    let resource = if binding.cluster_role { "clusterrole" } else { "role" };
    let plural = if wording == Wording::Registry { "s" } else { "" };
    format!("{resource}{plural}.rbac.authorization.k8s.io {} not found", crate::status::quote(&binding.role))
}

/// Go's aggregate of errors: the one, or `[<error>, ...]`; empty for none.
/// Go's `utilerrors.NewAggregate(errors).Error()`: one error as it is, more in brackets.
pub fn aggregate(errors: &[String]) -> String {
    match errors {
        [] => String::new(),
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Takes `namespace/name` out of `map`, and the namespace with its last value.
fn remove_nested<T: Clone>(map: &mut Nested<T>, namespace: &str, name: &str) -> Option<T> {
    let values = map.get_mut(namespace)?;
    let old = values.remove(name);
    if values.is_empty() {
        map.remove(namespace);
    }
    old
}

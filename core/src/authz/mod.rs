//! Authorization, as kube-apiserver's handler chain makes it: every request, resource or not,
//! is put to a chain of authorizers (`--authorization-mode`) after authentication and before
//! anything reveals whether what it names exists. Each authorizer allows, denies or has no
//! opinion; the first that allows or denies decides, and a request no one allows is
//! forbidden, with the reasons the others gave (kube's union authorizer). Members of
//! `system:masters` are allowed first, whatever the modes (kube's privileged-groups
//! authorizer).
//!
//! What the chain reads on every request, the RBAC objects ([`rbac::Policy`]), is an
//! immutable snapshot the server swaps when they change; the chain itself is configuration.

pub mod bootstrap;
pub mod coverage;
pub mod escalation;
pub mod rbac;
#[cfg(test)]
mod tests;

use crate::auth::UserInfo;
use crate::status::{ApiError, GroupResource, quote};

pub use rbac::Policy;

/// The group whose members may do anything (`user.SystemPrivilegedGroup`).
pub const PRIVILEGED_GROUP: &str = "system:masters";

/// What a request asks to do (`authorizer.Attributes`, less the user).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// For non-resource requests (`/healthz`).
    pub path: String,
    pub resource_request: bool,
}

impl Attributes {
    /// A resource request's attributes.
    pub fn resource(verb: &str, group: &str, resource: &str, subresource: &str, namespace: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: namespace.into(),
            name: name.into(),
            path: String::new(),
            resource_request: true,
        }
    }
}

/// One authorizer of the chain (a `--authorization-mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    AlwaysAllow,
    AlwaysDeny,
    Rbac,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::AlwaysAllow => "AlwaysAllow",
            Mode::AlwaysDeny => "AlwaysDeny",
            Mode::Rbac => "RBAC",
        }
    }
}

/// The modes kube-apiserver knows and kapi does not implement yet: named so that they are
/// refused as unimplemented rather than unknown.
const NOT_YET: [&str; 3] = ["ABAC", "Node", "Webhook"];

/// `--authorization-mode`: the chain, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authorizer {
    modes: Vec<Mode>,
}

impl Default for Authorizer {
    fn default() -> Self {
        Authorizer::always_allow()
    }
}

/// What one authorizer says (none of kapi's denies outright: the chain goes on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    NoOpinion,
}

/// The chain's decision and its reason (what a SubjectAccessReview's status says; a
/// forbidden request's message ends with it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
}

impl Authorizer {
    /// `--authorization-mode=AlwaysAllow`.
    pub fn always_allow() -> Authorizer {
        Authorizer { modes: vec![Mode::AlwaysAllow] }
    }

    /// The chain `--authorization-mode` names (comma-separated), checked as kube checks it.
    pub fn parse(flag: &str) -> Result<Authorizer, String> {
        let mut modes = Vec::new();
        for name in flag.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let mode = match name {
                "AlwaysAllow" => Mode::AlwaysAllow,
                "AlwaysDeny" => Mode::AlwaysDeny,
                "RBAC" => Mode::Rbac,
                n if NOT_YET.contains(&n) => return Err(format!("authorization-mode {n:?} is not implemented by kapi yet")),
                n => return Err(format!("authorization-mode {n:?} is not a valid mode")),
            };
            modes.push(mode);
        }
        if modes.is_empty() {
            return Err("at least one authorization-mode must be passed".into());
        }
        if modes.iter().enumerate().any(|(i, m)| modes[..i].contains(m)) {
            let names: Vec<String> = modes.iter().map(|m| format!("{:?}", m.name())).collect();
            return Err(format!("authorization-mode [{}] has mode specified more than once", names.join(" ")));
        }
        Ok(Authorizer { modes })
    }

    /// Whether `AlwaysAllow` is one of the modes (kube then turns anonymous requests off).
    pub fn always_allows(&self) -> bool {
        self.modes.contains(&Mode::AlwaysAllow)
    }

    /// Whether the chain reads the RBAC objects.
    pub fn uses_rbac(&self) -> bool {
        self.modes.contains(&Mode::Rbac)
    }

    /// The decision on `user` doing `attrs`, with `policy` the RBAC objects as they are now.
    pub fn authorize(&self, policy: &Policy, user: &UserInfo, attrs: &Attributes) -> Decision {
        if user.groups.iter().any(|g| g == PRIVILEGED_GROUP) {
            return Decision { allowed: true, reason: String::new() };
        }
        let mut reasons = Vec::new();
        for mode in &self.modes {
            let (verdict, reason) = match mode {
                Mode::AlwaysAllow => (Verdict::Allow, String::new()),
                Mode::AlwaysDeny => (Verdict::NoOpinion, "Everything is forbidden.".to_string()),
                Mode::Rbac => policy.authorize(user, attrs),
            };
            if verdict == Verdict::Allow {
                // The allowing authorizer's reason alone; those of the others before it, joined,
                // when no one allows.
                return Decision { allowed: true, reason };
            }
            if !reason.is_empty() {
                reasons.push(reason);
            }
        }
        Decision { allowed: false, reason: reasons.join("\n") }
    }
}

/// What a user may do in a namespace, as the chain's modes say (a SelfSubjectRulesReview).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RulesReview {
    /// Rules with resources ...
    pub resource_rules: Vec<rbac::Rule>,
    /// ... and with non-resource URLs (a rule with both is in each).
    pub non_resource_rules: Vec<rbac::Rule>,
    pub incomplete: bool,
    /// The modes' errors, aggregated.
    pub evaluation_error: String,
}

impl Authorizer {
    /// The rules `user` holds in `namespace`, each mode's in order (kube's union rule
    /// resolver; `system:masters` has no rules of its own).
    pub fn rules_for(&self, policy: &Policy, user: &UserInfo, namespace: &str) -> RulesReview {
        let mut review = RulesReview::default();
        let mut errors = Vec::new();
        for mode in &self.modes {
            let rules = match mode {
                Mode::AlwaysAllow => vec![rbac::Rule {
                    verbs: vec!["*".into()],
                    api_groups: vec!["*".into()],
                    resources: vec!["*".into()],
                    non_resource_urls: vec!["*".into()],
                    ..Default::default()
                }],
                Mode::AlwaysDeny => Vec::new(),
                Mode::Rbac => {
                    let (rules, error) = policy.rules_for(user, namespace, rbac::Wording::Lister);
                    if !error.is_empty() {
                        errors.push(error);
                    }
                    rules
                }
            };
            for rule in rules {
                if !rule.non_resource_urls.is_empty() {
                    review.non_resource_rules.push(rbac::Rule {
                        verbs: rule.verbs.clone(),
                        non_resource_urls: rule.non_resource_urls.clone(),
                        ..Default::default()
                    });
                }
                if !rule.resources.is_empty() {
                    review.resource_rules.push(rbac::Rule { non_resource_urls: Vec::new(), ..rule });
                }
            }
        }
        if !errors.is_empty() {
            review.evaluation_error = rbac::aggregate(&errors);
        }
        review
    }
}

/// kube's 403 for a request its authorizers did not allow: who cannot do what (with `&`, `<`
/// and `>` escaped as HTML, as kube does), and why.
pub fn forbidden(user: &UserInfo, attrs: &Attributes, reason: &str) -> ApiError {
    let message = if !attrs.resource_request {
        format!("User {} cannot {} path {}", quote(&user.name), attrs.verb, quote(&attrs.path))
    } else {
        let resource = if attrs.subresource.is_empty() { attrs.resource.clone() } else { format!("{}/{}", attrs.resource, attrs.subresource) };
        let scope = if attrs.namespace.is_empty() { "at the cluster scope".to_string() } else { format!("in the namespace {}", quote(&attrs.namespace)) };
        format!("User {} cannot {} resource {} in API group {} {scope}", quote(&user.name), attrs.verb, quote(&resource), quote(&attrs.group))
    };
    let mut message = message.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    if !reason.is_empty() {
        message = format!("{message}: {reason}");
    }
    let resource = GroupResource { group: attrs.group.clone(), resource: attrs.resource.clone() };
    ApiError::forbidden(&resource, &attrs.name, &message)
}

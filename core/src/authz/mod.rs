//! Authorization, as kube-apiserver's handler chain makes it: every request, resource or not,
//! is put to a chain of authorizers (`--authorization-mode`) after authentication and before
//! anything reveals whether what it names exists. Each authorizer allows, denies or has no
//! opinion; the first that allows or denies decides, and a request no one allows is
//! forbidden, with the reasons the others gave (kube's union authorizer). Members of
//! `system:masters` are allowed first, whatever the modes (kube's privileged-groups
//! authorizer).
//!
//! What the chain reads on every request ([`Snapshot`]: the RBAC objects, and the node graph
//! of pods and volumes) is immutable, and the server swaps it when they change; the chain
//! itself is configuration.

pub mod bootstrap;
pub mod conditions;
pub mod config;
pub mod coverage;
pub mod escalation;
pub mod graph;
pub mod node;
pub mod rbac;
#[cfg(test)]
mod tests;
pub mod webhook;

use std::cell::RefCell;
use std::sync::Arc;

use jiff::Timestamp;

use crate::auth::UserInfo;
use crate::cache::Objects;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, GroupResource, quote};

pub use graph::NodeGraph;
pub use rbac::Policy;
pub use webhook::{Ask, Asked, WebhookAuthorizer, WebhookSettings};

/// The group whose members may do anything (`user.SystemPrivilegedGroup`).
pub const PRIVILEGED_GROUP: &str = "system:masters";

/// What a request asks to do (`authorizer.Attributes`, less the user).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    pub verb: String,
    pub group: String,
    /// The API version the request is for (what a webhook is told).
    pub version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// For non-resource requests (`/healthz`).
    pub path: String,
    pub resource_request: bool,
    /// A list's, watch's or deletecollection's field selector (empty when it does not parse).
    pub field_selector: FieldSelector,
    /// Its label selector, likewise (a webhook is told; RBAC and Node do not look).
    pub label_selector: LabelSelector,
}

impl Attributes {
    /// A resource request's attributes.
    pub fn resource(verb: &str, group: &str, resource: &str, subresource: &str, namespace: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            group: group.into(),
            version: String::new(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: namespace.into(),
            name: name.into(),
            path: String::new(),
            resource_request: true,
            field_selector: FieldSelector::default(),
            label_selector: LabelSelector::default(),
        }
    }
}

/// What the authorizers read: the RBAC objects and the node graph, as they were at one time.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub rbac: Policy,
    pub nodes: NodeGraph,
}

/// A collection whose objects an authorizer reads, followed through its watch cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Rbac(rbac::Kind),
    Pods,
    PersistentVolumes,
    VolumeAttachments,
}

impl Source {
    /// The collection's group, version and resource.
    pub fn resource(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Source::Rbac(kind) => ("rbac.authorization.k8s.io", "v1", kind.resource()),
            Source::Pods => ("", "v1", "pods"),
            Source::PersistentVolumes => ("", "v1", "persistentvolumes"),
            Source::VolumeAttachments => ("storage.k8s.io", "v1", "volumeattachments"),
        }
    }
}

impl Snapshot {
    /// The snapshot once the `source` objects went from `old` to `new` (their watch cache's
    /// objects at two revisions).
    pub fn with_changes(&self, source: Source, old: &Objects, new: &Objects) -> Snapshot {
        let mut next = self.clone();
        for change in old.diff(new) {
            let (put, gone) = match change {
                imbl::ordmap::DiffItem::Add(_, o) | imbl::ordmap::DiffItem::Update { new: (_, o), .. } => (Some(o), None),
                imbl::ordmap::DiffItem::Remove(_, o) => (None, Some(o)),
            };
            match (source, put, gone) {
                (Source::Rbac(kind), Some(o), _) => next.rbac.put(kind, &o.value()),
                (Source::Rbac(kind), _, Some(o)) => next.rbac.remove(kind, &o.namespace, &o.name),
                // A pod bound to no node (its selectable field says so) is none of the graph's,
                // and is not decoded.
                (Source::Pods, Some(o), _) if !o.fields.iter().any(|(f, v)| f == "spec.nodeName" && !v.is_empty()) => {
                    next.nodes.remove_pod(&o.namespace, &o.name)
                }
                (Source::Pods, Some(o), _) => next.nodes.put_pod(&o.value()),
                (Source::Pods, _, Some(o)) => next.nodes.remove_pod(&o.namespace, &o.name),
                (Source::PersistentVolumes, Some(o), _) => next.nodes.put_volume(&o.value()),
                (Source::PersistentVolumes, _, Some(o)) => next.nodes.remove_volume(&o.name),
                (Source::VolumeAttachments, Some(o), _) => next.nodes.put_attachment(&o.value()),
                (Source::VolumeAttachments, _, Some(o)) => next.nodes.remove_attachment(&o.name),
                (_, None, None) => {}
            }
        }
        next
    }
}

/// One authorizer of the chain (a `--authorization-mode`, or the `type` of an
/// `--authorization-config` entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    AlwaysAllow,
    AlwaysDeny,
    Node,
    Rbac,
    Webhook,
}

impl Mode {
    /// kube's name of the mode.
    pub fn name(self) -> &'static str {
        match self {
            Mode::AlwaysAllow => "AlwaysAllow",
            Mode::AlwaysDeny => "AlwaysDeny",
            Mode::Node => "Node",
            Mode::Rbac => "RBAC",
            Mode::Webhook => "Webhook",
        }
    }

    /// The mode kube names `name`; `None` for one it does not know, or kapi does not
    /// implement ([`NOT_YET`]).
    pub fn of(name: &str) -> Option<Mode> {
        [Mode::AlwaysAllow, Mode::AlwaysDeny, Mode::Node, Mode::Rbac, Mode::Webhook].into_iter().find(|m| m.name() == name)
    }
}

/// The modes kube-apiserver knows and kapi does not implement yet: named so that they are
/// refused as unimplemented rather than unknown.
pub const NOT_YET: [&str; 1] = ["ABAC"];

/// `--authorization-mode`: the modes, in order, as kube checks the flag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Modes(pub Vec<Mode>);

impl Modes {
    /// The modes the flag names (comma-separated), checked as kube checks it.
    pub fn parse(flag: &str) -> Result<Modes, String> {
        let mut modes = Vec::new();
        for name in flag.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let mode = match Mode::of(name) {
                Some(mode) => mode,
                None if NOT_YET.contains(&name) => return Err(format!("authorization-mode {name:?} is not implemented by kapi yet")),
                None => return Err(format!("authorization-mode {name:?} is not a valid mode")),
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
        Ok(Modes(modes))
    }

    /// Whether `AlwaysAllow` is one of the modes (kube then turns anonymous requests off).
    pub fn always_allows(&self) -> bool {
        self.0.contains(&Mode::AlwaysAllow)
    }
}

/// One link of the chain: a mode, a `Webhook` with its webhook.
#[derive(Clone, Debug)]
enum Link {
    AlwaysAllow,
    AlwaysDeny,
    Node,
    Rbac,
    Webhook(Arc<WebhookAuthorizer>),
}

impl Link {
    /// The link of a mode other than `Webhook`, or of a webhook.
    fn new(mode: Mode, webhook: &mut Option<Arc<WebhookAuthorizer>>) -> Option<Link> {
        Some(match mode {
            Mode::AlwaysAllow => Link::AlwaysAllow,
            Mode::AlwaysDeny => Link::AlwaysDeny,
            Mode::Node => Link::Node,
            Mode::Rbac => Link::Rbac,
            Mode::Webhook => Link::Webhook(webhook.take()?),
        })
    }

    fn mode(&self) -> Mode {
        match self {
            Link::AlwaysAllow => Mode::AlwaysAllow,
            Link::AlwaysDeny => Mode::AlwaysDeny,
            Link::Node => Mode::Node,
            Link::Rbac => Mode::Rbac,
            Link::Webhook(_) => Mode::Webhook,
        }
    }
}

/// An entry of `--authorization-config`: a mode other than `Webhook`, or a webhook.
#[derive(Debug)]
pub enum Entry {
    Mode(Mode),
    Webhook(Box<WebhookSettings>),
}

/// The chain of authorizers, in order (`--authorization-mode` with its webhook, or the
/// entries of `--authorization-config`).
#[derive(Clone, Debug)]
pub struct Authorizer {
    links: Vec<Link>,
}

impl Default for Authorizer {
    fn default() -> Self {
        Authorizer::always_allow()
    }
}

/// What one authorizer says: allow or deny (the chain stops), or no opinion (it goes on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Deny,
    NoOpinion,
}

/// The chain's decision and its reason (what a SubjectAccessReview's status says; a
/// forbidden request's message ends with it), and the authorizers' errors (a request not
/// allowed with errors is a 500, as kube's authorization filter answers it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub denied: bool,
    pub reason: String,
    pub error: String,
}

impl Authorizer {
    /// `--authorization-mode=AlwaysAllow`.
    pub fn always_allow() -> Authorizer {
        Authorizer { links: vec![Link::AlwaysAllow] }
    }

    /// The chain `--authorization-mode` names, without a webhook.
    pub fn parse(flag: &str) -> Result<Authorizer, String> {
        Authorizer::from_modes(&Modes::parse(flag)?, None)
    }

    /// The chain of `--authorization-mode` with the webhook of `--authorization-webhook-*`;
    /// kube's errors for a webhook without the mode or the mode without a webhook.
    pub fn from_modes(modes: &Modes, webhook: Option<WebhookSettings>) -> Result<Authorizer, String> {
        match (modes.0.contains(&Mode::Webhook), &webhook) {
            (true, None) => return Err("authorization-mode Webhook's authorization config file not passed".into()),
            (false, Some(_)) => return Err("cannot specify --authorization-webhook-config-file without mode Webhook".into()),
            _ => {}
        }
        let mut webhook = webhook.map(|w| Arc::new(WebhookAuthorizer::new(w)));
        Ok(Authorizer { links: modes.0.iter().filter_map(|mode| Link::new(*mode, &mut webhook)).collect() })
    }

    /// The chain of `--authorization-config`'s entries (a mode, or a webhook), in order.
    /// `startup`: on a reload, the chain the server started with, without whose `Node` or
    /// `RBAC` neither may be added (what they read is followed from the start only).
    pub fn from_entries(entries: Vec<Entry>, startup: Option<&Authorizer>) -> Result<Authorizer, String> {
        let mut links = Vec::new();
        for entry in entries {
            let mut webhook = match entry {
                Entry::Mode(mode @ (Mode::Node | Mode::Rbac)) if startup.is_some_and(|s| !s.has(mode)) => {
                    return Err(format!("authorizer type {} is not allowed if it was not enabled at initial server startup", mode.name()));
                }
                Entry::Mode(mode) => {
                    links.extend(Link::new(mode, &mut None));
                    continue;
                }
                Entry::Webhook(settings) => Some(Arc::new(WebhookAuthorizer::new(*settings))),
            };
            links.extend(Link::new(Mode::Webhook, &mut webhook));
        }
        Ok(Authorizer { links })
    }

    fn has(&self, mode: Mode) -> bool {
        self.links.iter().any(|l| l.mode() == mode)
    }

    /// Whether a webhook is one of the authorizers.
    pub fn asks_webhooks(&self) -> bool {
        self.has(Mode::Webhook)
    }

    /// Whether the chain reads the RBAC objects.
    pub fn uses_rbac(&self) -> bool {
        self.has(Mode::Rbac)
    }

    /// The collections whose objects the chain reads, to follow into its [`Snapshot`].
    pub fn sources(&self) -> Vec<Source> {
        let mut sources = Vec::new();
        if self.uses_rbac() {
            sources.extend(rbac::Kind::ALL.map(Source::Rbac));
        }
        if self.has(Mode::Node) {
            sources.extend([Source::Pods, Source::PersistentVolumes, Source::VolumeAttachments]);
        }
        sources
    }

    /// The decision on `user` doing `attrs`, with `state` what the authorizers read as it is
    /// now and `asked` what the webhooks answered this request; or the review a webhook must
    /// answer first.
    pub fn decide(&self, state: &Snapshot, user: &UserInfo, attrs: &Attributes, asked: &Asked, now: Timestamp) -> Result<Decision, Ask> {
        if user.groups.iter().any(|g| g == PRIVILEGED_GROUP) {
            return Ok(Decision { allowed: true, ..Decision::default() });
        }
        let (mut reasons, mut errors) = (Vec::new(), Vec::new());
        for link in &self.links {
            let (verdict, reason, error) = match link {
                Link::AlwaysAllow => (Verdict::Allow, String::new(), String::new()),
                Link::AlwaysDeny => (Verdict::NoOpinion, "Everything is forbidden.".to_string(), String::new()),
                Link::Node => {
                    let (verdict, reason) = node::authorize(&state.nodes, user, attrs);
                    (verdict, reason, String::new())
                }
                Link::Rbac => {
                    let (verdict, reason) = state.rbac.authorize(user, attrs);
                    (verdict, reason, String::new())
                }
                Link::Webhook(webhook) => {
                    let said = WebhookAuthorizer::decide(webhook, user, attrs, asked, now)?;
                    (said.verdict, said.reason, said.error)
                }
            };
            if verdict != Verdict::NoOpinion {
                // The deciding authorizer's reason and error alone; those of all of them, joined,
                // when no one decides.
                return Ok(Decision { allowed: verdict == Verdict::Allow, denied: verdict == Verdict::Deny, reason, error });
            }
            if !reason.is_empty() {
                reasons.push(reason);
            }
            if !error.is_empty() {
                errors.push(error);
            }
        }
        Ok(Decision { reason: reasons.join("\n"), error: rbac::aggregate(&errors), ..Decision::default() })
    }
}

/// The authorizer chain as a request found it, for what its write checks besides the request
/// itself (RBAC's escalation checks, admission plugins): the RBAC objects and node graph at the
/// request's coming, and what the authorization webhook answered the request.
#[derive(Clone, Debug)]
pub struct Access {
    pub authorizer: std::sync::Arc<Authorizer>,
    pub state: Snapshot,
    pub asked: Asked,
    pub now: Timestamp,
}

impl Access {
    /// Whether the chain allows `user` to do `q` (a webhook's decision the request did not ask
    /// for beforehand does not allow it).
    pub fn allows(&self, user: &UserInfo, q: &Attributes) -> bool {
        self.decide(user, q).allowed
    }

    /// The chain's decision on `user` doing `q`, with its reason and error (a webhook's
    /// decision the request did not ask for beforehand is no opinion).
    pub fn decide(&self, user: &UserInfo, q: &Attributes) -> Decision {
        self.decide_or_ask(user, q).unwrap_or_default()
    }

    /// The chain's decision on `user` doing `q`, or the review of a webhook whose answer it
    /// needs first (neither asked before nor kept).
    pub fn decide_or_ask(&self, user: &UserInfo, q: &Attributes) -> Result<Decision, Ask> {
        self.authorizer.decide(&self.state, user, q, &self.asked, self.now)
    }

    /// Takes in a webhook's answer to `ask` (or why there is none), for the decisions to come.
    pub fn answered(&mut self, ask: &Ask, answer: Result<crate::webhook::WebhookAnswer, String>) {
        ask.answered(answer, &mut self.asked, self.now);
    }
}

/// The chain put to one or more questions where no webhook call can be made in between (an
/// impersonation's checks, a review's, a role write's): each decision the webhook must make
/// first is not allowed, and the first such review is kept ([`Self::wanted`]), for the request
/// to ask and put the questions again.
pub struct Decider<'a> {
    pub authorizer: &'a Authorizer,
    pub state: &'a Snapshot,
    pub asked: &'a Asked,
    pub now: Timestamp,
    wanted: RefCell<Option<Ask>>,
}

impl<'a> Decider<'a> {
    pub fn new(authorizer: &'a Authorizer, state: &'a Snapshot, asked: &'a Asked, now: Timestamp) -> Decider<'a> {
        Decider { authorizer, state, asked, now, wanted: RefCell::new(None) }
    }

    pub fn authorize(&self, user: &UserInfo, attrs: &Attributes) -> Decision {
        self.authorizer.decide(self.state, user, attrs, self.asked, self.now).unwrap_or_else(|ask| {
            self.wanted.borrow_mut().get_or_insert(ask);
            Decision::default()
        })
    }

    /// The review the webhook must answer before the answers given are the chain's.
    pub fn wanted(self) -> Option<Ask> {
        self.wanted.into_inner()
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
    pub fn rules_for(&self, state: &Snapshot, user: &UserInfo, namespace: &str) -> RulesReview {
        let mut review = RulesReview::default();
        let mut errors = Vec::new();
        for link in &self.links {
            let rules = match link.mode() {
                Mode::AlwaysAllow => vec![rbac::Rule {
                    verbs: vec!["*".into()],
                    api_groups: vec!["*".into()],
                    resources: vec!["*".into()],
                    non_resource_urls: vec!["*".into()],
                    ..Default::default()
                }],
                Mode::AlwaysDeny => Vec::new(),
                Mode::Node => {
                    if node::node_of(user).is_some() {
                        review.incomplete = true;
                        errors.push("node authorizer does not support user rule resolution".to_string());
                    }
                    Vec::new()
                }
                Mode::Webhook => {
                    review.incomplete = true;
                    errors.push("webhook authorizer does not support user rule resolution".to_string());
                    Vec::new()
                }
                Mode::Rbac => {
                    let (rules, missing) = state.rbac.rules_for(user, namespace, rbac::Wording::Lister);
                    errors.extend(missing);
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

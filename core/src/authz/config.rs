//! `--authorization-config`: the chain of authorizers as an `AuthorizationConfiguration` file
//! (`apiserver.config.k8s.io/v1`, `v1beta1`, `v1alpha1`) sets it, read and checked as kube
//! v1.33 reads and checks it: decoded strictly, its webhooks' TTLs defaulted (5m, 30s), then
//! kube's validation in its order and words, the names of modes other than `Webhook` (their
//! type in lower case), and, on a reload, the modes the server started with other than
//! `Webhook`, which must all still be there.
//!
//! The file names each webhook's kubeconfig; the shell reads those files and
//! [`Config::entries`] makes the chain's entries of them.

use std::collections::BTreeSet;

use jiff::SignedDuration;
use serde_json::json;

use super::conditions::{self, MAX_CONDITIONS, MatchConditions};
use super::{Entry, Mode, Verdict, WebhookSettings};
use crate::config_file::{self, Decoder};
use crate::status::FieldError;
use crate::status::field::aggregate;
use crate::webhook::ReviewVersion;
use crate::webhook::kubeconfig::Endpoint;

/// The versions of `AuthorizationConfiguration` kube v1.33 reads (the same fields in each).
pub const VERSIONS: [&str; 3] = ["apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1beta1", "apiserver.config.k8s.io/v1alpha1"];

/// The types kube-apiserver knows, sorted (as its message lists them).
const KNOWN_TYPES: [&str; 6] = ["ABAC", "AlwaysAllow", "AlwaysDeny", "Node", "RBAC", "Webhook"];

/// kube's bound of a webhook's timeout.
const MAX_TIMEOUT: SignedDuration = SignedDuration::from_secs(30);

/// A file, read and checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub authorizers: Vec<AuthorizerConfig>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorizerConfig {
    pub kind: String,
    pub name: String,
    pub webhook: Option<WebhookConfig>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookConfig {
    pub authorized_ttl: SignedDuration,
    pub unauthorized_ttl: SignedDuration,
    pub timeout: SignedDuration,
    pub review_version: String,
    pub conditions_review_version: String,
    pub failure_policy: String,
    pub connection_type: String,
    /// Set (a Go pointer) even when empty.
    pub kubeconfig_file: Option<String>,
    pub match_conditions: Vec<String>,
}

/// What the checks ask of the file system: whether a path is a regular file, or why it
/// cannot be looked at (Go's `os.Stat` error, `stat /x: no such file or directory`).
pub type Stat<'a> = &'a dyn Fn(&str) -> Result<bool, String>;

impl Config {
    /// The file `data`, read and checked; `required`: the modes other than `Webhook` that
    /// must be there (on a reload, those the server started with).
    pub fn load(data: &[u8], stat: Stat, required: &BTreeSet<String>) -> Result<Config, String> {
        let config = decode(data).map_err(|e| format!("failed to load AuthorizationConfiguration from file: {e}"))?;
        if let Some(errors) = aggregate(&config.validate(stat)) {
            return Err(errors);
        }
        let mut errors = Vec::new();
        for a in config.authorizers.iter().filter(|a| a.kind != "Webhook") {
            let expected = a.kind.to_lowercase();
            if a.name != expected {
                errors.push(format!("expected name {expected} for authorizer {} instead of {}", a.kind, a.name));
            }
        }
        let missing: Vec<&str> = required.iter().filter(|t| !config.authorizers.iter().any(|a| &a.kind == *t)).map(String::as_str).collect();
        if !missing.is_empty() {
            errors.push(format!("missing required types: [{}]", missing.join(" ")));
        }
        if !errors.is_empty() {
            return Err(super::rbac::aggregate(&errors));
        }
        Ok(config)
    }

    /// The types other than `Webhook` the file names (what a reload must keep).
    pub fn fixed_types(&self) -> BTreeSet<String> {
        self.authorizers.iter().filter(|a| a.kind != "Webhook").map(|a| a.kind.clone()).collect()
    }

    /// The chain's entries, each webhook's kubeconfig read by `endpoint`.
    pub fn entries(&self, endpoint: &dyn Fn(&str) -> Result<Endpoint, String>) -> Result<Vec<Entry>, String> {
        let mut entries = Vec::new();
        for a in &self.authorizers {
            let Some(w) = &a.webhook else {
                let mode = Mode::of(&a.kind).ok_or_else(|| format!("authorizer type {} is not implemented by kapi yet", a.kind))?;
                entries.push(Entry::Mode(mode));
                continue;
            };
            let file = match (w.connection_type.as_str(), &w.kubeconfig_file) {
                ("KubeConfigFile", Some(file)) => file,
                _ => return Err(format!("authorizer {:?}: InClusterConfig is not allowed for kube-apiserver", a.name)),
            };
            let compiled = w.match_conditions.iter().map(|c| conditions::compile(c)).collect::<Result<Vec<_>, _>>()?;
            entries.push(Entry::Webhook(Box::new(WebhookSettings {
                name: a.name.clone(),
                endpoint: endpoint(file)?.with_timeout(w.timeout),
                version: ReviewVersion::parse(&w.review_version, "webhook authorizer")?,
                authorized_ttl: w.authorized_ttl,
                unauthorized_ttl: w.unauthorized_ttl,
                timeout: w.timeout,
                on_error: if w.failure_policy == "Deny" { Verdict::Deny } else { Verdict::NoOpinion },
                conditions: MatchConditions::new(compiled),
            })));
        }
        Ok(entries)
    }

    /// kube's `ValidateAuthorizationConfiguration`, in its order.
    fn validate(&self, stat: Stat) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if self.authorizers.is_empty() {
            errs.push(FieldError::required("authorizers", "at least one authorization mode must be defined"));
        }
        let (mut types, mut names) = (BTreeSet::new(), BTreeSet::new());
        for (i, a) in self.authorizers.iter().enumerate() {
            let at = format!("authorizers[{i}]");
            if a.kind.is_empty() {
                errs.push(FieldError::required(format!("{at}.type"), ""));
                continue;
            }
            if !KNOWN_TYPES.contains(&a.kind.as_str()) {
                errs.push(FieldError::not_supported(format!("{at}.type"), json!(a.kind), &KNOWN_TYPES));
                continue;
            }
            if a.kind != "Webhook" && !types.insert(a.kind.clone()) {
                errs.push(FieldError::duplicate(format!("{at}.type"), json!(a.kind)));
                continue;
            }
            if a.name.is_empty() {
                errs.push(FieldError::required(format!("{at}.name"), ""));
            } else if names.contains(&a.name) {
                errs.push(FieldError::duplicate(format!("{at}.name"), json!(a.name)));
            } else {
                let invalid = crate::validation::names::dns1123_subdomain(&a.name);
                if !invalid.is_empty() {
                    errs.push(FieldError::invalid(format!("{at}.name"), json!(a.name), format!("authorizer name is invalid: {}", invalid.join(", "))));
                }
            }
            names.insert(a.name.clone());
            match (&a.webhook, a.kind == "Webhook") {
                (None, true) => errs.push(FieldError::required(format!("{at}.webhook"), "required when type=Webhook")),
                (Some(w), true) => w.validate(&at, stat, &mut errs),
                (Some(_), false) => errs.push(FieldError::invalid(format!("{at}.webhook"), json!("non-null"), "may only be specified when type=Webhook")),
                (None, false) => {}
            }
        }
        errs
    }
}

impl WebhookConfig {
    /// kube's `ValidateWebhookConfiguration`, its paths the authorizer's (`authorizers[0].timeout`).
    fn validate(&self, at: &str, stat: Stat, errs: &mut Vec<FieldError>) {
        let go = |d: SignedDuration| json!(crate::pipeline::limits::go_duration_string(d));
        if self.timeout.is_zero() {
            errs.push(FieldError::required(format!("{at}.timeout"), ""));
        } else if self.timeout > MAX_TIMEOUT || self.timeout.is_negative() {
            errs.push(FieldError::invalid(format!("{at}.timeout"), go(self.timeout), "must be > 0s and <= 30s"));
        }
        for (field, ttl) in [("authorizedTTL", self.authorized_ttl), ("unauthorizedTTL", self.unauthorized_ttl)] {
            if ttl.is_zero() {
                errs.push(FieldError::required(format!("{at}.{field}"), ""));
            } else if ttl.is_negative() {
                errs.push(FieldError::invalid(format!("{at}.{field}"), go(ttl), "must be > 0s"));
            }
        }
        match self.review_version.as_str() {
            "" => errs.push(FieldError::required(format!("{at}.subjectAccessReviewVersion"), "")),
            "v1" | "v1beta1" => {}
            other => errs.push(FieldError::not_supported(format!("{at}.subjectAccessReviewVersion"), json!(other), &["v1", "v1beta1"])),
        }
        match self.conditions_review_version.as_str() {
            "" if !self.match_conditions.is_empty() => {
                errs.push(FieldError::required(format!("{at}.matchConditionSubjectAccessReviewVersion"), "required if match conditions are specified"))
            }
            "" | "v1" => {}
            other => errs.push(FieldError::not_supported(format!("{at}.matchConditionSubjectAccessReviewVersion"), json!(other), &["v1"])),
        }
        match self.failure_policy.as_str() {
            "" => errs.push(FieldError::required(format!("{at}.failurePolicy"), "")),
            "NoOpinion" | "Deny" => {}
            other => errs.push(FieldError::not_supported(format!("{at}.failurePolicy"), json!(other), &["NoOpinion", "Deny"])),
        }
        let file_at = format!("{at}.connectionInfo.kubeConfigFile");
        match (self.connection_type.as_str(), self.kubeconfig_file.as_deref()) {
            ("", _) => errs.push(FieldError::required(format!("{at}.connectionInfo.type"), "")),
            ("InClusterConfig", Some(file)) => errs.push(FieldError::invalid(file_at, json!(file), "can only be set when type=KubeConfigFile")),
            ("InClusterConfig", None) => {}
            ("KubeConfigFile", None | Some("")) => errs.push(FieldError::required(file_at, "")),
            ("KubeConfigFile", Some(file)) if !file.starts_with('/') => errs.push(FieldError::invalid(file_at, json!(file), "must be an absolute path")),
            ("KubeConfigFile", Some(file)) => match stat(file) {
                Err(e) => errs.push(FieldError::invalid(file_at, json!(file), format!("error loading file: {e}"))),
                Ok(false) => errs.push(FieldError::invalid(file_at, json!(file), "must be a regular file")),
                Ok(true) => {}
            },
            (other, file) => {
                let pointer = if file.is_some() { "(*string)(0xc000000000)" } else { "(*string)(nil)" };
                let go_struct = format!("apiserver.WebhookConnectionInfo{{Type:{other:?}, KubeConfigFile:{pointer}}}");
                let mut e = FieldError::not_supported(format!("{at}.connectionInfo.type"), json!(""), &["InClusterConfig", "KubeConfigFile"]);
                e.bad_value = Some(crate::status::field::BadValue::Go(go_struct));
                errs.push(e);
            }
        }
        self.validate_conditions(at, errs);
    }

    fn validate_conditions(&self, at: &str, errs: &mut Vec<FieldError>) {
        if self.match_conditions.len() > MAX_CONDITIONS {
            errs.push(FieldError::too_many(format!("{at}.matchConditions"), self.match_conditions.len(), MAX_CONDITIONS));
            return;
        }
        let mut seen = BTreeSet::new();
        for (j, expression) in self.match_conditions.iter().enumerate() {
            let field = format!("{at}.matchConditions[{j}].expression");
            if expression.trim().is_empty() {
                errs.push(FieldError::required(field, ""));
            } else if !seen.insert(expression.as_str()) {
                errs.push(FieldError::duplicate(field, json!(expression)));
            } else if let Err(detail) = conditions::compile(expression) {
                errs.push(FieldError::invalid(field, json!(expression), detail));
            }
        }
    }
}

/// The file's tree as kube's strict decoder reads it, defaulted.
fn decode(data: &[u8]) -> Result<Config, String> {
    let tree = config_file::read(data, "AuthorizationConfiguration", &VERSIONS, config_file::APISERVER_SCHEME)?;
    let mut d = Decoder::new(&tree);
    let root = d.root(&tree, "AuthorizationConfiguration", &["apiVersion", "kind", "authorizers"]);
    let mut authorizers = Vec::new();
    for (at, item) in d.items(&root, "authorizers", "[]v1.AuthorizerConfiguration") {
        let a = d.object(Some(item), at, "AuthorizationConfiguration", "AuthorizerConfiguration", &["type", "name", "webhook"]);
        let webhook = a.has("webhook").then(|| {
            let known = [
                "authorizedTTL",
                "unauthorizedTTL",
                "timeout",
                "subjectAccessReviewVersion",
                "matchConditionSubjectAccessReviewVersion",
                "failurePolicy",
                "connectionInfo",
                "matchConditions",
            ];
            let w = d.nested(&a, "webhook", "WebhookConfiguration", &known);
            let connection = d.nested(&w, "connectionInfo", "WebhookConnectionInfo", &["type", "kubeConfigFile"]);
            let mut match_conditions = Vec::new();
            for (at, item) in d.items(&w, "matchConditions", "[]v1.WebhookMatchCondition") {
                let c = d.object(Some(item), at, "WebhookConfiguration", "WebhookMatchCondition", &["expression"]);
                match_conditions.push(d.string(&c, "expression"));
            }
            let or_default = |d: SignedDuration, default: SignedDuration| if d.is_zero() { default } else { d };
            WebhookConfig {
                authorized_ttl: or_default(d.duration(&w, "authorizedTTL"), super::webhook::AUTHORIZED_TTL),
                unauthorized_ttl: or_default(d.duration(&w, "unauthorizedTTL"), super::webhook::UNAUTHORIZED_TTL),
                timeout: d.duration(&w, "timeout"),
                review_version: d.string(&w, "subjectAccessReviewVersion"),
                conditions_review_version: d.string(&w, "matchConditionSubjectAccessReviewVersion"),
                failure_policy: d.string(&w, "failurePolicy"),
                connection_type: d.string(&connection, "type"),
                kubeconfig_file: connection.has("kubeConfigFile").then(|| d.string(&connection, "kubeConfigFile")),
                match_conditions,
            }
        });
        authorizers.push(AuthorizerConfig { kind: d.string(&a, "type"), name: d.string(&a, "name"), webhook });
    }
    d.finish()?;
    Ok(Config { authorizers })
}

#[cfg(test)]
mod tests;

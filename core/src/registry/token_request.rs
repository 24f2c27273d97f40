//! `serviceaccounts/token` (kube's `TokenREST`): a TokenRequest for a service account that
//! exists is answered with a token signed for it, meant for the audiences asked (the
//! server's by default), lasting the seconds asked (an hour by default, at most
//! `--service-account-max-token-expiration`), and bound, if asked, to a pod (and the node it
//! runs on), a secret or a node that exists with the uid given; nothing is stored.
//!
//! It is admitted as a create of `serviceaccounts/token` as kube admits it: the request as
//! sent by the mutating admission, then, once its service account is found and the request
//! defaulted and valid, by the validating admission, before what it is bound to is read.
//!
//! Call order, as [`WriteOp`]'s: [`TokenRequestOp::poll`], send each [`WriteEffect::Kv`] to the
//! store and feed the answer to [`TokenRequestOp::handle`] (an admission webhook's answer to
//! [`TokenRequestOp::write_under_way`]), until [`WriteEffect::Done`].

use std::sync::Arc;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::{Said, WriteContext, WriteEffect, WriteKind, WriteOp, WriteOutcome, decode_stored, storage_error};
use crate::admission::Found;
use crate::catalog::Resource;
use crate::kv::KvResult;
use crate::meta;
use crate::schema::normalize::format_time;
use crate::serviceaccount::{
    Binding, DEFAULT_EXPIRATION_SECONDS, EXTENDED_EXPIRATION_SECONDS, MAX_EXPIRATION_SECONDS, MIN_EXPIRATION_SECONDS, TokenConfig,
    WARN_ONLY_EXPIRATION_SECONDS, jwt,
};
use crate::status::{ApiError, FieldError, GroupKind, GroupResource};
use crate::storage::{Outcome, StorageEffect, StorageEvent, StorageOp, StorageRequest};

/// The resources whose objects a token request reads.
#[derive(Clone)]
pub struct TokenResources {
    pub service_accounts: Arc<Resource>,
    pub pods: Option<Arc<Resource>>,
    pub secrets: Option<Arc<Resource>>,
    pub nodes: Option<Arc<Resource>>,
}

/// What is being read.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Reading {
    Account,
    Bound(Kind),
    /// The node of the pod the token is bound to (what is not found is left out).
    PodNode,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Pod,
    Secret,
    Node,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Pod => "Pod",
            Kind::Secret => "Secret",
            Kind::Node => "Node",
        }
    }
}

pub struct TokenRequestOp {
    config: Arc<TokenConfig>,
    resources: TokenResources,
    /// `--etcd-prefix`.
    prefix: String,
    namespace: String,
    name: String,
    request: Value,
    now: Timestamp,
    jti: String,
    account: Option<Value>,
    binding: Binding,
    /// The node of the pod the token is bound to, while it is read.
    pod_node: Option<String>,
    reading: Option<(Reading, StorageOp<ApiError>)>,
    /// What the request's admission is made of (the write context, what it reads, the
    /// machine's draws), kept for its validating phase.
    admission: Option<Box<(WriteContext, Found, crate::rand::Rng)>>,
    /// The admission under way: its mutating phase (`true`) or its validating one.
    admitting: Option<(Box<WriteOp>, bool)>,
    /// What the admission warned of.
    admission_said: Said,
    warnings: Vec<String>,
    done: Option<Result<WriteOutcome, ApiError>>,
}

impl TokenRequestOp {
    /// A request by the body `request` for the service account `namespace`/`name`, made at
    /// `now`; `jti` is the new token's id.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: Arc<TokenConfig>,
        resources: TokenResources,
        prefix: &str,
        namespace: &str,
        name: &str,
        request: Value,
        now: Timestamp,
        jti: String,
        admission: (WriteContext, crate::rand::Rng),
    ) -> TokenRequestOp {
        let (ctx, rng) = admission;
        TokenRequestOp {
            config,
            resources,
            prefix: prefix.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            request,
            now,
            jti,
            account: None,
            binding: Binding::default(),
            pod_node: None,
            reading: None,
            admission: Some(Box::new((ctx, Found::default(), rng))),
            admitting: None,
            admission_said: Said::default(),
            warnings: Vec::new(),
            done: None,
        }
    }

    fn gk() -> GroupKind {
        GroupKind { group: "authentication.k8s.io".into(), kind: "TokenRequest".into() }
    }

    /// The body may name only the URL's service account.
    fn check_names(&self) -> Result<(), ApiError> {
        for (field, want, what) in [("name", &self.name, "name"), ("namespace", &self.namespace, "namespace")] {
            let given = meta::str_at(&self.request, &["metadata", field]).unwrap_or_default();
            if !given.is_empty() && given != want {
                let detail = format!("must match the service account {what} if specified");
                return Err(ApiError::invalid(&Self::gk(), &self.name, &[FieldError::invalid(format!("metadata.{field}"), json!(given), detail)]));
            }
        }
        Ok(())
    }

    fn resource(&self, resource: &str) -> Option<Arc<Resource>> {
        match resource {
            "serviceaccounts" => Some(self.resources.service_accounts.clone()),
            "pods" => self.resources.pods.clone(),
            "secrets" => self.resources.secrets.clone(),
            _ => self.resources.nodes.clone(),
        }
    }

    /// Reads the object `name` of `resource` (of the request's namespace, if namespaced).
    fn read(&mut self, reading: Reading, resource: &str, name: &str) {
        let Some(res) = self.resource(resource) else {
            self.done = Some(Err(ApiError::not_found(&GroupResource { group: String::new(), resource: resource.into() }, name)));
            return;
        };
        let root = format!("{}/{}", self.prefix, res.info.storage_prefix);
        let ns = res.info.namespaced.then_some(self.namespace.as_str());
        let key = crate::storage::keys::object_key(&root, ns, name);
        self.reading = Some((reading, StorageOp::new(StorageRequest::Get { key, revision: 0 })));
    }

    pub fn handle(&mut self, now: Timestamp, result: KvResult) {
        if let Some((op, _)) = &mut self.admitting {
            return op.handle(now, result);
        }
        if let Some((_, op)) = self.reading.as_mut() {
            op.handle(now, StorageEvent::Kv(result));
        }
    }

    /// What the request's admission needs to read besides what was `found` so far (see
    /// [`crate::admission::Chain::lookups_after`]).
    pub fn lookups_after(&self, found: &[(crate::admission::Lookup, Option<Arc<Value>>)]) -> Vec<crate::admission::Lookup> {
        let Some(admission) = self.admission.as_deref() else { return Vec::new() };
        let ctx = &admission.0;
        let pending = crate::admission::Pending {
            operation: crate::admission::Operation::Create,
            info: &self.resources.service_accounts.info,
            subresource: Some("token"),
            namespace: Some(&self.namespace),
            name: Some(&self.name),
            object: Some(&self.request),
            dry_run: ctx.dry_run,
        };
        ctx.admission.lookups_after(&pending, &ctx.user, found)
    }

    /// What the request's admission reads, found before it starts: its mutating phase starts.
    pub fn found(&mut self, found: Found) {
        if let Some(admission) = &mut self.admission {
            admission.1 = found;
        }
        self.admit(true);
    }

    /// Starts the admission's mutating or validating phase on the request.
    fn admit(&mut self, mutating: bool) {
        let Some(admission) = self.admission.as_mut() else { return };
        let (ctx, found, rng) = &mut **admission;
        let kind = WriteKind::Admit { body: self.request.clone(), mutating };
        let op = WriteOp::new(self.resources.service_accounts.clone(), ctx.clone(), kind, found.clone(), crate::rand::Rng::new(rng.next_u64()));
        self.admitting = Some((Box::new(op), mutating));
    }

    /// What the admission said (warnings, audit annotations), whatever the outcome.
    pub fn take_said(&mut self) -> Said {
        std::mem::take(&mut self.admission_said)
    }

    /// The admission under way, which admission webhooks' answers go to.
    pub fn write_under_way(&mut self) -> Option<&mut WriteOp> {
        self.admitting.as_mut().map(|(op, _)| &mut **op)
    }

    pub fn poll(&mut self, now: Timestamp) -> Option<WriteEffect> {
        loop {
            if let Some(done) = self.done.take() {
                return Some(WriteEffect::Done(done));
            }
            if let Some((op, mutating)) = &mut self.admitting {
                let mutating = *mutating;
                let admitted = match op.poll(now)? {
                    WriteEffect::Done(admitted) => admitted,
                    effect => return Some(effect),
                };
                self.admission_said.extend(op.take_said());
                self.admitting = None;
                let next = admitted.and_then(|admitted| {
                    self.request = admitted.object;
                    match mutating {
                        true => self.check_names().map(|()| self.read(Reading::Account, "serviceaccounts", &self.name.clone())),
                        false => self.bind(),
                    }
                });
                if let Err(e) = next {
                    self.done = Some(Err(e));
                }
                continue;
            }
            let (reading, op) = self.reading.as_mut()?;
            let reading = *reading;
            match op.poll(now)? {
                StorageEffect::Kv(req) => return Some(WriteEffect::Kv(req)),
                StorageEffect::Done(result) => {
                    self.reading = None;
                    let resource = match reading {
                        Reading::Account => "serviceaccounts",
                        Reading::Bound(Kind::Pod) => "pods",
                        Reading::Bound(Kind::Secret) => "secrets",
                        Reading::Bound(Kind::Node) | Reading::PodNode => "nodes",
                    };
                    let res = self.resource(resource).expect("a read resource is served");
                    let found = match result {
                        Ok(Outcome::Found(Some(kv))) => decode_stored(&res, &kv).map(Some),
                        Ok(Outcome::Found(None)) => Ok(None),
                        Ok(other) => Err(ApiError::internal(format!("unexpected storage outcome {other:?}"))),
                        Err(e) => Err(storage_error(e, &res.info.group_resource(), "")),
                    };
                    if let Err(e) = self.read_answered(reading, &res, found) {
                        self.done = Some(Err(e));
                    }
                }
                StorageEffect::Transform(_) => unreachable!("a read does not transform"),
            }
        }
    }

    /// Goes on from what a read found.
    fn read_answered(&mut self, reading: Reading, res: &Resource, found: Result<Option<Value>, ApiError>) -> Result<(), ApiError> {
        let bound = self.request.pointer("/spec/boundObjectRef").cloned().unwrap_or(Value::Null);
        let spec_ref = |k: &str| bound.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        match reading {
            Reading::Account => {
                self.account = Some(found?.ok_or_else(|| ApiError::not_found(&res.info.group_resource(), &self.name))?);
                self.prepare()?;
                self.admit(false);
                Ok(())
            }
            Reading::Bound(kind) => {
                let name = spec_ref("name");
                let object = found?.ok_or_else(|| ApiError::not_found(&res.info.group_resource(), &name))?;
                let uid = meta::uid(&object).to_string();
                // A pod of another account is refused before its uid is compared.
                let account = meta::str_at(&object, &["spec", "serviceAccountName"]).unwrap_or_default();
                if kind == Kind::Pod && account != self.name {
                    return Err(ApiError::bad_request(format!(
                        "cannot bind token for serviceaccount {} to pod running with different serviceaccount name.",
                        crate::status::quote(&self.name)
                    )));
                }
                let wanted = spec_ref("uid");
                if !wanted.is_empty() && wanted != uid {
                    let why = format!(
                        "the UID in the bound object reference ({wanted}) does not match the UID in record. The object might have been deleted and then recreated"
                    );
                    return Err(ApiError::conflict(&GroupResource { group: String::new(), resource: kind.name().into() }, &name, &why));
                }
                let reference = Some((name, uid));
                match kind {
                    Kind::Pod => {
                        self.binding.pod = reference;
                        match meta::str_at(&object, &["spec", "nodeName"]).filter(|n| !n.is_empty()) {
                            Some(node) => {
                                let node = node.to_string();
                                self.read(Reading::PodNode, "nodes", &node);
                                self.pod_node = Some(node);
                                Ok(())
                            }
                            None => self.issue(),
                        }
                    }
                    Kind::Secret => {
                        self.binding.secret = reference;
                        self.issue()
                    }
                    Kind::Node => {
                        self.binding.node = reference;
                        self.issue()
                    }
                }
            }
            Reading::PodNode => {
                // A node that is not found is named without its uid; a failed read fails.
                let name = self.pod_node.take().unwrap_or_default();
                let uid = found.map_err(|e| ApiError::internal(e.message))?.map(|node| meta::uid(&node).to_string()).unwrap_or_default();
                self.binding.node = Some((name, uid));
                self.issue()
            }
        }
    }

    /// Once the request is admitted: the token, or the read of what it is to be bound to.
    fn bind(&mut self) -> Result<(), ApiError> {
        let bound = self.request.pointer("/spec/boundObjectRef").cloned().unwrap_or(Value::Null);
        if bound.is_null() {
            return self.issue();
        }
        let spec_ref = |k: &str| bound.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let (api_version, kind, name) = (spec_ref("apiVersion"), spec_ref("kind"), spec_ref("name"));
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let (kind, resource) = match (group, kind.as_str()) {
            ("", "Pod") => (Kind::Pod, "pods"),
            ("", "Secret") => (Kind::Secret, "secrets"),
            ("", "Node") => (Kind::Node, "nodes"),
            _ => {
                let version = api_version.rsplit('/').next().unwrap_or_default();
                return Err(ApiError::bad_request(format!("cannot bind token to object of type {group}/{version}, Kind={kind}")));
            }
        };
        self.read(Reading::Bound(kind), resource, &name);
        Ok(())
    }

    /// kube's defaults and validation of the request, once its service account is found.
    fn prepare(&mut self) -> Result<(), ApiError> {
        let audiences = self.request.pointer("/spec/audiences").and_then(Value::as_array).filter(|a| !a.is_empty()).cloned();
        let spec = meta::object_at(&mut self.request, &["spec"]);
        spec.insert("audiences".into(), audiences.map(Value::Array).unwrap_or_else(|| json!(self.config.audiences)));
        let seconds = spec.get("expirationSeconds").and_then(Value::as_i64).unwrap_or(DEFAULT_EXPIRATION_SECONDS);
        spec.insert("expirationSeconds".into(), json!(seconds));
        let metadata = meta::object_at(&mut self.request, &["metadata"]);
        metadata.insert("name".into(), json!(self.name));
        metadata.insert("namespace".into(), json!(self.namespace));
        metadata.insert("creationTimestamp".into(), json!(format_time(self.now, false)));
        self.request.as_object_mut().expect("a TokenRequest is an object").remove("status");
        let detail = if seconds < MIN_EXPIRATION_SECONDS {
            "may not specify a duration less than 10 minutes"
        } else if seconds > MAX_EXPIRATION_SECONDS {
            "may not specify a duration larger than 2^32 seconds"
        } else {
            return Ok(());
        };
        Err(ApiError::invalid(&Self::gk(), "", &[FieldError::invalid("spec.expirationSeconds", json!(seconds), detail)]))
    }

    /// The token, once everything it is bound to is known.
    fn issue(&mut self) -> Result<(), ApiError> {
        let mut seconds = self.request.pointer("/spec/expirationSeconds").and_then(Value::as_i64).unwrap_or(DEFAULT_EXPIRATION_SECONDS);
        if let Some(max) = self.config.max_expiration.filter(|max| seconds > *max) {
            self.warnings.push(format!("requested expiration of {seconds} seconds shortened to {max} seconds"));
            seconds = max;
            self.request["spec"]["expirationSeconds"] = json!(max);
        }
        let audiences: Vec<String> =
            self.request.pointer("/spec/audiences").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect();
        // What kubelets ask for lasts a year, warned about after the time asked.
        let kube_audiences = audiences.iter().all(|a| self.config.audiences.contains(a));
        let (lifetime, warn_after) = if self.config.extend_expiration && self.binding.pod.is_some() && seconds == WARN_ONLY_EXPIRATION_SECONDS && kube_audiences
        {
            (EXTENDED_EXPIRATION_SECONDS, Some(seconds))
        } else {
            (seconds, None)
        };
        let account = self.account.as_ref().expect("the service account was found");
        let claims = self.config.claims(&self.namespace, &self.name, meta::uid(account), &self.binding, &audiences, self.now, lifetime, warn_after, &self.jti);
        let token = jwt::sign(&self.config.signing_key, &claims);
        let expires = self.now.checked_add(jiff::SignedDuration::from_secs(seconds)).unwrap_or(Timestamp::MAX);
        self.request["status"] = json!({"token": token, "expirationTimestamp": format_time(expires, false)});
        let object = std::mem::take(&mut self.request);
        self.done = Some(Ok(WriteOutcome { code: 201, object, stored: None, deleted: false, warnings: std::mem::take(&mut self.warnings) }));
        Ok(())
    }
}

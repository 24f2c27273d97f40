//! POST (kube's `handlers/create.go`): creates, reviews, actions on another object
//! (`pods/binding`, `bindings`) and evictions.

use std::sync::Arc;

use jiff::Timestamp;
use serde_json::Value;

use super::{AfterLookups, Authenticating, Lookups, PendingEviction, PendingWrite, Stage};
use crate::admission::{Operation, Pending};
use crate::catalog::{Backing, Resource, ReviewContext};
use crate::codec::negotiate::{self, Target};
use crate::codec::{self, Output};
use crate::meta;
use crate::pipeline::params;
use crate::pipeline::query::Query;
use crate::pipeline::{RequestInfo, RequestMachine};
use crate::registry::{FieldValidation, TokenRequestOp, TokenResources, WriteContext, WriteKind};
use crate::resources::reviews::review_audiences;
use crate::status::ApiError;

impl RequestMachine {
    pub(super) fn create(&mut self, now: Timestamp, res: Arc<Resource>, info: &RequestInfo, query: &Query, namespace: Option<String>) -> Result<(), ApiError> {
        let output = self.output(&res, Target::Object, query)?;
        let opts = params::write_options(query, "CreateOptions", &self.user_agent())?;
        let mut ctx = self.write_context(now, info, namespace.clone(), &opts);
        match res.info.backing {
            Backing::Review => {
                let (mut obj, _) = self.decode_body(&res, FieldValidation::Ignore)?;
                crate::schema::normalize::normalize(crate::schema::schema(), &res.info.definition, &mut obj).map_err(ApiError::bad_request)?;
                let obj = match res.info.kind == "TokenReview" {
                    true => match self.review_token(now, obj, res.clone(), output)? {
                        Some(obj) => obj,
                        None => return Ok(()),
                    },
                    false => obj,
                };
                let decider = crate::authz::Decider::new(&self.authorizer, &self.served.authz, &self.asked, now);
                let ctx = ReviewContext { user: &self.user, authenticator: &self.server.authenticator, decider: &decider };
                let answer = res.strategy.review(obj, &ctx);
                if let Some(ask) = decider.wanted() {
                    self.ask_authorizer(ask, super::Resume::Authorized, info.clone(), query.clone());
                    return Ok(());
                }
                self.respond_object(&res, &answer?, output, 201, "", now);
                return Ok(());
            }
            Backing::ActionOn { resource, subresource } => {
                // kube admits the object as a create of this resource, then carries it out
                // as a create on the subresource of the object it names.
                let body = self.decode_action_body()?;
                let target = self.served.catalog.get(&res.info.group, &res.info.version, resource).cloned().ok_or_else(ApiError::path_not_found)?;
                ctx.name = Some(meta::name(&body).to_string());
                let lookups = subresource_create_lookups(&ctx, &res, &body);
                ctx.subresource = Some(subresource.to_string());
                let kind = WriteKind::Action { body, admitted_as: Some(res) };
                self.start_write(PendingWrite { res: target, output, ctx, kind }, lookups);
                return Ok(());
            }
            // Read-only resources serve no create (routing answers 405 before this).
            Backing::Probed => return Err(ApiError::method_not_allowed()),
            Backing::Stored => {}
        }
        if res.info.subresource(&info.subresource).is_some_and(|s| s.kind == "Eviction") {
            return self.evict(res, ctx, output);
        }
        if res.info.subresource(&info.subresource).is_some_and(|s| s.kind == "TokenRequest") {
            return self.request_token(now, res, ctx, output);
        }
        if !info.subresource.is_empty() {
            let body = self.decode_action_body()?;
            self.start_action(res, ctx, body, output);
            return Ok(());
        }
        let (obj, findings) = self.decode_body(&res, opts.field_validation)?;
        ctx.body_findings = findings;
        let pending = Pending {
            operation: Operation::Create,
            info: &res.info,
            subresource: None,
            namespace: namespace.as_deref(),
            name: None,
            object: Some(&obj),
            dry_run: ctx.dry_run,
        };
        let lookups = super::write::admission_lookups(&ctx, &pending);
        self.start_write(PendingWrite { res, output, ctx, kind: WriteKind::Create(obj) }, lookups);
        Ok(())
    }

    /// A TokenReview: a token of `--token-auth-file` is reviewed as the others are
    /// ([`crate::catalog::Strategy::review`]: the review is given back); a service account or
    /// bootstrap token for the audiences asked (the server's by default) once what it names is
    /// looked up; any other by the authentication webhook, last, as kube's union of token
    /// authenticators asks them.
    fn review_token(&mut self, now: Timestamp, review: Value, res: Arc<Resource>, output: Output) -> Result<Option<Value>, ApiError> {
        let token = meta::str_at(&review, &["spec", "token"]).unwrap_or_default().to_string();
        if token.is_empty() {
            return Err(ApiError::bad_request("token is required for TokenReview in authentication"));
        }
        if self.server.authenticator.is_static_token(&token) {
            return Ok(Some(review));
        }
        let asked = review_audiences(&review);
        let audiences = (!asked.is_empty()).then_some(asked.as_slice());
        match self.server.authenticator.review_token(&token, audiences, now) {
            Some(Ok(pending)) => {
                let lookups = pending.lookups();
                let then = AfterLookups::TokenReview { pending: Box::new(pending), review, res, output };
                self.stage = Stage::Lookups(Box::new(Lookups::new(lookups, then)));
            }
            Some(Err(why)) => self.ask_authenticator(&token, &asked, vec![why], Authenticating::TokenReview { review, res, output }, now),
            None => self.ask_authenticator(&token, &asked, Vec::new(), Authenticating::TokenReview { review, res, output }, now),
        }
        Ok(None)
    }

    /// The body of a create on a subresource that changes its parent (`pods/binding`).
    pub(super) fn decode_action_body(&self) -> Result<Value, ApiError> {
        codec::decode(&self.req.body, negotiate::request_format(self.req.header("Content-Type"))?).map_err(ApiError::bad_request)
    }

    /// A create on a subresource that changes its parent, through admission: what its
    /// plugins, webhooks and policies read is looked up first.
    pub(super) fn start_action(&mut self, res: Arc<Resource>, ctx: WriteContext, body: Value, output: Output) {
        let lookups = subresource_create_lookups(&ctx, &res, &body);
        self.start_write(PendingWrite { res, output, ctx, kind: WriteKind::Action { body, admitted_as: None } }, lookups);
    }

    /// `serviceaccounts/token`: a TokenRequest for the service account of the URL (404 where
    /// the server issues no tokens).
    fn request_token(&mut self, now: Timestamp, accounts: Arc<Resource>, ctx: WriteContext, output: Output) -> Result<(), ApiError> {
        let config = self.server.authenticator.service_accounts.clone().ok_or_else(ApiError::path_not_found)?;
        let body = self.decode_action_body()?;
        let core = |resource: &str| self.served.catalog.get("", "v1", resource).cloned();
        let resources = TokenResources { service_accounts: accounts.clone(), pods: core("pods"), secrets: core("secrets"), nodes: core("nodes") };
        let (namespace, name) = (ctx.namespace.clone().unwrap_or_default(), ctx.name.clone().unwrap_or_default());
        let jti = self.rng.uuid();
        let lookups = subresource_create_lookups(&ctx, &accounts, &body);
        let admission = (ctx, crate::rand::Rng::new(self.rng.next_u64()));
        let op = TokenRequestOp::new(config, resources, &self.server.prefix, &namespace, &name, body, now, jti, admission);
        self.stage = Stage::Lookups(Box::new(Lookups::new(lookups, AfterLookups::Token { op: Box::new(op), res: accounts, output })));
        Ok(())
    }

    /// `pods/eviction`: the Eviction (policy/v1 or v1beta1) of the pod of the URL, admitted
    /// and carried out by [`registry::EvictionOp`] (which reads its delete options).
    pub(super) fn evict(&mut self, pods: Arc<Resource>, ctx: WriteContext, output: Output) -> Result<(), ApiError> {
        let body = self.decode_action_body()?;
        let api_version = body.get("apiVersion").and_then(Value::as_str).unwrap_or("policy/v1");
        let kind = body.get("kind").and_then(Value::as_str).unwrap_or("Eviction");
        if kind != "Eviction" || !["policy/v1", "policy/v1beta1"].contains(&api_version) {
            return Err(ApiError::bad_request(format!("not a Eviction object: {api_version}, Kind={kind}")));
        }
        let budgets = self.served.catalog.get("policy", "v1", "poddisruptionbudgets").cloned().ok_or_else(ApiError::path_not_found)?;
        let lookups = subresource_create_lookups(&ctx, &pods, &body);
        let eviction = PendingEviction { pods, budgets, ctx, eviction: body, output };
        self.stage = Stage::Lookups(Box::new(Lookups::new(lookups, AfterLookups::Evict(Box::new(eviction)))));
        Ok(())
    }
}

/// What the admission of `body`, created at the subresource of `res` the write names,
/// reads first.
fn subresource_create_lookups(ctx: &WriteContext, res: &Resource, body: &Value) -> Vec<crate::admission::Lookup> {
    let pending = Pending {
        operation: Operation::Create,
        info: &res.info,
        subresource: ctx.subresource.as_deref(),
        namespace: ctx.namespace.as_deref(),
        name: ctx.name.as_deref(),
        object: Some(body),
        dry_run: ctx.dry_run,
    };
    super::write::admission_lookups(ctx, &pending)
}

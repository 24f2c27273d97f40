//! POST (kube's `handlers/create.go`): creates, reviews, actions on another object
//! (`pods/binding`, `bindings`) and evictions.

use std::sync::Arc;

use jiff::Timestamp;
use serde_json::Value;

use super::{AfterLookups, Lookups, PendingWrite, Stage};
use crate::admission::{self, Admission, Operation};
use crate::catalog::{Backing, Resource, ReviewContext};
use crate::codec::negotiate::{self, Target};
use crate::codec::{self, Output};
use crate::meta;
use crate::pipeline::params;
use crate::pipeline::query::Query;
use crate::pipeline::{RequestInfo, RequestMachine};
use crate::registry::{EvictionOp, FieldValidation, TokenRequestOp, TokenResources, WriteContext, WriteKind, WriteOp};
use crate::resources::reviews::{reviewed, token_review_status};
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
                // A service account or bootstrap token is reviewed for the audiences asked (the server's by
                // default), once what it names is looked up.
                let token = meta::str_at(&obj, &["spec", "token"]).filter(|_| res.info.kind == "TokenReview").unwrap_or_default().to_string();
                if res.info.kind == "TokenReview" && token.is_empty() {
                    return Err(ApiError::bad_request("token is required for TokenReview in authentication"));
                }
                let asked: Vec<String> =
                    obj.pointer("/spec/audiences").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect();
                let audiences = (!asked.is_empty()).then_some(asked.as_slice());
                // The token file is asked first, as kube's union of token authenticators does.
                let pending =
                    if self.server.authenticator.is_static_token(&token) { None } else { self.server.authenticator.review_token(&token, audiences, now) };
                match pending {
                    Some(Ok(pending)) => {
                        let lookups = pending.lookups();
                        let then = AfterLookups::TokenReview { pending: Box::new(pending), review: obj, res, output };
                        self.stage = Stage::Lookups(Box::new(Lookups::new(lookups, then)));
                        return Ok(());
                    }
                    Some(Err(why)) => {
                        let answer = reviewed(obj, token_review_status(Err(&why), &[]));
                        self.respond_object(&res, &answer, output, 201, "", now);
                        return Ok(());
                    }
                    None => {}
                }
                let ctx = ReviewContext {
                    user: &self.user,
                    authenticator: &self.server.authenticator,
                    authorizer: &self.server.authorizer,
                    authz: &self.served.authz,
                };
                let answer = res.strategy.review(obj, &ctx)?;
                self.respond_object(&res, &answer, output, 201, "", now);
                return Ok(());
            }
            Backing::ActionOn { resource, subresource } => {
                let body = self.decode_action_body()?;
                let target = self.served.catalog.get(&res.info.group, &res.info.version, resource).cloned().ok_or_else(ApiError::path_not_found)?;
                ctx.name = Some(meta::name(&body).to_string());
                ctx.subresource = Some(subresource.to_string());
                self.start_action(target, ctx, body, output);
                return Ok(());
            }
            // Read-only resources serve no create (routing answers 405 before this).
            Backing::Probed => return Err(ApiError::method_not_allowed()),
            Backing::Stored => {}
        }
        if res.info.subresource(&info.subresource).is_some_and(|s| s.kind == "Eviction") {
            return self.evict(res, ctx, query, output);
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
        let lookups = admission::lookups(&res.info, Operation::Create, None, namespace.as_deref(), Some(&obj));
        self.start_write(PendingWrite { res, output, ctx, kind: WriteKind::Create(obj) }, lookups);
        Ok(())
    }

    /// The body of a create on a subresource that changes its parent (`pods/binding`).
    pub(super) fn decode_action_body(&self) -> Result<Value, ApiError> {
        codec::decode(&self.req.body, negotiate::request_format(self.req.header("Content-Type"))?).map_err(ApiError::bad_request)
    }

    pub(super) fn start_action(&mut self, res: Arc<Resource>, ctx: WriteContext, body: Value, output: Output) {
        let op = WriteOp::new(res.clone(), ctx, WriteKind::Action(body), Admission::default(), crate::rand::Rng::new(self.rng.next_u64()));
        self.stage = Stage::Write { op: Box::new(op), res, output, action: true };
    }

    /// `serviceaccounts/token`: a TokenRequest for the service account of the URL (404 where
    /// the server issues no tokens).
    fn request_token(&mut self, now: Timestamp, accounts: Arc<Resource>, ctx: WriteContext, output: Output) -> Result<(), ApiError> {
        let config = self.server.authenticator.service_accounts.clone().ok_or_else(ApiError::path_not_found)?;
        let body = self.decode_action_body()?;
        let core = |resource: &str| self.served.catalog.get("", "v1", resource).cloned();
        let resources = TokenResources { service_accounts: accounts.clone(), pods: core("pods"), secrets: core("secrets"), nodes: core("nodes") };
        let (namespace, name) = (ctx.namespace.unwrap_or_default(), ctx.name.unwrap_or_default());
        let jti = self.rng.uuid();
        let op = TokenRequestOp::new(config, resources, &self.server.prefix, &namespace, &name, body, now, jti);
        self.stage = Stage::Token { op: Box::new(op), res: accounts, output };
        Ok(())
    }

    /// `pods/eviction`: the Eviction (policy/v1 or v1beta1) names the pod of the URL; its
    /// delete options apply to the pod's delete.
    pub(super) fn evict(&mut self, pods: Arc<Resource>, mut ctx: WriteContext, query: &Query, output: Output) -> Result<(), ApiError> {
        let body = self.decode_action_body()?;
        let api_version = body.get("apiVersion").and_then(Value::as_str).unwrap_or("policy/v1");
        let kind = body.get("kind").and_then(Value::as_str).unwrap_or("Eviction");
        if kind != "Eviction" || !["policy/v1", "policy/v1beta1"].contains(&api_version) {
            return Err(ApiError::bad_request(format!("not a Eviction object: {api_version}, Kind={kind}")));
        }
        if ctx.name.as_deref() != Some(meta::name(&body)) {
            return Err(ApiError::bad_request("name in URL does not match name in Eviction object"));
        }
        let (options, dry_run) = params::delete_options(query, body.get("deleteOptions"))?;
        ctx.dry_run |= dry_run;
        let budgets = self.served.catalog.get("policy", "v1", "poddisruptionbudgets").cloned().ok_or_else(ApiError::path_not_found)?;
        let op = EvictionOp::new(pods.clone(), budgets, ctx, options, crate::rand::Rng::new(self.rng.next_u64()));
        self.stage = Stage::Evict { op: Box::new(op), res: pods, output };
        Ok(())
    }
}

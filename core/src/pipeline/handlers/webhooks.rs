//! A request that waits for a webhook ([`Effect::Call`]):
//! - the authentication webhook, asked who a bearer token no other authenticator recognized
//!   stands for (the request's own, or a TokenReview's), kube's last token authenticator;
//! - the authorization webhook: the chain needed its answer to a review ([`Ask`]); the request
//!   asks it, keeps the answer (the webhook keeps it too, for later requests) and puts its
//!   questions to the chain again from where it stopped. Nothing before that point has an
//!   effect the second time: authentication is done, and impersonation, authorization and the
//!   reviews a request answers are questions.
//!
//! Either call is tried again after a transient failure, as kube's generic webhook client
//! tries it ([`crate::webhook::retry`]): the request waits, in its own time, and sends it again.

use std::sync::Arc;

use jiff::Timestamp;
use serde_json::Value;

use super::Stage;
use crate::auth::webhook::{Reviewed, TokenAsk};
use crate::authz::escalation::question;
use crate::authz::rbac::Kind;
use crate::authz::{Ask, Decider};
use crate::catalog::Resource;
use crate::codec::Output;
use crate::pipeline::query::Query;
use crate::pipeline::{Effect, RequestInfo, RequestMachine};
use crate::rand::Rng;
use crate::resources::reviews::{reviewed, token_review_status};
use crate::status::ApiError;
use crate::webhook::retry::{AUTH_WEBHOOK_FIRST_WAIT, Backoff};
use crate::webhook::{WebhookAnswer, WebhookCall};

/// Where a request goes on once the webhook answered.
pub(in crate::pipeline) enum Resume {
    /// Impersonation's checks, then authorization.
    Authenticated,
    /// Authorization, then serving the request.
    Authorized,
}

/// A call to the authentication or authorization webhook, and its tries.
pub(in crate::pipeline) struct Trying {
    call: WebhookCall,
    backoff: Backoff,
    /// When it is sent again, after a transient failure.
    again_at: Option<Timestamp>,
}

impl Trying {
    /// Sends `call`: its first try.
    fn send(out: &mut std::collections::VecDeque<Effect>, call: WebhookCall) -> Trying {
        out.push_back(Effect::Call(Box::new(call.clone())));
        Trying { call, backoff: Backoff::new(AUTH_WEBHOOK_FIRST_WAIT), again_at: None }
    }

    /// Whether the call is tried again after `answer` (from when, then).
    fn retries(&mut self, answer: &Result<WebhookAnswer, String>, now: Timestamp, rng: &mut Rng) -> bool {
        self.again_at = self.backoff.again(answer, rng).map(|wait| now + wait);
        self.again_at.is_some()
    }

    /// When it is sent again, if it waits to be.
    pub(in crate::pipeline) fn again_at(&self) -> Option<Timestamp> {
        self.again_at
    }

    /// Sends the call again if its time has come; whether it did.
    pub(in crate::pipeline) fn step(&mut self, out: &mut std::collections::VecDeque<Effect>, now: Timestamp) -> bool {
        let due = self.again_at.is_some_and(|at| at <= now);
        if due {
            self.again_at = None;
            out.push_back(Effect::Call(Box::new(self.call.clone())));
        }
        due
    }
}

pub(in crate::pipeline) struct Authorizing {
    ask: Ask,
    pub(in crate::pipeline) trying: Trying,
    resume: Resume,
    info: RequestInfo,
    query: Query,
}

/// What a token authenticates once the authentication webhook has said who it stands for.
pub(in crate::pipeline) enum Authenticating {
    /// The request itself.
    Request { info: Box<RequestInfo>, query: Query },
    /// A TokenReview, answered with the webhook's word.
    TokenReview { review: Value, res: Arc<Resource>, output: Output },
}

pub(in crate::pipeline) struct TokenAsking {
    ask: TokenAsk,
    pub(in crate::pipeline) trying: Trying,
    then: Authenticating,
    /// What the authenticators before the webhook said was wrong with the token.
    errors: Vec<String>,
}

impl RequestMachine {
    /// Puts `token` to the last of kube's token authenticators, for `audiences` (the API
    /// server's when none), after the other authenticators' `errors`: the OIDC issuer's (its
    /// keys at hand), then the authentication webhook (its kept answer, or the call); without
    /// either, the token stands for no one.
    pub(in crate::pipeline) fn ask_authenticator(&mut self, token: &str, audiences: &[String], mut errors: Vec<String>, then: Authenticating, now: Timestamp) {
        let authenticator = &self.server.authenticator;
        // An OIDC issuer's token is known without a call; the webhook is asked last.
        match authenticator.oidc_user(token, (!audiences.is_empty()).then_some(audiences), now) {
            Some(Ok(found)) => return self.token_reviewed(Ok(Some(found)), errors, then, now),
            Some(Err(why)) => errors.push(why),
            None => {}
        }
        let Some(webhook) = authenticator.webhook.clone() else { return self.token_reviewed(Ok(None), errors, then, now) };
        let audiences = if audiences.is_empty() { authenticator.api_audiences() } else { audiences };
        match webhook.review(token, audiences, now) {
            Ok(kept) => self.token_reviewed(Ok(kept), errors, then, now),
            Err(ask) => {
                let trying = Trying::send(&mut self.out, webhook.call(&ask));
                self.stage = Stage::Authenticating(Box::new(TokenAsking { ask, trying, then, errors }));
            }
        }
    }

    /// The authentication or authorization webhook's answer (or why there is none): the call
    /// is tried again after a transient failure, or the request goes on with it.
    pub(super) fn auth_webhook_answered(&mut self, answer: Result<WebhookAnswer, String>, now: Timestamp) {
        let trying = match &mut self.stage {
            Stage::Authorizing(a) => &mut a.trying,
            Stage::Authenticating(t) => &mut t.trying,
            _ => return,
        };
        if trying.retries(&answer, now, &mut self.rng) {
            return;
        }
        match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::Authorizing(a) => self.authorizer_answered(a, answer, now),
            Stage::Authenticating(t) => self.authenticator_answered(*t, answer, now),
            _ => {}
        }
    }

    /// The authentication webhook's answer (or why there is none).
    fn authenticator_answered(&mut self, a: TokenAsking, answer: Result<crate::webhook::WebhookAnswer, String>, now: Timestamp) {
        let webhook = self.server.authenticator.webhook.clone().expect("only a webhook is asked");
        let reviewed = webhook.answered(&a.ask, answer, self.server.authenticator.api_audiences(), now);
        let TokenAsking { then, errors, .. } = a;
        self.token_reviewed(reviewed, errors, then, now);
    }

    /// The request goes on as the user the token stands for, or is 401; a TokenReview says
    /// so (its error: the authenticators' errors, aggregated, or kube's `invalid bearer token`).
    fn token_reviewed(&mut self, said: Result<Reviewed, String>, mut errors: Vec<String>, then: Authenticating, now: Timestamp) {
        let found = match said {
            Ok(found) => found,
            Err(e) => {
                errors.push(e);
                None
            }
        };
        match (found, then) {
            (Some((user, _)), Authenticating::Request { info, query }) => {
                self.user = user.authenticated();
                self.authenticated(now, *info, query);
            }
            (None, Authenticating::Request { .. }) => self.fail(&ApiError::unauthorized()),
            (Some((user, audiences)), Authenticating::TokenReview { review, res, output }) => {
                let answer = reviewed(review, token_review_status(Ok(&user.authenticated()), &audiences));
                self.respond_object(&res, &answer, output, 201, "", now);
            }
            (None, Authenticating::TokenReview { review, res, output }) => {
                let why = if errors.is_empty() { "invalid bearer token".to_string() } else { crate::authz::rbac::aggregate(&errors) };
                let answer = reviewed(review, token_review_status(Err(&why), &[]));
                self.respond_object(&res, &answer, output, 201, "", now);
            }
        }
    }

    /// Asks the authorization webhook `ask`; the request goes on at `resume` with the answer.
    pub(in crate::pipeline) fn ask_authorizer(&mut self, ask: Ask, resume: Resume, info: RequestInfo, query: Query) {
        let trying = Trying::send(&mut self.out, ask.call());
        self.stage = Stage::Authorizing(Box::new(Authorizing { ask, trying, resume, info, query }));
    }

    /// What the authorization webhook must answer before a write of an RBAC object is checked
    /// against privilege escalation ([`question`]), if it has not yet.
    pub(in crate::pipeline) fn escalation_ask(&self, info: &RequestInfo, now: Timestamp) -> Option<Ask> {
        if !self.authorizer.asks_webhooks() {
            return None;
        }
        let kind = Kind::ALL.into_iter().find(|k| k.resource() == info.resource && info.api_group == "rbac.authorization.k8s.io")?;
        if !info.subresource.is_empty() || !["create", "update", "patch"].contains(&info.verb.as_str()) {
            return None;
        }
        let body = (info.verb != "patch")
            .then(|| crate::codec::negotiate::request_format(self.req.header("Content-Type")).ok())
            .flatten()
            .and_then(|format| crate::codec::decode(&self.req.body, format).ok());
        let q = question(kind, &info.namespace, &info.name, body.as_ref())?;
        let decider = Decider::new(&self.authorizer, &self.served.authz, &self.asked, now);
        decider.authorize(&self.user, &q);
        decider.wanted()
    }

    /// The webhook's answer (or why there is none).
    fn authorizer_answered(&mut self, a: Box<Authorizing>, answer: Result<WebhookAnswer, String>, now: Timestamp) {
        a.ask.answered(answer, &mut self.asked, now);
        let Authorizing { resume, info, query, .. } = *a;
        match resume {
            Resume::Authenticated => self.authenticated(now, info, query),
            Resume::Authorized => self.authorize(now, info, query),
        }
    }
}

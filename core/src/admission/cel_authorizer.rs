//! The `authorizer` of the CEL expressions admission runs on a write (the admission policies'
//! and the webhooks' match conditions), and `authorizer.requestResource`: kube gives them
//! its authorizer chain, for the requester. Here that is the chain as the write found it
//! ([`crate::authz::Access`]). A decision the authorization webhook must make first fails the
//! expression that asked for it, and stops the write to ask ([`CelAuthorizer::wanted`]); the
//! write then runs the expressions again with the answer.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::Attributes;
use super::webhooks::dispatch::{AdmissionCall, Halt};
use crate::auth::UserInfo;
use crate::authz::{Access, Ask, Decision};
use crate::cel::authz::{Authorize, RequestResource, authorizer, request_resource};

/// The chain the expressions ask, and the first review it could not decide without.
#[derive(Debug)]
struct Chain {
    /// `None`: kapi's own write, which may do anything.
    access: Option<Access>,
    wanted: Mutex<Option<Ask>>,
}

impl Authorize for Chain {
    fn authorize(&self, user: &UserInfo, attributes: &crate::authz::Attributes) -> Option<Decision> {
        let Some(access) = &self.access else { return Some(Decision { allowed: true, ..Decision::default() }) };
        match access.decide_or_ask(user, attributes) {
            Ok(decision) => Some(decision),
            Err(ask) => {
                self.wanted.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get_or_insert(ask);
                None
            }
        }
    }
}

/// The authorizer of the expressions on one write.
pub struct CelAuthorizer {
    chain: Arc<Chain>,
    variables: [(&'static str, crate::cel::Value); 2],
}

impl CelAuthorizer {
    /// The authorizer of the requester of `a`; `obj`: the object written (a create's name is
    /// its own).
    pub fn of(a: &Attributes, obj: Option<&Value>) -> CelAuthorizer {
        let chain = Arc::new(Chain { access: a.access.cloned(), wanted: Mutex::new(None) });
        let user = a.user.clone();
        let r = RequestResource {
            group: &a.info.group,
            resource: &a.info.resource,
            subresource: a.subresource.unwrap_or_default(),
            namespace: a.namespace,
            name: super::webhooks::review::request_name(a, obj),
        };
        let authority: Arc<dyn Authorize> = chain.clone();
        let variables = [("authorizer", authorizer(authority.clone(), user.clone())), ("authorizer.requestResource", request_resource(authority, user, r))];
        CelAuthorizer { chain, variables }
    }

    /// `authorizer` and `authorizer.requestResource`, to bind.
    pub fn variables(&self) -> &[(&'static str, crate::cel::Value); 2] {
        &self.variables
    }

    /// The review an expression needed the authorization webhook's answer to: the write stops
    /// to ask it, and runs the expressions again with the answer.
    pub fn wanted(&self) -> Option<Halt> {
        let ask = self.chain.wanted.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()?;
        Some(Halt::Ask(vec![AdmissionCall::authorizer(ask)]))
    }
}

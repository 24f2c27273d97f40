//! GET of one object: from storage, or from the watch cache at a resourceVersion (kube's
//! `handlers/get.go`).

use std::sync::Arc;

use jiff::Timestamp;
use serde_json::Value;

use super::{GetPlan, Stage};
use crate::cache::ReadRequest;
use crate::catalog::Resource;
use crate::codec::Output;
use crate::codec::negotiate::Target;
use crate::kv::Revision;
use crate::pipeline::query::Query;
use crate::pipeline::respond::{Head, object_body};
use crate::pipeline::{Effect, RequestInfo, RequestMachine};
use crate::status::ApiError;
use crate::storage::{StorageOp, StorageRequest};

impl RequestMachine {
    pub(super) fn get(&mut self, res: Arc<Resource>, info: &RequestInfo, query: &Query) -> Result<(), ApiError> {
        let output = self.output(&res, Target::Object, query)?;
        let ns = if res.info.namespaced { Some(info.namespace.as_str()) } else { None };
        let key = self.object_key(&res, ns, &info.name);
        let rv = query.get("resourceVersion").unwrap_or("");
        if rv.is_empty() {
            let op = StorageOp::new(StorageRequest::Get { key, revision: 0 });
            self.stage = Stage::Get { op, res, output, subresource: info.subresource.clone() };
        } else {
            let min =
                if rv == "0" { None } else { Some(rv.parse::<Revision>().map_err(|_| ApiError::bad_request(format!("invalid resource version {rv:?}")))?) };
            self.out.push_back(Effect::Cache { resource: res.clone(), request: ReadRequest::Latest { min } });
            self.stage = Stage::CacheGet { plan: GetPlan { res, output, key, subresource: info.subresource.clone() } };
        }
        Ok(())
    }

    pub(super) fn respond_object(&mut self, res: &Resource, obj: &Value, output: Output, code: u16, subresource: &str, now: Timestamp) {
        let scale = match subresource {
            "scale" => match res.strategy.scale_of(obj) {
                Ok(s) if s.replicas_set => Some(s.scale),
                Ok(s) => return self.fail_as(&ApiError::internal(format!("the spec replicas field {:?} does not exist", s.replicas_path)), output.format),
                Err(e) => return self.fail_as(&e, output.format),
            },
            _ => None,
        };
        match object_body(res, scale.as_ref().unwrap_or(obj), output, now) {
            Ok((ct, body)) => self.respond(Head::new(code, &ct), body),
            Err(e) => self.fail_as(&e, output.format),
        }
    }
}

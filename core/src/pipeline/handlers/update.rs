//! PUT and PATCH (kube's `handlers/update.go` and `handlers/patch.go`).

use std::sync::Arc;

use jiff::Timestamp;

use super::PendingWrite;
use crate::apiextensions;
use crate::catalog::Resource;
use crate::codec;
use crate::codec::negotiate::{self, Target};
use crate::pipeline::params;
use crate::pipeline::query::Query;
use crate::pipeline::{RequestInfo, RequestMachine};
use crate::registry::{BodyFindings, FieldValidation, PatchType, WriteKind};
use crate::status::ApiError;

impl RequestMachine {
    pub(super) fn update(&mut self, now: Timestamp, res: Arc<Resource>, info: &RequestInfo, query: &Query, namespace: Option<String>) -> Result<(), ApiError> {
        let output = self.output(&res, Target::Object, query)?;
        let opts = params::write_options(query, "UpdateOptions", &self.user_agent())?;
        let (obj, findings) = if info.subresource == "scale" {
            let format = negotiate::request_format(self.req.header("Content-Type"))?;
            (codec::decode(&self.req.body, format).map_err(ApiError::bad_request)?, BodyFindings::default())
        } else {
            self.decode_body(&res, opts.field_validation)?
        };
        let mut ctx = self.write_context(now, info, namespace, &opts);
        ctx.body_findings = findings;
        let lookups = Self::write_lookups(&ctx, &res, Some(&obj));
        self.start_write(PendingWrite { res, output, ctx, kind: WriteKind::Update(obj) }, lookups);
        Ok(())
    }

    pub(super) fn patch(&mut self, now: Timestamp, res: Arc<Resource>, info: &RequestInfo, query: &Query, namespace: Option<String>) -> Result<(), ApiError> {
        let output = self.output(&res, Target::Object, query)?;
        let opts = params::write_options(query, "PatchOptions", &self.user_agent())?;
        let pt = negotiate::patch_type(self.req.header("Content-Type"), opts.force.unwrap_or(false))?;
        if apiextensions::is_custom(&res.info) && pt == PatchType::Strategic {
            // Custom resources take no strategic merge patch, as kube.
            return Err(ApiError::unsupported_media_type(&["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]));
        }
        if opts.force.is_some() && !matches!(pt, PatchType::Apply { .. }) {
            return Err(ApiError::invalid(
                &crate::status::GroupKind { group: "meta.k8s.io".into(), kind: "PatchOptions".into() },
                "",
                &[crate::status::FieldError::forbidden("force", "may not be specified for non-apply patch")],
            ));
        }
        let undecodable = |e: serde_json::Error| ApiError::bad_request(format!("error decoding patch: {e}"));
        let (doc, findings) = match pt {
            PatchType::Apply { .. } => {
                (serde_norway::from_slice(&self.req.body).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?, BodyFindings::default())
            }
            _ if opts.field_validation == FieldValidation::Ignore => (serde_json::from_slice(&self.req.body).map_err(undecodable)?, BodyFindings::default()),
            PatchType::Json => {
                let (doc, duplicates) = codec::strict::decode(&self.req.body).map_err(undecodable)?;
                let findings = BodyFindings::of_json_patch(&self.req.body, &doc, duplicates);
                (doc, findings)
            }
            _ => {
                let (doc, duplicates) = codec::strict::decode(&self.req.body).map_err(undecodable)?;
                (doc, BodyFindings::of_patch(duplicates))
            }
        };
        if matches!(pt, PatchType::Apply { .. }) && query.get("fieldManager").is_none_or(str::is_empty) {
            return Err(ApiError::bad_request("PATCH, application/apply-patch+yaml requests require a fieldManager to be set"));
        }
        let mut ctx = self.write_context(now, info, namespace, &opts);
        ctx.body_findings = findings;
        let applied = matches!(pt, PatchType::Apply { .. }).then_some(&doc);
        let lookups = Self::write_lookups(&ctx, &res, applied);
        self.start_write(PendingWrite { res, output, ctx, kind: WriteKind::Patch(pt, doc) }, lookups);
        Ok(())
    }
}

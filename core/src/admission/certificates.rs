//! The certificate plugins of kube v1.33 (`plugin/pkg/admission/certificates`), which hold
//! CertificateSigningRequests and ClusterTrustBundles to their signers:
//! - CertificateApproval: approving or denying (`/approval`) needs `approve` on the signer;
//! - CertificateSigning: issuing a certificate or changing conditions (`/status`) needs `sign`;
//! - CertificateSubjectRestriction: no `system:masters` certificate from the
//!   `kubernetes.io/kube-apiserver-client` signer;
//! - ClusterTrustBundleAttest: a bundle for a signer needs `attest` on it.
//!
//! A permission on a signer is kube's: the verb on `signers` of `certificates.k8s.io` named by
//! the signer, or by its domain (`example.com/*`). An authorization webhook the chain needs is
//! asked during the write (which waits for its answer, [`Halt::Ask`]).

use serde_json::Value;

use super::{Answers, Attributes, Halt, Operation, Plugin};
use crate::authz;
use crate::meta;
use crate::status::{ApiError, quote};

const GROUP: &str = "certificates.k8s.io";
const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";

/// kube's `IsAuthorizedForSignerName`: `verb` on the signer, or on every signer of its domain.
fn authorized_for_signer(a: &Attributes, verb: &str, signer: &str) -> Result<bool, Halt> {
    let domain = format!("{}/*", signer.split('/').next().unwrap_or_default());
    for name in [signer, domain.as_str()] {
        if a.allows(&authz::Attributes { version: "*".into(), ..authz::Attributes::resource(verb, GROUP, "signers", "", "", name) })? {
            return Ok(true);
        }
    }
    Ok(false)
}

fn is_csr(a: &Attributes, subresource: Option<&str>) -> bool {
    a.info.group == GROUP && a.info.resource == "certificatesigningrequests" && a.subresource == subresource
}

fn signer(obj: &Value) -> &str {
    meta::str_at(obj, &["spec", "signerName"]).unwrap_or_default()
}

#[derive(Debug)]
pub struct CertificateApproval;

impl Plugin for CertificateApproval {
    fn name(&self) -> &'static str {
        "CertificateApproval"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Update
    }

    fn validate_asking(&self, a: &Attributes, _obj: Option<&mut Value>, _answers: &Answers, _warnings: &mut Vec<String>) -> Result<(), Halt> {
        let Some(old) = a.old.filter(|_| is_csr(a, Some("approval"))) else { return Ok(()) };
        // The signer of the object as it was: the request cannot change it to gain permission.
        let signer = signer(old);
        if authorized_for_signer(a, "approve", signer)? {
            return Ok(());
        }
        Err(a.forbidden(&format!("user not permitted to approve requests with signerName {}", quote(signer))).into())
    }
}

#[derive(Debug)]
pub struct CertificateSigning;

impl Plugin for CertificateSigning {
    fn name(&self) -> &'static str {
        "CertificateSigning"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Update
    }

    fn validate_asking(&self, a: &Attributes, obj: Option<&mut Value>, _answers: &Answers, _warnings: &mut Vec<String>) -> Result<(), Halt> {
        let (Some(new), Some(old)) = (obj.as_deref(), a.old) else { return Ok(()) };
        if !is_csr(a, Some("status")) {
            return Ok(());
        }
        let status = |o: &Value, f: &str| o.get("status").and_then(|s| s.get(f)).filter(|v| !v.is_null() && *v != &Value::Array(Vec::new())).cloned();
        if status(new, "certificate") == status(old, "certificate") && status(new, "conditions") == status(old, "conditions") {
            return Ok(());
        }
        let signer = signer(old);
        if authorized_for_signer(a, "sign", signer)? {
            return Ok(());
        }
        Err(a.forbidden(&format!("user not permitted to sign requests with signerName {}", quote(signer))).into())
    }
}

#[derive(Debug)]
pub struct CertificateSubjectRestriction;

impl Plugin for CertificateSubjectRestriction {
    fn name(&self) -> &'static str {
        "CertificateSubjectRestriction"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Create
    }

    fn validate(&self, a: &Attributes, obj: Option<&Value>, _warnings: &mut Vec<String>) -> Result<(), ApiError> {
        let Some(csr) = obj.filter(|_| is_csr(a, None)) else { return Ok(()) };
        if signer(csr) != CLIENT_SIGNER {
            return Ok(());
        }
        let organizations = crate::resources::certificates::requested_organizations(csr).map_err(|e| a.forbidden(&format!("failed to parse CSR: {e}")))?;
        if organizations.iter().any(|o| o == crate::authz::PRIVILEGED_GROUP) {
            return Err(a.forbidden(&format!("use of {CLIENT_SIGNER} signer with system:masters group is not allowed")));
        }
        Ok(())
    }
}

#[derive(Debug)]
pub struct ClusterTrustBundleAttest;

impl Plugin for ClusterTrustBundleAttest {
    fn name(&self) -> &'static str {
        "ClusterTrustBundleAttest"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    fn validate_asking(&self, a: &Attributes, obj: Option<&mut Value>, _answers: &Answers, _warnings: &mut Vec<String>) -> Result<(), Halt> {
        let Some(bundle) = obj.as_deref().filter(|_| a.info.group == GROUP && a.info.resource == "clustertrustbundles") else { return Ok(()) };
        let signer = signer(bundle);
        if signer.is_empty() || a.old.is_some_and(|old| crate::authz::escalation::only_collector_fields(bundle, old)) {
            return Ok(());
        }
        if authorized_for_signer(a, "attest", signer)? {
            return Ok(());
        }
        Err(a.forbidden(&format!("user not permitted to attest for signerName {}", quote(signer))).into())
    }
}

//! certificates.k8s.io/v1 certificatesigningrequests (+`approval`, `status`): kube's
//! `pkg/registry/certificates/certificates` strategies and `pkg/apis/certificates/validation`.
//! Signing them is a controller's work; approving them is a client's.

use base64::Engine;
use serde_json::{Value, json};
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::prelude::FromDer;

use super::{info, serve, status_subresource};
use crate::auth::UserInfo;
use crate::catalog::{Resource, Strategy, Subresource, keep_status};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};
use crate::validation::NameCheck;

const G: &str = "certificates.k8s.io";

pub fn resource() -> Resource {
    let mut i = info(G, "v1", "CertificateSigningRequest", "certificatesigningrequests", false);
    i.short_names = crate::catalog::names(&["csr"]);
    i.singular = "certificatesigningrequest".into();
    i.subresources = vec![Subresource::new("approval", G, "v1", "CertificateSigningRequest", &["get", "patch", "update"]), status_subresource(&i)];
    serve(i, Csrs)
}

struct Csrs;

const USAGES: &[&str] = &[
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
];

const SPEC: &str = "io.k8s.api.certificates.v1.CertificateSigningRequestSpec";
const COLUMNS: &[Column] = &[
    Column::NAME,
    Column::AGE,
    Column::new("SignerName", "string", Describe::Field(SPEC, "signerName")),
    Column::new("Requestor", "string", Describe::Field(SPEC, "request")),
    Column::new("RequestedDuration", "string", Describe::Field(SPEC, "expirationSeconds")),
    Column::new("Condition", "string", Describe::Field("io.k8s.api.certificates.v1.CertificateSigningRequestStatus", "conditions")),
];

/// The conditions only approvers may add and no one may remove.
const DECISIONS: &[&str] = &["Approved", "Denied"];

fn conditions(obj: &Value) -> Vec<Value> {
    meta::at(obj, &["status", "conditions"]).and_then(Value::as_array).cloned().unwrap_or_default()
}

fn has_condition(obj: &Value, ty: &str) -> bool {
    conditions(obj).iter().any(|c| c.get("type").and_then(Value::as_str) == Some(ty))
}

/// The DER of the PEM block of `pem` of the given type, or why there is none.
fn pem_block(pem: &str, label: &str) -> Result<Vec<u8>, String> {
    let begin = format!("-----BEGIN {label}-----");
    let Some(start) = pem.find("-----BEGIN ") else { return Err(format!("PEM block type must be {label}")) };
    let rest = &pem[start..];
    if !rest.starts_with(&begin) {
        return Err(format!("PEM block type must be {label}"));
    }
    let end = format!("-----END {label}-----");
    let body = rest[begin.len()..].split(&end).next().unwrap_or_default();
    let b64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD.decode(b64).map_err(|e| e.to_string())
}

/// The DER of a CSR's `spec.request` (base64 of PEM), or why there is none.
fn request_der(obj: &Value) -> Result<Vec<u8>, String> {
    let raw = meta::str_at(obj, &["spec", "request"]).unwrap_or_default();
    let pem = base64::engine::general_purpose::STANDARD.decode(raw).ok().and_then(|b| String::from_utf8(b).ok()).unwrap_or_default();
    pem_block(&pem, "CERTIFICATE REQUEST")
}

/// The organizations of the subject a CSR's request asks for (kube's `ParseCSR`), or why the
/// request does not parse.
pub fn requested_organizations(obj: &Value) -> Result<Vec<String>, String> {
    let der = request_der(obj)?;
    let (_, csr) = X509CertificationRequest::from_der(&der).map_err(|e| e.to_string())?;
    let subject = &csr.certification_request_info.subject;
    Ok(subject.iter_organization().filter_map(|o| o.as_str().ok()).map(str::to_string).collect())
}

/// The common name of the subject a CSR's request asks for, or why the request does not parse.
pub fn requested_common_name(obj: &Value) -> Result<String, String> {
    let der = request_der(obj)?;
    let (_, csr) = X509CertificationRequest::from_der(&der).map_err(|e| e.to_string())?;
    let subject = &csr.certification_request_info.subject;
    // Go's pkix keeps the last common name of a subject.
    Ok(subject.iter_common_name().filter_map(|o| o.as_str().ok()).last().unwrap_or_default().to_string())
}

fn validate_request(obj: &Value, errs: &mut Vec<FieldError>) {
    let parsed = request_der(obj).and_then(|der| {
        let (_, csr) = X509CertificationRequest::from_der(&der).map_err(|e| e.to_string())?;
        csr.verify_signature().map_err(|e| format!("{e:?}"))
    });
    if let Err(why) = parsed {
        let raw = meta::str_at(obj, &["spec", "request"]).unwrap_or_default();
        errs.push(FieldError::invalid("spec.request", json!(raw), why));
    }
}

fn validate_spec(obj: &Value, errs: &mut Vec<FieldError>) {
    validate_request(obj, errs);
    let usages = meta::at(obj, &["spec", "usages"]).and_then(Value::as_array).cloned().unwrap_or_default();
    if usages.is_empty() {
        errs.push(FieldError::required("spec.usages", ""));
    }
    let mut seen = Vec::new();
    for (i, u) in usages.iter().enumerate() {
        crate::validation::supported(errs, Some(u), &format!("spec.usages[{i}]"), USAGES);
        if seen.contains(&u) {
            errs.push(FieldError::duplicate(format!("spec.usages[{i}]"), u.clone()));
        }
        seen.push(u);
    }
    match meta::str_at(obj, &["spec", "signerName"]).unwrap_or_default() {
        "" => errs.push(FieldError::required("spec.signerName", "")),
        "kubernetes.io/legacy-unknown" => errs.push(FieldError::invalid(
            "spec.signerName",
            json!("kubernetes.io/legacy-unknown"),
            "the legacy signerName is not allowed via this API version",
        )),
        signer => {
            let (domain, path) = signer.split_once('/').unwrap_or((signer, ""));
            if path.is_empty() || !crate::validation::dns1123_subdomain(domain).is_empty() {
                errs.push(FieldError::invalid(
                    "spec.signerName",
                    json!(signer),
                    "must be a fully qualified domain and path of the form 'example.com/signer-name'",
                ));
            }
        }
    }
    if let Some(s) = meta::at(obj, &["spec", "expirationSeconds"]).and_then(Value::as_i64)
        && s < 600
    {
        errs.push(FieldError::invalid("spec.expirationSeconds", json!(s), "may not specify a duration less than 600 seconds (10 minutes)"));
    }
    validate_conditions(obj, errs);
}

fn validate_conditions(obj: &Value, errs: &mut Vec<FieldError>) {
    let mut seen = Vec::new();
    let all = conditions(obj);
    for (i, c) in all.iter().enumerate() {
        let at = format!("status.conditions[{i}]");
        let ty = c.get("type").and_then(Value::as_str).unwrap_or_default();
        if ty.is_empty() {
            errs.push(FieldError::required(format!("{at}.type"), ""));
        }
        if seen.contains(&ty) {
            errs.push(FieldError::duplicate(format!("{at}.type"), json!(ty)));
        }
        seen.push(ty);
        let allowed: &[&str] = if matches!(ty, "Approved" | "Denied" | "Failed") { &["True"] } else { &["True", "False", "Unknown"] };
        match c.get("status") {
            None => errs.push(FieldError::required(format!("{at}.status"), "")),
            s => crate::validation::supported(errs, s, &format!("{at}.status"), allowed),
        }
    }
    if seen.contains(&"Approved") && seen.contains(&"Denied") {
        errs.push(FieldError::invalid("status.conditions", json!("Approved"), "Approved and Denied conditions are mutually exclusive"));
    }
}

/// The checks every update makes of the decisions and the certificate; `approval` and
/// `status` say which of them this update may change.
fn validate_transition(new: &Value, old: &Value, approval: bool, status: bool, errs: &mut Vec<FieldError>) {
    for ty in ["Approved", "Denied", "Failed"] {
        if has_condition(old, ty) && !has_condition(new, ty) {
            errs.push(FieldError::forbidden("status.conditions", format!("updates may not remove a condition of type \"{ty}\"")));
        }
    }
    if !approval {
        for ty in DECISIONS {
            let find = |o: &Value| conditions(o).into_iter().find(|c| c.get("type").and_then(Value::as_str) == Some(ty));
            match (find(old), find(new)) {
                (None, Some(_)) => errs.push(FieldError::forbidden("status.conditions", format!("updates may not add a condition of type \"{ty}\""))),
                (Some(o), Some(n)) if o != n => {
                    errs.push(FieldError::forbidden("status.conditions", format!("updates may not modify a condition of type \"{ty}\"")))
                }
                _ => {}
            }
        }
    }
    let (old_cert, new_cert) =
        (meta::str_at(old, &["status", "certificate"]).unwrap_or_default(), meta::str_at(new, &["status", "certificate"]).unwrap_or_default());
    if old_cert != new_cert {
        if !status {
            errs.push(FieldError::forbidden("status.certificate", "updates may not set certificate content"));
        } else if !old_cert.is_empty() {
            errs.push(FieldError::forbidden("status.certificate", "updates may not modify existing certificate content"));
        }
    }
}

impl Strategy for Csrs {
    fn name_check(&self) -> NameCheck {
        |_| Vec::new()
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(m) = obj.as_object_mut() {
            m.insert("status".into(), json!({}));
        }
    }

    fn record_requester(&self, obj: &mut Value, user: &UserInfo) {
        let spec = meta::object_at(obj, &["spec"]);
        for k in ["username", "uid", "groups", "extra"] {
            spec.remove(k);
        }
        spec.insert("username".into(), json!(user.name));
        if !user.uid.is_empty() {
            spec.insert("uid".into(), json!(user.uid));
        }
        if !user.groups.is_empty() {
            spec.insert("groups".into(), json!(user.groups));
        }
        if !user.extra.is_empty() {
            spec.insert("extra".into(), json!(user.extra));
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        keep_status(new, old);
        if let Some(m) = new.as_object_mut() {
            match old.get("spec") {
                Some(s) => m.insert("spec".into(), s.clone()),
                None => m.remove("spec"),
            };
        }
    }

    fn prepare_for_subresource_update(&self, subresource: &str, new: &mut Value, old: &Value) {
        let requested = conditions(new);
        crate::catalog::copy_all_but_status(new, old);
        if subresource == "approval" {
            keep_status(new, old);
            meta::object_at(new, &["status"]).insert("conditions".into(), Value::Array(requested));
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate_spec(obj, &mut errs);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate_conditions(new, &mut errs);
        validate_transition(new, old, false, false, &mut errs);
        errs
    }

    fn validate_subresource_update(&self, subresource: &str, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate_conditions(new, &mut errs);
        validate_transition(new, old, subresource == "approval", subresource == "status", &mut errs);
        errs
    }

    fn allow_unconditional_update(&self) -> bool {
        true
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let mut condition = if has_condition(obj, "Denied") {
            "Denied".to_string()
        } else if has_condition(obj, "Approved") {
            "Approved".to_string()
        } else {
            "Pending".to_string()
        };
        if has_condition(obj, "Failed") {
            condition.push_str(",Failed");
        }
        if meta::str_at(obj, &["status", "certificate"]).is_some_and(|c| !c.is_empty()) {
            condition.push_str(",Issued");
        }
        let duration = meta::at(obj, &["spec", "expirationSeconds"]).and_then(Value::as_i64).map_or("<none>".into(), table::human_duration);
        vec![
            json!(meta::name(obj)),
            table::age(obj, now),
            json!(table::str_or(obj, &["spec", "signerName"], "<none>")),
            json!(table::str_or(obj, &["spec", "username"], "")),
            json!(duration),
            json!(condition),
        ]
    }
}

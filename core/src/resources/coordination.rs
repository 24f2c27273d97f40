//! coordination.k8s.io/v1 leases.

use serde_json::{Value, json};

use super::{info, serve};
use crate::catalog::{Resource, Strategy};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};

pub fn leases() -> Resource {
    serve(info("coordination.k8s.io", "v1", "Lease", "leases", true), Leases)
}

struct Leases;

const COLUMNS: &[Column] =
    &[Column::NAME, Column::new("Holder", "string", Describe::Field("io.k8s.api.coordination.v1.LeaseSpec", "holderIdentity")), Column::AGE];

impl Strategy for Leases {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let Some(d) = meta::at(obj, &["spec", "leaseDurationSeconds"]).and_then(Value::as_i64)
            && d <= 0
        {
            errs.push(FieldError::invalid("spec.leaseDurationSeconds", json!(d), "must be greater than 0"));
        }
        if let Some(t) = meta::at(obj, &["spec", "leaseTransitions"]).and_then(Value::as_i64)
            && t < 0
        {
            errs.push(FieldError::invalid("spec.leaseTransitions", json!(t), "must be greater than or equal to 0"));
        }
        errs
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        vec![json!(meta::name(obj)), json!(table::str_or(obj, &["spec", "holderIdentity"], "")), table::age(obj, now)]
    }
}

//! core/v1 serviceaccounts.

use serde_json::{Value, json};

use super::{info, serve};
use crate::catalog::{DeleteReturns, Resource, Strategy, Subresource};
use crate::meta;
use crate::table::{self, Column, Describe};

pub fn resource() -> Resource {
    let mut i = info("", "v1", "ServiceAccount", "serviceaccounts", true);
    i.short_names = crate::catalog::names(&["sa"]);
    i.delete_returns = DeleteReturns::Object;
    i.subresources = vec![Subresource::new("token", "authentication.k8s.io", "v1", "TokenRequest", &["create"])];
    serve(i, ServiceAccounts)
}

struct ServiceAccounts;

const COLUMNS: &[Column] = &[Column::NAME, Column::new("Secrets", "string", Describe::Field("io.k8s.api.core.v1.ServiceAccount", "secrets")), Column::AGE];

impl Strategy for ServiceAccounts {
    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let secrets = obj.get("secrets").and_then(Value::as_array).map_or(0, Vec::len);
        vec![json!(meta::name(obj)), json!(secrets), table::age(obj, now)]
    }
}

//! core/v1 endpoints.

use serde_json::{Value, json};

use super::{info, serve};
use crate::catalog::{Resource, Strategy};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};

pub fn resource() -> Resource {
    let mut i = info("", "v1", "Endpoints", "endpoints", true);
    i.short_names = crate::catalog::names(&["ep"]);
    i.singular = "endpoints".into();
    i.storage_prefix = "services/endpoints".into();
    i.deprecation = Some("v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice".into());
    serve(i, Endpoints)
}

struct Endpoints;

const COLUMNS: &[Column] = &[Column::NAME, Column::new("Endpoints", "string", Describe::Field("io.k8s.api.core.v1.Endpoints", "subsets")), Column::AGE];

impl Strategy for Endpoints {
    fn default(&self, obj: &mut Value) {
        if let Some(Value::Array(subsets)) = obj.get_mut("subsets") {
            for ss in subsets {
                if let Some(Value::Array(ports)) = ss.get_mut("ports") {
                    for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                        p.entry("protocol").or_insert_with(|| json!("TCP"));
                    }
                }
            }
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for (i, ss) in obj.get("subsets").and_then(Value::as_array).into_iter().flatten().enumerate() {
            for list in ["addresses", "notReadyAddresses"] {
                for (j, a) in ss.get(list).and_then(Value::as_array).into_iter().flatten().enumerate() {
                    let ip = a.get("ip").and_then(Value::as_str).unwrap_or_default();
                    if ip.parse::<core::net::IpAddr>().is_err() {
                        errs.push(FieldError::invalid(format!("subsets[{i}].{list}[{j}].ip"), json!(ip), "must be a valid IP address"));
                    }
                }
            }
            for (j, p) in ss.get("ports").and_then(Value::as_array).into_iter().flatten().enumerate() {
                let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
                if !(1..=65535).contains(&port) {
                    errs.push(FieldError::invalid(format!("subsets[{i}].ports[{j}].port"), json!(port), "must be between 1 and 65535, inclusive"));
                }
                crate::validation::supported(&mut errs, p.get("protocol"), &format!("subsets[{i}].ports[{j}].protocol"), &["SCTP", "TCP", "UDP"]);
            }
        }
        errs
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        vec![json!(meta::name(obj)), json!(format_endpoints(obj)), table::age(obj, now)]
    }
}

/// `formatEndpoints`: up to three `ip:port`, then `+ N more...`.
fn format_endpoints(obj: &Value) -> String {
    let subsets = obj.get("subsets").and_then(Value::as_array).cloned().unwrap_or_default();
    if subsets.is_empty() {
        return "<none>".into();
    }
    const MAX: usize = 3;
    let mut list: Vec<String> = Vec::new();
    let mut count = 0;
    let mut more = false;
    for ss in &subsets {
        let addrs: Vec<&str> =
            ss.get("addresses").and_then(Value::as_array).into_iter().flatten().filter_map(|a| a.get("ip").and_then(Value::as_str)).collect();
        let ports: Vec<i64> =
            ss.get("ports").and_then(Value::as_array).into_iter().flatten().map(|p| p.get("port").and_then(Value::as_i64).unwrap_or(0)).collect();
        if ports.is_empty() {
            count += addrs.len();
            for a in &addrs {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(a.to_string());
            }
            continue;
        }
        for port in ports {
            count += addrs.len();
            for a in &addrs {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(if a.contains(':') { format!("[{a}]:{port}") } else { format!("{a}:{port}") });
            }
        }
    }
    let joined = list.join(",");
    if more { format!("{joined} + {} more...", count - MAX) } else { joined }
}

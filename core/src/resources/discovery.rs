//! discovery.k8s.io/v1 endpointslices.

use serde_json::{Value, json};

use super::{info, serve};
use crate::catalog::{Resource, Strategy};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};

pub fn endpoint_slices() -> Resource {
    serve(info("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", true), EndpointSlices)
}

/// discovery.k8s.io/v1beta1, behind `--runtime-config`.
pub fn endpoint_slices_v1beta1() -> Resource {
    super::legacy::endpoint_slices(&endpoint_slices().info, EndpointSlices)
}

struct EndpointSlices;

const SLICE: &str = "io.k8s.api.discovery.v1.EndpointSlice";
const COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("AddressType", "string", Describe::Field(SLICE, "addressType")),
    Column::new("Ports", "string", Describe::Field(SLICE, "ports")),
    Column::new("Endpoints", "string", Describe::Field(SLICE, "endpoints")),
    Column::AGE,
];

impl Strategy for EndpointSlices {
    fn default(&self, obj: &mut Value) {
        if let Some(Value::Array(ports)) = obj.get_mut("ports") {
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                p.entry("protocol").or_insert_with(|| json!("TCP"));
                p.entry("name").or_insert_with(|| json!(""));
            }
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        match obj.get("addressType") {
            None => errs.push(FieldError::required("addressType", "")),
            Some(t) if !["IPv4", "IPv6", "FQDN"].contains(&t.as_str().unwrap_or_default()) => {
                errs.push(FieldError::not_supported("addressType", t.clone(), &["FQDN", "IPv4", "IPv6"]))
            }
            _ => {}
        }
        for (i, e) in obj.get("endpoints").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let addrs = e.get("addresses").and_then(Value::as_array).map_or(0, Vec::len);
            if addrs == 0 {
                errs.push(FieldError::required(format!("endpoints[{i}].addresses"), "must contain at least 1 address"));
            }
        }
        for (i, p) in obj.get("ports").and_then(Value::as_array).into_iter().flatten().enumerate() {
            crate::validation::supported(&mut errs, p.get("protocol"), &format!("ports[{i}].protocol"), &["SCTP", "TCP", "UDP"]);
        }
        errs
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let ports: Vec<String> = obj
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|p| p.get("port").and_then(Value::as_i64).map_or("<unset>".to_string(), |n| n.to_string()))
            .collect();
        let ports_cell = if obj.get("ports").is_none() {
            "<unset>".to_string()
        } else if ports.is_empty() {
            "<none>".into()
        } else {
            ports.join(",")
        };
        let addresses: Vec<&str> = obj
            .get("endpoints")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .flat_map(|e| e.get("addresses").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str))
            .collect();
        let endpoints_cell = if addresses.is_empty() {
            "<unset>".to_string()
        } else if addresses.len() > 3 {
            format!("{} + {} more...", addresses[..3].join(","), addresses.len() - 3)
        } else {
            addresses.join(",")
        };
        vec![json!(meta::name(obj)), json!(table::str_or(obj, &["addressType"], "")), json!(ports_cell), json!(endpoints_cell), table::age(obj, now)]
    }
}

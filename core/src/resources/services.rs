//! core/v1 services: defaults, cluster IP and node port allocation (one key per taken value,
//! as kube's `IPAddress` objects), validation and `kubectl get svc` columns.

use core::net::Ipv4Addr;

use serde_json::{Value, json};

use super::{info, serve, status_subresource};
use crate::catalog::{Candidates, Claim, DeleteReturns, FieldName, Resource, Strategy, field, keep_status};
use crate::meta;
use crate::rand::Rng;
use crate::status::{ApiError, FieldError};
use crate::table::{self, Column, Describe};
use crate::validation::{dns1035_label, dns1123_subdomain, port_name};

/// `--service-cluster-ip-range` and `--service-node-port-range`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServiceRanges {
    pub network: Ipv4Addr,
    pub prefix: u8,
    pub node_ports: (u16, u16),
}

impl Default for ServiceRanges {
    fn default() -> Self {
        ServiceRanges { network: Ipv4Addr::new(10, 0, 0, 0), prefix: 24, node_ports: (30000, 32767) }
    }
}

impl ServiceRanges {
    /// Parses `10.0.0.0/24`.
    pub fn parse_cidr(cidr: &str) -> Result<(Ipv4Addr, u8), String> {
        let (ip, bits) = cidr.split_once('/').ok_or_else(|| format!("{cidr:?} is not a CIDR"))?;
        let ip: Ipv4Addr = ip.parse().map_err(|_| format!("{cidr:?}: only IPv4 service ranges are supported"))?;
        let bits: u8 = bits.parse().map_err(|_| format!("{cidr:?} is not a CIDR"))?;
        if !(1..=30).contains(&bits) {
            return Err(format!("{cidr:?}: the prefix must be between /1 and /30"));
        }
        let mask = u32::MAX << (32 - bits);
        Ok((Ipv4Addr::from(u32::from(ip) & mask), bits))
    }

    /// Usable addresses: the network and broadcast addresses are not handed out.
    fn first_and_count(&self) -> (u32, u32) {
        let size = 1u32 << (32 - self.prefix);
        (u32::from(self.network) + 1, size - 2)
    }

    /// The address of the `kubernetes` service: the first of the range.
    pub fn first_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.first_and_count().0)
    }

    fn contains(&self, ip: Ipv4Addr) -> bool {
        let (first, count) = self.first_and_count();
        (first..first + count).contains(&u32::from(ip))
    }
}

pub fn resource(ranges: ServiceRanges) -> Resource {
    let mut i = info("", "v1", "Service", "services", true);
    i.short_names = crate::catalog::names(&["svc"]);
    i.categories = crate::catalog::names(&["all"]);
    i.storage_prefix = "services/specs".into();
    i.subresources = vec![status_subresource(&i)];
    i.delete_returns = DeleteReturns::Object;
    serve(i, Services { ranges })
}

struct Services {
    ranges: ServiceRanges,
}

pub const IP_POOL: &str = "ipaddresses";
pub const NODE_PORT_POOL: &str = "servicenodeports";

const SPEC: &str = "io.k8s.api.core.v1.ServiceSpec";
const COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Type", "string", Describe::Field(SPEC, "type")),
    Column::new("Cluster-IP", "string", Describe::Field(SPEC, "clusterIP")),
    Column::new("External-IP", "string", Describe::Field(SPEC, "externalIPs")),
    Column::new("Port(s)", "string", Describe::Field(SPEC, "ports")),
    Column::AGE,
    Column::new("Selector", "string", Describe::Field(SPEC, "selector")).wide(),
];

fn svc_type(obj: &Value) -> &str {
    meta::str_at(obj, &["spec", "type"]).unwrap_or("ClusterIP")
}

fn needs_node_ports(obj: &Value) -> bool {
    match svc_type(obj) {
        "NodePort" => true,
        "LoadBalancer" => meta::at(obj, &["spec", "allocateLoadBalancerNodePorts"]).and_then(Value::as_bool) != Some(false),
        _ => false,
    }
}

fn externally_accessible(obj: &Value) -> bool {
    matches!(svc_type(obj), "LoadBalancer" | "NodePort")
        || (svc_type(obj) == "ClusterIP" && meta::at(obj, &["spec", "externalIPs"]).and_then(Value::as_array).is_some_and(|a| !a.is_empty()))
}

fn ip_record(obj: &Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
        "metadata": {"labels": {"ipaddress.kubernetes.io/ip-family": "IPv4", "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}},
        "spec": {"parentRef": {"group": "", "resource": "services", "namespace": meta::namespace(obj), "name": meta::name(obj)}}})
}

fn ipv4(n: u64) -> String {
    Ipv4Addr::from(n as u32).to_string()
}

fn port(n: u64) -> String {
    n.to_string()
}

impl Strategy for Services {
    fn name_check(&self) -> crate::validation::NameCheck {
        dns1035_label
    }

    fn default(&self, obj: &mut Value) {
        let spec = meta::object_at(obj, &["spec"]);
        spec.entry("type").or_insert_with(|| json!("ClusterIP"));
        spec.entry("sessionAffinity").or_insert_with(|| json!("None"));
        match spec.get("sessionAffinity").and_then(Value::as_str) {
            Some("None") => {
                spec.remove("sessionAffinityConfig");
            }
            Some("ClientIP") if spec.get("sessionAffinityConfig").and_then(|c| c.pointer("/clientIP/timeoutSeconds")).is_none() => {
                spec.insert("sessionAffinityConfig".into(), json!({"clientIP": {"timeoutSeconds": 10800}}));
            }
            _ => {}
        }
        if let Some(Value::Array(ports)) = spec.get_mut("ports") {
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                p.entry("protocol").or_insert_with(|| json!("TCP"));
                let unset = matches!(p.get("targetPort"), None | Some(Value::Null))
                    || p.get("targetPort") == Some(&json!(0))
                    || p.get("targetPort") == Some(&json!(""));
                if unset && let Some(port) = p.get("port").cloned() {
                    p.insert("targetPort".into(), port);
                }
            }
        }
        let ty = spec.get("type").and_then(Value::as_str).unwrap_or_default().to_string();
        if matches!(ty.as_str(), "NodePort" | "LoadBalancer" | "ClusterIP") {
            spec.entry("internalTrafficPolicy").or_insert_with(|| json!("Cluster"));
        }
        if ty == "LoadBalancer" {
            spec.entry("allocateLoadBalancerNodePorts").or_insert_with(|| json!(true));
        }
        if externally_accessible(obj) {
            meta::default_at(obj, &["spec"], "externalTrafficPolicy", json!("Cluster"));
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"loadBalancer": {}});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let ty = svc_type(obj);
        if !["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"].contains(&ty) {
            errs.push(FieldError::not_supported("spec.type", json!(ty), &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]));
        }
        let cluster_ip = meta::str_at(obj, &["spec", "clusterIP"]).unwrap_or_default();
        let ports = meta::at(obj, &["spec", "ports"]).and_then(Value::as_array).cloned().unwrap_or_default();
        if ty == "ExternalName" {
            let en = meta::str_at(obj, &["spec", "externalName"]).unwrap_or_default();
            if en.is_empty() {
                errs.push(FieldError::required("spec.externalName", ""));
            } else {
                for msg in dns1123_subdomain(en.trim_end_matches('.')) {
                    errs.push(FieldError::invalid("spec.externalName", json!(en), msg));
                }
            }
        } else if ports.is_empty() && cluster_ip != "None" {
            errs.push(FieldError::required("spec.ports", ""));
        }
        if !cluster_ip.is_empty() && cluster_ip != "None" {
            match cluster_ip.parse::<Ipv4Addr>() {
                Ok(ip) if !self.ranges.contains(ip) => errs.push(FieldError::invalid(
                    "spec.clusterIPs",
                    json!([cluster_ip]),
                    format!(
                        "failed to allocate IP {cluster_ip}: the provided IP ({cluster_ip}) is not in the valid range. The range of valid IPs is {}/{}",
                        self.ranges.network, self.ranges.prefix
                    ),
                )),
                Ok(_) => {}
                Err(_) => {
                    errs.push(FieldError::invalid("spec.clusterIPs[0]", json!(cluster_ip), "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
                }
            }
        }
        let mut names: Vec<&str> = Vec::new();
        for (i, p) in ports.iter().enumerate() {
            let path = format!("spec.ports[{i}]");
            let name = p.get("name").and_then(Value::as_str).unwrap_or_default();
            if ports.len() > 1 && name.is_empty() {
                errs.push(FieldError::required(format!("{path}.name"), ""));
            } else if !name.is_empty() {
                for msg in crate::validation::dns1123_label(name) {
                    errs.push(FieldError::invalid(format!("{path}.name"), json!(name), msg));
                }
                if names.contains(&name) {
                    errs.push(FieldError::duplicate(format!("{path}.name"), json!(name)));
                }
                names.push(name);
            }
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            if !(1..=65535).contains(&port) {
                errs.push(FieldError::invalid(format!("{path}.port"), json!(port), "must be between 1 and 65535, inclusive"));
            }
            if let Some(proto) = p.get("protocol")
                && !["TCP", "UDP", "SCTP"].contains(&proto.as_str().unwrap_or_default())
            {
                errs.push(FieldError::not_supported(format!("{path}.protocol"), proto.clone(), &["SCTP", "TCP", "UDP"]));
            }
            match p.get("targetPort") {
                Some(Value::Number(n)) if !(1..=65535).contains(&n.as_i64().unwrap_or(0)) => {
                    errs.push(FieldError::invalid(format!("{path}.targetPort"), Value::Number(n.clone()), "must be between 1 and 65535, inclusive"));
                }
                Some(Value::String(s)) => {
                    for msg in port_name(s) {
                        errs.push(FieldError::invalid(format!("{path}.targetPort"), json!(s), msg));
                    }
                }
                _ => {}
            }
            if let Some(np) = p.get("nodePort").and_then(Value::as_i64).filter(|n| *n != 0) {
                if !needs_node_ports(obj) && ty != "LoadBalancer" {
                    errs.push(FieldError::forbidden(format!("{path}.nodePort"), "may not be used when `type` is 'ClusterIP'"));
                }
                let (lo, hi) = self.ranges.node_ports;
                if np < lo as i64 || np > hi as i64 {
                    errs.push(FieldError::invalid(
                        format!("{path}.nodePort"),
                        json!(np),
                        format!("provided port is not in the valid range. The range of valid ports is {lo}-{hi}"),
                    ));
                }
            }
        }
        if let Some(sa) = meta::at(obj, &["spec", "sessionAffinity"])
            && !["ClientIP", "None"].contains(&sa.as_str().unwrap_or_default())
        {
            errs.push(FieldError::not_supported("spec.sessionAffinity", sa.clone(), &["ClientIP", "None"]));
        }
        errs.extend(crate::validation::labels(meta::at(obj, &["spec", "selector"]), "spec.selector"));
        validate_policies(obj, ty, &mut errs);
        errs
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        keep_status(new, old);
        // Allocated values carry over when the client leaves them out; a service that becomes
        // an ExternalName drops them, and one no longer reachable from outside its external
        // traffic policy, unless the client changed them (kube's dropTypeDependentFields).
        let to_external_name = svc_type(new) == "ExternalName" && svc_type(old) != "ExternalName";
        for key in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            let (n, o) = (meta::at(new, &["spec", key]).cloned(), meta::at(old, &["spec", key]).cloned());
            if to_external_name && n.is_some() && n == o {
                meta::object_at(new, &["spec"]).remove(key);
            } else if !to_external_name
                && n.is_none()
                && let Some(v) = o
            {
                meta::object_at(new, &["spec"]).insert(key.into(), v);
            }
        }
        if !externally_accessible(new) && externally_accessible(old) {
            for key in ["externalTrafficPolicy", "healthCheckNodePort"] {
                if meta::at(new, &["spec", key]) == meta::at(old, &["spec", key]) {
                    meta::object_at(new, &["spec"]).remove(key);
                }
            }
        }
        let old_ports = meta::at(old, &["spec", "ports"]).and_then(Value::as_array).cloned().unwrap_or_default();
        let node_ports = |ports: &[Value]| ports.iter().map(|p| p.get("nodePort").cloned()).collect::<Vec<_>>();
        if needs_node_ports(old) && !needs_node_ports(new) {
            let new_ports = meta::at(new, &["spec", "ports"]).and_then(Value::as_array).cloned().unwrap_or_default();
            if node_ports(&new_ports) == node_ports(&old_ports)
                && let Some(Value::Array(ports)) = new.pointer_mut("/spec/ports")
            {
                ports.iter_mut().filter_map(Value::as_object_mut).for_each(|p| drop(p.remove("nodePort")));
            }
        }
        let carry = needs_node_ports(new);
        if let Some(Value::Array(ports)) = new.pointer_mut("/spec/ports").filter(|_| carry) {
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                if p.get("nodePort").is_none() {
                    let same = old_ports.iter().find(|o| o.get("port") == p.get("port") && o.get("protocol") == p.get("protocol"));
                    if let Some(np) = same.and_then(|o| o.get("nodePort")).cloned() {
                        p.insert("nodePort".into(), np);
                    }
                }
            }
        }
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let (n, o) = (meta::at(new, &["spec", "clusterIP"]), meta::at(old, &["spec", "clusterIP"]));
        if o.is_some_and(|o| !o.as_str().unwrap_or_default().is_empty()) && n != o && svc_type(new) != "ExternalName" {
            errs.push(FieldError::invalid("spec.clusterIPs[0]", n.cloned().unwrap_or(Value::Null), "may not change once set"));
        }
        errs
    }

    fn claims(&self, obj: &Value, rng: &mut Rng) -> Result<Vec<Claim>, ApiError> {
        let mut claims = Vec::new();
        let cluster_ip = meta::str_at(obj, &["spec", "clusterIP"]).unwrap_or_default();
        if svc_type(obj) != "ExternalName" && cluster_ip != "None" {
            let candidates = if cluster_ip.is_empty() {
                let (first, count) = self.ranges.first_and_count();
                // Dynamic addresses start in the upper band of the range and wrap into the
                // lower band, which is kept for addresses clients ask for (kube's split).
                let reserved = (count / 16).clamp(16, 256).min(count / 2);
                let dynamic = (count - reserved).max(1);
                let start = reserved as u64 + rng.next_u64() % dynamic as u64;
                Candidates::Range { first: first as u64, count: count as u64, start, format: ipv4 }
            } else {
                Candidates::Fixed(cluster_ip.to_string())
            };
            let taken = ApiError::invalid(
                &crate::status::GroupKind { group: String::new(), kind: "Service".into() },
                meta::name(obj),
                &[FieldError::invalid(
                    "spec.clusterIPs",
                    json!([cluster_ip]),
                    if cluster_ip.is_empty() {
                        "failed to allocate a serviceIP: range is full".to_string()
                    } else {
                        format!("failed to allocate IP {cluster_ip}: provided IP is already allocated")
                    },
                )],
            );
            claims.push(Claim { pool: IP_POOL, candidates, record: ip_record(obj), taken });
        }
        if needs_node_ports(obj) {
            let (lo, hi) = self.ranges.node_ports;
            for (i, p) in meta::at(obj, &["spec", "ports"]).and_then(Value::as_array).into_iter().flatten().enumerate() {
                let requested = p.get("nodePort").and_then(Value::as_i64).filter(|n| *n != 0);
                let count = (hi - lo) as u64 + 1;
                let candidates = match requested {
                    Some(n) => Candidates::Fixed(n.to_string()),
                    None => Candidates::Range { first: lo as u64, count, start: rng.next_u64() % count, format: port },
                };
                let taken = ApiError::invalid(
                    &crate::status::GroupKind { group: String::new(), kind: "Service".into() },
                    meta::name(obj),
                    &[FieldError::invalid(
                        format!("spec.ports[{i}].nodePort"),
                        json!(requested.unwrap_or(0)),
                        if requested.is_some() { "provided port is already allocated" } else { "failed to allocate a nodePort: range is full" },
                    )],
                );
                claims.push(Claim {
                    pool: NODE_PORT_POOL,
                    candidates,
                    record: json!({"service": format!("{}/{}", meta::namespace(obj), meta::name(obj))}),
                    taken,
                });
            }
        }
        Ok(claims)
    }

    fn grant(&self, obj: &mut Value, values: &[String]) {
        let mut values = values.iter();
        let cluster_ip = meta::str_at(obj, &["spec", "clusterIP"]).unwrap_or_default().to_string();
        let spec = meta::object_at(obj, &["spec"]);
        let ty = spec.get("type").and_then(Value::as_str).unwrap_or("ClusterIP").to_string();
        if ty != "ExternalName" {
            let ip = if cluster_ip == "None" { "None".to_string() } else { values.next().cloned().unwrap_or_default() };
            spec.insert("clusterIP".into(), json!(ip));
            spec.insert("clusterIPs".into(), json!([ip]));
            spec.entry("ipFamilies").or_insert_with(|| json!(["IPv4"]));
            spec.entry("ipFamilyPolicy").or_insert_with(|| json!("SingleStack"));
        }
        let wants_ports = ty == "NodePort" || (ty == "LoadBalancer" && spec.get("allocateLoadBalancerNodePorts").and_then(Value::as_bool) != Some(false));
        if wants_ports && let Some(Value::Array(ports)) = spec.get_mut("ports") {
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                if let Some(v) = values.next() {
                    p.insert("nodePort".into(), json!(v.parse::<i64>().unwrap_or(0)));
                }
            }
        }
    }

    fn held(&self, obj: &Value) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(ip) = meta::str_at(obj, &["spec", "clusterIP"]).filter(|s| !s.is_empty() && *s != "None") {
            out.push((IP_POOL, ip.to_string()));
        }
        for p in meta::at(obj, &["spec", "ports"]).and_then(Value::as_array).into_iter().flatten() {
            if let Some(np) = p.get("nodePort").and_then(Value::as_i64).filter(|n| *n != 0) {
                out.push((NODE_PORT_POOL, np.to_string()));
            }
        }
        out
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let ty = svc_type(obj).to_string();
        let cluster_ip = table::str_or(obj, &["spec", "clusterIP"], "<none>");
        let external: Vec<&str> = meta::at(obj, &["spec", "externalIPs"]).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        let lb: Vec<String> = meta::at(obj, &["status", "loadBalancer", "ingress"])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|i| i.get("ip").or_else(|| i.get("hostname")).and_then(Value::as_str).map(str::to_string))
            .collect();
        let external_cell = match ty.as_str() {
            "ClusterIP" | "NodePort" if !external.is_empty() => external.join(","),
            "ClusterIP" | "NodePort" => "<none>".to_string(),
            "LoadBalancer" => {
                let mut all = lb.clone();
                all.extend(external.iter().map(|s| s.to_string()));
                if all.is_empty() { "<pending>".to_string() } else { all.join(",") }
            }
            "ExternalName" => table::str_or(obj, &["spec", "externalName"], ""),
            _ => "<unknown>".to_string(),
        };
        let ports: Vec<String> = meta::at(obj, &["spec", "ports"])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|p| {
                let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
                let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
                match p.get("nodePort").and_then(Value::as_i64).filter(|n| *n != 0) {
                    Some(np) => format!("{port}:{np}/{proto}"),
                    None => format!("{port}/{proto}"),
                }
            })
            .collect();
        let ports_cell = if ports.is_empty() { "<none>".to_string() } else { ports.join(",") };
        vec![
            json!(meta::name(obj)),
            json!(ty),
            json!(cluster_ip),
            json!(external_cell),
            json!(ports_cell),
            table::age(obj, now),
            json!(table::format_labels(meta::at(obj, &["spec", "selector"]))),
        ]
    }

    fn selectable_fields(&self) -> &[FieldName] {
        const { &[field("spec.clusterIP"), field("spec.type")] }
    }
}

/// The enums of a service's IP families and traffic policies, as kube checks them.
fn validate_policies(obj: &Value, ty: &str, errs: &mut Vec<FieldError>) {
    let spec = |k: &str| meta::at(obj, &["spec", k]).filter(|v| !v.is_null());
    if ty == "ExternalName" {
        if spec("ipFamilies").and_then(Value::as_array).is_some_and(|f| !f.is_empty()) {
            errs.push(FieldError::forbidden("spec.ipFamilies", "may not be set for ExternalName services"));
        }
        if spec("ipFamilyPolicy").is_some() {
            errs.push(FieldError::forbidden("spec.ipFamilyPolicy", "may not be set for ExternalName services"));
        }
    } else {
        for (i, family) in spec("ipFamilies").and_then(Value::as_array).into_iter().flatten().enumerate() {
            if !["IPv4", "IPv6"].contains(&family.as_str().unwrap_or_default()) {
                errs.push(FieldError::not_supported(format!("spec.ipFamilies[{i}]"), family.clone(), &["IPv4", "IPv6"]));
            }
        }
        if let Some(policy) = spec("ipFamilyPolicy")
            && !["PreferDualStack", "RequireDualStack", "SingleStack"].contains(&policy.as_str().unwrap_or_default())
        {
            errs.push(FieldError::not_supported("spec.ipFamilyPolicy", policy.clone(), &["PreferDualStack", "RequireDualStack", "SingleStack"]));
        }
    }
    let etp = spec("externalTrafficPolicy").and_then(Value::as_str).unwrap_or_default();
    if !externally_accessible(obj) {
        if !etp.is_empty() {
            errs.push(FieldError::invalid("spec.externalTrafficPolicy", json!(etp), "may only be set for externally-accessible services"));
        }
    } else if etp.is_empty() {
        errs.push(FieldError::required("spec.externalTrafficPolicy", ""));
    } else if !["Cluster", "Local"].contains(&etp) {
        errs.push(FieldError::not_supported("spec.externalTrafficPolicy", json!(etp), &["Cluster", "Local"]));
    }
    match spec("internalTrafficPolicy") {
        None if ["ClusterIP", "NodePort", "LoadBalancer"].contains(&ty) => errs.push(FieldError::required("spec.internalTrafficPolicy", "")),
        Some(itp) if !["Cluster", "Local"].contains(&itp.as_str().unwrap_or_default()) => {
            errs.push(FieldError::not_supported("spec.internalTrafficPolicy", itp.clone(), &["Cluster", "Local"]))
        }
        _ => {}
    }
    if let Some(td) = spec("trafficDistribution")
        && td.as_str() != Some("PreferClose")
    {
        errs.push(FieldError::not_supported("spec.trafficDistribution", td.clone(), &["PreferClose"]));
    }
}

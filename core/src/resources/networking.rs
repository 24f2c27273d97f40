//! networking.k8s.io/v1: ingresses, ingress classes, network policies, IP addresses and service
//! CIDRs (kube's `pkg/registry/networking` strategies and `pkg/apis/networking` validation).

use core::net::IpAddr;

use serde_json::{Value, json};

use super::{info, serve, status_subresource};
use crate::catalog::{Lifecycle, Resource, Strategy};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};
use crate::validation::{dns1035_label, dns1123_subdomain, immutable, label_selector, path_segment_name, port_name, supported};

const G: &str = "networking.k8s.io";

pub fn resources() -> Vec<Resource> {
    let mut ingress_classes = info(G, "v1", "IngressClass", "ingressclasses", false);
    ingress_classes.singular = "ingressclass".into();
    let mut ingresses = info(G, "v1", "Ingress", "ingresses", true);
    ingresses.short_names = crate::catalog::names(&["ing"]);
    ingresses.subresources = vec![status_subresource(&ingresses)];
    let mut ips = info(G, "v1", "IPAddress", "ipaddresses", false);
    ips.short_names = crate::catalog::names(&["ip"]);
    let mut policies = info(G, "v1", "NetworkPolicy", "networkpolicies", true);
    policies.short_names = crate::catalog::names(&["netpol"]);
    let mut cidrs = info(G, "v1", "ServiceCIDR", "servicecidrs", false);
    cidrs.subresources = vec![status_subresource(&cidrs)];
    vec![
        serve(ingress_classes, IngressClasses),
        serve(ingresses, Ingresses),
        serve(ips, IpAddresses),
        serve(policies, NetworkPolicies),
        serve(cidrs, ServiceCidrs),
    ]
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn path_segment(errs: &mut Vec<FieldError>, v: &Value, key: &str, path: &str) {
    let s = str_of(v, key);
    if s.is_empty() {
        errs.push(FieldError::required(format!("{path}.{key}"), ""));
    }
    for msg in path_segment_name(s) {
        errs.push(FieldError::invalid(format!("{path}.{key}"), json!(s), msg));
    }
}

/// A `TypedLocalObjectReference` (or a parameters reference): kind and name, an optional group.
fn typed_reference(r: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(g) = r.get("apiGroup").and_then(Value::as_str).filter(|g| !g.is_empty()) {
        for msg in dns1123_subdomain(g) {
            errs.push(FieldError::invalid(format!("{path}.apiGroup"), json!(g), msg));
        }
    }
    path_segment(errs, r, "kind", path);
    path_segment(errs, r, "name", path);
}

fn dns_host(host: &str, path: &str, errs: &mut Vec<FieldError>) {
    if host.parse::<IpAddr>().is_ok() {
        errs.push(FieldError::invalid(path, json!(host), "must be a DNS name, not an IP address"));
    }
    let checked = host.strip_prefix("*.").unwrap_or(host);
    for msg in dns1123_subdomain(checked) {
        errs.push(FieldError::invalid(path, json!(host), msg));
    }
}

struct Ingresses;

const INGRESS_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Class", "string", Describe::Text("The name of the IngressClass resource that should be used for additional configuration")),
    Column::new("Hosts", "string", Describe::Text("Hosts that incoming requests are matched against before the ingress rule")),
    Column::new("Address", "string", Describe::Text("Address is a list containing ingress points for the load-balancer")),
    Column::new("Ports", "string", Describe::Text("Ports of TLS configurations that open")),
    Column::AGE,
];

fn ingress_backend(b: &Value, path: &str, errs: &mut Vec<FieldError>) {
    match (b.get("service"), b.get("resource")) {
        (Some(_), Some(_)) => errs.push(FieldError::invalid(path, json!(""), "cannot set both resource and service backends")),
        (None, None) => errs.push(FieldError::invalid(path, json!(""), "resource or service backend is required")),
        (None, Some(r)) => typed_reference(r, &format!("{path}.resource"), errs),
        (Some(s), None) => {
            let name = str_of(s, "name");
            if name.is_empty() {
                errs.push(FieldError::required(format!("{path}.service.name"), ""));
            } else {
                for msg in dns1035_label(name) {
                    errs.push(FieldError::invalid(format!("{path}.service.name"), json!(name), msg));
                }
            }
            let port = s.get("port").cloned().unwrap_or_default();
            let (pname, number) = (str_of(&port, "name"), port.get("number").and_then(Value::as_i64).unwrap_or(0));
            match (pname.is_empty(), number == 0) {
                (false, false) => errs.push(FieldError::invalid(format!("{path}.service.port"), port.clone(), "cannot set both port name & port number")),
                (true, true) => errs.push(FieldError::required(format!("{path}.service.port"), "port name or number is required")),
                (false, true) => {
                    for msg in port_name(pname) {
                        errs.push(FieldError::invalid(format!("{path}.service.port.name"), json!(pname), msg));
                    }
                }
                (true, false) if !(1..=65535).contains(&number) => {
                    errs.push(FieldError::invalid(format!("{path}.service.port.number"), json!(number), "must be between 1 and 65535, inclusive"))
                }
                (true, false) => {}
            }
        }
    }
}

fn ingress_path(p: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let value = str_of(p, "path");
    match p.get("pathType").and_then(Value::as_str) {
        None => errs.push(FieldError::required(format!("{path}.pathType"), "pathType must be specified")),
        Some("Exact" | "Prefix") => {
            if !value.starts_with('/') {
                errs.push(FieldError::invalid(format!("{path}.path"), json!(value), "must be an absolute path"));
            }
            for bad in ["//", "/./", "/../", "%2f", "%2F"] {
                if value.contains(bad) {
                    errs.push(FieldError::invalid(format!("{path}.path"), json!(value), format!("must not contain '{bad}'")));
                }
            }
            for bad in ["/..", "/."] {
                if value.ends_with(bad) {
                    errs.push(FieldError::invalid(format!("{path}.path"), json!(value), format!("cannot end with '{bad}'")));
                }
            }
        }
        Some("ImplementationSpecific") => {
            if !value.is_empty() && !value.starts_with('/') {
                errs.push(FieldError::invalid(format!("{path}.path"), json!(value), "must be an absolute path"));
            }
        }
        Some(_) => errs.push(FieldError::not_supported(format!("{path}.pathType"), p["pathType"].clone(), &["Exact", "ImplementationSpecific", "Prefix"])),
    }
    ingress_backend(p.get("backend").unwrap_or(&Value::Null), &format!("{path}.backend"), errs);
}

impl Ingresses {
    fn validate_spec(obj: &Value, errs: &mut Vec<FieldError>) {
        let spec = obj.get("spec").cloned().unwrap_or_default();
        let rules = spec.get("rules").and_then(Value::as_array).cloned().unwrap_or_default();
        match spec.get("defaultBackend") {
            Some(b) => ingress_backend(b, "spec.defaultBackend", errs),
            None if rules.is_empty() => errs.push(FieldError::invalid("spec", json!(rules), "either `defaultBackend` or `rules` must be specified")),
            None => {}
        }
        for (i, rule) in rules.iter().enumerate() {
            if let Some(host) = rule.get("host").and_then(Value::as_str).filter(|h| !h.is_empty()) {
                dns_host(host, &format!("spec.rules[{i}].host"), errs);
            }
            let Some(http) = rule.get("http") else { continue };
            let paths = http.get("paths").and_then(Value::as_array).cloned().unwrap_or_default();
            if paths.is_empty() {
                errs.push(FieldError::required(format!("spec.rules[{i}].http.paths"), ""));
            }
            for (j, p) in paths.iter().enumerate() {
                ingress_path(p, &format!("spec.rules[{i}].http.paths[{j}]"), errs);
            }
        }
        for (i, tls) in spec.get("tls").and_then(Value::as_array).into_iter().flatten().enumerate() {
            for (j, host) in tls.get("hosts").and_then(Value::as_array).into_iter().flatten().enumerate() {
                dns_host(host.as_str().unwrap_or_default(), &format!("spec.tls[{i}].hosts[{j}]"), errs);
            }
        }
        if let Some(class) = spec.get("ingressClassName").and_then(Value::as_str) {
            for msg in dns1123_subdomain(class) {
                errs.push(FieldError::invalid("spec.ingressClassName", json!(class), msg));
            }
        }
    }
}

impl Strategy for Ingresses {
    fn lifecycle(&self) -> Lifecycle {
        Lifecycle::StatusAndGeneration
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        Self::validate_spec(obj, &mut errs);
        let annotation = meta::str_at(obj, &["metadata", "annotations", "kubernetes.io/ingress.class"]);
        let class = meta::str_at(obj, &["spec", "ingressClassName"]);
        if let (Some(a), Some(c)) = (annotation, class)
            && a != c
        {
            errs.push(FieldError::invalid("annotations.kubernetes.io/ingress.class", json!(a), "must match `ingressClassName` when both are specified"));
        }
        errs
    }

    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        Self::validate_spec(new, &mut errs);
        errs
    }

    fn validate_subresource_update(&self, _subresource: &str, new: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for (i, ing) in meta::at(new, &["status", "loadBalancer", "ingress"]).and_then(Value::as_array).into_iter().flatten().enumerate() {
            if let Some(ip) = ing.get("ip").and_then(Value::as_str).filter(|ip| !ip.is_empty())
                && ip.parse::<IpAddr>().is_err()
            {
                errs.push(FieldError::invalid(format!("status.loadBalancer.ingress[{i}].ip"), json!(ip), "must be a valid IP address"));
            }
            if let Some(h) = ing.get("hostname").and_then(Value::as_str).filter(|h| !h.is_empty()) {
                dns_host(h, &format!("status.loadBalancer.ingress[{i}].hostname"), &mut errs);
            }
        }
        errs
    }

    fn columns(&self) -> &'static [Column] {
        INGRESS_COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let hosts: Vec<&str> = meta::at(obj, &["spec", "rules"])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.get("host").and_then(Value::as_str))
            .filter(|h| !h.is_empty())
            .collect();
        let hosts = match hosts.len() {
            0 => "*".to_string(),
            n if n > 3 => format!("{} + {} more...", hosts[..3].join(","), n - 3),
            _ => hosts.join(","),
        };
        let mut addresses: Vec<&str> = meta::at(obj, &["status", "loadBalancer", "ingress"])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|i| i.get("ip").and_then(Value::as_str).filter(|s| !s.is_empty()).or_else(|| i.get("hostname").and_then(Value::as_str)))
            .collect();
        addresses.sort_unstable();
        addresses.dedup();
        let ports = if meta::at(obj, &["spec", "tls"]).and_then(Value::as_array).is_some_and(|t| !t.is_empty()) { "80, 443" } else { "80" };
        vec![
            json!(meta::name(obj)),
            json!(table::str_or(obj, &["spec", "ingressClassName"], "<none>")),
            json!(hosts),
            json!(addresses.join(",")),
            json!(ports),
            table::age(obj, now),
        ]
    }
}

struct IngressClasses;

const INGRESS_CLASS_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Controller", "string", Describe::Text("Controller that is responsible for handling this class")),
    Column::new("Parameters", "string", Describe::Text("A reference to a resource with additional parameters")),
    Column::AGE,
];

impl Strategy for IngressClasses {
    fn default(&self, obj: &mut Value) {
        if let Some(Value::Object(p)) = obj.get_mut("spec").and_then(|s| s.get_mut("parameters")) {
            p.entry("scope").or_insert_with(|| json!("Cluster"));
        }
    }

    fn lifecycle(&self) -> Lifecycle {
        Lifecycle::Generation("spec")
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let controller = meta::str_at(obj, &["spec", "controller"]).unwrap_or_default();
        if controller.is_empty() {
            errs.push(FieldError::required("spec.controller", ""));
        } else if controller.len() > 250 {
            errs.push(FieldError::too_long("spec.controller", 250));
        } else {
            let domain = controller.split('/').next().unwrap_or_default();
            if !controller.contains('/') || !dns1123_subdomain(domain).is_empty() {
                errs.push(FieldError::invalid("spec.controller", json!(controller), "must be a domain-prefixed path (such as \"acme.io/foo\")"));
            }
        }
        if let Some(p) = meta::at(obj, &["spec", "parameters"]) {
            typed_reference(p, "spec.parameters", &mut errs);
            let ns = p.get("namespace").and_then(Value::as_str);
            match p.get("scope").and_then(Value::as_str) {
                None => errs.push(FieldError::required("spec.parameters.scope", "")),
                Some("Namespace") if ns.is_none_or(str::is_empty) => {
                    errs.push(FieldError::required("spec.parameters.namespace", "`parameters.scope` is set to 'Namespace'"))
                }
                Some("Cluster") if ns.is_some() => errs.push(FieldError::forbidden("spec.parameters.namespace", "`parameters.scope` is set to 'Cluster'")),
                Some("Namespace" | "Cluster") => {}
                Some(_) => supported(&mut errs, p.get("scope"), "spec.parameters.scope", &["Cluster", "Namespace"]),
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(immutable(new, old, &["spec", "controller"], "spec.controller"));
        errs
    }

    fn columns(&self) -> &'static [Column] {
        INGRESS_CLASS_COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let params = match meta::at(obj, &["spec", "parameters"]) {
            None => "<none>".to_string(),
            Some(p) => {
                let group = p.get("apiGroup").and_then(Value::as_str).filter(|g| !g.is_empty()).map(|g| format!(".{g}")).unwrap_or_default();
                format!("{}{group}/{}", str_of(p, "kind"), str_of(p, "name"))
            }
        };
        vec![json!(meta::name(obj)), json!(table::str_or(obj, &["spec", "controller"], "")), json!(params), table::age(obj, now)]
    }
}

struct NetworkPolicies;

const POLICY_COLUMNS: &[Column] =
    &[Column::NAME, Column::new("Pod-Selector", "string", Describe::Field("io.k8s.api.networking.v1.NetworkPolicySpec", "podSelector")), Column::AGE];

fn policy_ports(ports: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    for (i, p) in ports.and_then(Value::as_array).into_iter().flatten().enumerate() {
        let at = format!("{path}[{i}]");
        supported(errs, p.get("protocol"), &format!("{at}.protocol"), &["SCTP", "TCP", "UDP"]);
        match p.get("port") {
            Some(Value::Number(n)) => {
                let n = n.as_i64().unwrap_or(0);
                if !(1..=65535).contains(&n) {
                    errs.push(FieldError::invalid(format!("{at}.port"), json!(n), "must be between 1 and 65535, inclusive"));
                }
                if let Some(end) = p.get("endPort").and_then(Value::as_i64)
                    && end < n
                {
                    errs.push(FieldError::invalid(format!("{at}.endPort"), json!(end), "must be greater than or equal to `port`"));
                }
            }
            Some(Value::String(s)) => {
                for msg in port_name(s) {
                    errs.push(FieldError::invalid(format!("{at}.port"), json!(s), msg));
                }
                if let Some(end) = p.get("endPort").filter(|e| !e.is_null()) {
                    errs.push(FieldError::invalid(format!("{at}.endPort"), end.clone(), "may not be specified when `port` is non-numeric"));
                }
            }
            _ => {
                if let Some(end) = p.get("endPort").filter(|e| !e.is_null()) {
                    errs.push(FieldError::invalid(format!("{at}.endPort"), end.clone(), "may not be specified when `port` is not specified"));
                }
            }
        }
    }
}

fn policy_peers(peers: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    for (i, peer) in peers.and_then(Value::as_array).into_iter().flatten().enumerate() {
        let at = format!("{path}[{i}]");
        let present = ["podSelector", "namespaceSelector", "ipBlock"].map(|k| peer.get(k).is_some_and(|v| !v.is_null()));
        match present {
            [false, false, false] => errs.push(FieldError::required(at.clone(), "must specify a peer")),
            [_, _, true] if present[0] || present[1] => errs.push(FieldError::forbidden(at.clone(), "may not specify both ipBlock and another peer")),
            _ => {}
        }
        errs.extend(label_selector(peer.get("podSelector"), &format!("{at}.podSelector")));
        errs.extend(label_selector(peer.get("namespaceSelector"), &format!("{at}.namespaceSelector")));
        if let Some(block) = peer.get("ipBlock").filter(|b| !b.is_null()) {
            let cidr = str_of(block, "cidr");
            let parsed = parse_cidr(cidr);
            if cidr.is_empty() {
                errs.push(FieldError::required(format!("{at}.ipBlock.cidr"), ""));
            } else if parsed.is_none() {
                errs.push(FieldError::invalid(format!("{at}.ipBlock.cidr"), json!(cidr), "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"));
            }
            for (j, ex) in block.get("except").and_then(Value::as_array).into_iter().flatten().enumerate() {
                let ex_s = ex.as_str().unwrap_or_default();
                let inside = match (parsed, parse_cidr(ex_s)) {
                    (Some(outer), Some(inner)) => inner.1 > outer.1 && contains(outer, inner.0),
                    (_, None) => {
                        errs.push(FieldError::invalid(
                            format!("{at}.ipBlock.except[{j}]"),
                            ex.clone(),
                            "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
                        ));
                        continue;
                    }
                    (None, Some(_)) => true,
                };
                if !inside {
                    errs.push(FieldError::invalid(format!("{at}.ipBlock.except[{j}]"), ex.clone(), "must be a strict subset of `cidr`"));
                }
            }
        }
    }
}

/// An address and prefix length (`10.0.0.0/8`), or nothing for a malformed CIDR.
fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (ip, bits) = s.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    if bits.starts_with('+') || (bits.len() > 1 && bits.starts_with('0')) {
        return None;
    }
    let bits: u8 = bits.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (bits <= max).then_some((ip, bits))
}

fn contains(net: (IpAddr, u8), ip: IpAddr) -> bool {
    match (net.0, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = if net.1 == 0 { 0 } else { u32::MAX << (32 - net.1) };
            u32::from(n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = if net.1 == 0 { 0 } else { u128::MAX << (128 - net.1) };
            u128::from(n) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

impl Strategy for NetworkPolicies {
    fn default(&self, obj: &mut Value) {
        let spec = meta::object_at(obj, &["spec"]);
        for rules in ["ingress", "egress"] {
            for rule in spec.get_mut(rules).and_then(Value::as_array_mut).into_iter().flatten() {
                for port in rule.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
                    if let Value::Object(p) = port {
                        p.entry("protocol").or_insert_with(|| json!("TCP"));
                    }
                }
            }
        }
        if spec.get("policyTypes").and_then(Value::as_array).is_none_or(Vec::is_empty) {
            let egress = spec.get("egress").and_then(Value::as_array).is_some_and(|e| !e.is_empty());
            spec.insert("policyTypes".into(), if egress { json!(["Ingress", "Egress"]) } else { json!(["Ingress"]) });
        }
    }

    fn lifecycle(&self) -> Lifecycle {
        Lifecycle::Generation("spec")
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = label_selector(meta::at(obj, &["spec", "podSelector"]), "spec.podSelector");
        for (dir, peers) in [("ingress", "from"), ("egress", "to")] {
            for (i, rule) in meta::at(obj, &["spec", dir]).and_then(Value::as_array).into_iter().flatten().enumerate() {
                policy_ports(rule.get("ports"), &format!("spec.{dir}[{i}].ports"), &mut errs);
                policy_peers(rule.get(peers), &format!("spec.{dir}[{i}].{peers}"), &mut errs);
            }
        }
        let types = meta::at(obj, &["spec", "policyTypes"]).and_then(Value::as_array).cloned().unwrap_or_default();
        for (i, t) in types.iter().enumerate() {
            supported(&mut errs, Some(t), &format!("spec.policyTypes[{i}]"), &["Ingress", "Egress"]);
        }
        if types.len() > 2 {
            errs.push(FieldError::invalid("spec.policyTypes", json!(types), "may not specify more than two policyTypes"));
        }
        errs
    }

    fn columns(&self) -> &'static [Column] {
        POLICY_COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        vec![json!(meta::name(obj)), json!(table::selector_string(meta::at(obj, &["spec", "podSelector"]))), table::age(obj, now)]
    }
}

struct IpAddresses;

/// Two columns and, as kube's printer writes them, three cells (the age has no column).
const IP_COLUMNS: &[Column] = &[Column::NAME, Column::new("ParentRef", "string", Describe::Field("io.k8s.api.networking.v1beta1.IPAddressSpec", "parentRef"))];

impl Strategy for IpAddresses {
    fn name_check(&self) -> crate::validation::NameCheck {
        |name| match name.parse::<IpAddr>() {
            Ok(ip) if ip.to_string() == name => Vec::new(),
            Ok(ip) => vec![format!("must be in canonical form (\"{ip}\")")],
            Err(_) => vec!["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)".to_string()],
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        match meta::at(obj, &["spec", "parentRef"]).filter(|p| !p.is_null()) {
            None => errs.push(FieldError::required("spec.parentRef", "")),
            Some(p) => {
                if let Some(g) = p.get("group").and_then(Value::as_str).filter(|g| !g.is_empty()) {
                    for msg in dns1123_subdomain(g) {
                        errs.push(FieldError::invalid("spec.parentRef.group", json!(g), msg));
                    }
                }
                path_segment(&mut errs, p, "resource", "spec.parentRef");
                path_segment(&mut errs, p, "name", "spec.parentRef");
                if let Some(ns) = p.get("namespace").and_then(Value::as_str).filter(|n| !n.is_empty()) {
                    for msg in path_segment_name(ns) {
                        errs.push(FieldError::invalid("spec.parentRef.namespace", json!(ns), msg));
                    }
                }
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(immutable(new, old, &["spec", "parentRef"], "spec.parentRef"));
        errs
    }

    fn columns(&self) -> &'static [Column] {
        IP_COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let parent = match meta::at(obj, &["spec", "parentRef"]) {
            None => "<none>".to_string(),
            Some(p) => {
                let mut s = str_of(p, "resource").to_lowercase();
                if !str_of(p, "group").is_empty() {
                    s = format!("{s}.{}", str_of(p, "group").to_lowercase());
                }
                if !str_of(p, "namespace").is_empty() {
                    s = format!("{s}/{}", str_of(p, "namespace"));
                }
                format!("{s}/{}", str_of(p, "name"))
            }
        };
        vec![json!(meta::name(obj)), json!(parent), table::age(obj, now)]
    }
}

struct ServiceCidrs;

const CIDR_COLUMNS: &[Column] =
    &[Column::NAME, Column::new("CIDRs", "string", Describe::Field("io.k8s.api.networking.v1beta1.ServiceCIDRSpec", "cidrs")), Column::AGE];

impl Strategy for ServiceCidrs {
    fn lifecycle(&self) -> Lifecycle {
        Lifecycle::Status
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let cidrs = meta::at(obj, &["spec", "cidrs"]).and_then(Value::as_array).cloned().unwrap_or_default();
        if cidrs.is_empty() {
            errs.push(FieldError::required("spec.cidrs", "at least one CIDR required"));
        }
        if cidrs.len() > 2 {
            errs.push(FieldError::invalid("spec.cidrs", obj.get("spec").cloned().unwrap_or_default(), "may only hold up to 2 values"));
            return errs;
        }
        let mut families = Vec::new();
        for (i, c) in cidrs.iter().enumerate() {
            match c.as_str().and_then(parse_cidr) {
                Some((ip, _)) => families.push(ip.is_ipv4()),
                None => {
                    errs.push(FieldError::invalid(format!("spec.cidrs[{i}]"), c.clone(), "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"))
                }
            }
        }
        if families.len() == 2 && families[0] == families[1] {
            errs.push(FieldError::invalid(
                "spec.cidrs",
                json!(cidrs),
                "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64",
            ));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(immutable(new, old, &["spec", "cidrs"], "spec.cidrs"));
        errs
    }

    fn columns(&self) -> &'static [Column] {
        CIDR_COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let cidrs: Vec<&str> = meta::at(obj, &["spec", "cidrs"]).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        vec![json!(meta::name(obj)), json!(cidrs.join(",")), table::age(obj, now)]
    }
}

//! kube's checks of a webhook's `clientConfig` (`k8s.io/apiserver/pkg/util/webhook`
//! `ValidateWebhookURL` and `ValidateWebhookService`), shared by conversion and admission
//! webhooks.

use serde_json::{Value, json};

use crate::status::FieldError;
use crate::validation::dns1123_subdomain;

const FORM: &str = "; desired format: https://host[/path]";

/// `ValidateWebhookURL` of `url` at `path`; with `force_https`, only `https` URLs.
pub fn url(path: &str, url: &str, force_https: bool) -> Vec<FieldError> {
    if url.chars().any(|c| c.is_ascii_control()) {
        return vec![FieldError::required(path, format!("url must be a valid URL: parse {url:?}: net/url: invalid control character in URL{FORM}"))];
    }
    let (rest, fragment) = url.split_once('#').unwrap_or((url, ""));
    let (scheme, rest) = match rest.split_once(':') {
        Some((s, r)) if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) => (s, r),
        _ => ("", rest),
    };
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let authority = rest.strip_prefix("//").map_or("", |a| a.split('/').next().unwrap_or_default());
    let (user, host) = authority.rsplit_once('@').map_or(("", authority), |(u, h)| (u, h));
    let mut errs = Vec::new();
    if force_https && !scheme.eq_ignore_ascii_case("https") {
        errs.push(FieldError::invalid(path, json!(scheme.to_ascii_lowercase()), format!("'https' is the only allowed URL scheme{FORM}")));
    }
    if host.is_empty() {
        errs.push(FieldError::invalid(path, json!(host), format!("host must be specified{FORM}")));
    }
    if authority.contains('@') {
        errs.push(FieldError::invalid(path, json!(user), "user information is not permitted in the URL"));
    }
    if url.contains('#') {
        errs.push(FieldError::invalid(path, json!(fragment), "fragments are not permitted in the URL"));
    }
    if !query.is_empty() {
        errs.push(FieldError::invalid(path, json!(query), "query parameters are not permitted in the URL"));
    }
    errs
}

/// `ValidateWebhookService` of a `service` reference at `path`.
pub fn service(path: &str, service: &Value) -> Vec<FieldError> {
    let text = |k: &str| service.get(k).and_then(Value::as_str).unwrap_or_default();
    let mut errs = Vec::new();
    if text("name").is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), "service name is required"));
    }
    if text("namespace").is_empty() {
        errs.push(FieldError::required(format!("{path}.namespace"), "service namespace is required"));
    }
    if let Some(port) = service.get("port").and_then(Value::as_i64)
        && !(1..=65535).contains(&port)
    {
        errs.push(FieldError::invalid(format!("{path}.port"), json!(port), "port is not valid: must be between 1 and 65535, inclusive"));
    }
    let Some(p) = service.get("path").and_then(Value::as_str) else { return errs };
    if p.is_empty() || p == "/" {
        return errs;
    }
    let at = format!("{path}.path");
    if p == "//" {
        errs.push(FieldError::invalid(&at, json!(p), "segment[0] may not be empty"));
        return errs;
    }
    let Some(segments) = p.strip_prefix('/') else {
        errs.push(FieldError::invalid(&at, json!(p), "must start with a '/'"));
        return errs;
    };
    for (i, segment) in segments.trim_end_matches('/').split('/').enumerate() {
        if segment.is_empty() {
            errs.push(FieldError::invalid(&at, json!(p), format!("segment[{i}] may not be empty")));
            continue;
        }
        for msg in dns1123_subdomain(segment) {
            errs.push(FieldError::invalid(&at, json!(p), format!("segment[{i}]: {msg}")));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn urls_are_checked_as_kube_checks_them() {
        assert!(url("u", "https://hooks.example:8443/convert", true).is_empty());
        assert_eq!(
            messages(url("u", "http://user@h/p?q=1#f", true)),
            [
                "u: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
                "u: Invalid value: \"user\": user information is not permitted in the URL",
                "u: Invalid value: \"f\": fragments are not permitted in the URL",
                "u: Invalid value: \"q=1\": query parameters are not permitted in the URL",
            ]
        );
        assert_eq!(messages(url("u", "https:///p", true)), ["u: Invalid value: \"\": host must be specified; desired format: https://host[/path]"]);
    }

    #[test]
    fn services_are_checked_as_kube_checks_them() {
        assert!(service("s", &json!({"name": "a", "namespace": "b", "path": "/convert/v1", "port": 443})).is_empty());
        assert_eq!(
            messages(service("s", &json!({"port": 0, "path": "convert"}))),
            [
                "s.name: Required value: service name is required",
                "s.namespace: Required value: service namespace is required",
                "s.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
                "s.path: Invalid value: \"convert\": must start with a '/'",
            ]
        );
        assert_eq!(
            messages(service("s", &json!({"name": "a", "namespace": "b", "path": "/a//b"}))),
            ["s.path: Invalid value: \"/a//b\": segment[1] may not be empty"]
        );
    }
}

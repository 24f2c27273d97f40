//! Request info (kube-apiserver's `RequestInfoFactory`): which verb, group, version, resource,
//! subresource, namespace and name a request is about, or that it is a non-resource request.

use super::query::Query;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestInfo {
    pub is_resource_request: bool,
    pub path: String,
    pub verb: String,
    pub api_prefix: String,
    pub api_group: String,
    pub api_version: String,
    pub namespace: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    /// The path segments from the resource on.
    pub parts: Vec<String>,
    /// A list's, watch's or deletecollection's field selector, for the authorizers (kube's
    /// `AuthorizeWithSelectors`): empty when it does not parse, or for the deprecated
    /// `/watch/` paths.
    pub field_selector: crate::selector::FieldSelector,
    /// Its label selector, likewise.
    pub label_selector: crate::selector::LabelSelector,
}

impl RequestInfo {
    /// What the request asks to do, as the authorizers see it.
    pub fn attributes(&self) -> crate::authz::Attributes {
        crate::authz::Attributes {
            verb: self.verb.clone(),
            group: self.api_group.clone(),
            version: self.api_version.clone(),
            resource: self.resource.clone(),
            subresource: self.subresource.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            path: self.path.clone(),
            resource_request: self.is_resource_request,
            field_selector: self.field_selector.clone(),
            label_selector: self.label_selector.clone(),
        }
    }
}

const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

fn verb_of(method: &str) -> &'static str {
    match method {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
}

/// Resolves a request the way kube does.
pub fn resolve(method: &str, path: &str, query: &Query) -> RequestInfo {
    let mut info = RequestInfo { path: path.to_string(), verb: method.to_ascii_lowercase(), ..Default::default() };
    let parts: Vec<&str> = path.trim_matches('/').split('/').filter(|p| !p.is_empty()).collect();
    if parts.len() < 3 || !(parts[0] == "api" || parts[0] == "apis") {
        return info;
    }
    info.api_prefix = parts[0].to_string();
    let mut rest = &parts[1..];
    if info.api_prefix == "apis" {
        if rest.len() < 3 {
            return info;
        }
        info.api_group = rest[0].to_string();
        rest = &rest[1..];
    }
    info.is_resource_request = true;
    info.api_version = rest[0].to_string();
    rest = &rest[1..];

    info.verb = verb_of(method).to_string();
    // The deprecated `/watch/` and `/proxy/` path forms.
    if let Some(first) = rest.first()
        && (*first == "watch" || *first == "proxy")
    {
        if rest.len() < 2 {
            return RequestInfo { is_resource_request: false, ..info };
        }
        info.verb = first.to_string();
        rest = &rest[1..];
    }
    if rest.first() == Some(&"namespaces") && rest.len() > 1 {
        info.namespace = rest[1].to_string();
        if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
            rest = &rest[2..];
        }
    }
    info.parts = rest.iter().map(|s| s.to_string()).collect();
    let special = info.verb == "proxy" || info.verb == "watch";
    if rest.len() >= 3 && !special {
        info.subresource = rest[2].to_string();
    }
    if rest.len() >= 2 {
        info.name = rest[1].to_string();
    }
    if !rest.is_empty() {
        info.resource = rest[0].to_string();
    }
    if info.name.is_empty() && info.verb == "get" {
        info.verb = if query.flag("watch") { "watch".into() } else { "list".into() };
        if let Some(name) = query
            .get("fieldSelector")
            .and_then(|fs| crate::selector::FieldSelector::parse(fs).ok())
            .and_then(|fs| fs.required_value("metadata.name").map(str::to_string))
            && crate::validation::path_segment_name(&name).is_empty()
        {
            info.name = name;
        }
    }
    if info.name.is_empty() && info.verb == "delete" {
        info.verb = "deletecollection".into();
    }
    if matches!(info.verb.as_str(), "list" | "watch" | "deletecollection") && !special {
        info.field_selector = query.get("fieldSelector").and_then(|fs| crate::selector::FieldSelector::parse(fs).ok()).unwrap_or_default();
        info.label_selector = query.get("labelSelector").and_then(|ls| crate::selector::LabelSelector::parse(ls).ok()).unwrap_or_default();
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(method: &str, path: &str, q: &str) -> RequestInfo {
        resolve(method, path, &Query::parse(q))
    }

    #[test]
    fn resolves_like_kube() {
        let i = r("GET", "/api/v1/namespaces/default/pods/p1/status", "");
        assert_eq!(
            (i.verb.as_str(), i.namespace.as_str(), i.resource.as_str(), i.name.as_str(), i.subresource.as_str()),
            ("get", "default", "pods", "p1", "status")
        );
        let i = r("GET", "/apis/apps/v1/deployments", "watch=true");
        assert_eq!((i.verb.as_str(), i.api_group.as_str(), i.resource.as_str()), ("watch", "apps", "deployments"));
        let i = r("GET", "/api/v1/namespaces/kube-system", "");
        assert_eq!((i.verb.as_str(), i.resource.as_str(), i.name.as_str(), i.namespace.as_str()), ("get", "namespaces", "kube-system", "kube-system"));
        let i = r("PUT", "/api/v1/namespaces/x/finalize", "");
        assert_eq!((i.resource.as_str(), i.name.as_str(), i.subresource.as_str()), ("namespaces", "x", "finalize"));
        let i = r("DELETE", "/api/v1/namespaces/d/configmaps", "");
        assert_eq!(i.verb, "deletecollection");
        let i = r("GET", "/api/v1/namespaces/d/pods", "fieldSelector=metadata.name%3Dp");
        assert_eq!((i.verb.as_str(), i.name.as_str()), ("list", "p"));
        assert!(!r("GET", "/apis/apps/v1", "").is_resource_request);
        assert!(!r("GET", "/healthz", "").is_resource_request);
        let i = r("GET", "/api/v1/watch/namespaces/d/pods", "");
        assert_eq!((i.verb.as_str(), i.resource.as_str(), i.namespace.as_str()), ("watch", "pods", "d"));
    }
}

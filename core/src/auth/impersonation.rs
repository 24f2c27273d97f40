//! Impersonation (kube's `WithImpersonation` filter, after authentication and before
//! authorization): a request with `Impersonate-User` (and `Impersonate-Group`,
//! `Impersonate-Uid`, `Impersonate-Extra-<key>`) acts as the user they name, if the requester
//! may `impersonate` each of them: `users` (or `serviceaccounts`, for a service account's user
//! name), `groups`, `uids` and `userextras/<key>` (the last two of `authentication.k8s.io`).

use std::collections::BTreeMap;

use super::requestheader::path_unescape;
use super::{ANONYMOUS_USER, AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP, UserInfo, starts_with_ignore_case};
use crate::authz::{Attributes, Decision, forbidden};
use crate::status::ApiError;
use crate::validation::{dns1123_label, dns1123_subdomain};

const USER: &str = "Impersonate-User";
const GROUP: &str = "Impersonate-Group";
const UID: &str = "Impersonate-Uid";
const EXTRA_PREFIX: &str = "Impersonate-Extra-";

/// One thing a request asks to act as (kube's `ObjectReference`s of impersonation).
#[derive(Debug)]
enum Asked {
    User(String),
    ServiceAccount { namespace: String, name: String },
    Group(String),
    Extra { key: String, value: String },
    Uid(String),
}

impl Asked {
    /// What the requester must be allowed to do to ask it.
    fn attributes(&self) -> Attributes {
        let (group, resource, subresource, namespace, name) = match self {
            Asked::User(name) => ("", "users", "", "", name.as_str()),
            Asked::ServiceAccount { namespace, name } => ("", "serviceaccounts", "", namespace.as_str(), name.as_str()),
            Asked::Group(name) => ("", "groups", "", "", name.as_str()),
            Asked::Extra { key, value } => ("authentication.k8s.io", "userextras", key.as_str(), "", value.as_str()),
            Asked::Uid(uid) => ("authentication.k8s.io", "uids", "", "", uid.as_str()),
        };
        Attributes::resource("impersonate", group, resource, subresource, namespace, name)
    }

    /// Go's `%v` of the `ObjectReference` kube makes of it (its refusal prints them): kind,
    /// namespace, name, uid, apiVersion, resourceVersion, fieldPath.
    fn go(&self) -> String {
        const AUTHENTICATION: &str = "authentication.k8s.io/v1";
        let (kind, namespace, name, api_version, field_path) = match self {
            Asked::User(n) => ("User", "", n.as_str(), "", ""),
            Asked::ServiceAccount { namespace, name } => ("ServiceAccount", namespace.as_str(), name.as_str(), "", ""),
            Asked::Group(n) => ("Group", "", n.as_str(), "", ""),
            Asked::Extra { key, value } => ("UserExtra", "", value.as_str(), AUTHENTICATION, key.as_str()),
            Asked::Uid(u) => ("UID", "", u.as_str(), AUTHENTICATION, ""),
        };
        format!("{{{kind} {namespace} {name}  {api_version}  {field_path}}}")
    }
}

/// Whether `name` is one of the impersonation headers.
pub fn is_impersonation_header(name: &str) -> bool {
    [USER, GROUP, UID].iter().any(|h| h.eq_ignore_ascii_case(name)) || starts_with_ignore_case(name, EXTRA_PREFIX)
}

/// Why a request may not act as whom it asks to.
#[derive(Debug, PartialEq)]
pub enum Refused {
    /// kube's 403: the requester may not impersonate one of them.
    Forbidden(ApiError),
    /// Groups, extras or a uid without a user: kube answers a plain-text 500 with this.
    WithoutUser(String),
}

/// The user `requester` acts as, given the request's `headers` (`None` when it asks for no
/// one), or why it may not; `authorize` is the authorizer chain.
pub fn impersonate(
    headers: &[(String, String)],
    requester: &UserInfo,
    authorize: impl Fn(&UserInfo, &Attributes) -> Decision,
) -> Result<Option<UserInfo>, Refused> {
    let values = |header: &'static str| headers.iter().filter(move |(k, _)| k.eq_ignore_ascii_case(header)).map(|(_, v)| v.clone());
    let mut asked = Vec::new();
    let user = values(USER).next().filter(|u| !u.is_empty());
    if let Some(user) = &user {
        asked.push(match service_account(user) {
            Some((namespace, name)) => Asked::ServiceAccount { namespace, name },
            None => Asked::User(user.clone()),
        });
    }
    let groups_asked: Vec<String> = values(GROUP).collect();
    asked.extend(groups_asked.iter().cloned().map(Asked::Group));
    let mut extras: Vec<(String, String)> = headers
        .iter()
        .filter(|(k, _)| starts_with_ignore_case(k, EXTRA_PREFIX))
        .map(|(k, v)| {
            let key = k[EXTRA_PREFIX.len()..].to_ascii_lowercase();
            (path_unescape(&key).unwrap_or(key), v.clone())
        })
        .collect();
    extras.sort_by(|a, b| a.0.cmp(&b.0));
    asked.extend(extras.iter().cloned().map(|(key, value)| Asked::Extra { key, value }));
    let uid = values(UID).next().filter(|u| !u.is_empty());
    asked.extend(uid.iter().cloned().map(Asked::Uid));
    if asked.is_empty() {
        return Ok(None);
    }
    if user.is_none() {
        let listed: Vec<String> = asked.iter().map(Asked::go).collect();
        return Err(Refused::WithoutUser(format!("requested [{}] without impersonating a user", listed.join(" "))));
    }
    let (mut name, mut groups, mut extra) = (String::new(), Vec::new(), BTreeMap::<String, Vec<String>>::new());
    for a in &asked {
        match a {
            Asked::User(n) => name = n.clone(),
            Asked::ServiceAccount { namespace, name: sa } => {
                name = format!("system:serviceaccount:{namespace}:{sa}");
                if groups_asked.is_empty() {
                    groups = vec!["system:serviceaccounts".to_string(), format!("system:serviceaccounts:{namespace}")];
                }
            }
            Asked::Group(g) => groups.push(g.clone()),
            Asked::Extra { key, value } => extra.entry(key.clone()).or_default().push(value.clone()),
            Asked::Uid(_) => {}
        }
        let attrs = a.attributes();
        let decision = authorize(requester, &attrs);
        if !decision.allowed {
            return Err(Refused::Forbidden(forbidden(requester, &attrs, &decision.reason)));
        }
    }
    // An impersonated user is authenticated unless it says otherwise; anonymous is not.
    let (own, others) = if name == ANONYMOUS_USER {
        (UNAUTHENTICATED_GROUP, &[UNAUTHENTICATED_GROUP][..])
    } else {
        (AUTHENTICATED_GROUP, &[AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP][..])
    };
    if !groups.iter().any(|g| others.contains(&g.as_str())) {
        groups.push(own.to_string());
    }
    Ok(Some(UserInfo { name, uid: uid.unwrap_or_default(), groups, extra }))
}

/// The namespace and name of a service account's user name (`system:serviceaccount:<ns>:<name>`).
fn service_account(user: &str) -> Option<(String, String)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let parts: Vec<&str> = rest.split(':').collect();
    let [namespace, name] = parts.as_slice() else { return None };
    (dns1123_label(namespace).is_empty() && dns1123_subdomain(name).is_empty()).then(|| (namespace.to_string(), name.to_string()))
}

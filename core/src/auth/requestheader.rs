//! The request-header authenticator (`--requestheader-*`): a front proxy (kube's aggregator,
//! or another kapi in front of this one) that presents a client certificate signed by the
//! request-header CA names the user in request headers, as kube-apiserver's
//! `headerrequest` authenticator reads them.

use std::collections::BTreeMap;

use super::UserInfo;

/// `--requestheader-allowed-names`, `-username-headers`, `-uid-headers`, `-group-headers` and
/// `-extra-headers-prefix`. The CA itself is the shell's (it verifies the certificate).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestHeader {
    /// Common names a proxy's certificate may have; empty: any the CA signed.
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub uid_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_prefixes: Vec<String>,
}

/// The header names kube's aggregator sends (`X-Remote-User` ...), which kubeadm configures.
pub const STANDARD_USERNAME: &str = "X-Remote-User";
pub const STANDARD_UID: &str = "X-Remote-Uid";
pub const STANDARD_GROUP: &str = "X-Remote-Group";
pub const STANDARD_EXTRA_PREFIX: &str = "X-Remote-Extra-";
/// The common name of the client certificate kubeadm gives the aggregator, the one name
/// kubeadm's `--requestheader-allowed-names` allows.
pub const FRONT_PROXY_CLIENT_NAME: &str = "front-proxy-client";

/// Whether `name` is one of the headers kube's aggregator names a user in (`X-Remote-User`,
/// `-Uid`, `-Group`, `X-Remote-Extra-*`).
pub fn is_remote_header(name: &str) -> bool {
    [STANDARD_USERNAME, STANDARD_UID, STANDARD_GROUP].iter().any(|h| h.eq_ignore_ascii_case(name)) || starts_with_ignore_case(name, STANDARD_EXTRA_PREFIX)
}

/// What the authenticator makes of a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The proxy names this user.
    User(UserInfo),
    /// Not a proxy's request (no certificate from the CA, or no username header): the next
    /// authenticator decides.
    NotApplicable,
    /// A certificate from the CA whose common name is not allowed (kube's error).
    Refused(String),
}

/// Whether header `name` begins with `prefix`, in any case.
pub fn starts_with_ignore_case(name: &str, prefix: &str) -> bool {
    name.len() >= prefix.len() && name.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

impl RequestHeader {
    /// Authenticates a request whose client certificate the request-header CA verified and
    /// has common name `cn`, from its `headers`.
    pub fn authenticate(&self, cn: &str, headers: &[(String, String)]) -> Outcome {
        if !self.allowed_names.is_empty() && !self.allowed_names.iter().any(|n| n == cn) {
            return Outcome::Refused(format!("x509: subject with cn={cn} is not in the allowed list"));
        }
        let first = |names: &[String]| {
            names.iter().find_map(|n| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(n)).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty()))
        };
        let Some(name) = first(&self.username_headers) else { return Outcome::NotApplicable };
        let uid = first(&self.uid_headers).unwrap_or_default().to_string();
        let groups = self
            .group_headers
            .iter()
            .flat_map(|n| headers.iter().filter(move |(k, _)| k.eq_ignore_ascii_case(n)))
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
            .collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for prefix in &self.extra_prefixes {
            for (k, v) in headers.iter().filter(|(k, _)| starts_with_ignore_case(k, prefix)) {
                let key = k[prefix.len()..].to_ascii_lowercase();
                extra.entry(path_unescape(&key).unwrap_or(key)).or_default().push(v.clone());
            }
        }
        Outcome::User(UserInfo { name: name.to_string(), uid, groups, extra })
    }

    /// Whether `name` is a header this authenticator reads (removed from a request once it is
    /// authenticated).
    pub fn reads(&self, name: &str) -> bool {
        [&self.username_headers, &self.uid_headers, &self.group_headers].iter().any(|hs| hs.iter().any(|h| h.eq_ignore_ascii_case(name)))
            || self.extra_prefixes.iter().any(|p| starts_with_ignore_case(name, p))
    }
}

/// Go's `url.PathUnescape`: `%XX` decoded; `None` for a malformed escape or bytes that are
/// not UTF-8.
pub(super) fn path_unescape(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = |c: u8| (c as char).to_digit(16);
            let hi = b.get(i + 1).copied().and_then(hex)?;
            let lo = b.get(i + 2).copied().and_then(hex)?;
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// An extra key as a header name's tail (kube's `headerKeyEscape`): every byte that is not an
/// HTTP token character, and `%`, as `%XX`.
pub fn escape_extra_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        let token = b.is_ascii_alphanumeric() || b"!#$&'*+-.^_`|~".contains(&b);
        if token {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standard() -> RequestHeader {
        RequestHeader {
            allowed_names: vec!["front-proxy-client".into()],
            username_headers: vec![STANDARD_USERNAME.into()],
            uid_headers: vec![STANDARD_UID.into()],
            group_headers: vec![STANDARD_GROUP.into()],
            extra_prefixes: vec![STANDARD_EXTRA_PREFIX.into()],
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_proxy_names_the_user_in_headers() {
        let h = headers(&[
            ("x-remote-user", "alice"),
            ("X-Remote-Uid", "42"),
            ("X-Remote-Group", "dev,ops"),
            ("x-remote-group", ""),
            ("X-Remote-Group", "system:authenticated"),
            ("X-Remote-Extra-Scopes", "a"),
            ("X-Remote-Extra-Scopes", ""),
            ("X-Remote-Extra-Acme.com%2fTeam", "blue"),
        ]);
        let Outcome::User(u) = standard().authenticate("front-proxy-client", &h) else { panic!() };
        assert_eq!((u.name.as_str(), u.uid.as_str()), ("alice", "42"));
        assert_eq!(u.groups, ["dev,ops", "system:authenticated"]);
        assert_eq!(u.extra["scopes"], ["a", ""]);
        assert_eq!(u.extra["acme.com/team"], ["blue"]);
        assert!(standard().reads("x-remote-extra-anything") && standard().reads("X-REMOTE-USER") && !standard().reads("Authorization"));
    }

    #[test]
    fn only_allowed_names_and_a_username_header_count() {
        let h = headers(&[("X-Remote-User", "alice")]);
        assert_eq!(standard().authenticate("mallory", &h), Outcome::Refused("x509: subject with cn=mallory is not in the allowed list".into()));
        let any = RequestHeader { allowed_names: vec![], ..standard() };
        assert!(matches!(any.authenticate("mallory", &h), Outcome::User(_)));
        assert_eq!(standard().authenticate("front-proxy-client", &headers(&[("X-Remote-User", "")])), Outcome::NotApplicable);
        assert_eq!(RequestHeader::default().authenticate("x", &h), Outcome::NotApplicable);
    }

    #[test]
    fn extra_keys_are_escaped_as_kube_escapes_them() {
        assert_eq!(escape_extra_key("authentication.kubernetes.io/credential-id"), "authentication.kubernetes.io%2Fcredential-id");
        assert_eq!(escape_extra_key("50%"), "50%25");
        assert_eq!(path_unescape("a%2fb").as_deref(), Some("a/b"));
        assert_eq!(path_unescape("a%zz"), None);
    }
}

//! Authentication (a front proxy's request headers, client certificates, bearer tokens from
//! `--token-auth-file`) and impersonation (`impersonation.rs`); what an authenticated user may
//! do is `authz`'s.
//!
//! The shell verifies TLS client certificates against `--client-ca-file` and
//! `--requestheader-client-ca-file` and says which verified it; the core maps a certificate
//! to a user (CN = name, O = groups), as kube's x509 authenticator does, or lets a proxy's
//! certificate vouch for the user its headers name (`requestheader.rs`).

mod bootstrap_token;
pub mod claims;
pub mod config;
mod impersonation;
pub mod oidc;
pub mod oidc_keys;
mod requestheader;
mod serviceaccount;
mod token_cache;
pub mod webhook;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::status::ApiError;

pub use bootstrap_token::{BOOTSTRAPPERS_GROUP, BootstrapToken};
pub use impersonation::{Refused, impersonate, is_impersonation_header};
pub use requestheader::{
    FRONT_PROXY_CLIENT_NAME, RequestHeader, STANDARD_EXTRA_PREFIX, STANDARD_GROUP, STANDARD_UID, STANDARD_USERNAME, escape_extra_key, is_remote_header,
    starts_with_ignore_case,
};
pub use serviceaccount::{AUTO_GENERATED_WARNING, Claimed, Confirmed, INVALID_SINCE_LABEL, LAST_USED_LABEL, LEGACY_ISSUER, check_token};
pub use token_cache::TokenCache;

/// `user.Info`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

pub const AUTHENTICATED_GROUP: &str = "system:authenticated";

impl UserInfo {
    /// The user with `system:authenticated` among its groups (kube's authenticated-group adder:
    /// not for `system:anonymous`, nor a user in `system:unauthenticated`).
    pub fn authenticated(mut self) -> UserInfo {
        let unauthenticated = self.name == ANONYMOUS_USER || self.groups.iter().any(|g| g == UNAUTHENTICATED_GROUP);
        if !unauthenticated && !self.groups.iter().any(|g| g == AUTHENTICATED_GROUP) {
            self.groups.push(AUTHENTICATED_GROUP.to_string());
        }
        self
    }
}

/// Static tokens (`--token-auth-file`: `token,user,uid,"group1,group2"` per line).
#[derive(Clone, Debug, Default)]
pub struct TokenFile {
    tokens: HashMap<String, UserInfo>,
}

impl TokenFile {
    pub fn parse(text: &str) -> Result<TokenFile, String> {
        let mut tokens = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields = csv_fields(line);
            if fields.len() < 3 {
                return Err(format!("token file line {}: expected at least 3 columns (token,user,uid), got {}", i + 1, fields.len()));
            }
            let groups = fields.get(3).map(|g| g.split(',').map(str::trim).filter(|g| !g.is_empty()).map(str::to_string).collect()).unwrap_or_default();
            let user = UserInfo { name: fields[1].clone(), uid: fields[2].clone(), groups, extra: BTreeMap::new() };
            if fields[0].is_empty() {
                return Err(format!("token file line {}: empty token", i + 1));
            }
            tokens.insert(fields[0].clone(), user);
        }
        Ok(TokenFile { tokens })
    }
}

/// Splits one CSV line, honouring double quotes.
fn csv_fields(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().expect("never empty").push('"');
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(String::new()),
            c => out.last_mut().expect("never empty").push(c),
        }
    }
    out
}

/// The subject a certificate (DER) names: its common name (empty if it has none; the last of
/// several, as Go's pkix keeps) and organizations.
fn subject_of(der: &[u8]) -> Option<(String, Vec<String>)> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject.iter_common_name().last().and_then(|cn| cn.as_str().ok()).unwrap_or_default().to_string();
    let groups = subject.iter_organization().filter_map(|o| o.as_str().ok()).map(str::to_string).collect();
    Some((name, groups))
}

/// The configured authenticators, tried as kube's union authenticator tries them.
#[derive(Clone, Debug, Default)]
pub struct Authenticator {
    /// `--requestheader-*`, when a request-header CA is configured.
    pub request_header: Option<RequestHeader>,
    pub tokens: Option<TokenFile>,
    /// The server's own token (kube's loopback client), for the built-in controllers: it
    /// stands for `system:apiserver` in `system:masters`. The shell makes a fresh random one
    /// at every start and never writes it down.
    pub loopback: Option<String>,
    /// Which requests that present no credential are `system:anonymous`.
    pub anonymous: Anonymous,
    /// How service account tokens are issued and checked (`None`: they are not).
    pub service_accounts: Option<Arc<crate::serviceaccount::TokenConfig>>,
    /// `--enable-bootstrap-token-auth`: bootstrap tokens are credentials.
    pub bootstrap_tokens: bool,
    /// JWTs of OpenID Connect issuers (`--authentication-config`'s `jwt`, or the `--oidc-*` flags').
    pub jwt: Arc<oidc::JwtAuthenticators>,
    /// `--authentication-token-webhook-config-file`: the webhook asked about bearer tokens no
    /// other authenticator recognizes.
    pub webhook: Option<Arc<webhook::TokenWebhook>>,
}

/// Which requests that present no credential are anonymous (`--anonymous-auth`, or the
/// `anonymous` of `--authentication-config`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Anonymous {
    #[default]
    Off,
    /// Every such request.
    Everywhere,
    /// Those for exactly these paths (`anonymous.conditions`).
    Paths(Vec<String>),
}

impl Anonymous {
    fn allows(&self, path: &str) -> bool {
        match self {
            Anonymous::Off => false,
            Anonymous::Everywhere => true,
            Anonymous::Paths(paths) => paths.iter().any(|p| p == path),
        }
    }
}

/// A bearer token that may be a credential once the objects it names are looked up: a
/// service account token whose signature checks, or a token of the bootstrap form.
#[derive(Clone, Debug, PartialEq)]
pub enum Pending {
    ServiceAccount(Claimed),
    /// With the audiences it is good for (the API server's, among those asked).
    Bootstrap {
        token: BootstrapToken,
        audiences: Vec<String>,
    },
}

impl Pending {
    /// The objects to look up.
    pub fn lookups(&self) -> Vec<crate::admission::Lookup> {
        match self {
            Pending::ServiceAccount(claimed) => claimed.lookups(),
            Pending::Bootstrap { token, .. } => token.lookups(),
        }
    }

    /// The user the token stands for, given what [`Self::lookups`] found (in order), or why
    /// not, in kube's words (a bootstrap token's Secret that does not vouch for it: the
    /// bearer token authenticator's `invalid bearer token`).
    pub fn confirm(&self, found: &[(crate::admission::Lookup, Option<std::sync::Arc<serde_json::Value>>)], now: jiff::Timestamp) -> Result<Confirmed, String> {
        match self {
            Pending::ServiceAccount(claimed) => claimed.confirm(found, now),
            Pending::Bootstrap { token, .. } => {
                let user = token.confirm(found, now).ok_or_else(|| "invalid bearer token".to_string())?;
                Ok(Confirmed { user, warning: None })
            }
        }
    }

    /// Why the token does not stand for anyone when `lookup` could not be read (`error`), in
    /// its validator's words: an account's read error as it is; a bound or legacy token's
    /// other objects as invalidating it; a bootstrap token's Secret's as it is.
    pub fn unreadable(&self, lookup: &crate::admission::Lookup, error: &str) -> String {
        match self {
            Pending::ServiceAccount(claimed) => claimed.unreadable(lookup, error),
            Pending::Bootstrap { .. } => error.to_string(),
        }
    }

    /// The write that dates a legacy token's Secret as used today, if it is due (see
    /// [`Claimed::last_used`]): the Secret's path and a merge patch.
    pub fn last_used(
        &self,
        found: &[(crate::admission::Lookup, Option<std::sync::Arc<serde_json::Value>>)],
        now: jiff::Timestamp,
    ) -> Option<(String, serde_json::Value)> {
        match self {
            Pending::ServiceAccount(claimed) => claimed.last_used(found, now),
            Pending::Bootstrap { .. } => None,
        }
    }

    /// The audiences the token is good for, of those asked.
    pub fn audiences(&self) -> &[String] {
        match self {
            Pending::ServiceAccount(claimed) => &claimed.audiences,
            Pending::Bootstrap { audiences, .. } => audiences,
        }
    }
}

/// The user of a request that presents no credential, and its group.
pub const ANONYMOUS_USER: &str = "system:anonymous";
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";

/// The user the loopback token stands for.
pub fn apiserver_user() -> UserInfo {
    UserInfo { name: "system:apiserver".into(), groups: vec!["system:masters".into()], ..Default::default() }
}

/// Which of the server's CAs verified the certificate a client presented (the shell checks
/// the chain; what it means is the core's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerifiedBy {
    /// `--client-ca-file`: the certificate names the user.
    pub client_ca: bool,
    /// `--requestheader-client-ca-file`: the certificate is a front proxy's.
    pub request_header_ca: bool,
}

/// What the connection proved about the client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Peer {
    /// The user named by the leaf certificate the client presented (verified against the
    /// client CA by the shell), read once per connection rather than once per request.
    certificate_user: Option<Arc<UserInfo>>,
    /// The common name of a certificate the request-header CA verified.
    proxy_name: Option<Arc<str>>,
    pub remote_addr: String,
}

impl Peer {
    /// A connection from `remote_addr` that presented `client_certificate` (DER), if any,
    /// which the CAs in `verified` verified.
    pub fn new(client_certificate: Option<&[u8]>, verified: VerifiedBy, remote_addr: String) -> Peer {
        let subject = client_certificate.and_then(subject_of);
        Peer {
            proxy_name: subject.as_ref().filter(|_| verified.request_header_ca).map(|(cn, _)| Arc::from(cn.as_str())),
            // A certificate without a common name names nobody (kube's x509 authenticator).
            certificate_user: subject
                .filter(|(cn, _)| verified.client_ca && !cn.is_empty())
                .map(|(name, groups)| Arc::new(UserInfo { name, groups, ..Default::default() }.authenticated())),
            remote_addr,
        }
    }
}

impl Authenticator {
    /// Authenticates a request from its headers and its peer, trying kube's authenticators in
    /// its order (the loopback token, a front proxy's headers, the client certificate, bearer
    /// tokens); a request (for `path`) that presents none of them is anonymous where that is
    /// allowed. 401 when a credential is not recognized (never anonymous: a bad token, a front
    /// proxy's certificate without its headers), or when nothing vouches for the request.
    pub fn authenticate(&self, headers: &[(String, String)], peer: &Peer, path: &str) -> Result<UserInfo, ApiError> {
        let header = |name: &str| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str());
        let token = header("Authorization").and_then(bearer_token);
        if token.is_some() && self.loopback.as_deref() == token {
            return Ok(apiserver_user().authenticated());
        }
        if let (Some(rh), Some(cn)) = (&self.request_header, &peer.proxy_name)
            && let requestheader::Outcome::User(user) = rh.authenticate(cn, headers)
        {
            return Ok(user.authenticated());
        }
        if let Some(user) = &peer.certificate_user {
            return Ok(UserInfo::clone(user));
        }
        match token.and_then(|t| self.tokens.as_ref()?.tokens.get(t)) {
            Some(user) => Ok(user.clone().authenticated()),
            None if self.anonymous.allows(path) && token.is_none() && peer.proxy_name.is_none() => {
                Ok(UserInfo { name: ANONYMOUS_USER.into(), groups: vec![UNAUTHENTICATED_GROUP.into()], ..Default::default() })
            }
            None => Err(ApiError::unauthorized()),
        }
    }

    /// `--api-audiences` (none where the server issues no service account tokens).
    pub fn api_audiences(&self) -> &[String] {
        self.service_accounts.as_deref().map(|c| c.audiences.as_slice()).unwrap_or_default()
    }

    /// Whether `--token-auth-file` (or the loopback token) names `token`.
    pub fn is_static_token(&self, token: &str) -> bool {
        self.loopback.as_deref() == Some(token) || self.tokens.as_ref().is_some_and(|t| t.tokens.contains_key(token))
    }

    /// What the request's bearer token may be once what it names is looked up (`None`: it
    /// is no credential kapi knows); see [`Pending`].
    pub fn pending_token(&self, headers: &[(String, String)], now: jiff::Timestamp) -> Option<Result<Pending, String>> {
        self.review_token(request_bearer_token(headers)?, None, now)
    }

    /// What `token` may be, for a TokenReview meant for `audiences` (`--api-audiences` when
    /// `None`): a service account token of this server's, or a bootstrap token where they are
    /// credentials, good (as kube's audience-agnostic authenticators are) for the API
    /// server's audiences among those asked.
    pub fn review_token(&self, token: &str, audiences: Option<&[String]>, now: jiff::Timestamp) -> Option<Result<Pending, String>> {
        if let Some(claimed) = self.service_accounts.as_deref().and_then(|c| check_token(c, token, audiences, now)) {
            return Some(claimed.map(Pending::ServiceAccount));
        }
        let token = BootstrapToken::parse(token).filter(|_| self.bootstrap_tokens)?;
        let audiences = self.agnostic_audiences(audiences)?;
        Some(Ok(Pending::Bootstrap { token, audiences }))
    }

    /// What an audience-agnostic authenticator's token (a bootstrap token's, an OIDC issuer's)
    /// is good for, of `asked` (`--api-audiences` when `None`): the API server's audiences
    /// among them, as kube's `WrapAudienceAgnosticToken` has it; `None` when that leaves none.
    fn agnostic_audiences(&self, asked: Option<&[String]>) -> Option<Vec<String>> {
        let api = self.api_audiences();
        let audiences: Vec<String> = match asked {
            Some(asked) if !api.is_empty() => api.iter().filter(|a| asked.contains(a)).cloned().collect(),
            _ => api.to_vec(),
        };
        (!audiences.is_empty() || api.is_empty()).then_some(audiences)
    }

    /// The user an OIDC token stands for and the audiences it is good for (of `asked`, as
    /// [`Self::agnostic_audiences`]); `None` when it is not the OIDC issuer's token.
    pub fn oidc_user(&self, token: &str, asked: Option<&[String]>, now: jiff::Timestamp) -> Option<Result<(UserInfo, Vec<String>), String>> {
        let audiences = self.agnostic_audiences(asked)?;
        let found = self.jwt.authenticate(token, now)?;
        Some(found.map(|user| (user, audiences)))
    }

    /// Whether `name` is a credential header, which kube removes from a request once it is
    /// authenticated (`Authorization`, a front proxy's `X-Remote-*` and the configured ones).
    pub fn is_credential_header(&self, name: &str) -> bool {
        name.eq_ignore_ascii_case("Authorization") || is_remote_header(name) || self.request_header.as_ref().is_some_and(|rh| rh.reads(name))
    }
}

/// The bearer token of a request's `Authorization` header.
pub fn request_bearer_token(headers: &[(String, String)]) -> Option<&str> {
    bearer_token(headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("Authorization"))?.1.as_str())
}

/// The token of an `Authorization: Bearer <token>` header.
fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_and_bearer_tokens() {
        let tf = TokenFile::parse("# comment\nsecret,alice,1001,\"dev,ops\"\nother,bob,1002\n").unwrap();
        let a = Authenticator { tokens: Some(tf), loopback: Some("lo0p".into()), ..Default::default() };
        let bearer = |t: &str| vec![("authorization".to_string(), t.to_string())];
        let u = a.authenticate(&bearer("Bearer secret"), &Peer::default(), "/api").unwrap();
        assert_eq!(u.name, "alice");
        assert_eq!(u.groups, vec!["dev", "ops", "system:authenticated"]);
        assert_eq!(a.authenticate(&bearer("Bearer nope"), &Peer::default(), "/api").unwrap_err().code, 401);
        assert_eq!(a.authenticate(&[], &Peer::default(), "/api").unwrap_err().code, 401);
        assert!(TokenFile::parse("onlytoken\n").is_err());
        let lo = a.authenticate(&bearer("Bearer lo0p"), &Peer::default(), "/api").unwrap();
        assert_eq!((lo.name.as_str(), lo.groups.as_slice()), ("system:apiserver", &["system:masters".to_string(), "system:authenticated".to_string()][..]));
        assert_eq!(a.authenticate(&bearer("Bearer "), &Peer::default(), "/api").unwrap_err().code, 401);
        let no_loopback = Authenticator { loopback: None, ..a.clone() };
        assert_eq!(no_loopback.authenticate(&bearer("Bearer lo0p"), &Peer::default(), "/api").unwrap_err().code, 401);

        // Anonymous: only a request that presents no credential (a bearer token that is not
        // known stays 401; a header of another scheme is no credential).
        let anonymous = Authenticator { anonymous: Anonymous::Everywhere, ..a };
        let u = anonymous.authenticate(&[], &Peer::default(), "/api").unwrap();
        assert_eq!((u.name.as_str(), u.groups.as_slice()), (ANONYMOUS_USER, &[UNAUTHENTICATED_GROUP.to_string()][..]));
        assert_eq!(anonymous.authenticate(&bearer("Basic YTpi"), &Peer::default(), "/api").unwrap().name, ANONYMOUS_USER);
        assert_eq!(anonymous.authenticate(&bearer("Bearer nope"), &Peer::default(), "/api").unwrap_err().code, 401);
        assert_eq!(anonymous.authenticate(&bearer("Bearer secret"), &Peer::default(), "/api").unwrap().name, "alice");
        // Only for the paths it names, exactly, when it names any.
        let on_paths = Authenticator { anonymous: Anonymous::Paths(vec!["/livez".into()]), ..anonymous };
        assert_eq!(on_paths.authenticate(&[], &Peer::default(), "/livez").unwrap().name, ANONYMOUS_USER);
        assert_eq!(on_paths.authenticate(&[], &Peer::default(), "/livez/ping").unwrap_err().code, 401);
        assert_eq!(on_paths.authenticate(&[], &Peer::default(), "/api").unwrap_err().code, 401);
    }

    #[test]
    fn authenticated_users_join_system_authenticated_but_the_anonymous_do_not() {
        let user = |name: &str, groups: &[&str]| UserInfo { name: name.into(), groups: groups.iter().map(|g| g.to_string()).collect(), ..Default::default() };
        assert_eq!(user("jane", &["dev"]).authenticated().groups, vec!["dev", AUTHENTICATED_GROUP]);
        assert_eq!(user("jane", &[AUTHENTICATED_GROUP]).authenticated().groups, vec![AUTHENTICATED_GROUP]);
        assert!(user(ANONYMOUS_USER, &[]).authenticated().groups.is_empty());
        assert_eq!(user("x", &[UNAUTHENTICATED_GROUP]).authenticated().groups, vec![UNAUTHENTICATED_GROUP]);
    }

    #[test]
    fn a_front_proxy_vouches_only_with_a_certificate_from_the_request_header_ca() {
        let a = Authenticator {
            request_header: Some(RequestHeader {
                username_headers: vec!["X-Remote-User".into()],
                group_headers: vec!["X-Remote-Group".into()],
                ..Default::default()
            }),
            ..Default::default()
        };
        let cert = rcgen::generate_simple_self_signed(vec![]).unwrap().cert;
        let proxy = Peer::new(Some(cert.der()), VerifiedBy { client_ca: false, request_header_ca: true }, String::new());
        let headers = vec![("X-Remote-User".to_string(), "alice".to_string()), ("X-Remote-Group".to_string(), "dev".to_string())];
        let u = a.authenticate(&headers, &proxy, "/api").unwrap();
        assert_eq!((u.name.as_str(), u.groups.as_slice()), ("alice", &["dev".to_string(), AUTHENTICATED_GROUP.to_string()][..]));
        // The same certificate from the client CA names its own subject; the headers are nobody's.
        let client = Peer::new(Some(cert.der()), VerifiedBy { client_ca: true, request_header_ca: false }, String::new());
        assert_eq!(a.authenticate(&headers, &client, "/api").unwrap().name, "rcgen self signed cert");
        // A proxy certificate without the headers is no user, not even an anonymous one.
        assert_eq!(a.authenticate(&[], &proxy, "/api").unwrap_err().code, 401);
        assert_eq!(Authenticator { anonymous: Anonymous::Everywhere, ..a.clone() }.authenticate(&[], &proxy, "/api").unwrap_err().code, 401);
        assert!(a.is_credential_header("authorization") && a.is_credential_header("x-remote-extra-x") && !a.is_credential_header("Accept"));
    }
}

//! Authentication (client certificates, bearer tokens from `--token-auth-file`) and
//! authorization (`AlwaysAllow`).
//!
//! The shell verifies TLS client certificates against `--client-ca-file`; the core maps a
//! verified certificate to a user (CN = name, O = groups), as kube's x509 authenticator does.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::status::ApiError;

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
    fn authenticated(mut self) -> UserInfo {
        if !self.groups.iter().any(|g| g == AUTHENTICATED_GROUP) {
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

/// The user a verified client certificate (DER) stands for.
fn user_from_certificate(der: &[u8]) -> Option<UserInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject.iter_common_name().next()?.as_str().ok()?.to_string();
    let groups = subject.iter_organization().filter_map(|o| o.as_str().ok()).map(str::to_string).collect();
    Some(UserInfo { name, groups, ..Default::default() })
}

/// The configured authenticators, tried as kube's union authenticator tries them.
#[derive(Clone, Debug, Default)]
pub struct Authenticator {
    pub tokens: Option<TokenFile>,
    /// The server's own token (kube's loopback client), for the built-in controllers: it
    /// stands for `system:apiserver` in `system:masters`. The shell makes a fresh random one
    /// at every start and never writes it down.
    pub loopback: Option<String>,
}

/// The user the loopback token stands for.
pub fn apiserver_user() -> UserInfo {
    UserInfo { name: "system:apiserver".into(), groups: vec!["system:masters".into()], ..Default::default() }
}

/// What the connection proved about the client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Peer {
    /// The user named by the leaf certificate the client presented (verified against the
    /// client CA by the shell), read once per connection rather than once per request.
    certificate_user: Option<Arc<UserInfo>>,
    pub remote_addr: String,
}

impl Peer {
    /// A connection from `remote_addr` that presented `client_certificate` (DER), if any.
    pub fn new(client_certificate: Option<&[u8]>, remote_addr: String) -> Peer {
        Peer { certificate_user: client_certificate.and_then(user_from_certificate).map(|u| Arc::new(u.authenticated())), remote_addr }
    }
}

impl Authenticator {
    /// Authenticates a request from its `Authorization` header and its peer; 401 when nothing
    /// vouches for it (anonymous requests are not allowed).
    pub fn authenticate(&self, authorization: Option<&str>, peer: &Peer) -> Result<UserInfo, ApiError> {
        if let Some(user) = &peer.certificate_user {
            return Ok(UserInfo::clone(user));
        }
        let Some(token) = authorization.and_then(bearer_token) else { return Err(ApiError::unauthorized()) };
        if self.loopback.as_deref() == Some(token) {
            return Ok(apiserver_user().authenticated());
        }
        match self.tokens.as_ref().and_then(|t| t.tokens.get(token)) {
            Some(user) => Ok(user.clone().authenticated()),
            None => Err(ApiError::unauthorized()),
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header.
fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// What a request asks to do (`authorizer.Attributes`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// For non-resource requests (`/healthz`).
    pub path: String,
    pub resource_request: bool,
}

/// `--authorization-mode`: kapi implements `AlwaysAllow`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Authorizer {
    #[default]
    AlwaysAllow,
}

/// An authorization decision and its reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
}

impl Authorizer {
    pub fn authorize(&self, _user: &UserInfo, _attrs: &Attributes) -> Decision {
        match self {
            Authorizer::AlwaysAllow => Decision { allowed: true, reason: String::new() },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_and_bearer_tokens() {
        let tf = TokenFile::parse("# comment\nsecret,alice,1001,\"dev,ops\"\nother,bob,1002\n").unwrap();
        let a = Authenticator { tokens: Some(tf), loopback: Some("lo0p".into()) };
        let u = a.authenticate(Some("Bearer secret"), &Peer::default()).unwrap();
        assert_eq!(u.name, "alice");
        assert_eq!(u.groups, vec!["dev", "ops", "system:authenticated"]);
        assert_eq!(a.authenticate(Some("Bearer nope"), &Peer::default()).unwrap_err().code, 401);
        assert_eq!(a.authenticate(None, &Peer::default()).unwrap_err().code, 401);
        assert!(TokenFile::parse("onlytoken\n").is_err());
        let lo = a.authenticate(Some("Bearer lo0p"), &Peer::default()).unwrap();
        assert_eq!((lo.name.as_str(), lo.groups.as_slice()), ("system:apiserver", &["system:masters".to_string(), "system:authenticated".to_string()][..]));
        assert_eq!(a.authenticate(Some("Bearer "), &Peer::default()).unwrap_err().code, 401);
        let no_loopback = Authenticator { loopback: None, ..a };
        assert_eq!(no_loopback.authenticate(Some("Bearer lo0p"), &Peer::default()).unwrap_err().code, 401);
    }
}

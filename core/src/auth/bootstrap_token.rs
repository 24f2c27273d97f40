//! Bootstrap tokens as credentials (`--enable-bootstrap-token-auth`, kube's bootstrap token
//! authenticator): a bearer token `<id>.<secret>` (6 and 16 of `[a-z0-9]`) stands for
//! `system:bootstrap:<id>` while the Secret `kube-system/bootstrap-token-<id>` of type
//! `bootstrap.kubernetes.io/token` holds that secret, has not expired, is not being deleted,
//! and is marked `usage-bootstrap-authentication: "true"`; its groups are
//! `system:bootstrappers` and the `auth-extra-groups` it lists (each `system:bootstrappers:…`).
//! A token that does not check is simply not recognized (401), as kube's logs-only refusals.

use jiff::Timestamp;
use serde_json::Value;

use super::{AUTHENTICATED_GROUP, UserInfo};
use crate::admission::Lookup;
use crate::meta;

/// The namespace the token Secrets are in, and their names' prefix.
const NAMESPACE: &str = "kube-system";
const SECRET_PREFIX: &str = "bootstrap-token-";
const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// The group every bootstrap token's user is in, and the prefix of the extra ones.
pub const BOOTSTRAPPERS_GROUP: &str = "system:bootstrappers";

/// A bearer token of the bootstrap form, to be confirmed by its Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootstrapToken {
    id: String,
    secret: String,
}

impl BootstrapToken {
    /// The token, if it has the form `[a-z0-9]{6}.[a-z0-9]{16}` (kube's `ParseToken`).
    pub fn parse(token: &str) -> Option<BootstrapToken> {
        let (id, secret) = token.split_once('.')?;
        let valid = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        (valid(id, 6) && valid(secret, 16)).then(|| BootstrapToken { id: id.into(), secret: secret.into() })
    }

    /// The Secret that confirms the token.
    pub fn lookups(&self) -> Vec<Lookup> {
        vec![Lookup::Secret { namespace: NAMESPACE.into(), name: format!("{SECRET_PREFIX}{}", self.id) }]
    }

    /// The user the token stands for, given what [`Self::lookups`] found; `None` when the
    /// Secret does not vouch for it (kube's checks, in its order).
    pub fn confirm(&self, found: &[(Lookup, Option<std::sync::Arc<Value>>)], now: Timestamp) -> Option<UserInfo> {
        let secret = found.iter().find_map(|(_, o)| o.as_ref())?;
        if meta::deletion_timestamp(secret).is_some() || meta::str_at(secret, &["type"]) != Some(SECRET_TYPE) {
            return None;
        }
        // Go's string(bytes): what is not UTF-8 is kept (and then fails to parse or compare).
        let data = |key: &str| -> Option<String> {
            let encoded = secret.get("data")?.get(key)?.as_str()?;
            let bytes = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, encoded).ok()?;
            Some(String::from_utf8_lossy(&bytes).into_owned())
        };
        // Compared without an early exit, as kube's ConstantTimeCompare.
        let stored = data("token-secret").unwrap_or_default();
        let same = stored.len() == self.secret.len() && stored.bytes().zip(self.secret.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
        if !same || data("token-id").as_deref() != Some(self.id.as_str()) {
            return None;
        }
        if let Some(expiration) = data("expiration").filter(|e| !e.is_empty()) {
            // An expiration that is not RFC 3339 (as Go's time.RFC3339 reads it) counts as past.
            let until = rfc3339(&expiration)?;
            if until <= now {
                return None;
            }
        }
        if data("usage-bootstrap-authentication").as_deref() != Some("true") {
            return None;
        }
        let mut groups = vec![BOOTSTRAPPERS_GROUP.to_string()];
        for group in data("auth-extra-groups").filter(|g| !g.is_empty()).iter().flat_map(|g| g.split(',')) {
            if !valid_group(group) {
                return None;
            }
            groups.push(group.to_string());
        }
        groups.sort();
        groups.dedup();
        groups.push(AUTHENTICATED_GROUP.into());
        Some(UserInfo { name: format!("system:bootstrap:{}", self.id), groups, ..Default::default() })
    }
}

/// A time as Go's `time.Parse(time.RFC3339, ...)` takes it: `YYYY-MM-DDTHH:MM:SS`, optional
/// fractional seconds, then `Z` or `±HH:MM`.
fn rfc3339(text: &str) -> Option<Timestamp> {
    let b = text.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let shape = b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    if !shape {
        return None;
    }
    let mut rest = &text[19..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let n = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        rest = &fraction[n..];
    }
    let zone = rest == "Z" || (rest.len() == 6 && matches!(rest.as_bytes()[0], b'+' | b'-') && rest.as_bytes()[3] == b':');
    if !zone {
        return None;
    }
    text.parse::<Timestamp>().ok()
}

/// kube's `ValidateBootstrapGroupName`: `system:bootstrappers:` then `[a-z0-9:-]{0,255}`
/// ending in `[a-z0-9]`.
fn valid_group(group: &str) -> bool {
    let Some(rest) = group.strip_prefix("system:bootstrappers:") else { return false };
    let Some(last) = rest.bytes().last() else { return false };
    rest.len() <= 256
        && (last.is_ascii_lowercase() || last.is_ascii_digit())
        && rest.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b':' || b == b'-')
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn secret(data: &[(&str, &str)]) -> Value {
        let encode = |s: &str| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, s);
        let data: serde_json::Map<String, Value> = data.iter().map(|(k, v)| (k.to_string(), json!(encode(v)))).collect();
        json!({"metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system"}, "type": SECRET_TYPE, "data": data})
    }

    #[test]
    fn a_token_stands_for_its_id_while_its_secret_vouches_for_it() {
        assert_eq!(
            BootstrapToken::parse("abcdef.0123456789abcdef").unwrap().lookups()[0],
            Lookup::Secret { namespace: "kube-system".into(), name: "bootstrap-token-abcdef".into() }
        );
        for bad in ["abcdef0123456789abcdef", "ABCDEF.0123456789abcdef", "abcde.0123456789abcdef", "abcdef.0123456789abcde", "a.b.c"] {
            assert!(BootstrapToken::parse(bad).is_none(), "{bad}");
        }
        let token = BootstrapToken::parse("abcdef.0123456789abcdef").unwrap();
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let good = [("token-id", "abcdef"), ("token-secret", "0123456789abcdef"), ("usage-bootstrap-authentication", "true")];
        let with = |extra: &[(&str, &str)]| {
            let mut all = good.to_vec();
            all.extend_from_slice(extra);
            let found = vec![(token.lookups().remove(0), Some(std::sync::Arc::new(secret(&all))))];
            token.confirm(&found, now)
        };
        let user = with(&[("auth-extra-groups", "system:bootstrappers:kubeadm:default-node-token")]).unwrap();
        assert_eq!(user.name, "system:bootstrap:abcdef");
        assert_eq!(user.groups, ["system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token", AUTHENTICATED_GROUP]);
        assert!(with(&[("expiration", "2030-01-01T00:00:00Z")]).is_some());
        assert!(with(&[("expiration", "2025-01-01T00:00:00Z")]).is_none(), "expired");
        assert!(with(&[("expiration", "soon")]).is_none(), "an expiration that does not parse is past");
        assert!(with(&[("expiration", "2030-01-01 00:00:00Z")]).is_none(), "RFC 3339 only");
        assert!(with(&[("expiration", "2030-01-01T00:00:00.5+02:00")]).is_some());
        assert!(with(&[("auth-extra-groups", "system:masters")]).is_none(), "extra groups are bootstrappers' only");
        assert!(with(&[("token-secret", "fedcba9876543210")]).is_none(), "another secret");
        assert!(with(&[("usage-bootstrap-authentication", "false")]).is_none());
        assert!(token.confirm(&[(token.lookups().remove(0), None)], now).is_none(), "no secret");
    }
}

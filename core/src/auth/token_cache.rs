//! kube-apiserver's cache of bearer token answers: a token its authenticators confirmed (a
//! service account's, a bootstrap token) stands for the same user for the next 10 seconds
//! without its signature checked or its objects looked up again (kube's
//! `TokenSuccessCacheTTL`; refusals are not kept, its `TokenFailureCacheTTL` of 0). So, as in
//! kube, a token keeps working for up to 10 seconds after what it names is deleted.
//!
//! The cache is read on every request that presents such a token and written when one is
//! confirmed: a lock-free map (papaya) keyed by the token's SHA-256, never holding a token
//! itself, and bounded: past [`MAX_ENTRIES`], expired answers are dropped, then all of them.

use std::sync::Arc;

use jiff::Timestamp;
use sha2::{Digest, Sha256};

use super::UserInfo;

/// How long a confirmed token's answer is kept, in milliseconds.
pub const SUCCESS_TTL_MS: i64 = 10_000;
/// The most answers kept.
pub const MAX_ENTRIES: usize = 16_384;

#[derive(Clone, Debug)]
struct Cached {
    user: Arc<UserInfo>,
    until_ms: i64,
}

pub struct TokenCache {
    entries: papaya::HashMap<[u8; 32], Cached, foldhash::fast::FixedState>,
}

impl Default for TokenCache {
    fn default() -> Self {
        TokenCache { entries: papaya::HashMap::with_hasher(foldhash::fast::FixedState::default()) }
    }
}

impl std::fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenCache({} answers)", self.entries.len())
    }
}

fn key(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl TokenCache {
    /// The user `token` was confirmed as less than [`SUCCESS_TTL_MS`] before `now`.
    pub fn get(&self, token: &str, now: Timestamp) -> Option<UserInfo> {
        let entries = self.entries.pin();
        let cached = entries.get(&key(token))?;
        (now.as_millisecond() < cached.until_ms).then(|| UserInfo::clone(&cached.user))
    }

    /// Keeps `token`'s answer, `user`, from `now`.
    pub fn put(&self, token: &str, user: &UserInfo, now: Timestamp) {
        let entries = self.entries.pin();
        let at = now.as_millisecond();
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, c| c.until_ms > at);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key(token), Cached { user: Arc::new(user.clone()), until_ms: at.saturating_add(SUCCESS_TTL_MS) });
    }
}

#[cfg(test)]
mod tests {
    use jiff::SignedDuration;

    use super::*;

    #[test]
    fn an_answer_is_kept_ten_seconds_and_the_cache_stays_bounded() {
        let cache = TokenCache::default();
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let alice = UserInfo { name: "alice".into(), ..Default::default() };
        assert!(cache.get("t", now).is_none());
        cache.put("t", &alice, now);
        assert_eq!(cache.get("t", now + SignedDuration::from_millis(9_999)), Some(alice.clone()));
        assert!(cache.get("t", now + SignedDuration::from_secs(10)).is_none());
        assert!(cache.get("other", now).is_none());
        for i in 0..MAX_ENTRIES + 10 {
            cache.put(&format!("token-{i}"), &alice, now);
        }
        assert!(cache.entries.len() <= MAX_ENTRIES);
    }
}

//! kube-apiserver's cache of bearer token answers: a token its authenticators confirmed (a
//! service account's, a bootstrap token) stands for the same user for the next 10 seconds
//! without its signature checked or its objects looked up again (kube's
//! `TokenSuccessCacheTTL`; refusals are not kept, its `TokenFailureCacheTTL` of 0). So, as in
//! kube, a token keeps working for up to 10 seconds after what it names is deleted.
//!
//! The answer keeps the warning the token earned, given again with every cached answer (kube's
//! cached token authenticator replays warnings too).
//!
//! It is an [`AnswerCache`] (lock-free, keyed by the token's SHA-256, bounded), read on every
//! request that presents such a token and written when one is confirmed.

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

use super::Confirmed;
use crate::answers::{AnswerCache, key};

/// How long a confirmed token's answer is kept.
pub const SUCCESS_TTL: SignedDuration = SignedDuration::from_secs(10);

#[derive(Debug, Default)]
pub struct TokenCache {
    answers: AnswerCache<Arc<Confirmed>>,
}

impl TokenCache {
    /// The user `token` was confirmed as less than [`SUCCESS_TTL`] before `now`.
    pub fn get(&self, token: &str, now: Timestamp) -> Option<Confirmed> {
        self.answers.get(&key(&[token.as_bytes()]), now).map(|c| Confirmed::clone(&c))
    }

    /// Keeps `token`'s answer from `now`.
    pub fn put(&self, token: &str, answer: &Confirmed, now: Timestamp) {
        self.answers.put(key(&[token.as_bytes()]), Arc::new(answer.clone()), SUCCESS_TTL, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_kept_ten_seconds() {
        let cache = TokenCache::default();
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let alice = Confirmed { user: super::super::UserInfo { name: "alice".into(), ..Default::default() }, warning: Some("careful") };
        assert!(cache.get("t", now).is_none());
        cache.put("t", &alice, now);
        assert_eq!(cache.get("t", now + SignedDuration::from_millis(9_999)), Some(alice.clone()));
        assert!(cache.get("t", now + SUCCESS_TTL).is_none());
        assert!(cache.get("other", now).is_none());
    }
}

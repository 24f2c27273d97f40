//! Answers kept for a while, as kube-apiserver keeps them: who a bearer token stands for (its
//! token cache, in front of the service account, bootstrap and webhook token authenticators)
//! and what an authorization webhook decided (its webhook authorizer's decision cache).
//!
//! An [`AnswerCache`] is read on every request that needs one of its answers and written when
//! an answer comes: a lock-free map (papaya) keyed by a SHA-256 of the question (never the
//! question itself: a token is not kept), and bounded: past [`MAX_ENTRIES`], expired answers
//! are dropped, then the half that would expire soonest (the oldest, among answers kept as
//! long: so a flood of new questions pushes out old answers a half at a time, rather than
//! every answer at once).

use jiff::{SignedDuration, Timestamp};
use sha2::{Digest, Sha256};

/// The most answers a cache keeps.
pub const MAX_ENTRIES: usize = 16_384;

/// A question's key: the SHA-256 of its parts, each followed by a zero byte (so that no two
/// lists of parts share a key by running into each other).
pub fn key(parts: &[&[u8]]) -> [u8; 32] {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update(part);
        hash.update([0]);
    }
    hash.finalize().into()
}

#[derive(Clone, Debug)]
struct Kept<V> {
    answer: V,
    until_ms: i64,
}

/// Answers of type `V` by their question's [`key`], each until its own time.
pub struct AnswerCache<V> {
    entries: papaya::HashMap<[u8; 32], Kept<V>, foldhash::fast::FixedState>,
}

impl<V> Default for AnswerCache<V> {
    fn default() -> Self {
        AnswerCache { entries: papaya::HashMap::with_hasher(foldhash::fast::FixedState::default()) }
    }
}

impl<V> std::fmt::Debug for AnswerCache<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AnswerCache({} answers)", self.entries.len())
    }
}

impl<V: Clone> AnswerCache<V> {
    /// The answer to `key` kept at `now`, if it has not expired.
    pub fn get(&self, key: &[u8; 32], now: Timestamp) -> Option<V> {
        let entries = self.entries.pin();
        let kept = entries.get(key)?;
        (now.as_millisecond() < kept.until_ms).then(|| kept.answer.clone())
    }

    /// Keeps `answer` to `key` from `now` for `ttl` (a zero or negative `ttl` keeps nothing).
    pub fn put(&self, key: [u8; 32], answer: V, ttl: SignedDuration, now: Timestamp) {
        if !ttl.is_positive() {
            return;
        }
        let entries = self.entries.pin();
        let at = now.as_millisecond();
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, k| k.until_ms > at);
            let mut untils: Vec<i64> = entries.iter().map(|(_, k)| k.until_ms).collect();
            if untils.len() >= MAX_ENTRIES {
                let half = untils.len() / 2;
                let (_, &mut median, _) = untils.select_nth_unstable(half);
                entries.retain(|_, k| k.until_ms > median);
            }
        }
        let until_ms = at.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX));
        entries.insert(key, Kept { answer, until_ms });
    }

    /// How many answers are kept (expired ones included).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_kept_for_its_time_and_the_cache_stays_bounded() {
        let cache = AnswerCache::default();
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let ttl = SignedDuration::from_secs(10);
        assert!(cache.get(&key(&[b"t"]), now).is_none());
        cache.put(key(&[b"t"]), "alice", ttl, now);
        assert_eq!(cache.get(&key(&[b"t"]), now + SignedDuration::from_millis(9_999)), Some("alice"));
        assert!(cache.get(&key(&[b"t"]), now + ttl).is_none());
        assert!(cache.get(&key(&[b"other"]), now).is_none());
        cache.put(key(&[b"zero"]), "bob", SignedDuration::ZERO, now);
        assert!(cache.get(&key(&[b"zero"]), now).is_none());
        assert_ne!(key(&[b"ab", b"c"]), key(&[b"a", b"bc"]));
        // Full: the answers that would expire soonest go, the others stay.
        for i in 0..MAX_ENTRIES + 10 {
            let at = now + SignedDuration::from_millis(i as i64);
            cache.put(key(&[format!("token-{i}").as_bytes()]), "alice", ttl, at);
        }
        assert!(cache.len() <= MAX_ENTRIES);
        let later = now + SignedDuration::from_millis(MAX_ENTRIES as i64 + 10);
        assert!(cache.get(&key(&[b"token-1"]), later).is_none(), "the oldest went");
        assert_eq!(cache.get(&key(&[format!("token-{}", MAX_ENTRIES - 1).as_bytes()]), later), Some("alice"), "the newest stayed");
        assert!(cache.len() > MAX_ENTRIES / 4, "not all of them went");
    }
}

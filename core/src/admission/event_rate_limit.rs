//! EventRateLimit (off by default): creates and updates of core Events are held to the limits
//! of its configuration (`eventratelimit.admission.k8s.io/v1alpha1` `Configuration`, required),
//! each a token bucket of `qps` and `burst` per key: one for the whole server (`Server`), or
//! one per namespace, per user, or per event source and involved object (`SourceAndObject`),
//! the last three kept for at most `cacheSize` keys (4096 when 0). Dry runs are not counted.
//! Every limit takes its token; a write one of them has none for is refused with kube's 429
//! `Too many requests: limit reached on type Namespace for key team` (the refusals of several,
//! `[..., ...]`, as Go aggregates errors).
//!
//! Each bucket is one atomic (the time at which it is full again, the generic cell rate
//! algorithm, which lets the same writes through as kube's token bucket), so the request path
//! takes no lock. Past `cacheSize` keys, the buckets that are full again are forgotten first
//! (forgetting one loses nothing), then those nearest full; kube forgets the least recently
//! used.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use jiff::Timestamp;
use serde_json::Value;

use super::{Attributes, Operation, Plugin};
use crate::config_file::{self, Decoder};
use crate::meta;
use crate::status::ApiError;

const SCHEME: &str = "k8s.io/kubernetes/plugin/pkg/admission/eventratelimit/config.go:36";

/// kube's `defaultCacheSize`.
const DEFAULT_CACHE_SIZE: usize = 4096;

/// The kinds of limit, in the order kapi lists them when one is not known.
const TYPES: [&str; 4] = ["Server", "Namespace", "User", "SourceAndObject"];

#[derive(Debug)]
pub struct EventRateLimit {
    limits: Vec<Limit>,
}

#[derive(Debug)]
struct Limit {
    kind: &'static str,
    /// Nanoseconds between tokens.
    interval: i64,
    burst: i64,
    cache_size: usize,
    /// Per key, when its bucket is full again (in nanoseconds since the epoch).
    buckets: papaya::HashMap<String, Arc<AtomicI64>, foldhash::fast::FixedState>,
}

impl Limit {
    /// Takes a token from `key`'s bucket at `now`, if it has one.
    fn take(&self, key: &str, now: i64) -> bool {
        let bucket = self.buckets.pin().get_or_insert_with(key.to_string(), || Arc::new(AtomicI64::new(i64::MIN))).clone();
        let taken = Self::take_from(&bucket, now, self.interval, self.burst);
        // After the take, so that the new bucket is not the one forgotten.
        if self.buckets.len() > self.cache_size {
            self.forget(now);
        }
        taken
    }

    /// The bucket holds `burst` tokens when `full` is now or past; each token taken moves
    /// `full` one interval later; none is left when it is `burst` intervals ahead.
    fn take_from(bucket: &AtomicI64, now: i64, interval: i64, burst: i64) -> bool {
        let mut full = bucket.load(Ordering::Acquire);
        loop {
            let next = full.max(now).saturating_add(interval);
            if next.saturating_sub(now) > burst.saturating_mul(interval) {
                return false;
            }
            match bucket.compare_exchange_weak(full, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(current) => full = current,
            }
        }
    }

    /// Brings the buckets kept back to `cache_size`, and a little under, so that the next
    /// keys do not each pay for a sweep: the full ones go, then those nearest full.
    fn forget(&self, now: i64) {
        let buckets = self.buckets.pin();
        let mut by_full: Vec<(i64, String)> = buckets.iter().map(|(k, b)| (b.load(Ordering::Acquire), k.clone())).collect();
        by_full.sort();
        let keep = self.cache_size - self.cache_size / 8;
        let excess = by_full.len().saturating_sub(keep);
        for (i, (full, key)) in by_full.iter().enumerate() {
            if i >= excess && *full > now {
                break;
            }
            buckets.remove(key);
        }
    }

    /// The key of a write for this limit.
    fn key(&self, a: &Attributes, obj: Option<&Value>) -> String {
        match self.kind {
            "Namespace" => a.namespace.to_string(),
            "User" => a.user.name.clone(),
            "SourceAndObject" => {
                let Some(event) = obj else { return String::new() };
                let s = |path: &[&str]| meta::str_at(event, path).unwrap_or_default();
                [
                    s(&["source", "component"]),
                    s(&["source", "host"]),
                    s(&["involvedObject", "kind"]),
                    s(&["involvedObject", "namespace"]),
                    s(&["involvedObject", "name"]),
                    s(&["involvedObject", "uid"]),
                    s(&["involvedObject", "apiVersion"]),
                ]
                .concat()
            }
            _ => String::new(),
        }
    }
}

impl EventRateLimit {
    /// The plugin with its configuration, which it requires, or kube's start-up error.
    pub fn new(config: Option<&[u8]>) -> Result<EventRateLimit, String> {
        let init = |e: String| format!("couldn't init admission plugin \"EventRateLimit\": {e}");
        let tree = config_file::read(config.unwrap_or_default(), "Configuration", &["eventratelimit.admission.k8s.io/v1alpha1"], SCHEME).map_err(init)?;
        let mut d = Decoder::new(&tree);
        let root = d.root(&tree, "Configuration", &["apiVersion", "kind", "limits"]);
        let mut read = Vec::new();
        for (at, item) in d.items(&root, "limits", "[]Limit") {
            let l = d.object(Some(item), at, "Configuration", "Limit", &["type", "qps", "burst", "cacheSize"]);
            read.push((d.string(&l, "type"), d.int32(&l, "qps"), d.int32(&l, "burst"), d.int32(&l, "cacheSize")));
        }
        let given = tree.get("limits").is_some_and(|l| !l.is_null());
        d.finish_leniently().map_err(init)?;
        let mut errors = Vec::new();
        if read.is_empty() {
            let shown = if given { "[]eventratelimit.Limit{}" } else { "[]eventratelimit.Limit(nil)" };
            errors.push(format!("limits: Invalid value: {shown}: must not be empty"));
        }
        let mut limits = Vec::new();
        for (i, (kind, qps, burst, cache_size)) in read.into_iter().enumerate() {
            let known = TYPES.into_iter().find(|t| *t == kind);
            if known.is_none() {
                let supported: Vec<String> = TYPES.iter().map(|t| format!("{t:?}")).collect();
                errors.push(format!("limits[{i}].type: Unsupported value: {kind:?}: supported values: {}", supported.join(", ")));
            }
            if burst <= 0 {
                errors.push(format!("limits[{i}].burst: Invalid value: {burst}: must be positive"));
            }
            if qps <= 0 {
                errors.push(format!("limits[{i}].qps: Invalid value: {qps}: must be positive"));
            }
            if kind != "Server" && cache_size < 0 {
                errors.push(format!("limits[{i}].cacheSize: Invalid value: {cache_size}: must not be negative"));
            }
            // A server's limit has one bucket: its `cacheSize` is not read.
            if let Some(kind) = known.filter(|k| burst > 0 && qps > 0 && (*k == "Server" || cache_size >= 0)) {
                let cache_size = if cache_size == 0 { DEFAULT_CACHE_SIZE } else { cache_size as usize };
                let interval = 1_000_000_000 / i64::from(qps);
                limits.push(Limit { kind, interval, burst: i64::from(burst), cache_size, buckets: papaya::HashMap::default() });
            }
        }
        if !errors.is_empty() {
            return Err(init(crate::authz::rbac::aggregate(&errors)));
        }
        Ok(EventRateLimit { limits })
    }
}

impl Plugin for EventRateLimit {
    fn name(&self) -> &'static str {
        "EventRateLimit"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    fn validate(&self, a: &Attributes, obj: Option<&Value>, _warnings: &mut Vec<String>) -> Result<(), ApiError> {
        // kube asks the kind: a core Event, whichever of its resources is written.
        if !(a.info.group.is_empty() && a.info.kind == "Event") || a.dry_run {
            return Ok(());
        }
        let now = nanos(a.now);
        let mut refused: Vec<String> = Vec::new();
        for limit in &self.limits {
            let key = limit.key(a, obj);
            let message = format!("limit reached on type {} for key {key}", limit.kind);
            if !limit.take(&key, now) && !refused.contains(&message) {
                refused.push(message);
            }
        }
        if refused.is_empty() {
            return Ok(());
        }
        Err(ApiError::new(429, "TooManyRequests", format!("Too many requests: {}", crate::authz::rbac::aggregate(&refused))))
    }
}

/// The time as the buckets keep it.
fn nanos(t: Timestamp) -> i64 {
    t.as_nanosecond().clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

#[cfg(test)]
mod tests {
    use jiff::{SignedDuration, Timestamp};
    use serde_json::{Value, json};

    use super::*;
    use crate::admission::Found;
    use crate::auth::UserInfo;
    use crate::resources::{Settings, catalog};

    fn plugin(limits: &str) -> Result<EventRateLimit, String> {
        let config = format!("apiVersion: eventratelimit.admission.k8s.io/v1alpha1\nkind: Configuration\n{limits}");
        EventRateLimit::new(Some(config.as_bytes()))
    }

    /// Writes `obj` (a `resource` of `group`) in `namespace` as `user` at `at` seconds.
    fn write(p: &EventRateLimit, (group, resource): (&str, &str), namespace: &str, user: &str, obj: &Value, at: f64) -> Result<(), String> {
        let cat = catalog(&Settings::default());
        let info = &cat.resources().find(|r| r.info.group == group && r.info.resource == resource).unwrap().info;
        let user = UserInfo { name: user.into(), ..Default::default() };
        let found = Found::default();
        let now = Timestamp::UNIX_EPOCH + SignedDuration::from_secs_f64(1_000_000.0 + at);
        let a = Attributes { now, ..Attributes::of(Operation::Create, info, namespace, "e", &user, None, &found) };
        p.validate(&a, Some(obj), &mut Vec::new()).map_err(|e| format!("{} {} {}", e.code, e.reason, e.message))
    }

    fn event(component: &str, object: &str) -> Value {
        json!({"source": {"component": component, "host": "n1"}, "involvedObject": {"kind": "Pod", "namespace": "dev", "name": object, "uid": "u1", "apiVersion": "v1"}})
    }

    #[test]
    fn its_configuration_is_required_and_checked_in_kubes_words() {
        let init = "couldn't init admission plugin \"EventRateLimit\": ";
        assert_eq!(EventRateLimit::new(None).unwrap_err(), format!("{init}limits: Invalid value: []eventratelimit.Limit(nil): must not be empty"));
        assert_eq!(plugin("limits: []").unwrap_err(), format!("{init}limits: Invalid value: []eventratelimit.Limit{{}}: must not be empty"));
        assert_eq!(
            plugin("limits: [{type: Pod, qps: 0, burst: -1, cacheSize: -2}, {type: Server, qps: 1, burst: 1, cacheSize: -1}]").unwrap_err(),
            format!(
                "{init}[limits[0].type: Unsupported value: \"Pod\": supported values: \"Server\", \"Namespace\", \"User\", \"SourceAndObject\", limits[0].burst: Invalid value: -1: must be positive, limits[0].qps: Invalid value: 0: must be positive, limits[0].cacheSize: Invalid value: -2: must not be negative]"
            )
        );
        assert_eq!(
            plugin("limits: [{type: Server, qps: '5', burst: 1}]").unwrap_err(),
            format!("{init}json: cannot unmarshal string into Go struct field Limit.limits.qps of type int32")
        );
        assert_eq!(
            plugin("limits: [{type: Server, qps: 1.5, burst: 1}]").unwrap_err(),
            format!("{init}json: cannot unmarshal number 1.5 into Go struct field Limit.limits.qps of type int32")
        );
        assert!(plugin("kind: Configuration").is_err());
    }

    #[test]
    fn each_key_has_its_burst_then_its_rate() {
        let p = plugin("limits: [{type: Namespace, qps: 2, burst: 3}]").unwrap();
        let events = ("", "events");
        for _ in 0..3 {
            write(&p, events, "dev", "alice", &event("kubelet", "web"), 0.0).unwrap();
        }
        let refused = "429 TooManyRequests Too many requests: limit reached on type Namespace for key dev";
        assert_eq!(write(&p, events, "dev", "alice", &event("kubelet", "web"), 0.0).unwrap_err(), refused);
        // Another namespace has its own bucket; other kinds, and events.k8s.io's Events, none.
        write(&p, events, "prod", "alice", &event("kubelet", "web"), 0.0).unwrap();
        write(&p, ("", "configmaps"), "dev", "alice", &json!({}), 0.0).unwrap();
        write(&p, ("events.k8s.io", "events"), "dev", "alice", &json!({}), 0.0).unwrap();
        // Two tokens a second: one after half a second, not a second one at once.
        assert_eq!(write(&p, events, "dev", "alice", &event("kubelet", "web"), 0.4).unwrap_err(), refused);
        write(&p, events, "dev", "alice", &event("kubelet", "web"), 0.5).unwrap();
        assert_eq!(write(&p, events, "dev", "alice", &event("kubelet", "web"), 0.5).unwrap_err(), refused);
        // Never more than the burst, however long it rested.
        for _ in 0..3 {
            write(&p, events, "dev", "alice", &event("kubelet", "web"), 100.0).unwrap();
        }
        assert!(write(&p, events, "dev", "alice", &event("kubelet", "web"), 100.0).is_err());
    }

    #[test]
    fn every_limit_takes_its_token_and_every_refusal_is_given() {
        let p = plugin("limits: [{type: User, qps: 1, burst: 1}, {type: SourceAndObject, qps: 1, burst: 1}, {type: Server, qps: 1, burst: 10}]").unwrap();
        let events = ("", "events");
        write(&p, events, "dev", "alice", &event("kubelet", "web"), 0.0).unwrap();
        assert_eq!(
            write(&p, events, "dev", "alice", &event("kubelet", "web"), 0.0).unwrap_err(),
            "429 TooManyRequests Too many requests: [limit reached on type User for key alice, limit reached on type SourceAndObject for key kubeletn1Poddevwebu1v1]"
        );
        assert_eq!(
            write(&p, events, "dev", "alice", &event("scheduler", "web"), 0.0).unwrap_err(),
            "429 TooManyRequests Too many requests: limit reached on type User for key alice"
        );
        write(&p, events, "dev", "bob", &event("scheduler", "db"), 0.0).unwrap();
        // The server's bucket paid for all four.
        for who in ["c", "d", "e", "f", "g", "h"] {
            write(&p, events, "dev", who, &event(who, who), 0.0).unwrap();
        }
        assert_eq!(
            write(&p, events, "dev", "i", &event("i", "i"), 0.0).unwrap_err(),
            "429 TooManyRequests Too many requests: limit reached on type Server for key "
        );
    }

    #[test]
    fn dry_runs_take_no_token_and_a_servers_cache_size_is_not_read() {
        let p = plugin("limits: [{type: Server, qps: 1, burst: 1, cacheSize: -1}]").unwrap();
        let cat = catalog(&Settings::default());
        let info = &cat.resources().find(|r| r.info.group.is_empty() && r.info.resource == "events").unwrap().info;
        let (user, found) = (UserInfo::default(), Found::default());
        let a = Attributes { dry_run: true, ..Attributes::of(Operation::Create, info, "dev", "e", &user, None, &found) };
        for _ in 0..3 {
            p.validate(&a, Some(&event("kubelet", "web")), &mut Vec::new()).unwrap();
        }
        write(&p, ("", "events"), "dev", "alice", &event("kubelet", "web"), 0.0).unwrap();
        assert!(write(&p, ("", "events"), "dev", "alice", &event("kubelet", "web"), 0.0).is_err());
    }

    #[test]
    fn past_its_cache_size_a_limit_forgets_the_buckets_nearest_full() {
        let p = plugin("limits: [{type: Namespace, qps: 1, burst: 1, cacheSize: 8}]").unwrap();
        let events = ("", "events");
        write(&p, events, "early", "alice", &event("kubelet", "web"), 0.0).unwrap();
        for i in 0..20 {
            write(&p, events, &format!("ns{i}"), "alice", &event("kubelet", "web"), 100.0 + f64::from(i) / 100.0).unwrap();
        }
        assert!(p.limits[0].buckets.len() <= 8);
        // Full again long since, `early` went first; the most recently emptied are kept.
        assert!(!p.limits[0].buckets.pin().contains_key("early"));
        assert!(write(&p, events, "ns19", "alice", &event("kubelet", "web"), 100.5).is_err());
    }
}

//! kube-controller-manager's `resourcequota` controller: every ResourceQuota's `status.hard`
//! is its `spec.hard`, and its `status.used` what the namespace's objects use, counted again
//! from the collections the quota counts (listed through the API) when the quota is created or
//! its `spec.hard` changes, when a counted object is deleted or changes what it uses (a pod
//! that finished, a service of another type, a claim), and every five minutes. Admission
//! charges creates as they happen (`admission/resource_quota.rs`); this gives back what
//! deletes free and corrects what admission could not know.
//!
//! Counted collections are followed cluster-wide, each from when a quota first counts it.

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::{Asker, Change, Controllers, Reflector, Watched};
use crate::meta;
use crate::quota::{self, Evaluator, Resources};

pub(super) const QUOTAS: &str = "/api/v1/resourcequotas";

/// kube's `--resource-quota-sync-period`.
const RESYNC: SignedDuration = SignedDuration::from_secs(300);
/// How long after a failed list or write a namespace's quotas are counted again.
const RETRY: SignedDuration = SignedDuration::from_secs(2);

/// A step of a namespace's count: a list of a counted collection, or a quota's status write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum QuotaStep {
    List(usize),
    Write(String),
}

/// A count in progress: the lists still out and what the answered ones hold.
#[derive(Default)]
struct Count {
    lists: usize,
    listed: BTreeMap<usize, Vec<Value>>,
    /// The oldest revision of the lists.
    listed_at: Option<i64>,
    writes: usize,
    failed: bool,
}

#[derive(Default)]
pub(super) struct Quotas {
    /// ResourceQuotas by namespace and name, as last seen.
    quotas: BTreeMap<String, BTreeMap<String, Value>>,
    /// The counted collections followed: their group, resource and path (with `{ns}`).
    followed: Vec<(String, String, String)>,
    /// What decides the usage of each followed object in a namespace with quotas (resource
    /// index, namespace, name), as last seen.
    seen: BTreeMap<(usize, String, String), String>,
    /// Namespaces to count again.
    dirty: BTreeSet<String>,
    /// Counts in flight.
    counts: BTreeMap<String, Count>,
    /// When failed counts are tried again.
    pub(super) retry: Option<Timestamp>,
    /// When every namespace with quotas is counted again.
    pub(super) resync: Option<Timestamp>,
    /// The catalog changed: what the quotas count is followed anew and counted again.
    pub(super) refollow: bool,
}

impl Controllers {
    pub(super) fn quota_changed(&mut self, now: Timestamp, change: Change) {
        let (ns, name) = (meta::namespace(&change.object).to_string(), meta::name(&change.object).to_string());
        let q = &mut self.quotas;
        if change.deleted {
            if let Some(m) = q.quotas.get_mut(&ns) {
                m.remove(&name);
                if m.is_empty() {
                    q.quotas.remove(&ns);
                }
            }
            return;
        }
        let spec_hard = quota::read(meta::at(&change.object, &["spec", "hard"]));
        let before = q.quotas.get(&ns).and_then(|m| m.get(&name)).map(|o| quota::read(meta::at(o, &["spec", "hard"])));
        let status_hard = quota::hard(&change.object);
        let used = quota::used(&change.object);
        let stale = before.is_none_or(|b| !quota::equal(&b, &spec_hard))
            || !quota::equal(&status_hard, &spec_hard)
            || meta::at(&change.object, &["status", "used"]).is_none()
            || status_hard.keys().any(|k| !used.contains_key(k));
        q.quotas.entry(ns.clone()).or_default().insert(name, change.object);
        if stale {
            q.dirty.insert(ns);
        }
        self.follow_counted(now, &spec_hard);
        if self.quotas.resync.is_none() {
            self.quotas.resync = Some(now + RESYNC);
        }
    }

    /// Follows every collection a quota of `hard` counts; whether it follows more.
    fn follow_counted(&mut self, now: Timestamp, hard: &Resources) -> bool {
        let names = quota::names(hard);
        let before = self.quotas.followed.len();
        for c in &self.collections {
            let (resource, group) = c.label.split_once('.').unwrap_or((&c.label, ""));
            let counted = Evaluator::of(group, resource).is_some_and(|e| !e.matching(&names).is_empty());
            if !counted || self.quotas.followed.iter().any(|(g, r, _)| g == group && r == resource) {
                continue;
            }
            let index = self.quotas.followed.len();
            self.quotas.followed.push((group.to_string(), resource.to_string(), c.path.clone()));
            let everywhere = c.path.replace("/namespaces/{ns}", "");
            self.reflectors.push((Watched::Counted(index), Reflector::new(&everywhere, "", now)));
        }
        self.quotas.followed.len() > before
    }

    /// A followed object changed: its namespace's quotas that count it are counted again when
    /// it is gone or changed what it uses.
    pub(super) fn counted_changed(&mut self, index: usize, change: Change) {
        let q = &mut self.quotas;
        let ns = meta::namespace(&change.object).to_string();
        let (group, resource, _) = &q.followed[index];
        let Some(evaluator) = Evaluator::of(group, resource) else { return };
        let key = (index, ns.clone(), meta::name(&change.object).to_string());
        let summary = if change.deleted { None } else { Some(usage_key(&evaluator, &change.object)) };
        let before = match &summary {
            Some(s) => q.seen.insert(key, s.clone()),
            None => q.seen.remove(&key),
        };
        let changed = change.deleted || before.is_some_and(|b| Some(b) != summary);
        let Some(quotas) = q.quotas.get(&ns) else { return };
        let counts = quotas.values().any(|quota| !evaluator.matching(&quota::names(&quota::hard(quota))).is_empty());
        if changed && counts {
            q.dirty.insert(ns);
        }
    }

    /// Starts the counts due.
    pub(super) fn quotas_due(&mut self, now: Timestamp) {
        if std::mem::take(&mut self.quotas.refollow) {
            let hards: Vec<Resources> = self.quotas.quotas.values().flat_map(|m| m.values()).map(|q| quota::read(meta::at(q, &["spec", "hard"]))).collect();
            let mut more = false;
            for hard in &hards {
                more |= self.follow_counted(now, hard);
            }
            if more {
                let all: Vec<String> = self.quotas.quotas.keys().cloned().collect();
                self.quotas.dirty.extend(all);
            }
        }
        if self.quotas.resync.is_some_and(|at| at <= now) {
            self.quotas.resync = Some(now + RESYNC);
            let all: Vec<String> = self.quotas.quotas.keys().cloned().collect();
            self.quotas.dirty.extend(all);
        }
        if self.quotas.retry.is_some_and(|at| at > now) {
            return;
        }
        self.quotas.retry = None;
        let due: Vec<String> = self.quotas.dirty.iter().filter(|ns| !self.quotas.counts.contains_key(*ns)).cloned().collect();
        for ns in due {
            self.quotas.dirty.remove(&ns);
            self.count(&ns, now);
        }
    }

    /// Lists what the namespace's quotas count.
    fn count(&mut self, ns: &str, now: Timestamp) {
        let Some(quotas) = self.quotas.quotas.get(ns) else { return };
        let names: Vec<String> = quotas.values().flat_map(|q| quota::read(meta::at(q, &["spec", "hard"])).into_keys()).collect();
        let lists: Vec<usize> = (0..self.quotas.followed.len())
            .filter(|i| {
                let (g, r, _) = &self.quotas.followed[*i];
                Evaluator::of(g, r).is_some_and(|e| !e.matching(&names).is_empty())
            })
            .collect();
        self.quotas.counts.insert(ns.to_string(), Count { lists: lists.len(), ..Count::default() });
        if lists.is_empty() {
            self.write_counts(ns, now);
            if self.quotas.counts.get(ns).is_some_and(|c| c.writes == 0) {
                self.quotas.counts.remove(ns);
            }
            return;
        }
        for i in lists {
            let path = self.quotas.followed[i].2.replace("{ns}", ns);
            self.send(Asker::Quota { ns: ns.to_string(), step: QuotaStep::List(i), status: 0, body: Vec::new() }, "GET", path, "", None);
        }
    }

    pub(super) fn quota_answered(&mut self, now: Timestamp, ns: &str, step: QuotaStep, status: u16, body: &[u8]) {
        let Some(count) = self.quotas.counts.get_mut(ns) else { return };
        let ok = (200..300).contains(&status);
        count.failed |= !ok;
        match step {
            QuotaStep::List(i) => {
                count.lists -= 1;
                let list = serde_json::from_slice::<Value>(body).ok();
                let at = list.as_ref().and_then(|l| meta::resource_version(l).parse::<i64>().ok());
                match list.and_then(|l| l.get("items").and_then(Value::as_array).cloned()).filter(|_| ok) {
                    Some(items) => {
                        count.listed.insert(i, items);
                        if let Some(at) = at {
                            count.listed_at = Some(count.listed_at.map_or(at, |before| before.min(at)));
                        }
                    }
                    None => count.failed = true,
                }
                if count.lists == 0 {
                    self.write_counts(ns, now);
                }
            }
            QuotaStep::Write(_) => count.writes -= 1,
        }
        let Some(count) = self.quotas.counts.get(ns) else { return };
        if count.lists == 0 && count.writes == 0 {
            if count.failed {
                self.quotas.dirty.insert(ns.to_string());
                self.quotas.retry = Some(now + RETRY);
            }
            self.quotas.counts.remove(ns);
        }
    }

    /// Writes the status of each quota of `ns` whose count changed (kube's `syncResourceQuota`).
    fn write_counts(&mut self, ns: &str, now: Timestamp) {
        let Some(count) = self.quotas.counts.get(ns) else { return };
        if count.failed {
            return;
        }
        let mut writes = Vec::new();
        let mut again = false;
        for q in self.quotas.quotas.get(ns).into_iter().flat_map(|m| m.values()) {
            // A quota newer than a list may have been charged for what the list does not
            // show yet: it is counted again, from newer lists.
            let newer = meta::resource_version(q).parse::<i64>().ok().zip(count.listed_at).is_some_and(|(q, listed)| q > listed);
            if newer {
                again = true;
                continue;
            }
            let hard = quota::read(meta::at(q, &["spec", "hard"]));
            let names = quota::names(&hard);
            let selectors = quota::selectors(q);
            let mut counted = Resources::new();
            for (i, items) in &count.listed {
                let (g, r, _) = &self.quotas.followed[*i];
                let Some(evaluator) = Evaluator::of(g, r) else { continue };
                let matching = evaluator.matching(&names);
                for name in &matching {
                    counted.entry(name.clone()).or_insert_with(quota::zero);
                }
                if matching.is_empty() {
                    continue;
                }
                for obj in items.iter().filter(|o| selectors.iter().all(|s| evaluator.matches_scope(s, o).unwrap_or(false))) {
                    counted = quota::add(&counted, &quota::mask(&evaluator.usage(obj, now), &matching));
                }
            }
            let before = quota::used(q);
            let mut used = before.clone();
            used.extend(counted);
            let used = quota::mask(&used, &names);
            let unsynced = !quota::equal(&quota::hard(q), &hard) || meta::at(q, &["status", "used"]).is_none();
            if unsynced || !quota::equal(&used, &before) {
                let mut next = q.clone();
                next["status"] = json!({"hard": quota::write(&hard), "used": quota::write(&used)});
                writes.push((meta::name(q).to_string(), next));
            }
        }
        if again {
            self.quotas.dirty.insert(ns.to_string());
        }
        if let Some(count) = self.quotas.counts.get_mut(ns) {
            count.writes = writes.len();
        }
        for (name, body) in writes {
            let path = format!("{QUOTAS}/{name}/status").replace("/api/v1/", &format!("/api/v1/namespaces/{ns}/"));
            self.send(Asker::Quota { ns: ns.to_string(), step: QuotaStep::Write(name), status: 0, body: Vec::new() }, "PUT", path, "", Some(body));
        }
    }
}

/// What of an object decides whether a change of it frees quota (kube's replenishment filter):
/// a pod's phase, deletion, `activeDeadlineSeconds` and the resources its containers were
/// given, a service's type; a claim's every change; nothing of the objects only counted.
fn usage_key(evaluator: &Evaluator, obj: &Value) -> String {
    match evaluator {
        Evaluator::Pods => {
            let given: Vec<&Value> =
                meta::at(obj, &["status", "containerStatuses"]).and_then(Value::as_array).into_iter().flatten().filter_map(|s| s.get("resources")).collect();
            format!(
                "{:?} {} {} {}",
                meta::str_at(obj, &["status", "phase"]),
                meta::deletion_timestamp(obj).is_some(),
                meta::at(obj, &["spec", "activeDeadlineSeconds"]).is_some(),
                serde_json::to_string(&given).unwrap_or_default()
            )
        }
        Evaluator::Services => meta::str_at(obj, &["spec", "type"]).unwrap_or_default().to_string(),
        Evaluator::Claims => meta::resource_version(obj).to_string(),
        Evaluator::Count(_) => String::new(),
    }
}

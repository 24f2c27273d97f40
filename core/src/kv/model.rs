//! `Model`: the reference implementation of the KV protocol, a pure in-memory MVCC store.
//!
//! It is what the simulator runs on and what the real backends are checked against. It holds no
//! watchers: [`Model::apply`] returns the events a write produced, and [`Model::backlog`] replays
//! the events a watch starting at a revision must see first; a driver fans them out.

use std::collections::BTreeMap;

use bytes::Bytes;
use jiff::Timestamp;

use super::*;

#[derive(Clone, Debug)]
struct Lease {
    ttl_seconds: i64,
    expires_at: Timestamp,
}

/// One key's state from a revision on; `None` is a deletion.
#[derive(Clone, Debug)]
struct KeyVersion {
    revision: Revision,
    kv: Option<KeyValue>,
}

#[derive(Clone, Debug, Default)]
pub struct Model {
    revision: Revision,
    compact_revision: Revision,
    keys: BTreeMap<Bytes, Vec<KeyVersion>>,
    /// Every event from `compact_revision` on, in revision order.
    log: Vec<Event>,
    leases: BTreeMap<i64, Lease>,
    next_lease: i64,
}

impl Model {
    /// An empty store at revision 1, as a new etcd cluster starts.
    pub fn new() -> Self {
        Model { revision: 1, next_lease: 0x1000, ..Default::default() }
    }

    pub fn revision(&self) -> Revision {
        self.revision
    }

    pub fn compact_revision(&self) -> Revision {
        self.compact_revision
    }

    /// Serves one request at time `now`; returns its answer and the events it produced.
    pub fn apply(&mut self, now: Timestamp, req: &KvRequest) -> (KvResult, Vec<Event>) {
        match req {
            KvRequest::Range(r) => (self.range(r).map(KvResponse::Range), Vec::new()),
            KvRequest::Txn(t) => match self.txn(t) {
                Ok((resp, events)) => (Ok(KvResponse::Txn(resp)), events),
                Err(e) => (Err(e), Vec::new()),
            },
            KvRequest::Compact { revision } => (self.compact(*revision), Vec::new()),
            KvRequest::LeaseGrant { ttl_seconds } => {
                let id = self.next_lease;
                self.next_lease += 1;
                let ttl = (*ttl_seconds).max(1);
                let expires_at = now.saturating_add(jiff::SignedDuration::from_secs(ttl)).unwrap_or(now);
                self.leases.insert(id, Lease { ttl_seconds: ttl, expires_at });
                (Ok(KvResponse::LeaseGrant { id, ttl_seconds: ttl }), Vec::new())
            }
        }
    }

    /// Deletes the keys of every lease expired at `now`, in one revision; returns the events.
    pub fn expire_leases(&mut self, now: Timestamp) -> Vec<Event> {
        let expired: Vec<i64> = self.leases.iter().filter(|(_, l)| l.expires_at <= now).map(|(id, _)| *id).collect();
        if expired.is_empty() {
            return Vec::new();
        }
        for id in &expired {
            self.leases.remove(id);
        }
        let doomed: Vec<Bytes> = self
            .keys
            .iter()
            .filter(|(_, h)| h.last().and_then(|v| v.kv.as_ref()).is_some_and(|kv| expired.contains(&kv.lease)))
            .map(|(k, _)| k.clone())
            .collect();
        if doomed.is_empty() {
            return Vec::new();
        }
        let rev = self.revision + 1;
        let events: Vec<Event> = doomed.iter().filter_map(|k| self.delete_key(k, rev)).collect();
        self.revision = rev;
        self.log.extend(events.iter().cloned());
        events
    }

    /// The lease's TTL, if it still exists.
    pub fn lease_ttl(&self, id: i64) -> Option<i64> {
        self.leases.get(&id).map(|l| l.ttl_seconds)
    }

    /// The events a watch must see first: every change in its range from `start_revision` on.
    /// Fails with the compact revision when part of that history is gone.
    pub fn backlog(&self, req: &WatchRequest) -> Result<Vec<Event>, Revision> {
        let start = if req.start_revision == 0 { self.revision + 1 } else { req.start_revision };
        if start < self.compact_revision {
            return Err(self.compact_revision);
        }
        let from = self.log.partition_point(|e| e.kv.mod_revision < start);
        Ok(self.log[from..]
            .iter()
            .filter(|e| req.contains(&e.kv.key))
            // etcd reads a replayed event's previous version at the revision before it, which
            // compaction may have removed: the event then comes without it.
            .map(|e| if req.prev_kv && e.kv.mod_revision > self.compact_revision { e.clone() } else { Event { prev_kv: None, ..e.clone() } })
            .collect())
    }

    fn check_revision(&self, revision: Revision) -> Result<Revision, KvError> {
        read_revision(revision, self.revision, self.compact_revision)
    }

    fn at(history: &[KeyVersion], rev: Revision) -> Option<&KeyValue> {
        let idx = history.partition_point(|v| v.revision <= rev);
        if idx == 0 { None } else { history[idx - 1].kv.as_ref() }
    }

    fn current(&self, key: &[u8]) -> Option<&KeyValue> {
        self.keys.get(key).and_then(|h| h.last()).and_then(|v| v.kv.as_ref())
    }

    fn range(&self, r: &RangeRequest) -> Result<RangeResponse, KvError> {
        let rev = self.check_revision(r.revision)?;
        Ok(self.range_at(r, rev))
    }

    /// The range as of `rev` (not checked: a transaction reads its own writes at the revision
    /// it is making).
    fn range_at(&self, r: &RangeRequest, rev: Revision) -> RangeResponse {
        let mut resp = RangeResponse { header_revision: self.revision, ..Default::default() };
        let matching = self.keys_in(&r.key, &r.range_end).filter_map(|(_, h)| Self::at(h, rev));
        for kv in matching {
            resp.count += 1;
            if r.count_only {
                continue;
            }
            if r.limit > 0 && resp.kvs.len() as i64 >= r.limit {
                resp.more = true;
                continue;
            }
            let mut kv = kv.clone();
            if r.keys_only {
                kv.value = Bytes::new();
            }
            resp.kvs.push(kv);
        }
        resp
    }

    fn keys_in<'a>(&'a self, key: &[u8], range_end: &[u8]) -> Box<dyn Iterator<Item = (&'a Bytes, &'a Vec<KeyVersion>)> + 'a> {
        use std::ops::Bound::*;
        let start = Bytes::copy_from_slice(key);
        if range_end.is_empty() {
            Box::new(self.keys.get_key_value(key).into_iter())
        } else if range_end == [0] {
            Box::new(self.keys.range((Included(start), Unbounded)))
        } else if range_end <= key {
            Box::new(std::iter::empty())
        } else {
            Box::new(self.keys.range((Included(start), Excluded(Bytes::copy_from_slice(range_end)))))
        }
    }

    fn txn(&mut self, t: &TxnRequest) -> Result<(TxnResponse, Vec<Event>), KvError> {
        t.check_size()?;
        let succeeded = t.compare.iter().all(|c| {
            let kv = self.current(&c.key);
            let v = match c.target {
                CompareTarget::ModRevision => kv.map_or(0, |kv| kv.mod_revision),
                CompareTarget::CreateRevision => kv.map_or(0, |kv| kv.create_revision),
                CompareTarget::Version => kv.map_or(0, |kv| kv.version),
            };
            c.holds(v)
        });
        let ops = if succeeded { &t.success } else { &t.failure };
        for op in ops {
            if let TxnOp::Put { lease, .. } = op
                && *lease != 0
                && !self.leases.contains_key(lease)
            {
                return Err(KvError::LeaseNotFound);
            }
        }
        let rev = self.revision + 1;
        let mut events = Vec::new();
        let mut responses = Vec::with_capacity(ops.len());
        for op in ops {
            match op {
                // As in etcd: a range sees the writes before it in the same transaction, and its
                // header carries the transaction's revision so far (the new one once it wrote).
                TxnOp::Range(r) => {
                    let header_revision = if events.is_empty() { self.revision } else { rev };
                    responses.push(TxnOpResponse::Range(RangeResponse { header_revision, ..self.range_at(r, rev) }))
                }
                TxnOp::Put { key, value, lease } => {
                    let prev = self.current(key).cloned();
                    let kv = KeyValue::put(key, value, *lease, prev.as_ref(), rev);
                    self.push_version(key, rev, Some(kv.clone()));
                    events.push(Event { kind: EventKind::Put, kv, prev_kv: prev });
                    responses.push(TxnOpResponse::Put);
                }
                TxnOp::Delete { key } => {
                    let prev_kv = self.current(key).cloned();
                    if let Some(ev) = self.delete_key(key, rev) {
                        events.push(ev);
                    }
                    responses.push(TxnOpResponse::Delete { prev_kv });
                }
            }
        }
        if !events.is_empty() {
            self.revision = rev;
            self.log.extend(events.iter().cloned());
        }
        Ok((TxnResponse { header_revision: self.revision, succeeded, responses }, events))
    }

    fn push_version(&mut self, key: &Bytes, revision: Revision, kv: Option<KeyValue>) {
        let history = self.keys.entry(key.clone()).or_default();
        // Two writes to one key in one transaction: the last wins.
        if history.last().is_some_and(|v| v.revision == revision) {
            history.pop();
        }
        history.push(KeyVersion { revision, kv });
    }

    fn delete_key(&mut self, key: &Bytes, rev: Revision) -> Option<Event> {
        let prev = self.current(key).cloned()?;
        self.push_version(key, rev, None);
        Some(Event {
            kind: EventKind::Delete,
            kv: KeyValue { key: key.clone(), value: Bytes::new(), create_revision: 0, mod_revision: rev, version: 0, lease: 0 },
            prev_kv: Some(prev),
        })
    }

    fn compact(&mut self, revision: Revision) -> KvResult {
        if revision <= self.compact_revision {
            return Err(KvError::Compacted { compact_revision: self.compact_revision });
        }
        if revision > self.revision {
            return Err(KvError::FutureRevision { current: self.revision });
        }
        self.compact_revision = revision;
        self.keys.retain(|_, history| {
            // Keep the version visible at `revision` and everything after it.
            let keep_from = history.partition_point(|v| v.revision <= revision).saturating_sub(1);
            history.drain(..keep_from);
            if history.len() == 1 && history[0].kv.is_none() && history[0].revision <= revision {
                return false;
            }
            true
        });
        let from = self.log.partition_point(|e| e.kv.mod_revision < revision);
        self.log.drain(..from);
        Ok(KvResponse::Compact { header_revision: self.revision })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(m: &mut Model, k: &str, v: &str) -> TxnResponse {
        let req = KvRequest::Txn(TxnRequest {
            success: vec![TxnOp::Put { key: Bytes::from(k.to_string()), value: Bytes::from(v.to_string()), lease: 0 }],
            ..Default::default()
        });
        match m.apply(Timestamp::UNIX_EPOCH, &req).0 {
            Ok(KvResponse::Txn(t)) => t,
            other => panic!("{other:?}"),
        }
    }

    fn range(m: &mut Model, r: RangeRequest) -> KvResult {
        m.apply(Timestamp::UNIX_EPOCH, &KvRequest::Range(r)).0
    }

    #[test]
    fn revisions_versions_and_history() {
        let mut m = Model::new();
        assert_eq!(put(&mut m, "/a", "1").header_revision, 2);
        assert_eq!(put(&mut m, "/a", "2").header_revision, 3);
        let Ok(KvResponse::Range(r)) = range(&mut m, RangeRequest::key("/a")) else { panic!() };
        assert_eq!((r.kvs[0].create_revision, r.kvs[0].mod_revision, r.kvs[0].version), (2, 3, 2));
        let Ok(KvResponse::Range(old)) = range(&mut m, RangeRequest { revision: 2, ..RangeRequest::key("/a") }) else { panic!() };
        assert_eq!(old.kvs[0].value, "1");
        m.apply(Timestamp::UNIX_EPOCH, &KvRequest::Compact { revision: 3 }).0.unwrap();
        assert_eq!(range(&mut m, RangeRequest { revision: 2, ..RangeRequest::key("/a") }), Err(KvError::Compacted { compact_revision: 3 }));
        assert_eq!(m.backlog(&WatchRequest::prefix("/", 2)), Err(3));
    }

    /// Found by the storage conformance suite against etcd 3.4: a range inside a transaction
    /// sees the writes before it, and its header carries the revision it read at (the new one
    /// once the transaction has written); a replay after compaction loses compacted prev_kvs.
    #[test]
    fn a_transaction_reads_its_own_writes_and_replays_lose_compacted_prev_kvs() {
        let mut m = Model::new();
        put(&mut m, "/a", "1");
        put(&mut m, "/a", "2");
        let read = || TxnOp::Range(RangeRequest::key("/a"));
        let req = KvRequest::Txn(TxnRequest {
            success: vec![read(), TxnOp::Put { key: Bytes::from_static(b"/a"), value: Bytes::from_static(b"3"), lease: 0 }, read()],
            ..Default::default()
        });
        let Ok(KvResponse::Txn(t)) = m.apply(Timestamp::UNIX_EPOCH, &req).0 else { panic!() };
        let (TxnOpResponse::Range(before), TxnOpResponse::Range(after)) = (&t.responses[0], &t.responses[2]) else { panic!() };
        assert_eq!((before.header_revision, before.kvs[0].value.as_ref()), (3, &b"2"[..]));
        assert_eq!((t.header_revision, after.header_revision, after.kvs[0].mod_revision, after.kvs[0].value.as_ref()), (4, 4, 4, &b"3"[..]));
        m.apply(Timestamp::UNIX_EPOCH, &KvRequest::Compact { revision: 3 }).0.unwrap();
        let replay = m.backlog(&WatchRequest::prefix("/", 3)).unwrap();
        assert_eq!(replay.iter().map(|e| (e.kv.mod_revision, e.prev_kv.as_ref().map(|p| p.mod_revision))).collect::<Vec<_>>(), vec![(3, None), (4, Some(3))]);
    }

    #[test]
    fn prefix_range_with_limit_counts_everything() {
        let mut m = Model::new();
        for k in ["/p/a", "/p/b", "/p/c", "/q"] {
            put(&mut m, k, "x");
        }
        let Ok(KvResponse::Range(r)) = range(&mut m, RangeRequest { limit: 2, ..RangeRequest::prefix("/p/") }) else { panic!() };
        assert_eq!((r.kvs.len(), r.more, r.count), (2, true, 3));
    }

    #[test]
    fn guarded_create_fails_on_existing_key() {
        let mut m = Model::new();
        put(&mut m, "/a", "1");
        let req = KvRequest::Txn(TxnRequest {
            compare: vec![Compare::absent("/a")],
            success: vec![TxnOp::Put { key: "/a".into(), value: "2".into(), lease: 0 }],
            failure: vec![TxnOp::Range(RangeRequest::key("/a"))],
        });
        let Ok(KvResponse::Txn(t)) = m.apply(Timestamp::UNIX_EPOCH, &req).0 else { panic!() };
        assert!(!t.succeeded);
        assert_eq!(m.revision(), 2);
    }

    #[test]
    fn leases_expire_their_keys() {
        let mut m = Model::new();
        let t0 = Timestamp::UNIX_EPOCH;
        let Ok(KvResponse::LeaseGrant { id, .. }) = m.apply(t0, &KvRequest::LeaseGrant { ttl_seconds: 10 }).0 else { panic!() };
        let req = KvRequest::Txn(TxnRequest { success: vec![TxnOp::Put { key: "/e".into(), value: "v".into(), lease: id }], ..Default::default() });
        m.apply(t0, &req).0.unwrap();
        assert!(m.expire_leases(t0 + jiff::SignedDuration::from_secs(5)).is_empty());
        let ev = m.expire_leases(t0 + jiff::SignedDuration::from_secs(10));
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].kind, EventKind::Delete);
    }
}

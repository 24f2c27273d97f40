//! kube-apiserver's storage compactor, as a machine.
//!
//! Every `interval` the compactor compacts the store to the revision it saw one tick earlier, so
//! at least one interval of history stays for watches to resume from. API servers sharing a
//! store take turns through the version of the key `compact_rev_key` (outside `--etcd-prefix`,
//! as kube keeps it): a compactor whose last known version still matches bumps it in a
//! transaction and compacts; one that finds it moved adopts the new version and waits a tick.
//! So a cluster compacts once per interval, and when one server stops another takes over.
//!
//! Call order: [`Compactor::poll`] with the current time returns the request to send when one
//! is due (at most one is outstanding); feed its answer to [`Compactor::handle`]; sleep until
//! [`Compactor::poll_timeout`].

use bytes::Bytes;
use jiff::{SignedDuration, Timestamp};

use crate::kv::*;

/// The key whose version counts compactions cluster-wide (kube's `compactRevKey`).
pub const COMPACT_REV_KEY: &str = "compact_rev_key";

/// kube-apiserver's default `--etcd-compaction-interval`.
pub const DEFAULT_INTERVAL: SignedDuration = SignedDuration::from_mins(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Awaiting {
    Nothing,
    /// The turn-taking transaction.
    Turn,
    /// The compaction itself.
    Compact,
}

/// See the module documentation.
#[derive(Debug)]
pub struct Compactor {
    interval: SignedDuration,
    next_tick: Timestamp,
    /// The version of `compact_rev_key` this compactor last knew (kube's "compact time").
    known_version: i64,
    /// The store's revision at the previous tick: what the next turn compacts to.
    previous_revision: Revision,
    awaiting: Awaiting,
    /// A compaction to send once the turn is won, and since when.
    pending: Option<(Revision, Timestamp)>,
}

impl Compactor {
    /// A compactor whose first tick comes one `interval` after `now`.
    pub fn new(now: Timestamp, interval: SignedDuration) -> Compactor {
        Compactor { interval, next_tick: now + interval, known_version: 0, previous_revision: 0, awaiting: Awaiting::Nothing, pending: None }
    }

    /// The next request to send to the store, if one is due.
    pub fn poll(&mut self, now: Timestamp) -> Option<KvRequest> {
        if self.awaiting != Awaiting::Nothing {
            return None;
        }
        if let Some((revision, _)) = self.pending.take() {
            self.awaiting = Awaiting::Compact;
            return Some(KvRequest::Compact { revision });
        }
        if now < self.next_tick {
            return None;
        }
        self.next_tick = now + self.interval;
        self.awaiting = Awaiting::Turn;
        let key = Bytes::from_static(COMPACT_REV_KEY.as_bytes());
        Some(KvRequest::Txn(TxnRequest {
            compare: vec![Compare { key: key.clone(), target: CompareTarget::Version, op: CompareOp::Equal, value: self.known_version }],
            success: vec![TxnOp::Put { key: key.clone(), value: Bytes::from(self.previous_revision.to_string()), lease: 0 }],
            failure: vec![TxnOp::Range(RangeRequest::key(key))],
        }))
    }

    /// The answer to the last request [`Compactor::poll`] returned. A failed request is
    /// forgotten: the next tick tries again.
    pub fn handle(&mut self, now: Timestamp, result: KvResult) {
        let awaiting = std::mem::replace(&mut self.awaiting, Awaiting::Nothing);
        let Awaiting::Turn = awaiting else { return };
        let Ok(KvResponse::Txn(t)) = result else { return };
        let to_compact = self.previous_revision;
        self.previous_revision = t.header_revision;
        if !t.succeeded {
            // Another server compacted: adopt its count and wait for the next tick.
            if let Some(TxnOpResponse::Range(r)) = t.responses.first() {
                self.known_version = r.kvs.first().map_or(0, |kv| kv.version);
            }
            return;
        }
        self.known_version += 1;
        // The first turn only records the revision: nothing is compacted at start.
        if to_compact > 0 {
            self.pending = Some((to_compact, now));
        }
    }

    /// When [`Compactor::poll`] next has something to do.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        match (self.awaiting, self.pending) {
            (Awaiting::Nothing, Some((_, since))) => Some(since),
            (Awaiting::Nothing, None) => Some(self.next_tick),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    fn put(m: &mut Model, now: Timestamp, key: &str) {
        let req = KvRequest::Txn(TxnRequest {
            success: vec![TxnOp::Put { key: Bytes::from(key.to_string()), value: Bytes::from_static(b"v"), lease: 0 }],
            ..Default::default()
        });
        m.apply(now, &req).0.unwrap();
    }

    /// Runs whatever `c` has due at `now` against `m`; returns the compactions it made.
    fn run(c: &mut Compactor, m: &mut Model, now: Timestamp) -> Vec<Revision> {
        let mut compacted = Vec::new();
        while let Some(req) = c.poll(now) {
            if let KvRequest::Compact { revision } = req {
                compacted.push(revision);
            }
            let (result, _) = m.apply(now, &req);
            c.handle(now, result);
        }
        compacted
    }

    #[test]
    fn each_tick_compacts_to_the_revision_of_the_tick_before() {
        let mut m = Model::new();
        let mut c = Compactor::new(t(0), SignedDuration::from_secs(300));
        put(&mut m, t(1), "/registry/a");
        assert_eq!(run(&mut c, &mut m, t(299)), Vec::<Revision>::new(), "nothing before the first tick");
        assert_eq!(c.poll_timeout(), Some(t(300)));
        assert_eq!(run(&mut c, &mut m, t(300)), Vec::<Revision>::new(), "the first tick only records the revision");
        let first = m.revision();
        put(&mut m, t(301), "/registry/b");
        put(&mut m, t(302), "/registry/c");
        assert_eq!(run(&mut c, &mut m, t(600)), vec![first]);
        assert_eq!(m.compact_revision(), first);
        assert_eq!(c.poll_timeout(), Some(t(900)));
    }

    #[test]
    fn two_servers_on_one_store_compact_once_per_interval() {
        let mut m = Model::new();
        let mut a = Compactor::new(t(0), SignedDuration::from_secs(300));
        let mut b = Compactor::new(t(10), SignedDuration::from_secs(300));
        let mut compactions = 0;
        for tick in 0..6 {
            put(&mut m, t(300 * tick + 1), "/registry/a");
            compactions += run(&mut a, &mut m, t(300 * (tick + 1))).len();
            compactions += run(&mut b, &mut m, t(300 * (tick + 1) + 10)).len();
        }
        // a wins every turn after its first; b always finds the count moved.
        assert_eq!(compactions, 5);
    }

    #[test]
    fn when_one_server_stops_the_other_takes_over() {
        let mut m = Model::new();
        let mut a = Compactor::new(t(0), SignedDuration::from_secs(300));
        let mut b = Compactor::new(t(10), SignedDuration::from_secs(300));
        for tick in 0..3 {
            put(&mut m, t(300 * tick + 1), "/registry/a");
            run(&mut a, &mut m, t(300 * (tick + 1)));
            run(&mut b, &mut m, t(300 * (tick + 1) + 10));
        }
        let before = m.compact_revision();
        let mut b_compactions = 0;
        for tick in 3..6 {
            put(&mut m, t(300 * tick + 1), "/registry/a");
            b_compactions += run(&mut b, &mut m, t(300 * (tick + 1) + 10)).len();
        }
        assert!(b_compactions >= 1, "b took over");
        assert!(m.compact_revision() > before);
    }

    #[test]
    fn a_failed_turn_is_retried_at_the_next_tick() {
        let mut m = Model::new();
        let mut c = Compactor::new(t(0), SignedDuration::from_secs(300));
        assert!(c.poll(t(300)).is_some());
        c.handle(t(300), Err(KvError::Unavailable("down".into())));
        assert_eq!(c.poll(t(301)), None);
        assert_eq!(c.poll_timeout(), Some(t(600)));
        run(&mut c, &mut m, t(600));
        put(&mut m, t(601), "/registry/a");
        assert_eq!(run(&mut c, &mut m, t(900)).len(), 1);
    }
}

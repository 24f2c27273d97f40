//! The storage-protocol conformance suite: property-generated sequences of KV operations and
//! watches run against `kv::Model` (the reference semantics) and a real backend (SQLite, and a
//! real etcd started for the test) must give the same answers, revisions and watch streams.
//! Leases are left out: their ids are each store's own. SQLite is also run with runs of
//! transactions queued together, so they commit as one group: each must still answer as it would
//! alone.

use bytes::Bytes;
use jiff::Timestamp;
use kapi_core::kv::{
    Compare, CompareOp, CompareTarget, Event, KeyValue, KvError, KvRequest, KvResponse, KvResult, Model, RangeRequest, RangeResponse, Revision, TxnOp,
    TxnOpResponse, TxnRequest, TxnResponse, WatchRequest, WatchResponse, prefix_end,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use tokio::sync::mpsc;

use super::{Etcd, EtcdConfig, Sqlite, Store};

const KEYS: &[&str] = &["/registry/a/x", "/registry/a/y", "/registry/a/z", "/registry/b/x", "/registry/ab"];
const PREFIXES: &[&str] = &["/registry/a/", "/registry/", "/registry/b/", "/registry/a"];

/// One step of a sequence. Revisions are chosen as offsets back from the current one, so they
/// mean the same on every store.
#[derive(Clone, Debug)]
enum Step {
    Kv(Gen),
    /// Start a watch of a prefix from `back` revisions ago (0: from the next write).
    Watch {
        prefix: usize,
        back: i64,
    },
}

#[derive(Clone, Debug)]
enum Gen {
    Put { key: usize, value: u8 },
    Create { key: usize, value: u8 },
    UpdateIf { key: usize, back: i64, value: u8 },
    DeleteIf { key: usize, back: i64 },
    VersionIs { key: usize, version: i64 },
    Delete { key: usize },
    Range { prefix: Option<usize>, key: usize, limit: i64, back: i64, keys_only: bool, count_only: bool },
    Compact { back: i64 },
}

fn step() -> impl Strategy<Value = Step> {
    let k = 0..KEYS.len();
    let p = 0..PREFIXES.len();
    prop_oneof![
        4 => (k.clone(), any::<u8>()).prop_map(|(key, value)| Step::Kv(Gen::Put { key, value })),
        2 => (k.clone(), any::<u8>()).prop_map(|(key, value)| Step::Kv(Gen::Create { key, value })),
        2 => (k.clone(), 0..6i64, any::<u8>()).prop_map(|(key, back, value)| Step::Kv(Gen::UpdateIf { key, back, value })),
        1 => (k.clone(), 0..6i64).prop_map(|(key, back)| Step::Kv(Gen::DeleteIf { key, back })),
        1 => (k.clone(), 0..4i64).prop_map(|(key, version)| Step::Kv(Gen::VersionIs { key, version })),
        1 => k.clone().prop_map(|key| Step::Kv(Gen::Delete { key })),
        3 => (prop::option::of(p.clone()), k, 0..4i64, 0..8i64, any::<bool>(), any::<bool>())
            .prop_map(|(prefix, key, limit, back, keys_only, count_only)| Step::Kv(Gen::Range { prefix, key, limit, back, keys_only, count_only })),
        1 => (0..10i64).prop_map(|back| Step::Kv(Gen::Compact { back })),
        1 => (p, 0..8i64).prop_map(|(prefix, back)| Step::Watch { prefix, back }),
    ]
}

fn key(i: usize) -> Bytes {
    Bytes::from_static(KEYS[i].as_bytes())
}

fn put(i: usize, value: u8) -> TxnOp {
    TxnOp::Put { key: key(i), value: Bytes::from(vec![b'v', value]), lease: 0 }
}

/// The request a generated step makes when the store is at `revision`.
fn request(g: &Gen, revision: Revision) -> KvRequest {
    let at = |back: i64| (revision - back).max(1);
    let txn = |compare: Vec<Compare>, success: Vec<TxnOp>, failure: Vec<TxnOp>| KvRequest::Txn(TxnRequest { compare, success, failure });
    let read = |i: usize| TxnOp::Range(RangeRequest::key(key(i)));
    match *g {
        Gen::Put { key, value } => txn(vec![], vec![put(key, value)], vec![]),
        Gen::Create { key: k, value } => txn(vec![Compare::absent(key(k))], vec![put(k, value)], vec![read(k)]),
        Gen::UpdateIf { key: k, back, value } => txn(vec![Compare::mod_revision(key(k), at(back))], vec![put(k, value), read(k)], vec![read(k)]),
        Gen::DeleteIf { key: k, back } => txn(vec![Compare::mod_revision(key(k), at(back))], vec![TxnOp::Delete { key: key(k) }], vec![read(k)]),
        Gen::VersionIs { key: k, version } => {
            let c = Compare { key: key(k), target: CompareTarget::Version, op: CompareOp::Greater, value: version };
            txn(vec![c], vec![read(k)], vec![TxnOp::Delete { key: key(k) }])
        }
        Gen::Delete { key: k } => txn(vec![], vec![TxnOp::Delete { key: key(k) }], vec![]),
        Gen::Range { prefix, key: k, limit, back, keys_only, count_only } => {
            let base = match prefix {
                Some(p) => RangeRequest::prefix(Bytes::from_static(PREFIXES[p].as_bytes())),
                None => RangeRequest::key(key(k)),
            };
            KvRequest::Range(RangeRequest { limit, revision: if back == 0 { 0 } else { at(back) }, keys_only, count_only, ..base })
        }
        Gen::Compact { back } => KvRequest::Compact { revision: at(back) },
    }
}

/// `kv::Model` with its watches, as a backend under test would deliver them.
struct Reference {
    model: Model,
    now: Timestamp,
    watches: Vec<(WatchRequest, Vec<Seen>)>,
}

/// What a watch delivered, flattened: an event, or the stream's cancellation.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    Event(Event),
    Canceled(Revision),
}

impl Reference {
    fn apply(&mut self, req: &KvRequest) -> KvResult {
        let (result, events) = self.model.apply(self.now, req);
        for (w, seen) in &mut self.watches {
            if !matches!(seen.last(), Some(Seen::Canceled(_))) {
                seen.extend(events.iter().filter(|e| w.contains(&e.kv.key)).cloned().map(Seen::Event));
            }
        }
        result
    }

    fn watch(&mut self, req: WatchRequest) {
        let seen = match self.model.backlog(&req) {
            Ok(events) => events.into_iter().map(Seen::Event).collect(),
            Err(compact_revision) => vec![Seen::Canceled(compact_revision)],
        };
        self.watches.push((req, seen));
    }
}

/// A backend under test, seen as a fresh store: etcd is shared by every case of a run, so each
/// case has its own key prefix and counts revisions from the one it started at.
struct Subject {
    store: Store,
    prefix: Bytes,
    /// How far the backend's revisions are ahead of the model's.
    offset: Revision,
    /// How long the backend may take to deliver a watch event or sync a watch.
    settle: std::time::Duration,
    /// Whether compactions and watches mix freely. etcd releases older than the fixes of etcd
    /// issues 17529, 18089 and 19179 (2024-2025; Debian 12 ships 3.4.23) can drop an event from
    /// a watch when a compaction lands next to it (a third of the runs here failed so), and a
    /// watch that starts at the compacted revision misses a delete made there (18089: "watch 117
    /// delivered 2 of 3 items" in a CI run), so the etcd run compacts only before its first
    /// watch and opens no watch at the compacted revision.
    compacts_under_watches: bool,
}

impl Subject {
    fn key_in(&self, k: &Bytes) -> Bytes {
        [&self.prefix[..], &k[..]].concat().into()
    }

    fn key_out(&self, k: &Bytes) -> Bytes {
        k.slice(self.prefix.len()..)
    }

    fn rev_in(&self, r: Revision) -> Revision {
        if r > 0 { r + self.offset } else { r }
    }

    fn rev_out(&self, r: Revision) -> Revision {
        if r > 0 { r - self.offset } else { r }
    }

    fn range_in(&self, r: &RangeRequest) -> RangeRequest {
        let range_end = if r.range_end.is_empty() { r.range_end.clone() } else { self.key_in(&r.range_end) };
        RangeRequest { key: self.key_in(&r.key), range_end, revision: self.rev_in(r.revision), ..r.clone() }
    }

    fn request_in(&self, req: &KvRequest) -> KvRequest {
        let op = |op: &TxnOp| match op {
            TxnOp::Range(r) => TxnOp::Range(self.range_in(r)),
            TxnOp::Put { key, value, lease } => TxnOp::Put { key: self.key_in(key), value: value.clone(), lease: *lease },
            TxnOp::Delete { key } => TxnOp::Delete { key: self.key_in(key) },
        };
        match req {
            KvRequest::Range(r) => KvRequest::Range(self.range_in(r)),
            KvRequest::Txn(t) => KvRequest::Txn(TxnRequest {
                compare: t
                    .compare
                    .iter()
                    .map(|c| Compare {
                        key: self.key_in(&c.key),
                        value: if c.target == CompareTarget::Version { c.value } else { self.rev_in(c.value) },
                        ..c.clone()
                    })
                    .collect(),
                success: t.success.iter().map(op).collect(),
                failure: t.failure.iter().map(op).collect(),
            }),
            KvRequest::Compact { revision } => KvRequest::Compact { revision: self.rev_in(*revision) },
            KvRequest::LeaseGrant { .. } => req.clone(),
        }
    }

    fn kv_out(&self, kv: KeyValue) -> KeyValue {
        KeyValue { key: self.key_out(&kv.key), create_revision: self.rev_out(kv.create_revision), mod_revision: self.rev_out(kv.mod_revision), ..kv }
    }

    fn range_out(&self, r: RangeResponse) -> RangeResponse {
        RangeResponse { header_revision: self.rev_out(r.header_revision), kvs: r.kvs.into_iter().map(|kv| self.kv_out(kv)).collect(), ..r }
    }

    fn result_out(&self, r: KvResult) -> KvResult {
        match r {
            Ok(KvResponse::Range(r)) => Ok(KvResponse::Range(self.range_out(r))),
            Ok(KvResponse::Txn(t)) => Ok(KvResponse::Txn(TxnResponse {
                header_revision: self.rev_out(t.header_revision),
                succeeded: t.succeeded,
                responses: t
                    .responses
                    .into_iter()
                    .map(|r| match r {
                        TxnOpResponse::Range(r) => TxnOpResponse::Range(self.range_out(r)),
                        TxnOpResponse::Put => TxnOpResponse::Put,
                        TxnOpResponse::Delete { prev_kv } => TxnOpResponse::Delete { prev_kv: prev_kv.map(|kv| self.kv_out(kv)) },
                    })
                    .collect(),
            })),
            Ok(KvResponse::Compact { header_revision }) => Ok(KvResponse::Compact { header_revision: self.rev_out(header_revision) }),
            Err(KvError::Compacted { compact_revision }) => Err(KvError::Compacted { compact_revision: self.rev_out(compact_revision) }),
            Err(KvError::FutureRevision { current }) => Err(KvError::FutureRevision { current: self.rev_out(current) }),
            other => other,
        }
    }

    fn event_out(&self, e: Event) -> Event {
        Event { kind: e.kind, kv: self.kv_out(e.kv), prev_kv: e.prev_kv.map(|kv| self.kv_out(kv)) }
    }
}

/// A backend's watch stream, and what it delivered so far.
struct Stream {
    id: u64,
    rx: mpsc::UnboundedReceiver<WatchResponse>,
    seen: Vec<Seen>,
    ended: bool,
}

impl Stream {
    /// Reads the stream until it has delivered `count` items or ended. (etcd 3.4 answers a
    /// progress request out of order with events, so counting is the way to know a watch has
    /// caught up.)
    async fn sync(&mut self, subject: &Subject, count: usize) -> Result<(), TestCaseError> {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        while !self.ended && self.seen.len() < count {
            tokio::select! {
                resp = self.rx.recv() => self.take(subject, resp),
                _ = tokio::time::sleep_until(deadline) => prop_assert!(false, "watch {} delivered {} of {} items", self.id, self.seen.len(), count),
            }
        }
        Ok(())
    }

    /// Whatever else has arrived.
    fn drain(&mut self, subject: &Subject) {
        while let Ok(resp) = self.rx.try_recv() {
            self.take(subject, Some(resp));
        }
    }

    fn take(&mut self, subject: &Subject, resp: Option<WatchResponse>) {
        match resp {
            None => self.ended = true,
            Some(WatchResponse::Events { events, .. }) => self.seen.extend(events.into_iter().map(|e| Seen::Event(subject.event_out(e)))),
            Some(WatchResponse::Canceled { compact_revision }) => self.seen.push(Seen::Canceled(subject.rev_out(compact_revision))),
            Some(WatchResponse::Progress { .. }) => {}
        }
    }
}

/// Sends a run of transactions to SQLite while its thread is held, so they are taken as one
/// group, and compares each answer with the reference's for the same transactions one by one.
async fn group_conforms(subject: &Subject, reference: &mut Reference, run: &[&Gen]) -> Result<(), TestCaseError> {
    let Store::Sqlite(sqlite) = &subject.store else { panic!("only SQLite groups transactions") };
    let hold = sqlite.hold();
    let mut answers = Vec::new();
    for g in run {
        let req = request(g, reference.model.revision());
        let want = reference.apply(&req);
        answers.push((sqlite.call(subject.request_in(&req)), want, req));
    }
    drop(hold);
    for (got, want, req) in answers {
        let got = subject.result_out(got.await);
        prop_assert_eq!(&got, &want, "in a group {:?}", req);
    }
    Ok(())
}

/// Runs `steps` on the reference and on `subject`; fails at the first difference. With
/// `grouped`, runs of consecutive transactions go to the store together ([`group_conforms`]).
async fn conforms(subject: &Subject, steps: &[Step], grouped: bool) -> Result<(), TestCaseError> {
    let mut reference = Reference { model: Model::new(), now: "2024-01-01T00:00:00Z".parse().expect("a timestamp"), watches: Vec::new() };
    let mut streams: Vec<Stream> = Vec::new();
    let mut catching_up = false;
    let is_txn = |s: &Step| matches!(s, Step::Kv(g) if matches!(request(g, 1), KvRequest::Txn(_)));
    let mut i = 0;
    while i < steps.len() {
        let run: Vec<&Gen> = steps[i..]
            .iter()
            .take_while(|s| grouped && is_txn(s))
            .map(|s| match s {
                Step::Kv(g) => g,
                Step::Watch { .. } => unreachable!("a run holds transactions only"),
            })
            .collect();
        if run.len() > 1 {
            group_conforms(subject, &mut reference, &run).await?;
            i += run.len();
            continue;
        }
        let (s, index) = (&steps[i], i);
        i += 1;
        let revision = reference.model.revision();
        match s {
            Step::Kv(g) => {
                let req = request(g, revision);
                if matches!(req, KvRequest::Compact { .. }) && !subject.compacts_under_watches && !streams.is_empty() {
                    continue;
                }
                if matches!(req, KvRequest::Compact { .. }) && std::mem::take(&mut catching_up) {
                    // etcd moves a watch from the past to its synced group within 100 ms (later
                    // on a loaded machine: 3 s is allowed); until then a compaction past its
                    // start cancels it, where the model's watches are synced at once.
                    tokio::time::sleep(subject.settle * 30).await;
                }
                let want = reference.apply(&req);
                let got = subject.result_out(subject.store.call(subject.request_in(&req)).await);
                prop_assert_eq!(&got, &want, "step {} {:?}", index, req);
            }
            Step::Watch { prefix, back } => {
                let key = Bytes::from_static(PREFIXES[*prefix].as_bytes());
                let start = if *back == 0 { 0 } else { (revision - back).max(1) };
                if !subject.compacts_under_watches && start > 0 && start == reference.model.compact_revision() {
                    continue;
                }
                let req = WatchRequest { range_end: prefix_end(&key), key, start_revision: start, prev_kv: true, progress_notify: false };
                reference.watch(req.clone());
                let backend_req =
                    WatchRequest { key: subject.key_in(&req.key), range_end: subject.key_in(&req.range_end), start_revision: subject.rev_in(start), ..req };
                let (id, rx) = subject.store.watch(backend_req).await;
                let mut stream = Stream { id, rx, seen: Vec::new(), ended: false };
                stream.sync(subject, reference.watches.last().map_or(0, |(_, seen)| seen.len())).await?;
                streams.push(stream);
                catching_up |= start > 0;
            }
        }
    }
    for (stream, (_, want)) in streams.iter_mut().zip(&reference.watches) {
        stream.sync(subject, want.len()).await?;
    }
    // Time for anything extra to arrive.
    tokio::time::sleep(subject.settle).await;
    for (i, (stream, (req, want))) in streams.iter_mut().zip(&reference.watches).enumerate() {
        stream.drain(subject);
        prop_assert_eq!(&stream.seen, want, "watch {} {:?}", i, req);
        subject.store.cancel_watch(stream.id).await;
    }
    Ok(())
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(step(), 1..60)
}

/// A runner of `cases` cases whose shrinking is bounded: a case against etcd may wait out a
/// 20 s watch deadline, and proptest's default of 1,024 shrink steps turned one failing case
/// into hours of a CI run that looked hung.
fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config { cases, max_shrink_iters: 32, max_shrink_time: 120_000, ..Config::default() })
}

/// The suite on a fresh SQLite store per case.
fn sqlite_conforms(grouped: bool) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime");
    runner(64)
        .run(&steps(), |steps| {
            let dir = tempfile_dir();
            let store = Store::Sqlite(Sqlite::open(&dir.join("kv.db")).expect("SQLite opens"));
            let result = rt.block_on(conforms(
                &Subject { store, prefix: Bytes::new(), offset: 0, settle: std::time::Duration::ZERO, compacts_under_watches: true },
                &steps,
                grouped,
            ));
            let _ = std::fs::remove_dir_all(&dir);
            result
        })
        .unwrap();
}

#[test]
fn sqlite_matches_the_model() {
    sqlite_conforms(false);
}

#[test]
fn sqlite_matches_the_model_when_transactions_commit_in_groups() {
    sqlite_conforms(true);
}

#[test]
fn etcd_matches_the_model() {
    let etcd = kapi_tests::Etcd::start();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime");
    let config = EtcdConfig { servers: vec![etcd.url()], ca_file: None, cert_file: None, key_file: None, prefix: "/registry".into() };
    let store = Store::Etcd(rt.block_on(Etcd::connect(&config)).expect("etcd client"));
    let case = std::cell::Cell::new(0u64);
    runner(64)
        .run(&steps(), |steps| {
            case.set(case.get() + 1);
            rt.block_on(async {
                // A write outside every case's keys starts the case past any earlier compaction.
                let start =
                    KvRequest::Txn(TxnRequest { success: vec![TxnOp::Put { key: "/start".into(), value: Bytes::new(), lease: 0 }], ..Default::default() });
                let Ok(KvResponse::Txn(t)) = store.call(start).await else { panic!("etcd answers") };
                let subject = Subject {
                    store: store.clone(),
                    prefix: Bytes::from(format!("/case{}", case.get())),
                    offset: t.header_revision - 1,
                    settle: std::time::Duration::from_millis(100),
                    compacts_under_watches: false,
                };
                conforms(&subject, &steps, false).await
            })
        })
        .unwrap_or_else(|e| panic!("{e}\netcd's log:\n{}", etcd.log()));
}

fn tempfile_dir() -> std::path::PathBuf {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).expect("OS randomness");
    let dir = std::env::temp_dir().join(format!("kapi-conformance-{}-{}", std::process::id(), u64::from_le_bytes(b)));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    dir
}

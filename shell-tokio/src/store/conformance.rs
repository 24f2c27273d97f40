//! The storage-protocol conformance suite: property-generated sequences of KV operations and
//! watches run against `kv::Model` (the reference semantics) and a real backend must give the
//! same answers, revisions and watch streams. Leases are left out: their ids are each store's
//! own.

use bytes::Bytes;
use jiff::Timestamp;
use kapi_core::kv::{
    Compare, CompareOp, CompareTarget, Event, KvRequest, KvResult, Model, RangeRequest, Revision, TxnOp, TxnRequest, WatchRequest, WatchResponse, prefix_end,
};
use proptest::prelude::*;
use tokio::sync::mpsc;

use super::Sqlite;

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

fn drain(rx: &mut mpsc::UnboundedReceiver<WatchResponse>) -> Vec<Seen> {
    let mut seen = Vec::new();
    while let Ok(resp) = rx.try_recv() {
        match resp {
            WatchResponse::Events { events, .. } => seen.extend(events.into_iter().map(Seen::Event)),
            WatchResponse::Canceled { compact_revision } => seen.push(Seen::Canceled(compact_revision)),
            WatchResponse::Progress { .. } => {}
        }
    }
    seen
}

/// Runs `steps` on the reference and on SQLite; fails at the first difference.
async fn sqlite_conforms(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let dir = std::env::temp_dir().join(format!("kapi-conformance-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let store = Sqlite::open(&dir.join("kv.db")).expect("SQLite opens");
    let mut reference = Reference { model: Model::new(), now: "2024-01-01T00:00:00Z".parse().expect("a timestamp"), watches: Vec::new() };
    let mut streams = Vec::new();
    let result = async {
        for (i, s) in steps.iter().enumerate() {
            let revision = reference.model.revision();
            match s {
                Step::Kv(g) => {
                    let req = request(g, revision);
                    let want = reference.apply(&req);
                    let got = store.call(req.clone()).await;
                    prop_assert_eq!(&got, &want, "step {} {:?}", i, req);
                }
                Step::Watch { prefix, back } => {
                    let key = Bytes::from_static(PREFIXES[*prefix].as_bytes());
                    let start = if *back == 0 { 0 } else { (revision - back).max(1) };
                    let req = WatchRequest { range_end: prefix_end(&key), key, start_revision: start, prev_kv: true, progress_notify: false };
                    reference.watch(req.clone());
                    streams.push(store.watch(req).await.1);
                }
            }
        }
        for (i, (rx, (req, want))) in streams.iter_mut().zip(&reference.watches).enumerate() {
            prop_assert_eq!(&drain(rx), want, "watch {} {:?}", i, req);
        }
        Ok(())
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn rand_suffix() -> u64 {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).expect("OS randomness");
    u64::from_le_bytes(b)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn sqlite_matches_the_model(steps in prop::collection::vec(step(), 1..60)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        rt.block_on(sqlite_conforms(steps))?;
    }
}

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

type Op = StorageOp<String>;

fn t0() -> Timestamp {
    Timestamp::UNIX_EPOCH
}

fn put_value(v: &str) -> impl FnMut(Option<&KeyValue>) -> Result<Transform, String> + '_ {
    move |_| Ok(Transform::Put(Bytes::from(v.to_string())))
}

#[test]
fn create_then_create_again_is_already_exists() {
    let mut m = Model::new();
    let req = StorageRequest::Create { key: "/r/a".into(), value: "1".into(), ttl_seconds: None };
    let (r, events) = run_against_model(&mut m, t0(), Op::new(req.clone()), put_value("x"));
    assert!(matches!(r, Ok(Outcome::Created(ref kv)) if kv.mod_revision == 2));
    assert_eq!(events.len(), 1);
    let (r, _) = run_against_model(&mut m, t0(), Op::new(req), put_value("x"));
    assert_eq!(r, Err(StorageError::AlreadyExists));
}

#[test]
fn mutate_on_a_stale_cached_value_transforms_again() {
    let mut m = Model::new();
    let create = StorageRequest::Create { key: "/r/a".into(), value: "1".into(), ttl_seconds: None };
    let Ok(Outcome::Created(stale)) = run_against_model(&mut m, t0(), Op::new(create), put_value("x")).0 else { panic!() };
    let update = StorageRequest::Mutate { key: "/r/a".into(), cached: None, dry_run: false };
    run_against_model(&mut m, t0(), Op::new(update), put_value("2")).0.unwrap();

    let mut seen = Vec::new();
    let op = Op::new(StorageRequest::Mutate { key: "/r/a".into(), cached: Some(stale), dry_run: false });
    let (r, _) = run_against_model(&mut m, t0(), op, |cur| {
        let cur = cur.unwrap();
        seen.push(cur.value.clone());
        Ok(Transform::Put(Bytes::from(format!("{}+1", String::from_utf8_lossy(&cur.value)))))
    });
    assert_eq!(seen, vec![Bytes::from("1"), Bytes::from("2")]);
    let Ok(Outcome::Written { kv, .. }) = r else { panic!("{r:?}") };
    assert_eq!(kv.value, "2+1");
    assert_eq!(kv.version, 3);
}

/// A refusal (a resourceVersion precondition) or a no-op decided on a stale cached value is
/// decided again on the stored value, as kube's GuaranteedUpdate does: a client that read the
/// newest object from storage gets no conflict because the cache lags.
#[test]
fn refusals_and_no_ops_on_a_stale_cached_value_are_decided_again_on_the_stored_one() {
    let mut m = Model::new();
    let create = StorageRequest::Create { key: "/r/a".into(), value: "1".into(), ttl_seconds: None };
    let Ok(Outcome::Created(stale)) = run_against_model(&mut m, t0(), Op::new(create), put_value("x")).0 else { panic!() };
    let update = StorageRequest::Mutate { key: "/r/a".into(), cached: None, dry_run: false };
    run_against_model(&mut m, t0(), Op::new(update), put_value("2")).0.unwrap();

    let op = Op::new(StorageRequest::Mutate { key: "/r/a".into(), cached: Some(stale.clone()), dry_run: false });
    let (r, _) = run_against_model(&mut m, t0(), op, |cur| if cur.unwrap().value == "2" { Ok(Transform::Put("3".into())) } else { Err("stale".to_string()) });
    assert!(matches!(r, Ok(Outcome::Written { ref kv, .. }) if kv.value == "3"), "{r:?}");

    let op = Op::new(StorageRequest::Mutate { key: "/r/a".into(), cached: Some(stale), dry_run: false });
    let (r, _) = run_against_model(&mut m, t0(), op, |cur| Ok(if cur.unwrap().value == "1" { Transform::Keep } else { Transform::Put("4".into()) }));
    assert!(matches!(r, Ok(Outcome::Written { ref kv, .. }) if kv.value == "4"), "{r:?}");

    let op = Op::new(StorageRequest::Mutate { key: "/r/a".into(), cached: None, dry_run: false });
    assert_eq!(run_against_model(&mut m, t0(), op, |_| Err("no".to_string())).0, Err(StorageError::Rejected("no".into())));
}

/// A write carried alongside lands with the key's own only while its key is where it was read:
/// a create then fails with what the key holds now, an update asks its transform again.
#[test]
fn writes_alongside_land_with_the_key_or_not_at_all() {
    let mut m = Model::new();
    let quota = StorageRequest::Create { key: "/q".into(), value: "0".into(), ttl_seconds: None };
    let Ok(Outcome::Created(q)) = run_against_model(&mut m, t0(), Op::new(quota), put_value("x")).0 else { panic!() };
    let charge = |rev, value: &str| vec![Alongside { key: "/q".into(), mod_revision: rev, value: Bytes::from(value.to_string()) }];

    let mut op = Op::new(StorageRequest::Create { key: "/r/a".into(), value: "a".into(), ttl_seconds: None });
    op.set_alongside(charge(q.mod_revision, "1"));
    let Ok(Outcome::Created(a)) = run_against_model(&mut m, t0(), op, put_value("x")).0 else { panic!() };
    let now_q = |m: &mut Model| match m.apply(t0(), &KvRequest::Range(RangeRequest::key("/q"))).0 {
        Ok(KvResponse::Range(r)) => r.kvs[0].clone(),
        other => panic!("{other:?}"),
    };
    let q1 = now_q(&mut m);
    assert_eq!((q1.value.clone(), q1.mod_revision), (Bytes::from("1"), a.mod_revision));

    // Read at the old revision: nothing is written, and the quota is reported as it is.
    let mut op = Op::new(StorageRequest::Create { key: "/r/b".into(), value: "b".into(), ttl_seconds: None });
    op.set_alongside(charge(q.mod_revision, "2"));
    let (r, events) = run_against_model(&mut m, t0(), op, put_value("x"));
    assert_eq!(r, Err(StorageError::Moved(vec![(Bytes::from("/q"), Some(q1.clone()))])));
    assert!(events.is_empty());
    // An existing key is still AlreadyExists.
    let mut op = Op::new(StorageRequest::Create { key: "/r/a".into(), value: "a".into(), ttl_seconds: None });
    op.set_alongside(charge(q.mod_revision, "2"));
    assert_eq!(run_against_model(&mut m, t0(), op, put_value("x")).0, Err(StorageError::AlreadyExists));

    // An update: the transform is asked again and its new charge lands with it.
    let mut op = Op::new(StorageRequest::Mutate { key: "/r/a".into(), cached: None, dry_run: false });
    let mut asked = 0;
    let mut events = Vec::new();
    let result = loop {
        match op.poll(t0()).unwrap() {
            StorageEffect::Kv(req) => {
                let (r, evs) = m.apply(t0(), &req);
                events.extend(evs);
                op.handle(t0(), StorageEvent::Kv(r));
            }
            StorageEffect::Transform(_) => {
                asked += 1;
                let moved = op.take_moved();
                assert_eq!(moved.is_some(), asked == 2);
                let rev = if asked == 1 { q.mod_revision } else { q1.mod_revision };
                op.set_alongside(charge(rev, "3"));
                op.handle(t0(), StorageEvent::Transformed(Ok(Transform::Put("a2".into()))));
            }
            StorageEffect::Done(r) => break r,
        }
    };
    assert!(matches!(result, Ok(Outcome::Written { ref kv, .. }) if kv.value == "a2"), "{result:?}");
    assert_eq!((asked, now_q(&mut m).value), (2, Bytes::from("3")));
    assert_eq!(events.len(), 2, "the object and its quota, in one revision");
}

#[test]
fn transform_rejection_and_keep_write_nothing() {
    let mut m = Model::new();
    let op = Op::new(StorageRequest::Mutate { key: "/r/a".into(), cached: None, dry_run: false });
    let (r, _) = run_against_model(&mut m, t0(), op, |_| Err("no".to_string()));
    assert_eq!(r, Err(StorageError::Rejected("no".into())));
    let op = Op::new(StorageRequest::Mutate { key: "/r/a".into(), cached: None, dry_run: false });
    let (r, _) = run_against_model(&mut m, t0(), op, |_| Ok(Transform::Keep));
    assert_eq!(r, Ok(Outcome::Unchanged(None)));
    assert_eq!(m.revision(), 1);
}

#[test]
fn list_reads_a_past_revision_until_compacted() {
    let mut m = Model::new();
    for k in ["/r/a", "/r/b"] {
        let c = StorageRequest::Create { key: Bytes::from(k), value: "v".into(), ttl_seconds: None };
        run_against_model(&mut m, t0(), Op::new(c), put_value("")).0.unwrap();
    }
    let list = |rev| StorageRequest::List { prefix: "/r/".into(), start: None, limit: 0, revision: rev };
    let Ok(Outcome::Listed(r)) = run_against_model(&mut m, t0(), Op::new(list(2)), put_value("")).0 else { panic!() };
    assert_eq!(r.kvs.len(), 1);
    m.apply(t0(), &KvRequest::Compact { revision: 3 }).0.unwrap();
    let (r, _) = run_against_model(&mut m, t0(), Op::new(list(2)), put_value(""));
    assert_eq!(r, Err(StorageError::Compacted { compact_revision: 3 }));
}

#[derive(Clone, Debug)]
enum Step {
    Create(u8, u8),
    Put(u8, u8),
    Delete(u8),
    Get(u8),
    List(i64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..4, any::<u8>()).prop_map(|(k, v)| Step::Create(k, v)),
        (0u8..4, any::<u8>()).prop_map(|(k, v)| Step::Put(k, v)),
        (0u8..4).prop_map(Step::Delete),
        (0u8..4).prop_map(Step::Get),
        (0i64..4).prop_map(Step::List),
    ]
}

fn key(k: u8) -> Bytes {
    Bytes::from(format!("/r/{k}"))
}

proptest! {
    /// Every storage operation, run on `kv::Model`, agrees with a plain map of the live keys,
    /// and every write moves the revision by exactly one.
    #[test]
    fn storage_ops_agree_with_a_map(steps in proptest::collection::vec(step(), 1..60)) {
        let mut m = Model::new();
        let mut oracle: BTreeMap<Bytes, Bytes> = BTreeMap::new();
        for s in steps {
            let before = m.revision();
            match s {
                Step::Create(k, v) => {
                    let value = Bytes::from(vec![v]);
                    let r = run_against_model(&mut m, t0(), Op::new(StorageRequest::Create { key: key(k), value: value.clone(), ttl_seconds: None }), put_value("")).0;
                    if let std::collections::btree_map::Entry::Vacant(e) = oracle.entry(key(k)) {
                        prop_assert!(matches!(r, Ok(Outcome::Created(_))));
                        e.insert(value);
                        prop_assert_eq!(m.revision(), before + 1);
                    } else {
                        prop_assert_eq!(r, Err(StorageError::AlreadyExists));
                        prop_assert_eq!(m.revision(), before);
                    }
                }
                Step::Put(k, v) => {
                    let value = Bytes::from(vec![v]);
                    let r = run_against_model(&mut m, t0(), Op::new(StorageRequest::Mutate { key: key(k), cached: None, dry_run: false }), |_| Ok(Transform::Put(value.clone()))).0;
                    let changed = oracle.get(&key(k)) != Some(&value);
                    prop_assert_eq!(matches!(r, Ok(Outcome::Written { .. })), changed);
                    oracle.insert(key(k), value);
                    prop_assert_eq!(m.revision(), before + changed as i64);
                }
                Step::Delete(k) => {
                    let r = run_against_model(&mut m, t0(), Op::new(StorageRequest::Mutate { key: key(k), cached: None, dry_run: false }), |_| Ok(Transform::Delete)).0;
                    let existed = oracle.remove(&key(k)).is_some();
                    prop_assert_eq!(matches!(r, Ok(Outcome::Deleted { .. })), existed);
                }
                Step::Get(k) => {
                    let r = run_against_model(&mut m, t0(), Op::new(StorageRequest::Get { key: key(k), revision: 0 }), put_value("")).0;
                    let Ok(Outcome::Found(kv)) = r else { panic!() };
                    prop_assert_eq!(kv.map(|kv| kv.value), oracle.get(&key(k)).cloned());
                }
                Step::List(limit) => {
                    let r = run_against_model(&mut m, t0(), Op::new(StorageRequest::List { prefix: "/r/".into(), start: None, limit, revision: 0 }), put_value("")).0;
                    let Ok(Outcome::Listed(r)) = r else { panic!() };
                    let want: Vec<_> = oracle.iter().take(if limit == 0 { usize::MAX } else { limit as usize }).map(|(k, v)| (k.clone(), v.clone())).collect();
                    let got: Vec<_> = r.kvs.iter().map(|kv| (kv.key.clone(), kv.value.clone())).collect();
                    prop_assert_eq!(got, want);
                    prop_assert_eq!(r.count as usize, oracle.len());
                }
            }
        }
    }
}

//! The storage protocol: Kubernetes storage operations (create, get, list, count, guaranteed
//! update, delete) carried out as KV requests, with kube-apiserver's etcd3 store semantics.
//!
//! A [`StorageOp`] is a machine. Call order:
//! 1. [`StorageOp::new`] with a [`StorageRequest`];
//! 2. loop on [`StorageOp::poll`]: for [`StorageEffect::Kv`], send the request to the store and
//!    feed its answer with [`StorageOp::handle`] ([`StorageEvent::Kv`]); for
//!    [`StorageEffect::Transform`], decide what the key becomes and feed
//!    [`StorageEvent::Transformed`]; [`StorageEffect::Done`] ends the operation.
//!
//! At most one request is outstanding at a time; `poll` returns `None` while one is.
//! A guaranteed update ([`StorageRequest::Mutate`]) writes with a transaction that compares the
//! key's `mod_revision` with the one its transform saw, and on a conflict asks for the transform
//! again on the newer value, so no update is ever based on a stale read.
//!
//! A create or guaranteed update may carry writes of other keys ([`Alongside`]), made in the
//! same transaction only if those keys are still at the revisions the caller read them at:
//! a quota charged with the object it counts. When one of them moved, a create ends with
//! [`StorageError::Moved`] and an update asks its transform again, after noting what they hold
//! now ([`StorageOp::take_moved`]).

pub mod compactor;
pub mod keys;

use bytes::Bytes;
use jiff::Timestamp;

use crate::kv::*;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageRequest {
    /// One key, at `revision` (0: current).
    Get { key: Bytes, revision: Revision },
    /// Keys under `prefix` from `start` (inclusive; default: the prefix itself), at most `limit`
    /// (0: all), at `revision` (0: current).
    List { prefix: Bytes, start: Option<Bytes>, limit: i64, revision: Revision },
    /// The store's current revision, read with a count-only read of the single key `key`: it
    /// costs the same whatever the size of the collection under it (a count of the collection
    /// scanned every stored object in SQLite, a tenth of a LIST's time for 50,000 pods).
    Revision { key: Bytes },
    /// Create `key` if it does not exist; with a TTL the key is attached to a new lease.
    Create { key: Bytes, value: Bytes, ttl_seconds: Option<i64> },
    /// Check that `key` could be created with `value`, and write nothing (`dryRun`).
    CreateDryRun { key: Bytes, value: Bytes },
    /// Read-transform-write `key` until the write lands on the version the transform saw.
    /// `cached` is a value the caller believes current; it saves the first read, and a conflict
    /// corrects it. With `dry_run` the transform's decision is reported and not written.
    Mutate { key: Bytes, cached: Option<KeyValue>, dry_run: bool },
}

/// What a transform decides for the key (the `tryUpdate` of kube's `GuaranteedUpdate`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transform {
    Put(Bytes),
    Delete,
    /// Leave the key as it is.
    Keep,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Found(Option<KeyValue>),
    Listed(RangeResponse),
    /// The store's revision.
    AtRevision(Revision),
    Created(KeyValue),
    /// The key was created or updated by a mutate.
    Written {
        kv: KeyValue,
        prev: Option<KeyValue>,
    },
    /// The key was deleted at `revision`.
    Deleted {
        prev: KeyValue,
        revision: Revision,
    },
    /// The transform kept the key as it was (`None`: it does not exist).
    Unchanged(Option<KeyValue>),
    /// A dry run: what would be written (`None`: a delete) over `prev`.
    WouldWrite {
        value: Option<Bytes>,
        prev: Option<KeyValue>,
    },
}

/// A key written with the operation's own, if it is still at `mod_revision`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alongside {
    pub key: Bytes,
    pub mod_revision: Revision,
    pub value: Bytes,
}

/// The keys written alongside, as they are now (`None`: gone).
pub type Moved = Vec<(Bytes, Option<KeyValue>)>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageError<E> {
    AlreadyExists,
    /// A key to be written alongside a create is no longer at the revision it was read at.
    Moved(Moved),
    Compacted {
        compact_revision: Revision,
    },
    FutureRevision {
        current: Revision,
    },
    /// The store failed or could not be reached.
    Kv(KvError),
    /// The transform refused the change.
    Rejected(E),
}

pub type StorageResult<E> = Result<Outcome, StorageError<E>>;

#[derive(Debug)]
pub enum StorageEffect<E> {
    Kv(KvRequest),
    /// Decide what the key (currently `current`) becomes; answer with [`StorageEvent::Transformed`].
    Transform(Option<KeyValue>),
    Done(StorageResult<E>),
}

#[derive(Debug)]
pub enum StorageEvent<E> {
    Kv(KvResult),
    Transformed(Result<Transform, E>),
}

#[derive(Debug)]
enum State<E> {
    /// The next request to send.
    Send(KvRequest, Awaiting),
    /// A request is out; its answer is interpreted as `Awaiting` says.
    Waiting(Awaiting),
    /// The transform must be asked about `current`, which is known to be the stored value
    /// (`Fresh`) or a cached value that may be stale.
    Ask(Option<KeyValue>, Read),
    /// The transform was asked about `current`.
    Asked(Option<KeyValue>, Read),
    Finished(StorageResult<E>),
    Gone,
}

/// Where the value a transform is asked about came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    /// Read from storage by this operation.
    Fresh,
    /// The caller's cached value.
    Cached,
}

#[derive(Clone, Debug)]
enum Awaiting {
    Get,
    List,
    Revision,
    Lease { key: Bytes, value: Bytes },
    Create { key: Bytes, value: Bytes, lease: i64 },
    CreateDryRun { value: Bytes },
    MutateRead,
    MutateWrite { prev: Option<KeyValue>, next: Option<Bytes> },
}

/// One storage operation; see the module documentation for the call order.
#[derive(Debug)]
pub struct StorageOp<E> {
    key: Bytes,
    dry_run: bool,
    state: State<E>,
    /// What the next write of the key carries with it.
    alongside: Vec<Alongside>,
    /// The keys written alongside, as the last failed write found them.
    moved: Option<Moved>,
}

impl<E: std::fmt::Debug> StorageOp<E> {
    pub fn new(req: StorageRequest) -> Self {
        let dry_run = matches!(req, StorageRequest::Mutate { dry_run: true, .. });
        let (key, state) = match req {
            StorageRequest::Get { key, revision } => {
                let r = RangeRequest { revision, ..RangeRequest::key(key.clone()) };
                (key, State::Send(KvRequest::Range(r), Awaiting::Get))
            }
            StorageRequest::List { prefix, start, limit, revision } => {
                let end = prefix_end(&prefix);
                let r = RangeRequest { key: start.unwrap_or_else(|| prefix.clone()), range_end: end, limit, revision, ..Default::default() };
                (prefix, State::Send(KvRequest::Range(r), Awaiting::List))
            }
            StorageRequest::Revision { key } => {
                let r = RangeRequest { count_only: true, ..RangeRequest::key(key.clone()) };
                (key, State::Send(KvRequest::Range(r), Awaiting::Revision))
            }
            StorageRequest::Create { key, value, ttl_seconds: Some(ttl) } => {
                let awaiting = Awaiting::Lease { key: key.clone(), value };
                (key, State::Send(KvRequest::LeaseGrant { ttl_seconds: ttl }, awaiting))
            }
            StorageRequest::Create { key, value, ttl_seconds: None } => {
                let state = State::Send(create_txn(&key, &value, 0, &[]), Awaiting::Create { key: key.clone(), value, lease: 0 });
                (key, state)
            }
            StorageRequest::CreateDryRun { key, value } => {
                let r = KvRequest::Range(RangeRequest { count_only: true, ..RangeRequest::key(key.clone()) });
                (key, State::Send(r, Awaiting::CreateDryRun { value }))
            }
            StorageRequest::Mutate { key, cached: Some(kv), .. } => (key, State::Ask(Some(kv), Read::Cached)),
            StorageRequest::Mutate { key, cached: None, .. } => {
                let r = KvRequest::Range(RangeRequest::key(key.clone()));
                (key, State::Send(r, Awaiting::MutateRead))
            }
        };
        StorageOp { key, dry_run, state, alongside: Vec::new(), moved: None }
    }

    /// The writes the key's next write carries (see the module documentation): for a create,
    /// before its first poll; for an update, before the transform's answer.
    pub fn set_alongside(&mut self, alongside: Vec<Alongside>) {
        if let State::Send(req, Awaiting::Create { key, value, lease }) = &mut self.state {
            *req = create_txn(key, value, *lease, &alongside);
        }
        self.alongside = alongside;
    }

    /// What the keys written alongside hold, when the last write found that one moved.
    pub fn take_moved(&mut self) -> Option<Moved> {
        self.moved.take()
    }

    pub fn poll(&mut self, _now: Timestamp) -> Option<StorageEffect<E>> {
        match std::mem::replace(&mut self.state, State::Gone) {
            State::Send(req, awaiting) => {
                self.state = State::Waiting(awaiting);
                Some(StorageEffect::Kv(req))
            }
            State::Ask(current, read) => {
                self.state = State::Asked(current.clone(), read);
                Some(StorageEffect::Transform(current))
            }
            State::Finished(result) => Some(StorageEffect::Done(result)),
            other => {
                self.state = other;
                None
            }
        }
    }

    pub fn handle(&mut self, _now: Timestamp, event: StorageEvent<E>) {
        self.state = match (std::mem::replace(&mut self.state, State::Gone), event) {
            (State::Waiting(awaiting), StorageEvent::Kv(result)) => self.answered(awaiting, result),
            (State::Asked(current, read), StorageEvent::Transformed(result)) => self.transformed(current, read, result),
            (state, event) => panic!("storage op in state {state:?} cannot take {event:?}"),
        }
    }

    fn answered(&mut self, awaiting: Awaiting, result: KvResult) -> State<E> {
        let resp = match result {
            Ok(r) => r,
            Err(KvError::Compacted { compact_revision }) => return State::Finished(Err(StorageError::Compacted { compact_revision })),
            Err(KvError::FutureRevision { current }) => return State::Finished(Err(StorageError::FutureRevision { current })),
            Err(e) => return State::Finished(Err(StorageError::Kv(e))),
        };
        match (awaiting, resp) {
            (Awaiting::Get, KvResponse::Range(r)) => State::Finished(Ok(Outcome::Found(r.kvs.into_iter().next()))),
            (Awaiting::List, KvResponse::Range(r)) => State::Finished(Ok(Outcome::Listed(r))),
            (Awaiting::Revision, KvResponse::Range(r)) => State::Finished(Ok(Outcome::AtRevision(r.header_revision))),
            (Awaiting::Lease { key, value }, KvResponse::LeaseGrant { id, .. }) => {
                State::Send(create_txn(&key, &value, id, &self.alongside), Awaiting::Create { key, value, lease: id })
            }
            (Awaiting::Create { key, value, lease }, KvResponse::Txn(t)) => {
                if t.succeeded {
                    let kv = KeyValue { key, value, create_revision: t.header_revision, mod_revision: t.header_revision, version: 1, lease };
                    State::Finished(Ok(Outcome::Created(kv)))
                } else if self.alongside.is_empty() || current_of(&t).is_some() {
                    State::Finished(Err(StorageError::AlreadyExists))
                } else {
                    State::Finished(Err(StorageError::Moved(self.alongside_now(&t))))
                }
            }
            (Awaiting::CreateDryRun { value }, KvResponse::Range(r)) => {
                if r.count > 0 {
                    State::Finished(Err(StorageError::AlreadyExists))
                } else {
                    State::Finished(Ok(Outcome::WouldWrite { value: Some(value), prev: None }))
                }
            }
            (Awaiting::MutateRead, KvResponse::Range(r)) => State::Ask(r.kvs.into_iter().next(), Read::Fresh),
            (Awaiting::MutateWrite { prev, next }, KvResponse::Txn(t)) => {
                if !t.succeeded {
                    // Someone else wrote first: transform again from what is there now.
                    if !self.alongside.is_empty() {
                        self.moved = Some(self.alongside_now(&t));
                    }
                    return State::Ask(current_of(&t), Read::Fresh);
                }
                let rev = t.header_revision;
                match next {
                    Some(value) => {
                        let kv = KeyValue {
                            key: self.key.clone(),
                            value,
                            create_revision: prev.as_ref().map_or(rev, |p| p.create_revision),
                            mod_revision: rev,
                            version: prev.as_ref().map_or(1, |p| p.version + 1),
                            lease: prev.as_ref().map_or(0, |p| p.lease),
                        };
                        State::Finished(Ok(Outcome::Written { kv, prev }))
                    }
                    None => {
                        let prev = match t.responses.into_iter().next() {
                            Some(TxnOpResponse::Delete { prev_kv: Some(p) }) => p,
                            _ => prev.expect("a delete is only sent for an existing key"),
                        };
                        State::Finished(Ok(Outcome::Deleted { prev, revision: rev }))
                    }
                }
            }
            (awaiting, resp) => State::Finished(Err(StorageError::Kv(KvError::Other(format!("unexpected answer {resp:?} to a {awaiting:?} request"))))),
        }
    }

    fn transformed(&self, current: Option<KeyValue>, read: Read, result: Result<Transform, E>) -> State<E> {
        // A refusal or a no-op decided on a cached value may come from its being stale: read
        // the stored value and ask again, as kube's GuaranteedUpdate does before it answers
        // (a resourceVersion precondition checked against a lagging cache is no conflict).
        let no_op = |t: &Transform| match t {
            Transform::Keep => true,
            Transform::Put(value) => current.as_ref().is_some_and(|kv| kv.value == *value),
            Transform::Delete => current.is_none(),
        };
        if read == Read::Cached && result.as_ref().map_or(true, no_op) {
            return State::Send(KvRequest::Range(RangeRequest::key(self.key.clone())), Awaiting::MutateRead);
        }
        let transform = match result {
            Ok(t) => t,
            Err(e) => return State::Finished(Err(StorageError::Rejected(e))),
        };
        let guard = match &current {
            Some(kv) => Compare::mod_revision(self.key.clone(), kv.mod_revision),
            None => Compare::absent(self.key.clone()),
        };
        let (op, next) = match transform {
            Transform::Keep => return State::Finished(Ok(Outcome::Unchanged(current))),
            Transform::Delete if current.is_none() => return State::Finished(Ok(Outcome::Unchanged(None))),
            Transform::Put(value) if current.as_ref().is_some_and(|kv| kv.value == value) => {
                return State::Finished(Ok(Outcome::Unchanged(current)));
            }
            Transform::Put(value) => {
                let lease = current.as_ref().map_or(0, |kv| kv.lease);
                (TxnOp::Put { key: self.key.clone(), value: value.clone(), lease }, Some(value))
            }
            Transform::Delete => (TxnOp::Delete { key: self.key.clone() }, None),
        };
        if self.dry_run {
            return State::Finished(Ok(Outcome::WouldWrite { value: next, prev: current }));
        }
        let with = if next.is_some() { self.alongside.as_slice() } else { &[] };
        let mut txn = TxnRequest { compare: vec![guard], success: vec![op], failure: vec![TxnOp::Range(RangeRequest::key(self.key.clone()))] };
        add_alongside(&mut txn, with);
        State::Send(KvRequest::Txn(txn), Awaiting::MutateWrite { prev: current, next })
    }

    /// The keys written alongside as a failed transaction's `failure` branch read them (after
    /// the key's own read).
    fn alongside_now(&self, t: &TxnResponse) -> Moved {
        let ranges = t.responses.iter().skip(1).map(|r| match r {
            TxnOpResponse::Range(r) => r.kvs.first().cloned(),
            _ => None,
        });
        self.alongside.iter().map(|a| a.key.clone()).zip(ranges).collect()
    }
}

fn create_txn(key: &Bytes, value: &Bytes, lease: i64, alongside: &[Alongside]) -> KvRequest {
    let mut txn = TxnRequest {
        compare: vec![Compare::absent(key.clone())],
        success: vec![TxnOp::Put { key: key.clone(), value: value.clone(), lease }],
        failure: vec![],
    };
    if !alongside.is_empty() {
        txn.failure.push(TxnOp::Range(RangeRequest::key(key.clone())));
        add_alongside(&mut txn, alongside);
    }
    KvRequest::Txn(txn)
}

/// Guards and writes of the keys written alongside, and their reads when it fails.
fn add_alongside(txn: &mut TxnRequest, alongside: &[Alongside]) {
    for a in alongside {
        txn.compare.push(Compare::mod_revision(a.key.clone(), a.mod_revision));
        txn.success.push(TxnOp::Put { key: a.key.clone(), value: a.value.clone(), lease: 0 });
        txn.failure.push(TxnOp::Range(RangeRequest::key(a.key.clone())));
    }
}

/// The key's value read by a failed guarded write's `failure` branch (its first read; the
/// keys written alongside follow).
fn current_of(t: &TxnResponse) -> Option<KeyValue> {
    match t.responses.first() {
        Some(TxnOpResponse::Range(r)) => r.kvs.first().cloned(),
        _ => None,
    }
}

/// Runs `op` to completion against `model`, answering transforms with `transform`: the
/// synchronous driver the tests and the simulator's fault-free paths use.
pub fn run_against_model<E: std::fmt::Debug>(
    model: &mut Model,
    now: Timestamp,
    mut op: StorageOp<E>,
    mut transform: impl FnMut(Option<&KeyValue>) -> Result<Transform, E>,
) -> (StorageResult<E>, Vec<Event>) {
    let mut events = Vec::new();
    loop {
        match op.poll(now).expect("a storage op driven synchronously always has a next step") {
            StorageEffect::Kv(req) => {
                let (result, evs) = model.apply(now, &req);
                events.extend(evs);
                op.handle(now, StorageEvent::Kv(result));
            }
            StorageEffect::Transform(current) => {
                let t = transform(current.as_ref());
                op.handle(now, StorageEvent::Transformed(t));
            }
            StorageEffect::Done(result) => return (result, events),
        }
    }
}

#[cfg(test)]
mod tests;

//! The key-value protocol kapi's storage speaks: the subset of etcd v3 that kube-apiserver uses.
//!
//! Every backend (the [`Model`] here, SQLite and etcd in the tokio shell) answers a [`KvRequest`]
//! with a [`KvResponse`] or a [`KvError`], and streams [`WatchResponse`]s for a [`WatchRequest`],
//! with etcd's semantics: one store-wide revision that every write transaction increments once,
//! per-key `create_revision`/`mod_revision`/`version`, reads at a past revision until it is
//! compacted, and watches that replay from a revision.

mod model;

pub use model::Model;

use bytes::Bytes;

/// A store revision (etcd's `mod_revision` space). Revisions start at 1.
pub type Revision = i64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    pub key: Bytes,
    pub value: Bytes,
    pub create_revision: Revision,
    pub mod_revision: Revision,
    /// Number of writes to the key since it was created (1 after the create).
    pub version: i64,
    /// The lease the key is attached to, 0 for none.
    pub lease: i64,
}

impl KeyValue {
    /// The key as a put at revision `rev` leaves it, after `prev` (its current version, if
    /// any): a new key is created at `rev`, an existing one keeps its create revision and
    /// counts one more version.
    pub fn put(key: &Bytes, value: &Bytes, lease: i64, prev: Option<&KeyValue>, rev: Revision) -> KeyValue {
        KeyValue {
            key: key.clone(),
            value: value.clone(),
            create_revision: prev.map_or(rev, |p| p.create_revision),
            mod_revision: rev,
            version: prev.map_or(1, |p| p.version + 1),
            lease,
        }
    }
}

/// The end of the key range holding every key that starts with `prefix` (etcd's `GetPrefixRangeEnd`).
pub fn prefix_end(prefix: &[u8]) -> Bytes {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Bytes::from(end);
        }
    }
    // Every byte is 0xff: the range runs to the end of the key space.
    Bytes::from_static(&[0])
}

/// Keys `[key, range_end)`; an empty `range_end` selects `key` alone, `[0]` means "to the end".
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RangeRequest {
    pub key: Bytes,
    pub range_end: Bytes,
    /// Maximum number of keys returned; 0 for no limit.
    pub limit: i64,
    /// The revision to read at; 0 for the current one.
    pub revision: Revision,
    pub keys_only: bool,
    pub count_only: bool,
}

impl RangeRequest {
    pub fn key(key: impl Into<Bytes>) -> Self {
        RangeRequest { key: key.into(), ..Default::default() }
    }

    pub fn prefix(prefix: impl Into<Bytes>) -> Self {
        let key: Bytes = prefix.into();
        RangeRequest { range_end: prefix_end(&key), key, ..Default::default() }
    }

    /// Whether `k` falls in this request's range.
    pub fn contains(&self, k: &[u8]) -> bool {
        key_in_range(k, &self.key, &self.range_end)
    }
}

pub(crate) fn key_in_range(k: &[u8], key: &[u8], range_end: &[u8]) -> bool {
    if range_end.is_empty() {
        k == key
    } else if range_end == [0] {
        k >= key
    } else {
        k >= key && k < range_end
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RangeResponse {
    /// The store's revision when the read was served (the response header's revision).
    pub header_revision: Revision,
    pub kvs: Vec<KeyValue>,
    /// More keys matched than `limit` allowed.
    pub more: bool,
    /// Number of keys in the range (regardless of `limit`).
    pub count: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareTarget {
    ModRevision,
    CreateRevision,
    Version,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    Equal,
    NotEqual,
    Greater,
    Less,
}

/// A transaction guard: `target(key) op value`; a missing key has every target equal to 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compare {
    pub key: Bytes,
    pub target: CompareTarget,
    pub op: CompareOp,
    pub value: i64,
}

impl Compare {
    pub fn mod_revision(key: impl Into<Bytes>, value: Revision) -> Self {
        Compare { key: key.into(), target: CompareTarget::ModRevision, op: CompareOp::Equal, value }
    }

    /// Holds when the key does not exist.
    pub fn absent(key: impl Into<Bytes>) -> Self {
        Compare { key: key.into(), target: CompareTarget::CreateRevision, op: CompareOp::Equal, value: 0 }
    }

    pub fn holds(&self, target_value: i64) -> bool {
        match self.op {
            CompareOp::Equal => target_value == self.value,
            CompareOp::NotEqual => target_value != self.value,
            CompareOp::Greater => target_value > self.value,
            CompareOp::Less => target_value < self.value,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnOp {
    Range(RangeRequest),
    Put {
        key: Bytes,
        value: Bytes,
        lease: i64,
    },
    /// Deletes one key and returns its last value.
    Delete {
        key: Bytes,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnOpResponse {
    Range(RangeResponse),
    Put,
    Delete { prev_kv: Option<KeyValue> },
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TxnRequest {
    pub compare: Vec<Compare>,
    pub success: Vec<TxnOp>,
    pub failure: Vec<TxnOp>,
}

/// etcd's default `--max-request-bytes`: a larger request is refused whole.
pub const MAX_REQUEST_BYTES: usize = 1536 * 1024;

impl TxnRequest {
    /// About the size etcd gives the transaction against [`MAX_REQUEST_BYTES`]: its keys and
    /// values, and a few bytes of framing for each part.
    pub fn size(&self) -> usize {
        let op = |o: &TxnOp| match o {
            TxnOp::Range(r) => r.key.len() + r.range_end.len() + 16,
            TxnOp::Put { key, value, .. } => key.len() + value.len() + 16,
            TxnOp::Delete { key } => key.len() + 8,
        };
        self.compare.iter().map(|c| c.key.len() + 16).sum::<usize>() + self.success.iter().chain(&self.failure).map(op).sum::<usize>()
    }

    /// etcd's refusal of a transaction over [`MAX_REQUEST_BYTES`], which every store gives.
    pub fn check_size(&self) -> Result<(), KvError> {
        if self.size() > MAX_REQUEST_BYTES { Err(KvError::TooLarge) } else { Ok(()) }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnResponse {
    pub header_revision: Revision,
    pub succeeded: bool,
    pub responses: Vec<TxnOpResponse>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvRequest {
    Range(RangeRequest),
    Txn(TxnRequest),
    /// Forget history before `revision`: reads and watches from older revisions fail.
    Compact {
        revision: Revision,
    },
    LeaseGrant {
        ttl_seconds: i64,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvResponse {
    Range(RangeResponse),
    Txn(TxnResponse),
    Compact { header_revision: Revision },
    LeaseGrant { id: i64, ttl_seconds: i64 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvError {
    /// The requested revision has been compacted.
    Compacted {
        compact_revision: Revision,
    },
    /// The requested revision is newer than the store's.
    FutureRevision {
        current: Revision,
    },
    LeaseNotFound,
    /// The request is larger than the store takes ([`MAX_REQUEST_BYTES`]); nothing was done.
    TooLarge,
    /// The store could not be reached; nothing was done.
    Unavailable(String),
    /// No answer in time: the request may or may not have been applied.
    Timeout(String),
    /// Any other failure the backend reports.
    Other(String),
}

impl std::fmt::Display for KvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KvError::Compacted { compact_revision } => {
                write!(f, "etcdserver: mvcc: required revision has been compacted (compacted at {compact_revision})")
            }
            KvError::FutureRevision { current } => {
                write!(f, "etcdserver: mvcc: required revision is a future revision (current {current})")
            }
            KvError::LeaseNotFound => write!(f, "etcdserver: requested lease not found"),
            KvError::TooLarge => write!(f, "etcdserver: request is too large"),
            KvError::Unavailable(m) => write!(f, "storage unavailable: {m}"),
            KvError::Timeout(m) => write!(f, "storage request timed out: {m}"),
            KvError::Other(m) => write!(f, "{m}"),
        }
    }
}

pub type KvResult = Result<KvResponse, KvError>;

/// The revision a read at `requested` (0 or less: the latest) sees in a store at `current`
/// that has compacted up to `compacted`, or etcd's error for it.
pub fn read_revision(requested: Revision, current: Revision, compacted: Revision) -> Result<Revision, KvError> {
    let rev = if requested <= 0 { current } else { requested };
    if rev > current {
        return Err(KvError::FutureRevision { current });
    }
    if rev < compacted {
        return Err(KvError::Compacted { compact_revision: compacted });
    }
    Ok(rev)
}

/// Watch keys `[key, range_end)` from `start_revision` (0: from the next write).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct WatchRequest {
    pub key: Bytes,
    pub range_end: Bytes,
    pub start_revision: Revision,
    pub prev_kv: bool,
    pub progress_notify: bool,
}

impl WatchRequest {
    pub fn prefix(prefix: impl Into<Bytes>, start_revision: Revision) -> Self {
        let key: Bytes = prefix.into();
        WatchRequest { range_end: prefix_end(&key), key, start_revision, prev_kv: true, progress_notify: true }
    }

    pub fn contains(&self, k: &[u8]) -> bool {
        key_in_range(k, &self.key, &self.range_end)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Put,
    Delete,
}

/// One change. For a delete, `kv` holds the key and the deleting revision (`mod_revision`) and
/// an empty value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    pub kv: KeyValue,
    pub prev_kv: Option<KeyValue>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchResponse {
    /// Events of one or more revisions, in revision order.
    Events { header_revision: Revision, events: Vec<Event> },
    /// Nothing happened in the watched range up to `revision`.
    Progress { revision: Revision },
    /// The watch could not start or continue: its revision was compacted. The stream ends.
    Canceled { compact_revision: Revision },
}

//! The production store: the KV protocol on etcd v3, through `etcd-client`. A translation and
//! nothing more: requests map one to one onto etcd's Range, Txn, Compact, LeaseGrant and Watch,
//! and etcd's answers and errors back onto the protocol's.
//!
//! Every call has a deadline ([`CALL_TIMEOUT`]), so a store that stops answering fails requests
//! instead of hanging them. A write whose answer is lost reports [`KvError::Timeout`] (it may
//! have been applied); a read that cannot reach etcd reports [`KvError::Unavailable`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use etcd_client as etcd;
use kapi_core::kv::*;
use tokio::sync::mpsc;

/// How long one etcd call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest etcd response kapi takes: etcd's Go client default (`math.MaxInt32`).
const MAX_RESPONSE: usize = i32::MAX as usize;
/// How long the health check waits (kube's `--etcd-healthcheck-timeout` default).
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

/// Where etcd is and how to talk to it (`--etcd-servers`, `--etcd-cafile`, ...).
pub struct EtcdConfig {
    pub servers: Vec<String>,
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// `--etcd-prefix`: the health check reads `<prefix>/health`, as kube's does.
    pub prefix: String,
}

/// A connection to an etcd cluster. Clones share it.
#[derive(Clone)]
pub struct Etcd {
    client: Arc<etcd::Client>,
    health_key: String,
    /// Each open watch's way to ask for a progress notification; dropping it ends the watch.
    watches: Arc<Mutex<BTreeMap<u64, mpsc::UnboundedSender<()>>>>,
    next_watch: Arc<AtomicU64>,
    /// Whether etcd answers a progress request in order with the events before it (see
    /// [`Etcd::check_version`]).
    ordered_progress: Arc<AtomicBool>,
}

fn read_file(path: &PathBuf) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

impl Etcd {
    /// Sets up the connection; etcd need not be up yet (connections are made on use).
    pub async fn connect(config: &EtcdConfig) -> anyhow::Result<Etcd> {
        let mut options = etcd::ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5))
            .with_keep_alive_while_idle(true);
        if config.ca_file.is_some() || config.cert_file.is_some() {
            let mut tls = etcd::TlsOptions::new();
            if let Some(ca) = &config.ca_file {
                tls = tls.ca_certificate(etcd::Certificate::from_pem(read_file(ca)?));
            }
            match (&config.cert_file, &config.key_file) {
                (Some(cert), Some(key)) => tls = tls.identity(etcd::Identity::from_pem(read_file(cert)?, read_file(key)?)),
                (None, None) => {}
                _ => anyhow::bail!("--etcd-certfile and --etcd-keyfile go together"),
            }
            options = options.with_tls(tls);
        }
        let client = etcd::Client::connect(&config.servers, Some(options)).await.context("connecting to etcd")?;
        Ok(Etcd {
            client: Arc::new(client),
            health_key: format!("{}/health", config.prefix.trim_end_matches('/')),
            watches: Arc::default(),
            next_watch: Arc::new(AtomicU64::new(1)),
            ordered_progress: Arc::default(),
        })
    }

    /// Asks etcd its version, and returns it. etcd before 3.4.31 and 3.5.13 answers a progress
    /// request at once, ahead of events still queued for the stream (etcd issue 15220), so the
    /// watch cache could believe itself fresher than it is: with those versions kapi sends no
    /// progress requests, relies on etcd's periodic progress notifications (which come in order;
    /// `--experimental-watch-progress-notify-interval`), and serves consistent LISTs from etcd,
    /// as kube-apiserver does.
    pub async fn check_version(&self) -> Result<String, String> {
        let mut m = self.client.maintenance_client();
        let status = match tokio::time::timeout(HEALTH_TIMEOUT, m.status()).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("etcd did not answer within 2s".into()),
        };
        let version = status.version().to_string();
        self.ordered_progress.store(orders_progress(&version), Ordering::Relaxed);
        Ok(version)
    }

    /// Whether the watch cache can ask this etcd for progress (see [`Etcd::check_version`]).
    pub fn ordered_progress(&self) -> bool {
        self.ordered_progress.load(Ordering::Relaxed)
    }

    pub async fn call(&self, req: KvRequest) -> KvResult {
        let writes = match &req {
            KvRequest::Range(_) => false,
            KvRequest::Txn(t) => t.success.iter().chain(&t.failure).any(|op| !matches!(op, TxnOp::Range(_))),
            KvRequest::Compact { .. } | KvRequest::LeaseGrant { .. } => true,
        };
        let result = match tokio::time::timeout(CALL_TIMEOUT, self.send(&req)).await {
            Ok(r) => r.map_err(|e| kv_error(e, writes)),
            Err(_) => Err(KvError::Timeout(format!("etcd did not answer within {}s", CALL_TIMEOUT.as_secs()))),
        };
        match result {
            // etcd's errors name neither revision: look them up, as the protocol reports both.
            Err(KvError::Compacted { .. }) => Err(KvError::Compacted { compact_revision: self.compact_revision().await }),
            Err(KvError::FutureRevision { .. }) => match self.current_revision(CALL_TIMEOUT).await {
                Ok(current) => Err(KvError::FutureRevision { current }),
                Err(e) => Err(e),
            },
            r => r,
        }
    }

    /// A KV client that takes responses of any size etcd sends, as etcd's Go client (and so
    /// kube-apiserver) does: tonic's default of 4 MiB failed a LIST of 800 pods.
    fn kv(&self) -> etcd::KvClient {
        self.client.kv_client().max_decoding_message_size(MAX_RESPONSE)
    }

    /// A watch client that takes responses of any size etcd sends (see [`Etcd::kv`]).
    fn watcher(&self) -> etcd::WatchClient {
        self.client.watch_client().max_decoding_message_size(MAX_RESPONSE)
    }

    async fn send(&self, req: &KvRequest) -> Result<KvResponse, etcd::Error> {
        let mut kv = self.kv();
        match req {
            KvRequest::Range(r) => {
                let resp = kv.get(r.key.to_vec(), Some(get_options(r))).await?;
                Ok(KvResponse::Range(range_response(&resp)))
            }
            KvRequest::Txn(t) => {
                let txn = etcd::Txn::new()
                    .when(t.compare.iter().map(compare).collect::<Vec<_>>())
                    .and_then(t.success.iter().map(txn_op).collect::<Vec<_>>())
                    .or_else(t.failure.iter().map(txn_op).collect::<Vec<_>>());
                let resp = kv.txn(txn).await?;
                let responses = resp
                    .op_responses()
                    .iter()
                    .map(|r| match r {
                        etcd::TxnOpResponse::Get(g) => TxnOpResponse::Range(range_response(g)),
                        etcd::TxnOpResponse::Delete(d) => TxnOpResponse::Delete { prev_kv: d.prev_kvs().first().map(key_value) },
                        etcd::TxnOpResponse::Put(_) | etcd::TxnOpResponse::Txn(_) => TxnOpResponse::Put,
                    })
                    .collect();
                Ok(KvResponse::Txn(TxnResponse { header_revision: revision_of(resp.header()), succeeded: resp.succeeded(), responses }))
            }
            KvRequest::Compact { revision } => {
                let resp = kv.compact(*revision, None).await?;
                Ok(KvResponse::Compact { header_revision: revision_of(resp.header()) })
            }
            KvRequest::LeaseGrant { ttl_seconds } => {
                let resp = self.client.lease_client().grant(*ttl_seconds, None).await?;
                Ok(KvResponse::LeaseGrant { id: resp.id(), ttl_seconds: resp.ttl() })
            }
        }
    }

    /// etcd's compacted revision: a watch from revision 1 is refused with it.
    async fn compact_revision(&self) -> Revision {
        let probe = async {
            let opts = etcd::WatchOptions::new().with_start_revision(1);
            let mut stream = self.watcher().watch(b"\0".to_vec(), Some(opts)).await.ok()?;
            while let Ok(Some(resp)) = stream.message().await {
                if resp.canceled() {
                    return Some(resp.compact_revision());
                }
            }
            None
        };
        tokio::time::timeout(CALL_TIMEOUT, probe).await.ok().flatten().unwrap_or(0)
    }

    /// etcd's current revision, from a count of `<prefix>/health` answered within `timeout`.
    async fn current_revision(&self, timeout: Duration) -> Result<Revision, KvError> {
        let mut kv = self.kv();
        let read = kv.get(self.health_key.clone(), Some(etcd::GetOptions::new().with_count_only()));
        match tokio::time::timeout(timeout, read).await {
            Ok(Ok(resp)) => Ok(revision_of(resp.header())),
            Ok(Err(e)) => Err(kv_error(e, false)),
            Err(_) => Err(KvError::Timeout(format!("etcd did not answer within {}s", timeout.as_secs()))),
        }
    }

    /// Starts a watch; its responses arrive on the returned channel. The channel closes when
    /// the watch breaks (the caller restarts it) and after a cancellation.
    pub async fn watch(&self, req: WatchRequest) -> (u64, mpsc::UnboundedReceiver<WatchResponse>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self.next_watch.fetch_add(1, Ordering::Relaxed);
        let mut opts = etcd::WatchOptions::new().with_start_revision(req.start_revision);
        if !req.range_end.is_empty() {
            opts = opts.with_range(req.range_end.to_vec());
        }
        if req.prev_kv {
            opts = opts.with_prev_key();
        }
        if req.progress_notify {
            opts = opts.with_progress_notify();
        }
        let started = tokio::time::timeout(CALL_TIMEOUT, self.watcher().watch(req.key.to_vec(), Some(opts))).await;
        match started {
            Ok(Ok(stream)) => {
                let (progress_tx, progress_rx) = mpsc::unbounded_channel();
                self.watches.lock().unwrap_or_else(|p| p.into_inner()).insert(id, progress_tx);
                tokio::spawn(forward(stream, progress_rx, tx));
            }
            Ok(Err(e)) => tracing::warn!("etcd watch: {e}"),
            Err(_) => tracing::warn!("etcd watch: no answer within {}s", CALL_TIMEOUT.as_secs()),
        }
        (id, rx)
    }

    pub fn cancel_watch(&self, id: u64) {
        self.watches.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
    }

    /// Asks etcd for a progress notification on a watch, when its answers come in order.
    pub fn request_progress(&self, id: u64) {
        if !self.ordered_progress() {
            return;
        }
        if let Some(w) = self.watches.lock().unwrap_or_else(|p| p.into_inner()).get(&id) {
            let _ = w.send(());
        }
    }

    /// kube's etcd check: a read of `<prefix>/health` answered within two seconds.
    pub async fn health(&self) -> Result<(), String> {
        self.current_revision(HEALTH_TIMEOUT).await.map(|_| ()).map_err(|e| e.to_string())
    }
}

/// Whether etcd `version` answers progress requests in order with events (3.4.31+, 3.5.13+, 3.6+).
fn orders_progress(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    let (major, minor, patch) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    match (major, minor) {
        (3, 4) => patch >= 31,
        (3, 5) => patch >= 13,
        (m, n) => (m, n) > (3, 5),
    }
}

/// Carries one etcd watch stream's responses to `tx`, and progress requests to the stream.
async fn forward(stream: etcd::WatchStream, mut progress: mpsc::UnboundedReceiver<()>, tx: mpsc::UnboundedSender<WatchResponse>) {
    let (mut requests, mut responses) = stream.split();
    loop {
        tokio::select! {
            asked = progress.recv() => match asked {
                Some(()) => {
                    if requests.request_progress().await.is_err() {
                        return;
                    }
                }
                None => return,
            },
            resp = responses.message() => {
                let Ok(Some(resp)) = resp else { return };
                let (response, last) = watch_response(&resp);
                if let Some(r) = response
                    && tx.send(r).is_err()
                {
                    return;
                }
                if last {
                    return;
                }
            }
        }
    }
}

/// What one etcd watch response means to the protocol, and whether the stream ends with it.
fn watch_response(resp: &etcd::WatchResponse) -> (Option<WatchResponse>, bool) {
    if resp.canceled() {
        let compacted = resp.compact_revision() > 0;
        return (compacted.then(|| WatchResponse::Canceled { compact_revision: resp.compact_revision() }), true);
    }
    let header_revision = revision_of(resp.header());
    if !resp.events().is_empty() {
        let events = resp.events().iter().filter_map(event).collect();
        return (Some(WatchResponse::Events { header_revision, events }), false);
    }
    if resp.created() {
        return (None, false);
    }
    (Some(WatchResponse::Progress { revision: header_revision }), false)
}

fn event(e: &etcd::Event) -> Option<Event> {
    let kind = match e.event_type() {
        etcd::EventType::Put => EventKind::Put,
        etcd::EventType::Delete => EventKind::Delete,
    };
    Some(Event { kind, kv: key_value(e.kv()?), prev_kv: e.prev_kv().map(key_value) })
}

#[cfg(test)]
#[test]
fn progress_requests_are_ordered_from_3_4_31_and_3_5_13() {
    for (v, ordered) in [("3.4.23", false), ("3.4.31", true), ("3.5.12", false), ("3.5.13", true), ("3.6.0", true), ("3.3.27", false), ("4.0.0", true)] {
        assert_eq!(orders_progress(v), ordered, "{v}");
    }
}

fn revision_of(header: Option<&etcd::ResponseHeader>) -> Revision {
    header.map_or(0, |h| h.revision())
}

fn key_value(kv: &etcd::KeyValue) -> KeyValue {
    KeyValue {
        key: Bytes::copy_from_slice(kv.key()),
        value: Bytes::copy_from_slice(kv.value()),
        create_revision: kv.create_revision(),
        mod_revision: kv.mod_revision(),
        version: kv.version(),
        lease: kv.lease(),
    }
}

fn range_response(resp: &etcd::GetResponse) -> RangeResponse {
    RangeResponse { header_revision: revision_of(resp.header()), kvs: resp.kvs().iter().map(key_value).collect(), more: resp.more(), count: resp.count() }
}

fn get_options(r: &RangeRequest) -> etcd::GetOptions {
    let mut o = etcd::GetOptions::new().with_limit(r.limit).with_revision(r.revision);
    if !r.range_end.is_empty() {
        o = o.with_range(r.range_end.to_vec());
    }
    if r.keys_only {
        o = o.with_keys_only();
    }
    if r.count_only {
        o = o.with_count_only();
    }
    o
}

fn compare(c: &Compare) -> etcd::Compare {
    let op = match c.op {
        CompareOp::Equal => etcd::CompareOp::Equal,
        CompareOp::NotEqual => etcd::CompareOp::NotEqual,
        CompareOp::Greater => etcd::CompareOp::Greater,
        CompareOp::Less => etcd::CompareOp::Less,
    };
    let key = c.key.to_vec();
    match c.target {
        CompareTarget::ModRevision => etcd::Compare::mod_revision(key, op, c.value),
        CompareTarget::CreateRevision => etcd::Compare::create_revision(key, op, c.value),
        CompareTarget::Version => etcd::Compare::version(key, op, c.value),
    }
}

fn txn_op(op: &TxnOp) -> etcd::TxnOp {
    match op {
        TxnOp::Range(r) => etcd::TxnOp::get(r.key.to_vec(), Some(get_options(r))),
        TxnOp::Put { key, value, lease } => etcd::TxnOp::put(key.to_vec(), value.to_vec(), Some(etcd::PutOptions::new().with_lease(*lease))),
        TxnOp::Delete { key } => etcd::TxnOp::delete(key.to_vec(), Some(etcd::DeleteOptions::new().with_prev_key())),
    }
}

/// etcd's error as the protocol's. A write that failed in transport may have been applied, so it
/// is a timeout (unknown outcome), not "unavailable" (nothing done).
fn kv_error(e: etcd::Error, writes: bool) -> KvError {
    let lost = |m: String| if writes { KvError::Timeout(m) } else { KvError::Unavailable(m) };
    match e {
        etcd::Error::GRpcStatus(s) => {
            let m = s.message();
            if m.contains("required revision has been compacted") {
                KvError::Compacted { compact_revision: 0 }
            } else if m.contains("required revision is a future revision") {
                KvError::FutureRevision { current: 0 }
            } else if m.contains("requested lease not found") {
                KvError::LeaseNotFound
            } else if m.contains("request is too large") || s.code() == tonic::Code::ResourceExhausted {
                KvError::TooLarge
            } else if s.code() == tonic::Code::DeadlineExceeded || m.contains("request timed out") {
                KvError::Timeout(m.to_string())
            } else if s.code() == tonic::Code::Unavailable {
                lost(m.to_string())
            } else {
                KvError::Other(format!("etcd: {m}"))
            }
        }
        etcd::Error::TransportError(_) | etcd::Error::IoError(_) | etcd::Error::WatchError(_) => lost(e.to_string()),
        e => KvError::Other(format!("etcd: {e}")),
    }
}

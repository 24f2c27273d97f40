//! The embedded store: the KV protocol on SQLite, kine-style. Every write transaction is one
//! revision; `log` keeps one row per key per revision (the history reads at past revisions and
//! watches replay from), `current` the live keys. WAL mode with synchronous commits: an
//! acknowledged write survives `kill -9`.
//!
//! Group commit: the KV transactions queued while the store was busy are applied together, each
//! in a savepoint of one SQLite transaction (so each is still all or nothing, with its own
//! revision), and that SQLite transaction is committed, and synced, once. None is answered or
//! published to watchers before that commit. On a disk whose sync costs far more than a row,
//! concurrent writers then share the sync instead of queueing for one each.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use jiff::Timestamp;
use kapi_core::kv::*;
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::mpsc;

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
PRAGMA synchronous = FULL;
CREATE TABLE IF NOT EXISTS log (
    key BLOB NOT NULL,
    revision INTEGER NOT NULL,
    deleted INTEGER NOT NULL,
    value BLOB NOT NULL,
    create_revision INTEGER NOT NULL,
    version INTEGER NOT NULL,
    lease INTEGER NOT NULL,
    PRIMARY KEY (key, revision)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS log_by_revision ON log(revision);
CREATE TABLE IF NOT EXISTS current (
    key BLOB PRIMARY KEY,
    value BLOB NOT NULL,
    create_revision INTEGER NOT NULL,
    mod_revision INTEGER NOT NULL,
    version INTEGER NOT NULL,
    lease INTEGER NOT NULL
) WITHOUT ROWID;
-- Only keys: counting a range reads this small index instead of every stored value.
CREATE INDEX IF NOT EXISTS current_keys ON current(key);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS leases (id INTEGER PRIMARY KEY, ttl INTEGER NOT NULL, expires_at INTEGER NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('revision', 1), ('compact_revision', 0), ('next_lease', 4096);
";

struct Watcher {
    req: WatchRequest,
    tx: mpsc::UnboundedSender<WatchResponse>,
}

struct Inner {
    conn: Connection,
    revision: Revision,
    compact_revision: Revision,
    watchers: BTreeMap<u64, Watcher>,
    next_watcher: u64,
    /// SQLite found the file damaged: nothing more is read or written, and health says so.
    damaged: bool,
    /// The integrity check started at open, until the store's thread has waited for it.
    checking: Option<Arc<Integrity>>,
}

/// The outcome of SQLite's check of every page (`PRAGMA quick_check`), once it is known: the
/// check reads the whole file, so it runs on a connection of its own while the watch caches
/// read the store, and a start costs the longer of the two rather than both.
type Integrity = OnceLock<Result<(), String>>;

/// What every request to a damaged store gets, and what its failures start with.
const DAMAGED: &str = "sqlite: the store is damaged";

fn damaged_error() -> KvError {
    KvError::Other(format!("{DAMAGED}; stop kapi and restore the data directory's kapi.db from a backup"))
}

/// The most KV transactions committed together.
const MAX_GROUP: usize = 256;

type Reply = tokio::sync::oneshot::Sender<KvResult>;

/// Work for the store's thread.
enum Job {
    /// A KV request; transactions queued one after another commit together.
    Kv(KvRequest, Reply),
    Run(Box<dyn FnOnce(&mut Inner) + Send>),
}

/// The SQLite store. One thread owns the database and does every request in turn, so watchers
/// see every revision exactly once, in order. (SQLite has one writer at a time anyway; a pool
/// of blocking threads taking turns on a lock cost more in hand-offs, and each thread's
/// allocator cache held memory of its own.)
#[derive(Clone)]
pub struct Sqlite {
    jobs: std::sync::mpsc::Sender<Job>,
    integrity: Arc<Integrity>,
    path: Arc<Path>,
}

fn other(e: rusqlite::Error) -> KvError {
    use rusqlite::ErrorCode::{DatabaseCorrupt, NotADatabase};
    match e.sqlite_error_code() {
        Some(DatabaseCorrupt | NotADatabase) => KvError::Other(format!("{DAMAGED}: {e}")),
        _ => KvError::Other(format!("sqlite: {e}")),
    }
}

/// Whether `r` is SQLite reporting a damaged file.
fn is_damage<T>(r: &Result<T, KvError>) -> bool {
    matches!(r, Err(KvError::Other(m)) if m.starts_with(DAMAGED))
}

/// SQLite's own check of every page of the database (`PRAGMA quick_check`): `Err` with what it
/// found when the file is damaged. It reads the pages through a memory map, which takes half the
/// time copying them in does (0.14 s against 0.28 s for the 880 MB of 50,000 pods); the map
/// goes with the connection.
fn check_integrity(conn: &Connection) -> Result<(), String> {
    conn.pragma_update(None, "mmap_size", 2_147_418_112_i64).map_err(|e| e.to_string())?;
    let mut stmt = conn.prepare("PRAGMA quick_check(5)").map_err(|e| e.to_string())?;
    let found: Vec<String> = stmt.query_map([], |r| r.get(0)).and_then(|rows| rows.collect()).map_err(|e| e.to_string())?;
    if found.len() == 1 && found[0] == "ok" { Ok(()) } else { Err(found.join("; ")) }
}

/// kapi's refusal to serve from the store at `path`, in which SQLite `found` damage.
fn refusal(path: &Path, found: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "the SQLite store {} is damaged ({found}); kapi does not serve from a damaged store. Restore it from a backup, or move it and its -wal and -shm files aside to start with an empty store",
        path.display()
    )
}

/// Runs a statement from the connection's cache of prepared statements: every write's SQL is
/// one of a handful, and parsing it again for each write cost as much as the write.
fn exec(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> Result<usize, KvError> {
    conn.prepare_cached(sql).and_then(|mut s| s.execute(params)).map_err(other)
}

fn meta(conn: &Connection, name: &str) -> rusqlite::Result<i64> {
    conn.query_row("SELECT value FROM meta WHERE name = ?1", [name], |r| r.get(0))
}

/// `[key, range_end)` as SQL bounds: `end` is `None` for "to the end".
fn bounds(key: &[u8], range_end: &[u8]) -> (Vec<u8>, Option<Vec<u8>>, bool) {
    if range_end.is_empty() {
        (key.to_vec(), None, true)
    } else if range_end == [0] {
        (key.to_vec(), None, false)
    } else {
        (key.to_vec(), Some(range_end.to_vec()), false)
    }
}

fn kv_from_current(r: &rusqlite::Row) -> rusqlite::Result<KeyValue> {
    Ok(KeyValue {
        key: Bytes::from(r.get::<_, Vec<u8>>(0)?),
        value: Bytes::from(r.get::<_, Vec<u8>>(1)?),
        create_revision: r.get(2)?,
        mod_revision: r.get(3)?,
        version: r.get(4)?,
        lease: r.get(5)?,
    })
}

impl Sqlite {
    /// Opens (or creates) the store at `path`, refusing one SQLite finds damaged.
    pub fn open(path: &Path) -> anyhow::Result<Sqlite> {
        let refuse = |found: String| refusal(path, &found);
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.set_prepared_statement_cache_capacity(64);
        conn.execute_batch(SCHEMA).map_err(|e| refuse(e.to_string()))?;
        let revision = meta(&conn, "revision").map_err(|e| refuse(e.to_string()))?;
        let compact_revision = meta(&conn, "compact_revision").map_err(|e| refuse(e.to_string()))?;
        let integrity = Arc::new(Integrity::new());
        let (checker, check_path) = (integrity.clone(), path.to_path_buf());
        std::thread::Builder::new().name("kapi-sqlite-check".into()).spawn(move || {
            let found = Connection::open(&check_path).map_err(|e| e.to_string()).and_then(|c| check_integrity(&c));
            let _ = checker.set(found);
        })?;
        let checking = Some(integrity.clone());
        let mut inner = Inner { conn, revision, compact_revision, watchers: BTreeMap::new(), next_watcher: 1, damaged: false, checking };
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        // The thread ends when the last handle is dropped.
        std::thread::Builder::new().name("kapi-sqlite".into()).spawn(move || run(&mut inner, &queue))?;
        Ok(Sqlite { jobs, integrity, path: path.into() })
    }

    /// Once the integrity check started at open has ended: `Err` with kapi's refusal to serve
    /// from the store when SQLite found it damaged.
    pub fn integrity(&self) -> impl Future<Output = anyhow::Result<()>> + use<> {
        let (integrity, path) = (self.integrity.clone(), self.path.clone());
        async move {
            let found = tokio::task::spawn_blocking(move || integrity.wait().clone()).await?;
            found.map_err(|found| refusal(&path, &found))
        }
    }

    /// Queues `f` to run on the database, on the store's thread, at once (not when the result
    /// is first awaited): jobs run in the order of these calls.
    fn with<T: Send + 'static, F: FnOnce(&mut Inner) -> T + Send + 'static>(&self, f: F) -> impl Future<Output = T> + use<T, F> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job = Job::Run(Box::new(move |inner| {
            let _ = tx.send(f(inner));
        }));
        self.jobs.send(job).expect("the store's thread lives as long as its handles");
        async { rx.await.expect("store jobs do not panic") }
    }

    /// Holds the store's thread until the returned sender is dropped, so that the requests
    /// queued meanwhile are taken together.
    #[cfg(test)]
    pub fn hold(&self) -> std::sync::mpsc::Sender<()> {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        drop(self.with(move |_| while rx.recv().is_ok() {}));
        tx
    }

    /// Queues `req` at once (see [`Sqlite::with`]); its answer comes once it is committed.
    pub fn call(&self, req: KvRequest) -> impl Future<Output = KvResult> + use<> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.jobs.send(Job::Kv(req, tx)).expect("the store's thread lives as long as its handles");
        async { rx.await.expect("store jobs do not panic") }
    }

    /// Starts a watch; its events arrive on the returned channel until the watch is dropped.
    pub async fn watch(&self, req: WatchRequest) -> (u64, mpsc::UnboundedReceiver<WatchResponse>) {
        self.with(move |inner| {
            let (tx, rx) = mpsc::unbounded_channel();
            let id = inner.next_watcher;
            inner.next_watcher += 1;
            match inner.backlog(&req) {
                Ok(events) => {
                    if !events.is_empty() {
                        let _ = tx.send(WatchResponse::Events { header_revision: inner.revision, events });
                    }
                    inner.watchers.insert(id, Watcher { req, tx });
                }
                Err(e) => {
                    let compact_revision = match e {
                        KvError::Compacted { compact_revision } => compact_revision,
                        _ => inner.compact_revision,
                    };
                    let _ = tx.send(WatchResponse::Canceled { compact_revision });
                }
            }
            (id, rx)
        })
        .await
    }

    pub async fn cancel_watch(&self, id: u64) {
        self.with(move |inner| {
            inner.watchers.remove(&id);
        })
        .await
    }

    /// Tells a watch the store's revision (a progress notification).
    pub async fn request_progress(&self, id: u64) {
        self.with(move |inner| {
            if let Some(w) = inner.watchers.get(&id) {
                let _ = w.tx.send(WatchResponse::Progress { revision: inner.revision });
            }
        })
        .await
    }

    /// Deletes the keys of leases expired at `now`.
    pub async fn expire_leases(&self, now: Timestamp) -> Result<(), KvError> {
        self.with(move |inner| inner.expire(now)).await
    }

    pub async fn health(&self) -> Result<(), String> {
        match self.integrity.get() {
            None => return Err("sqlite: checking the store's integrity".into()),
            Some(Err(_)) => return Err(damaged_error().to_string()),
            Some(Ok(())) => {}
        }
        self.with(|inner| {
            if inner.damaged {
                return Err(damaged_error().to_string());
            }
            inner.conn.query_row("SELECT 1", [], |_| Ok(())).map_err(|e| e.to_string())
        })
        .await
    }
}

/// The store's thread: does the jobs in the order they come, a run of transactions as one group.
fn run(inner: &mut Inner, queue: &std::sync::mpsc::Receiver<Job>) {
    let mut next = None;
    loop {
        let job = match next.take() {
            Some(job) => job,
            None => match queue.recv() {
                Ok(job) => job,
                Err(_) => return,
            },
        };
        // Reads go on while the integrity check runs; nothing else does (see `Integrity`).
        if !matches!(job, Job::Kv(KvRequest::Range(_), _))
            && let Some(check) = inner.checking.take()
        {
            inner.damaged |= check.wait().is_err();
        }
        match job {
            Job::Kv(KvRequest::Txn(t), reply) => {
                let mut group = vec![(t, reply)];
                while group.len() < MAX_GROUP {
                    match queue.try_recv() {
                        Ok(Job::Kv(KvRequest::Txn(t), reply)) => group.push((t, reply)),
                        Ok(other) => {
                            next = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                let (txns, replies): (Vec<TxnRequest>, Vec<Reply>) = group.into_iter().unzip();
                let answers = if inner.damaged { txns.iter().map(|_| Err(damaged_error())).collect() } else { inner.txns(&txns) };
                for (result, reply) in answers.into_iter().zip(replies) {
                    inner.damaged |= is_damage(&result);
                    let _ = reply.send(result.map(KvResponse::Txn));
                }
            }
            Job::Kv(req, reply) => {
                let result = if inner.damaged { Err(damaged_error()) } else { inner.apply(&req) };
                inner.damaged |= is_damage(&result);
                let _ = reply.send(result);
            }
            Job::Run(f) => f(inner),
        }
    }
}

impl Inner {
    fn apply(&mut self, req: &KvRequest) -> KvResult {
        match req {
            KvRequest::Range(r) => self.range(r).map(KvResponse::Range),
            KvRequest::Txn(t) => self.txns(std::slice::from_ref(t)).pop().expect("one answer per transaction").map(KvResponse::Txn),
            KvRequest::Compact { revision } => self.compact(*revision),
            KvRequest::LeaseGrant { ttl_seconds } => {
                let ttl = (*ttl_seconds).max(1);
                let tx = self.conn.transaction().map_err(other)?;
                let id = meta(&tx, "next_lease").map_err(other)?;
                tx.execute("UPDATE meta SET value = value + 1 WHERE name = 'next_lease'", []).map_err(other)?;
                let expires = crate::clock::now().as_second() + ttl;
                tx.execute("INSERT INTO leases VALUES (?1, ?2, ?3)", params![id, ttl, expires]).map_err(other)?;
                tx.commit().map_err(other)?;
                Ok(KvResponse::LeaseGrant { id, ttl_seconds: ttl })
            }
        }
    }

    fn check_revision(&self, revision: Revision) -> Result<Revision, KvError> {
        read_revision(revision, self.revision, self.compact_revision)
    }

    fn range(&self, r: &RangeRequest) -> Result<RangeResponse, KvError> {
        let rev = self.check_revision(r.revision)?;
        let (lo, hi, single) = bounds(&r.key, &r.range_end);
        let (sql_where, args): (&str, Vec<rusqlite::types::Value>) = match (single, hi) {
            (true, _) => ("key = ?1", vec![lo.into()]),
            (false, None) => ("key >= ?1", vec![lo.into()]),
            (false, Some(hi)) => ("key >= ?1 AND key < ?2", vec![lo.into(), hi.into()]),
        };
        // The revision is a parameter after the key bounds, so the statements stay few and
        // cached whatever revision is read.
        let rev_param = format!("?{}", args.len() + 1);
        let mut args_at_rev = args.clone();
        args_at_rev.push(rev.into());
        // A past revision reads the live rows when nothing in the range changed since: the
        // pages of a LIST pinned to its first page's revision, while writes go elsewhere.
        let current = rev == self.revision || !self.changed_since(sql_where, &rev_param, &args_at_rev)?;
        let args = if current { args } else { args_at_rev };
        let (count_sql, rows_sql) = if current {
            (
                format!("SELECT COUNT(*) FROM current WHERE {sql_where}"),
                format!("SELECT key, value, create_revision, mod_revision, version, lease FROM current WHERE {sql_where} ORDER BY key"),
            )
        } else {
            let visible = format!(
                "FROM log AS l WHERE {} AND l.revision = (SELECT MAX(revision) FROM log WHERE key = l.key AND revision <= {rev_param}) AND l.deleted = 0",
                sql_where.replace("key", "l.key")
            );
            (format!("SELECT COUNT(*) {visible}"), format!("SELECT l.key, l.value, l.create_revision, l.revision, l.version, l.lease {visible} ORDER BY l.key"))
        };
        // Without a limit the rows are the count; only a limited or count-only read asks for it.
        let counted = r.count_only || r.limit > 0;
        let count: i64 = if counted {
            let mut stmt = self.conn.prepare_cached(&count_sql).map_err(other)?;
            stmt.query_row(rusqlite::params_from_iter(args.iter()), |row| row.get(0)).map_err(other)?
        } else {
            0
        };
        let mut resp = RangeResponse { header_revision: self.revision, count, ..Default::default() };
        if r.count_only {
            return Ok(resp);
        }
        let sql = if r.limit > 0 { format!("{rows_sql} LIMIT {}", r.limit) } else { rows_sql };
        let mut stmt = self.conn.prepare_cached(&sql).map_err(other)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(args.iter()), kv_from_current).map_err(other)?;
        for kv in rows {
            let mut kv = kv.map_err(other)?;
            if r.keys_only {
                kv.value = Bytes::new();
            }
            resp.kvs.push(kv);
        }
        if !counted {
            resp.count = resp.kvs.len() as i64;
        }
        resp.more = r.limit > 0 && count > r.limit;
        Ok(resp)
    }

    /// Whether a key matching `sql_where` was written or deleted after the revision that the
    /// parameter `rev_param` holds.
    fn changed_since(&self, sql_where: &str, rev_param: &str, args: &[rusqlite::types::Value]) -> Result<bool, KvError> {
        let sql = format!("SELECT EXISTS (SELECT 1 FROM log INDEXED BY log_by_revision WHERE revision > {rev_param} AND {sql_where})");
        let mut stmt = self.conn.prepare_cached(&sql).map_err(other)?;
        stmt.query_row(rusqlite::params_from_iter(args.iter()), |row| row.get(0)).map_err(other)
    }

    /// Applies `txns` in order, each in a savepoint with its own revision, and commits them
    /// together: one answer per transaction, none of them acknowledged unless the commit was.
    fn txns(&mut self, txns: &[TxnRequest]) -> Vec<Result<TxnResponse, KvError>> {
        let base = self.revision;
        let mut revision = base;
        let mut answers = Vec::with_capacity(txns.len());
        let mut events = Vec::new();
        let committed = (|| {
            let mut tx = self.conn.transaction()?;
            for t in txns {
                let sp = tx.savepoint()?;
                match txn_in(&sp, t, revision) {
                    Ok((resp, evs)) => {
                        sp.commit()?;
                        if !evs.is_empty() {
                            revision += 1;
                            events.extend(evs);
                        }
                        answers.push(Ok(resp));
                    }
                    Err(e) => answers.push(Err(e)),
                }
            }
            if revision != base {
                tx.prepare_cached("UPDATE meta SET value = ?1 WHERE name = 'revision'")?.execute([revision])?;
            }
            tx.commit()
        })();
        if let Err(e) = committed {
            // Nothing of the group is stored: each of its transactions failed.
            let e = other(e);
            return txns.iter().map(|_| Err(e.clone())).collect();
        }
        self.revision = revision;
        if !events.is_empty() {
            self.publish(&events);
        }
        answers
    }

    fn publish(&mut self, events: &[Event]) {
        let header_revision = self.revision;
        self.watchers.retain(|_, w| {
            let mine: Vec<Event> = events
                .iter()
                .filter(|e| w.req.contains(&e.kv.key))
                .map(|e| if w.req.prev_kv { e.clone() } else { Event { prev_kv: None, ..e.clone() } })
                .collect();
            mine.is_empty() || w.tx.send(WatchResponse::Events { header_revision, events: mine }).is_ok()
        });
    }

    /// Every change in the watch's range from its start revision on.
    fn backlog(&self, req: &WatchRequest) -> Result<Vec<Event>, KvError> {
        let start = if req.start_revision == 0 { self.revision + 1 } else { req.start_revision };
        if start < self.compact_revision {
            return Err(KvError::Compacted { compact_revision: self.compact_revision });
        }
        let mut stmt = self
            .conn
            .prepare_cached("SELECT key, revision, deleted, value, create_revision, version, lease FROM log WHERE revision >= ?1 ORDER BY revision, key")
            .map_err(other)?;
        let rows = stmt
            .query_map([start], |r| {
                Ok((
                    Bytes::from(r.get::<_, Vec<u8>>(0)?),
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)? != 0,
                    Bytes::from(r.get::<_, Vec<u8>>(3)?),
                    r.get::<_, i64>(4)?,
                    r.get::<_, i64>(5)?,
                    r.get::<_, i64>(6)?,
                ))
            })
            .map_err(other)?;
        let mut out = Vec::new();
        for row in rows {
            let (key, revision, deleted, value, create_revision, version, lease) = row.map_err(other)?;
            if !req.contains(&key) {
                continue;
            }
            let prev_kv = if req.prev_kv { self.version_before(&key, revision)? } else { None };
            let kv = if deleted {
                KeyValue { key, value: Bytes::new(), create_revision: 0, mod_revision: revision, version: 0, lease: 0 }
            } else {
                KeyValue { key, value, create_revision, mod_revision: revision, version, lease }
            };
            out.push(Event { kind: if deleted { EventKind::Delete } else { EventKind::Put }, kv, prev_kv });
        }
        Ok(out)
    }

    fn version_before(&self, key: &[u8], revision: Revision) -> Result<Option<KeyValue>, KvError> {
        self.conn
            .query_row(
                "SELECT key, value, create_revision, revision, version, lease, deleted FROM log WHERE key = ?1 AND revision < ?2 ORDER BY revision DESC LIMIT 1",
                params![key, revision],
                |r| Ok((kv_from_current(r)?, r.get::<_, i64>(6)? != 0)),
            )
            .optional()
            .map(|o| o.and_then(|(kv, deleted)| (!deleted).then_some(kv)))
            .map_err(other)
    }

    fn compact(&mut self, revision: Revision) -> KvResult {
        if revision <= self.compact_revision {
            return Err(KvError::Compacted { compact_revision: self.compact_revision });
        }
        if revision > self.revision {
            return Err(KvError::FutureRevision { current: self.revision });
        }
        let tx = self.conn.transaction().map_err(other)?;
        // Keep, for each key, the version visible at `revision` and all later ones.
        tx.execute(
            "DELETE FROM log WHERE revision < ?1 AND revision < (SELECT MAX(l2.revision) FROM log AS l2 WHERE l2.key = log.key AND l2.revision <= ?1)",
            [revision],
        )
        .map_err(other)?;
        tx.execute("DELETE FROM log WHERE revision < ?1 AND deleted = 1", [revision]).map_err(other)?;
        tx.execute("UPDATE meta SET value = ?1 WHERE name = 'compact_revision'", [revision]).map_err(other)?;
        tx.commit().map_err(other)?;
        self.compact_revision = revision;
        Ok(KvResponse::Compact { header_revision: self.revision })
    }

    fn expire(&mut self, now: Timestamp) -> Result<(), KvError> {
        let expired: Vec<i64> = {
            let mut stmt = self.conn.prepare_cached("SELECT id FROM leases WHERE expires_at <= ?1").map_err(other)?;
            let rows = stmt.query_map([now.as_second()], |r| r.get(0)).map_err(other)?;
            rows.collect::<Result<_, _>>().map_err(other)?
        };
        if expired.is_empty() {
            return Ok(());
        }
        let mut doomed = Vec::new();
        for id in &expired {
            let mut stmt = self.conn.prepare_cached("SELECT key FROM current WHERE lease = ?1").map_err(other)?;
            let keys = stmt.query_map([id], |r| r.get::<_, Vec<u8>>(0)).map_err(other)?;
            for k in keys {
                doomed.push(TxnOp::Delete { key: Bytes::from(k.map_err(other)?) });
            }
        }
        for id in &expired {
            self.conn.execute("DELETE FROM leases WHERE id = ?1", [id]).map_err(other)?;
        }
        if !doomed.is_empty() {
            self.txns(&[TxnRequest { success: doomed, ..Default::default() }]).pop().expect("one answer per transaction")?;
        }
        Ok(())
    }
}

/// One KV transaction inside an open SQLite transaction, on a store at `revision`: its answer
/// and, if it wrote, its events at `revision + 1`.
fn txn_in(tx: &rusqlite::Connection, t: &TxnRequest, revision: Revision) -> Result<(TxnResponse, Vec<Event>), KvError> {
    t.check_size()?;
    let mut succeeded = true;
    for c in &t.compare {
        let kv = current(tx, &c.key)?;
        let v = match c.target {
            CompareTarget::ModRevision => kv.map_or(0, |kv| kv.mod_revision),
            CompareTarget::CreateRevision => kv.map_or(0, |kv| kv.create_revision),
            CompareTarget::Version => kv.map_or(0, |kv| kv.version),
        };
        if !c.holds(v) {
            succeeded = false;
            break;
        }
    }
    let ops = if succeeded { &t.success } else { &t.failure };
    for op in ops {
        if let TxnOp::Put { lease, .. } = op
            && *lease != 0
        {
            let exists: Option<i64> =
                tx.prepare_cached("SELECT id FROM leases WHERE id = ?1").and_then(|mut s| s.query_row([lease], |r| r.get(0)).optional()).map_err(other)?;
            if exists.is_none() {
                return Err(KvError::LeaseNotFound);
            }
        }
    }
    let rev = revision + 1;
    let mut events = Vec::new();
    let mut responses = Vec::with_capacity(ops.len());
    for op in ops {
        match op {
            TxnOp::Range(r) => {
                let resp = range_in(tx, r, if events.is_empty() { revision } else { rev })?;
                responses.push(TxnOpResponse::Range(resp));
            }
            TxnOp::Put { key, value, lease } => {
                let prev = current(tx, key)?;
                let kv = KeyValue::put(key, value, *lease, prev.as_ref(), rev);
                exec(
                    tx,
                    "INSERT OR REPLACE INTO current VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![&kv.key[..], &kv.value[..], kv.create_revision, rev, kv.version, kv.lease],
                )?;
                exec(
                    tx,
                    "INSERT OR REPLACE INTO log VALUES (?1, ?2, 0, ?3, ?4, ?5, ?6)",
                    params![&kv.key[..], rev, &kv.value[..], kv.create_revision, kv.version, kv.lease],
                )?;
                events.push(Event { kind: EventKind::Put, kv, prev_kv: prev });
                responses.push(TxnOpResponse::Put);
            }
            TxnOp::Delete { key } => {
                let prev = current(tx, key)?;
                if let Some(p) = &prev {
                    exec(tx, "DELETE FROM current WHERE key = ?1", [&key[..]])?;
                    exec(tx, "INSERT OR REPLACE INTO log VALUES (?1, ?2, 1, x'', 0, 0, 0)", params![&key[..], rev])?;
                    events.push(Event {
                        kind: EventKind::Delete,
                        kv: KeyValue { key: key.clone(), value: Bytes::new(), create_revision: 0, mod_revision: rev, version: 0, lease: 0 },
                        prev_kv: Some(p.clone()),
                    });
                }
                responses.push(TxnOpResponse::Delete { prev_kv: prev });
            }
        }
    }
    let header_revision = if events.is_empty() { revision } else { rev };
    Ok((TxnResponse { header_revision, succeeded, responses }, events))
}

/// The live version of `key`.
fn current(tx: &rusqlite::Connection, key: &[u8]) -> Result<Option<KeyValue>, KvError> {
    tx.prepare_cached("SELECT key, value, create_revision, mod_revision, version, lease FROM current WHERE key = ?1")
        .and_then(|mut s| s.query_row([key], kv_from_current).optional())
        .map_err(other)
}

/// A range inside a write transaction (the `failure` branch of guarded writes).
fn range_in(tx: &rusqlite::Connection, r: &RangeRequest, revision: Revision) -> Result<RangeResponse, KvError> {
    let (lo, hi, single) = bounds(&r.key, &r.range_end);
    let mut resp = RangeResponse { header_revision: revision, ..Default::default() };
    let mut push = |kv: KeyValue| {
        resp.count += 1;
        if r.limit == 0 || (resp.kvs.len() as i64) < r.limit {
            resp.kvs.push(kv);
        } else {
            resp.more = true;
        }
    };
    let sql = match (single, &hi) {
        (true, _) => "SELECT key, value, create_revision, mod_revision, version, lease FROM current WHERE key = ?1 ORDER BY key",
        (false, None) => "SELECT key, value, create_revision, mod_revision, version, lease FROM current WHERE key >= ?1 ORDER BY key",
        (false, Some(_)) => "SELECT key, value, create_revision, mod_revision, version, lease FROM current WHERE key >= ?1 AND key < ?2 ORDER BY key",
    };
    let mut stmt = tx.prepare_cached(sql).map_err(other)?;
    let rows = match &hi {
        Some(h) if !single => stmt.query_map(params![lo, h], kv_from_current),
        _ => stmt.query_map(params![lo], kv_from_current),
    }
    .map_err(other)?;
    for kv in rows {
        push(kv.map_err(other)?);
    }
    Ok(resp)
}

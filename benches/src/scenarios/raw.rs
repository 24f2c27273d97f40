//! The storage baselines the API server's writes are measured against: the same keys and
//! values of the same size written straight to etcd (a Txn that creates the key if absent, as
//! a create does) or to SQLite (one durable INSERT per transaction on one connection, WAL mode).
//! An API server stores more than it is sent (defaults, managed fields: kapi stores 5.2 KiB
//! for the 1.7 KiB bench pod), so `--value-bytes` sets the values' size to what it stores.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use etcd_client::{Compare, CompareOp, DeleteOptions, Txn, TxnOp};

use super::{name, pool};
use crate::Api;
use crate::report::{Recorder, Row};

/// The values a baseline writes.
#[derive(clap::Args, Clone)]
pub struct Value {
    /// Each value's size in bytes: the object's JSON as sent (the default), padded to this size.
    #[arg(long)]
    value_bytes: Option<usize>,
}

impl Value {
    pub fn bytes(&self, api: &Api) -> Bytes {
        let sent = api.kind.body(&name("bench", 0), api.size);
        match self.value_bytes {
            Some(n) if n > sent.len() => {
                // Spaces after the object: still its JSON, and no store here compresses them.
                let mut v = sent.to_vec();
                v.resize(n, b' ');
                Bytes::from(v)
            }
            _ => sent,
        }
    }
}

fn key(api: &Api, i: usize) -> String {
    format!("/kapi-bench/{:?}/{}/{}", api.kind, api.namespace, name("bench", i)).to_lowercase()
}

pub async fn etcd(api: &Api, endpoints: &[String], value: Bytes) -> anyhow::Result<Vec<Row>> {
    let client = etcd_client::Client::connect(endpoints, None).await?;
    let prefix = format!("/kapi-bench/{:?}/", api.kind).to_lowercase();
    client.kv_client().delete(prefix.as_str(), Some(DeleteOptions::new().with_prefix())).await?;
    let keys: Arc<Vec<String>> = Arc::new((0..api.count).map(|i| key(api, i)).collect());
    let value_bytes = value.len();
    let (rec, elapsed) = pool(api.concurrency, api.count, move |i| {
        let (mut kv, key, value) = (client.kv_client(), keys[i].clone(), value.clone());
        async move {
            let start = Instant::now();
            let txn = Txn::new().when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)]).and_then([TxnOp::put(key.as_str(), value.to_vec(), None)]);
            let outcome = match kv.txn(txn).await {
                Ok(r) if r.succeeded() => Some(200),
                Ok(_) => Some(409),
                Err(_) => None,
            };
            (outcome, start.elapsed())
        }
    })
    .await;
    etcd_client::Client::connect(endpoints, None).await?.kv_client().delete(prefix.as_str(), Some(DeleteOptions::new().with_prefix())).await?;
    Ok(vec![Row::new("raw-etcd", "txn-create", &rec, elapsed).with("value_bytes", value_bytes)])
}

pub fn sqlite(api: &Api, path: &Path, value: Bytes) -> anyhow::Result<Vec<Row>> {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    // One connection that the workers take turns on, as kapi's store does: SQLite has one
    // writer at a time, and connections that fight for the lock sleep in its busy handler.
    let conn = rusqlite::Connection::open(path)?;
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; CREATE TABLE kv (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;")?;
    let conn = Arc::new(Mutex::new(conn));
    let next = Arc::new(AtomicUsize::new(0));
    let keys: Arc<Vec<String>> = Arc::new((0..api.count).map(|i| key(api, i)).collect());
    let start = Instant::now();
    let workers: Vec<_> = (0..api.concurrency.max(1))
        .map(|_| {
            let (next, value, conn, keys) = (next.clone(), value.clone(), conn.clone(), keys.clone());
            std::thread::spawn(move || {
                let mut rec = Recorder::default();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(key) = keys.get(i) else { return rec };
                    let t = Instant::now();
                    let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
                    let outcome = conn
                        .prepare_cached("INSERT INTO kv (key, value) VALUES (?1, ?2)")
                        .and_then(|mut s| s.execute((key.as_bytes(), &value[..])))
                        .map(|_| 200)
                        .ok();
                    drop(conn);
                    rec.record(outcome, t.elapsed());
                }
            })
        })
        .collect();
    let mut rec = Recorder::default();
    for w in workers {
        rec.merge(&w.join().expect("sqlite workers do not panic"));
    }
    let elapsed = start.elapsed();
    drop(conn);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    Ok(vec![Row::new("raw-sqlite", "insert", &rec, elapsed).with("value_bytes", value.len())])
}

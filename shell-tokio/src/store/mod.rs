//! The stores behind the KV protocol: embedded SQLite (the default) and etcd.

mod etcd;
mod sqlite;

pub use etcd::{Etcd, EtcdConfig};
pub use sqlite::Sqlite;

use jiff::Timestamp;
use kapi_core::kv::{KvError, KvRequest, KvResult, WatchRequest, WatchResponse};
use tokio::sync::mpsc;

/// The store a server runs on.
#[derive(Clone)]
pub enum Store {
    Sqlite(Sqlite),
    Etcd(Etcd),
}

/// etcd's gRPC futures are kilobytes; they are boxed so that every request's future, which
/// holds a store call across its await, stays small to move (tokio moves a task's future into
/// place when it spawns it), on SQLite too.
impl Store {
    pub async fn call(&self, req: KvRequest) -> KvResult {
        match self {
            Store::Sqlite(s) => s.call(req).await,
            Store::Etcd(e) => Box::pin(e.call(req)).await,
        }
    }

    /// Starts a watch; its responses arrive on the returned channel, which closes when the
    /// watch breaks.
    pub async fn watch(&self, req: WatchRequest) -> (u64, mpsc::UnboundedReceiver<WatchResponse>) {
        match self {
            Store::Sqlite(s) => s.watch(req).await,
            Store::Etcd(e) => e.watch(req).await,
        }
    }

    pub async fn cancel_watch(&self, id: u64) {
        match self {
            Store::Sqlite(s) => s.cancel_watch(id).await,
            Store::Etcd(e) => e.cancel_watch(id),
        }
    }

    pub async fn request_progress(&self, id: u64) {
        match self {
            Store::Sqlite(s) => s.request_progress(id).await,
            Store::Etcd(e) => e.request_progress(id),
        }
    }

    /// Deletes the keys of leases expired at `now`. etcd expires its leases itself.
    pub async fn expire_leases(&self, now: Timestamp) -> Result<(), KvError> {
        match self {
            Store::Sqlite(s) => s.expire_leases(now).await,
            Store::Etcd(_) => Ok(()),
        }
    }

    /// Whether the watch cache can serve consistent LISTs: its store answers progress requests
    /// in order with events.
    pub fn ordered_progress(&self) -> bool {
        match self {
            Store::Sqlite(_) => true,
            Store::Etcd(e) => e.ordered_progress(),
        }
    }

    pub async fn health(&self) -> Result<(), String> {
        match self {
            Store::Sqlite(s) => s.health().await,
            Store::Etcd(e) => Box::pin(e.health()).await,
        }
    }
}

#[cfg(test)]
mod conformance;

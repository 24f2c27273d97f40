//! One task per resource runs its watch cache machine: it feeds the machine the store's watch
//! stream, the requests' reads and watch registrations, and carries out its effects. Watch
//! frames go to each watcher through a bounded hand-off (`kapi-handoff`, loom-checked); a full
//! one is reported to the machine, which decides to close the slow watcher.
//!
//! After every turn of its machine the task publishes the cache's state (an immutable
//! snapshot, swapped in whole), and a read that state can answer is answered from it by the
//! requester itself, without waiting for a turn of the task (as kube's admission plugins read
//! their informers' caches).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use kapi_core::cache::{CacheEffect, CacheEvent, DEFAULT_HISTORY, ReadId, ReadRequest, ReadResult, Snapshot, WatchCache, WatchParams, WatcherId};
use kapi_core::catalog::Resource;
use kapi_core::kv::{KvResult, WatchResponse};
use kapi_core::status::ApiError;
use tokio::sync::{mpsc, oneshot};

use crate::clock::{instant_of, now};
use crate::store::Store;
use kapi_handoff as handoff;

/// Chunks a watcher may have in flight before it counts as slow.
const WATCHER_BUFFER: usize = 1024;

/// What a watch connection receives: one live frame, or the batch of frames it starts with
/// (a batch takes one place in the watcher's buffer, however long).
pub enum Chunk {
    One(Bytes),
    Batch(Vec<Bytes>),
}

impl IntoIterator for Chunk {
    type Item = Bytes;
    type IntoIter = std::iter::Chain<std::option::IntoIter<Bytes>, std::vec::IntoIter<Bytes>>;

    fn into_iter(self) -> Self::IntoIter {
        match self {
            Chunk::One(b) => Some(b).into_iter().chain(Vec::new()),
            Chunk::Batch(v) => None.into_iter().chain(v),
        }
    }
}

enum Command {
    Read(ReadRequest, oneshot::Sender<Result<ReadResult, ApiError>>),
    Watch(WatchParams, handoff::Sender<Chunk>),
    Gone(WatcherId),
}

/// A cache task's command channel, whether its cache is ready, and its published state.
struct Handle {
    commands: mpsc::UnboundedSender<Command>,
    ready: Arc<AtomicBool>,
    published: Arc<ArcSwapOption<Snapshot>>,
}

/// The handles of every resource's cache task.
#[derive(Clone)]
pub struct Caches {
    by_resource: Arc<HashMap<(String, String, String), Handle>>,
}

fn key(res: &Resource) -> (String, String, String) {
    (res.info.group.to_string(), res.info.version.to_string(), res.info.resource.to_string())
}

impl Caches {
    /// Starts a cache task for each resource.
    pub fn start(resources: impl Iterator<Item = (Arc<Resource>, String)>, store: Store) -> Caches {
        let mut by_resource = HashMap::new();
        for (res, prefix) in resources {
            let (tx, rx) = mpsc::unbounded_channel();
            let handle = Handle { commands: tx.clone(), ready: Arc::default(), published: Arc::default() };
            let task = Task { store: store.clone(), me: tx, ready: handle.ready.clone(), published: handle.published.clone() };
            by_resource.insert(key(&res), handle);
            let cache = WatchCache::new(res, Bytes::from(prefix), DEFAULT_HISTORY);
            tokio::spawn(run(cache, task, rx));
        }
        Caches { by_resource: Arc::new(by_resource) }
    }

    pub fn ready(&self) -> bool {
        self.by_resource.values().all(|h| h.ready.load(Ordering::Relaxed))
    }

    fn handle(&self, res: &Resource) -> Result<&Handle, ApiError> {
        self.by_resource.get(&key(res)).ok_or_else(|| ApiError::internal(format!("no cache for {}", res.info.resource)))
    }

    pub async fn read(&self, res: &Resource, request: ReadRequest) -> Result<ReadResult, ApiError> {
        let handle = self.handle(res)?;
        if let Some(answer) = handle.published.load().as_deref().and_then(|s| request.answer_from(s)) {
            return Ok(answer);
        }
        let (tx, rx) = oneshot::channel();
        handle.commands.send(Command::Read(request, tx)).map_err(|_| ApiError::internal("cache stopped"))?;
        rx.await.map_err(|_| ApiError::internal("cache stopped"))?
    }

    /// Registers a watch; its frames arrive on the returned channel until it ends.
    pub fn watch(&self, res: &Resource, params: WatchParams) -> Result<handoff::Receiver<Chunk>, ApiError> {
        let (tx, rx) = handoff::channel(WATCHER_BUFFER);
        self.handle(res)?.commands.send(Command::Watch(params, tx)).map_err(|_| ApiError::internal("cache stopped"))?;
        Ok(rx)
    }
}

/// What a cache task holds besides its machine and its commands.
struct Task {
    store: Store,
    /// Its own command channel (watchers that go away say so on it).
    me: mpsc::UnboundedSender<Command>,
    ready: Arc<AtomicBool>,
    published: Arc<ArcSwapOption<Snapshot>>,
}

async fn run(mut cache: WatchCache, task: Task, mut commands: mpsc::UnboundedReceiver<Command>) {
    let Task { store, me, ready, published } = task;
    // The (readiness, revision) last published: the state is swapped only when it changed.
    let mut shown = (false, 0);
    let (kv_tx, mut kv_rx) = mpsc::unbounded_channel::<KvResult>();
    let mut watch: Option<(u64, mpsc::UnboundedReceiver<WatchResponse>)> = None;
    let mut reads: BTreeMap<ReadId, oneshot::Sender<Result<ReadResult, ApiError>>> = BTreeMap::new();
    let mut watchers: BTreeMap<WatcherId, handoff::Sender<Chunk>> = BTreeMap::new();
    let mut next_id = 0u64;
    loop {
        while let Some(effect) = cache.poll(now()) {
            match effect {
                CacheEffect::Kv(req) => {
                    let (store, tx) = (store.clone(), kv_tx.clone());
                    tokio::spawn(async move {
                        let _ = tx.send(store.call(req).await);
                    });
                }
                CacheEffect::StartWatch(req) => {
                    if let Some((old, _)) = watch.take() {
                        store.cancel_watch(old).await;
                    }
                    watch = Some(store.watch(req).await);
                }
                CacheEffect::RequestProgress => {
                    if let Some((id, _)) = &watch {
                        store.request_progress(*id).await;
                    }
                }
                CacheEffect::Deliver { ids, frame } => {
                    for id in ids {
                        send(&mut cache, &mut watchers, id, Chunk::One(frame.clone()));
                    }
                }
                CacheEffect::Backlog { id, frames } => send(&mut cache, &mut watchers, id, Chunk::Batch(frames)),
                CacheEffect::Close { id } => {
                    watchers.remove(&id);
                }
                CacheEffect::ReadDone { id, result } => {
                    if let Some(tx) = reads.remove(&id) {
                        let _ = tx.send(result);
                    }
                }
            }
        }
        ready.store(cache.is_ready(), Ordering::Relaxed);
        let state = cache.published();
        let now_shown = state.as_ref().map_or((false, 0), |s| (true, s.revision));
        if now_shown != shown {
            shown = now_shown;
            published.store(state.map(Arc::new));
        }
        let timer = cache.poll_timeout().map(instant_of);
        tokio::select! {
            cmd = commands.recv() => match cmd {
                Some(Command::Read(request, reply)) => {
                    next_id += 1;
                    let id = ReadId(next_id);
                    reads.insert(id, reply);
                    cache.handle(now(), CacheEvent::Read { id, request });
                }
                Some(Command::Watch(params, frames)) => {
                    next_id += 1;
                    let id = WatcherId(next_id);
                    // When the client goes away, the watcher goes too.
                    let (gone, me) = (frames.closed(), me.clone());
                    tokio::spawn(async move {
                        gone.await;
                        let _ = me.send(Command::Gone(id));
                    });
                    watchers.insert(id, frames);
                    cache.handle(now(), CacheEvent::Register { id, params });
                }
                Some(Command::Gone(id)) => {
                    if watchers.remove(&id).is_some() {
                        cache.handle(now(), CacheEvent::Unregister { id });
                    }
                }
                None => return,
            },
            Some(result) = kv_rx.recv() => cache.handle(now(), CacheEvent::Kv(result)),
            resp = async { watch.as_mut().expect("guarded by the select condition").1.recv().await }, if watch.is_some() => match resp {
                Some(r) => cache.handle(now(), CacheEvent::Watch(r)),
                None => {
                    watch = None;
                    cache.handle(now(), CacheEvent::WatchFailed);
                }
            },
            _ = async { tokio::time::sleep_until(timer.expect("guarded by the select condition")).await }, if timer.is_some() => {}
        }
    }
}

/// Hands a chunk to a watcher's connection; a full buffer makes the watcher slow, a closed one gone.
fn send(cache: &mut WatchCache, watchers: &mut BTreeMap<WatcherId, handoff::Sender<Chunk>>, id: WatcherId, chunk: Chunk) {
    let Some(tx) = watchers.get(&id) else { return };
    match tx.try_send(chunk) {
        Ok(()) => {}
        Err(handoff::TrySendError::Full(_)) => cache.handle(now(), CacheEvent::Slow { id }),
        Err(handoff::TrySendError::Closed(_)) => {
            watchers.remove(&id);
            cache.handle(now(), CacheEvent::Unregister { id });
        }
    }
}

//! Watchers that note when each event arrives, and the watch-fanout scenario: W watchers on one
//! collection, one writer creating objects at R per second. Delivery latency is from the
//! write's acknowledgement (its response) to each watcher's receipt of the event; every watcher
//! must see every acknowledged write it selects once.
//!
//! A watcher may select one group of objects (label `bench-group=g<N>`, as a kubelet selects
//! its node's pods); a write is acknowledged with its object's group.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::Method;
use http_body_util::BodyExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{name, resource_version};
use crate::Api;
use crate::client::Client;
use crate::kubeconfig::Target;
use crate::report::{Recorder, Row};

/// The label that puts an object in a group.
pub const GROUP_LABEL: &str = "bench-group";

/// What identifies a write's event: the resourceVersion a create or update answered with, or
/// the name of a deleted object (servers differ in the resourceVersion a DELETE answers with:
/// the object's last one, or the deletion's).
#[derive(Clone, PartialEq, Eq, Hash)]
enum Write {
    Rv(u64),
    Deleted(String),
}

/// When a write was acknowledged, and its object's group.
type Ack = (Instant, Option<usize>);

/// Every acknowledged write.
#[derive(Clone, Default)]
pub struct Acks(Arc<Mutex<HashMap<Write, Ack>>>);

impl Acks {
    /// A create or update answered with `body`.
    pub fn note(&self, body: &[u8], group: Option<usize>) {
        if let Some(rv) = resource_version(body) {
            self.0.lock().expect("no panics while held").insert(Write::Rv(rv), (Instant::now(), group));
        }
    }

    /// The deletion of `name`.
    pub fn note_deleted(&self, name: &str, group: Option<usize>) {
        self.0.lock().expect("no panics while held").insert(Write::Deleted(name.to_string()), (Instant::now(), group));
    }
}

/// What one watcher received: each event's resourceVersion and arrival, or why it ended early.
struct Log {
    /// The group it selects; `None`: it sees everything.
    group: Option<usize>,
    seen: Vec<(Write, Instant)>,
    error: Option<String>,
}

/// Running watchers; `stop` ends them and measures.
pub struct Watchers {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<Log>>,
}

#[derive(serde::Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    object: serde_json::Value,
}

/// Reads a watch stream until `stop`, noting each event's arrival.
async fn run(client: Client, path: String, group: Option<usize>, ready: tokio::sync::mpsc::Sender<Result<(), String>>, mut stop: watch::Receiver<bool>) -> Log {
    let mut log = Log { group, seen: Vec::new(), error: None };
    let resp = match client.send(Method::GET, &path, None).await {
        Ok(r) if r.status() == 200 => r,
        Ok(r) => {
            log.error = Some(format!("status {}", r.status()));
            let _ = ready.send(Err(log.error.clone().unwrap_or_default())).await;
            return log;
        }
        Err(e) => {
            log.error = Some(e.to_string());
            let _ = ready.send(Err(e.to_string())).await;
            return log;
        }
    };
    let _ = ready.send(Ok(())).await;
    drop(ready);
    let mut body = resp.into_body();
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let frame = tokio::select! {
            f = body.frame() => f,
            _ = stop.changed() => return log,
        };
        let data = match frame {
            Some(Ok(f)) => match f.into_data() {
                Ok(d) => d,
                Err(_) => continue,
            },
            Some(Err(e)) => {
                log.error = Some(e.to_string());
                return log;
            }
            None => {
                log.error = Some("the server ended the watch".into());
                return log;
            }
        };
        let at = Instant::now();
        buf.extend_from_slice(&data);
        while let Some(end) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            match serde_json::from_slice::<Event>(&line) {
                Ok(e) if e.kind == "ERROR" => log.error = Some(format!("ERROR event: {}", e.object)),
                Ok(e) if e.kind == "DELETED" => {
                    if let Some(name) = e.object["metadata"]["name"].as_str() {
                        log.seen.push((Write::Deleted(name.to_string()), at));
                    }
                }
                Ok(e) => {
                    if let Some(rv) = e.object["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()) {
                        log.seen.push((Write::Rv(rv), at));
                    }
                }
                Err(_) => log.error = Some("an undecodable event".into()),
            }
        }
    }
}

impl Watchers {
    /// Starts a watch of `collection` from `rv` for each of `groups` (the group it selects, or
    /// `None` for all), `per_connection` to a connection, and returns once every one has its
    /// response head (or failed).
    pub async fn start(target: &Target, collection: &str, rv: u64, groups: &[Option<usize>], per_connection: usize) -> anyhow::Result<Watchers> {
        let count = groups.len();
        let (stop, stopped) = watch::channel(false);
        let (ready_tx, mut ready) = tokio::sync::mpsc::channel(count.max(1));
        let mut client = Client::new(target);
        let mut tasks = Vec::with_capacity(count);
        for (i, group) in groups.iter().enumerate() {
            if i > 0 && i % per_connection.max(1) == 0 {
                client = Client::new(target);
            }
            let selector = group.map(|g| format!("&labelSelector={GROUP_LABEL}%3Dg{g}")).unwrap_or_default();
            let path = format!("{collection}?watch=true&resourceVersion={rv}&timeoutSeconds=3600{selector}");
            tasks.push(tokio::spawn(run(client.clone(), path, *group, ready_tx.clone(), stopped.clone())));
        }
        drop(ready_tx);
        let mut failed = 0;
        while let Some(r) = ready.recv().await {
            failed += r.is_err() as usize;
        }
        if failed > 0 {
            anyhow::bail!("{failed} of {count} watches failed to start");
        }
        Ok(Watchers { stop, tasks })
    }

    /// Waits until every watcher has seen every acknowledged write (or `grace` passes), ends
    /// the watches and measures: delivery latencies, and events missed, duplicated or foreign.
    pub async fn finish(self, acks: &Acks, grace: Duration) -> (Recorder, BTreeMap<&'static str, u64>) {
        tokio::time::sleep(grace).await;
        let _ = self.stop.send(true);
        let acks = acks.0.lock().expect("no panics while held").clone();
        let mut rec = Recorder::default();
        let (mut missed, mut duplicated, mut errors) = (0u64, 0u64, 0u64);
        for t in self.tasks {
            let log = t.await.expect("watchers do not panic");
            errors += log.error.is_some() as u64;
            let mut counts: HashMap<&Write, u32> = HashMap::with_capacity(log.seen.len());
            for (write, at) in &log.seen {
                *counts.entry(write).or_default() += 1;
                if let Some((acked, _)) = acks.get(write) {
                    rec.latency(at.saturating_duration_since(*acked));
                    rec.count(Some(200));
                }
            }
            duplicated += counts.values().map(|&n| n as u64 - 1).sum::<u64>();
            let expected = |group: &Option<usize>| log.group.is_none() || *group == log.group;
            missed += acks.iter().filter(|(write, (_, group))| expected(group) && !counts.contains_key(write)).count() as u64;
        }
        let figures = BTreeMap::from([("missed", missed), ("duplicated", duplicated), ("watch_errors", errors), ("acknowledged_writes", acks.len() as u64)]);
        (rec, figures)
    }
}

/// The collection's current resourceVersion (a LIST with limit=1).
pub async fn current_rv(client: &Client, collection: &str) -> anyhow::Result<u64> {
    let (outcome, body, _) = client.call(Method::GET, &format!("{collection}?limit=1"), None).await;
    anyhow::ensure!(outcome == Some(200), "listing {collection}: {outcome:?} {}", String::from_utf8_lossy(&body));
    resource_version(&body).ok_or_else(|| anyhow::anyhow!("the list of {collection} has no resourceVersion"))
}

pub async fn fanout(api: &Api, target: &Target, watchers: usize, rate: f64, duration: Duration, per_connection: usize) -> anyhow::Result<Vec<Row>> {
    let client = Client::new(target);
    super::crud::namespace(&client, &api.namespace).await?;
    let collection = api.kind.collection(&api.namespace);
    let rv = current_rv(&client, &collection).await?;
    let w = Watchers::start(target, &collection, rv, &vec![None; watchers], per_connection).await?;
    let acks = Acks::default();
    let prefix = super::run_prefix("fanout");
    let (writes, elapsed) = paced(rate, duration, |i| {
        let (client, collection, acks, body) = (client.clone(), collection.clone(), acks.clone(), api.kind.body(&name(&prefix, i), api.size));
        async move {
            let (outcome, body, d) = client.call(Method::POST, &collection, Some(body)).await;
            if outcome == Some(201) {
                acks.note(&body, None);
            }
            (outcome, d)
        }
    })
    .await;
    let (delivery, figures) = w.finish(&acks, Duration::from_secs(2)).await;
    let mut row = Row::new("watch-fanout", &format!("deliver/{watchers}"), &delivery, elapsed);
    for (k, v) in figures {
        row = row.with(k, v);
    }
    Ok(vec![Row::new("watch-fanout", "write", &writes, elapsed), row])
}

/// Starts `op(i)` at `rate` per second for `duration` (each in its own task, so a slow one
/// does not hold back the schedule); returns what they recorded once all have ended.
pub async fn paced<F, Fut>(rate: f64, duration: Duration, mut op: F) -> (Recorder, Duration)
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = (Option<u16>, Duration)> + Send + 'static,
{
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.max(0.001)));
    let mut tasks = Vec::new();
    let mut i = 0;
    while start.elapsed() < duration {
        tick.tick().await;
        tasks.push(tokio::spawn(op(i)));
        i += 1;
    }
    let mut rec = Recorder::default();
    for t in tasks {
        let (outcome, d) = t.await.expect("bench tasks do not panic");
        rec.record(outcome, d);
    }
    (rec, start.elapsed())
}

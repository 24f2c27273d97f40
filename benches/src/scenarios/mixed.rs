//! Steady-state churn like the Kubernetes density tests: pods created, updated (merge patch)
//! and deleted in turn at a given rate; W watchers that each select their own share of the pods
//! (as each kubelet watches its node's pods), a few informers that watch them all (as the
//! scheduler and controllers do), and a full LIST every few seconds. Each kind of operation
//! gets its own latency row, and so does watch delivery.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;

use super::watch::{Acks, GROUP_LABEL, Watchers, current_rv, paced};
use super::{name, pool};
use crate::Api;
use crate::client::Client;
use crate::objects::Kind;
use crate::report::{Recorder, Row};

pub struct Mixed {
    pub pods: usize,
    pub rate: f64,
    /// Watchers of one share of the pods each.
    pub watchers: usize,
    /// Watchers of every pod.
    pub informers: usize,
    pub per_connection: usize,
    pub list_interval: Duration,
    pub duration: Duration,
}

#[derive(Clone, Copy)]
enum Op {
    Create,
    Update,
    Delete,
}

pub async fn mixed(api: &Api, target: &crate::kubeconfig::Target, m: &Mixed) -> anyhow::Result<Vec<Row>> {
    let client = Client::new(target);
    super::crud::namespace(&client, &api.namespace).await?;
    let collection = Kind::Pod.collection(&api.namespace);

    let groups = m.watchers.max(1);
    let c = (client.clone(), collection.clone());
    let (setup, _) = pool(api.concurrency, m.pods, move |i| {
        let (client, collection) = c.clone();
        async move {
            let (outcome, _, d) = client.call(Method::POST, &collection, Some(grouped(&name("mixed", i), i % groups))).await;
            (outcome, d)
        }
    })
    .await;
    anyhow::ensure!(setup.errors().is_empty(), "creating the initial pods failed: {:?}", setup.errors());
    let live = Arc::new(Mutex::new((0..m.pods).map(|i| (name("mixed", i), i % groups)).collect::<VecDeque<_>>()));

    let rv = current_rv(&client, &collection).await?;
    let selects: Vec<Option<usize>> = (0..m.informers).map(|_| None).chain((0..m.watchers).map(Some)).collect();
    let watchers = Watchers::start(target, &collection, rv, &selects, m.per_connection).await?;
    let acks = Acks::default();

    let lists = {
        let (client, collection, interval, until) = (client.clone(), collection.clone(), m.list_interval, Instant::now() + m.duration);
        tokio::spawn(async move {
            let mut rec = Recorder::default();
            while Instant::now() + interval < until {
                tokio::time::sleep(interval).await;
                let (outcome, _, d) = client.call(Method::GET, &collection, None).await;
                rec.record(outcome, d);
            }
            rec
        })
    };

    let recorders: Arc<Mutex<[Recorder; 3]>> = Arc::default();
    let prefix = super::run_prefix("churn");
    let (_, elapsed) = paced(m.rate, m.duration, |i| {
        let (client, collection, live, acks, recorders, n) =
            (client.clone(), collection.clone(), live.clone(), acks.clone(), recorders.clone(), name(&prefix, i));
        let op = [Op::Create, Op::Update, Op::Delete][i % 3];
        async move {
            let ((outcome, body, d), j) = match op {
                Op::Create => {
                    let r = client.call(Method::POST, &collection, Some(grouped(&n, i % groups))).await;
                    if r.0 == Some(201) {
                        live.lock().expect("no panics while held").push_back((n, i % groups));
                    }
                    (r, i % groups)
                }
                Op::Update => {
                    // The pod is taken out of the live ones while it is updated, so that a
                    // delete running at the same time does not take it (a slow server would
                    // then answer the update 404, rightly).
                    let target = {
                        let mut live = live.lock().expect("no panics while held");
                        let at = i.wrapping_mul(7919) % live.len().max(1);
                        live.remove(at)
                    };
                    let Some((target, j)) = target else { return (None, Duration::ZERO) };
                    let patch = Bytes::from(format!(r#"{{"metadata":{{"labels":{{"churn":"{i}"}}}}}}"#));
                    let r = client.call_as(Method::PATCH, &format!("{collection}/{target}"), Some(patch), "application/merge-patch+json").await;
                    live.lock().expect("no panics while held").push_back((target, j));
                    (r, j)
                }
                Op::Delete => {
                    let target = live.lock().expect("no panics while held").pop_front();
                    let Some((target, j)) = target else { return (None, Duration::ZERO) };
                    let r = client.call(Method::DELETE, &format!("{collection}/{target}"), None).await;
                    if r.0.is_some_and(|c| c < 300) {
                        acks.note_deleted(&target, Some(j));
                    }
                    (r, j)
                }
            };
            if outcome.is_some_and(|c| c < 300) && !matches!(op, Op::Delete) {
                acks.note(&body, Some(j));
            }
            recorders.lock().expect("no panics while held")[op as usize].record(outcome, d);
            (outcome, d)
        }
    })
    .await;
    let lists = lists.await.expect("the lister does not panic");
    let (delivery, figures) = watchers.finish(&acks, Duration::from_secs(2)).await;

    let recorders = recorders.lock().expect("no panics while held").clone();
    let mut rows: Vec<Row> = ["create", "update", "delete"].iter().zip(recorders.iter()).map(|(op, rec)| Row::new("mixed", op, rec, elapsed)).collect();
    rows.push(Row::new("mixed", "list", &lists, elapsed));
    let mut row = Row::new("mixed", &format!("deliver/{}+{}", m.watchers, m.informers), &delivery, elapsed);
    for (k, v) in figures {
        row = row.with(k, v);
    }
    rows.push(row);
    Ok(rows)
}

/// A pod in `group` (`bench-group=g<group>`).
fn grouped(name: &str, group: usize) -> Bytes {
    let mut pod = Kind::Pod.object(name, 0);
    pod["metadata"]["labels"][GROUP_LABEL] = format!("g{group}").into();
    Bytes::from(serde_json::to_vec(&pod).expect("JSON trees serialize"))
}

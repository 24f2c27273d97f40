//! Steady-state churn like the Kubernetes density tests: pods created, updated (merge patch)
//! and deleted in turn at a given rate, W watchers on the pods, and a full LIST every few
//! seconds. Each kind of operation gets its own latency row, and so does watch delivery.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;

use super::watch::{Acks, Watchers, current_rv, paced};
use super::{name, pool};
use crate::Api;
use crate::client::Client;
use crate::objects::Kind;
use crate::report::{Recorder, Row};

pub struct Mixed {
    pub pods: usize,
    pub rate: f64,
    pub watchers: usize,
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

    let c = (client.clone(), collection.clone());
    let (setup, _) = pool(api.concurrency, m.pods, move |i| {
        let (client, collection) = c.clone();
        async move {
            let (outcome, _, d) = client.call(Method::POST, &collection, Some(Kind::Pod.body(&name("mixed", i), 0))).await;
            (outcome, d)
        }
    })
    .await;
    anyhow::ensure!(setup.errors().is_empty(), "creating the initial pods failed: {:?}", setup.errors());
    let live = Arc::new(Mutex::new((0..m.pods).map(|i| name("mixed", i)).collect::<VecDeque<_>>()));

    let rv = current_rv(&client, &collection).await?;
    let watchers = Watchers::start(target, &collection, rv, m.watchers, m.per_connection).await?;
    let acks = Acks::default();

    let lists = {
        let (client, collection, interval, until) = (client.clone(), collection.clone(), m.list_interval, Instant::now() + m.duration);
        tokio::spawn(async move {
            let mut rec = Recorder::default();
            while Instant::now() + interval < until {
                tokio::time::sleep(interval).await;
                let (outcome, body, d) = client.call(Method::GET, &collection, None).await;
                rec.record(outcome, d);
                rec.bytes += body.len() as u64;
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
            let (outcome, body, d) = match op {
                Op::Create => {
                    let r = client.call(Method::POST, &collection, Some(Kind::Pod.body(&n, 0))).await;
                    if r.0 == Some(201) {
                        live.lock().expect("no panics while held").push_back(n);
                    }
                    r
                }
                Op::Update => {
                    let target = {
                        let live = live.lock().expect("no panics while held");
                        live.get(i.wrapping_mul(7919) % live.len().max(1)).cloned()
                    };
                    let Some(target) = target else { return (None, Duration::ZERO) };
                    let patch = Bytes::from(format!(r#"{{"metadata":{{"labels":{{"churn":"{i}"}}}}}}"#));
                    client.call_as(Method::PATCH, &format!("{collection}/{target}"), Some(patch), "application/merge-patch+json").await
                }
                Op::Delete => {
                    let target = live.lock().expect("no panics while held").pop_front();
                    let Some(target) = target else { return (None, Duration::ZERO) };
                    client.call(Method::DELETE, &format!("{collection}/{target}"), None).await
                }
            };
            if outcome.is_some_and(|c| c < 300) {
                acks.note(&body);
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
    let mut row = Row::new("mixed", &format!("deliver/{}", m.watchers), &delivery, elapsed);
    for (k, v) in figures {
        row = row.with(k, v);
    }
    rows.push(row);
    Ok(rows)
}

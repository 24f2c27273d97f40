//! The scenarios, each a function from its options to result rows.

pub mod crds;
pub mod crud;
pub mod list;
pub mod mixed;
pub mod raw;
pub mod watch;
pub mod webhook;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::client::Outcome;
use crate::report::Recorder;

/// The name of the `i`th object a scenario writes.
pub fn name(prefix: &str, i: usize) -> String {
    format!("{prefix}-{i:06}")
}

/// A prefix for the names one run writes, so runs against the same server do not collide.
pub fn run_prefix(scenario: &str) -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
    format!("{scenario}-{secs:x}")
}

/// Runs `op(0) .. op(count - 1)` on `concurrency` workers; returns what they recorded and the
/// time they took.
pub async fn pool<F, Fut>(concurrency: usize, count: usize, op: F) -> (Recorder, Duration)
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = (Outcome, Duration)> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let workers: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let (next, op) = (next.clone(), op.clone());
            tokio::spawn(async move {
                let mut rec = Recorder::default();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        return rec;
                    }
                    let (outcome, d) = op(i).await;
                    rec.record(outcome, d);
                }
            })
        })
        .collect();
    let mut total = Recorder::default();
    for w in workers {
        total.merge(&w.await.expect("bench workers do not panic"));
    }
    (total, start.elapsed())
}

/// `resourceVersion` of the object (or list) in a JSON body.
pub fn resource_version(body: &[u8]) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(rename = "resourceVersion")]
        resource_version: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Obj {
        metadata: Meta,
    }
    serde_json::from_slice::<Obj>(body).ok()?.metadata.resource_version?.parse().ok()
}

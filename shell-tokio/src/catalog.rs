//! Serves what CustomResourceDefinitions define: each new state of the CRD cache is taken in
//! by the core (`Served::with_crds`); a changed catalog gets its caches started, is put in place
//! for the requests that start from then on, and the caches of what it no longer serves stop
//! once the requests that started before are done (or a minute has passed, as kube-apiserver
//! waits for requests to drain before it drops a CRD's storage).

use std::sync::Arc;
use std::time::Duration;

use kapi_core::catalog::Catalog;

use crate::http::State;

pub async fn run(state: Arc<State>, builtins: Catalog) {
    let Some((_, changed)) = state.caches.published("apiextensions.k8s.io", "v1", "customresourcedefinitions") else { return };
    let mut seen = None;
    loop {
        changed.notified().await;
        let Some((Some(crds), _)) = state.caches.published("apiextensions.k8s.io", "v1", "customresourcedefinitions") else { continue };
        if seen == Some(crds.revision) {
            continue;
        }
        seen = Some(crds.revision);
        let Some(next) = state.served.load().with_crds(&builtins, &crds) else { continue };
        let stored = next.catalog.resources().filter(|r| r.info.stored()).map(|r| (r.clone(), format!("{}/", state.server.storage_root(r))));
        let retired = state.caches.sync(stored.collect::<Vec<_>>().into_iter());
        let previous = state.served.swap(next);
        tokio::spawn(async move {
            // Each request holds the catalog it started with until it ends.
            let drained = async {
                while Arc::strong_count(&previous) > 1 {
                    tokio::time::sleep(DRAIN_POLL).await;
                }
            };
            let _ = tokio::time::timeout(DRAIN_LIMIT, drained).await;
            retired.stop();
        });
    }
}

/// How often, and for how long at most, the end of the requests under a replaced catalog is
/// waited for before the caches it alone served stop.
const DRAIN_POLL: Duration = Duration::from_millis(100);
const DRAIN_LIMIT: Duration = Duration::from_secs(60);

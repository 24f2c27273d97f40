//! Serves what CustomResourceDefinitions define: each new state of the CRD cache is taken in
//! by the core (`Served::with_crds`); a changed catalog gets its caches started, is put in place
//! for the requests that start from then on, and the caches of what it no longer serves stop.

use std::sync::Arc;

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
        state.served.store(next);
        retired.stop();
    }
}

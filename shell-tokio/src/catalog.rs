//! Serves what CustomResourceDefinitions define and APIServices hand to extension servers:
//! each new state of the CRD cache is taken in by the core (`Served::with_crds`); a changed
//! catalog gets its caches started, is put in place for the requests that start from then on,
//! and the caches of what it no longer serves stop once the requests that started before are
//! done (or a minute has passed, as kube-apiserver waits for requests to drain before it drops
//! a CRD's storage). Each new state of the APIService cache is taken in likewise
//! (`Served::with_api_services`); one task does both, so neither change undoes the other.

use std::sync::Arc;
use std::time::Duration;

use kapi_core::catalog::Catalog;

use crate::http::State;

pub async fn run(state: Arc<State>, builtins: Catalog) {
    const CRDS: (&str, &str, &str) = ("apiextensions.k8s.io", "v1", "customresourcedefinitions");
    const API_SERVICES: (&str, &str, &str) = ("apiregistration.k8s.io", "v1", "apiservices");
    let published = |(g, v, r): (&str, &str, &str)| state.caches.published(g, v, r);
    let (Some((_, crds_changed)), Some((_, apis_changed))) = (published(CRDS), published(API_SERVICES)) else { return };
    let (mut crds_seen, mut apis_seen) = (None, None);
    loop {
        tokio::select! {
            _ = crds_changed.notified() => {}
            _ = apis_changed.notified() => {}
        }
        if let Some((Some(apis), _)) = published(API_SERVICES)
            && apis_seen != Some(apis.revision)
        {
            apis_seen = Some(apis.revision);
            let objects: Vec<serde_json::Value> = apis.objects.values().map(|o| o.value()).collect();
            if let Some(next) = state.served.load().with_api_services(&objects) {
                state.served.store(next);
            }
        }
        let Some((Some(crds), _)) = published(CRDS) else { continue };
        if crds_seen == Some(crds.revision) {
            continue;
        }
        crds_seen = Some(crds.revision);
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

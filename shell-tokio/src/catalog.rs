//! Serves what CustomResourceDefinitions define and APIServices hand to extension servers:
//! each new state of the CRD cache is taken in by the core (`Served::with_crds`); a changed
//! catalog gets its caches started, is put in place for the requests that start from then on,
//! and the caches of what it no longer serves stop once the requests that started before are
//! done (or a minute has passed, as kube-apiserver waits for requests to drain before it drops
//! a CRD's storage). Each new state of the APIService cache is taken in likewise
//! (`Served::with_api_services`), and what the availability controller learns that extension
//! servers serve (`Served::with_discovered`), and each new state of the caches of what the
//! authorizers read (`Served::with_authz`: the RBAC objects for RBAC, pods and volumes for the
//! Node authorizer), and of what admission is configured by (`Served::with_admission`: webhook configurations,
//! admission policies and their bindings); one task
//! makes every change, so none undoes another.

use std::sync::Arc;
use std::time::Duration;

use kapi_core::admission::SOURCES;
use kapi_core::cache::Objects;
use kapi_core::catalog::Catalog;

use tokio::sync::{Notify, mpsc};

use crate::controllers::Learned;
use crate::http::State;

pub async fn run(state: Arc<State>, builtins: Catalog, mut discovered: mpsc::UnboundedReceiver<Learned>) {
    const CRDS: (&str, &str, &str) = ("apiextensions.k8s.io", "v1", "customresourcedefinitions");
    const API_SERVICES: (&str, &str, &str) = ("apiregistration.k8s.io", "v1", "apiservices");
    let published = |(g, v, r): (&str, &str, &str)| state.caches.published(g, v, r);
    // Either group may be off (`--runtime-config`); the other is followed all the same.
    let (crds_changed, apis_changed) = (published(CRDS).map(|(_, n)| n), published(API_SERVICES).map(|(_, n)| n));
    let (mut crds_seen, mut apis_seen) = (None, None);
    // What the authorizers read: each collection's objects as last taken in.
    let authz_sources = state.server.authorizer.load().sources();
    let authz_changed: Vec<Option<Arc<Notify>>> = authz_sources.iter().map(|s| published(s.resource()).map(|(_, n)| n)).collect();
    let mut authz_seen: Vec<Objects> = vec![Objects::new(); authz_sources.len()];
    // What admission is configured by, likewise.
    let admission_changed: Vec<Option<Arc<Notify>>> = SOURCES.iter().map(|(_, r)| published(*r).map(|(_, n)| n)).collect();
    let mut admission_seen: [Option<Objects>; SOURCES.len()] = Default::default();
    loop {
        tokio::select! {
            _ = notified(&crds_changed) => {}
            _ = notified(&apis_changed) => {}
            _ = any_notified(&authz_changed) => {}
            _ = any_notified(&admission_changed) => {}
            Some((group, version, discovery)) = discovered.recv() => {
                if let Some(next) = state.served.load().with_discovered(&group, &version, discovery) {
                    state.served.store(next);
                }
                continue;
            }
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
        for (source, seen) in authz_sources.iter().zip(authz_seen.iter_mut()) {
            if let Some((Some(now), _)) = published(source.resource())
                && !seen.ptr_eq(&now.objects)
            {
                state.served.store(state.served.load().with_authz(*source, seen, &now.objects));
                *seen = now.objects.clone();
            }
        }
        for ((source, resource), seen) in SOURCES.into_iter().zip(admission_seen.iter_mut()) {
            if let Some((Some(now), _)) = published(resource)
                && !seen.as_ref().is_some_and(|seen| seen.ptr_eq(&now.objects))
            {
                let objects: Vec<serde_json::Value> = now.objects.values().map(|o| o.value()).collect();
                state.served.store(state.served.load().with_admission(source, &objects));
                *seen = Some(now.objects.clone());
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
        let previous = state.served.swap(next).catalog.clone();
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

/// The next change of a cache that is served; never, of one that is not.
async fn notified(changed: &Option<Arc<Notify>>) {
    match changed {
        Some(n) => n.notified().await,
        None => std::future::pending().await,
    }
}

/// The next change of any of these caches; never, if there are none.
async fn any_notified(changed: &[Option<Arc<Notify>>]) {
    if changed.is_empty() {
        return std::future::pending().await;
    }
    futures_util::future::select_all(changed.iter().map(|n| Box::pin(notified(n)))).await;
}

/// How often, and for how long at most, the end of the requests under a replaced catalog is
/// waited for before the caches it alone served stop.
const DRAIN_POLL: Duration = Duration::from_millis(100);
const DRAIN_LIMIT: Duration = Duration::from_secs(60);

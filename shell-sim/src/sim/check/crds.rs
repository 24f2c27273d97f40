//! Invariant 7, and what a CRD that changes explains: a custom resource's request may meet a
//! catalog without its resource (the CRD not there, or not established, at the revision of the
//! CRD cache the catalog was made from), a CRD being deleted (no creates), or a server that has
//! not taken the CRDs in since it started; and a deleted CRD leaves none of its resources.

use bytes::Bytes;
use kapi_core::kv::Revision;

use super::{Call, Checked, Invariant, violation};
use crate::sim::kinds::WIDGETS_GROUP;
use crate::sim::oracle::{Facts, Oracle};

const CRDS: &str = "/registry/apiextensions.k8s.io/customresourcedefinitions/";

/// The widgets' CRD's key.
fn widgets_crd() -> Bytes {
    Bytes::from(format!("{CRDS}widgets.{WIDGETS_GROUP}"))
}

/// What the widgets' CRD was at the revisions of the catalogs `call` met.
fn crd_at_catalogs<'o>(call: &Call, oracle: &'o Oracle) -> Vec<Option<&'o std::sync::Arc<Facts>>> {
    let key = widgets_crd();
    [call.catalogs.start, call.catalogs.end].into_iter().flatten().map(|r: Revision| oracle.at(&key, r)).collect()
}

/// Whether a catalog `call` met did not serve its custom resource's version: a 404 of the
/// resource needs no missing object.
pub fn unserved(call: &Call, oracle: &Oracle) -> bool {
    let Some(version) = call.target.as_ref().and_then(|t| t.kind.crd_version()) else { return false };
    crd_at_catalogs(call, oracle).iter().any(|crd| crd.is_none_or(|f| !f.serves.iter().any(|v| v == version)))
}

/// Whether a catalog `call` met had the CRD of its custom resource being deleted.
pub fn terminating(call: &Call, oracle: &Oracle) -> bool {
    call.target.as_ref().is_some_and(|t| t.kind.crd_version().is_some()) && crd_at_catalogs(call, oracle).iter().any(|crd| crd.is_some_and(|f| f.terminating))
}

/// Whether `call`, for a custom resource, started before the server had the CRDs.
pub fn before_crds(call: &Call) -> bool {
    call.target.as_ref().is_some_and(|t| t.kind.crd_version().is_some()) && call.catalogs.start.is_none()
}

/// At the end: at every revision where a CRD was deleted, the store held none of its resources
/// (the cleanup finalizer deleted them first).
pub fn deleted_crds_left_nothing(oracle: &Oracle) -> Checked {
    for change in oracle.changes(CRDS.as_bytes(), 0, oracle.revision()) {
        if change.cur.is_some() {
            continue;
        }
        let name = String::from_utf8_lossy(&change.key[CRDS.len()..]).to_string();
        let Some((plural, group)) = name.split_once('.') else { continue };
        let prefix = Bytes::from(format!("/registry/{group}/{plural}/"));
        let left = oracle.state(&prefix, change.revision);
        if let Some((key, _)) = left.first() {
            return violation(
                Invariant::Catalog,
                format!(
                    "the CRD {name} was deleted at revision {} while the store held {} of its resources ({})",
                    change.revision,
                    left.len(),
                    String::from_utf8_lossy(key)
                ),
            );
        }
    }
    Ok(())
}

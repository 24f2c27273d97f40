//! Storage keys, laid out as kube-apiserver lays them out in etcd:
//! `<prefix>/<resource prefix>/<namespace>/<name>` for namespaced resources and
//! `<prefix>/<resource prefix>/<name>` for cluster-scoped ones.

use bytes::Bytes;

/// The default `--etcd-prefix`.
pub const DEFAULT_PREFIX: &str = "/registry";

/// The key of one object.
pub fn object_key(root: &str, namespace: Option<&str>, name: &str) -> Bytes {
    match namespace {
        Some(ns) => Bytes::from(format!("{root}/{ns}/{name}")),
        None => Bytes::from(format!("{root}/{name}")),
    }
}

/// The prefix under which a collection lives: one namespace's objects, or all of them.
pub fn collection_prefix(root: &str, namespace: Option<&str>) -> Bytes {
    match namespace {
        Some(ns) => Bytes::from(format!("{root}/{ns}/")),
        None => Bytes::from(format!("{root}/")),
    }
}

//! The oracle: every change the store ever committed, never compacted, so the checkers can ask
//! what any key held at any revision. It is fed from the same events the model emits, so it is
//! the truth the server's answers are judged against.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use kapi_core::kv::{self, EventKind, Revision};

/// What the checkers need to know of one stored version of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    pub mod_revision: Revision,
    pub labels: BTreeMap<String, String>,
    pub terminating: bool,
    /// Of a CustomResourceDefinition: the versions it serves (its names accepted or it
    /// established, as kube's CRD handler asks).
    pub serves: Vec<String>,
    /// Of an RBAC object (a role or a binding): the object, which authorization is judged by.
    pub rbac: Option<Arc<serde_json::Value>>,
}

impl Facts {
    fn of(kv: &kv::KeyValue) -> Facts {
        let v: serde_json::Value = serde_json::from_slice(&kv.value).unwrap_or_default();
        let meta = &v["metadata"];
        let labels = meta["labels"].as_object().map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())).collect()).unwrap_or_default();
        let condition = |ty: &str| v["status"]["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == ty && c["status"] == "True");
        let serves = if v["kind"] == "CustomResourceDefinition" && (condition("NamesAccepted") || condition("Established")) {
            let served = v["spec"]["versions"].as_array().into_iter().flatten().filter(|x| x["served"] == true);
            served.filter_map(|x| x["name"].as_str().map(str::to_string)).collect()
        } else {
            Vec::new()
        };
        let rbac_prefixes = ["/registry/roles/", "/registry/clusterroles/", "/registry/rolebindings/", "/registry/clusterrolebindings/"];
        let rbac = rbac_prefixes.iter().any(|p| kv.key.starts_with(p.as_bytes())).then(|| Arc::new(v.clone()));
        Facts { mod_revision: kv.mod_revision, labels, terminating: meta.get("deletionTimestamp").is_some(), serves, rbac }
    }
}

/// One change of one key.
#[derive(Clone, Debug)]
pub struct Change {
    pub revision: Revision,
    pub key: Bytes,
    pub prev: Option<Arc<Facts>>,
    pub cur: Option<Arc<Facts>>,
}

/// A key's state from a revision on; `None` is a deletion.
type Version = (Revision, Option<Arc<Facts>>);

#[derive(Default)]
pub struct Oracle {
    /// Each key's versions in revision order.
    keys: BTreeMap<Bytes, Vec<Version>>,
    /// Every change in commit order.
    log: Vec<(Revision, Bytes)>,
    revision: Revision,
}

impl Oracle {
    /// The store's revision after the last recorded change.
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// Records a committed write's events; `revision` is the store's revision after it.
    pub fn record(&mut self, events: &[kv::Event], revision: Revision) {
        for e in events {
            let facts = (e.kind == EventKind::Put).then(|| Arc::new(Facts::of(&e.kv)));
            self.keys.entry(e.kv.key.clone()).or_default().push((e.kv.mod_revision, facts));
            self.log.push((e.kv.mod_revision, e.kv.key.clone()));
        }
        self.revision = self.revision.max(revision);
    }

    /// What `key` held at `revision`.
    pub fn at(&self, key: &[u8], revision: Revision) -> Option<&Arc<Facts>> {
        let versions = self.keys.get(key)?;
        let i = versions.partition_point(|(r, _)| *r <= revision);
        if i == 0 { None } else { versions[i - 1].1.as_ref() }
    }

    /// The change of `key` committed at exactly `revision`, if any.
    pub fn change(&self, key: &[u8], revision: Revision) -> Option<Change> {
        let versions = self.keys.get(key)?;
        let i = versions.iter().position(|(r, _)| *r == revision)?;
        let prev = if i == 0 { None } else { versions[i - 1].1.clone() };
        Some(Change { revision, key: Bytes::copy_from_slice(key), prev, cur: versions[i].1.clone() })
    }

    /// What `key` held at `from` and after each of its changes up to `to`.
    pub fn versions_between(&self, key: &[u8], from: Revision, to: Revision) -> Vec<Option<Arc<Facts>>> {
        let mut out = vec![self.at(key, from).cloned()];
        if let Some(versions) = self.keys.get(key) {
            out.extend(versions.iter().filter(|(r, _)| *r > from && *r <= to).map(|(_, f)| f.clone()));
        }
        out
    }

    /// Every key under `prefix` that exists at `revision`, in key order.
    pub fn state(&self, prefix: &[u8], revision: Revision) -> Vec<(Bytes, Arc<Facts>)> {
        self.keys
            .range::<[u8], _>((std::ops::Bound::Included(prefix), std::ops::Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .filter_map(|(k, _)| self.at(k, revision).map(|f| (k.clone(), f.clone())))
            .collect()
    }

    /// The changes under `prefix` with a revision in `(after, upto]`, in commit order.
    pub fn changes(&self, prefix: &[u8], after: Revision, upto: Revision) -> Vec<Change> {
        let from = self.log.partition_point(|(r, _)| *r <= after);
        self.log[from..].iter().take_while(|(r, _)| *r <= upto).filter(|(_, k)| k.starts_with(prefix)).filter_map(|(r, k)| self.change(k, *r)).collect()
    }

    /// Every key the oracle knows, with its latest version.
    pub fn latest(&self) -> impl Iterator<Item = (&Bytes, Option<&Arc<Facts>>)> {
        self.keys.iter().map(|(k, v)| (k, v.last().and_then(|(_, f)| f.as_ref())))
    }
}

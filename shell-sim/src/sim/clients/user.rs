//! A user doing what people do with kubectl and client libraries: create, get, list (with
//! selectors, pagination and every resourceVersion mode), read-modify-write updates, merge
//! patches, server-side apply, deletes with preconditions, finalizers and dry run, on
//! configmaps and on horizontalpodautoscalers at either of their versions. Names come from a
//! small pool shared by all users, so users collide (across versions too).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Client, Cx, Reply, labels, request};
use crate::sim::check::encode;
use crate::sim::check::selector::Selector;
use crate::sim::kinds::Kind;

const FINALIZER: &str = "sim.kapi.dev/hold";

/// What the user's outstanding request is part of.
enum Pending {
    None,
    /// Any single request, about one collection.
    Single(Kind),
    /// A GET whose answer is modified and PUT back.
    ReadForUpdate(Kind),
    /// A paginated LIST: the path and query (without `continue`) of its next page.
    Paging {
        kind: Kind,
        path: String,
        query: String,
    },
}

pub struct User {
    id: usize,
    namespaces: Vec<String>,
    names: u64,
    pending: Pending,
    tag: u64,
    /// The objects this user last saw, for updates and preconditions (possibly stale).
    seen: BTreeMap<(Kind, String, String), Value>,
    /// List revisions seen, for reads at an exact revision.
    revisions: Vec<String>,
}

impl User {
    pub fn new(id: usize, namespaces: Vec<String>, names: u64) -> User {
        User { id, namespaces, names, pending: Pending::None, tag: 0, seen: BTreeMap::new(), revisions: Vec::new() }
    }

    fn send(&mut self, cx: &mut Cx, pending: Pending, req: kapi_core::pipeline::Request) {
        self.tag += 1;
        self.pending = pending;
        cx.send(self.tag, req);
    }

    fn pick(&self, cx: &mut Cx, kind: Kind) -> (String, String) {
        let ns = cx.rng.pick(&self.namespaces).clone();
        (ns, format!("{}-{}", kind.stem(), cx.rng.below(self.names)))
    }

    fn object(&self, cx: &mut Cx, kind: Kind, name: &str) -> Value {
        let labels = labels(cx.rng);
        kind.object(name, labels, cx.rng, &format!("user-{}", self.id))
    }

    fn dry_run(cx: &mut Cx) -> &'static str {
        if cx.rng.chance(0.05) { "dryRun=All" } else { "" }
    }

    fn act(&mut self, cx: &mut Cx) {
        let kind = *cx.rng.pick(&[Kind::ConfigMaps, Kind::ConfigMaps, Kind::HpaV2, Kind::HpaV1, Kind::WidgetsV1, Kind::WidgetsV1beta1]);
        let (ns, name) = self.pick(cx, kind);
        let item = format!("{}/{name}", kind.path(Some(&ns)));
        let known = self.seen.get(&(kind, ns.clone(), name.clone())).cloned();
        match cx.rng.below(100) {
            0..25 => {
                let mut obj = self.object(cx, kind, &name);
                if cx.rng.chance(0.15) {
                    obj["metadata"]["finalizers"] = json!([FINALIZER]);
                }
                let q = Self::dry_run(cx);
                self.send(cx, Pending::Single(kind), request("POST", &kind.path(Some(&ns)), q, Some(&obj), "application/json"));
            }
            25..35 => {
                let q = if cx.rng.chance(0.3) { "resourceVersion=0" } else { "" };
                self.send(cx, Pending::Single(kind), request("GET", &item, q, None, ""));
            }
            35..50 => {
                let ns = if cx.rng.chance(0.3) { None } else { Some(ns.as_str()) };
                let path = kind.path(ns);
                let mut q = Vec::new();
                let sel = Selector::draw(cx.rng).query();
                if !sel.is_empty() {
                    q.push(format!("labelSelector={}", encode(&sel)));
                }
                if cx.rng.chance(0.5) {
                    q.push(format!("limit={}", cx.rng.between(1, 10)));
                }
                let base = q.join("&");
                match cx.rng.below(4) {
                    0 => q.push("resourceVersion=0".into()),
                    1 if !self.revisions.is_empty() => {
                        let rv = cx.rng.pick(&self.revisions).clone();
                        q.push(format!("resourceVersion={rv}"));
                        q.push(format!("resourceVersionMatch={}", if cx.rng.chance(0.5) { "Exact" } else { "NotOlderThan" }));
                    }
                    _ => {}
                }
                self.send(cx, Pending::Paging { kind, path: path.clone(), query: base }, request("GET", &path, &q.join("&"), None, ""));
            }
            50..65 => match known {
                // A stale copy makes a conflict likely: that path must answer 409.
                Some(obj) if cx.rng.chance(0.3) => self.update(cx, kind, &ns, obj),
                _ => self.send(cx, Pending::ReadForUpdate(kind), request("GET", &item, "", None, "")),
            },
            65..75 => {
                let labels = labels(cx.rng);
                let patch = kind.patch(labels, cx.rng);
                let q = Self::dry_run(cx);
                self.send(cx, Pending::Single(kind), request("PATCH", &item, q, Some(&patch), "application/merge-patch+json"));
            }
            75..83 => {
                let obj = self.object(cx, kind, &name);
                let force = if cx.rng.chance(0.5) { "&force=true" } else { "" };
                let q = format!("fieldManager=user-{}{force}", self.id);
                self.send(cx, Pending::Single(kind), request("PATCH", &item, &q, Some(&obj), "application/apply-patch+yaml"));
            }
            83..95 => {
                let body = match known.as_ref().and_then(|o| o["metadata"]["resourceVersion"].as_str()) {
                    Some(rv) if cx.rng.chance(0.4) => Some(json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": rv}})),
                    _ => None,
                };
                let q = Self::dry_run(cx);
                self.send(cx, Pending::Single(kind), request("DELETE", &item, q, body.as_ref(), "application/json"));
            }
            _ => {
                let patch = json!({"metadata": {"finalizers": null}});
                self.send(cx, Pending::Single(kind), request("PATCH", &item, "", Some(&patch), "application/merge-patch+json"));
            }
        }
    }

    fn update(&mut self, cx: &mut Cx, kind: Kind, ns: &str, mut obj: Value) {
        let Some(name) = obj["metadata"]["name"].as_str().map(str::to_string) else { return };
        let item = format!("{}/{name}", kind.path(Some(ns)));
        if !kind.updates_unconditionally() && obj["metadata"]["resourceVersion"].as_str().is_none_or(str::is_empty) {
            // A copy without a resourceVersion (a dry run's answer) cannot update this kind:
            // read it first.
            return self.send(cx, Pending::ReadForUpdate(kind), request("GET", &item, "", None, ""));
        }
        kind.change(&mut obj, cx.rng, &format!("user-{}", self.id));
        if cx.rng.chance(0.3) {
            obj["metadata"]["labels"] = labels(cx.rng);
        }
        // List items carry no type meta; a PUT body names its kind.
        obj["apiVersion"] = json!(kind.api_version());
        obj["kind"] = json!(kind.kind());
        let q = Self::dry_run(cx);
        self.send(cx, Pending::Single(kind), request("PUT", &item, q, Some(&obj), "application/json"));
    }

    fn remember(&mut self, kind: Kind, v: &Value) {
        let meta = &v["metadata"];
        if let (Some(ns), Some(name)) = (meta["namespace"].as_str(), meta["name"].as_str()) {
            self.seen.insert((kind, ns.to_string(), name.to_string()), v.clone());
        }
    }
}

impl Client for User {
    fn name(&self) -> String {
        format!("user-{}", self.id)
    }

    fn wake(&mut self, cx: &mut Cx) {
        if matches!(self.pending, Pending::None) && !cx.calm {
            self.act(cx);
        }
    }

    fn reply(&mut self, _tag: u64, reply: Reply, cx: &mut Cx) {
        let pending = std::mem::replace(&mut self.pending, Pending::None);
        let Reply::Response { status, body } = reply else {
            cx.think(20);
            return;
        };
        let v: Value = serde_json::from_slice(&body).unwrap_or_default();
        if let Pending::Single(kind) | Pending::ReadForUpdate(kind) = pending
            && (200..300).contains(&status)
            && v["kind"] != "Status"
        {
            self.remember(kind, &v);
        }
        match pending {
            Pending::ReadForUpdate(kind) if status == 200 => {
                let ns = v["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
                self.update(cx, kind, &ns, v);
                return;
            }
            Pending::Paging { kind, path, query } if status == 200 => {
                for item in v["items"].as_array().into_iter().flatten() {
                    self.remember(kind, item);
                }
                if let Some(rv) = v["metadata"]["resourceVersion"].as_str() {
                    self.revisions.push(rv.to_string());
                    if self.revisions.len() > 16 {
                        self.revisions.remove(0);
                    }
                }
                if let Some(token) = v["metadata"]["continue"].as_str().filter(|c| !c.is_empty()) {
                    let q = if query.is_empty() { format!("continue={token}") } else { format!("{query}&continue={token}") };
                    let req = request("GET", &path, &q, None, "");
                    self.send(cx, Pending::Paging { kind, path, query }, req);
                    return;
                }
            }
            _ => {}
        }
        cx.think(20);
    }
}

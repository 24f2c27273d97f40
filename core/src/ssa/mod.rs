//! Server-side apply and `managedFields` (kube-apiserver's field manager over
//! structured-merge-diff): who owns which field, updated on every write, and the apply
//! operation with its conflicts.

pub mod fieldpath;
mod typed;

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::apiextensions::structural::{self, Structural};
use crate::meta;
use crate::schema::normalize::format_time;
use crate::schema::{DefName, Type};
use crate::status::{ApiError, StatusCause, StatusDetails};
use fieldpath::{PathElement, Set, path_string};

/// How a resource's objects are typed (kube's type converter) and which fields its endpoints
/// reset (`GetResetFields`).
#[derive(Clone, Copy)]
pub enum Typing<'a> {
    /// A built-in kind, typed by the OpenAPI schema of its Go types from the object's
    /// `apiVersion` and `kind`; status is written through `/status`.
    BuiltIn,
    /// A custom resource: its version's structural schema (`None`: it gives none), and whether
    /// the version has a `/status` subresource.
    Custom { schema: Option<&'a Structural>, status: bool },
}

impl Typing<'_> {
    /// The type of an object of the resource; `None` for a built-in kind the schema lacks.
    fn of(&self, obj: &Value) -> Option<Root<'_>> {
        match self {
            Typing::BuiltIn => {
                let (g, v) = crate::codec::protobuf::split_api_version(obj.get("apiVersion")?.as_str()?);
                let def = crate::schema::schema().for_gvk(g, v, obj.get("kind")?.as_str()?)?;
                Some(Root::Go(Type::Object(DefName::new(def.name.as_str()))))
            }
            Typing::Custom { schema, .. } => Some(Root::Resource(schema.unwrap_or(&structural::UNDESCRIBED))),
        }
    }

    /// Fields a write through this endpoint does not own: status on the main resource,
    /// everything but status on `/status` (a custom resource's: its spec, as kube). A write
    /// through `/scale` changes only the replicas (`spec.replicas`, or a custom resource's
    /// path), which it owns. A custom resource without `/status` resets nothing.
    fn reset(&self, mut set: Set, subresource: &str) -> Set {
        let field = |name: &str| [PathElement::Field(name.into())];
        match (self, subresource) {
            (Typing::Custom { status: false, .. }, _) | (_, "scale") => set,
            (_, "") => {
                set.remove_prefix(&field("status"));
                set
            }
            (Typing::BuiltIn, "status") => set.only_prefix(&field("status")),
            (Typing::Custom { .. }, "status") => {
                set.remove_prefix(&field("spec"));
                set
            }
            _ => set,
        }
    }
}

/// The type of an object walked.
enum Root<'a> {
    Go(Type),
    Resource(&'a Structural),
}

impl Root<'_> {
    fn ty(&self) -> typed::Ty<'_> {
        match self {
            Root::Go(ty) => typed::Ty::Go(ty),
            Root::Resource(s) => typed::Ty::Resource(s),
        }
    }
}

/// `patch` merged into `live` as structured-merge-diff merges two typed objects (a mutating
/// admission policy's ApplyConfiguration: no field ownership recorded); kube's error when
/// `patch` sets an atomic map, struct or list.
pub fn merge_patch(live: &Value, patch: &Value, typing: &Typing<'_>) -> Result<Value, String> {
    let Some(root) = typing.of(live) else { return Ok(patch.clone()) };
    let mut atomic = Vec::new();
    typed::atomics(patch, root.ty(), "", &mut atomic);
    if !atomic.is_empty() {
        return Err(format!("invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}", atomic.join(", ")));
    }
    Ok(typed::merge(Some(live), Some(patch), root.ty()).unwrap_or_else(|| patch.clone()))
}

/// kube keeps at most this many `Update` entries; older ones merge into `ancient-changes`.
const MAX_UPDATE_MANAGERS: usize = 10;

/// One `managedFields` entry.
#[derive(Clone, Debug, PartialEq)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: Option<String>,
    subresource: String,
    set: Set,
}

impl Entry {
    /// The identity of an entry (`BuildManagerIdentifier`): appliers are one manager across
    /// API versions.
    fn same_manager(&self, manager: &str, operation: &str, subresource: &str, api_version: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == subresource && (operation == "Apply" || self.api_version == api_version)
    }

    /// The manager as a conflict names it (`printManager` of its identifier, which has no time).
    fn describe(&self) -> String {
        let mut s = crate::status::quote(&self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {}", crate::status::quote(&self.subresource)));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

fn entries_of(obj: &Value) -> Vec<Entry> {
    meta::at(obj, &["metadata", "managedFields"]).map(decode_entries).unwrap_or_default()
}

/// The entries of a `metadata.managedFields` value.
fn decode_entries(managed_fields: &Value) -> Vec<Entry> {
    let Some(list) = managed_fields.as_array() else { return Vec::new() };
    list.iter()
        .filter_map(|e| {
            let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            Some(Entry {
                manager: s("manager"),
                operation: s("operation"),
                api_version: s("apiVersion"),
                time: e.get("time").and_then(Value::as_str).map(str::to_string),
                subresource: s("subresource"),
                set: e.get("fieldsV1").map(Set::from_fields_v1).transpose().ok()?.unwrap_or_default(),
            })
        })
        .collect()
}

fn encode_entries(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.set.is_empty());
    cap_update_managers(&mut entries);
    if entries.is_empty() {
        meta::remove_meta(obj, "managedFields");
        return;
    }
    let secs = |e: &Entry| e.time.as_deref().and_then(|t| t.parse::<Timestamp>().ok()).map_or(0, |t| t.as_second());
    entries.sort_by(|p, q| {
        (p.operation.as_str(), secs(p), p.manager.as_str(), p.api_version.as_str(), p.subresource.as_str()).cmp(&(
            q.operation.as_str(),
            secs(q),
            q.manager.as_str(),
            q.api_version.as_str(),
            q.subresource.as_str(),
        ))
    });
    let list: Vec<Value> = entries
        .into_iter()
        .map(|e| {
            let mut m = Map::new();
            m.insert("manager".into(), json!(e.manager));
            m.insert("operation".into(), json!(e.operation));
            m.insert("apiVersion".into(), json!(e.api_version));
            if let Some(t) = e.time {
                m.insert("time".into(), json!(t));
            }
            m.insert("fieldsType".into(), json!("FieldsV1"));
            m.insert("fieldsV1".into(), e.set.to_fields_v1());
            if !e.subresource.is_empty() {
                m.insert("subresource".into(), json!(e.subresource));
            }
            Value::Object(m)
        })
        .collect();
    meta::set_meta(obj, "managedFields", Value::Array(list));
}

/// `capManagers`: the oldest `Update` entries beyond the limit merge into one.
fn cap_update_managers(entries: &mut Vec<Entry>) {
    let updates = entries.iter().filter(|e| e.operation == "Update").count();
    if updates <= MAX_UPDATE_MANAGERS {
        return;
    }
    let mut idx: Vec<usize> = (0..entries.len()).filter(|i| entries[*i].operation == "Update").collect();
    idx.sort_by_key(|i| entries[*i].time.clone().unwrap_or_default());
    let excess = updates - MAX_UPDATE_MANAGERS + 1;
    let doomed: Vec<usize> = idx.into_iter().take(excess).collect();
    let mut ancient = Entry {
        manager: "ancient-changes".into(),
        operation: "Update".into(),
        api_version: entries[doomed[0]].api_version.clone(),
        time: None,
        subresource: String::new(),
        set: Set::default(),
    };
    for i in &doomed {
        ancient.set.extend(&entries[*i].set);
    }
    let mut i = 0;
    entries.retain(|_| {
        let keep = !doomed.contains(&i);
        i += 1;
        keep
    });
    entries.push(ancient);
}

/// Fields no manager ever owns (`stripMeta`).
fn strip(mut set: Set) -> Set {
    let f = |s: &str| PathElement::Field(s.to_string());
    for top in ["apiVersion", "kind"] {
        set.remove_prefix(&[f(top)]);
    }
    for m in ["name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName", "generation", "managedFields", "resourceVersion"] {
        set.remove_prefix(&[f("metadata"), f(m)]);
    }
    set.remove(&[f("metadata")]);
    set
}

fn api_version_of(obj: &Value) -> String {
    obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string()
}

fn without_managed_fields(obj: &Value) -> Value {
    let mut o = obj.clone();
    meta::remove_meta(&mut o, "managedFields");
    o
}

/// `added` and `modified` of a comparison, without the fields nobody owns.
fn changed_fields(mut added: Set, modified: &Set) -> Set {
    added.extend(modified);
    strip(added)
}

/// Records in `new.metadata.managedFields` what a create, update or patch by `manager` changed
/// from `old` (`None` for a create).
pub fn record_update(old: Option<&Value>, new: &mut Value, typing: Typing<'_>, manager: &str, subresource: Option<&str>, now: Timestamp) {
    let subresource = subresource.unwrap_or("");
    let api_version = api_version_of(new);
    let Some(root) = typing.of(new) else { return };
    // The new object's entries are taken out rather than the object cloned without them: they
    // are written back below in any case.
    let sent = new.get_mut("metadata").and_then(Value::as_object_mut).and_then(|m| m.remove("managedFields"));
    let mut entries = sent.as_ref().map(decode_entries).unwrap_or_default();
    if entries.is_empty() {
        entries = old.map(entries_of).unwrap_or_default();
    }
    let old_clean = old.map(without_managed_fields);
    let typed::Comparison { added, modified, removed } = typed::compare(old_clean.as_ref(), Some(new), root.ty());
    let changed = typing.reset(changed_fields(added, &modified), subresource);
    for e in entries.iter_mut() {
        e.set = e.set.difference(&changed).difference(&removed);
    }
    if !changed.is_empty() {
        let time = Some(format_time(now, false));
        match entries.iter_mut().find(|e| e.same_manager(manager, "Update", subresource, &api_version)) {
            Some(e) => {
                e.set.extend(&changed);
                e.time = time;
            }
            None => entries.push(Entry {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version,
                time,
                subresource: subresource.to_string(),
                set: changed,
            }),
        }
    }
    encode_entries(new, entries);
}

/// An apply: by whom, through which endpoint, when.
#[derive(Clone, Copy)]
pub struct Applier<'a> {
    pub typing: Typing<'a>,
    /// The endpoint's group and version (`apps/v1`, `v1`).
    pub group_version: &'a str,
    /// `""` for the resource itself, `status` for its `/status`.
    pub subresource: &'a str,
    pub manager: &'a str,
    pub force: bool,
    pub now: Timestamp,
}

/// Server-side apply of `config` onto `live` (`None`: the object does not exist). Returns the
/// new object with its managed fields, or 409 with the conflicts.
pub fn apply(live: Option<&Value>, config: &Value, by: &Applier<'_>) -> Result<Value, ApiError> {
    let Applier { typing, group_version, subresource, manager, force, now } = *by;
    let api_version = api_version_of(config);
    if api_version != group_version {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {api_version}, expected: {group_version}"
        )));
    }
    if meta::at(config, &["metadata", "managedFields"]).is_some_and(|v| !v.is_null()) {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    if manager.is_empty() {
        return Err(ApiError::bad_request("PATCH, application/apply-patch+yaml requests require a fieldManager to be set"));
    }
    let Some(root) = typing.of(config) else {
        let kind = config.get("kind").and_then(Value::as_str).unwrap_or_default();
        return Err(ApiError::internal(format!("failed to create typed patch object: no corresponding type for {api_version}, Kind={kind}")));
    };
    let ty = root.ty();
    let mut entries = live.map(entries_of).unwrap_or_default();
    let live_clean = live.map(without_managed_fields);
    let merged = typed::merge(live_clean.as_ref(), Some(config), ty).unwrap_or_else(|| config.clone());

    let applied = typing.reset(strip(typed::to_set(config, ty)), subresource);
    let pos = entries.iter().position(|e| e.same_manager(manager, "Apply", subresource, &api_version));
    let last = pos.map(|i| entries[i].set.clone()).unwrap_or_default();
    let me = match pos {
        Some(i) => i,
        None => {
            entries.push(Entry {
                manager: manager.to_string(),
                operation: "Apply".into(),
                api_version: api_version.clone(),
                time: None,
                subresource: subresource.to_string(),
                set: Set::default(),
            });
            entries.len() - 1
        }
    };
    entries[me].set = applied;
    entries[me].api_version = api_version;

    // Prune what this manager applied before, applies no more, and nobody else owns.
    let owned = entries.iter().fold(Set::default(), |mut acc, e| {
        acc.extend(&e.set);
        acc
    });
    let mut pruned = merged;
    let mut doomed = Set::default();
    for p in last.difference(&owned).paths() {
        if !owned.has_prefix(&p) {
            doomed.insert(&p);
        }
    }
    typed::remove_all(&mut pruned, &doomed, ty);

    let typed::Comparison { added, modified, removed } = typed::compare(live_clean.as_ref(), Some(&pruned), ty);
    let changed = changed_fields(added, &modified);
    let mut conflicts = Vec::new();
    for (i, e) in entries.iter_mut().enumerate() {
        if i == me {
            continue;
        }
        let clash = e.set.intersection(&changed);
        if !clash.is_empty() {
            if force {
                e.set = e.set.difference(&clash);
            } else {
                for p in clash.paths() {
                    conflicts.push((e.describe(), path_string(&p)));
                }
            }
        }
        e.set = e.set.difference(&removed);
    }
    if !conflicts.is_empty() {
        return Err(conflict_error(&conflicts));
    }
    if live_clean.as_ref() != Some(&pruned) || live.is_none() {
        entries[me].time = Some(format_time(now, false));
    }
    encode_entries(&mut pruned, entries);
    Ok(pruned)
}

/// `NewConflictError`: 409 naming each conflicting manager and field.
fn conflict_error(conflicts: &[(String, String)]) -> ApiError {
    let causes =
        conflicts.iter().map(|(m, p)| StatusCause { reason: "FieldManagerConflict".into(), message: format!("conflict with {m}"), field: p.clone() }).collect();
    let message = if let [(m, p)] = conflicts {
        format!("Apply failed with 1 conflict: conflict with {m}: {p}")
    } else {
        let mut managers: Vec<&String> = conflicts.iter().map(|(m, _)| m).collect();
        managers.sort();
        managers.dedup();
        let mut lines = Vec::new();
        for m in managers {
            lines.push(format!("conflicts with {m}"));
            for (_, p) in conflicts.iter().filter(|(x, _)| x == m) {
                lines.push(format!("- {p}"));
            }
        }
        format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
    };
    ApiError { details: Some(Box::new(StatusDetails { causes, ..Default::default() })), ..ApiError::new(409, "Conflict", message) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"}, "data": data})
    }

    #[test]
    fn updates_claim_what_they_change() {
        let mut created = cm(json!({"a": "1"}));
        record_update(None, &mut created, Typing::BuiltIn, "kubectl-create", None, t(0));
        let mf = &created["metadata"]["managedFields"][0];
        assert_eq!(mf["manager"], "kubectl-create");
        assert_eq!(mf["operation"], "Update");
        assert_eq!(mf["fieldsV1"], json!({"f:data": {".": {}, "f:a": {}}}));
        let mut edited = created.clone();
        edited["data"]["b"] = json!("2");
        record_update(Some(&created), &mut edited, Typing::BuiltIn, "kubectl-edit", None, t(5));
        let managers: Vec<&str> = edited["metadata"]["managedFields"].as_array().unwrap().iter().map(|e| e["manager"].as_str().unwrap()).collect();
        assert_eq!(managers, vec!["kubectl-create", "kubectl-edit"]);
        assert_eq!(edited["metadata"]["managedFields"][1]["fieldsV1"], json!({"f:data": {"f:b": {}}}));
    }

    /// A pod as a create stores it (defaults, the service account's volume), the managed fields
    /// its create records, and those after an update that adds, changes and removes fields:
    /// `testdata/pod-managed-fields.json`, recorded before the walks were rewritten for speed.
    #[test]
    fn a_pods_managed_fields_through_create_and_update() {
        let want: Value = serde_json::from_str(include_str!("testdata/pod-managed-fields.json")).unwrap();
        let mut created: Value = serde_json::from_str(include_str!("testdata/pod.json")).unwrap();
        record_update(None, &mut created, Typing::BuiltIn, "kapi-bench", None, t(0));
        assert_eq!(created["metadata"]["managedFields"], want["created"]);
        let mut updated = created.clone();
        updated["metadata"]["labels"]["new"] = json!("x");
        updated["spec"]["containers"][0]["ports"].as_array_mut().unwrap().remove(1);
        updated["spec"]["containers"][0]["env"][3]["value"] = json!("debug");
        updated["spec"]["tolerations"] = json!(null);
        updated.as_object_mut().unwrap().remove("status");
        record_update(Some(&created), &mut updated, Typing::BuiltIn, "editor", None, t(100));
        assert_eq!(updated["metadata"]["managedFields"], want["updated"]);
    }

    #[test]
    fn apply_conflicts_unless_forced_and_prunes() {
        let by = |manager, force, at| Applier { typing: Typing::BuiltIn, group_version: "v1", subresource: "", manager, force, now: t(at) };
        let a = apply(None, &cm(json!({"x": "1", "y": "1"})), &by("alice", false, 0)).unwrap();
        assert_eq!(a["data"], json!({"x": "1", "y": "1"}));
        // bob applies a different x: conflict with alice.
        let err = apply(Some(&a), &cm(json!({"x": "2"})), &by("bob", false, 1)).unwrap_err();
        assert_eq!(err.code, 409);
        assert_eq!(err.message, "Apply failed with 1 conflict: conflict with \"alice\": .data.x");
        // The same value is shared ownership, not a conflict.
        let b = apply(Some(&a), &cm(json!({"x": "1"})), &by("bob", false, 1)).unwrap();
        // alice stops applying y (nobody else owns it): pruned.
        let c = apply(Some(&b), &cm(json!({"x": "1"})), &by("alice", false, 2)).unwrap();
        assert_eq!(c["data"], json!({"x": "1"}));
        // Forced, bob takes x.
        let d = apply(Some(&c), &cm(json!({"x": "3"})), &by("bob", true, 3)).unwrap();
        assert_eq!(d["data"]["x"], "3");
        let alice = d["metadata"]["managedFields"].as_array().unwrap().iter().find(|e| e["manager"] == "alice");
        assert!(alice.is_none(), "alice lost her only field: {d}");
    }
}

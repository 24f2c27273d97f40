//! Delete: preconditions, graceful deletion, finalizers and propagation policy
//! (`rest.BeforeDelete` and the generic store's delete path).

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::WriteOp;
use crate::admission::Operation;
use crate::catalog::GracefulDelete;
use crate::meta;
use crate::schema::normalize::format_time;
use crate::status::{ApiError, FieldError, GroupKind};
use crate::storage::Transform;

pub const ORPHAN_FINALIZER: &str = "orphan";
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// `metav1.DeleteOptions`, as far as the store reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    /// `Orphan`, `Background` or `Foreground`.
    pub propagation_policy: Option<String>,
    pub orphan_dependents: Option<bool>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
}

impl DeleteOptions {
    /// The options of a `DeleteOptions` object (a request's body, an Eviction's
    /// `deleteOptions`), and whether it asks for a dry run; kube's 422 for what it forbids.
    pub fn read(options: &Value) -> Result<(DeleteOptions, bool), ApiError> {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let propagation = text(options.get("propagationPolicy"));
        let orphan = options.get("orphanDependents").and_then(Value::as_bool);
        let dry: Vec<&str> = options.get("dryRun").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        let mut errs = Vec::new();
        if let Some(p) = &propagation {
            if !["Orphan", "Background", "Foreground"].contains(&p.as_str()) {
                errs.push(FieldError::not_supported("propagationPolicy", json!(p), &["Foreground", "Background", "Orphan", "nil"]));
            }
            if let Some(o) = orphan {
                errs.push(FieldError::invalid("orphanDependents", json!(o), "orphanDependents and deletionPropagation cannot be both set"));
            }
        }
        if dry.iter().any(|d| *d != "All") {
            errs.push(FieldError::not_supported("dryRun", json!(dry), &["All"]));
        }
        if !errs.is_empty() {
            return Err(ApiError::invalid(&GroupKind { group: "meta.k8s.io".into(), kind: "DeleteOptions".into() }, "", &errs));
        }
        let precondition = |k: &str| text(options.get("preconditions").and_then(|p| p.get(k)));
        let read = DeleteOptions {
            grace_period_seconds: options.get("gracePeriodSeconds").and_then(Value::as_i64),
            propagation_policy: propagation,
            orphan_dependents: orphan,
            precondition_uid: precondition("uid"),
            precondition_resource_version: precondition("resourceVersion"),
        };
        Ok((read, !dry.is_empty()))
    }
}

impl WriteOp {
    pub(super) fn delete(&mut self, existing: Option<Value>, opts: &DeleteOptions) -> Result<Transform, ApiError> {
        let res = self.res.clone();
        let info = &res.info;
        let gr = info.group_resource();
        let name = self.ctx.name.clone().unwrap_or_default();
        let Some(mut obj) = existing else {
            return Err(ApiError::not_found(&gr, &name));
        };
        if let Some(uid) = &opts.precondition_uid
            && uid != meta::uid(&obj)
        {
            return Err(ApiError::conflict(&gr, &name, &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {}", meta::uid(&obj))));
        }
        if let Some(rv) = &opts.precondition_resource_version
            && rv != meta::resource_version(&obj)
        {
            return Err(ApiError::conflict(
                &gr,
                &name,
                &format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}", meta::resource_version(&obj)),
            ));
        }
        // A graceful deletion already pending that the request does not shorten is answered
        // without admission (kube's `pendingGraceful`).
        let grace = meta::at(&obj, &["metadata", "deletionGracePeriodSeconds"]).and_then(Value::as_i64).filter(|g| *g > 0);
        let pending_graceful = meta::deletion_timestamp(&obj).is_some() && grace.is_some_and(|g| opts.grace_period_seconds.is_none_or(|n| n >= g));
        if !pending_graceful {
            self.mutating_admission(Operation::Delete, &name, Some(&obj), None)?;
            self.validating_admission(Operation::Delete, &name, Some(&obj), None)?;
        }
        let now = self.ctx.now;

        if meta::deletion_timestamp(&obj).is_some() {
            return self.delete_again(obj, opts, now);
        }

        set_propagation_finalizers(&mut obj, opts, self.res.strategy.default_propagation());
        self.res.strategy.prepare_for_delete(&mut obj, now);
        let grace = match self.res.strategy.graceful_delete(&obj, opts.grace_period_seconds) {
            GracefulDelete::After(secs) if secs > 0 => Some(secs),
            _ => None,
        };
        let pending = !meta::finalizers(&obj).is_empty() || pending_spec_finalizers(&obj);
        if grace.is_none() && !pending {
            self.result = Some(obj);
            return Ok(Transform::Delete);
        }
        match grace {
            Some(secs) => {
                let at = now.saturating_add(SignedDuration::from_secs(secs)).unwrap_or(now);
                meta::set_meta(&mut obj, "deletionTimestamp", Value::String(format_time(at, false)));
                meta::set_meta(&mut obj, "deletionGracePeriodSeconds", Value::from(secs));
            }
            None if self.res.strategy.marks_own_delete() => {
                meta::set_meta(&mut obj, "deletionTimestamp", Value::String(format_time(now, false)));
                return Ok(Transform::Put(self.store(obj)?));
            }
            None => mark_as_deleting(&mut obj, now),
        }
        bump_generation(&mut obj);
        Ok(Transform::Put(self.store(obj)?))
    }

    /// A delete of an object already being deleted: only a shorter grace period or a change
    /// of propagation finalizers does anything; with nothing left to wait for it is removed.
    fn delete_again(&mut self, mut obj: Value, opts: &DeleteOptions, now: Timestamp) -> Result<Transform, ApiError> {
        let current_grace = meta::at(&obj, &["metadata", "deletionGracePeriodSeconds"]).and_then(Value::as_i64);
        let finalizers_changed = set_propagation_finalizers(&mut obj, opts, self.res.strategy.default_propagation());
        let pending = !meta::finalizers(&obj).is_empty() || pending_spec_finalizers(&obj);
        match (current_grace, opts.grace_period_seconds) {
            (None | Some(0), _) if !pending => {
                self.result = Some(obj);
                return Ok(Transform::Delete);
            }
            (Some(cur), Some(new)) if cur > 0 && new < cur => {
                if new == 0 && !pending {
                    self.result = Some(obj);
                    return Ok(Transform::Delete);
                }
                let ts = meta::deletion_timestamp(&obj).and_then(|s| s.parse::<Timestamp>().ok()).unwrap_or(now);
                let at = ts.checked_sub(SignedDuration::from_secs(cur)).and_then(|t| t.checked_add(SignedDuration::from_secs(new))).unwrap_or(now);
                meta::set_meta(&mut obj, "deletionTimestamp", Value::String(format_time(at, false)));
                meta::set_meta(&mut obj, "deletionGracePeriodSeconds", Value::from(new));
            }
            _ if !finalizers_changed => {
                self.result = Some(obj);
                return Ok(Transform::Keep);
            }
            _ => {}
        }
        Ok(Transform::Put(self.store(obj)?))
    }
}

/// An update that removed the last finalizer of an object being deleted deletes it, unless a
/// grace period is still running (`ShouldDeleteDuringUpdate`).
pub(super) fn should_delete_during_update(obj: &Value) -> bool {
    let grace_over = meta::at(obj, &["metadata", "deletionGracePeriodSeconds"]).and_then(Value::as_i64).is_none_or(|g| g == 0);
    meta::deletion_timestamp(obj).is_some() && grace_over && meta::finalizers(obj).is_empty() && !pending_spec_finalizers(obj)
}

/// Namespaces wait for their `spec.finalizers` as well as `metadata.finalizers`.
fn pending_spec_finalizers(obj: &Value) -> bool {
    meta::at(obj, &["spec", "finalizers"]).and_then(Value::as_array).is_some_and(|a| !a.is_empty())
        && obj.get("kind").and_then(Value::as_str) == Some("Namespace")
}

/// `deletionFinalizersForGarbageCollection`: the orphan and foreground finalizers as the
/// propagation policy asks. Returns whether the finalizers changed.
fn set_propagation_finalizers(obj: &mut Value, opts: &DeleteOptions, default_policy: &str) -> bool {
    let old = meta::finalizers(obj);
    let has = |f: &str| old.iter().any(|x| x == f);
    let orphan = match (&opts.propagation_policy, opts.orphan_dependents) {
        (Some(p), _) => p == "Orphan",
        (None, Some(o)) => o,
        (None, None) => has(ORPHAN_FINALIZER) || (!has(FOREGROUND_FINALIZER) && default_policy == "Orphan"),
    };
    let foreground = match (&opts.propagation_policy, opts.orphan_dependents) {
        (Some(p), _) => p == "Foreground",
        (None, Some(_)) => false,
        (None, None) => has(FOREGROUND_FINALIZER),
    };
    let mut new: Vec<String> = old.iter().filter(|f| *f != ORPHAN_FINALIZER && *f != FOREGROUND_FINALIZER).cloned().collect();
    if orphan {
        new.push(ORPHAN_FINALIZER.into());
    }
    if foreground {
        new.push(FOREGROUND_FINALIZER.into());
    }
    let mut a = old.clone();
    let mut b = new.clone();
    a.sort();
    b.sort();
    if a == b {
        return false;
    }
    meta::set_finalizers(obj, &new);
    true
}

/// `markAsDeleting`: deleted now, waiting only for finalizers.
fn mark_as_deleting(obj: &mut Value, now: Timestamp) {
    let existing = meta::deletion_timestamp(obj).and_then(|s| s.parse::<Timestamp>().ok());
    if existing.is_none_or(|t| t > now) {
        meta::set_meta(obj, "deletionTimestamp", Value::String(format_time(now, false)));
    }
    meta::set_meta(obj, "deletionGracePeriodSeconds", Value::from(0));
}

fn bump_generation(obj: &mut Value) {
    let g = meta::generation(obj);
    if g > 0 {
        meta::set_meta(obj, "generation", Value::from(g + 1));
    }
}

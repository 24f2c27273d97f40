//! Update and patch (`rest.BeforeUpdate`, the generic store's update path and the patch handler).

use serde_json::Value;

use super::strict::{Source, go_format};
use super::{FieldValidation, PatchType, WriteOp};
use crate::admission::Operation;
use crate::catalog::ScaleOf;
use crate::meta;
use crate::patch;
use crate::schema::schema;
use crate::ssa;
use crate::status::{ApiError, FieldError, GroupKind};
use crate::storage::Transform;
use crate::validation;

/// kube's mark, in the Scale a patch applies to, of replicas the object does not have (the
/// smallest int32).
const UNSET_REPLICAS: i64 = i32::MIN as i64;

impl WriteOp {
    /// PUT: the client's object replaces the stored one.
    pub(super) fn update(&mut self, existing: Option<Value>, mut obj: Value) -> Result<Transform, ApiError> {
        self.warnings.clear();
        self.check_name(&obj)?;
        let Some(old) = existing else {
            if !self.res.strategy.allow_create_on_update() || self.ctx.subresource.is_some() {
                return Err(ApiError::not_found(&self.res.info.group_resource(), self.ctx.name.as_deref().unwrap_or_default()));
            }
            let obj = self.prepare_new(obj, false)?;
            return self.put_new(obj);
        };
        self.decode_check(&mut obj, Source::Body)?;
        self.check_preconditions(&obj, &old)?;
        self.res.strategy.default(&mut obj);
        ssa::record_update(Some(&old), &mut obj, self.res.strategy.typing(), &self.ctx.field_manager, self.ctx.subresource.as_deref(), self.ctx.now);
        self.finish_update(obj, &old)
    }

    /// PATCH: the patch applied to the stored object, then the update path.
    pub(super) fn patch(&mut self, existing: Option<Value>, pt: PatchType, doc: Value) -> Result<Transform, ApiError> {
        self.warnings.clear();
        let res = self.res.clone();
        let info = &res.info;
        let name = self.ctx.name.clone().unwrap_or_default();
        let def = || schema().get(&info.definition).ok_or_else(|| ApiError::internal(format!("no schema for {}", info.definition)));
        let Some(old) = existing else {
            let PatchType::Apply { .. } = pt else {
                return Err(ApiError::not_found(&info.group_resource(), &name));
            };
            if self.ctx.subresource.is_some() {
                return Err(ApiError::not_found(&info.group_resource(), &name));
            }
            // Server-side apply creates what does not exist; not while a CRD is being deleted
            // (its cleanup would not see it).
            if info.terminating {
                return Err(ApiError::create_while_terminating(&info.group_resource()));
            }
            let mut config = doc;
            self.decode_check(&mut config, Source::Apply)?;
            self.check_name(&config)?;
            let obj = ssa::apply(None, &config, &self.applier(&info.api_version(), true))?;
            let obj = self.prepare_new(obj, true)?;
            return self.put_new(obj);
        };
        if self.ctx.subresource.as_deref() == Some("scale") {
            let ScaleOf { scale: mut current, replicas_set, .. } = self.res.strategy.scale_of(&old)?;
            if !replicas_set {
                // As kube: replicas the patch does not set are refused below.
                current["spec"]["replicas"] = Value::from(UNSET_REPLICAS);
            }
            let scale_def = schema().get("io.k8s.api.autoscaling.v1.Scale").expect("Scale is in the schema");
            let scale = match &pt {
                PatchType::Json => patch::json_patch(&current, &doc)?,
                PatchType::Merge => patch::merge_patch(&current, &doc),
                PatchType::Strategic => patch::strategic_merge_patch(&current, &doc, scale_def)?,
                PatchType::Apply { .. } => patch::merge_patch(&current, &doc),
            };
            return self.update_scale(Some(old), scale);
        }
        let mut patched = match &pt {
            PatchType::Json => patch::json_patch(&old, &doc)?,
            PatchType::Merge => patch::merge_patch(&old, &doc),
            PatchType::Strategic => patch::strategic_merge_patch(&old, &doc, def()?)?,
            PatchType::Apply { force } => {
                let mut config = doc.clone();
                self.decode_check(&mut config, Source::Apply)?;
                ssa::apply(Some(&old), &config, &self.applier(&info.api_version(), *force))?
            }
        };
        self.check_name(&patched)?;
        if !matches!(pt, PatchType::Apply { .. }) {
            // What a refusal shows: the patched object (JSON and merge patches) or the patch
            // (strategic merge), as kube does; kept only when a refusal can happen.
            let shown =
                (self.ctx.field_validation == FieldValidation::Strict).then(|| if pt == PatchType::Strategic { go_format(&doc) } else { patched.to_string() });
            let shown = || shown.clone().unwrap_or_default();
            self.decode_check(&mut patched, Source::Patched(&shown))?;
        }
        self.check_preconditions(&patched, &old)?;
        self.res.strategy.default(&mut patched);
        if !matches!(pt, PatchType::Apply { .. }) {
            ssa::record_update(Some(&old), &mut patched, self.res.strategy.typing(), &self.ctx.field_manager, self.ctx.subresource.as_deref(), self.ctx.now);
        }
        self.finish_update(patched, &old)
    }

    /// PUT on `/scale`: the Scale's replicas land in the object (`spec.replicas`, or a custom
    /// resource's path).
    pub(super) fn update_scale(&mut self, existing: Option<Value>, mut scale: Value) -> Result<Transform, ApiError> {
        self.warnings.clear();
        let Some(old) = existing else {
            return Err(ApiError::not_found(&self.res.info.group_resource(), self.ctx.name.as_deref().unwrap_or_default()));
        };
        self.decode_as(&mut scale, "io.k8s.api.autoscaling.v1.Scale", "Scale", "v1", Source::Body)?;
        self.check_name(&scale)?;
        let rv = meta::resource_version(&scale);
        if !rv.is_empty() && rv != meta::resource_version(&old) {
            return Err(ApiError::stale_conflict(&self.res.info.group_resource(), meta::name(&old)));
        }
        let replicas = meta::at(&scale, &["spec", "replicas"]).and_then(Value::as_i64).unwrap_or(0);
        if replicas == UNSET_REPLICAS {
            let path = self.res.strategy.scale_of(&old)?.replicas_path;
            return Err(ApiError::bad_request(format!("the spec replicas field {path:?} cannot be empty")));
        }
        let mut new = old.clone();
        self.res.strategy.set_scale_replicas(&mut new, replicas)?;
        ssa::record_update(Some(&old), &mut new, self.res.strategy.typing(), &self.ctx.field_manager, Some("scale"), self.ctx.now);
        self.finish_update(new, &old)
    }

    /// A create on a subresource that changes the parent object (`pods/binding`).
    pub(super) fn action(&mut self, existing: Option<Value>, mut body: Value) -> Result<Transform, ApiError> {
        let sub = self.ctx.subresource.clone().unwrap_or_default();
        // kube admits the subresource's object (a Binding) as a create of it, before it
        // reads the parent: its mutating admission, then its validating.
        let name = self.ctx.name.clone().unwrap_or_default();
        self.mutating_admission(Operation::Create, &name, None, Some(&mut body))?;
        self.validating_admission(Operation::Create, &name, None, Some(&mut body))?;
        let Some(old) = existing else {
            return Err(ApiError::not_found(&self.res.info.group_resource(), self.ctx.name.as_deref().unwrap_or_default()));
        };
        let mut new = old.clone();
        self.res.strategy.subresource_create(&sub, &mut new, &body, self.ctx.now)?;
        self.created = true;
        Ok(Transform::Put(self.store(new)?))
    }

    /// `checkName`: the body may not name another object than the URL.
    /// This request as an apply at the endpoint of `group_version`.
    fn applier<'a>(&'a self, group_version: &'a str, force: bool) -> ssa::Applier<'a> {
        ssa::Applier {
            typing: self.res.strategy.typing(),
            group_version,
            subresource: self.ctx.subresource.as_deref().unwrap_or(""),
            manager: &self.ctx.field_manager,
            force,
            now: self.ctx.now,
        }
    }

    fn check_name(&self, obj: &Value) -> Result<(), ApiError> {
        let url_name = self.ctx.name.as_deref().unwrap_or_default();
        let name = meta::name(obj);
        if !name.is_empty() && name != url_name {
            return Err(ApiError::bad_request(format!("the name of the object ({name}) does not match the name on the URL ({url_name})")));
        }
        if self.res.info.namespaced {
            let ns = meta::namespace(obj);
            let url_ns = self.ctx.namespace.as_deref().unwrap_or_default();
            if !ns.is_empty() && ns != url_ns {
                return Err(ApiError::bad_request(format!("the namespace of the object ({ns}) does not match the namespace on the request ({url_ns})")));
            }
        }
        Ok(())
    }

    /// Optimistic concurrency: a resourceVersion in the new object must be the stored one.
    fn check_preconditions(&self, obj: &Value, old: &Value) -> Result<(), ApiError> {
        let gr = self.res.info.group_resource();
        let name = meta::name(old);
        let rv = meta::resource_version(obj);
        if rv.is_empty() {
            if !self.res.strategy.allow_unconditional_update() {
                // kube names the resource where the kind goes here, and prints the uint64 zero.
                let gk = GroupKind { group: self.res.info.group.to_string(), kind: self.res.info.resource.to_string() };
                return Err(ApiError::invalid(&gk, name, &[FieldError::invalid_go("metadata.resourceVersion", "0x0", "must be specified for an update")]));
            }
        } else if rv != meta::resource_version(old) {
            return Err(ApiError::stale_conflict(&gr, name));
        }
        let uid = meta::uid(obj);
        if !uid.is_empty() && uid != meta::uid(old) {
            return Err(ApiError::conflict(&gr, name, &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {}", meta::uid(old))));
        }
        Ok(())
    }

    /// Everything after the new object is known: mutating admission, `BeforeUpdate`, validation
    /// and validating admission, and the deletion of an object whose last finalizer was removed.
    fn finish_update(&mut self, mut obj: Value, old: &Value) -> Result<Transform, ApiError> {
        let res = self.res.clone();
        let info = &res.info;
        meta::set_type_meta(&mut obj, &info.api_version(), &info.kind);
        self.fix_namespace(&mut obj)?;
        // Mutating admission sees the object as the client sent it, before the strategy
        // prepares it (kube's order: admission, then `BeforeUpdate`).
        let name = meta::name(old).to_string();
        self.mutating_admission(Operation::Update, &name, Some(old), Some(&mut obj))?;
        // kube's `BeforeUpdate` checks the namespace of what admission made.
        self.fix_namespace(&mut obj)?;
        self.check_escalation(&obj, Some(old))?;
        meta::set_meta(&mut obj, "generation", Value::from(meta::generation(old)));
        if meta::generation(old) == 0 {
            meta::remove_meta(&mut obj, "generation");
        }
        match self.ctx.subresource.as_deref() {
            None | Some("scale") => self.res.strategy.prepare_for_update(&mut obj, old),
            Some(sub) => self.res.strategy.prepare_for_subresource_update(sub, &mut obj, old),
        }
        for key in ["uid", "creationTimestamp"] {
            let keep = meta::at(old, &["metadata", key]).cloned();
            if meta::at(&obj, &["metadata", key]).is_none_or(|v| v.as_str() == Some(""))
                && let Some(v) = keep
            {
                meta::set_meta(&mut obj, key, v);
            }
        }
        if let Some(ts) = meta::at(old, &["metadata", "creationTimestamp"]).cloned() {
            meta::set_meta(&mut obj, "creationTimestamp", ts);
        }
        for key in ["deletionTimestamp", "deletionGracePeriodSeconds"] {
            if let Some(v) = meta::at(old, &["metadata", key]).cloned()
                && (key == "deletionTimestamp" || meta::at(&obj, &["metadata", key]).is_none())
            {
                meta::set_meta(&mut obj, key, v);
            }
        }

        let mut errs = validation::object_meta_update(&obj, old);
        errs.extend(validation::object_meta(&obj, info.namespaced, self.res.strategy.name_check()));
        match self.ctx.subresource.as_deref() {
            None | Some("scale") => errs.extend(self.res.strategy.validate_update(&obj, old)),
            Some(sub) => errs.extend(self.res.strategy.validate_subresource_update(sub, &obj, old)),
        }
        if errs.is_empty() {
            errs.extend(self.params_access(&obj, Some(old))?);
        }
        if !errs.is_empty() {
            return Err(ApiError::invalid(&info.group_kind(), meta::name(&obj), &errs));
        }
        self.validating_admission(Operation::Update, &name, Some(old), Some(&mut obj))?;
        let a = super::admission_attributes(&self.res, &self.ctx, &self.found, Operation::Update, &name, Some(old));
        self.charges = self.ctx.admission.charge(&a, Some(&obj), self.ctx.now)?;
        if super::delete::should_delete_during_update(&obj) {
            self.result = Some(obj);
            return Ok(Transform::Delete);
        }
        Ok(Transform::Put(self.store(obj)?))
    }

    /// An update or apply that creates the object.
    fn put_new(&mut self, obj: Value) -> Result<Transform, ApiError> {
        self.created = true;
        Ok(Transform::Put(self.store(obj)?))
    }
}

//! `pods/eviction` (kube's `pkg/registry/core/pod/storage/eviction.go`): a pod is deleted unless
//! the PodDisruptionBudget that selects it forbids it. The budget's allowance is spent first,
//! by an update of its status guarded by its resourceVersion, so two evictions never both take
//! its last disruption; the pod is then marked `DisruptionTarget` and deleted.
//!
//! Call order, as [`WriteOp`]'s: [`EvictionOp::poll`], send each [`WriteEffect::Kv`] to the store
//! and feed the answer to [`EvictionOp::handle`], until [`WriteEffect::Done`].

use std::sync::Arc;

use bytes::Bytes;
use jiff::Timestamp;
use serde_json::{Value, json};

use super::{DeleteOptions, PatchType, Said, WriteContext, WriteEffect, WriteKind, WriteOp, WriteOutcome, decode_stored, storage_error};
use crate::admission::Found;
use crate::catalog::Resource;
use crate::kv::KvResult;
use crate::meta;
use crate::rand::Rng;
use crate::schema::normalize::format_time;
use crate::selector::LabelSelector;
use crate::status::{ApiError, GroupResource, StatusCause, StatusDetails};
use crate::storage::{Outcome, StorageEffect, StorageEvent, StorageOp, StorageRequest};

/// How often a budget's update is tried again after a conflict (kube's `EvictionsRetry`).
const MAX_ATTEMPTS: u32 = 20;
/// Evictions a budget may record before its controller confirms them (`MaxDisruptedPodSize`).
const MAX_DISRUPTED_PODS: usize = 2000;
const TOO_MANY: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

enum Step {
    /// The Eviction is admitted as a create of `pods/eviction`, mutating then validating
    /// (kube's handler, then its storage before it reads the pod).
    Admit(Box<WriteOp>),
    ReadPod(StorageOp<ApiError>),
    /// The budgets of the pod's namespace are being read (again, after a conflict).
    ListBudgets(StorageOp<ApiError>),
    SpendBudget {
        name: String,
        op: Box<WriteOp>,
    },
    MarkPod(Box<WriteOp>),
    DeletePod(Box<WriteOp>),
}

pub struct EvictionOp {
    pods: Arc<Resource>,
    budgets: Arc<Resource>,
    /// The pod's write context (namespace, name, user; a dry run by the request's `dryRun`
    /// until the Eviction's delete options are read).
    ctx: WriteContext,
    /// The Eviction's `deleteOptions`, read once the mutating admission has admitted it.
    options: DeleteOptions,
    rng: Rng,
    pod: Value,
    /// The delete must find the pod as it was read (it was counted unhealthy, or it is the
    /// one whose budget was spent), unless the client gave its own precondition.
    guard_pod: bool,
    budget: Option<String>,
    attempts: u32,
    step: Option<Step>,
    done: Option<Result<WriteOutcome, ApiError>>,
    /// What the validating admission to come reads, once the mutating one has admitted the
    /// Eviction.
    validation: Option<Found>,
    /// What the eviction's admission warned of.
    said: Said,
}

fn too_many_requests(retry_after_seconds: i32, cause: String) -> ApiError {
    let details = StatusDetails {
        causes: vec![StatusCause { reason: "DisruptionBudget".into(), message: cause, field: String::new() }],
        retry_after_seconds,
        ..Default::default()
    };
    ApiError { details: Some(Box::new(details)), ..ApiError::new(429, "TooManyRequests", TOO_MANY) }
}

fn still_processing(budget: &str) -> ApiError {
    too_many_requests(10, format!("The disruption budget {budget} is still being processed by the server."))
}

fn is_ready(pod: &Value) -> bool {
    meta::at(pod, &["status", "conditions"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c.get("type").and_then(Value::as_str) == Some("Ready") && c.get("status").and_then(Value::as_str) == Some("True"))
}

/// Pods no budget protects: finished, not yet running, or already going.
fn can_ignore_budgets(pod: &Value) -> bool {
    meta::deletion_timestamp(pod).is_some() || matches!(meta::str_at(pod, &["status", "phase"]), Some("Succeeded" | "Failed" | "Pending"))
}

fn int(v: &Value, path: &[&str]) -> i64 {
    meta::at(v, path).and_then(Value::as_i64).unwrap_or(0)
}

impl EvictionOp {
    /// The eviction `eviction` of the pod `ctx` names, admitted in the request's write
    /// context (kube's: a dry run only by the request's own `dryRun`) with what its admission
    /// reads (`found`).
    pub fn new(pods: Arc<Resource>, budgets: Arc<Resource>, ctx: WriteContext, eviction: Value, found: Found, mut rng: Rng) -> EvictionOp {
        let kind = WriteKind::Admit { body: eviction, mutating: true };
        let admit = WriteOp::new(pods.clone(), ctx.clone(), kind, found.clone(), Rng::new(rng.next_u64()));
        let step = Some(Step::Admit(Box::new(admit)));
        EvictionOp {
            pods,
            budgets,
            ctx,
            options: DeleteOptions::default(),
            rng,
            pod: Value::Null,
            guard_pod: false,
            budget: None,
            attempts: 0,
            step,
            done: None,
            validation: Some(found),
            said: Said::default(),
        }
    }

    /// What the eviction's admission said (warnings, audit annotations).
    pub fn take_said(&mut self) -> Said {
        std::mem::take(&mut self.said)
    }

    fn read_pod(&mut self) {
        let key = Self::key(&self.ctx, &self.pods, self.ctx.name.as_deref().unwrap_or_default());
        self.step = Some(Step::ReadPod(StorageOp::new(StorageRequest::Get { key, revision: 0 })));
    }

    fn key(ctx: &WriteContext, res: &Resource, name: &str) -> Bytes {
        Bytes::from(format!("{}/{}/{}/{name}", ctx.prefix, res.info.storage_prefix, ctx.namespace.as_deref().unwrap_or_default()))
    }

    fn write(&mut self, res: &Arc<Resource>, subresource: Option<&str>, name: &str, kind: WriteKind) -> Box<WriteOp> {
        let mut ctx = self.ctx.clone();
        ctx.name = Some(name.to_string());
        ctx.subresource = subresource.map(str::to_string);
        ctx.field_manager = "kube-apiserver".into();
        // The eviction's own writes are the server's: kube admits the eviction, not them.
        ctx.admission = Default::default();
        Box::new(WriteOp::new(res.clone(), ctx, kind, Found::default(), Rng::new(self.rng.next_u64())))
    }

    fn list_budgets(&mut self) {
        let prefix = Bytes::from(format!("{}/{}/{}/", self.ctx.prefix, self.budgets.info.storage_prefix, self.ctx.namespace.as_deref().unwrap_or_default()));
        self.step = Some(Step::ListBudgets(StorageOp::new(StorageRequest::List { prefix, start: None, limit: 0, revision: 0 })));
    }

    fn finish(&mut self, result: Result<WriteOutcome, ApiError>) {
        self.step = None;
        self.done = Some(result);
    }

    /// The pod is read: evict it at once, or see what its budget allows.
    fn pod_read(&mut self, pod: Value) {
        self.pod = pod;
        if can_ignore_budgets(&self.pod) {
            self.guard_pod = meta::deletion_timestamp(&self.pod).is_none() && meta::str_at(&self.pod, &["status", "phase"]) == Some("Pending");
            return self.mark_pod();
        }
        self.list_budgets();
    }

    /// The namespace's budgets are read: the pod's (at most one) decides.
    fn budgets_read(&mut self, budgets: Vec<Value>) {
        let labels = meta::labels(&self.pod);
        let matching: Vec<Value> = budgets
            .into_iter()
            .filter(|b| match meta::at(b, &["spec", "selector"]) {
                Some(sel) if !sel.is_null() => LabelSelector::from_object(sel).is_ok_and(|s| s.matches(&labels)),
                _ => false,
            })
            .collect();
        let budget = match matching.as_slice() {
            [] => return self.mark_pod(),
            [one] => one.clone(),
            _ => {
                return self.finish(Err(ApiError::new(
                    500,
                    "",
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                )));
            }
        };
        let name = meta::name(&budget).to_string();
        self.budget = Some(name.clone());
        if !is_ready(&self.pod) {
            let healthy_enough =
                int(&budget, &["status", "currentHealthy"]) >= int(&budget, &["status", "desiredHealthy"]) && int(&budget, &["status", "desiredHealthy"]) > 0;
            if healthy_enough || meta::str_at(&budget, &["spec", "unhealthyPodEvictionPolicy"]) == Some("AlwaysAllow") {
                self.guard_pod = true;
                return self.mark_pod();
            }
        }
        match self.spend(budget) {
            Ok(Some(op)) => self.step = Some(Step::SpendBudget { name, op }),
            Ok(None) => self.mark_pod(),
            Err(e) => self.finish(Err(e)),
        }
    }

    /// `checkAndDecrement`: the budget's status with one disruption fewer and the pod recorded
    /// as disrupted, or why it cannot be had; nothing to write on a dry run.
    fn spend(&mut self, mut budget: Value) -> Result<Option<Box<WriteOp>>, ApiError> {
        let name = meta::name(&budget).to_string();
        if int(&budget, &["status", "observedGeneration"]) < meta::generation(&budget) {
            return Err(still_processing(&name));
        }
        let allowed = int(&budget, &["status", "disruptionsAllowed"]);
        let forbidden = |why: &str| ApiError::forbidden(&GroupResource::new("policy", "poddisruptionbudget"), &name, why);
        if allowed < 0 {
            return Err(forbidden("pdb disruptions allowed is negative"));
        }
        if meta::at(&budget, &["status", "disruptedPods"]).and_then(Value::as_object).is_some_and(|m| m.len() > MAX_DISRUPTED_PODS) {
            return Err(forbidden("DisruptedPods map too big - too many evictions not confirmed by PDB controller"));
        }
        if allowed == 0 {
            let why = format!(
                "The disruption budget {name} needs {} healthy pods and has {} currently",
                int(&budget, &["status", "desiredHealthy"]),
                int(&budget, &["status", "currentHealthy"])
            );
            return Err(too_many_requests(0, why));
        }
        if self.ctx.dry_run {
            return Ok(None);
        }
        let now = format_time(self.ctx.now, false);
        let status = meta::object_at(&mut budget, &["status"]);
        status.insert("disruptionsAllowed".into(), json!(allowed - 1));
        if allowed == 1 {
            set_disruption_allowed(status, &now);
        }
        let Value::Object(disrupted) = status.entry("disruptedPods").or_insert_with(|| json!({})) else { unreachable!("an object was just put there") };
        disrupted.insert(meta::name(&self.pod).to_string(), json!(now));
        let budgets = self.budgets.clone();
        Ok(Some(self.write(&budgets, Some("status"), &name, WriteKind::Update(budget))))
    }

    /// The pod gets its `DisruptionTarget` condition (not on a dry run), then is deleted. The
    /// condition is a patch of the pod as it is then, as kube appends it in an update.
    fn mark_pod(&mut self) {
        if self.ctx.dry_run {
            return self.delete_pod();
        }
        let now = format_time(self.ctx.now, false);
        let patch = json!({"status": {"conditions": [{"type": "DisruptionTarget", "status": "True", "lastProbeTime": null, "lastTransitionTime": now,
            "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"}]}});
        let pods = self.pods.clone();
        let name = meta::name(&self.pod).to_string();
        self.step = Some(Step::MarkPod(self.write(&pods, Some("status"), &name, WriteKind::Patch(PatchType::Strategic, patch))));
    }

    /// The delete, found the pod as it was counted when the eviction guards it (the client's
    /// precondition, else ours), at the version the condition made.
    fn delete_pod(&mut self) {
        let mut options = self.options.clone();
        if self.guard_pod || options.precondition_resource_version.is_some() {
            options.precondition_resource_version = Some(meta::resource_version(&self.pod).to_string());
        }
        let pods = self.pods.clone();
        let name = meta::name(&self.pod).to_string();
        self.step = Some(Step::DeletePod(self.write(&pods, None, &name, WriteKind::Delete(options))));
    }

    pub fn poll(&mut self, now: Timestamp) -> Option<WriteEffect> {
        loop {
            if let Some(done) = self.done.take() {
                return Some(WriteEffect::Done(done));
            }
            match self.step.as_mut()? {
                Step::ReadPod(op) | Step::ListBudgets(op) => match op.poll(now)? {
                    StorageEffect::Kv(req) => return Some(WriteEffect::Kv(req)),
                    StorageEffect::Transform(_) => unreachable!("a read does not transform"),
                    StorageEffect::Done(result) => self.read_answered(result),
                },
                Step::Admit(op) | Step::SpendBudget { op, .. } | Step::MarkPod(op) | Step::DeletePod(op) => match op.poll(now)? {
                    WriteEffect::Kv(req) => return Some(WriteEffect::Kv(req)),
                    WriteEffect::Convert(c) => return Some(WriteEffect::Convert(c)),
                    WriteEffect::Admit(calls) => return Some(WriteEffect::Admit(calls)),
                    WriteEffect::Provision(p) => return Some(WriteEffect::Provision(p)),
                    WriteEffect::Done(result) => self.write_answered(result),
                },
            }
        }
    }

    /// The write under way (the admission's, the budget's, the pod's), which webhooks'
    /// answers go to.
    pub fn write_under_way(&mut self) -> Option<&mut WriteOp> {
        match self.step.as_mut() {
            Some(Step::Admit(op) | Step::SpendBudget { op, .. } | Step::MarkPod(op) | Step::DeletePod(op)) => Some(op),
            _ => None,
        }
    }

    pub fn handle(&mut self, now: Timestamp, result: KvResult) {
        match self.step.as_mut() {
            Some(Step::ReadPod(op) | Step::ListBudgets(op)) => op.handle(now, StorageEvent::Kv(result)),
            Some(Step::Admit(op) | Step::SpendBudget { op, .. } | Step::MarkPod(op) | Step::DeletePod(op)) => op.handle(now, result),
            None => {}
        }
    }

    fn read_answered(&mut self, result: Result<Outcome, crate::storage::StorageError<ApiError>>) {
        let name = self.ctx.name.clone().unwrap_or_default();
        match (self.step.take(), result) {
            (Some(Step::ReadPod(_)), Ok(Outcome::Found(Some(kv)))) => match decode_stored(&self.pods, &kv) {
                Ok(pod) => self.pod_read(pod),
                Err(e) => self.finish(Err(e)),
            },
            (Some(Step::ReadPod(_)), Ok(Outcome::Found(None))) => self.finish(Err(ApiError::not_found(&self.pods.info.group_resource(), &name))),
            (Some(Step::ListBudgets(_)), Ok(Outcome::Listed(range))) => {
                let budgets = range.kvs.iter().filter_map(|kv| decode_stored(&self.budgets, kv).ok()).collect();
                self.budgets_read(budgets)
            }
            (_, Err(e)) => self.finish(Err(storage_error(e, &self.pods.info.group_resource(), &name))),
            (_, Ok(other)) => self.finish(Err(ApiError::internal(format!("unexpected storage outcome {other:?}")))),
        }
    }

    fn write_answered(&mut self, result: Result<WriteOutcome, ApiError>) {
        if let Some(Step::Admit(op)) = self.step.as_mut() {
            self.said.extend(op.take_said());
            self.step = None;
            let admitted = match result {
                Ok(outcome) => outcome.object,
                Err(e) => return self.finish(Err(e)),
            };
            let Some(found) = self.validation.take() else { return self.read_pod() };
            // kube's eviction storage reads what the mutating admission made: its name, then
            // its delete options, before the validating admission (in the request's dry run).
            if self.ctx.name.as_deref() != Some(meta::name(&admitted)) {
                return self.finish(Err(ApiError::bad_request("name in URL does not match name in Eviction object")));
            }
            let ctx = self.ctx.clone();
            match DeleteOptions::read(admitted.get("deleteOptions").unwrap_or(&Value::Null)) {
                Ok((options, dry_run)) => {
                    self.options = options;
                    self.ctx.dry_run |= dry_run;
                }
                Err(e) => return self.finish(Err(e)),
            }
            let kind = WriteKind::Admit { body: admitted, mutating: false };
            self.step = Some(Step::Admit(Box::new(WriteOp::new(self.pods.clone(), ctx, kind, found, Rng::new(self.rng.next_u64())))));
            return;
        }
        match (self.step.take(), result) {
            (Some(Step::SpendBudget { name, .. }), Err(e)) if e.code == 409 => {
                self.attempts += 1;
                if self.attempts >= MAX_ATTEMPTS {
                    return self.finish(Err(ApiError::timeout(&format!("couldn't update PodDisruptionBudget {name:?} due to conflicts"), 10)));
                }
                self.list_budgets();
            }
            (Some(Step::SpendBudget { .. }), Ok(_)) => self.mark_pod(),
            (Some(Step::MarkPod(_)), Ok(outcome)) => {
                self.pod = outcome.object;
                self.delete_pod();
            }
            // The pod changed since it was counted: a client may try again (kube's 429), and
            // a pod no budget protects is read again.
            (Some(Step::DeletePod(_)), Err(e)) if e.code == 409 && self.guard_pod && self.options.precondition_resource_version.is_none() => {
                match self.budget.clone() {
                    Some(budget) => self.finish(Err(still_processing(&budget))),
                    None if self.attempts + 1 < MAX_ATTEMPTS => {
                        self.attempts += 1;
                        let key = Self::key(&self.ctx, &self.pods, meta::name(&self.pod));
                        self.step = Some(Step::ReadPod(StorageOp::new(StorageRequest::Get { key, revision: 0 })));
                    }
                    None => self.finish(Err(e)),
                }
            }
            (Some(Step::DeletePod(_)), Ok(outcome)) => self.finish(Ok(outcome)),
            (_, result) => self.finish(result),
        }
    }
}

/// `UpdateDisruptionAllowedCondition` once no disruption is left.
fn set_disruption_allowed(status: &mut serde_json::Map<String, Value>, now: &str) {
    let observed = status.get("observedGeneration").cloned().unwrap_or(json!(0));
    let condition = json!({"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods", "message": "",
        "observedGeneration": observed, "lastTransitionTime": now});
    let Value::Array(conditions) = status.entry("conditions").or_insert_with(|| json!([])) else { return };
    match conditions.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some("DisruptionAllowed")) {
        Some(c) if c.get("status").and_then(Value::as_str) == Some("False") => {
            c["reason"] = json!("InsufficientPods");
            c["observedGeneration"] = condition["observedGeneration"].clone();
        }
        Some(c) => *c = condition,
        None => conditions.push(condition),
    }
}

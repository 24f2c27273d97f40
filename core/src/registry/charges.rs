//! The quotas a write is charged to (see [`crate::admission::Charge`]): written in the same
//! transaction as the object, guarded by the revisions admission read them at. A quota that
//! moved meanwhile is taken as it is now and the charge decided again: a create is charged
//! anew and sent again, an update's transform runs again.

use serde_json::Value;

use super::WriteOp;
use super::objects::{set_resource_version, write_stored};
use crate::admission::Operation;
use crate::meta;
use crate::status::{ApiError, GroupResource};
use crate::storage::{Alongside, Moved};

/// How many times a write is charged before it gives up, answering the quota's conflict, as
/// kube's quota evaluator does after its fourth attempt.
const ATTEMPTS: u32 = 4;

impl WriteOp {
    /// The quota writes that go with the write of the object at `own` (none for a dry run;
    /// never the object's own key: a quota recreated while it counts quotas is refused as
    /// existing, not charged).
    pub(super) fn alongside(&self, own: &[u8]) -> Vec<Alongside> {
        if self.ctx.dry_run {
            return Vec::new();
        }
        let root = format!("{}/resourcequotas", self.ctx.prefix);
        self.charges
            .iter()
            .map(|c| Alongside {
                key: crate::storage::keys::object_key(&root, Some(meta::namespace(&c.quota)), meta::name(&c.quota)),
                mod_revision: meta::resource_version(&c.quota).parse().unwrap_or(0),
                value: write_stored(&c.quota).0,
            })
            .filter(|a| a.key != own)
            .collect()
    }

    /// Takes the quotas as a failed write found them (a deleted one is gone); whether one had
    /// moved from where the write's charge read it.
    pub(super) fn quotas_moved(&mut self, moved: Moved) -> bool {
        let charged_at = |name: &str| self.charges.iter().find(|c| meta::name(&c.quota) == name).map(|c| meta::resource_version(&c.quota).to_string());
        let any = moved.iter().any(|(key, kv)| {
            let name = String::from_utf8_lossy(key).rsplit('/').next().unwrap_or_default().to_string();
            charged_at(&name) != kv.as_ref().map(|kv| kv.mod_revision.to_string())
        });
        for (key, kv) in moved {
            let name = String::from_utf8_lossy(&key).rsplit('/').next().unwrap_or_default().to_string();
            let quotas = &mut self.found.resource_quotas;
            quotas.retain(|q| meta::name(q) != name);
            if let Some(kv) = kv
                && let Ok(mut q) = serde_json::from_slice::<Value>(&kv.value)
            {
                set_resource_version(&mut q, kv.mod_revision);
                quotas.push(q);
            }
        }
        any
    }

    /// Whether a write whose quotas moved (again) has been charged often enough.
    pub(super) fn out_of_attempts(&mut self) -> Option<ApiError> {
        self.charge_attempts += 1;
        let name = self.charges.first().map(|c| meta::name(&c.quota).to_string()).unwrap_or_default();
        (self.charge_attempts >= ATTEMPTS).then(|| ApiError::stale_conflict(&GroupResource::new("", "resourcequotas"), &name))
    }

    /// A create whose quotas moved: charged again on them as they are now, then sent again.
    pub(super) fn recharge_create(&mut self, moved: Moved) {
        self.quotas_moved(moved);
        let obj = self.result.take().expect("a create keeps its object");
        let charged = if let Some(conflict) = self.out_of_attempts() {
            Err(conflict)
        } else {
            let a = super::admission_attributes(&self.res, &self.ctx, &self.found, Operation::Create, meta::name(&obj), None);
            self.ctx.admission.charge(&a, Some(&obj), self.ctx.now)
        };
        match charged {
            Ok(charges) => {
                self.charges = charges;
                self.write_new(obj);
            }
            Err(e) => self.after_write(Err(e)),
        }
    }
}

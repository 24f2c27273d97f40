//! Resource quota accounting (kube's `pkg/quota/v1`): resource lists and their arithmetic, the
//! evaluators that say what an object uses (`evaluators.rs`: pods, services, claims and object
//! counts) and the scopes a quota is limited to (`scopes.rs`). Shared by the `ResourceQuota`
//! admission plugin, which charges a write to its namespace's quotas, and the `resourcequota`
//! controller, which recalculates what they use.

mod evaluators;
mod scopes;

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::meta;
use crate::quantity::{Format, Quantity};

pub use evaluators::{Evaluator, pod_total};
pub use scopes::{ScopeSelector, selectors};

/// A list of resources by name (`requests`, a quota's `hard` and `used`).
pub type Resources = BTreeMap<String, Quantity>;

/// The resource list at `v` (entries that are no quantity left out).
pub fn read(v: Option<&Value>) -> Resources {
    v.and_then(Value::as_object).into_iter().flatten().filter_map(|(k, q)| Some((k.clone(), Quantity::parse(q.as_str()?)?))).collect()
}

/// The resource list as JSON, each quantity in kube's canonical form.
pub fn write(list: &Resources) -> Value {
    Value::Object(list.iter().map(|(k, q)| (k.clone(), Value::String(q.canonical()))).collect::<Map<_, _>>())
}

pub fn zero() -> Quantity {
    Quantity::from_i64(0, Format::DecimalSI)
}

/// `a + b` as kube's `Quantity.Add`: the sum keeps `a`'s format unless `a` is zero (a sum
/// too large to keep exactly is more than any quota allows).
pub fn sum(a: &Quantity, b: &Quantity) -> Quantity {
    let format = if a.sign() == 0 { b.format } else { a.format };
    let mut s = a.saturating_add(b);
    s.format = format;
    s
}

/// kube's `quota.Add`: every key of either, summed where both have it.
pub fn add(a: &Resources, b: &Resources) -> Resources {
    let mut out = a.clone();
    for (k, q) in b {
        let v = out.get(k).map_or(*q, |have| sum(have, q));
        out.insert(k.clone(), v);
    }
    out
}

/// kube's `SubtractWithNonNegativeResult`: `a - b` per key of `a`, never below zero; the keys
/// only `b` has are zero.
pub fn subtract_non_negative(a: &Resources, b: &Resources) -> Resources {
    let mut out = Resources::new();
    for (k, q) in a {
        let d = b.get(k).map_or(*q, |other| sum(q, &other.negated()));
        out.insert(k.clone(), if d.sign() < 0 { zero() } else { d });
    }
    for k in b.keys().filter(|k| !a.contains_key(*k)) {
        out.insert(k.clone(), zero());
    }
    out
}

/// The entries of `list` named in `names`.
pub fn mask(list: &Resources, names: &[String]) -> Resources {
    list.iter().filter(|(k, _)| names.contains(k)).map(|(k, q)| (k.clone(), *q)).collect()
}

/// The names of `list`'s entries, sorted.
pub fn names(list: &Resources) -> Vec<String> {
    list.keys().cloned().collect()
}

/// Whether two lists hold the same names with equal quantities (kube's `quota.Equals`).
pub fn equal(a: &Resources, b: &Resources) -> bool {
    a.len() == b.len() && a.iter().all(|(k, q)| b.get(k).is_some_and(|o| q.partial_cmp(o) == Some(std::cmp::Ordering::Equal)))
}

/// The names of `a`'s entries greater than `b`'s of the same name.
pub fn exceeding(a: &Resources, b: &Resources) -> Vec<String> {
    a.iter().filter(|(k, q)| b.get(*k).is_some_and(|limit| *q > limit)).map(|(k, _)| k.clone()).collect()
}

/// kube's `prettyPrint`: `name=quantity` by name, joined by commas.
pub fn pretty(list: &Resources) -> String {
    list.iter().map(|(k, q)| format!("{k}={}", q.canonical())).collect::<Vec<_>>().join(",")
}

/// A quota's `status.hard`.
pub fn hard(quota: &Value) -> Resources {
    read(meta::at(quota, &["status", "hard"]))
}

/// A quota's `status.used`.
pub fn used(quota: &Value) -> Resources {
    read(meta::at(quota, &["status", "used"]))
}

#[cfg(test)]
mod tests;

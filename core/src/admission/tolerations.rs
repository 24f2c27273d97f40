//! Tolerations as kube's `pkg/util/tolerations` compares and merges them (RuntimeClass and
//! PodTolerationRestriction add theirs to a pod's): by their five fields, an empty string
//! field and an absent one alike, as Go's structs hold them.

use serde_json::{Map, Value};

/// A toleration's fields, as Go's struct holds them.
#[derive(Debug, PartialEq)]
struct Fields<'a> {
    key: &'a str,
    operator: &'a str,
    value: &'a str,
    effect: &'a str,
    seconds: Option<i64>,
}

fn fields(t: &Value) -> Fields<'_> {
    let s = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or_default();
    Fields { key: s("key"), operator: s("operator"), value: s("value"), effect: s("effect"), seconds: t.get("tolerationSeconds").and_then(Value::as_i64) }
}

/// A toleration of these fields as Go writes it (empty fields left out).
pub fn toleration(key: &str, operator: &str, value: &str, effect: &str, seconds: Option<i64>) -> Value {
    let mut t = Map::new();
    for (name, v) in [("key", key), ("operator", operator), ("value", value), ("effect", effect)] {
        if !v.is_empty() {
            t.insert(name.into(), Value::from(v));
        }
    }
    if let Some(seconds) = seconds {
        t.insert("tolerationSeconds".into(), Value::from(seconds));
    }
    Value::Object(t)
}

/// kube's `MergeTolerations`: `first` then `second`, each left out when one kept, or a later
/// different one, covers it.
pub fn merge(first: &[Value], second: &[Value]) -> Vec<Value> {
    let all: Vec<(&Value, Fields)> = first.iter().chain(second).map(|t| (t, fields(t))).collect();
    let mut merged: Vec<usize> = Vec::new();
    for (i, (_, t)) in all.iter().enumerate() {
        if merged.iter().any(|m| covers(&all[*m].1, t)) {
            continue;
        }
        if all[i + 1..].iter().any(|(_, later)| later != t && covers(later, t)) {
            continue;
        }
        merged.push(i);
    }
    merged.into_iter().map(|i| all[i].0.clone()).collect()
}

/// kube's `VerifyAgainstWhitelist`: every toleration is covered by one of the whitelist's
/// (an empty whitelist allows any).
pub fn within(tolerations: &[Value], whitelist: &[Value]) -> bool {
    let whitelist: Vec<Fields> = whitelist.iter().map(fields).collect();
    whitelist.is_empty() || tolerations.iter().map(fields).all(|t| whitelist.iter().any(|w| covers(w, &t)))
}

/// kube's `isSuperset`: whether the toleration `ss` tolerates whatever `t` does.
fn covers(ss: &Fields, t: &Fields) -> bool {
    if ss == t {
        return true;
    }
    if ss.key != t.key && !(ss.key.is_empty() && ss.operator == "Exists") {
        return false;
    }
    if ss.effect != t.effect && !ss.effect.is_empty() {
        return false;
    }
    if ss.effect == "NoExecute"
        && let Some(bound) = ss.seconds
    {
        match t.seconds {
            Some(seconds) if seconds <= bound => {}
            _ => return false,
        }
    }
    match ss.operator {
        "Equal" | "" => t.operator == "Equal" && t.value == ss.value,
        "Exists" => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merging_keeps_the_first_of_equals_and_the_broader_of_the_rest() {
        let pods = [json!({"key": "a", "operator": "Equal", "value": "1", "effect": "NoSchedule"}), json!({"key": "b", "operator": "Exists", "value": ""})];
        let more = [json!({"key": "a", "operator": "Exists"}), json!({"key": "b", "operator": "Exists"})];
        assert_eq!(merge(&pods, &more), [json!({"key": "b", "operator": "Exists", "value": ""}), json!({"key": "a", "operator": "Exists"})]);
        let everything = [json!({"operator": "Exists"})];
        assert_eq!(merge(&pods, &everything), everything);
    }

    #[test]
    fn a_whitelist_covers_what_its_tolerations_tolerate() {
        let whitelist = [
            json!({"key": "gpu", "operator": "Exists"}),
            json!({"key": "x", "operator": "Equal", "value": "1", "effect": "NoExecute", "tolerationSeconds": 60}),
        ];
        assert!(within(&[json!({"key": "gpu", "operator": "Equal", "value": "v", "effect": "NoSchedule"})], &whitelist));
        assert!(within(&[json!({"key": "x", "operator": "Equal", "value": "1", "effect": "NoExecute", "tolerationSeconds": 30})], &whitelist));
        assert!(!within(&[json!({"key": "x", "operator": "Equal", "value": "1", "effect": "NoExecute"})], &whitelist));
        // An empty operator is `Equal` only where Go's struct is compared whole.
        assert!(!within(&[json!({"key": "x", "value": "1", "effect": "NoExecute", "tolerationSeconds": 30})], &whitelist));
        assert!(within(&[json!({"key": "other"})], &[]));
    }
}

//! Label selectors of the forms the simulated clients use, parsed and matched independently of
//! the core's selector code, so a bug there shows as a difference.

use std::collections::BTreeMap;

use crate::sim::rng::SimRng;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    Everything,
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

impl Selector {
    pub fn draw(rng: &mut SimRng) -> Selector {
        match rng.below(7) {
            0 | 1 => Selector::Everything,
            2 => Selector::Equals("app".into(), rng.pick(&["a", "b", "c"]).to_string()),
            3 => Selector::NotEquals("app".into(), rng.pick(&["a", "b", "c"]).to_string()),
            4 => Selector::In("app".into(), vec!["a".into(), rng.pick(&["b", "c"]).to_string()]),
            5 => Selector::Exists("tier".into()),
            _ => Selector::NotExists("tier".into()),
        }
    }

    /// The `labelSelector` value (empty for everything).
    pub fn query(&self) -> String {
        match self {
            Selector::Everything => String::new(),
            Selector::Equals(k, v) => format!("{k}={v}"),
            Selector::NotEquals(k, v) => format!("{k}!={v}"),
            Selector::In(k, vs) => format!("{k} in ({})", vs.join(",")),
            Selector::Exists(k) => k.clone(),
            Selector::NotExists(k) => format!("!{k}"),
        }
    }

    /// Parses what [`query`](Self::query) writes.
    pub fn parse(s: &str) -> Selector {
        let s = s.trim();
        if s.is_empty() {
            Selector::Everything
        } else if let Some((k, v)) = s.split_once("!=") {
            Selector::NotEquals(k.into(), v.into())
        } else if let Some((k, v)) = s.split_once('=') {
            Selector::Equals(k.into(), v.into())
        } else if let Some((k, vs)) = s.split_once(" in (") {
            Selector::In(k.into(), vs.trim_end_matches(')').split(',').map(str::to_string).collect())
        } else if let Some(k) = s.strip_prefix('!') {
            Selector::NotExists(k.into())
        } else {
            Selector::Exists(s.into())
        }
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Selector::Everything => true,
            Selector::Equals(k, v) => labels.get(k) == Some(v),
            Selector::NotEquals(k, v) => labels.get(k) != Some(v),
            Selector::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Selector::Exists(k) => labels.contains_key(k),
            Selector::NotExists(k) => !labels.contains_key(k),
        }
    }
}

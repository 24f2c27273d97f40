//! `--runtime-config`: which group versions and resources are served, as kube-apiserver reads
//! it (`cliflag.ConfigurationMap`, the options' `Complete` and `Validate`, and
//! `resourceconfig.MergeAPIResourceConfigs`): `api/all`, `api/ga`, `api/beta` and `api/alpha`
//! first, in that order, then `<group>/<version>` and last `<group>/<version>/<resource>`, each
//! `=true` (or empty) or `=false`.

use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::ResourceInfo;

/// The parsed flag. The default serves what kube v1.33 serves by default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// `api/all`, `api/ga`, `api/beta`, `api/alpha` that were given, in kube's order.
    matchers: Vec<(Matcher, bool)>,
    versions: BTreeMap<(String, String), bool>,
    resources: BTreeMap<(String, String, String), bool>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Matcher {
    All,
    Ga,
    Beta,
    Alpha,
}

const MATCHERS: [(&str, Matcher); 4] = [("api/all", Matcher::All), ("api/ga", Matcher::Ga), ("api/beta", Matcher::Beta), ("api/alpha", Matcher::Alpha)];

impl Matcher {
    fn matches(self, version: &str) -> bool {
        let Some(rest) = version.strip_prefix('v') else { return false };
        let major = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (digits, level) = rest.split_at(major);
        let numbered = |prefix: &str| level.strip_prefix(prefix).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        !digits.is_empty()
            && match self {
                Matcher::All => true,
                Matcher::Ga => level.is_empty(),
                Matcher::Beta => numbered("beta"),
                Matcher::Alpha => numbered("alpha"),
            }
    }
}

/// Go's `strconv.ParseBool`.
fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

impl RuntimeConfig {
    /// Reads the flag's value against the group versions that exist (served by default or
    /// not), with kube's error messages.
    pub fn parse(flag: &str, registered: &BTreeSet<(String, String)>) -> Result<RuntimeConfig, String> {
        let mut entries: BTreeMap<String, String> = BTreeMap::new();
        for pair in flag.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            entries.insert(k.trim().to_string(), v.trim().to_string());
        }
        // `Complete`: the core group's spellings become "/v1"; api/legacy is gone.
        entries.remove("api/legacy");
        let core: Vec<String> =
            entries.keys().filter(|k| ["v1", "api/v1"].iter().any(|c| k.as_str() == *c || k.starts_with(&format!("{c}/")))).cloned().collect();
        for k in core {
            let v = entries.remove(&k).unwrap_or_default();
            entries.insert("/v1".into(), v);
        }
        if entries.len() == 1 && entries.get("api/all").map(String::as_str) == Some("false") {
            return Err("invalid key with only api/all=false".into());
        }
        let groups: BTreeSet<&str> = registered.iter().map(|(g, _)| g.as_str()).collect();
        let mut unknown = BTreeSet::new();
        for key in entries.keys().filter(|k| !MATCHERS.iter().any(|(m, _)| m == k)) {
            let tokens: Vec<&str> = key.split('/').collect();
            if !(2..=3).contains(&tokens.len()) {
                return Err(format!("runtime-config invalid key {key}"));
            }
            if !groups.contains(tokens[0]) {
                unknown.insert(tokens[0].to_string());
            }
        }
        if !unknown.is_empty() {
            return Err(format!("unknown api groups {}", unknown.into_iter().collect::<Vec<_>>().join(",")));
        }
        let mut config = RuntimeConfig::default();
        for (name, m) in MATCHERS {
            match entries.get(name).map(String::as_str) {
                None => {}
                Some("true") => config.matchers.push((m, true)),
                Some("false") => config.matchers.push((m, false)),
                Some(other) => return Err(format!("invalid value {name}={other}")),
            }
        }
        for (key, value) in entries.iter().filter(|(k, _)| !MATCHERS.iter().any(|(m, _)| m == k)) {
            let tokens: Vec<&str> = key.split('/').collect();
            let (group, version) = (tokens[0].to_string(), tokens[1].to_string());
            if !registered.contains(&(group.clone(), version.clone())) {
                let gv = if group.is_empty() { version } else { format!("{group}/{version}") };
                return Err(format!("group version {gv} that has not been registered"));
            }
            let on = if value.is_empty() {
                true
            } else {
                parse_bool(value).ok_or_else(|| format!("invalid value of {key}: {value}, err: strconv.ParseBool: parsing \"{value}\": invalid syntax"))?
            };
            match tokens.get(2) {
                None => {
                    config.versions.insert((group, version), on);
                }
                Some(resource) if resource.to_lowercase() != *resource => {
                    return Err(format!("invalid key {key}: group/version/resource and resource is always lowercase plural, not \"{resource}\""));
                }
                Some(resource) => {
                    config.resources.insert((group, version, resource.to_string()), on);
                }
            }
        }
        Ok(config)
    }

    /// Whether a resource is served, given whether kube serves it by default.
    pub fn serves(&self, info: &ResourceInfo, by_default: bool) -> bool {
        let mut on = by_default;
        for (m, value) in &self.matchers {
            if m.matches(&info.version) {
                on = *value;
            }
        }
        let gv = (info.group.to_string(), info.version.to_string());
        if let Some(v) = self.versions.get(&gv) {
            on = *v;
        }
        let (group, version) = gv;
        self.resources.get(&(group, version, info.resource.to_string())).copied().unwrap_or(on)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registered() -> BTreeSet<(String, String)> {
        [("", "v1"), ("policy", "v1"), ("policy", "v1beta1"), ("batch", "v1"), ("batch", "v1beta1")]
            .iter()
            .map(|(g, v)| (g.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn kube_reads_matchers_then_versions_then_resources() {
        let c = RuntimeConfig::parse("api/all=false, policy/v1beta1=true,batch/v1beta1 , batch/v1/jobs=true, v1=true", &registered()).unwrap();
        let pdb = |v| crate::resources::info("policy", v, "PodDisruptionBudget", "poddisruptionbudgets", true);
        let cron = |v| crate::resources::info("batch", v, "CronJob", "cronjobs", true);
        let jobs = crate::resources::info("batch", "v1", "Job", "jobs", true);
        assert!(c.serves(&pdb("v1beta1"), false));
        assert!(!c.serves(&pdb("v1"), true));
        assert!(c.serves(&cron("v1beta1"), false));
        assert!(c.serves(&jobs, true) && !c.serves(&cron("v1"), true));
        assert!(c.serves(&crate::resources::info("", "v1", "Pod", "pods", true), true));
        let beta = RuntimeConfig::parse("api/beta=true", &registered()).unwrap();
        assert!(beta.serves(&cron("v1beta1"), false) && beta.serves(&cron("v1"), true));
    }

    #[test]
    fn bad_keys_and_values_get_kubes_messages() {
        let err = |flag: &str| RuntimeConfig::parse(flag, &registered()).unwrap_err();
        assert_eq!(err("api/all=false"), "invalid key with only api/all=false");
        assert_eq!(err("foo.example.com/v1=true,bar/v2"), "unknown api groups bar,foo.example.com");
        assert_eq!(err("policy=true"), "runtime-config invalid key policy");
        assert_eq!(err("policy/v2=true"), "group version policy/v2 that has not been registered");
        assert_eq!(err("policy/v1=maybe"), "invalid value of policy/v1: maybe, err: strconv.ParseBool: parsing \"maybe\": invalid syntax");
        assert_eq!(err("api/all=yes"), "invalid value api/all=yes");
        assert_eq!(err("batch/v1/Jobs=true"), "invalid key batch/v1/Jobs: group/version/resource and resource is always lowercase plural, not \"Jobs\"");
    }
}

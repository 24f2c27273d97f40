//! Pod Security levels, versions and policies (`k8s.io/pod-security-admission/api`): a
//! namespace's `pod-security.kubernetes.io/*` labels over the configured defaults, with kube's
//! fallbacks for invalid values (an invalid enforce level enforces `restricted`; an invalid
//! audit or warn level is `privileged`) and its defaulting of warn from enforce.

use serde_json::{Map, Value, json};

use crate::status::FieldError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    pub fn parse(s: &str) -> Result<Level, &'static str> {
        match s {
            "privileged" => Ok(Level::Privileged),
            "baseline" => Ok(Level::Baseline),
            "restricted" => Ok(Level::Restricted),
            _ => Err("must be one of privileged, baseline, restricted"),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

/// A policy version: `latest` or `v1.<minor>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Latest,
    V1(u64),
}

impl Version {
    /// kube's `ParseVersion`: `latest`, or `v1.` and a minor without leading zeros.
    pub fn parse(s: &str) -> Result<Version, &'static str> {
        const ERR: &str = "must be \"latest\" or \"v1.x\"";
        if s == "latest" {
            return Ok(Version::Latest);
        }
        let minor = s.strip_prefix("v1.").ok_or(ERR)?;
        let digits = !minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit()) && (minor == "0" || !minor.starts_with('0'));
        if !digits {
            return Err(ERR);
        }
        minor.parse::<i64>().ok().and_then(|m| u64::try_from(m).ok()).map(Version::V1).ok_or(ERR)
    }

    /// The minor version, if not `latest`.
    pub fn minor(self) -> Option<u64> {
        match self {
            Version::Latest => None,
            Version::V1(m) => Some(m),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LevelVersion {
    pub level: Level,
    pub version: Version,
}

impl LevelVersion {
    pub const PRIVILEGED: LevelVersion = LevelVersion { level: Level::Privileged, version: Version::Latest };

    /// Both privileged (whatever their versions), or the same level and version.
    pub fn equivalent(&self, other: &LevelVersion) -> bool {
        (self.level == Level::Privileged && other.level == Level::Privileged) || self == other
    }
}

impl std::fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.version {
            Version::Latest => write!(f, "{}:latest", self.level.as_str()),
            Version::V1(m) => write!(f, "{}:v1.{m}", self.level.as_str()),
        }
    }
}

/// The three modes' levels and versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub enforce: LevelVersion,
    pub audit: LevelVersion,
    pub warn: LevelVersion,
}

impl Default for Policy {
    fn default() -> Self {
        Policy { enforce: LevelVersion::PRIVILEGED, audit: LevelVersion::PRIVILEGED, warn: LevelVersion::PRIVILEGED }
    }
}

pub const LABEL_PREFIX: &str = "pod-security.kubernetes.io/";

/// The modes, in the order kube reads them.
pub const MODES: [&str; 3] = ["enforce", "audit", "warn"];

impl Policy {
    pub fn fully_privileged(&self) -> bool {
        [self.enforce, self.audit, self.warn].iter().all(|lv| lv.level == Level::Privileged)
    }

    fn mode_mut(&mut self, mode: &str) -> &mut LevelVersion {
        match mode {
            "enforce" => &mut self.enforce,
            "audit" => &mut self.audit,
            _ => &mut self.warn,
        }
    }

    /// The policy a namespace's labels make of `defaults` (`PolicyToEvaluate`), and what was
    /// wrong with the labels.
    pub fn from_labels(labels: Option<&Map<String, Value>>, defaults: &Policy) -> (Policy, Vec<FieldError>) {
        let mut policy = *defaults;
        let mut errs = Vec::new();
        let Some(labels) = labels.filter(|l| l.keys().any(|k| k.starts_with(LABEL_PREFIX))) else { return (policy, errs) };
        let label = |key: &str| labels.get(&format!("{LABEL_PREFIX}{key}")).map(|v| v.as_str().unwrap_or_default().to_string());
        let invalid = |key: &str, value: &str, msg: &str| FieldError::invalid(format!("metadata.labels[{LABEL_PREFIX}{key}]"), json!(value), msg);
        let mut enforce_label = false;
        for mode in MODES {
            if let Some(value) = label(mode) {
                let level = Level::parse(&value).unwrap_or_else(|msg| {
                    errs.push(invalid(mode, &value, msg));
                    if mode == "enforce" { Level::Restricted } else { Level::Privileged }
                });
                enforce_label |= mode == "enforce" && Level::parse(&value).is_ok();
                policy.mode_mut(mode).level = level;
            }
            let key = format!("{mode}-version");
            if let Some(value) = label(&key) {
                policy.mode_mut(mode).version = Version::parse(&value).unwrap_or_else(|msg| {
                    errs.push(invalid(&key, &value, msg));
                    Version::Latest
                });
            }
        }
        if enforce_label && label("warn").is_none() && policy.enforce.level > policy.warn.level {
            policy.warn.level = policy.enforce.level;
            if label("warn-version").is_none() {
                policy.warn.version = policy.enforce.version;
            }
        }
        (policy, errs)
    }

    /// Whether a namespace's labels set a mode's level or version.
    pub fn labelled(labels: Option<&Map<String, Value>>, mode: &str) -> bool {
        labels.is_some_and(|l| l.contains_key(&format!("{LABEL_PREFIX}{mode}")) || l.contains_key(&format!("{LABEL_PREFIX}{mode}-version")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Map<String, Value> {
        pairs.iter().map(|(k, v)| (format!("{LABEL_PREFIX}{k}"), json!(v))).collect()
    }

    #[test]
    fn versions_and_levels_parse_as_kube_parses_them() {
        assert_eq!(Version::parse("v1.0"), Ok(Version::V1(0)));
        assert_eq!(Version::parse("v1.25"), Ok(Version::V1(25)));
        for bad in ["v1.01", "1.25", "v2.0", "Latest", "v1.", "v1.99999999999999999999"] {
            assert_eq!(Version::parse(bad), Err("must be \"latest\" or \"v1.x\""), "{bad}");
        }
        assert_eq!(LevelVersion { level: Level::Baseline, version: Version::V1(25) }.to_string(), "baseline:v1.25");
    }

    #[test]
    fn invalid_enforce_is_restricted_and_invalid_warn_privileged() {
        let (p, errs) = Policy::from_labels(Some(&labels(&[("enforce", "foo"), ("warn", "bar"), ("enforce-version", "x")])), &Policy::default());
        assert_eq!(p.enforce, LevelVersion { level: Level::Restricted, version: Version::Latest });
        assert_eq!(p.warn.level, Level::Privileged);
        let text: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            text,
            [
                "metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"foo\": must be one of privileged, baseline, restricted",
                "metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: \"x\": must be \"latest\" or \"v1.x\"",
                "metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: \"bar\": must be one of privileged, baseline, restricted",
            ]
        );
    }

    #[test]
    fn warn_follows_a_stricter_enforce_label_unless_labelled() {
        let (p, _) = Policy::from_labels(Some(&labels(&[("enforce", "baseline"), ("enforce-version", "v1.20")])), &Policy::default());
        assert_eq!(p.warn, p.enforce);
        let (p, _) = Policy::from_labels(Some(&labels(&[("enforce", "baseline"), ("warn", "privileged")])), &Policy::default());
        assert_eq!(p.warn.level, Level::Privileged);
        let (p, _) = Policy::from_labels(Some(&labels(&[("enforce-version", "v1.20")])), &Policy::default());
        assert_eq!(p.warn, LevelVersion::PRIVILEGED);
    }
}

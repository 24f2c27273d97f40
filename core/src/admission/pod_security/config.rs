//! `PodSecurityConfiguration` (`pod-security.admission.config.k8s.io` v1, v1beta1, v1alpha1),
//! the PodSecurity plugin's part of `--admission-control-config-file`: the policy of
//! unlabelled namespaces and the exempt users, namespaces and runtime classes, decoded and
//! checked as kube does (its start-up errors, in its words).

use super::policy::{Level, LevelVersion, MODES, Policy, Version};
use crate::config_file::{self, Decoder};
use crate::status::FieldError;
use serde_json::json;

const VERSIONS: [&str; 3] =
    ["pod-security.admission.config.k8s.io/v1", "pod-security.admission.config.k8s.io/v1beta1", "pod-security.admission.config.k8s.io/v1alpha1"];
const SCHEME: &str = "k8s.io/pod-security-admission/admission/api/scheme/scheme.go:31";

/// What the plugin is configured with.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    pub defaults: Policy,
    pub exempt_usernames: Vec<String>,
    pub exempt_namespaces: Vec<String>,
    pub exempt_runtime_classes: Vec<String>,
}

impl Config {
    /// The configuration a file gives (`None`: kube's defaults, everything privileged), or
    /// kube's start-up error.
    pub fn load(data: Option<&[u8]>) -> Result<Config, String> {
        let Some(data) = data.filter(|d| !d.iter().all(u8::is_ascii_whitespace)) else { return Ok(Config::default()) };
        let init = |e: String| format!("couldn't init admission plugin \"PodSecurity\": {e}");
        let tree = config_file::read(data, "PodSecurityConfiguration", &VERSIONS, SCHEME).map_err(init)?;
        let mut d = Decoder::new(&tree);
        let root = d.root(&tree, "PodSecurityConfiguration", &["apiVersion", "kind", "defaults", "exemptions"]);
        let fields = ["enforce", "enforce-version", "audit", "audit-version", "warn", "warn-version"];
        let defaults = d.nested(&root, "defaults", "PodSecurityDefaults", &fields);
        let raw: Vec<String> = fields.iter().map(|f| d.string(&defaults, f)).collect();
        let exemptions = d.nested(&root, "exemptions", "PodSecurityExemptions", &["usernames", "namespaces", "runtimeClasses"]);
        let usernames = d.strings(&exemptions, "usernames");
        let namespaces = d.strings(&exemptions, "namespaces");
        let runtime_classes = d.strings(&exemptions, "runtimeClasses");
        d.finish().map_err(init)?;

        let failed = |e: String| format!("failed to initialize admission plugin \"PodSecurity\": {e}");
        let mut policy = Policy::default();
        let mut errs = Vec::new();
        for (i, mode) in MODES.iter().enumerate() {
            let (level, version) = (&raw[2 * i], &raw[2 * i + 1]);
            let level = if level.is_empty() { "privileged" } else { level };
            let version = if version.is_empty() { "latest" } else { version };
            let lv = LevelVersion {
                level: Level::parse(level).unwrap_or_else(|m| {
                    errs.push(format!("{mode}: {m}"));
                    Level::Restricted
                }),
                version: Version::parse(version).unwrap_or_else(|m| {
                    errs.push(format!("{mode}-version: {m}"));
                    Version::Latest
                }),
            };
            match *mode {
                "enforce" => policy.enforce = lv,
                "audit" => policy.audit = lv,
                _ => policy.warn = lv,
            }
        }
        if !errs.is_empty() {
            return Err(failed(format!("PodSecurity configuration error: {}", crate::authz::rbac::aggregate(&errs))));
        }
        let mut invalid = Vec::new();
        exemption_errors(&mut invalid, "namespaces", &namespaces, crate::validation::names::dns1123_label);
        exemption_errors(&mut invalid, "runtimeClasses", &runtime_classes, crate::validation::names::dns1123_subdomain);
        exemption_errors(&mut invalid, "usernames", &usernames, |u| if u.is_empty() { vec!["username must not be empty".to_string()] } else { Vec::new() });
        if let Some(text) = crate::status::field::aggregate(&invalid) {
            return Err(failed(format!("PodSecurity invalid: {text}")));
        }
        Ok(Config { defaults: policy, exempt_usernames: usernames, exempt_namespaces: namespaces, exempt_runtime_classes: runtime_classes })
    }
}

/// kube's checks of one exemption list: each valid (`check` says why not), none twice.
fn exemption_errors(out: &mut Vec<FieldError>, list: &str, items: &[String], check: impl Fn(&str) -> Vec<String>) {
    for (i, item) in items.iter().enumerate() {
        let field = format!("exemptions.{list}[{i}]");
        let problems = check(item);
        if !problems.is_empty() {
            out.push(FieldError::invalid(field, json!(item), problems.join(", ")));
        } else if items[..i].contains(item) {
            out.push(FieldError::duplicate(field, json!(item)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_exemptions_are_read_and_checked_as_kube_does() {
        assert_eq!(Config::load(None).unwrap(), Config::default());
        let c = Config::load(Some(
            b"apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndefaults:\n  enforce: baseline\n  warn-version: v1.25\nexemptions:\n  namespaces: [kube-system]\n",
        ))
        .unwrap();
        assert_eq!(c.defaults.enforce.to_string(), "baseline:latest");
        assert_eq!(c.defaults.warn.to_string(), "privileged:v1.25");
        assert_eq!(c.exempt_namespaces, ["kube-system"]);
        let bad = Config::load(Some(
            b"apiVersion: pod-security.admission.config.k8s.io/v1beta1\nkind: PodSecurityConfiguration\ndefaults: {enforce: strict, audit-version: '1.2'}\n",
        ));
        assert_eq!(
            bad.unwrap_err(),
            "failed to initialize admission plugin \"PodSecurity\": PodSecurity configuration error: [enforce: must be one of privileged, baseline, restricted, audit-version: must be \"latest\" or \"v1.x\"]"
        );
        let dup =
            Config::load(Some(b"apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\nexemptions: {usernames: [a, '', a]}\n"));
        assert_eq!(
            dup.unwrap_err(),
            "failed to initialize admission plugin \"PodSecurity\": PodSecurity invalid: [exemptions.usernames[1]: Invalid value: \"\": username must not be empty, exemptions.usernames[2]: Duplicate value: \"a\"]"
        );
        let unknown = Config::load(Some(b"apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndeflaults: {}\n"));
        assert_eq!(unknown.unwrap_err(), "couldn't init admission plugin \"PodSecurity\": strict decoding error: unknown field \"deflaults\"");
    }
}

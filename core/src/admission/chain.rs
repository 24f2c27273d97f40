//! The chain of admission plugins: kube v1.33's plugins in its order, those on by default, and
//! the flags that change the set (`--enable-admission-plugins`, `--disable-admission-plugins`),
//! checked in kube's words.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::{Attributes, Lookup, Pending, Plugin};
use crate::admission::webhooks::dispatch::{Answers, Halt};
use crate::rand::Rng;
use crate::status::ApiError;

/// kube v1.33's admission plugins in the order they run (`AllOrderedPlugins`).
pub const ORDER: [&str; 36] = [
    "AlwaysAdmit",
    "NamespaceAutoProvision",
    "NamespaceLifecycle",
    "NamespaceExists",
    "LimitPodHardAntiAffinityTopology",
    "LimitRanger",
    "ServiceAccount",
    "NodeRestriction",
    "TaintNodesByCondition",
    "AlwaysPullImages",
    "ImagePolicyWebhook",
    "PodSecurity",
    "PodNodeSelector",
    "Priority",
    "DefaultTolerationSeconds",
    "PodTolerationRestriction",
    "EventRateLimit",
    "ExtendedResourceToleration",
    "DefaultStorageClass",
    "StorageObjectInUseProtection",
    "OwnerReferencesPermissionEnforcement",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "DenyServiceExternalIPs",
    "PodTopologyLabels",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
    "AlwaysDeny",
];

/// The plugins kube v1.33 turns on by default.
pub const DEFAULT_ON: [&str; 22] = [
    "NamespaceLifecycle",
    "LimitRanger",
    "ServiceAccount",
    "TaintNodesByCondition",
    "PodSecurity",
    "Priority",
    "DefaultTolerationSeconds",
    "DefaultStorageClass",
    "StorageObjectInUseProtection",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "PodTopologyLabels",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
];

/// kapi's plugin of a name, if it has one, made with its configuration (kube's start-up
/// error for a bad one).
fn plugin(name: &str, config: Option<&[u8]>, read_file: &ReadFile) -> Option<Result<Arc<dyn Plugin>, String>> {
    Some(Ok(match name {
        "AlwaysAdmit" => Arc::new(super::always::AlwaysAdmit),
        "AlwaysDeny" => Arc::new(super::always::AlwaysDeny),
        "ExtendedResourceToleration" => Arc::new(super::extended_resource_toleration::ExtendedResourceToleration),
        "LimitPodHardAntiAffinityTopology" => Arc::new(super::limit_pod_hard_anti_affinity_topology::LimitPodHardAntiAffinityTopology),
        "NamespaceAutoProvision" => Arc::new(super::namespace_auto_provision::NamespaceAutoProvision),
        "NamespaceLifecycle" => Arc::new(super::namespace_lifecycle::NamespaceLifecycle),
        "LimitRanger" => Arc::new(super::limit_ranger::LimitRanger),
        "ServiceAccount" => Arc::new(super::service_account::ServiceAccount),
        "TaintNodesByCondition" => Arc::new(super::taint_nodes_by_condition::TaintNodesByCondition),
        "AlwaysPullImages" => Arc::new(super::always_pull_images::AlwaysPullImages),
        "Priority" => Arc::new(super::priority::Priority),
        "DefaultTolerationSeconds" => Arc::new(super::default_toleration_seconds::DefaultTolerationSeconds),
        "DefaultStorageClass" => Arc::new(super::default_class::DefaultStorageClass),
        "StorageObjectInUseProtection" => Arc::new(super::storage_object_in_use_protection::StorageObjectInUseProtection),
        "PersistentVolumeClaimResize" => Arc::new(super::persistent_volume_claim_resize::PersistentVolumeClaimResize),
        "RuntimeClass" => Arc::new(super::runtime_class::RuntimeClass),
        "DefaultIngressClass" => Arc::new(super::default_class::DefaultIngressClass),
        "CertificateApproval" => Arc::new(super::certificates::CertificateApproval),
        "CertificateSigning" => Arc::new(super::certificates::CertificateSigning),
        "CertificateSubjectRestriction" => Arc::new(super::certificates::CertificateSubjectRestriction),
        "ClusterTrustBundleAttest" => Arc::new(super::certificates::ClusterTrustBundleAttest),
        "DenyServiceExternalIPs" => Arc::new(super::deny_service_external_ips::DenyServiceExternalIPs),
        "NamespaceExists" => Arc::new(super::namespace_exists::NamespaceExists),
        "NodeRestriction" => Arc::new(super::node_restriction::NodeRestriction { audiences: true }),
        "PodNodeSelector" => Arc::new(super::pod_node_selector::PodNodeSelector::new(config)),
        "PodTolerationRestriction" => match super::pod_toleration_restriction::PodTolerationRestriction::new(config) {
            Ok(p) => Arc::new(p),
            Err(e) => return Some(Err(e)),
        },
        "OwnerReferencesPermissionEnforcement" => Arc::new(super::owner_references::OwnerReferencesPermissionEnforcement),
        "ResourceQuota" => match super::resource_quota::ResourceQuota::new(config) {
            Ok(p) => Arc::new(p),
            Err(e) => return Some(Err(e)),
        },
        "EventRateLimit" => match super::event_rate_limit::EventRateLimit::new(config) {
            Ok(p) => Arc::new(p),
            Err(e) => return Some(Err(e)),
        },
        "ImagePolicyWebhook" => match super::image_policy::ImagePolicyWebhook::new(config, read_file) {
            Ok(p) => Arc::new(p),
            Err(e) => return Some(Err(e)),
        },
        "PodSecurity" => match super::pod_security::PodSecurity::new(config) {
            Ok(p) => Arc::new(p),
            Err(e) => return Some(Err(e)),
        },
        _ => return None,
    }))
}

/// The names of the plugins the flags turn on, in kube's order (names not checked).
pub fn enabled<'a>(enable: &'a [String], disable: &'a [String]) -> impl Iterator<Item = &'static str> + 'a {
    ORDER.into_iter().filter(|n| (DEFAULT_ON.contains(n) || enable.iter().any(|e| e == n)) && !disable.iter().any(|d| d == n))
}

/// How the shell reads a file a plugin's configuration names (its contents, or why not).
pub type ReadFile = dyn Fn(&str) -> Result<Vec<u8>, String>;

/// The [`ReadFile`] of a server given no files (the simulator's, the tests'): each is missing.
pub fn no_files(name: &str) -> Result<Vec<u8>, String> {
    Err(format!("open {name}: no such file or directory"))
}

/// The enabled plugins, in kube's order.
#[derive(Clone, Debug, Default)]
pub struct Chain {
    plugins: Vec<Arc<dyn Plugin>>,
    /// The names of what runs, in order.
    names: Vec<&'static str>,
    /// `MutatingAdmissionWebhook` is on: the mutating webhooks run after the mutating
    /// plugins (kapi has none of those kube runs after it).
    pub mutating_webhooks: bool,
    /// `ValidatingAdmissionWebhook` is on: the validating webhooks run after the validating
    /// plugins, before the quota's charge (`ResourceQuota` follows it in kube's order).
    pub validating_webhooks: bool,
    /// `ValidatingAdmissionPolicy` is on: the policies run after the validating plugins,
    /// before the validating webhooks.
    pub validating_policies: bool,
    /// `MutatingAdmissionPolicy` is on and so is its feature gate (see [`Chain::gated`]): the
    /// policies run after the mutating plugins, before the mutating webhooks.
    pub mutating_policies: bool,
}

impl Chain {
    /// The chain the flags make (kube's defaults, with `enable` added and `disable` taken
    /// out, in kube's order), each plugin with its part of `--admission-control-config-file`
    /// (`configs`, by plugin name); kube's errors for names it does not know and names in
    /// both, and for a plugin's configuration it refuses. The files a configuration
    /// names (ImagePolicyWebhook's kubeconfig) are read with `read_file`.
    pub fn from_flags(enable: &[String], disable: &[String], configs: &BTreeMap<String, Vec<u8>>, read_file: &ReadFile) -> Result<Chain, String> {
        let mut errors = Vec::new();
        for (flag, names) in [("enable-admission-plugins", enable), ("disable-admission-plugins", disable)] {
            for name in names.iter().filter(|n| !ORDER.contains(&n.as_str())) {
                errors.push(format!("{flag} plugin {name:?} is unknown"));
            }
        }
        let mut both: Vec<&String> = enable.iter().filter(|n| disable.contains(n)).collect();
        both.sort();
        both.dedup();
        if !both.is_empty() {
            let names: Vec<&str> = both.iter().map(|n| n.as_str()).collect();
            errors.push(format!("[{}] in enable-admission-plugins and disable-admission-plugins overlapped", names.join(" ")));
        }
        if !errors.is_empty() {
            return Err(crate::authz::rbac::aggregate(&errors));
        }
        let mut chain = Chain::default();
        for name in enabled(enable, disable) {
            match (name, plugin(name, configs.get(name).map(Vec::as_slice), read_file)) {
                ("MutatingAdmissionWebhook", _) => chain.mutating_webhooks = true,
                ("ValidatingAdmissionWebhook", _) => chain.validating_webhooks = true,
                ("ValidatingAdmissionPolicy", _) => chain.validating_policies = true,
                // Runs only with its feature gate on.
                ("MutatingAdmissionPolicy", _) => {}
                // Does nothing without its feature gate, PodTopologyLabelsAdmission (alpha, off
                // in v1.33), which kapi does not have.
                ("PodTopologyLabels", _) => {}
                (_, Some(p)) => chain.plugins.push(p?),
                (_, None) => unreachable!("every plugin of ORDER is made above"),
            }
            chain.names.push(name);
        }
        Ok(chain)
    }

    /// The chain with kube's feature gates applied: `MutatingAdmissionPolicy` (off by
    /// default) lets its plugin, when on, run; `ServiceAccountNodeAudienceRestriction` (on by
    /// default) has NodeRestriction check the audiences of a node's tokens.
    pub fn gated(mut self, gates: &crate::features::FeatureGates) -> Chain {
        self.mutating_policies = gates.mutating_admission_policy && self.names.contains(&"MutatingAdmissionPolicy");
        let audiences = gates.service_account_node_audience_restriction;
        for p in self.plugins.iter_mut().filter(|p| p.name() == "NodeRestriction") {
            *p = Arc::new(super::node_restriction::NodeRestriction { audiences });
        }
        self
    }

    /// The names of the plugins that run, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.names.clone()
    }

    /// What the plugins need to read before admitting `request`.
    pub fn lookups(&self, request: &Pending) -> Vec<Lookup> {
        let mut out: Vec<Lookup> = Vec::new();
        for p in self.plugins.iter().filter(|p| p.handles(request.operation)) {
            for l in p.lookups(request) {
                if !out.contains(&l) {
                    out.push(l);
                }
            }
        }
        out
    }

    /// The first object a plugin must have the server create before `request` is admitted
    /// ([`Plugin::provision`]), given what the lookups found.
    pub fn provision(&self, request: &Pending, found: &super::Found) -> Option<super::Provision> {
        self.plugins.iter().filter(|p| p.handles(request.operation)).find_map(|p| p.provision(request, found))
    }

    /// What the plugins need to read besides before admitting `request` by `user`, given
    /// what was `found` so far ([`Plugin::lookups_after`]), without what was looked up already.
    pub fn lookups_after(&self, request: &Pending, user: &crate::auth::UserInfo, found: &[(Lookup, Option<std::sync::Arc<Value>>)]) -> Vec<Lookup> {
        let known = super::Found::of(found);
        let mut out: Vec<Lookup> = Vec::new();
        for p in self.plugins.iter().filter(|p| p.handles(request.operation)) {
            for l in p.lookups_after(request, user, &known) {
                if !out.contains(&l) && !found.iter().any(|(f, _)| *f == l) {
                    out.push(l);
                }
            }
        }
        out
    }

    /// The mutating plugins, in order; the first refusal, or the first authorization
    /// webhook's answer one needs (see [`Plugin::admit_asking`]), ends it.
    pub fn admit(&self, a: &Attributes, mut obj: Option<&mut Value>, rng: &mut Rng) -> Result<(), Halt> {
        for p in self.plugins.iter().filter(|p| p.handles(a.operation)) {
            p.admit_asking(a, obj.as_deref_mut(), rng)?;
        }
        Ok(())
    }

    /// The validating plugins, in order, on the final object, from the `passed`th of those that
    /// handle the operation on (those before it passed this object already), `passed` counting
    /// each that passes; the first refusal, or the first review one needs and `answers` lacks,
    /// ends it (see [`Plugin::validate_asking`]). Their warnings go to `warnings`.
    pub fn validate(&self, a: &Attributes, mut obj: Option<&mut Value>, passed: &mut usize, answers: &Answers, warnings: &mut Vec<String>) -> Result<(), Halt> {
        for p in self.plugins.iter().filter(|p| p.handles(a.operation)).skip(*passed) {
            p.validate_asking(a, obj.as_deref_mut(), answers, warnings)?;
            *passed += 1;
        }
        Ok(())
    }

    /// Whether the validating plugins may change an object of `info`'s resource they pass.
    pub fn validation_annotates(&self, info: &crate::catalog::ResourceInfo) -> bool {
        self.plugins.iter().any(|p| p.annotates(info))
    }

    /// What the final object is charged to, after validation (see [`Plugin::charge`]).
    pub fn charge(&self, a: &Attributes, obj: Option<&Value>, now: jiff::Timestamp) -> Result<Vec<super::Charge>, ApiError> {
        let mut charges = Vec::new();
        for p in self.plugins.iter().filter(|p| p.handles(a.operation)) {
            charges.extend(p.charge(a, obj, now)?);
        }
        Ok(charges)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(enable: &[&str], disable: &[&str]) -> Result<Vec<&'static str>, String> {
        let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Chain::from_flags(&owned(enable), &owned(disable), &BTreeMap::new(), &no_files).map(|c| c.names())
    }

    #[test]
    fn the_flags_change_kubes_defaults_in_kubes_order() {
        let defaults = names(&[], &[]).unwrap();
        assert_eq!(defaults, DEFAULT_ON);
        let gates = |on| crate::features::FeatureGates { mutating_admission_policy: on, ..Default::default() };
        let chain = |disable: &[String]| Chain::from_flags(&[], disable, &BTreeMap::new(), &no_files).unwrap();
        assert!(!chain(&[]).gated(&gates(false)).mutating_policies && chain(&[]).gated(&gates(true)).mutating_policies);
        assert!(!chain(&["MutatingAdmissionPolicy".into()]).gated(&gates(true)).mutating_policies);
        let changed = names(&["AlwaysPullImages"], &["ServiceAccount", "Priority", "LimitRanger"]).unwrap();
        assert_eq!(changed[..5], ["NamespaceLifecycle", "TaintNodesByCondition", "AlwaysPullImages", "PodSecurity", "DefaultTolerationSeconds"]);
        assert_eq!(names(&["Bogus"], &[]).unwrap_err(), "enable-admission-plugins plugin \"Bogus\" is unknown");
        assert_eq!(
            names(&["Priority", "ServiceAccount"], &["ServiceAccount", "Priority", "Nope"]).unwrap_err(),
            "[disable-admission-plugins plugin \"Nope\" is unknown, [Priority ServiceAccount] in enable-admission-plugins and disable-admission-plugins overlapped]"
        );
        let configs = [
            ("EventRateLimit", "apiVersion: eventratelimit.admission.k8s.io/v1alpha1\nkind: Configuration\nlimits: [{type: Server, qps: 1, burst: 1}]"),
            ("ImagePolicyWebhook", "imagePolicy: {kubeConfigFile: k}"),
        ];
        let configs = configs.iter().map(|(n, c)| (n.to_string(), c.as_bytes().to_vec())).collect();
        let kubeconfig = |_: &str| {
            Ok(b"clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c}}]\ncurrent-context: c".to_vec())
        };
        let every: Vec<String> = ORDER.iter().map(|n| n.to_string()).collect();
        assert_eq!(Chain::from_flags(&every, &[], &configs, &kubeconfig).unwrap().names(), ORDER);
        assert!(ORDER.iter().all(|n| ORDER.iter().filter(|m| m == &n).count() == 1));
        assert!(DEFAULT_ON.iter().all(|n| ORDER.contains(n)));
    }
}

//! The admission flags (`--enable-admission-plugins`, `--disable-admission-plugins`, the
//! deprecated `--admission-control`, `--admission-control-config-file`, and the feature gate
//! of the mutating admission policies, `--feature-gates`), checked and
//! combined as kube-apiserver's options do; the chain they make is the core's
//! (`kapi_core::admission::Chain`). The shell reads the configuration files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use kapi_core::admission::config::{Source, plugin_sources};
use kapi_core::admission::{Chain, ORDER, enabled};
use kapi_core::features::FeatureGates;

#[derive(Args, Debug, Clone)]
pub struct AdmissionArgs {
    /// Admission plugins to run besides kube's default ones (comma-separated; their order does
    /// not matter: plugins run in kube's order).
    #[arg(long, value_delimiter = ',')]
    enable_admission_plugins: Option<Vec<String>>,
    /// Default admission plugins not to run (comma-separated).
    #[arg(long, value_delimiter = ',')]
    disable_admission_plugins: Option<Vec<String>>,
    /// Deprecated: the admission plugins to run, and no others (comma-separated).
    #[arg(long, value_delimiter = ',')]
    admission_control: Option<Vec<String>>,
    /// An AdmissionConfiguration file: the plugins' configurations (PodSecurity's defaults
    /// and exemptions).
    #[arg(long)]
    admission_control_config_file: Option<PathBuf>,
    /// kube's feature gates kapi has (`Name=bool`, comma-separated): MutatingAdmissionPolicy
    /// (off by default) runs the mutating admission policies, whose API
    /// `--runtime-config=admissionregistration.k8s.io/v1alpha1=true` serves.
    #[arg(long)]
    feature_gates: Option<String>,
}

impl AdmissionArgs {
    /// The chain of admission plugins, or kube's error for the flags.
    pub fn chain(&self) -> anyhow::Result<Chain> {
        let (enable, disable) = match &self.admission_control {
            Some(_) if self.enable_admission_plugins.is_some() || self.disable_admission_plugins.is_some() => {
                anyhow::bail!("admission-control and enable-admission-plugins/disable-admission-plugins flags are mutually exclusive")
            }
            Some(only) => {
                tracing::warn!(
                    "Flag --admission-control has been deprecated, Use --enable-admission-plugins or --disable-admission-plugins instead. Will be removed in a future version."
                );
                if let Some(unknown) = only.iter().find(|n| !ORDER.contains(&n.as_str())) {
                    anyhow::bail!("admission-control plugin {unknown:?} is unknown");
                }
                let mut others: Vec<String> = ORDER.iter().filter(|n| !only.iter().any(|o| o == *n)).map(|n| n.to_string()).collect();
                others.sort();
                (only.clone(), others)
            }
            None => (self.enable_admission_plugins.clone().unwrap_or_default(), self.disable_admission_plugins.clone().unwrap_or_default()),
        };
        let configs = match &self.admission_control_config_file {
            Some(file) => plugin_configs(file, &enable, &disable)?,
            None => BTreeMap::new(),
        };
        let gates = FeatureGates::parse(self.feature_gates.as_deref().unwrap_or_default())
            .map_err(|e| anyhow::anyhow!("invalid argument {:?} for \"--feature-gates\" flag: {e}", self.feature_gates.as_deref().unwrap_or_default()))?;
        let chain = Chain::from_flags(&enable, &disable, &configs, &read_file).map_err(anyhow::Error::msg)?.gated(&gates);
        tracing::info!("Loaded {} admission controller(s) in the following order: {}.", chain.names().len(), chain.names().join(","));
        Ok(chain)
    }
}

/// A file a plugin's configuration names (ImagePolicyWebhook's kubeconfig), from the working
/// folder when relative, as kube reads it.
fn read_file(path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("open {path}: {e}"))
}

/// The configurations `file` gives the enabled plugins, read as kube reads them (a `path`
/// relative to the file's folder).
fn plugin_configs(file: &Path, enable: &[String], disable: &[String]) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    let data = std::fs::read(file).map_err(|e| {
        anyhow::anyhow!("failed to read plugin config: unable to read admission control configuration from {:?} [{e}]", file.display().to_string())
    })?;
    let sources = plugin_sources(&data).map_err(|e| anyhow::anyhow!("failed to read plugin config: {e}"))?;
    let on: Vec<&str> = enabled(enable, disable).collect();
    let mut configs = BTreeMap::new();
    for (name, source) in sources.into_iter().filter(|(name, _)| on.contains(&name.as_str())) {
        let bytes = match source {
            Source::Embedded(json) => json,
            Source::Path(path) => {
                let path = file.parent().filter(|d| !d.as_os_str().is_empty()).map_or_else(|| PathBuf::from(&path), |dir| dir.join(&path));
                std::fs::read(&path).map_err(|e| anyhow::anyhow!("Couldn't open admission plugin configuration {}: {e}", path.display()))?
            }
        };
        configs.insert(name, bytes);
    }
    Ok(configs)
}

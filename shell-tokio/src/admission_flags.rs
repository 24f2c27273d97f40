//! The admission flags (`--enable-admission-plugins`, `--disable-admission-plugins`, and the
//! deprecated `--admission-control`), checked and combined as kube-apiserver's options do; the
//! chain they make is the core's (`kapi_core::admission::Chain`).

use clap::Args;
use kapi_core::admission::{Chain, ORDER};

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
        let chain = Chain::from_flags(&enable, &disable).map_err(anyhow::Error::msg)?;
        tracing::info!("Loaded {} admission controller(s) in the following order: {}.", chain.names().len(), chain.names().join(","));
        Ok(chain)
    }
}

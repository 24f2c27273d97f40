//! kapi-bench: a load generator for any Kubernetes API server, given a kubeconfig, so kapi and
//! kube-apiserver are measured by the same tool; and the raw storage baselines.
//!
//! Every scenario prints a table (throughput, latency percentiles, errors by status code),
//! appends JSON lines to `--json`, samples the server's memory and CPU with `--server-pid`, and
//! draws the latency distributions with `--plot`. The objects it writes are also the inputs of
//! the criterion micro-benchmarks (`benches/hot_paths.rs`).

pub mod client;
pub mod kubeconfig;
pub mod objects;
pub mod plot;
pub mod report;
pub mod sampler;
pub mod scenarios;

use std::path::PathBuf;

use clap::Args;

use crate::client::Client;
use crate::kubeconfig::Target;
use crate::objects::Kind;

/// What the API scenarios write: which objects, where, how many, how many at once.
#[derive(Args, Clone)]
pub struct Api {
    /// The kubeconfig of the server under test (its current context).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    #[arg(long, default_value = "kapi-bench")]
    pub namespace: String,
    #[arg(long, value_enum, default_value = "pod")]
    pub kind: Kind,
    /// A configmap's payload in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Objects the scenario works on.
    #[arg(long, default_value_t = 1000)]
    pub count: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Operations (get, update) when not one per object.
    #[arg(long)]
    pub ops: Option<usize>,
}

impl Api {
    pub fn target(&self) -> anyhow::Result<Target> {
        Target::load(self.kubeconfig.as_deref().ok_or_else(|| anyhow::anyhow!("--kubeconfig is required"))?)
    }

    pub fn client(&self) -> anyhow::Result<Client> {
        Ok(Client::new(&self.target()?))
    }
}

//! The `kapi-bench` command: parses a scenario and its options, runs it, reports.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use kapi_bench::scenarios::raw;
use kapi_bench::{Api, plot, report, sampler, scenarios};

#[derive(Parser)]
#[command(name = "kapi-bench", about = "Load generator for Kubernetes API servers")]
struct Cli {
    /// Appends one JSON line per result row to this file.
    #[arg(long, global = true)]
    json: Option<PathBuf>,
    /// Draws the latency distributions into this SVG file.
    #[arg(long, global = true)]
    plot: Option<PathBuf>,
    /// Samples this process's RSS and CPU time (the server's) during the scenario.
    #[arg(long, global = true)]
    server_pid: Option<u32>,
    /// A name for the server under test, written into every JSON line (`label`), so runs
    /// against several servers can share one file.
    #[arg(long, global = true)]
    label: Option<String>,
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Subcommand)]
enum Scenario {
    /// Creates --count objects (named bench-000000 ...).
    Create(Api),
    /// GETs the objects `create` made.
    Get(Api),
    /// Read-modify-write of the objects: GET, change an annotation, PUT; conflicts counted.
    Update(Api),
    /// Deletes the objects `create` made.
    Delete(Api),
    /// LISTs the collection --repeat times, whole or in pages of --limit.
    List {
        #[command(flatten)]
        api: Api,
        #[arg(long, default_value_t = 0)]
        limit: usize,
        #[arg(long, default_value_t = 5)]
        repeat: usize,
        /// resourceVersion of the LIST (unset: a consistent read).
        #[arg(long)]
        resource_version: Option<String>,
    },
    /// --watchers watches of the collection, one writer creating --rate objects a second.
    WatchFanout {
        #[command(flatten)]
        api: Api,
        #[arg(long, default_value_t = 100)]
        watchers: usize,
        #[arg(long, default_value_t = 100.0)]
        rate: f64,
        /// Seconds of writing.
        #[arg(long, default_value_t = 10.0)]
        duration: f64,
        /// Watches that share one connection (HTTP/2 streams).
        #[arg(long, default_value_t = 100)]
        per_connection: usize,
    },
    /// Density-test churn: --pods pods, then creates, updates and deletes at --rate, with
    /// --watchers watching a share of the pods each, --informers watching all, and a LIST
    /// every --list-interval seconds.
    Mixed {
        #[command(flatten)]
        api: Api,
        #[arg(long, default_value_t = 1000)]
        pods: usize,
        #[arg(long, default_value_t = 100.0)]
        rate: f64,
        #[arg(long, default_value_t = 1000)]
        watchers: usize,
        #[arg(long, default_value_t = 3)]
        informers: usize,
        #[arg(long, default_value_t = 100)]
        per_connection: usize,
        #[arg(long, default_value_t = 5.0)]
        list_interval: f64,
        #[arg(long, default_value_t = 30.0)]
        duration: f64,
    },
    /// Creates in a namespace whose creates a validating webhook kapi-bench serves sees, and in
    /// one it does not, one of each at a time; what the call adds over the webhook's own time.
    Webhook(Api),
    /// Installs --count CRDs one at a time, each timed until established and served;
    /// discovery and OpenAPI read before and after.
    Crds(Api),
    /// Baseline: --count Txns creating the same keys and values straight in etcd.
    RawEtcd {
        #[command(flatten)]
        api: Api,
        #[arg(long, value_delimiter = ',', default_value = "http://127.0.0.1:2379")]
        endpoints: Vec<String>,
        #[command(flatten)]
        value: raw::Value,
    },
    /// Baseline: --count durable INSERTs of the same keys and values into a SQLite file.
    RawSqlite {
        #[command(flatten)]
        api: Api,
        /// The database file (made afresh, removed after); put it on kapi's data disk.
        #[arg(long)]
        db: PathBuf,
        #[command(flatten)]
        value: raw::Value,
    },
}

async fn run(scenario: &Scenario) -> anyhow::Result<Vec<report::Row>> {
    use scenarios::*;
    match scenario {
        Scenario::Create(api) => crud::create(api, api.client()?).await,
        Scenario::Get(api) => crud::get(api, api.client()?).await,
        Scenario::Update(api) => crud::update(api, api.client()?).await,
        Scenario::Delete(api) => crud::delete(api, api.client()?).await,
        Scenario::Crds(api) => crds::crds(api, api.client()?).await,
        Scenario::Webhook(api) => webhook::webhook(api, api.client()?).await,
        Scenario::List { api, limit, repeat, resource_version } => list::list(api, api.client()?, *limit, *repeat, resource_version.as_deref()).await,
        Scenario::WatchFanout { api, watchers, rate, duration, per_connection } => {
            watch::fanout(api, &api.target()?, *watchers, *rate, Duration::from_secs_f64(*duration), *per_connection).await
        }
        Scenario::Mixed { api, pods, rate, watchers, informers, per_connection, list_interval, duration } => {
            let m = mixed::Mixed {
                pods: *pods,
                rate: *rate,
                watchers: *watchers,
                informers: *informers,
                per_connection: *per_connection,
                list_interval: Duration::from_secs_f64(*list_interval),
                duration: Duration::from_secs_f64(*duration),
            };
            mixed::mixed(api, &api.target()?, &m).await
        }
        Scenario::RawEtcd { api, endpoints, value } => raw::etcd(api, endpoints, value.bytes(api)).await,
        Scenario::RawSqlite { api, db, value } => {
            let (api, db, value) = (api.clone(), db.clone(), value.bytes(api));
            tokio::task::spawn_blocking(move || raw::sqlite(&api, &db, value)).await?
        }
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    // The request scenarios run on one thread: their requests share one connection, and a pool
    // of threads wakes another for each frame that arrives (a third of the client's CPU, on the
    // cores the server under test shares). The watch scenarios, with thousands of streams on
    // many connections, keep a pool.
    let runtime = match cli.scenario {
        Scenario::Create(_)
        | Scenario::Get(_)
        | Scenario::Update(_)
        | Scenario::Delete(_)
        | Scenario::Crds(_)
        | Scenario::Webhook(_)
        | Scenario::List { .. }
        | Scenario::RawEtcd { .. } => tokio::runtime::Builder::new_current_thread().enable_all().build()?,
        Scenario::WatchFanout { .. } | Scenario::Mixed { .. } | Scenario::RawSqlite { .. } => tokio::runtime::Runtime::new()?,
    };
    runtime.block_on(async {
        let sampler = cli.server_pid.map(sampler::Sampler::start);
        let own = sampler::cpu_seconds(std::process::id());
        let mut rows = run(&cli.scenario).await?;
        if let (Some(s), Some(first)) = (sampler, rows.first_mut()) {
            first.extra.extend(s.finish().await);
        }
        // The load generator's own CPU: on a machine it shares with the server, what it leaves.
        if let (Some(before), Some(after), Some(first)) = (own, sampler::cpu_seconds(std::process::id()), rows.first_mut()) {
            first.extra.insert("client_cpu_seconds".into(), (((after - before) * 100.0).round() / 100.0).into());
        }
        if let Some(label) = &cli.label {
            for r in rows.iter_mut() {
                r.extra.insert("label".into(), label.clone().into());
            }
        }
        report::print(&rows);
        if let Some(path) = &cli.json {
            report::append_json(path, &rows)?;
        }
        if let Some(path) = &cli.plot {
            let title = rows.iter().map(|r| r.scenario.as_str()).collect::<std::collections::BTreeSet<_>>().into_iter().collect::<Vec<_>>().join(", ");
            std::fs::write(path, plot::svg(&format!("kapi-bench: {title}"), &rows))?;
        }
        anyhow::Ok(())
    })
}

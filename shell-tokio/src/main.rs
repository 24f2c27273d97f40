//! `kapi`: a Kubernetes API server. `kapi serve` with no flags serves HTTPS on
//! 127.0.0.1:6443 from an embedded SQLite store in `./kapi-data`, and writes an admin
//! kubeconfig there.

mod admission_flags;
mod audit_log;
mod auth_flags;
mod authz_flags;
mod caches;
mod catalog;
mod certs;
mod clock;
mod conn;
mod connections;
mod controllers;
mod http;
mod jwt_authenticators;
mod probe;
mod proxy;
mod serving;
mod store;
mod tls;
mod webhook;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, bail};
use arc_swap::ArcSwap;
use clap::{Args, Parser, Subcommand};
use kapi_core::auth::oidc::JwtAuthenticators;
use kapi_core::auth::{Authenticator, RequestHeader, TokenFile};
use kapi_core::bootstrap::{Bootstrap, BootstrapEffect};
use kapi_core::catalog::Catalog;
use kapi_core::controllers::{AuthenticationTrust, Controllers, Enabled};
use kapi_core::pipeline::{Served, Server};
use kapi_core::resources::services::ServiceRanges;
use kapi_core::resources::{RuntimeConfig, Settings, catalog};
use kapi_core::storage::compactor::Compactor;
use store::{EtcdConfig, Store};

#[derive(Parser)]
#[command(name = "kapi", version, about = "A Kubernetes API server")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the Kubernetes API.
    Serve(Box<ServeArgs>),
    /// Print the version of the Kubernetes API served.
    Version,
}

#[derive(Args)]
struct ServeArgs {
    /// Where the embedded store, the generated certificates and the admin kubeconfig live.
    #[arg(long, default_value = "./kapi-data")]
    data_dir: PathBuf,
    /// The port to serve HTTPS on.
    #[arg(long, default_value_t = 6443)]
    secure_port: u16,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind_address: IpAddr,
    /// The address advertised to the cluster (the `kubernetes` service's endpoints).
    #[arg(long)]
    advertise_address: Option<IpAddr>,
    /// Serving certificate (PEM); generated under --data-dir when not given.
    #[arg(long, requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// Serving key (PEM).
    #[arg(long, requires = "tls_cert_file")]
    tls_private_key_file: Option<PathBuf>,
    /// A certificate and key for the names a client asks for (SNI): `cert,key` (its names
    /// from the certificate) or `cert,key:name1,*.name2`; may be given more than once. Every
    /// serving certificate is read again when its files change.
    #[arg(long, value_parser = serving::CertKeyFiles::parse_sni)]
    tls_sni_cert_key: Vec<serving::CertKeyFiles>,
    /// The lowest TLS version served (VersionTLS12 or VersionTLS13; VersionTLS10 and
    /// VersionTLS11 mean TLS 1.2, the lowest kapi has).
    #[arg(long, default_value = "", value_parser = tls::tls13_only, action = clap::ArgAction::Set)]
    tls_min_version: bool,
    /// The TLS 1.2 cipher suites served, by their Go names (all of kapi's by default).
    #[arg(long, default_value = "", value_parser = tls::cipher_suites)]
    tls_cipher_suites: tls::CipherSuites,
    /// CA bundle that signs client certificates (CN = user, O = groups); the generated CA when not given.
    #[arg(long)]
    client_ca_file: Option<PathBuf>,
    /// CA bundle that signs the client certificates of front proxies (kube's aggregator, or a
    /// kapi in front of this one), whose requests name their user in headers; the generated
    /// front-proxy CA when not given.
    #[arg(long)]
    requestheader_client_ca_file: Option<PathBuf>,
    /// Common names a front proxy's certificate may have (empty: any the CA signed).
    #[arg(long, default_value = kapi_core::auth::FRONT_PROXY_CLIENT_NAME)]
    requestheader_allowed_names: String,
    /// Request headers to inspect for usernames.
    #[arg(long, default_value = kapi_core::auth::STANDARD_USERNAME)]
    requestheader_username_headers: String,
    /// Request headers to inspect for UIDs.
    #[arg(long, default_value = kapi_core::auth::STANDARD_UID)]
    requestheader_uid_headers: String,
    /// Request headers to inspect for groups.
    #[arg(long, default_value = kapi_core::auth::STANDARD_GROUP)]
    requestheader_group_headers: String,
    /// Request header prefixes to inspect for extra user information.
    #[arg(long, default_value = kapi_core::auth::STANDARD_EXTRA_PREFIX)]
    requestheader_extra_headers_prefix: String,
    /// Client certificate this server presents to extension API servers; the generated
    /// `front-proxy-client` when not given.
    #[arg(long, requires = "proxy_client_key_file")]
    proxy_client_cert_file: Option<PathBuf>,
    /// Key of --proxy-client-cert-file.
    #[arg(long, requires = "proxy_client_cert_file")]
    proxy_client_key_file: Option<PathBuf>,
    /// Static bearer tokens: `token,user,uid,"group1,group2"` per line.
    #[arg(long)]
    token_auth_file: Option<PathBuf>,
    /// The range cluster IPs are allocated from.
    #[arg(long, default_value = "10.0.0.0/24")]
    service_cluster_ip_range: String,
    /// The range node ports are allocated from.
    #[arg(long, default_value = "30000-32767")]
    service_node_port_range: String,
    /// etcd servers to store in (comma-separated URLs, e.g. http://127.0.0.1:2379); without
    /// them kapi stores in SQLite under --data-dir.
    #[arg(long, value_delimiter = ',')]
    etcd_servers: Vec<String>,
    /// The prefix of every storage key.
    #[arg(long, default_value = "/registry")]
    etcd_prefix: String,
    /// CA bundle that signs the etcd servers' certificates.
    #[arg(long)]
    etcd_cafile: Option<PathBuf>,
    /// Client certificate (PEM) presented to etcd.
    #[arg(long, requires = "etcd_keyfile")]
    etcd_certfile: Option<PathBuf>,
    /// Key of --etcd-certfile.
    #[arg(long, requires = "etcd_certfile")]
    etcd_keyfile: Option<PathBuf>,
    /// How often the storage history is compacted (e.g. 5m); 0 turns compaction off.
    #[arg(long, default_value = "5m")]
    etcd_compaction_interval: String,
    /// Group versions and resources to serve or not, as kube-apiserver takes them:
    /// `api/all|ga|beta|alpha=true|false`, `<group>/<version>=true|false`,
    /// `<group>/<version>/<resource>=true|false`, comma-separated. Off by default and served when
    /// asked: policy/v1beta1, batch/v1beta1 and discovery.k8s.io/v1beta1 (as kube v1.24).
    #[arg(long, default_value = "")]
    runtime_config: String,
    /// How long events are kept (e.g. 1h, 30m).
    #[arg(long, default_value = "1h")]
    event_ttl: String,
    /// The largest request body accepted.
    #[arg(long, default_value_t = kapi_core::pipeline::DEFAULT_MAX_BODY_BYTES)]
    max_request_body_bytes: usize,
    /// The most read-only requests (get, list) in flight at once; beyond it, 429 (0: no limit).
    #[arg(long, default_value_t = kapi_core::pipeline::DEFAULT_MAX_READONLY_IN_FLIGHT)]
    max_requests_inflight: usize,
    /// The most mutating requests in flight at once; beyond it, 429 (0: no limit).
    #[arg(long, default_value_t = kapi_core::pipeline::DEFAULT_MAX_MUTATING_IN_FLIGHT)]
    max_mutating_requests_inflight: usize,
    #[command(flatten)]
    authz: authz_flags::AuthzArgs,
    #[command(flatten)]
    admission: admission_flags::AdmissionArgs,
    #[command(flatten)]
    audit: audit_log::AuditArgs,
    #[command(flatten)]
    auth: auth_flags::AuthArgs,
    /// The issuer written in service account tokens (the first) and accepted in them (all).
    #[arg(long, default_value = "https://kubernetes.default.svc.cluster.local")]
    service_account_issuer: Vec<String>,
    /// The PEM private key (RSA or P-256 EC) service account tokens are signed with;
    /// `<data-dir>/pki/sa.key` (made on first start, P-256) when not given.
    #[arg(long)]
    service_account_signing_key_file: Option<PathBuf>,
    /// PEM files of the keys service account tokens are verified with (public keys, or
    /// private keys whose public halves count); the signing key's when not given.
    #[arg(long)]
    service_account_key_file: Vec<PathBuf>,
    /// The audiences a token must be meant for (comma-separated); the issuers when not given.
    #[arg(long, value_delimiter = ',')]
    api_audiences: Vec<String>,
    /// The longest a requested token may last (`0`: no limit); longer requests are shortened.
    #[arg(long, default_value = "0")]
    service_account_max_token_expiration: String,
    /// Whether the tokens kubelets ask for (3607 s, bound to a pod) last a year, as kube does
    /// for a safe transition to bound tokens.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    service_account_extend_token_expiration: bool,
    /// Where the OIDC discovery document says the keys are; the issuer's `/openid/v1/jwks`
    /// when not given (then the issuer must be an https URL for discovery to be served).
    #[arg(long)]
    service_account_jwks_uri: Option<String>,
    /// Whether bootstrap tokens (Secrets of type bootstrap.kubernetes.io/token in
    /// kube-system) are bearer credentials, as kubeadm's `kubeadm join` uses them.
    #[arg(long)]
    enable_bootstrap_token_auth: bool,
    /// Built-in controllers to run: `*` for all, `none`, or a list of serviceaccount,
    /// serviceaccount-token, root-ca-cert-publisher, namespace, clusterrole-aggregation,
    /// resourcequota, validatingadmissionpolicy-status-controller. Turn them off when a
    /// kube-controller-manager runs.
    #[arg(long, default_value = "*", value_parser = Enabled::parse)]
    controllers: Enabled,
    /// The CA bundle published in every namespace as `kube-root-ca.crt`; the generated CA when not given.
    #[arg(long)]
    root_ca_file: Option<PathBuf>,
    /// How long a TLS handshake and a request's head may take (kube-apiserver: 32s, not a flag).
    #[arg(long, default_value = "32s", hide = true)]
    read_header_timeout: String,
    /// How long a connection may stay open with no request (kube-apiserver: 90s, not a flag).
    #[arg(long, default_value = "90s", hide = true)]
    idle_timeout: String,
    /// How long a watch may leave frames unread before it is closed as slow.
    #[arg(long, default_value = "30s", hide = true)]
    watch_stall_timeout: String,
}

/// A comma-separated list flag as pflag reads one (`""`: empty); an empty entry is kube's error.
fn list_flag(flag: &str, value: &str) -> anyhow::Result<Vec<String>> {
    if value.is_empty() {
        return Ok(Vec::new());
    }
    let values: Vec<String> = value.split(',').map(|v| v.trim().to_string()).collect();
    if values.iter().any(String::is_empty) {
        bail!("empty value in {flag:?}");
    }
    Ok(values)
}

/// The configuration of service account tokens the flags give, the signing key made on
/// first start when none is given.
fn service_account_tokens(args: &ServeArgs) -> anyhow::Result<kapi_core::serviceaccount::TokenConfig> {
    use kapi_core::serviceaccount::keys::{PublicKey, SigningKey};
    let signing_pem = match &args.service_account_signing_key_file {
        Some(f) => std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
        None => certs::service_account_key(&args.data_dir.join("pki"))?,
    };
    let signing_key = SigningKey::from_pem(&signing_pem).map_err(|e| anyhow::anyhow!("--service-account-signing-key-file: {e}"))?;
    let mut public_keys = Vec::new();
    for f in &args.service_account_key_file {
        let pem = std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        public_keys.extend(PublicKey::all_from_pem(&pem).map_err(|e| anyhow::anyhow!("--service-account-key-file {}: {e}", f.display()))?);
    }
    if public_keys.is_empty() {
        public_keys.push(signing_key.public());
    }
    let audiences = if args.api_audiences.is_empty() { args.service_account_issuer.clone() } else { args.api_audiences.clone() };
    let max = parse_duration(&args.service_account_max_token_expiration)?;
    Ok(kapi_core::serviceaccount::TokenConfig {
        issuers: args.service_account_issuer.clone(),
        audiences,
        signing_key,
        public_keys,
        max_expiration: (max > 0).then_some(max),
        extend_expiration: args.service_account_extend_token_expiration,
        jwks_uri: args.service_account_jwks_uri.clone(),
    })
}

/// A Go-style duration (`1h`, `30m`, `1h30m`, `90s`) in seconds.
fn parse_duration(s: &str) -> anyhow::Result<i64> {
    // As Go's, "0" needs no unit.
    if s == "0" {
        return Ok(0);
    }
    let mut total = 0i64;
    let mut num = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let n: i64 = num.parse().with_context(|| format!("invalid duration {s:?}"))?;
        num.clear();
        total += n * match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => bail!("invalid duration {s:?}"),
        };
    }
    if !num.is_empty() {
        bail!("invalid duration {s:?}: missing unit");
    }
    Ok(total)
}

/// jemalloc rather than glibc's malloc: requests allocate many small JSON trees on many
/// threads, and glibc's arenas spent a quarter of a create's CPU time in malloc and free
/// (creates of 50,000 pods: 1,743/s with glibc, 2,415/s with jemalloc). mimalloc was as fast
/// but held 535 MiB after them where jemalloc holds 437 MiB (glibc: 396 MiB).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            println!("{}", serde_json::to_string_pretty(&kapi_core::pipeline::version())?);
            Ok(())
        }
        Command::Serve(args) => tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(serve(*args)),
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into())).init();
    conn::raise_open_files_limit();
    let (network, prefix) = ServiceRanges::parse_cidr(&args.service_cluster_ip_range).map_err(anyhow::Error::msg)?;
    let (lo, hi) = args.service_node_port_range.split_once('-').context("--service-node-port-range must be like 30000-32767")?;
    let ranges = ServiceRanges { network, prefix, node_ports: (lo.trim().parse()?, hi.trim().parse()?) };
    let runtime_config =
        RuntimeConfig::parse(&args.runtime_config, &kapi_core::resources::registered_group_versions()).map_err(|e| anyhow::anyhow!("--runtime-config: {e}"))?;
    let settings = Settings { event_ttl_seconds: parse_duration(&args.event_ttl)?, service_ranges: ranges, runtime_config };

    let compaction_interval = parse_duration(&args.etcd_compaction_interval)?;
    private_data_dir(&args.data_dir)?;
    let (store, store_name) = if args.etcd_servers.is_empty() {
        let sqlite = store::Sqlite::open(&args.data_dir.join("kapi.db"))?;
        // Damage found by the check begun at open ends kapi, as damage found by the open does;
        // nothing was written meanwhile (the store's writes wait for the check).
        let integrity = sqlite.integrity();
        tokio::spawn(async move {
            if let Err(damaged) = integrity.await {
                eprintln!("Error: {damaged:#}");
                std::process::exit(1);
            }
        });
        (Store::Sqlite(sqlite), format!("SQLite store in {}", args.data_dir.display()))
    } else {
        let config = EtcdConfig {
            servers: args.etcd_servers.clone(),
            ca_file: args.etcd_cafile.clone(),
            cert_file: args.etcd_certfile.clone(),
            key_file: args.etcd_keyfile.clone(),
            prefix: args.etcd_prefix.clone(),
        };
        let etcd = store::Etcd::connect(&config).await?;
        loop {
            match etcd.check_version().await {
                Ok(v) if etcd.ordered_progress() => break tracing::info!("etcd {v}"),
                Ok(v) => break tracing::warn!("etcd {v} answers progress requests out of order: consistent LISTs read etcd (upgrade to 3.4.31+ or 3.5.13+)"),
                Err(e) => {
                    tracing::warn!("waiting for etcd at {}: {e}", args.etcd_servers.join(","));
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        }
        (Store::Etcd(etcd), format!("etcd at {}", args.etcd_servers.join(",")))
    };

    let host = if args.bind_address.is_unspecified() { IpAddr::V4(Ipv4Addr::LOCALHOST) } else { args.bind_address };
    let advertise = args.advertise_address.unwrap_or(host);
    let service_ip = ranges.first_ip().to_string();
    let mut sans: Vec<String> =
        ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "127.0.0.1", "::1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    for extra in [service_ip.clone(), host.to_string(), advertise.to_string()] {
        if !sans.contains(&extra) {
            sans.push(extra);
        }
    }
    let pki = certs::ensure(&args.data_dir.join("pki"), &sans)?;
    let serving_files = match (&args.tls_cert_file, &args.tls_private_key_file) {
        (Some(c), Some(k)) => serving::CertKeyFiles { cert: c.clone(), key: k.clone(), names: Vec::new() },
        _ => serving::CertKeyFiles { cert: pki.serving_cert_file.clone(), key: pki.serving_key_file.clone(), names: Vec::new() },
    };
    let client_ca = match &args.client_ca_file {
        Some(f) => std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
        None => pki.ca_cert.clone(),
    };
    let request_header_ca = match &args.requestheader_client_ca_file {
        Some(f) => std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
        None => pki.front_proxy_ca_cert.clone(),
    };
    let request_header = RequestHeader {
        allowed_names: list_flag("requestheader-allowed-names", &args.requestheader_allowed_names)?,
        username_headers: list_flag("requestheader-username-headers", &args.requestheader_username_headers)?,
        uid_headers: list_flag("requestheader-uid-headers", &args.requestheader_uid_headers)?,
        group_headers: list_flag("requestheader-group-headers", &args.requestheader_group_headers)?,
        extra_prefixes: list_flag("requestheader-extra-headers-prefix", &args.requestheader_extra_headers_prefix)?,
    };
    if !request_header.uid_headers.is_empty() && !request_header.uid_headers.iter().any(|h| h.eq_ignore_ascii_case(kapi_core::auth::STANDARD_UID)) {
        bail!("--requestheader-uid-headers is set without specifying the standard X-Remote-Uid header - API aggregation will not work");
    }
    let tls_options = tls::TlsOptions { tls13_only: args.tls_min_version, cipher_suites: args.tls_cipher_suites.clone() };
    let serving = serving::ServingCerts::load(serving_files, args.tls_sni_cert_key.clone(), Arc::new(tls::server_provider(&tls_options)))?;
    tokio::spawn(serving.clone().watch());
    let tls = tokio_rustls::TlsAcceptor::from(Arc::new(tls::server_config(serving, &client_ca, Some(&request_header_ca), &tls_options)?));
    let client_cas = Arc::new(tls::ClientCas::new(&client_ca, Some(&request_header_ca))?);
    let proxy_client = match (&args.proxy_client_cert_file, &args.proxy_client_key_file) {
        (Some(c), Some(k)) => proxy::ProxyClient::new(&std::fs::read_to_string(c)?, &std::fs::read_to_string(k)?)?,
        _ => proxy::ProxyClient::new(&pki.front_proxy_client_cert, &pki.front_proxy_client_key)?,
    };
    let url_host = match host {
        IpAddr::V6(v6) => format!("[{v6}]"),
        v4 => v4.to_string(),
    };
    let server_url = format!("https://{url_host}:{}", args.secure_port);
    let kubeconfig_path = args.data_dir.join("admin.kubeconfig");
    certs::write_kubeconfig(&kubeconfig_path, &certs::kubeconfig(&server_url, &pki))?;

    let tokens = match &args.token_auth_file {
        Some(f) => Some(TokenFile::parse(&std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let root_ca = match &args.root_ca_file {
        Some(f) => std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
        None => pki.ca_cert.clone(),
    };
    let loopback = format!("{:016x}{:016x}", clock::seed(), clock::seed());
    let trust = AuthenticationTrust { client_ca: client_ca.clone(), request_header: Some((request_header_ca.clone(), request_header.clone())) };
    let authentication = args.auth.authentication(args.authz.always_allows(), &args.service_account_issuer)?;
    let service_accounts = Some(Arc::new(service_account_tokens(&args)?));
    let webhooks = webhook::WebhookClient::default();
    let jwt = Arc::new(JwtAuthenticators::new(jwt_authenticators::start(&authentication.jwt, &webhooks)));
    if let Some((file, data, config)) = authentication.config {
        let issuers = args.service_account_issuer.clone();
        tokio::spawn(jwt_authenticators::reload(jwt.clone(), file, data, config, issuers, webhooks.clone()));
    }
    let authenticator = Authenticator {
        tokens,
        loopback: Some(loopback.clone()),
        request_header: Some(request_header),
        anonymous: authentication.anonymous,
        service_accounts,
        bootstrap_tokens: args.enable_bootstrap_token_auth,
        jwt,
        webhook: args.auth.token_webhook()?.map(Arc::new),
    };
    let authorization = args.authz.authorization()?;
    let served = Served::new(catalog(&settings));
    let mut server = Server::new(authenticator, authorization.authorizer, &args.etcd_prefix, &format!("{advertise}:{}", args.secure_port));
    server.max_body_bytes = args.max_request_body_bytes;
    server.admission = Arc::new(args.admission.chain()?);
    let (audit_policy, audit_log) = args.audit.open()?;
    server.audit = audit_policy;
    server.in_flight = kapi_core::pipeline::InFlight::new(args.max_requests_inflight, args.max_mutating_requests_inflight);
    server.consistent_list_from_cache = store.ordered_progress();
    let server = Arc::new(server);
    if let Some((file, data, config)) = authorization.config {
        tokio::spawn(authz_flags::reload(server.clone(), file, data, config));
    }
    let resources: Vec<_> = served.catalog.resources().filter(|r| r.info.stored()).map(|r| (r.clone(), format!("{}/", server.storage_root(r)))).collect();
    let stall = std::time::Duration::from_secs(parse_duration(&args.watch_stall_timeout)?.max(1) as u64);
    let caches = caches::Caches::start(resources.into_iter(), store.clone(), stall, webhooks.clone());
    let state = Arc::new(http::State {
        server: server.clone(),
        served: ArcSwap::new(served.clone()),
        store: store.clone(),
        caches,
        bootstrapped: AtomicBool::new(false),
        shutting_down: AtomicBool::new(false),
        proxy: proxy_client,
        webhooks,
        audit_log,
    });

    let addr = SocketAddr::new(args.bind_address, args.secure_port);
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("listening on {addr}"))?;
    let limits = conn::Limits {
        header: std::time::Duration::from_secs(parse_duration(&args.read_header_timeout)?.max(1) as u64),
        idle: std::time::Duration::from_secs(parse_duration(&args.idle_timeout)?.max(1) as u64),
    };
    let serving = tokio::spawn(http::serve(listener, tls, client_cas, state.clone(), limits));

    // Until the store answers, /readyz says so and bootstrap tries again.
    while let Err(e) = bootstrap(&server, &served.catalog, &store, &advertise.to_string(), args.secure_port, &service_ip).await {
        tracing::warn!("{e:#}; trying again");
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    // kube-apiserver's system namespaces and kubernetes service controllers: what bootstrap
    // made is made again, once a minute, if it was deleted.
    let (again, state_again, address) = (server.clone(), state.clone(), advertise.to_string());
    let (port, ip) = (args.secure_port, service_ip.clone());
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(60));
        tick.tick().await;
        loop {
            tick.tick().await;
            let served = state_again.served.load_full();
            if let Err(e) = bootstrap(&again, &served.catalog, &state_again.store, &address, port, &ip).await {
                tracing::warn!("{e:#}");
            }
        }
    });
    tokio::spawn(expire_leases(store.clone()));
    if compaction_interval > 0 {
        tokio::spawn(compact(store.clone(), jiff::SignedDuration::from_secs(compaction_interval)));
    }
    // The CRD controllers run whatever --controllers says; the others as it says.
    let mut c = Controllers::new(args.controllers.clone(), &served.catalog, &loopback, &root_ca, clock::now());
    c.publish_authentication_trust(trust, clock::now());
    c.sign_legacy_tokens(server.authenticator.service_accounts.as_deref(), clock::now());
    let (discovered, discoveries) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(controllers::run(state.clone(), c, discovered));
    tokio::spawn(catalog::run(state.clone(), Catalog::clone(&served.catalog), discoveries));
    // Ready once the authorizers read the bootstrap RBAC policy just written (the catalog task
    // takes it in from the caches), so that no request after /readyz says ok meets an older one.
    if server.authorizer.load().uses_rbac() {
        let policy = kapi_core::authz::bootstrap::policy();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        while !kapi_core::authz::bootstrap::in_effect(&state.served.load().authz.rbac, &policy) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
    state.bootstrapped.store(true, Ordering::Relaxed);

    println!("kapi is serving the Kubernetes API on {server_url} ({store_name})");
    println!("Use it with kubectl:\n  export KUBECONFIG={}\n  kubectl get namespaces", kubeconfig_path.display());

    tokio::select! {
        r = serving => r?,
        _ = shutdown_signal() => {
            state.shutting_down.store(true, Ordering::Relaxed);
            tracing::info!("shutting down");
        }
    }
    Ok(())
}

/// Makes `dir` (the store, keys and kubeconfig: every Secret of the cluster) reachable by this
/// user only: the folder 0700, what is in it 0600 (folders 0700), and whatever kapi creates
/// later too (umask 077: SQLite's WAL and shared-memory files are made after this).
fn private_data_dir(dir: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    // SAFETY: umask only sets the process's file creation mask.
    unsafe { libc::umask(0o077) };
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).with_context(|| format!("securing {}", d.display()))?;
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o600))
                    .with_context(|| format!("securing {}", entry.path().display()))?;
            }
        }
    }
    Ok(())
}

async fn bootstrap(server: &Arc<Server>, catalog: &Catalog, store: &Store, address: &str, port: u16, service_ip: &str) -> anyhow::Result<()> {
    let mut b = Bootstrap::new(server.clone(), catalog, address, port, service_ip, clock::seed());
    loop {
        match b.poll(clock::now()) {
            Some(BootstrapEffect::Kv(req)) => {
                let r = store.call(req).await;
                b.handle(clock::now(), r);
            }
            Some(BootstrapEffect::Done(r)) => return r.map_err(|e| anyhow::anyhow!("bootstrap: {}", e.message)),
            None => return Ok(()),
        }
    }
}

/// Deletes objects whose lease ran out (events after `--event-ttl`).
async fn expire_leases(store: Store) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        tick.tick().await;
        if let Err(e) = store.expire_leases(clock::now()).await {
            tracing::warn!("expiring leases: {e}");
        }
    }
}

/// Runs the storage compactor (`--etcd-compaction-interval`).
async fn compact(store: Store, interval: jiff::SignedDuration) {
    let mut compactor = Compactor::new(clock::now(), interval);
    loop {
        while let Some(req) = compactor.poll(clock::now()) {
            let result = store.call(req).await;
            if let Err(e) = &result {
                tracing::warn!("compacting the store: {e}");
            }
            compactor.handle(clock::now(), result);
        }
        match compactor.poll_timeout() {
            Some(t) => tokio::time::sleep_until(clock::instant_of(t)).await,
            None => return,
        }
    }
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("signal handlers install");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

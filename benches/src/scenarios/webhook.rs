//! What calling one validating admission webhook adds to a create. kapi-bench serves the
//! webhook itself: HTTPS on loopback (HTTP/2 or HTTP/1.1 by ALPN) with a certificate made for
//! the run, on a thread and runtime of its own, allowing every review and timing its own
//! handling of each (from the request's head to the answer's body, the review read and written).
//! A ValidatingWebhookConfiguration sends it every create in one namespace (`<namespace>-hooked`)
//! and none in `<namespace>`; each of the --count steps creates one object in each, so both
//! are measured under the same conditions.
//!
//! Rows: `create/unhooked`, `create/hooked` and `webhook/own`; the hooked row's `added_p50_ms`
//! is its p50 less the unhooked p50 and the webhook's own p50: what the server spends on the
//! call (matching, the review, the connection, reading the answer).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use base64::Engine;
use bytes::Bytes;
use http::Method;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};

use super::{crud, name, pool, run_prefix};
use crate::Api;
use crate::client::Client;
use crate::report::{Recorder, Row};

const CONFIGURATIONS: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";

/// The webhook kapi-bench serves: where it listens, the CA bundle that verifies it, and the
/// reviews it answered with its own time for each.
struct Webhook {
    port: u16,
    ca_pem: String,
    own: Arc<Mutex<Recorder>>,
}

pub async fn webhook(api: &Api, client: Client) -> anyhow::Result<Vec<Row>> {
    let hooked = format!("{}-hooked", api.namespace);
    crud::namespace(&client, &api.namespace).await?;
    crud::namespace(&client, &hooked).await?;
    let hook = serve()?;
    let configuration = install(&client, &hook, &hooked).await?;
    let prefix = run_prefix("hook");
    // Until a create in the namespace reaches the webhook, the configuration is not in force.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut probe = 0;
    while hook.own.lock().expect("the webhook does not panic").latencies.is_empty() {
        if Instant::now() > deadline {
            bail!("the webhook was not called within 30 s of its configuration");
        }
        client.call(Method::POST, &api.kind.collection(&hooked), Some(api.kind.body(&name(&format!("{prefix}-probe"), probe), api.size))).await;
        probe += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    *hook.own.lock().expect("the webhook does not panic") = Recorder::default();

    let unhooked_rec = Arc::new(Mutex::new(Recorder::default()));
    let (kind, size) = (api.kind, api.size);
    let paths = [api.kind.collection(&api.namespace), api.kind.collection(&hooked)];
    let (seen, creator) = (unhooked_rec.clone(), client.clone());
    let (hooked_rec, elapsed) = pool(api.concurrency, api.count, move |i| {
        let (client, paths, seen, prefix) = (creator.clone(), paths.clone(), seen.clone(), prefix.clone());
        async move {
            let (outcome, _, d) = client.call(Method::POST, &paths[0], Some(kind.body(&name(&prefix, i), size))).await;
            seen.lock().expect("workers do not panic").record(outcome, d);
            let (outcome, _, d) = client.call(Method::POST, &paths[1], Some(kind.body(&name(&prefix, i), size))).await;
            (outcome, d)
        }
    })
    .await;
    let own = hook.own.lock().expect("the webhook does not panic").clone();
    let unhooked = Row::new("webhook", "create/unhooked", &unhooked_rec.lock().expect("workers do not panic"), elapsed);
    let own_row = Row::new("webhook", "webhook/own", &own, elapsed);
    let hooked_row = Row::new("webhook", "create/hooked", &hooked_rec, elapsed);
    let added = ((hooked_row.p50_ms - unhooked.p50_ms - own_row.p50_ms) * 1000.0).round() / 1000.0;
    let hooked_row = hooked_row.with("added_p50_ms", added).with("kind", format!("{kind:?}").to_lowercase());
    let (outcome, answer, _) = client.call(Method::DELETE, &format!("{CONFIGURATIONS}/{configuration}"), None).await;
    if outcome != Some(200) {
        bail!("DELETE of the webhook configuration: {outcome:?} {}", String::from_utf8_lossy(&answer));
    }
    Ok(vec![unhooked, hooked_row, own_row])
}

/// Creates the configuration sending creates in `namespace` to `hook`; its name.
async fn install(client: &Client, hook: &Webhook, namespace: &str) -> anyhow::Result<String> {
    let name = format!("{}.kapi-bench.dev", run_prefix("hook"));
    let configuration = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "allow.kapi-bench.dev",
            "clientConfig": {
                "url": format!("https://127.0.0.1:{}/validate", hook.port),
                "caBundle": base64::engine::general_purpose::STANDARD.encode(&hook.ca_pem),
            },
            "rules": [{"operations": ["CREATE"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 10,
        }],
    });
    let (outcome, answer, _) = client.call(Method::POST, CONFIGURATIONS, Some(serde_json::to_vec(&configuration)?.into())).await;
    if outcome != Some(201) {
        bail!("POST {CONFIGURATIONS}: {outcome:?} {}", String::from_utf8_lossy(&answer));
    }
    Ok(name)
}

/// Starts the webhook on a thread of its own (so it does not share the load generator's
/// runtime), on a free loopback port.
fn serve() -> anyhow::Result<Webhook> {
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).context("the webhook's certificate")?;
    let ca_pem = made.cert.pem();
    let key = rustls_pki_types::PrivateKeyDer::Pkcs8(made.signing_key.serialize_der().into());
    let mut tls = rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(vec![made.cert.der().clone()], key)?;
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let port = listener.local_addr()?.port();
    let own = Arc::new(Mutex::new(Recorder::default()));
    let recorder = own.clone();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    std::thread::spawn(move || {
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("a listener in a runtime");
            while let Ok((tcp, _)) = listener.accept().await {
                let _ = tcp.set_nodelay(true);
                let (acceptor, recorder) = (acceptor.clone(), recorder.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    let service = hyper::service::service_fn(move |req| answer(req, recorder.clone()));
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(tls), service).await;
                });
            }
        })
    });
    Ok(Webhook { port, ca_pem, own })
}

/// Allows the review in `req`, recording how long reading and answering it took.
async fn answer(req: http::Request<Incoming>, own: Arc<Mutex<Recorder>>) -> Result<http::Response<Full<Bytes>>, hyper::Error> {
    let start = Instant::now();
    let body = req.into_body().collect().await?.to_bytes();
    let review: Value = serde_json::from_slice(&body).unwrap_or_default();
    let answer = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": true},
    });
    let response = http::Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(&answer).expect("JSON trees serialize"))))
        .expect("a static response is well formed");
    own.lock().expect("the webhook does not panic").record(Some(200), start.elapsed());
    Ok(response)
}

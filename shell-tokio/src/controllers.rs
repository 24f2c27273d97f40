//! Runs the built-in controllers' machine. Its requests are served in process by the same
//! request machines as the network's (no socket), and each answer's status, body chunks and
//! end are fed back as they come; its checks of extension servers go out as proxied requests. Each time round, a new catalog served is handed to them.

use std::sync::Arc;

use http_body_util::BodyExt;
use kapi_core::aggregator::ProxyRequest;
use kapi_core::controllers::{ControllerEffect, ControllerEvent, Controllers, RequestId};
use kapi_core::pipeline::Request;
use tokio::sync::mpsc;

use crate::clock::{instant_of, now};
use crate::http::{State, call};

/// What an extension server serves (group, version, resources), for the catalog task.
pub type Learned = (String, String, kapi_core::aggregator::Discovery);

pub async fn run(state: Arc<State>, mut controllers: Controllers, discovered: mpsc::UnboundedSender<Learned>) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    // Which catalog they were handed, without keeping it (a replaced catalog's caches stop
    // once nothing holds it).
    let mut served = Arc::downgrade(&state.served.load_full());
    loop {
        let now_served = state.served.load_full();
        if !std::ptr::eq(served.as_ptr(), Arc::as_ptr(&now_served)) {
            controllers.catalog_changed(&now_served.catalog);
            served = Arc::downgrade(&now_served);
        }
        drop(now_served);
        while let Some(effect) = controllers.poll(now()) {
            match effect {
                ControllerEffect::Request { id, request } => {
                    tokio::spawn(answer(state.clone(), id, request, tx.clone()));
                }
                ControllerEffect::Probe { id, request } => {
                    tokio::spawn(probe(state.clone(), id, *request, tx.clone()));
                }
                ControllerEffect::Discovered { group, version, discovery } => {
                    let _ = discovered.send((group, version, discovery));
                }
            }
        }
        let wake = controllers.poll_timeout();
        tokio::select! {
            Some(event) = rx.recv() => controllers.handle(now(), event),
            _ = tokio::time::sleep_until(wake.map(instant_of).unwrap_or_else(tokio::time::Instant::now)), if wake.is_some() => {}
        }
    }
}

async fn answer(state: Arc<State>, id: RequestId, request: Request, tx: mpsc::UnboundedSender<ControllerEvent>) {
    let response = call(state, request, None).await;
    let _ = tx.send(ControllerEvent::Head { id, status: response.status().as_u16() });
    let mut body = response.into_body();
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(chunk) = frame.into_data() {
            let _ = tx.send(ControllerEvent::Body { id, chunk });
        }
    }
    let _ = tx.send(ControllerEvent::End { id });
}

/// How long a check of an extension server may take (kube's availability controller's client).
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

async fn probe(state: Arc<State>, id: RequestId, request: ProxyRequest, tx: mpsc::UnboundedSender<ControllerEvent>) {
    // The limit covers the answer's body too, as Go's client timeout does.
    let exchange = async {
        let (head, rest) = state.proxy.send(request).await?;
        let body = http_body_util::Limited::new(rest.body, PROBE_BODY_LIMIT).collect().await.map(|b| b.to_bytes()).map_err(|e| e.to_string())?;
        Ok::<_, String>((head, body))
    };
    let error = match tokio::time::timeout(PROBE_TIMEOUT, exchange).await {
        Ok(Ok((head, body))) => {
            let _ = tx.send(ControllerEvent::Head { id, status: head.status });
            let _ = tx.send(ControllerEvent::Body { id, chunk: body });
            let _ = tx.send(ControllerEvent::End { id });
            return;
        }
        Ok(Err(e)) => e,
        Err(_) => "context deadline exceeded (Client.Timeout exceeded while awaiting headers)".to_string(),
    };
    let _ = tx.send(ControllerEvent::Failed { id, error });
}

/// How much of an extension server's answer a check reads: its discovery, and its OpenAPI v2
/// document, a few MiB for a server of every built-in kind.
const PROBE_BODY_LIMIT: usize = 32 * 1024 * 1024;

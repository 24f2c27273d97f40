//! The core's [`WebhookCall`]s: an HTTPS POST of JSON to a webhook (or a GET: an OIDC
//! issuer's discovery document and keys), with the client
//! certificate and bearer token of the call's credentials if it has any, its server checked
//! against the webhook's CA bundle (the system's roots without one), within the call's
//! timeout, the answer's body read up to [`MAX_ANSWER_BYTES`]; over a connection kept for reuse
//! ([`Connections`]). Only transport lives here: what
//! the call carries and what its answer means are the core's.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use kapi_core::webhook::{MAX_ANSWER_BYTES, WebhookAnswer, WebhookCall};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::connections::Connections;

/// Makes webhook calls (its clones share their connections).
#[derive(Clone, Default)]
pub struct WebhookClient {
    connections: Arc<Connections>,
}

impl WebhookClient {
    /// Makes `call`; the answer, or why there is none as Go's HTTP client says it
    /// (`Post "<url>": <error>`, `Get ...`).
    pub async fn call(&self, call: WebhookCall) -> Result<WebhookAnswer, String> {
        let url = format!("{}{}", call.target.url, call.path);
        // Go's HTTP client names the method as `Post` and `Get`.
        let verb = if call.method == http::Method::GET { "Get" } else { "Post" };
        let timeout = std::time::Duration::try_from(call.timeout).unwrap_or_default();
        match tokio::time::timeout(timeout, self.send(call)).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Err(format!("{verb} {url:?}: {e}")),
            Err(_) => Err(format!("{verb} {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)")),
        }
    }

    async fn send(&self, call: WebhookCall) -> Result<WebhookAnswer, String> {
        let client = match call.credentials.as_ref().and_then(|c| c.client.as_ref()) {
            Some((cert, key)) => {
                let chain: Vec<CertificateDer<'static>> =
                    CertificateDer::pem_slice_iter(cert.as_bytes()).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
                Some((chain, PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| e.to_string())?))
            }
            None => None,
        };
        let mut request = http::Request::builder().method(call.method.clone()).uri(&call.path).header("Accept", "application/json, */*");
        if call.method == http::Method::POST {
            request = request.header("Content-Type", "application/json");
        }
        if let Some(token) = call.credentials.as_ref().and_then(|c| c.token.as_ref()) {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let request = request.body(Full::new(call.body)).map_err(|e| e.to_string())?;
        let response = self.connections.send(&call.target, client.as_ref().map(|(c, k)| (c.as_slice(), k)), false, request).await?;
        let status = response.status().as_u16();
        let content_type = response.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        let body: Bytes = Limited::new(response.into_body(), MAX_ANSWER_BYTES).collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok(WebhookAnswer { status, body, content_type })
    }
}

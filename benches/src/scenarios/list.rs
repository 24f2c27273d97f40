//! LIST of a collection, whole or in pages of `--limit`: time to the last byte of the last page,
//! and bytes per second. A whole LIST is streamed and counted, never held.

use std::time::{Duration, Instant};

use http::Method;
use http_body_util::BodyExt;

use crate::Api;
use crate::client::Client;
use crate::report::{Recorder, Row};

/// The `continue` token of a page.
fn continue_token(page: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(rename = "continue")]
        token: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct List {
        metadata: Meta,
    }
    serde_json::from_slice::<List>(page).ok()?.metadata.token.filter(|t| !t.is_empty())
}

/// Streams one response body; its status and length.
async fn drain(client: &Client, path: &str, keep: bool) -> anyhow::Result<(u16, u64, Vec<u8>)> {
    let resp = client.send(Method::GET, path, None).await?;
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let (mut n, mut kept) = (0u64, Vec::new());
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            n += data.len() as u64;
            if keep {
                kept.extend_from_slice(&data);
            }
        }
    }
    Ok((status, n, kept))
}

/// One traversal of the collection: the outcome, bytes and pages.
async fn traverse(client: &Client, api: &Api, limit: usize, rv: Option<&str>) -> (Option<u16>, u64, u64) {
    let base = api.kind.collection(&api.namespace);
    let (mut bytes, mut pages, mut token) = (0u64, 0u64, None::<String>);
    loop {
        let mut query = Vec::new();
        if limit > 0 {
            query.push(format!("limit={limit}"));
        }
        match &token {
            Some(t) => query.push(format!("continue={t}")),
            None => query.extend(rv.map(|rv| format!("resourceVersion={rv}"))),
        }
        let path = if query.is_empty() { base.clone() } else { format!("{base}?{}", query.join("&")) };
        match drain(client, &path, limit > 0).await {
            Ok((200, n, page)) => {
                bytes += n;
                pages += 1;
                token = continue_token(&page);
                if token.is_none() {
                    return (Some(200), bytes, pages);
                }
            }
            Ok((status, ..)) => return (Some(status), bytes, pages),
            Err(_) => return (None, bytes, pages),
        }
    }
}

pub async fn list(api: &Api, client: Client, limit: usize, repeat: usize, rv: Option<&str>) -> anyhow::Result<Vec<Row>> {
    let mut rec = Recorder::default();
    let (mut elapsed, mut pages) = (Duration::ZERO, 0);
    for _ in 0..repeat.max(1) {
        let start = Instant::now();
        let (outcome, bytes, p) = traverse(&client, api, limit, rv).await;
        let d = start.elapsed();
        elapsed += d;
        rec.record(outcome, d);
        rec.bytes += bytes;
        pages += p;
    }
    let op = if limit > 0 { format!("limit={limit}") } else { "full".to_string() };
    let per_list = rec.bytes / repeat.max(1) as u64;
    Ok(vec![Row::new("list", &op, &rec, elapsed).with("bytes_per_list", per_list).with("pages", pages)])
}

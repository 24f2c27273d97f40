//! core/v1 componentstatuses (deprecated since v1.19, still served by v1.33): the health of the
//! control plane's parts, probed at each GET or LIST as kube's `pkg/registry/core/componentstatus`
//! does: the scheduler's and the controller-manager's `/healthz` over HTTPS on this host (their
//! default secure ports, certificates unverified), and storage (`etcd-0`, whichever store kapi
//! runs on). Nothing is stored.

use serde_json::{Value, json};

use super::{info, serve};
use crate::catalog::{Backing, Resource, Strategy};
use crate::meta;
use crate::pipeline::{Probe, ProbeOutcome};
use crate::table::{Column, Describe};

/// The components kube probes over HTTP(S), by name: `DefaultKubeSchedulerPort` and
/// `DefaultKubeControllerManagerPort`.
pub const PROBED: [(&str, &str); 2] = [("scheduler", "https://127.0.0.1:10259/healthz"), ("controller-manager", "https://127.0.0.1:10257/healthz")];

/// kube's `probeTimeOut`.
const PROBE_TIMEOUT_SECONDS: u64 = 20;

pub fn resource() -> Resource {
    let mut i = info("", "v1", "ComponentStatus", "componentstatuses", false);
    i.short_names = crate::catalog::names(&["cs"]);
    i.verbs = crate::catalog::names(&["get", "list"]);
    i.backing = Backing::Probed;
    i.deprecation = Some("v1 ComponentStatus is deprecated in v1.19+".into());
    serve(i, ComponentStatuses)
}

/// The probes of the HTTP(S) components, in [`PROBED`] order.
pub fn probes() -> Vec<Probe> {
    PROBED.iter().map(|(_, url)| Probe { url: url.to_string(), timeout_seconds: PROBE_TIMEOUT_SECONDS }).collect()
}

/// The ComponentStatus of everything probed, sorted by name: storage's health (`Ok` or the
/// reason it failed) and the outcome of each [`probes`] probe.
pub fn statuses(storage: &Result<(), String>, outcomes: &[ProbeOutcome]) -> Vec<Value> {
    let mut out: Vec<Value> = PROBED.iter().zip(outcomes).map(|((name, url), o)| status(name, condition_of(url, o))).collect();
    out.push(status(
        "etcd-0",
        match storage {
            Ok(()) => ("True", "ok".to_string(), String::new()),
            Err(e) => ("False", String::new(), e.clone()),
        },
    ));
    out.sort_by(|a, b| meta::name(a).cmp(meta::name(b)));
    out
}

fn status(name: &str, (status, message, error): (&str, String, String)) -> Value {
    let mut condition = json!({"type": "Healthy", "status": status});
    if !message.is_empty() {
        condition["message"] = json!(message);
    }
    if !error.is_empty() {
        condition["error"] = json!(error);
    }
    json!({"kind": "ComponentStatus", "apiVersion": "v1", "metadata": {"name": name}, "conditions": [condition]})
}

/// kube's HTTP prober (`pkg/probe/http`) and `ToConditionStatus`: a 2xx is healthy with its body
/// as the message, a redirect unknown, any other answer or a failed request unhealthy, with Go's
/// words for how the request failed.
fn condition_of(url: &str, outcome: &ProbeOutcome) -> (&'static str, String, String) {
    let host = url.split("://").nth(1).and_then(|rest| rest.split('/').next()).unwrap_or_default();
    let failed = |why: String| ("False", format!("Get {url:?}: {why}"), String::new());
    match outcome {
        ProbeOutcome::Answered { status, body } if (200..300).contains(status) => ("True", body.clone(), String::new()),
        ProbeOutcome::Answered { status, body } if (300..400).contains(status) => {
            ("Unknown", format!("Probe terminated redirects, Response body: {body}"), String::new())
        }
        ProbeOutcome::Answered { status, .. } => ("False", format!("HTTP probe failed with statuscode: {status}"), String::new()),
        ProbeOutcome::Refused => failed(format!("dial tcp {host}: connect: connection refused")),
        ProbeOutcome::TimedOut => failed("context deadline exceeded (Client.Timeout exceeded while awaiting headers)".into()),
        ProbeOutcome::Failed(e) => failed(e.clone()),
    }
}

struct ComponentStatuses;

const COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Status", "string", Describe::Text("Status of the component conditions")),
    Column::new("Message", "string", Describe::Text("Message of the component conditions")),
    Column::new("Error", "string", Describe::Text("Error of the component conditions")),
];

impl Strategy for ComponentStatuses {
    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    /// kube's `printComponentStatus`.
    fn row(&self, obj: &Value, _now: jiff::Timestamp) -> Vec<Value> {
        let healthy = obj["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "Healthy");
        let (status, message, error) = match healthy {
            Some(c) => (if c["status"] == "True" { "Healthy" } else { "Unhealthy" }, c["message"].as_str().unwrap_or(""), c["error"].as_str().unwrap_or("")),
            None => ("Unknown", "", ""),
        };
        vec![json!(meta::name(obj)), json!(status), json!(message), json!(error)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_read_as_kube_reads_them() {
        let outcomes = [ProbeOutcome::Answered { status: 200, body: "ok".into() }, ProbeOutcome::Refused];
        let s = statuses(&Ok(()), &outcomes);
        let names: Vec<&str> = s.iter().map(meta::name).collect();
        assert_eq!(names, ["controller-manager", "etcd-0", "scheduler"]);
        assert_eq!(
            s[0]["conditions"][0],
            json!({"type": "Healthy", "status": "False", "message": "Get \"https://127.0.0.1:10257/healthz\": dial tcp 127.0.0.1:10257: connect: connection refused"})
        );
        assert_eq!(s[2]["conditions"][0], json!({"type": "Healthy", "status": "True", "message": "ok"}));
        assert_eq!(ComponentStatuses.row(&s[0], jiff::Timestamp::UNIX_EPOCH)[1], "Unhealthy");
        let down = statuses(&Err("dial tcp: refused".into()), &outcomes);
        assert_eq!(down[1]["conditions"][0], json!({"type": "Healthy", "status": "False", "error": "dial tcp: refused"}));
    }
}

//! PodNodeSelector and PodTolerationRestriction under fuzzing: namespaces whose placement
//! annotations (a node selector, default tolerations, a toleration whitelist) are drawn from
//! well-formed pieces or are any text, and pods drawn with node selectors, tolerations and
//! requests, created through the pipeline. Whatever the annotations say, every answer is a
//! created pod or a refusal in kube's terms (a 500 only with a plugin's error), a refused pod
//! is not stored, and a created one carries its namespace's node selector and tolerates no
//! more than its namespace's whitelist lets it.

use std::cell::RefCell;
use std::sync::Arc;

use arbitrary::Unstructured;
use serde_json::{Value, json};

use super::writes::request;
use crate::{World, default_server, epoch};

const INPUTS_PER_WORLD: u32 = 200;

const SELECTOR_PIECES: [&str; 8] = ["env=dev", "zone=a", "env=prod", "", "bad key=x", "a=b=c", "tier = any", "x=-bad-"];
const KEYS: [&str; 4] = ["gpu", "team", "node.kubernetes.io/memory-pressure", ""];

/// The configuration's pieces the pods meet where their namespaces say nothing.
const TOLERATIONS_CONFIG: &str =
    "apiVersion: podtolerationrestriction.admission.k8s.io/v1alpha1\nkind: Configuration\ndefault: [{key: team, operator: Exists}]\n";

thread_local! {
    static KEPT: RefCell<Option<(World, u32)>> = const { RefCell::new(None) };
}

fn world() -> World {
    let mut setup = default_server();
    let plugins = ["PodNodeSelector".to_string(), "PodTolerationRestriction".to_string()];
    let configs = [
        ("PodNodeSelector".to_string(), b"podNodeSelectorPluginConfig: {clusterDefaultNodeSelector: tier=any}".to_vec()),
        ("PodTolerationRestriction".to_string(), TOLERATIONS_CONFIG.as_bytes().to_vec()),
    ];
    let chain =
        kapi_core::admission::Chain::from_flags(&plugins, &[], &configs.into_iter().collect(), &kapi_core::admission::no_files).expect("valid configurations");
    Arc::get_mut(&mut setup.server).expect("not shared yet").admission = Arc::new(chain);
    World::new(setup, epoch(), 1)
}

fn pick<'a>(u: &mut Unstructured, from: &[&'a str]) -> arbitrary::Result<&'a str> {
    Ok(from[u.choose_index(from.len())?])
}

/// A toleration from a few keys, operators and effects (some of them invalid together).
fn toleration(u: &mut Unstructured) -> arbitrary::Result<Value> {
    let mut t = json!({"key": pick(u, &KEYS)?, "operator": pick(u, &["Exists", "Equal", ""])?});
    if u.arbitrary()? {
        t["value"] = json!(pick(u, &["", "1", "x"])?);
    }
    if u.arbitrary()? {
        t["effect"] = json!(pick(u, &["NoSchedule", "NoExecute", ""])?);
    }
    if u.ratio(1, 4)? {
        t["tolerationSeconds"] = json!(u.int_in_range(0..=600)?);
    }
    Ok(t)
}

fn tolerations(u: &mut Unstructured) -> arbitrary::Result<Vec<Value>> {
    (0..u.int_in_range(0..=3)?).map(|_| toleration(u)).collect()
}

/// A namespace's annotation of tolerations: well formed, empty, or any text.
fn tolerations_annotation(u: &mut Unstructured) -> arbitrary::Result<String> {
    Ok(match u.int_in_range(0..=3)? {
        0 => String::new(),
        1 => u.arbitrary()?,
        _ => Value::Array(tolerations(u)?).to_string(),
    })
}

/// The selector an annotation of pieces gives, if every piece is a label (the last of a key
/// winning): what a created pod must carry.
fn required(pieces: &[&str]) -> Option<std::collections::BTreeMap<String, String>> {
    let text = pieces.join(",");
    if text.is_empty() {
        return Some(Default::default());
    }
    let pairs: Vec<(String, String)> = text
        .split(',')
        .map(|p| p.split('=').map(str::trim).collect::<Vec<_>>())
        .filter_map(|kv| match kv[..] {
            [k, v] if !k.is_empty() && !k.contains(' ') && !v.starts_with('-') => Some((k.to_string(), v.to_string())),
            _ => None,
        })
        .collect();
    (pairs.len() == text.split(',').count()).then(|| pairs.into_iter().collect())
}

/// Creates a namespace with drawn annotations and a drawn pod in it, and checks the answer.
pub fn pod_placement(data: &[u8]) {
    let mut u = Unstructured::new(data);
    KEPT.with(|kept| {
        let mut kept = kept.borrow_mut();
        if kept.as_ref().is_some_and(|(_, served)| *served >= INPUTS_PER_WORLD) {
            *kept = None;
        }
        let (w, served) = kept.get_or_insert_with(|| (world(), 0));
        *served += 1;
        let Ok(case) = draw(&mut u) else { return };
        check(w, &format!("n{served}"), case);
    });
}

struct Case {
    selector: Option<Vec<&'static str>>,
    raw_selector: Option<String>,
    defaults: Option<String>,
    whitelist: Option<Vec<Value>>,
    raw_whitelist: Option<String>,
    pod: Value,
}

fn draw(u: &mut Unstructured) -> arbitrary::Result<Case> {
    let selector = match u.int_in_range(0..=2)? {
        0 => None,
        _ => Some((0..u.int_in_range(1..=3)?).map(|_| pick(u, &SELECTOR_PIECES)).collect::<Result<Vec<_>, _>>()?),
    };
    let raw_selector = if selector.is_none() && u.arbitrary()? { Some(u.arbitrary()?) } else { None };
    let defaults = if u.arbitrary()? { Some(tolerations_annotation(u)?) } else { None };
    let (whitelist, raw_whitelist) = match u.int_in_range(0..=3)? {
        0 => (None, None),
        1 => (None, Some(u.arbitrary()?)),
        _ => (Some(tolerations(u)?), None),
    };
    let mut spec = json!({"containers": [{"name": "c", "image": "nginx"}]});
    if u.arbitrary()? {
        spec["containers"][0]["resources"] = json!({"requests": {"memory": "1Gi"}});
    }
    if u.arbitrary()? {
        spec["nodeSelector"] = json!({pick(u, &["env", "zone", "tier"])?: pick(u, &["dev", "prod", "a"])?});
    }
    spec["tolerations"] = Value::Array(tolerations(u)?);
    Ok(Case {
        selector,
        raw_selector,
        defaults,
        whitelist,
        raw_whitelist,
        pod: json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}),
    })
}

fn check(w: &mut World, ns: &str, case: Case) {
    let mut annotations = serde_json::Map::new();
    let selector = case.selector.as_ref().map(|p| p.join(",")).or(case.raw_selector.clone());
    if let Some(s) = &selector {
        annotations.insert("scheduler.alpha.kubernetes.io/node-selector".into(), json!(s));
    }
    if let Some(d) = &case.defaults {
        annotations.insert("scheduler.alpha.kubernetes.io/defaultTolerations".into(), json!(d));
    }
    let whitelist = case.whitelist.as_ref().map(|l| Value::Array(l.clone()).to_string()).or(case.raw_whitelist.clone());
    if let Some(l) = &whitelist {
        annotations.insert("scheduler.alpha.kubernetes.io/tolerationsWhitelist".into(), json!(l));
    }
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "annotations": annotations}});
    let resp = w.request(request("POST", "/api/v1/namespaces".into(), "", "application/json", namespace.to_string().into_bytes()));
    assert_eq!(resp.head.status, 201, "namespace {ns}: {}", String::from_utf8_lossy(&resp.body));
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    let resp = w.request(request("POST", format!("/api/v1/namespaces/{ns}/serviceaccounts"), "", "application/json", sa.to_string().into_bytes()));
    assert!(matches!(resp.head.status, 201 | 409), "service account in {ns}: {}", String::from_utf8_lossy(&resp.body));

    let pods = format!("/api/v1/namespaces/{ns}/pods");
    let resp = w.request(request("POST", pods.clone(), "", "application/json", case.pod.to_string().into_bytes()));
    let (status, body) = (resp.head.status, resp.json());
    let stored = w.request(request("GET", format!("{pods}/p"), "", "", Vec::new()));
    if status != 201 {
        assert!(matches!(status, 403 | 422 | 500), "{status} {body} for {namespace} {}", case.pod);
        assert_eq!(body["kind"], "Status", "{body}");
        if status == 500 {
            assert_eq!(body["reason"], Value::Null, "a plugin's error, not an internal one: {body}");
        }
        assert_eq!(stored.head.status, 404, "a refused pod is not stored: {body}");
        return;
    }
    assert_eq!(stored.head.status, 200, "a created pod is stored");
    let pod = stored.json();
    let node_selector = &pod["spec"]["nodeSelector"];
    if let Some(required) = case.selector.as_deref().and_then(required) {
        for (k, v) in required {
            assert_eq!(node_selector[&k], json!(v), "the namespace's selector {selector:?} is the pod's: {pod}");
        }
    }
    if let Some(list) = case.whitelist.filter(|l| !l.is_empty()) {
        for t in pod["spec"]["tolerations"].as_array().into_iter().flatten() {
            let key = t["key"].as_str().unwrap_or_default();
            let allowed = list.iter().any(|w| w["key"] == t["key"] || (w["key"] == "" && w["operator"] == "Exists"));
            assert!(allowed, "{key} is tolerated outside the whitelist {list:?}: {pod}");
        }
    }
}

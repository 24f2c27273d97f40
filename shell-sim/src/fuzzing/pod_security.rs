//! PodSecurity under fuzzing: pods drawn from the fields the Pod Security Standards look at
//! (security contexts of the pod and its containers, host namespaces and ports, volumes,
//! sysctls, AppArmor and seccomp annotations, the OS) are created through the pipeline in
//! namespaces enforcing each level, at the newest version and at v1.20, and in one that only
//! warns. Whatever the pod, the answers must agree: a pod admitted as `restricted` is admitted
//! as `baseline`, one admitted as `baseline` as `privileged`; a refusal is 403 in kube's words;
//! the warning namespace admits what `privileged` admits, and warns exactly when `restricted`
//! refuses.

use std::cell::RefCell;

use arbitrary::Unstructured;
use serde_json::{Value, json};

use super::writes::request;
use crate::{World, default_server, epoch};

/// The namespaces pods are created in: enforce level, version, and whether it only warns.
const NAMESPACES: [(&str, &str, &str); 6] = [
    ("privileged", "privileged", "latest"),
    ("baseline", "baseline", "latest"),
    ("restricted", "restricted", "latest"),
    ("baseline-old", "baseline", "v1.20"),
    ("restricted-old", "restricted", "v1.20"),
    ("warned", "", ""),
];

const INPUTS_PER_WORLD: u32 = 300;

thread_local! {
    static KEPT: RefCell<Option<(World, u32)>> = const { RefCell::new(None) };
}

fn world() -> World {
    let mut w = World::new(default_server(), epoch(), 1);
    for (name, level, version) in NAMESPACES {
        let labels = if level.is_empty() {
            json!({"pod-security.kubernetes.io/warn": "restricted"})
        } else {
            json!({"pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/enforce-version": version})
        };
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}});
        let resp = w.request(request("POST", "/api/v1/namespaces".into(), "", "application/json", ns.to_string().into_bytes()));
        assert_eq!(resp.head.status, 201, "namespace {name}: {}", String::from_utf8_lossy(&resp.body));
        // Its default service account, which admission wants a pod's to exist.
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
        let resp = w.request(request("POST", format!("/api/v1/namespaces/{name}/serviceaccounts"), "", "application/json", sa.to_string().into_bytes()));
        assert!(matches!(resp.head.status, 201 | 409), "service account in {name}: {}", String::from_utf8_lossy(&resp.body));
    }
    w
}

fn pick<'a>(u: &mut Unstructured, from: &[&'a str]) -> arbitrary::Result<&'a str> {
    Ok(from[u.choose_index(from.len())?])
}

type Draw = fn(&mut Unstructured) -> arbitrary::Result<Value>;

/// The fields of a pod's security context the checks read, and how each is drawn.
const POD_FIELDS: [(&str, Draw); 7] = [
    ("runAsNonRoot", |u| Ok(json!(u.arbitrary::<bool>()?))),
    ("runAsUser", |u| Ok(json!(u.int_in_range(0..=2)?))),
    ("seccompProfile", |u| Ok(json!({"type": pick(u, &["RuntimeDefault", "Unconfined"])?}))),
    ("seLinuxOptions", |u| Ok(json!({"type": pick(u, &["", "container_t", "spc_t", "container_engine_t"])?, "user": pick(u, &["", "u"])?}))),
    ("appArmorProfile", |u| Ok(json!({"type": pick(u, &["RuntimeDefault", "Unconfined"])?}))),
    ("windowsOptions", |u| Ok(json!({"hostProcess": u.arbitrary::<bool>()?}))),
    ("sysctls", |u| {
        Ok(json!([{"name": pick(u, &["kernel.shm_rmid_forced", "net.ipv4.tcp_rmem", "net.ipv4.tcp_keepalive_time", "kernel.msgmax"])?, "value": "1"}]))
    }),
];

/// The fields of a container's security context the checks read (besides the pod's but
/// `sysctls`), and how each is drawn.
const CONTAINER_FIELDS: [(&str, Draw); 4] = [
    ("privileged", |u| Ok(json!(u.arbitrary::<bool>()?))),
    ("allowPrivilegeEscalation", |u| Ok(json!(u.arbitrary::<bool>()?))),
    ("procMount", |u| Ok(json!(pick(u, &["Default", "Unmasked"])?))),
    ("capabilities", |u| {
        let add: Vec<&str> = (0..u.int_in_range(0..=2)?).map(|_| pick(u, &["NET_BIND_SERVICE", "CHOWN", "SYS_ADMIN"])).collect::<Result<_, _>>()?;
        let drop: Vec<&str> = (0..u.int_in_range(0..=1)?).map(|_| pick(u, &["ALL", "NET_RAW"])).collect::<Result<_, _>>()?;
        Ok(json!({"add": add, "drop": drop}))
    }),
];

/// A security context with some of the fields the checks read.
fn security_context(u: &mut Unstructured, pod: bool) -> arbitrary::Result<Value> {
    let mut sc = serde_json::Map::new();
    let shared = &POD_FIELDS[..6];
    let own: &[(&str, Draw)] = if pod { &POD_FIELDS[6..] } else { &CONTAINER_FIELDS };
    for (key, draw) in shared.iter().chain(own) {
        if u.arbitrary()? {
            sc.insert(key.to_string(), draw(u)?);
        }
    }
    Ok(Value::Object(sc))
}

/// A pod drawn from what the checks read.
fn pod(u: &mut Unstructured, name: &str) -> arbitrary::Result<Value> {
    let mut spec = json!({"initContainers": [], "containers": []});
    for list in ["initContainers", "containers"] {
        for i in 0..u.int_in_range(if list == "containers" { 1..=2 } else { 0..=1 })? {
            let mut c = json!({"name": format!("{}{i}", &list[..1]), "image": "nginx"});
            if u.arbitrary()? {
                c["securityContext"] = security_context(u, false)?;
            }
            if u.ratio(1, 4)? {
                c["ports"] = json!([{"containerPort": 80, "hostPort": u.int_in_range(0..=2)? * 80}]);
            }
            spec[list].as_array_mut().expect("a list").push(c);
        }
    }
    if u.arbitrary()? {
        spec["securityContext"] = security_context(u, true)?;
    }
    for key in ["hostNetwork", "hostPID", "hostIPC"] {
        if u.ratio(1, 6)? {
            spec[key] = json!(true);
        }
    }
    if u.ratio(1, 4)? {
        spec["os"] = json!({"name": pick(u, &["linux", "windows"])?});
    }
    let volume = match u.int_in_range(0..=3)? {
        0 => None,
        1 => Some(json!({"name": "v", "emptyDir": {}})),
        2 => Some(json!({"name": "v", "hostPath": {"path": "/"}})),
        _ => Some(json!({"name": "v", "nfs": {"server": "s", "path": "/"}})),
    };
    if let Some(v) = volume {
        spec["volumes"] = json!([v]);
    }
    let mut meta = json!({"name": name});
    if u.ratio(1, 4)? {
        meta["annotations"] = json!({"container.apparmor.security.beta.kubernetes.io/c0": pick(u, &["runtime/default", "unconfined", "localhost/x"])?});
    }
    Ok(json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}))
}

/// Creates one drawn pod in every namespace and checks the answers agree.
pub fn pod_security(data: &[u8]) {
    let mut u = Unstructured::new(data);
    KEPT.with(|kept| {
        let mut kept = kept.borrow_mut();
        if kept.as_ref().is_some_and(|(_, served)| *served >= INPUTS_PER_WORLD) {
            *kept = None;
        }
        let (w, served) = kept.get_or_insert_with(|| (world(), 0));
        *served += 1;
        let name = format!("p{served}");
        let Ok(pod) = pod(&mut u, &name) else { return };
        let answers: Vec<(u16, Value, bool)> = NAMESPACES
            .iter()
            .map(|(ns, _, _)| {
                let resp = w.request(request("POST", format!("/api/v1/namespaces/{ns}/pods"), "", "application/json", pod.to_string().into_bytes()));
                let warned = resp.head.headers.iter().any(|(k, v)| k == "Warning" && v.contains("would violate PodSecurity"));
                (resp.head.status, resp.json(), warned)
            })
            .collect();
        let code = |i: usize| answers[i].0;
        for (i, (status, body, _)) in answers.iter().enumerate() {
            assert!(matches!(status, 201 | 403 | 422), "{}: {status} {body} for {pod}", NAMESPACES[i].0);
            if *status == 403 {
                let message = body["message"].as_str().unwrap_or_default();
                assert!(message.starts_with(&format!("pods \"{name}\" is forbidden: violates PodSecurity \"")), "{message}");
            }
        }
        if code(0) == 422 {
            assert!(answers.iter().all(|a| a.0 == 422), "an invalid pod is invalid everywhere: {answers:?}");
            return;
        }
        assert_eq!(code(0), 201, "privileged admits every valid pod: {answers:?}");
        for (strict, looser) in [(2, 1), (1, 0), (4, 3), (3, 0)] {
            assert!(code(strict) != 201 || code(looser) == 201, "{} admitted what {} refused: {pod}", NAMESPACES[strict].0, NAMESPACES[looser].0);
        }
        assert_eq!(code(5), 201, "a warn label never refuses: {answers:?}");
        assert_eq!(answers[5].2, code(2) == 403, "the warning namespace warns exactly when restricted refuses: {pod}");
    });
}

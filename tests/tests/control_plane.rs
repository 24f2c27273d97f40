//! The real control plane on kapi: kube-controller-manager and kube-scheduler v1.20.2 (built by
//! `scripts/k8s-binaries`) pointed at kapi (`--controllers=none`, the v1beta1 versions they
//! read turned on with `--runtime-config`), with client certificates, protobuf as client-go
//! speaks it by default, and leader election. Two nodes whose heartbeats (lease and status) a
//! stand-in kubelet renews; componentstatuses probe both components' health; workloads
//! become pods bound to nodes, garbage is collected,
//! namespaces are emptied, a node that stops reporting is tainted and its pods evicted, and the
//! components log no error about kapi's answers.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use base64::Engine;
use kapi_tests::k8s::Component;
use kapi_tests::{Kapi, eventually};
use serde_json::{Value, json};

const OLDER_VERSIONS: &str = "--runtime-config=policy/v1beta1=true,batch/v1beta1=true,discovery.k8s.io/v1beta1=true";

/// kubectl against the server, from any thread.
fn kubectl(kubeconfig: &PathBuf, args: &[&str], stdin: Option<&str>) -> (bool, String) {
    use std::io::Write;
    let mut c = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let input = c.stdin.take();
    if let (Some(mut i), Some(s)) = (input, stdin) {
        i.write_all(s.as_bytes()).unwrap();
    }
    let out = c.wait_with_output().unwrap();
    let text = if out.status.success() { out.stdout } else { out.stderr };
    (out.status.success(), String::from_utf8_lossy(&text).to_string())
}

fn micro_now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string()
}

/// What a kubelet does that the control plane sees: its node's lease renewed every two seconds
/// and the Ready condition's heartbeat, and the pods deleted on its node confirmed gone. A node
/// taken out of `alive` stops all of it.
struct Kubelets {
    alive: Arc<Mutex<BTreeSet<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Kubelets {
    fn start(kubeconfig: PathBuf, nodes: &[&str]) -> Kubelets {
        let alive = Arc::new(Mutex::new(nodes.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>()));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, s) = (alive.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let nodes: Vec<String> = a.lock().unwrap().iter().cloned().collect();
                for node in &nodes {
                    heartbeat(&kubeconfig, node);
                }
                confirm_deletions(&kubeconfig, &nodes);
                std::thread::sleep(Duration::from_secs(2));
            }
        });
        Kubelets { alive, stop, thread: Some(thread) }
    }

    fn fail(&self, node: &str) {
        self.alive.lock().unwrap().remove(node);
    }
}

impl Drop for Kubelets {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn heartbeat(kubeconfig: &PathBuf, node: &str) {
    let now = micro_now();
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": node, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": now}});
    kubectl(kubeconfig, &["apply", "-f", "-"], Some(&lease.to_string()));
    let seconds = &now[..19];
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
        "lastHeartbeatTime": format!("{seconds}Z"), "lastTransitionTime": "2024-01-01T00:00:00Z"}]}});
    kubectl(kubeconfig, &["patch", "node", node, "--subresource=status", "--type=strategic", "-p", &status.to_string()], None);
}

/// A kubelet lets a deleted pod go once its containers are stopped: here at once.
fn confirm_deletions(kubeconfig: &PathBuf, nodes: &[String]) {
    let (ok, out) = kubectl(kubeconfig, &["get", "pods", "-A", "-o", "json"], None);
    let Ok(list) = serde_json::from_str::<Value>(&out).map_err(|_| ok) else { return };
    for p in list["items"].as_array().into_iter().flatten() {
        let on_alive_node = p["spec"]["nodeName"].as_str().is_some_and(|n| nodes.iter().any(|a| a == n));
        if on_alive_node && p["metadata"].get("deletionTimestamp").is_some() {
            let (ns, name) = (p["metadata"]["namespace"].as_str().unwrap(), p["metadata"]["name"].as_str().unwrap());
            kubectl(kubeconfig, &["delete", "pod", "-n", ns, name, "--grace-period=0", "--force", "--wait=false"], None);
        }
    }
}

fn register_node(k: &Kapi, name: &str) {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}}});
    k.kubectl_in(&["apply", "-f", "-"], &node.to_string());
    let resources = json!({"cpu": "4", "memory": "8Gi", "pods": "110"});
    let status = json!({"status": {"capacity": resources, "allocatable": resources, "nodeInfo": {"kubeletVersion": "v1.20.2", "operatingSystem": "linux", "architecture": "amd64"}}});
    k.ok(&["patch", "node", name, "--subresource=status", "--type=merge", "-p", &status.to_string()]);
}

fn pods(k: &Kapi, ns: &str, selector: &str) -> Vec<Value> {
    k.json(&["get", "pods", "-n", ns, "-l", selector])["items"].as_array().cloned().unwrap_or_default()
}

fn bound(pods: &[Value]) -> bool {
    pods.iter().all(|p| p["spec"]["nodeName"].as_str().is_some_and(|n| !n.is_empty()))
}

fn gone(k: &Kapi, args: &[&str]) -> bool {
    let out = k.kubectl(args);
    !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("NotFound")
}

fn apply(k: &Kapi, manifest: Value) {
    k.kubectl_in(&["apply", "-f", "-"], &manifest.to_string());
}

fn template(app: &str) -> Value {
    json!({"metadata": {"labels": {"app": app}}, "spec": {"containers": [{"name": "c", "image": "registry.example/app:1"}]}})
}

/// klog error lines that are not about kapi's answers being wrong, each with its reason.
const EXPECTED_ERRORS: &[&str] = &[
    // A controller-manager without a cloud provider says so at start (service, cloud node
    // lifecycle controllers), against any API server.
    "no cloud provider provided",
    // Controllers write events and the root CA configmap into the namespace being deleted;
    // kube-apiserver refuses them with the same NamespaceLifecycle answer.
    "because it is being terminated",
    // The daemon set controller of v1.20 writes a status once, from its informer's copy, and
    // requeues the set on a conflict (`StatusUpdateRetries` is 1): when its informer has not yet
    // seen the controller's previous write, that one attempt conflicts, as against kube-apiserver.
    // The test's checks of what the controllers achieved are what show the retry worked.
    "please apply your changes to the latest version and try again",
    // The stateful set controller of v1.20 creates a set's missing pods from its informer's
    // copy of them, with no expectations: when a sync follows the set's own status write before
    // the pod informer has seen the pod just created, it creates that pod again, gets
    // AlreadyExists and requeues the set, as against kube-apiserver (the pods' and the sets'
    // watches are ordered apart). The test's checks of the set's pods show the retry worked.
    "error syncing StatefulSet default/db, requeuing: pods \"db-",
    // The namespace controller deletes the deleted namespace's replica set while the replica set
    // controller syncs it: the controller's status write then finds it gone (404), as it would
    // against kube-apiserver.
    "sync \"doomed/",
    // The tokens controller makes a token for doomed's default service account from its
    // informer's copy, reads the account live first, and finds it already deleted by the
    // namespace controller; it logs the 404 and requeues, as against kube-apiserver (its
    // comment: "either the live lookup or our cache are stale").
    "error synchronizing serviceaccount doomed/",
];

#[test]
fn the_real_controller_manager_and_scheduler_run_a_cluster_on_kapi() {
    let k = Kapi::start_with(&["--controllers=none", OLDER_VERSIONS]);
    let logs = tempfile::tempdir().unwrap();
    let kubeconfig = k.kubeconfig().to_string_lossy().to_string();
    let common = |extra: &[&str]| -> Vec<String> {
        // Their /healthz on their default secure ports (10257, 10259), on loopback, which kapi's
        // componentstatuses probe.
        let mut a: Vec<String> = vec![format!("--kubeconfig={kubeconfig}"), "--leader-elect=true".into(), "--bind-address=127.0.0.1".into(), "--port=0".into()];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let mut kcm = Component::start(
        "kube-controller-manager",
        &common(&[
            "--controllers=*",
            "--node-monitor-period=2s",
            "--node-monitor-grace-period=16s",
            "--concurrent-gc-syncs=5",
            "--v=1",
            // Its tokens controller signs with kapi's service account key, as kubeadm sets it up.
            &format!("--service-account-private-key-file={}", k.data_dir().join("pki/sa.key").display()),
        ]),
        logs.path(),
    );
    let mut scheduler = Component::start("kube-scheduler", &common(&["--v=1"]), logs.path());
    let report = |what: &str| -> String {
        format!(
            "{what}\n--- controller-manager errors:\n{}\n--- scheduler errors:\n{}",
            kcm_errors_text(&kcm_log(&logs)),
            kcm_errors_text(&std::fs::read_to_string(logs.path().join("kube-scheduler.log")).unwrap_or_default())
        )
    };

    // componentstatuses: both components answer their probes.
    assert!(
        eventually(Duration::from_secs(30), || {
            let cs = k.json(&["get", "componentstatuses"]);
            cs["items"].as_array().is_some_and(|i| i.len() == 3 && i.iter().all(|c| c["conditions"][0]["status"] == "True"))
        }),
        "{}",
        report("componentstatuses all healthy")
    );

    register_node(&k, "n1");
    register_node(&k, "n2");
    let kubelets = Kubelets::start(k.kubeconfig(), &["n1", "n2"]);
    assert!(
        eventually(Duration::from_secs(60), || k.ok(&["get", "serviceaccount", "default", "-n", "default"]).contains("default")),
        "{}",
        report("the service account controller makes default")
    );

    // v1.20's tokens controller makes each account a token Secret and lists it in the
    // account's `secrets`: kapi takes its token (a legacy one, issuer kubernetes/serviceaccount),
    // with kube's warning for an auto-generated one.
    let mut token = String::new();
    assert!(
        eventually(Duration::from_secs(60), || {
            let account = k.json(&["get", "serviceaccount", "default", "-n", "default"]);
            let Some(name) = account["secrets"][0]["name"].as_str() else { return false };
            let secret = k.json(&["get", "secret", name, "-n", "default"]);
            let data = secret["data"]["token"].as_str().unwrap_or_default();
            token = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(data).unwrap()).unwrap();
            !token.is_empty()
        }),
        "{}",
        report("the tokens controller fills the default account's token Secret")
    );
    let whoami = k.kubectl_with_token(&token, &["auth", "whoami", "-o", "json"]);
    assert!(whoami.status.success(), "{whoami:?}");
    let user: Value = serde_json::from_slice(&whoami.stdout).unwrap();
    assert_eq!(user["status"]["userInfo"]["username"], "system:serviceaccount:default:default");
    assert!(
        String::from_utf8_lossy(&whoami.stderr)
            .contains("Warning: Use tokens from the TokenRequest API or manually created secret-based tokens instead of auto-generated secret-based tokens."),
        "{whoami:?}"
    );

    // A CronJob first: its Job comes at the next minute.
    let started = Instant::now();
    apply(
        &k,
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "tick", "namespace": "default"},
        "spec": {"schedule": "*/1 * * * *", "jobTemplate": {"spec": {"template": {"metadata": {"labels": {"app": "tick"}},
            "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "registry.example/tick:1"}]}}}}}}),
    );

    // A Deployment of 5 becomes a ReplicaSet and 5 pods, each bound to a node.
    apply(
        &k,
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 5, "selector": {"matchLabels": {"app": "web"}}, "template": template("web")}}),
    );
    assert!(
        eventually(Duration::from_secs(60), || {
            let p = pods(&k, "default", "app=web");
            p.len() == 5 && bound(&p)
        }),
        "{}",
        report("5 web pods bound")
    );
    let sets = k.json(&["get", "replicasets", "-n", "default", "-l", "app=web"]);
    assert_eq!(sets["items"].as_array().unwrap().len(), 1);
    assert_eq!(sets["items"][0]["metadata"]["ownerReferences"][0]["name"], "web");
    let nodes: BTreeSet<String> = pods(&k, "default", "app=web").iter().map(|p| p["spec"]["nodeName"].as_str().unwrap().to_string()).collect();
    assert_eq!(nodes, BTreeSet::from(["n1".to_string(), "n2".to_string()]), "the scheduler spreads the pods");

    // A budget over them: the disruption controller counts the pods it covers.
    apply(
        &k,
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}}),
    );
    assert!(
        eventually(Duration::from_secs(60), || k.json(&["get", "pdb", "web", "-n", "default"])["status"]["expectedPods"] == 5),
        "{}",
        report("the disruption controller fills the budget's status")
    );

    // A Service: EndpointSlices and Endpoints for it.
    apply(
        &k,
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}),
    );
    assert!(
        eventually(Duration::from_secs(60), || {
            let slices = k.json(&["get", "endpointslices", "-n", "default", "-l", "kubernetes.io/service-name=web"]);
            // No pod has an address yet (no kubelet runs them): the controller's placeholder slice.
            slices["items"].as_array().is_some_and(|i| i.len() == 1 && i[0]["metadata"]["ownerReferences"][0]["name"] == "web" && i[0]["addressType"] == "IPv4")
        }),
        "{}",
        report("the endpointslice controller makes the service's slice")
    );
    assert!(eventually(Duration::from_secs(30), || k.kubectl(&["get", "endpoints", "web", "-n", "default"]).status.success()), "{}", report("endpoints"));

    // A StatefulSet, a DaemonSet (one pod per node) and a Job.
    apply(
        &k,
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "default"},
        "spec": {"serviceName": "db", "replicas": 2, "podManagementPolicy": "Parallel", "selector": {"matchLabels": {"app": "db"}}, "template": template("db")}}),
    );
    apply(
        &k,
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": template("agent")}}),
    );
    apply(
        &k,
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once", "namespace": "default"},
        "spec": {"template": {"metadata": {"labels": {"app": "once"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.example/once:1"}]}}}}),
    );
    assert!(
        eventually(Duration::from_secs(60), || {
            let db = pods(&k, "default", "app=db");
            let names: BTreeSet<&str> = db.iter().filter_map(|p| p["metadata"]["name"].as_str()).collect();
            names == BTreeSet::from(["db-0", "db-1"]) && bound(&db)
        }),
        "{}",
        report("the statefulset's two pods")
    );
    assert!(
        eventually(Duration::from_secs(60), || {
            let agents = pods(&k, "default", "app=agent");
            let on: BTreeSet<&str> = agents.iter().filter_map(|p| p["spec"]["nodeName"].as_str()).collect();
            agents.len() == 2 && on == BTreeSet::from(["n1", "n2"])
        }),
        "{}",
        report("one daemon pod per node")
    );
    assert!(
        eventually(Duration::from_secs(60), || {
            let p = pods(&k, "default", "app=once");
            p.len() == 1 && bound(&p)
        }),
        "{}",
        report("the job's pod")
    );
    // The pod's containers finish, as its kubelet would report: the Job completes.
    let once = pods(&k, "default", "app=once")[0]["metadata"]["name"].as_str().unwrap().to_string();
    k.ok(&["patch", "pod", &once, "-n", "default", "--subresource=status", "--type=merge", "-p", r#"{"status":{"phase":"Succeeded"}}"#]);
    assert!(
        eventually(Duration::from_secs(60), || k.json(&["get", "job", "once", "-n", "default"])["status"]["succeeded"] == 1),
        "{}",
        report("the job counts its pod's success")
    );

    // Garbage collection: foreground deletion of the Deployment takes its ReplicaSet and pods
    // first; background deletion of the StatefulSet takes its pods after it.
    k.ok(&["delete", "deployment", "web", "-n", "default", "--cascade=foreground", "--wait=false"]);
    assert!(eventually(Duration::from_secs(90), || gone(&k, &["get", "deployment", "web", "-n", "default"])), "{}", report("foreground deletion"));
    assert!(pods(&k, "default", "app=web").is_empty() && k.json(&["get", "replicasets", "-n", "default"])["items"] == json!([]));
    k.ok(&["delete", "statefulset", "db", "-n", "default", "--cascade=background", "--wait=false"]);
    assert!(eventually(Duration::from_secs(90), || pods(&k, "default", "app=db").is_empty()), "{}", report("background deletion"));

    // Namespace deletion by the real namespace controller.
    k.ok(&["create", "namespace", "doomed"]);
    k.ok(&["create", "configmap", "c", "-n", "doomed", "--from-literal=a=b"]);
    apply(
        &k,
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "doomed"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}}, "template": template("d")}}),
    );
    assert!(eventually(Duration::from_secs(60), || pods(&k, "doomed", "app=d").len() == 1), "{}", report("a pod in doomed"));
    k.ok(&["delete", "namespace", "doomed", "--wait=false"]);
    assert!(
        eventually(Duration::from_secs(90), || gone(&k, &["get", "namespace", "doomed"])),
        "{}",
        report("the namespace controller empties and removes doomed")
    );

    // The CronJob's Job.
    assert!(
        eventually(Duration::from_secs(75).saturating_sub(started.elapsed()).max(Duration::from_secs(5)), || {
            k.json(&["get", "jobs", "-n", "default"])["items"]
                .as_array()
                .is_some_and(|j| j.iter().any(|j| j["metadata"]["ownerReferences"][0]["name"] == "tick"))
        }),
        "{}",
        report("the cronjob controller starts a job")
    );

    // A node that stops reporting is tainted, and a pod that tolerates that only briefly is
    // evicted from it.
    apply(
        &k,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "brief", "namespace": "default"},
        "spec": {"nodeName": "n2", "containers": [{"name": "c", "image": "registry.example/app:1"}],
            "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2},
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2}]}}),
    );
    kubelets.fail("n2");
    assert!(
        eventually(Duration::from_secs(90), || {
            let node = k.json(&["get", "node", "n2"]);
            node["spec"]["taints"].as_array().is_some_and(|t| t.iter().any(|t| t["key"] == "node.kubernetes.io/unreachable" && t["effect"] == "NoExecute"))
        }),
        "{}",
        report("the node lifecycle controller taints n2")
    );
    assert!(
        eventually(Duration::from_secs(60), || {
            let p = k.kubectl(&["get", "pod", "brief", "-n", "default", "-o", "json"]);
            !p.status.success() || serde_json::from_slice::<Value>(&p.stdout).is_ok_and(|p| p["metadata"].get("deletionTimestamp").is_some())
        }),
        "{}",
        report("the taint manager evicts the pod")
    );
    let ready = k.json(&["get", "node", "n2"])["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").cloned().unwrap();
    assert_eq!(ready["status"], "Unknown", "{ready}");

    // kube-controller-manager's resourcequota controller counts a quota kapi's admission
    // enforces, and gives back what a deleted pod used.
    k.ok(&["create", "namespace", "quoted"]);
    k.ok(&["create", "quota", "two", "-n", "quoted", "--hard=pods=1"]);
    let used = || k.json(&["get", "quota", "two", "-n", "quoted", "-o", "json"])["status"]["used"]["pods"].clone();
    assert!(eventually(Duration::from_secs(60), || used() == "0"), "{}", report("the quota controller counts the quota"));
    let pod = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "quoted"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "registry.example/app:1"}]}})
    };
    apply(&k, pod("first"));
    let out = k.kubectl_with_input(&["create", "-f", "-"], &pod("second").to_string());
    assert!(String::from_utf8_lossy(&out.stderr).contains("exceeded quota: two, requested: pods=1, used: pods=1, limited: pods=1"), "{out:?}");
    k.ok(&["delete", "pod", "first", "-n", "quoted", "--grace-period=0", "--force"]);
    assert!(eventually(Duration::from_secs(60), || used() == "0"), "{}", report("the quota controller gives back the deleted pod's"));

    assert!(kcm.running() && scheduler.running(), "{}", report("both components still run"));
    drop(kubelets);
    let unexpected = |log: &str| -> Vec<String> {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with('E') && !EXPECTED_ERRORS.iter().any(|e| l.contains(e)))
            .map(str::to_string)
            .collect()
    };
    let kcm_unexpected = unexpected(&kcm.log.to_string_lossy());
    let scheduler_unexpected = unexpected(&scheduler.log.to_string_lossy());
    assert!(kcm_unexpected.is_empty() && scheduler_unexpected.is_empty(), "errors in the components' logs:\n{kcm_unexpected:#?}\n{scheduler_unexpected:#?}");
}

fn kcm_log(logs: &tempfile::TempDir) -> String {
    std::fs::read_to_string(logs.path().join("kube-controller-manager.log")).unwrap_or_default()
}

fn kcm_errors_text(log: &str) -> String {
    log.lines().filter(|l| l.starts_with('E') || l.starts_with('W')).take(60).collect::<Vec<_>>().join("\n")
}

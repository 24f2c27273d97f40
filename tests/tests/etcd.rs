//! kapi on a real etcd: kubectl against it, the data where kube-apiserver puts it, and faults
//! (etcd killed under a write load, compaction under watches, kapi killed with SIGKILL).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kapi_tests::{Etcd, Kapi, Tls, eventually};
use serde_json::{Value, json};

fn kapi_on(etcd: &Etcd, extra: &[&str]) -> Kapi {
    let url = etcd.url();
    let mut args = vec!["--etcd-servers", &url];
    args.extend_from_slice(extra);
    Kapi::start_with(&args)
}

fn etcd_get(etcd: &Etcd, args: &[&str]) -> String {
    let out = etcd.etcdctl(&[&["get"], args].concat());
    assert!(out.status.success(), "etcdctl get {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// POSTs a configmap; the status code and body (0: no answer in 20 s).
fn create(k: &Kapi, name: &str) -> (u16, String) {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}}).to_string();
    k.http(&["--max-time", "20", "-X", "POST", "-H", "Content-Type: application/json", "-d", &body], CMS)
}

#[test]
fn kubectl_works_on_etcd_and_etcdctl_finds_objects_where_kube_puts_them() {
    let etcd = Etcd::start();
    let k = kapi_on(&etcd, &[]);
    k.ok(&["create", "configmap", "demo", "--from-literal=a=b"]);
    k.ok(&["create", "namespace", "team"]);
    k.ok(&["create", "service", "clusterip", "web", "--tcp=80:8080"]);
    k.ok(&["create", "deployment", "app", "--image=nginx"]);
    assert_eq!(k.json(&["get", "configmap", "demo"])["data"]["a"], "b");

    let keys = etcd_get(&etcd, &["--prefix", "--keys-only", "/registry/"]);
    for key in [
        "/registry/configmaps/default/demo",
        "/registry/namespaces/team",
        "/registry/services/specs/default/web",
        "/registry/services/specs/default/kubernetes",
        "/registry/services/endpoints/default/kubernetes",
        "/registry/deployments/default/app",
    ] {
        assert!(keys.lines().any(|l| l == key), "{key} missing from\n{keys}");
    }
    // resourceVersion is the key's mod_revision, never stored in the value.
    let out = etcd_get(&etcd, &["/registry/configmaps/default/demo", "-w", "json"]);
    let kv = &serde_json::from_str::<Value>(&out).unwrap()["kvs"][0];
    let stored: Value = serde_json::from_slice(&base64_decode(kv["value"].as_str().unwrap())).unwrap();
    assert!(stored["metadata"].get("resourceVersion").is_none(), "{stored}");
    assert_eq!(k.json(&["get", "configmap", "demo"])["metadata"]["resourceVersion"], kv["mod_revision"].to_string());

    // Updates are guarded by mod_revision: a stale resourceVersion conflicts.
    let mut stale = k.json(&["get", "configmap", "demo"]);
    k.ok(&["label", "configmap", "demo", "x=1"]);
    stale["data"]["a"] = json!("c");
    let err = k.kubectl_with_input(&["replace", "-f", "-"], &stale.to_string());
    assert!(String::from_utf8_lossy(&err.stderr).contains("the object has been modified"), "{}", String::from_utf8_lossy(&err.stderr));

    // Paginated lists keep one revision across pages.
    for i in 0..5 {
        k.ok(&["create", "configmap", &format!("page-{i}")]);
    }
    let (code, body) = k.http(&[], &format!("{CMS}?limit=2"));
    assert_eq!(code, 200, "{body}");
    let first: Value = serde_json::from_str(&body).unwrap();
    k.ok(&["create", "configmap", "page-late"]);
    let token = first["metadata"]["continue"].as_str().unwrap();
    let (_, body) = k.http(&[], &format!("{CMS}?limit=100&continue={token}"));
    let rest: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(rest["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"]);
    let names: Vec<&str> = rest["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap()).collect();
    assert!(!names.contains(&"page-late"), "a later page shows the list's revision: {names:?}");

    // Deletes with a stale precondition are refused.
    let uid = k.json(&["get", "configmap", "demo"])["metadata"]["uid"].as_str().unwrap().to_string();
    let precondition = json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "not-the-uid"}}).to_string();
    let (code, _) = k.http(&["-X", "DELETE", "-H", "Content-Type: application/json", "-d", &precondition], &format!("{CMS}/demo"));
    assert_eq!(code, 409);
    let precondition = json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}}).to_string();
    let (code, _) = k.http(&["-X", "DELETE", "-H", "Content-Type: application/json", "-d", &precondition], &format!("{CMS}/demo"));
    assert_eq!(code, 200);
    assert!(etcd_get(&etcd, &["/registry/configmaps/default/demo"]).is_empty());
}

fn base64_decode(s: &str) -> Vec<u8> {
    let out = Command::new("base64").arg("-d").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    use std::io::Write;
    out.stdin.as_ref().unwrap().write_all(s.as_bytes()).unwrap();
    out.wait_with_output().unwrap().stdout
}

#[test]
fn events_expire_through_etcd_leases_and_the_compactor_runs() {
    let etcd = Etcd::start();
    let k = kapi_on(&etcd, &["--event-ttl=2s", "--etcd-compaction-interval=1s"]);
    let event = json!({
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
        "involvedObject": {"kind": "ConfigMap", "name": "x", "namespace": "default"}, "reason": "Test", "message": "m"
    });
    let (code, body) = k.http(&["-X", "POST", "-H", "Content-Type: application/json", "-d", &event.to_string()], "/api/v1/namespaces/default/events");
    assert_eq!(code, 201, "{body}");
    let lease = etcd_get(&etcd, &["/registry/events/default/e1", "-w", "json"]);
    let lease = serde_json::from_str::<Value>(&lease).unwrap()["kvs"][0]["lease"].as_i64().unwrap_or(0);
    assert_ne!(lease, 0, "the event is attached to a lease");
    assert!(eventually(Duration::from_secs(15), || etcd_get(&etcd, &["/registry/events/default/e1"]).is_empty()), "etcd expired the event");
    assert!(eventually(Duration::from_secs(10), || k.ok(&["get", "events", "-o", "name"]).trim().is_empty()), "the cache saw the expiry");
    // The compactor: history before its last run is gone.
    assert!(
        eventually(Duration::from_secs(15), || {
            let out = etcd.etcdctl(&["get", "/registry/namespaces/default", "--rev=2"]);
            String::from_utf8_lossy(&out.stderr).contains("compacted")
        }),
        "kapi compacted etcd"
    );
    assert!(etcd_get(&etcd, &["compact_rev_key"]).contains("compact_rev_key"), "kube's compaction key is kept");
}

#[test]
fn etcd_killed_and_restarted_under_a_write_load_loses_nothing_acknowledged() {
    let mut etcd = Etcd::start();
    let k = Arc::new(kapi_on(&etcd, &[]));
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let failures = Arc::new(Mutex::new(Vec::<(u16, String)>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (k, acked, failures, stop) = (k.clone(), acked.clone(), failures.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let name = format!("w{w}-{i}");
                    i += 1;
                    match create(&k, &name) {
                        (201, _) => acked.lock().unwrap().push(name),
                        other => {
                            failures.lock().unwrap().push(other);
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    etcd.kill();
    std::thread::sleep(Duration::from_millis(500));
    let (code, body) = k.http(&[], "/readyz?verbose");
    assert_eq!(code, 500, "/readyz fails while etcd is down: {body}");
    assert!(body.contains("[-]etcd failed"), "{body}");
    std::thread::sleep(Duration::from_secs(2));
    etcd.restart();
    assert!(eventually(Duration::from_secs(20), || k.http(&[], "/readyz").0 == 200), "kapi recovers by itself");
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }

    let failures = failures.lock().unwrap();
    assert!(!failures.is_empty(), "the outage was seen");
    for (code, body) in failures.iter() {
        assert!([500, 503, 504].contains(code), "a failure is a 5xx Status, never a hang: {code} {body}");
        let status: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("a Status body: {body}"));
        assert_eq!(status["kind"], "Status");
    }
    let acked = acked.lock().unwrap();
    assert!(acked.len() > 10, "writes went through before and after: {}", acked.len());
    let stored = etcd_get(&etcd, &["--prefix", "--keys-only", "/registry/configmaps/default/"]);
    let listed = k.ok(&["get", "configmaps", "-o", "name"]);
    for name in acked.iter() {
        assert!(stored.lines().any(|l| l.ends_with(&format!("/{name}"))), "acknowledged {name} is in etcd");
        assert!(listed.lines().any(|l| l == format!("configmap/{name}")), "acknowledged {name} is listed");
    }
}

#[test]
fn watches_see_every_event_in_order_while_etcd_compacts() {
    let etcd = Etcd::start();
    let k = kapi_on(&etcd, &[]);
    let (_, body) = k.http(&[], CMS);
    let rv = serde_json::from_str::<Value>(&body).unwrap()["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let pki = k.data_dir().join("pki");
    let mut watch = Command::new("curl")
        .args(["-sSN", "--cacert"])
        .arg(pki.join("ca.crt"))
        .arg("--cert")
        .arg(pki.join("admin.crt"))
        .arg("--key")
        .arg(pki.join("admin.key"))
        .arg(k.url(&format!("{CMS}?watch=1&resourceVersion={rv}&timeoutSeconds=60")))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = BufReader::new(watch.stdout.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for line in lines.lines().map_while(Result::ok) {
            let ev: Value = serde_json::from_str(&line).unwrap();
            let name = ev["object"]["metadata"]["name"].as_str().unwrap_or("").to_string();
            // kube-root-ca.crt may come from the controller after the LIST.
            if name == "kube-root-ca.crt" {
                continue;
            }
            seen.push((ev["type"].as_str().unwrap().to_string(), name));
            if seen.len() == 40 {
                break;
            }
        }
        seen
    });
    for i in 0..40 {
        assert_eq!(create(&k, &format!("c{i:02}")).0, 201);
        if i % 10 == 9 {
            let rev = etcd.etcdctl(&["endpoint", "status", "-w", "json"]);
            let rev = serde_json::from_slice::<Value>(&rev.stdout).unwrap()[0]["Status"]["header"]["revision"].as_i64().unwrap();
            let out = etcd.etcdctl(&["compact", &rev.to_string()]);
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
    }
    let seen = reader.join().unwrap();
    let _ = watch.kill();
    let _ = watch.wait();
    let want: Vec<(String, String)> = (0..40).map(|i| ("ADDED".to_string(), format!("c{i:02}"))).collect();
    assert_eq!(seen, want, "every event, once, in order");

    // A continuation whose revision etcd compacted is 410 Gone, as in kube.
    let (_, body) = k.http(&[], &format!("{CMS}?limit=5"));
    let token = serde_json::from_str::<Value>(&body).unwrap()["metadata"]["continue"].as_str().unwrap().to_string();
    create(&k, "after");
    let rev = etcd.etcdctl(&["endpoint", "status", "-w", "json"]);
    let rev = serde_json::from_slice::<Value>(&rev.stdout).unwrap()[0]["Status"]["header"]["revision"].as_i64().unwrap();
    assert!(etcd.etcdctl(&["compact", &rev.to_string()]).status.success());
    let (code, body) = k.http(&[], &format!("{CMS}?limit=5&continue={token}"));
    assert_eq!(code, 410, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["reason"], "Expired");
}

#[test]
fn kapi_killed_with_sigkill_restarts_on_etcd_with_everything_acknowledged() {
    let etcd = Etcd::start();
    let mut k = kapi_on(&etcd, &[]);
    for i in 0..20 {
        assert_eq!(create(&k, &format!("s{i}")).0, 201);
    }
    k.kill_and_restart();
    let listed = k.ok(&["get", "configmaps", "-o", "name"]);
    for i in 0..20 {
        assert!(listed.lines().any(|l| l == format!("configmap/s{i}")), "s{i} survived: {listed}");
    }
    k.ok(&["create", "configmap", "after-restart"]);
    assert_eq!(k.ok(&["get", "namespaces", "-o", "name"]).lines().filter(|l| l.starts_with("namespace/kube-")).count(), 3, "bootstrap ran again, idempotently");
}

/// etcd answers a LIST of a collection larger than gRPC's customary 4 MiB message in one
/// response; kapi takes it, as etcd's Go client does (it once failed its cache's LIST on restart).
#[test]
fn a_collection_larger_than_four_mib_is_listed_after_a_restart() {
    let etcd = Etcd::start();
    let mut k = kapi_on(&etcd, &[]);
    let dir = tempfile::tempdir().unwrap();
    for i in 0..6 {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("big{i}")}, "data": {"k": "x".repeat(900 * 1024)}});
        let file = dir.path().join(format!("big{i}.json"));
        std::fs::write(&file, body.to_string()).unwrap();
        let data = format!("@{}", file.display());
        let (code, out) = k.http(&["-X", "POST", "-H", "Content-Type: application/json", "--data-binary", &data], CMS);
        assert_eq!(code, 201, "{out}");
    }
    k.kill_and_restart();
    assert!(eventually(Duration::from_secs(20), || k.http(&[], "/readyz").0 == 200), "ready after the restart");
    let (code, out) = k.http(&[], CMS);
    assert_eq!(code, 200, "{}", &out[..out.len().min(300)]);
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["items"].as_array().unwrap().iter().filter(|i| i["metadata"]["name"].as_str().unwrap().starts_with("big")).count(), 6);
}

/// A CA, and server and client certificates it signs, made with openssl in `dir`.
fn pki(dir: &std::path::Path) -> Tls {
    kapi_tests::openssl_pki(dir, &[("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth"), ("client", "extendedKeyUsage=clientAuth")]);
    Tls {
        ca: dir.join("ca.crt"),
        server_cert: dir.join("server.crt"),
        server_key: dir.join("server.key"),
        client_cert: dir.join("client.crt"),
        client_key: dir.join("client.key"),
    }
}

#[test]
fn kapi_talks_to_etcd_over_tls_with_a_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let tls = pki(dir.path());
    let etcd = Etcd::start_tls(tls.clone());
    let path = |p: &std::path::PathBuf| p.to_str().unwrap().to_string();
    let (ca, cert, key) = (path(&tls.ca), path(&tls.client_cert), path(&tls.client_key));
    let k = kapi_on(&etcd, &["--etcd-cafile", &ca, "--etcd-certfile", &cert, "--etcd-keyfile", &key]);
    k.ok(&["create", "configmap", "over-tls"]);
    assert!(etcd_get(&etcd, &["--prefix", "--keys-only", "/registry/configmaps/"]).contains("/registry/configmaps/default/over-tls"));
}

/// A create charged to a quota writes the quota in the object's own etcd transaction; a quota
/// created again while it counts quotas is refused as existing (etcd refuses a transaction
/// that writes one key twice).
#[test]
fn quota_charges_land_in_etcd_with_the_object() {
    let etcd = Etcd::start();
    let k = kapi_on(&etcd, &[]);
    k.ok(&["create", "quota", "q", "--hard=count/configmaps=2,count/resourcequotas=2"]);
    let used = |what: &str| k.json(&["get", "quota", "q", "-o", "json"])["status"]["used"][what].clone();
    assert!(eventually(Duration::from_secs(20), || used("count/resourcequotas") == "1"), "the controller counts the quota");
    let before = used("count/configmaps");
    assert_eq!(create(&k, "a").0, 201);
    let after: i64 = used("count/configmaps").as_str().unwrap().parse().unwrap();
    assert_eq!(after, before.as_str().unwrap().parse::<i64>().unwrap() + 1);
    let stored = etcd_get(&etcd, &["/registry/resourcequotas/default/q", "--print-value-only"]);
    assert!(stored.contains(&format!("\"count/configmaps\":\"{after}\"")), "{stored}");
    let out = k.kubectl(&["create", "quota", "q", "--hard=pods=1"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("resourcequotas \"q\" already exists"), "{out:?}");
}

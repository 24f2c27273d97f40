//! What an attacker or a bad day does to the server, as black-box cases: each asserts the
//! answer kube-apiserver gives and that a normal client meanwhile keeps getting `/readyz` well
//! under a second.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kapi_tests::{Kapi, eventually, status_and_body};
use serde_json::{Value, json};

/// Polls `/readyz` every 100 ms while `f` runs; returns `f`'s result and the slowest answer.
fn while_polling_readyz<T>(k: &Kapi, f: impl FnOnce() -> T) -> (T, Duration) {
    let done = Arc::new(AtomicBool::new(false));
    let (url, pki) = (k.url("/readyz"), k.data_dir().join("pki"));
    let flag = done.clone();
    let poller = std::thread::spawn(move || {
        let mut slowest = Duration::ZERO;
        while !flag.load(Ordering::Relaxed) {
            let start = Instant::now();
            let out = Command::new("curl")
                .args(["-sS", "-m", "10", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
                .arg(pki.join("ca.crt"))
                .arg("--cert")
                .arg(pki.join("admin.crt"))
                .arg("--key")
                .arg(pki.join("admin.key"))
                .arg(&url)
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), "200", "/readyz failed meanwhile");
            slowest = slowest.max(start.elapsed());
            std::thread::sleep(Duration::from_millis(100));
        }
        slowest
    });
    let out = f();
    done.store(true, Ordering::Relaxed);
    (out, poller.join().unwrap())
}

/// POSTs or PUTs `body` (JSON) at `path`.
fn send(k: &Kapi, method: &str, path: &str, body: &Value) -> (u16, String) {
    let file = k.data_dir().join(format!("body-{}.json", std::process::id()));
    std::fs::write(&file, serde_json::to_vec(body).unwrap()).unwrap();
    let data = format!("@{}", file.display());
    k.http(&["-X", method, "-H", "Content-Type: application/json", "--data-binary", &data], path)
}

/// Creates `count` configmaps `<prefix><i>` in `default`, each with a value of `bytes` bytes.
fn create_configmaps(k: &Kapi, prefix: &str, count: usize, bytes: usize) {
    let value = "v".repeat(bytes);
    for i in 0..count {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("{prefix}{i}")}, "data": {"v": value}});
        assert_eq!(send(k, "POST", "/api/v1/namespaces/default/configmaps", &cm).0, 201);
    }
}

#[test]
fn running_out_of_file_descriptors_does_not_end_the_server() {
    // The hard limit is the soft one: kapi cannot raise it, so accept meets EMFILE.
    let mut k = Kapi::start_under(&["prlimit", "--nofile=256:256", "--"], &[]);
    let conns: Vec<TcpStream> = (0..400).filter_map(|_| TcpStream::connect(("127.0.0.1", k.port)).ok()).collect();
    assert!(conns.len() > 256, "only {} connections", conns.len());
    std::thread::sleep(Duration::from_secs(2));
    assert!(k.running(), "kapi exited when it ran out of file descriptors");
    drop(conns);
    assert!(eventually(Duration::from_secs(40), || k.http(&[], "/readyz").0 == 200), "kapi did not serve again");

    // With room above it, the soft limit is raised to the hard one, as Go programs do.
    let roomy = Kapi::start_under(&["prlimit", "--nofile=256:4096", "--"], &[]);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", roomy.pid())).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    assert_eq!(line.split_whitespace().collect::<Vec<_>>()[3..5], ["4096", "4096"], "{line}");
}

#[test]
fn a_json_patch_that_doubles_the_object_is_refused() {
    let k = Kapi::start();
    k.ok(&["create", "configmap", "grow", "--from-literal=k=v"]);
    let ops: Vec<Value> = (0..22).map(|i| json!({"op": "copy", "from": "/metadata", "path": format!("/metadata/m{i}")})).collect();
    let body = serde_json::to_string(&ops).unwrap();
    let ((code, answer), slowest) = while_polling_readyz(&k, || {
        k.http(&["-X", "PATCH", "-H", "Content-Type: application/json-patch+json", "--data-binary", &body], "/api/v1/namespaces/default/configmaps/grow")
    });
    assert_eq!(code, 422, "{answer}");
    let status: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(status["message"], "the server rejected our request due to an error in our request");
    assert!(slowest < Duration::from_secs(1), "/readyz took {slowest:?}");
    assert!(k.json(&["get", "configmap", "grow"])["metadata"].get("m0").is_none());
}

#[test]
fn huge_lists_and_maps_do_not_stall_other_requests() {
    let k = Kapi::start();
    // As many as fit in etcd's request limit with their managed fields.
    let finalizers: Vec<String> = (0..20_000).map(|i| format!("example.com/f-{i:05}")).collect();
    let cm = |name: &str, fins: &[String], data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "finalizers": fins}, "data": data});
    let path = "/api/v1/namespaces/default/configmaps";
    // Each write well within seconds: comparing the lists item by item (quadratic) took tens.
    let timed = |f: &dyn Fn() -> (u16, String)| {
        let start = Instant::now();
        let out = f();
        assert!(start.elapsed() < Duration::from_secs(8), "a write took {:?}", start.elapsed());
        out
    };
    let ((), slowest) = while_polling_readyz(&k, || {
        let (code, body) = timed(&|| send(&k, "POST", path, &cm("fins", &finalizers, json!({}))));
        assert_eq!(code, 201, "{}", &body[..body.len().min(300)]);
        let mut reversed = finalizers.clone();
        reversed.reverse();
        reversed.push("example.com/one-more".into());
        let (code, body) = timed(&|| send(&k, "PUT", &format!("{path}/fins"), &cm("fins", &reversed, json!({}))));
        assert_eq!(code, 200, "{}", &body[..body.len().min(300)]);

        let keys = |n: usize, v: &str| Value::Object((0..n).map(|i| (format!("k{i:06}"), json!(v))).collect());
        let (code, body) = timed(&|| send(&k, "POST", path, &cm("keys", &[], keys(40_000, "a"))));
        assert_eq!(code, 201, "{}", &body[..body.len().min(300)]);
        let (code, body) = timed(&|| send(&k, "PUT", &format!("{path}/keys"), &cm("keys", &[], keys(39_000, "b"))));
        assert_eq!(code, 200, "{}", &body[..body.len().min(300)]);
    });
    assert!(slowest < Duration::from_secs(1), "/readyz took {slowest:?}");
}

/// Opens a TLS connection with openssl (input from the test, output unread unless asked).
fn openssl(k: &Kapi) -> Child {
    Command::new("openssl")
        .args(["s_client", "-quiet", "-connect", &format!("127.0.0.1:{}", k.port)])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// How long until `child` ends, up to `limit`.
fn ends_within(child: &mut Child, limit: Duration, mut meanwhile: impl FnMut(&mut Child)) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            return Some(start.elapsed());
        }
        meanwhile(child);
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = child.kill();
    None
}

#[test]
fn slow_and_idle_connections_are_closed() {
    let k = Kapi::start_with(&["--read-header-timeout", "2s", "--idle-timeout", "4s"]);
    // A TCP connection that never starts its TLS handshake.
    let mut raw = TcpStream::connect(("127.0.0.1", k.port)).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let start = Instant::now();
    let n = raw.read(&mut [0u8; 16]).unwrap_or(0);
    assert_eq!(n, 0, "the server wrote to a connection that sent nothing");
    assert!(start.elapsed() < Duration::from_secs(6), "raw TCP connection kept {:?}", start.elapsed());

    // A TLS connection that sends no request: idle.
    let mut idle = openssl(&k);
    let took = ends_within(&mut idle, Duration::from_secs(12), |_| {}).expect("an idle TLS connection stayed open");
    assert!(took >= Duration::from_secs(3), "closed after {took:?}, before the idle timeout");

    // A request head sent a byte at a time never completes: closed at the header timeout.
    let mut slow = openssl(&k);
    slow.stdin.as_mut().unwrap().write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n").unwrap();
    let took = ends_within(&mut slow, Duration::from_secs(12), |c| {
        let _ = c.stdin.as_mut().unwrap().write_all(b"X");
    })
    .expect("a slowloris connection stayed open");
    assert!(took < Duration::from_secs(8), "slowloris kept for {took:?}");
    assert_eq!(k.http(&[], "/readyz").0, 200);
}

#[test]
fn the_timeout_parameter_is_honoured_and_checked() {
    let k = Kapi::start();
    let (code, body) = k.http(&[], "/api/v1/namespaces/default/configmaps?timeout=soon");
    assert_eq!(code, 400, "{body}");
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["message"], "invalid timeout specified in the request URL - time: invalid duration \"soon\"");
    // A read that waits for a revision the store will not reach answers at the deadline asked.
    let start = Instant::now();
    let (code, body) = k.http(&[], "/api/v1/namespaces/default/configmaps?resourceVersion=999999999&resourceVersionMatch=NotOlderThan&timeout=1s");
    assert_eq!(code, 504, "{body}");
    assert!(start.elapsed() < Duration::from_millis(2500), "answered after {:?}", start.elapsed());
}

#[test]
fn requests_beyond_the_in_flight_limit_get_429() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "t0ken,bob,1002,dev\n").unwrap();
    // Bob may read everything: what is limited here is how many requests are in flight.
    let k = Kapi::start_with(&["--token-auth-file", tokens.to_str().unwrap(), "--max-requests-inflight", "1", "--authorization-mode", "AlwaysAllow"]);
    let ca = k.data_dir().join("pki/ca.crt");
    let bob = |path: &str| {
        let mut c = Command::new("curl");
        c.args(["-sS", "-i", "--cacert", ca.to_str().unwrap(), "-H", "Authorization: Bearer t0ken", "-w", "\n%{http_code}", &k.url(path)]);
        c
    };
    let as_bob = |path: &str| status_and_body(&bob(path).output().unwrap());
    // Holds the one read-only seat until the cache gives up waiting for the revision (3 s, as
    // kube's watch cache).
    let hold = || {
        bob("/api/v1/namespaces/default/configmaps?resourceVersion=999999999&resourceVersionMatch=NotOlderThan&timeout=10s")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // One round: a holder, then probes until one is refused. The round counts only if the holder
    // had the seat all along (it ends at its deadline, 504): a probe may take the seat before the
    // holder arrives, or find it still held by a request whose answer has just been read, so a
    // loaded machine makes this slower, not flaky.
    let refused_while_held = eventually(Duration::from_secs(120), || {
        let mut holder = hold();
        let refused = loop {
            if holder.try_wait().unwrap().is_some() {
                break false;
            }
            let (code, text) = as_bob("/api/v1/namespaces/default/configmaps");
            if code == 429 {
                assert!(text.to_ascii_lowercase().contains("retry-after: 1"), "{text}");
                assert!(text.ends_with("Too many requests, please try again later.\n"), "{text}");
                // system:masters always gets in.
                assert_eq!(k.http(&[], "/api/v1/namespaces/default/configmaps").0, 200);
                break true;
            }
        };
        let held = status_and_body(&holder.wait_with_output().unwrap()).0 == 504;
        refused && held
    });
    assert!(refused_while_held, "no 429 while the seat was taken");
    assert_eq!(as_bob("/api/v1/namespaces/default/configmaps").0, 200);
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next()).unwrap().parse().unwrap()
}

#[test]
fn watchers_that_do_not_read_hold_no_copy_of_the_collection() {
    let k = Kapi::start_with(&["--watch-stall-timeout", "2s"]);
    create_configmaps(&k, "big-", 200, 20_000);
    let before = rss_kib(k.pid());
    // 60 watches of the 4 MB collection whose clients never read: nothing drains their sockets.
    let pki = k.data_dir().join("pki");
    let mut watchers: Vec<Child> = (0..60)
        .map(|_| {
            let mut c = Command::new("openssl")
                .args(["s_client", "-quiet", "-connect", &format!("127.0.0.1:{}", k.port), "-cert"])
                .arg(pki.join("admin.crt"))
                .arg("-key")
                .arg(pki.join("admin.key"))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            c.stdin.as_mut().unwrap().write_all(b"GET /api/v1/namespaces/default/configmaps?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            c
        })
        .collect();
    let ((), slowest) = while_polling_readyz(&k, || {
        std::thread::sleep(Duration::from_secs(4));
        // Live events for watchers that read nothing.
        for i in 0..50 {
            let _ = k.http(&["-X", "DELETE"], &format!("/api/v1/namespaces/default/configmaps/big-{i}"));
        }
    });
    let grown_mib = rss_kib(k.pid()).saturating_sub(before) / 1024;
    for w in &mut watchers {
        let _ = w.kill();
        let _ = w.wait();
    }
    assert!(grown_mib < 100, "60 unread watches of a 4 MB collection grew the server by {grown_mib} MiB");
    assert!(slowest < Duration::from_secs(1), "/readyz took {slowest:?}");
}

#[test]
fn objects_larger_than_etcd_takes_are_refused_on_every_store() {
    let etcd = kapi_tests::Etcd::start();
    for k in [Kapi::start_with(&["--etcd-servers", &etcd.url()]), Kapi::start()] {
        // Within the body limit (3 MiB) and every field's own, but not etcd's with its managed fields.
        let finalizers: Vec<String> = (0..60_000).map(|i| format!("example.com/f-{i:05}")).collect();
        let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "finalizers": finalizers}});
        let (code, body) = send(&k, "POST", "/api/v1/namespaces/default/configmaps", &big);
        assert_eq!(code, 500, "{}", &body[..body.len().min(300)]);
        let status: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(status["message"], "etcdserver: request is too large");
        assert!(status.get("reason").is_none(), "{status}");
    }
}

#[test]
fn the_data_directory_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let k = Kapi::start();
    k.ok(&["create", "configmap", "c"]);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let data = k.data_dir();
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&data.join("pki")), 0o700);
    for f in ["kapi.db", "kapi.db-wal", "admin.kubeconfig", "pki/ca.key", "pki/apiserver.key", "pki/admin.key", "pki/ca.crt"] {
        assert_eq!(mode(&data.join(f)), 0o600, "{f}");
    }
}

#[test]
fn a_damaged_store_is_refused_at_start() {
    // Every page after the first: SQLite cannot even read the schema.
    refused_when_damaged_from(|len| 4096.min(len));
}

#[test]
fn a_store_damaged_where_only_the_integrity_check_looks_is_refused() {
    // The pages of the second half: the store opens, and the integrity check that runs beside
    // the watch caches' first reads finds the damage.
    refused_when_damaged_from(|len| len / 2 / 4096 * 4096);
}

/// Fills a store, writes random-looking bytes over its file from the byte `from(len)` on, and
/// checks that kapi refuses to serve from it, saying how to recover.
fn refused_when_damaged_from(from: impl Fn(usize) -> usize) {
    let mut k = Kapi::start();
    // Enough to make SQLite move its write-ahead log into the database file.
    create_configmaps(&k, "c", 60, 100_000);
    k.stop();
    let data = k.data_dir();
    let mut bytes = std::fs::read(data.join("kapi.db")).unwrap();
    assert!(bytes.len() > 1 << 20, "the database file holds {} bytes", bytes.len());
    let start = from(bytes.len());
    for (i, b) in bytes.iter_mut().enumerate().skip(start) {
        *b = (i.wrapping_mul(7919) % 251) as u8;
    }
    std::fs::write(data.join("kapi.db"), &bytes).unwrap();
    for f in ["kapi.db-wal", "kapi.db-shm"] {
        let _ = std::fs::remove_file(data.join(f));
    }
    let mut child = Command::new(kapi_tests::binary())
        .args(["serve", "--secure-port", &kapi_tests::free_port().to_string(), "--data-dir"])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ended = ends_within(&mut child, Duration::from_secs(20), |_| {});
    assert!(ended.is_some(), "kapi started on a damaged store");
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(!child.wait().unwrap().success());
    assert!(err.contains("is damaged") && err.contains("Restore it from a backup"), "{err}");
}

#[test]
fn smaller_deviations_from_kube_are_gone() {
    let k = Kapi::start();
    k.ok(&["create", "configmap", "my-cm"]);
    // HEAD: 405 on resources (kube routes no HEAD there), headers only on the health checks,
    // over HTTP/2 as over HTTP/1.1.
    for proto in ["--http2", "--http1.1"] {
        let out = k.curl(&[proto, "-I", "-o", "/dev/null", "-w", "%{http_code}", &k.url("/api/v1/namespaces/default/configmaps/my-cm")]);
        assert!(out.status.success(), "{proto}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "405");
        let out = k.curl(&[proto, "-I", "-o", "/dev/null", "-w", "%{http_code}", &k.url("/healthz")]);
        assert!(out.status.success(), "{proto}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "200");
    }
    // Paths are percent-decoded as Go decodes them.
    let (code, body) = k.http(&[], "/api/v1/namespaces/default/configmaps/my%2Dcm");
    assert_eq!(code, 200, "{body}");
    assert_eq!(k.http(&["--path-as-is"], "/api/v1/namespaces/default/configmaps/my%zz").0, 400);
    // A continue token from no list of this server.
    let token = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTcsInN0YXJ0IjoiZGVmYXVsdC9hIn0";
    let (code, body) = k.http(&[], &format!("/api/v1/namespaces/default/configmaps?limit=1&continue={token}"));
    assert_eq!(code, 400, "{body}");
    // Generated certificates live as kubeadm's do: the CA 10 years, the others 1.
    let year = |f: &str| {
        let out = Command::new("openssl").args(["x509", "-noout", "-enddate", "-in"]).arg(k.data_dir().join("pki").join(f)).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        text.split_whitespace().rev().nth(1).unwrap().parse::<i32>().unwrap()
    };
    let this_year: i32 = String::from_utf8_lossy(&Command::new("date").arg("+%Y").output().unwrap().stdout).trim().parse().unwrap();
    assert_eq!(year("ca.crt"), this_year + 10);
    assert_eq!(year("apiserver.crt"), this_year + 1);
    assert_eq!(year("admin.crt"), this_year + 1);
}

#[test]
fn a_deleted_kube_node_lease_namespace_comes_back() {
    let k = Kapi::start();
    k.ok(&["delete", "namespace", "kube-node-lease", "--wait=false"]);
    assert!(eventually(Duration::from_secs(30), || !k.kubectl(&["get", "namespace", "kube-node-lease"]).status.success()), "never removed");
    let back = eventually(Duration::from_secs(90), || {
        let out = k.kubectl(&["get", "namespace", "kube-node-lease", "-o", "jsonpath={.status.phase}"]);
        out.status.success() && String::from_utf8_lossy(&out.stdout) == "Active"
    });
    assert!(back, "kube-node-lease was not made again");
}

/// The response headers and body curl saw, with `args` at `path` (the body as sent, undecoded).
fn headers_and_body(k: &Kapi, args: &[&str], path: &str) -> (String, Vec<u8>) {
    let headers = k.data_dir().join(format!("headers-{}", std::process::id()));
    let mut a = vec!["-D", headers.to_str().unwrap()];
    a.extend(args);
    let url = k.url(path);
    a.push(&url);
    let out = k.curl(&a);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (std::fs::read_to_string(&headers).unwrap().to_lowercase(), out.stdout)
}

#[test]
fn large_responses_are_gzip_compressed_for_clients_that_accept_it() {
    let k = Kapi::start();
    create_configmaps(&k, "big", 30, 10_000);
    let list = "/api/v1/namespaces/default/configmaps";
    // Over 128 KiB to a client that accepts gzip: compressed, and whole when decompressed.
    let (headers, body) = headers_and_body(&k, &["-H", "Accept-Encoding: gzip"], list);
    assert!(headers.contains("content-encoding: gzip") && headers.contains("vary: accept-encoding"), "{headers}");
    assert!(body.len() < 100_000, "{} bytes sent", body.len());
    let (_, decoded) = headers_and_body(&k, &["--compressed"], list);
    let list_json: Value = serde_json::from_slice(&decoded).unwrap();
    let names = list_json["items"].as_array().unwrap().iter().filter(|i| i["metadata"]["name"].as_str().unwrap().starts_with("big"));
    assert_eq!(names.count(), 30);
    // The same in protobuf, and through kubectl (Go's transport asks for gzip itself).
    let (headers, _) = headers_and_body(&k, &["-H", "Accept-Encoding: gzip", "-H", "Accept: application/vnd.kubernetes.protobuf"], list);
    assert!(headers.contains("content-encoding: gzip"), "{headers}");
    assert_eq!(k.ok(&["get", "configmaps", "-o", "name"]).lines().filter(|l| l.contains("/big")).count(), 30);
    // Not compressed: under the threshold, without the exact token `gzip`, and watches.
    let (headers, _) = headers_and_body(&k, &["-H", "Accept-Encoding: gzip"], "/api/v1/namespaces/default/configmaps/big0");
    assert!(!headers.contains("content-encoding"), "{headers}");
    let (headers, body) = headers_and_body(&k, &["-H", "Accept-Encoding: gzip;q=1"], list);
    assert!(!headers.contains("content-encoding") && body.len() > 300_000, "{headers}");
    let (headers, _) = headers_and_body(&k, &["-H", "Accept-Encoding: gzip", "-m", "2"], &format!("{list}?watch=1&timeoutSeconds=1"));
    assert!(!headers.contains("content-encoding"), "{headers}");
}

//! A kapi server for a test: the real binary, on a free loopback port, with its own data
//! directory, and the clients that talk to it; and a real etcd ([`Etcd`]) for the storage tests.

mod etcd;
pub mod k8s;

pub use etcd::{Etcd, Tls};

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The `kapi` binary: `$KAPI_BIN`, or a build of it in its own target directory
/// (`target/kapi-bin`, so the test build's feature set and the binary's do not rebuild each
/// other), built on first use.
pub fn binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(p) = std::env::var("KAPI_BIN") {
            return PathBuf::from(p);
        }
        // target/<profile>/deps/<test> -> target
        let exe = std::env::current_exe().expect("the test knows its path");
        let target = exe.ancestors().nth(3).expect("tests run from target/<profile>/deps");
        let target_dir = target.join("kapi-bin");
        static BUILD: Mutex<()> = Mutex::new(());
        let _g = BUILD.lock().unwrap();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-q", "-p", "kapi", "--target-dir"])
            .arg(&target_dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building kapi failed");
        target_dir.join("debug").join("kapi")
    })
    .clone()
}

/// A process a test started (a server), killed and waited for when dropped.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What `kapi serve` with `args` (and a data directory of its own) says on stderr as it
/// refuses to start.
pub fn refused_at_start(args: &[&str]) -> String {
    let data = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let mut child = Command::new(binary())
        .args(["serve", "--data-dir", data.path().to_str().unwrap(), "--secure-port", &port])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kapi runs");
    // One that starts would serve until stopped.
    if !eventually(Duration::from_secs(20), || child.try_wait().is_ok_and(|s| s.is_some())) {
        let _ = child.kill();
        panic!("kapi serve {args:?} started");
    }
    let out = child.wait_with_output().expect("kapi ends");
    assert!(!out.status.success(), "kapi serve {args:?} started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A loopback port nobody listens on.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A running kapi.
pub struct Kapi {
    child: Option<Child>,
    dir: tempfile::TempDir,
    pub port: u16,
    extra_args: Vec<String>,
    /// A command kapi is started under.
    wrapper: Vec<String>,
    /// The etcd this kapi stores in when the tests run on etcd (`KAPI_TEST_STORE=etcd`), kept
    /// until kapi is dropped.
    _etcd: Option<Etcd>,
}

impl Kapi {
    pub fn start() -> Kapi {
        Self::start_with(&[])
    }

    /// A kapi with `args`; on its own etcd when `KAPI_TEST_STORE=etcd` (and `args` name none).
    pub fn start_with(args: &[&str]) -> Kapi {
        Self::start_under(&[], args)
    }

    /// A kapi with `args`, started by `wrapper` (e.g. `prlimit --nofile=256:256 --`).
    pub fn start_under(wrapper: &[&str], args: &[&str]) -> Kapi {
        let dir = tempfile::tempdir().unwrap();
        let mut extra_args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let on_etcd = std::env::var("KAPI_TEST_STORE").is_ok_and(|s| s == "etcd") && !args.contains(&"--etcd-servers");
        let etcd = on_etcd.then(Etcd::start);
        if let Some(e) = &etcd {
            extra_args.extend(["--etcd-servers".to_string(), e.url()]);
        }
        let wrapper = wrapper.iter().map(|s| s.to_string()).collect();
        let mut k = Kapi { child: None, dir, port: free_port(), extra_args, wrapper, _etcd: etcd };
        k.launch();
        k
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The server's process id (to sample its memory and CPU).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("kapi is running").id()
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.data_dir().join("admin.kubeconfig")
    }

    /// Whether the server process is still running.
    pub fn running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.try_wait().is_ok_and(|s| s.is_none()))
    }

    /// Stops the server (SIGKILL) and leaves it stopped.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn launch(&mut self) {
        let mut command = match self.wrapper.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(binary());
                c
            }
            None => Command::new(binary()),
        };
        let mut child = command
            .arg("serve")
            .arg("--data-dir")
            .arg(self.data_dir())
            .arg("--secure-port")
            .arg(self.port.to_string())
            .args(&self.extra_args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("kapi starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("kapi is serving") {
                    let _ = tx.send(());
                }
            }
        });
        if rx.recv_timeout(Duration::from_secs(30)).is_err() {
            let _ = child.kill();
            panic!("kapi did not become ready");
        }
        self.child = Some(child);
    }

    /// Stops the server the hard way (`kill -9`) and starts it again on the same data.
    pub fn kill_and_restart(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        self.launch();
    }

    /// Runs kubectl against this server.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new("kubectl").args(args).env("KUBECONFIG", self.kubeconfig()).output().expect("kubectl runs")
    }

    /// Runs kubectl against this server with a bearer token (and no kubeconfig).
    pub fn kubectl_with_token(&self, token: &str, args: &[&str]) -> Output {
        let (server, ca) = (self.url(""), self.data_dir().join("pki/ca.crt"));
        let mut a = vec!["--kubeconfig=/dev/null", "--server", &server, "--certificate-authority", ca.to_str().unwrap(), "--token", token];
        a.extend_from_slice(args);
        Command::new("kubectl").args(&a).output().expect("kubectl runs")
    }

    /// Runs kubectl with `stdin` and checks that it succeeds; returns stdout.
    pub fn kubectl_in(&self, args: &[&str], stdin: &str) -> String {
        let out = self.kubectl_with_input(args, stdin);
        assert!(out.status.success(), "kubectl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs kubectl with `stdin` as its input, whatever the outcome.
    pub fn kubectl_with_input(&self, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut c = Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl runs");
        c.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        c.wait_with_output().unwrap()
    }

    /// Runs kubectl and checks that it succeeds; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(out.status.success(), "kubectl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs kubectl expecting failure; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(!out.status.success(), "kubectl {args:?} should fail: {}", String::from_utf8_lossy(&out.stdout));
        String::from_utf8(out.stderr).unwrap()
    }

    /// `kubectl ... -o json` parsed.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&a)).unwrap()
    }

    /// Runs curl against this server with the admin's client certificate.
    pub fn curl(&self, args: &[&str]) -> Output {
        let pki = self.data_dir().join("pki");
        Command::new("curl")
            .arg("-sS")
            .arg("--cacert")
            .arg(pki.join("ca.crt"))
            .arg("--cert")
            .arg(pki.join("admin.crt"))
            .arg("--key")
            .arg(pki.join("admin.key"))
            .args(args)
            .output()
            .expect("curl runs")
    }

    /// curl with `args` at `path`: the status code and the body.
    pub fn http(&self, args: &[&str], path: &str) -> (u16, String) {
        let mut a = args.to_vec();
        let url = self.url(path);
        a.extend(["-w", "\n%{http_code}", &url]);
        status_and_body(&self.curl(&a))
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Kapi {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The status code and body of a curl run with `-w "\n%{http_code}"`.
pub fn status_and_body(out: &Output) -> (u16, String) {
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// Polls `f` until it returns true or `timeout` passes.
pub fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// A CA (`ca.crt`, `ca.key`) and, for each `(name, extensions)`, a certificate it signs
/// (`<name>.crt`, `<name>.key`, with those X.509 v3 extensions), made with openssl in `dir`.
pub fn openssl_pki(dir: &Path, leaves: &[(&str, &str)]) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl runs");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    run(&[&["req", "-x509"], &key[..], &["-days", "2", "-subj", "/CN=test-ca", "-keyout", "ca.key", "-out", "ca.crt"]].concat());
    for (name, ext) in leaves {
        let (subject, key_file, csr, ext_file, crt) =
            (format!("/CN=kapi-{name}"), format!("{name}.key"), format!("{name}.csr"), format!("{name}.ext"), format!("{name}.crt"));
        run(&[&["req"], &key[..], &["-subj", &subject, "-keyout", &key_file, "-out", &csr]].concat());
        std::fs::write(dir.join(&ext_file), ext).unwrap();
        run(&["x509", "-req", "-in", &csr, "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2", "-extfile", &ext_file, "-out", &crt]);
    }
}

/// What every test webhook server runs: Python's HTTP server behind TLS (`hook.crt`, `hook.key`
/// of its directory), on the port of its first argument, asking for a client certificate
/// signed by `ca.crt` when its second is `client-ca`. Each POST's JSON body is handed to the
/// test's `answer(handler, review)` (a GET's as `None`), and what that returns is the JSON
/// answer.
const PYTHON_WEBHOOK: &str = r#"
import http.server, json, ssl, sys
class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.reply(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
    def do_GET(self):
        self.reply(None)
    def reply(self, review):
        result = answer(self, review)
        status, result = result if isinstance(result, tuple) else (200, result)
        body = json.dumps(result).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("hook.crt", "hook.key")
if sys.argv[2] == "client-ca":
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations("ca.crt")
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Hook)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"#;

/// A webhook server in `dir` (whose `hook.crt`, `hook.key` and, with `client_ca`, `ca.crt` it
/// serves with) on `port`, answering with what `answer`, Python defining
/// `answer(handler, review)`, returns (JSON, with a 200, or a `(status, JSON)` pair); running
/// until dropped.
pub fn python_webhook(dir: &Path, port: u16, answer: &str, client_ca: bool) -> Running {
    std::fs::write(dir.join("hook.py"), format!("{answer}\n{PYTHON_WEBHOOK}")).unwrap();
    let child = Command::new("python3")
        .args(["hook.py", &port.to_string(), if client_ca { "client-ca" } else { "none" }])
        .current_dir(dir)
        .stdout(Stdio::null())
        .spawn()
        .expect("python3 runs");
    let running = Running(child);
    assert!(eventually(Duration::from_secs(10), || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()), "the webhook listens");
    running
}

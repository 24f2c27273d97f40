//! A real etcd for a test: Debian's `etcd` (or `$ETCD_BIN`), one member on free loopback
//! ports, with a throwaway data directory, optionally serving TLS with client certificates. It
//! can be killed and started again on the same data.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::free_port;

/// A running etcd.
pub struct Etcd {
    child: Option<Child>,
    dir: tempfile::TempDir,
    pub port: u16,
    peer_port: u16,
    tls: Option<Tls>,
}

/// PEM files: the CA that signs both sides, etcd's serving pair, and a client pair.
#[derive(Clone)]
pub struct Tls {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

fn binary() -> PathBuf {
    PathBuf::from(std::env::var("ETCD_BIN").unwrap_or_else(|_| "etcd".into()))
}

impl Etcd {
    pub fn start() -> Etcd {
        Self::start_with(None)
    }

    /// An etcd that serves TLS and requires client certificates signed by `tls.ca`.
    pub fn start_tls(tls: Tls) -> Etcd {
        Self::start_with(Some(tls))
    }

    fn start_with(tls: Option<Tls>) -> Etcd {
        let mut e = Etcd { child: None, dir: tempfile::tempdir().unwrap(), port: free_port(), peer_port: free_port(), tls };
        e.launch();
        e
    }

    /// The client URL, for `--etcd-servers`.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    fn launch(&mut self) {
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let mut command = Command::new(binary());
        if let Some(t) = &self.tls {
            command.arg("--cert-file").arg(&t.server_cert).arg("--key-file").arg(&t.server_key);
            command.arg("--trusted-ca-file").arg(&t.ca).arg("--client-cert-auth");
        }
        let child = command
            .args(["--name", "test", "--data-dir"])
            .arg(self.dir.path().join("data"))
            .args(["--listen-client-urls", &self.url(), "--advertise-client-urls", &self.url()])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("test={peer}")])
            // etcd before 3.4.31 answers progress requests out of order, so kapi does not send
            // them and relies on these (see the README's etcd section).
            .arg("--experimental-watch-progress-notify-interval=200ms")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.path().join("etcd.log")).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("etcd could not start ({e}): install Debian's etcd-server (scripts/test does) or set ETCD_BIN"));
        self.child = Some(child);
        let start = Instant::now();
        while !self.healthy() {
            assert!(start.elapsed() < Duration::from_secs(30), "etcd did not become healthy: {}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn healthy(&self) -> bool {
        self.etcdctl(&["endpoint", "health"]).status.success()
    }

    /// What etcd logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default()
    }

    /// Stops etcd the hard way (`kill -9`).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// Starts etcd again on the same data and ports.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    /// Runs `etcdctl` (v3 API) against this etcd.
    pub fn etcdctl(&self, args: &[&str]) -> Output {
        let mut command = Command::new("etcdctl");
        if let Some(t) = &self.tls {
            command.arg("--cacert").arg(&t.ca).arg("--cert").arg(&t.client_cert).arg("--key").arg(&t.client_key);
        }
        command.env("ETCDCTL_API", "3").arg(format!("--endpoints={}", self.url())).args(args).output().expect("etcdctl runs (Debian's etcd-client package)")
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
    }
}

//! A real etcd for a test: Debian's `etcd` (or `$ETCD_BIN`), one member on free loopback
//! ports, with a throwaway data directory. It can be killed and started again on the same data.

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
}

fn binary() -> PathBuf {
    PathBuf::from(std::env::var("ETCD_BIN").unwrap_or_else(|_| "etcd".into()))
}

impl Etcd {
    pub fn start() -> Etcd {
        let mut e = Etcd { child: None, dir: tempfile::tempdir().unwrap(), port: free_port(), peer_port: free_port() };
        e.launch();
        e
    }

    /// The client URL, for `--etcd-servers`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn launch(&mut self) {
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let child = Command::new(binary())
            .args(["--name", "test", "--data-dir"])
            .arg(self.dir.path().join("data"))
            .args(["--listen-client-urls", &self.url(), "--advertise-client-urls", &self.url()])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("test={peer}")])
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
        Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.url()))
            .args(args)
            .output()
            .expect("etcdctl runs (Debian's etcd-client package)")
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
    }
}

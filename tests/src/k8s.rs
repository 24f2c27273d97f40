//! The reference Kubernetes components (v1.20.2, built by `scripts/k8s-binaries` from Debian's
//! source package) run as processes of a test, each logging to a file the test reads.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

/// The directory holding kube-apiserver, kube-controller-manager and kube-scheduler:
/// `$KAPI_K8S_BIN`, or what `scripts/k8s-binaries` prints (it builds them on first use, about
/// 5 minutes, and keeps them outside the clone).
pub fn binaries() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Ok(p) = std::env::var("KAPI_K8S_BIN") {
            return PathBuf::from(p);
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/k8s-binaries");
        let out = Command::new(&script).stderr(Stdio::inherit()).output().expect("scripts/k8s-binaries runs");
        assert!(out.status.success(), "scripts/k8s-binaries failed");
        PathBuf::from(String::from_utf8(out.stdout).expect("a path").lines().last().expect("the script prints the directory").trim())
    })
    .clone()
}

/// A running component; killed when dropped.
pub struct Component {
    child: Child,
    pub log: PathBuf,
}

impl Component {
    /// Starts `name` (e.g. `kube-scheduler`) with `args`, logging to `<log_dir>/<name>.log`.
    pub fn start(name: &str, args: &[String], log_dir: &Path) -> Component {
        let log = log_dir.join(format!("{name}.log"));
        let file = File::create(&log).expect("the log file is created");
        let child = Command::new(binaries().join(name))
            .args(args)
            .stdout(file.try_clone().expect("the log file"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("{name} starts: {e}"));
        Component { child, log }
    }

    /// The lines klog wrote at error level (`E<mmdd> ...`).
    pub fn errors(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log).unwrap_or_default().lines().filter(|l| l.starts_with('E')).map(str::to_string).collect()
    }

    pub fn running(&mut self) -> bool {
        self.child.try_wait().is_ok_and(|s| s.is_none())
    }
}

impl Drop for Component {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

//! The audit flags (`--audit-policy-file`, `--audit-log-path`) and the log backend: the core
//! makes each event's line (`kapi_core::audit`); this appends them to the file (or standard
//! output, `-`), from a thread of its own, flushed whenever it has caught up. At most
//! [`QUEUED_LINES`] wait for it; beyond them a line is dropped and counted, as kube's batch
//! backend drops what its buffer cannot hold, so that a stalled disk costs no memory.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use kapi_core::audit::Policy;

#[derive(Args, Debug, Clone)]
pub struct AuditArgs {
    /// An audit.k8s.io/v1 Policy file: which requests the audit log records, and how much.
    /// Without it, nothing is audited.
    #[arg(long)]
    audit_policy_file: Option<PathBuf>,
    /// Where audit events are written, one JSON line each (`-`: standard output). Without it,
    /// nothing is audited.
    #[arg(long)]
    audit_log_path: Option<String>,
}

/// The lines that may wait for the writer.
const QUEUED_LINES: usize = 10_000;

/// Where the requests' audit lines go: nowhere when the server does not audit.
#[derive(Clone, Default)]
pub struct AuditLog {
    lines: Option<std::sync::mpsc::SyncSender<Bytes>>,
    dropped: Arc<std::sync::atomic::AtomicU64>,
}

impl AuditLog {
    pub fn write(&self, line: Bytes) {
        let Some(tx) = &self.lines else { return };
        if let Err(std::sync::mpsc::TrySendError::Full(_)) = tx.try_send(line) {
            let n = self.dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            if n.is_power_of_two() {
                tracing::error!("the audit log's writer is behind: {n} events dropped so far");
            }
        }
    }
}

impl AuditArgs {
    /// The policy the server audits by, and the log its lines go to; neither without both
    /// flags (as kube, which audits nothing without a policy or a backend).
    pub fn open(&self) -> anyhow::Result<(Option<Arc<Policy>>, AuditLog)> {
        let (Some(file), Some(path)) = (&self.audit_policy_file, &self.audit_log_path) else { return Ok((None, AuditLog::default())) };
        let bytes = std::fs::read(file).with_context(|| format!("failed to read file path {:?}", file.display().to_string()))?;
        let policy = Policy::read(&bytes).map_err(|e| anyhow::anyhow!("{e}: from file {}", file.display()))?;
        let mut out: Box<dyn Write + Send> = match path.as_str() {
            "-" => Box::new(std::io::stdout()),
            path => Box::new(std::fs::OpenOptions::new().create(true).append(true).open(path).with_context(|| format!("opening the audit log {path}"))?),
        };
        let (tx, rx) = std::sync::mpsc::sync_channel::<Bytes>(QUEUED_LINES);
        std::thread::Builder::new().name("audit-log".into()).spawn(move || {
            let mut buffered = std::io::BufWriter::new(&mut out);
            while let Ok(line) = rx.recv() {
                let mut ok = buffered.write_all(&line).is_ok();
                while let Ok(line) = rx.try_recv() {
                    ok &= buffered.write_all(&line).is_ok();
                }
                if !(ok && buffered.flush().is_ok()) {
                    tracing::error!("writing the audit log failed");
                }
            }
        })?;
        tracing::info!("Auditing to {path} by the policy in {}", file.display());
        Ok((Some(Arc::new(policy)), AuditLog { lines: Some(tx), dropped: Arc::default() }))
    }
}

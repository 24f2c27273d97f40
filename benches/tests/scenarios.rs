//! kapi-bench against a real kapi (and a real etcd for the raw baseline), at a small scale:
//! every scenario runs, reports, and finds what it should (no errors, no missed events).

use std::path::Path;
use std::process::Command;

use kapi_tests::{Etcd, Kapi};
use serde_json::Value;

/// Runs kapi-bench with `args`; the JSON rows it wrote.
fn bench(json: &Path, args: &[&str]) -> Vec<Value> {
    let _ = std::fs::remove_file(json);
    let out = Command::new(env!("CARGO_BIN_EXE_kapi-bench")).arg("--json").arg(json).args(args).output().expect("kapi-bench runs");
    assert!(out.status.success(), "kapi-bench {args:?}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("p99.9 ms"), "a table is printed");
    std::fs::read_to_string(json).expect("JSON lines").lines().map(|l| serde_json::from_str(l).expect("a JSON row")).collect()
}

fn no_errors(row: &Value) {
    assert_eq!(row["errors"], serde_json::json!({}), "{row}");
}

#[test]
fn every_scenario_runs_against_kapi() {
    let kapi = Kapi::start();
    let dir = tempfile::tempdir().unwrap();
    let (json, kc) = (dir.path().join("rows.jsonl"), kapi.kubeconfig());
    let kc = kc.to_str().unwrap();
    let pid = kapi.pid().to_string();
    let plot = dir.path().join("latency.svg");

    let rows = bench(&json, &["--server-pid", &pid, "--label", "kapi", "create", "--kubeconfig", kc, "--count", "40", "--concurrency", "4"]);
    assert_eq!((rows[0]["op"].as_str(), rows[0]["count"].as_u64()), (Some("pod"), Some(40)));
    no_errors(&rows[0]);
    assert!(rows[0]["server_rss_peak_mib"].as_f64().unwrap() > 1.0, "the server's memory is sampled: {}", rows[0]);
    assert!(rows[0]["client_cpu_seconds"].as_f64().is_some(), "the load generator's CPU is reported: {}", rows[0]);
    assert_eq!(rows[0]["label"], "kapi", "rows carry the server's label");
    assert_eq!(kapi.ok(&["get", "pods", "-n", "kapi-bench", "-o", "name"]).lines().count(), 40);

    for scenario in ["get", "update"] {
        let rows = bench(&json, &[scenario, "--kubeconfig", kc, "--count", "40", "--ops", "80", "--concurrency", "8"]);
        assert_eq!(rows[0]["count"], 80);
        no_errors(&rows[0]);
    }
    let whole = bench(&json, &["list", "--kubeconfig", kc, "--repeat", "2"]);
    let paged = bench(&json, &["list", "--kubeconfig", kc, "--repeat", "1", "--limit", "7"]);
    assert_eq!(paged[0]["pages"], 6, "40 pods in pages of 7");
    let size = whole[0]["bytes_per_list"].as_u64().unwrap();
    assert!(size > 40 * 1500, "{size} bytes for 40 pods");
    let rows = bench(&json, &["delete", "--kubeconfig", kc, "--count", "40"]);
    no_errors(&rows[0]);
    assert_eq!(kapi.ok(&["get", "pods", "-n", "kapi-bench", "-o", "name"]).lines().count(), 0);

    let fanout = ["watch-fanout", "--kubeconfig", kc, "--kind", "configmap", "--watchers", "20", "--per-connection", "8", "--rate", "50", "--duration", "1"];
    let rows = bench(&json, &[&["--plot", plot.to_str().unwrap()], &fanout[..]].concat());
    let deliver = &rows[1];
    assert_eq!((deliver["missed"].as_u64(), deliver["duplicated"].as_u64()), (Some(0), Some(0)), "{deliver}");
    assert_eq!(deliver["count"].as_u64(), Some(20 * deliver["acknowledged_writes"].as_u64().unwrap()));
    assert!(std::fs::read_to_string(&plot).unwrap().contains("<polyline"), "the plot has curves");

    let mixed = [
        "mixed",
        "--kubeconfig",
        kc,
        "--namespace",
        "churn",
        "--pods",
        "30",
        "--rate",
        "30",
        "--watchers",
        "10",
        "--informers",
        "2",
        "--duration",
        "2",
        "--list-interval",
        "0.5",
    ];
    let rows = bench(&json, &mixed);
    for r in &rows {
        no_errors(r);
    }
    let deliver = rows.last().unwrap();
    assert_eq!((deliver["op"].as_str(), deliver["missed"].as_u64()), (Some("deliver/10+2"), Some(0)), "{deliver}");

    let rows = bench(&json, &["--server-pid", &pid, "crds", "--kubeconfig", kc, "--count", "5"]);
    let ops: Vec<&str> = rows.iter().filter_map(|r| r["op"].as_str()).collect();
    assert_eq!(ops[..3], ["create-until-served", "discovery-before", "discovery-group-before"]);
    assert_eq!(rows[0]["count"], 4, "the first CRD is made before the timed ones");
    for r in &rows {
        no_errors(r);
    }
    assert!(rows[0]["server_rss_growth_mib"].as_f64().is_some(), "{}", rows[0]);
    assert!(kapi.ok(&["get", "crd", "-o", "name"]).lines().count() >= 5);
}

#[test]
fn the_raw_storage_baselines_run() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("rows.jsonl");
    let db = dir.path().join("raw.db");
    let rows = bench(&json, &["raw-sqlite", "--db", db.to_str().unwrap(), "--count", "50", "--concurrency", "4"]);
    assert_eq!(rows[0]["count"], 50);
    no_errors(&rows[0]);
    assert!(!db.exists(), "the database is removed after");
    let etcd = Etcd::start();
    let rows = bench(&json, &["raw-etcd", "--endpoints", &etcd.url(), "--count", "50", "--concurrency", "4", "--value-bytes", "5220"]);
    assert_eq!(rows[0]["count"], 50);
    assert_eq!(rows[0]["value_bytes"], 5220, "values of the size asked for");
    no_errors(&rows[0]);
}

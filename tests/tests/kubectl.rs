//! An unmodified kubectl against the real kapi binary: the everyday workflows.

use std::process::{Command, Stdio};
use std::time::Duration;

use kapi_tests::{Kapi, eventually};
use serde_json::Value;

const APP: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        ports:
        - containerPort: 80
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - port: 80
    targetPort: 80
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  key: value
"#;

#[test]
fn apply_a_manifest_twice() {
    let k = Kapi::start();
    let out = k.kubectl_in(&["apply", "-f", "-"], APP);
    assert!(out.contains("deployment.apps/web created") && out.contains("service/web created") && out.contains("configmap/web-config created"), "{out}");
    let out = k.kubectl_in(&["apply", "-f", "-"], APP);
    assert_eq!(out.matches("unchanged").count(), 3, "{out}");
    let d = k.json(&["get", "deploy", "web"]);
    assert!(d["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].is_string());
    assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
    let svc = k.json(&["get", "svc", "web"]);
    assert!(svc["spec"]["clusterIP"].as_str().unwrap().starts_with("10.0.0."));
    // A change in the manifest is applied as a strategic merge patch.
    let changed = APP.replace("replicas: 2", "replicas: 3");
    let out = k.kubectl_in(&["apply", "-f", "-"], &changed);
    assert!(out.contains("deployment.apps/web configured"), "{out}");
    assert_eq!(k.json(&["get", "deploy", "web"])["spec"]["replicas"], 3);
}

#[test]
fn create_get_list_and_the_table_columns() {
    let k = Kapi::start();
    k.ok(&["create", "namespace", "demo"]);
    k.ok(&["create", "configmap", "c1", "-n", "demo", "--from-literal=a=1", "--from-literal=b=2"]);
    k.ok(&["create", "secret", "generic", "s1", "-n", "demo", "--from-literal=p=x"]);
    k.ok(&["create", "serviceaccount", "robot", "-n", "demo"]);
    let out = k.ok(&["get", "configmaps", "-n", "demo"]);
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, vec!["NAME", "DATA", "AGE"]);
    assert!(out.lines().any(|l| l.starts_with("c1") && l.split_whitespace().nth(1) == Some("2")), "{out}");
    let out = k.ok(&["get", "secrets", "-n", "demo"]);
    assert!(out.contains("Opaque"), "{out}");
    let out = k.ok(&["get", "ns"]);
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease", "demo"] {
        assert!(out.contains(ns), "{out}");
    }
    let cm = k.json(&["get", "cm", "c1", "-n", "demo"]);
    assert_eq!(cm["data"]["a"], "1");
    let yaml = k.ok(&["get", "cm", "c1", "-n", "demo", "-o", "yaml"]);
    assert!(yaml.contains("resourceVersion:"), "{yaml}");
    let err = k.fails(&["get", "cm", "nope", "-n", "demo"]);
    assert!(err.contains("Error from server (NotFound): configmaps \"nope\" not found"), "{err}");
    let err = k.fails(&["create", "configmap", "c1", "-n", "demo"]);
    assert!(err.contains("configmaps \"c1\" already exists"), "{err}");
}

#[test]
fn the_patch_types_scale_and_labels() {
    let k = Kapi::start();
    k.kubectl_in(&["apply", "-f", "-"], APP);
    k.ok(&["patch", "deploy", "web", "-p", r#"{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.28"}]}}}}"#]);
    let d = k.json(&["get", "deploy", "web"]);
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.28");
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"], 80, "strategic merge kept the ports");
    k.ok(&["patch", "deploy", "web", "--type=merge", "-p", r#"{"metadata":{"labels":{"tier":"front"}}}"#]);
    k.ok(&["patch", "deploy", "web", "--type=json", "-p", r#"[{"op":"replace","path":"/spec/replicas","value":4}]"#]);
    let d = k.json(&["get", "deploy", "web"]);
    assert_eq!(d["metadata"]["labels"]["tier"], "front");
    assert_eq!(d["spec"]["replicas"], 4);
    k.ok(&["scale", "deploy", "web", "--replicas=1"]);
    assert_eq!(k.json(&["get", "deploy", "web"])["spec"]["replicas"], 1);
    k.ok(&["label", "cm", "web-config", "env=prod"]);
    k.ok(&["annotate", "cm", "web-config", "note=hi"]);
    let out = k.ok(&["get", "cm", "-l", "env=prod", "-o", "name"]);
    assert_eq!(out.trim(), "configmap/web-config");
    let out = k.ok(&["get", "cm", "--field-selector", "metadata.name=web-config", "-o", "name"]);
    assert_eq!(out.trim(), "configmap/web-config");
}

#[test]
fn server_side_apply_reports_conflicts() {
    let k = Kapi::start();
    k.kubectl_in(&["apply", "--server-side", "-f", "-"], APP);
    k.ok(&["scale", "deploy", "web", "--replicas=5"]);
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\ndata:\n  key: other\n";
    let out = k.kubectl_with_input(&["apply", "--server-side", "--field-manager=someone-else", "-f", "-"], cm);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("conflict with \"kubectl\""), "{err}");
    assert!(err.contains(".data.key"), "{err}");
    k.kubectl_in(&["apply", "--server-side", "--field-manager=someone-else", "--force-conflicts", "-f", "-"], cm);
    assert_eq!(k.json(&["get", "cm", "web-config"])["data"]["key"], "other");
}

#[test]
fn delete_finalizers_and_dry_run() {
    let k = Kapi::start();
    k.ok(&["create", "cm", "held"]);
    k.ok(&["patch", "cm", "held", "--type=merge", "-p", r#"{"metadata":{"finalizers":["example.com/hold"]}}"#]);
    k.ok(&["delete", "cm", "held", "--wait=false"]);
    let cm = k.json(&["get", "cm", "held"]);
    assert!(cm["metadata"]["deletionTimestamp"].is_string());
    k.ok(&["patch", "cm", "held", "--type=json", "-p", r#"[{"op":"remove","path":"/metadata/finalizers"}]"#]);
    assert!(k.fails(&["get", "cm", "held"]).contains("NotFound"));

    let out = k.ok(&["create", "cm", "dry", "--dry-run=server", "-o", "name"]);
    assert_eq!(out.trim(), "configmap/dry");
    assert!(k.fails(&["get", "cm", "dry"]).contains("NotFound"));
    k.ok(&["create", "cm", "keep"]);
    k.ok(&["delete", "cm", "keep", "--dry-run=server"]);
    k.ok(&["get", "cm", "keep"]);

    for i in 0..3 {
        k.ok(&["create", "cm", &format!("batch-{i}")]);
        k.ok(&["label", "cm", &format!("batch-{i}"), "batch=yes"]);
    }
    let out = k.ok(&["delete", "--raw", "/api/v1/namespaces/default/configmaps?labelSelector=batch%3Dyes"]);
    assert!(out.contains("ConfigMapList"), "{out}");
    assert_eq!(k.ok(&["get", "cm", "-l", "batch=yes", "-o", "name"]).trim(), "");
}

#[test]
fn pagination_and_stale_updates() {
    let k = Kapi::start();
    for i in 0..7 {
        k.ok(&["create", "cm", &format!("page-{i}")]);
    }
    let out = k.ok(&["get", "cm", "--chunk-size=2", "-o", "name"]);
    let names: Vec<&str> = out.lines().filter(|l| l.contains("page-")).collect();
    assert_eq!(names.len(), 7, "{out}");
    let page = k.ok(&["get", "--raw", "/api/v1/namespaces/default/configmaps?limit=3"]);
    let page: serde_json::Value = serde_json::from_str(&page).unwrap();
    assert_eq!(page["items"].as_array().unwrap().len(), 3);
    assert!(page["metadata"]["continue"].is_string());

    let cm = k.json(&["get", "cm", "page-0"]);
    k.ok(&["label", "cm", "page-0", "changed=yes"]);
    let stale = serde_json::to_string(&cm).unwrap();
    let out = k.kubectl_with_input(&["replace", "-f", "-"], &stale);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the object has been modified"), "{err}");
}

#[test]
fn watch_and_wait() {
    let k = Kapi::start();
    let watch = Command::new("kubectl")
        .args(["get", "cm", "-w", "--request-timeout=8s"])
        .env("KUBECONFIG", k.kubeconfig())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    k.ok(&["create", "cm", "watched"]);
    k.ok(&["label", "cm", "watched", "x=y"]);
    let waiter = Command::new("kubectl")
        .args(["wait", "--for=delete", "cm/watched", "--timeout=20s"])
        .env("KUBECONFIG", k.kubeconfig())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    k.ok(&["delete", "cm", "watched"]);
    let waited = waiter.wait_with_output().unwrap();
    assert!(waited.status.success());
    assert!(String::from_utf8_lossy(&waited.stdout).contains("condition met"));
    let out = watch.wait_with_output().unwrap();
    let seen = String::from_utf8_lossy(&out.stdout);
    assert!(seen.lines().filter(|l| l.starts_with("watched")).count() >= 3, "{seen}");

    // A condition set through the status subresource.
    k.kubectl_in(&["apply", "-f", "-"], APP);
    let waiter = Command::new("kubectl")
        .args(["wait", "--for=condition=Available", "deploy/web", "--timeout=20s"])
        .env("KUBECONFIG", k.kubeconfig())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    k.ok(&[
        "patch",
        "deploy",
        "web",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"conditions":[{"type":"Available","status":"True","reason":"Test","message":"ok"}]}}"#,
    ]);
    let waited = waiter.wait_with_output().unwrap();
    assert!(waited.status.success(), "{}", String::from_utf8_lossy(&waited.stdout));
}

#[test]
fn discovery_explain_and_auth() {
    let k = Kapi::start();
    // kubectl lists what it lists against a v1.33 kube-apiserver (its discovery, kept in
    // testdata/), but for component statuses, which kapi does not serve yet.
    let reference: Value = serde_json::from_str(include_str!("../../testdata/kube-v1.33-discovery.json")).unwrap();
    let preferred = |group: &str| reference["groups"].as_array().unwrap().iter().find(|g| g["group"] == group).unwrap()["preferredVersion"].clone();
    let mut want: Vec<String> = reference["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["version"] == preferred(r["group"].as_str().unwrap()))
        .map(|r| {
            if r["group"] == "" {
                r["resource"].as_str().unwrap().to_string()
            } else {
                format!("{}.{}", r["resource"].as_str().unwrap(), r["group"].as_str().unwrap())
            }
        })
        .collect();
    want.sort();
    let mut got: Vec<String> = k.ok(&["api-resources", "-o", "name"]).lines().map(String::from).collect();
    got.sort();
    assert_eq!(got, want);
    let out = k.ok(&["api-resources"]);
    for line in ["deployments", "deploy", "apps/v1", "cronjobs", "endpointslices", "leases", "hpa", "autoscaling/v2"] {
        assert!(out.contains(line), "{out}");
    }
    let out = k.ok(&["explain", "deployment.spec.replicas"]);
    assert!(out.contains("Number of desired pods"), "{out}");
    let out = k.ok(&["explain", "pods.spec.containers.ports"]);
    assert!(out.contains("containerPort"), "{out}");
    // The swagger 2.0 document, which kubectl reads in gnostic's protobuf form.
    let out = k.ok(&["explain", "deployment.spec.replicas", "--output=plaintext-openapiv2"]);
    assert!(out.contains("Number of desired pods"), "{out}");
    let ingress = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: i}\nspec: {defaultBackend: {service: {name: web, port: {number: 80}}}}\n";
    k.kubectl_in(&["apply", "-f", "-"], ingress);
    assert!(k.ok(&["get", "ingress", "i"]).contains("80"));
    // A kind no served API has: kubectl finds no mapping for it.
    let widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n";
    let out = k.kubectl_with_input(&["apply", "-f", "-"], widget);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no matches for kind \"Widget\" in version \"example.com/v1\""), "{err}");
    assert_eq!(k.ok(&["auth", "can-i", "delete", "pods"]).trim(), "yes");
    assert!(k.ok(&["auth", "whoami"]).contains("system:masters"));
    assert!(k.ok(&["version"]).contains("Server Version: v1.33.0"));
    assert!(k.ok(&["get", "--raw", "/readyz?verbose"]).contains("readyz check passed"));
}

#[test]
fn data_survives_kill_9() {
    let mut k = Kapi::start();
    k.ok(&["create", "cm", "durable", "--from-literal=k=v"]);
    k.kubectl_in(&["apply", "-f", "-"], APP);
    let rv_before: i64 = k.json(&["get", "cm", "durable"])["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    k.kill_and_restart();
    assert_eq!(k.json(&["get", "cm", "durable"])["data"]["k"], "v");
    assert_eq!(k.json(&["get", "deploy", "web"])["spec"]["replicas"], 2);
    k.ok(&["create", "cm", "after"]);
    let rv_after: i64 = k.json(&["get", "cm", "after"])["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    assert!(rv_after > rv_before, "revisions keep increasing across restarts");
    assert!(eventually(Duration::from_secs(5), || k.kubectl(&["get", "ns", "default"]).status.success()));
}

#[test]
fn namespaces_get_service_accounts_and_delete_completely() {
    let k = Kapi::start();
    k.ok(&["create", "namespace", "team"]);
    assert!(eventually(Duration::from_secs(10), || k.kubectl(&["get", "serviceaccount", "default", "-n", "team"]).status.success()));
    let ca = k.json(&["get", "configmap", "kube-root-ca.crt", "-n", "team"]);
    assert!(ca["data"]["ca.crt"].as_str().unwrap().starts_with("-----BEGIN CERTIFICATE-----"));
    k.ok(&["run", "sleeper", "--image=busybox", "-n", "team", "--", "sleep", "3600"]);
    assert_eq!(k.json(&["get", "pod", "sleeper", "-n", "team"])["spec"]["serviceAccountName"], "default");
    k.kubectl_in(&["apply", "-n", "team", "-f", "-"], APP);

    // kubectl waits until the namespace is gone.
    let out = k.ok(&["delete", "namespace", "team", "--timeout=30s"]);
    assert!(out.contains("namespace \"team\" deleted"), "{out}");
    assert!(k.fails(&["get", "namespace", "team"]).contains("NotFound"));
    k.ok(&["create", "namespace", "team"]);
    assert!(k.ok(&["get", "all", "-n", "team", "-o", "name"]).lines().all(|l| !l.contains("web")));
}

#[test]
fn drain_evicts_through_the_disruption_budget() {
    let k = Kapi::start();
    k.kubectl_in(&["apply", "-f", "-"], "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n");
    let pod = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{app: web}}}}\nspec: {{nodeName: n1, containers: [{{name: c, image: nginx}}]}}\n"
        )
    };
    for name in ["p1", "p2"] {
        k.kubectl_in(&["apply", "-f", "-"], &pod(name));
        // Running and ready, as its kubelet would report (a pending pod is evicted whatever
        // its budget says, as kube does).
        let status = r#"{"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}"#;
        k.ok(&["patch", "pod", name, "--subresource=status", "--type=merge", "-p", status]);
    }
    // A spent budget holds every pod it selects. (One its controller has not processed also
    // answers 429, with Retry-After: 10, which client-go itself waits out ten times.)
    k.kubectl_in(
        &["apply", "-f", "-"],
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\nspec: {maxUnavailable: 1, selector: {matchLabels: {app: web}}}\n",
    );
    let spent = r#"{"status": {"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 2}}"#;
    k.ok(&["patch", "pdb", "web", "--subresource=status", "--type=merge", "-p", spent]);
    let out = k.kubectl(&["drain", "n1", "--force", "--grace-period=0", "--timeout=3s"]);
    assert!(!out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Cannot evict pod as it would violate the pod's disruption budget"), "{err}");
    assert!(k.ok(&["get", "node", "n1"]).contains("SchedulingDisabled"), "drain cordons first");
    // Without it, drain evicts them both.
    k.ok(&["delete", "pdb", "web"]);
    let out = k.ok(&["drain", "n1", "--force", "--grace-period=0", "--timeout=20s"]);
    assert!(out.contains("pod/p1 evicted") && out.contains("pod/p2 evicted"), "{out}");
    assert!(k.ok(&["get", "pods", "-o", "name"]).trim().is_empty());
}

const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, kind: Widget, shortNames: [wd], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - {rule: "self.size <= 10", messageExpression: "'size ' + string(self.size) + ' is over 10'"}
            properties:
              size: {type: integer}
              mode: {type: string, default: fast}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

const WIDGET: &str = r#"
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1}
spec: {size: 3}
"#;

/// An operator's CRD and its custom resources, as kubectl handles them: the CRD is established,
/// its resource found by name, short name and category, and deleting the CRD deletes them.
#[test]
fn custom_resources() {
    let k = Kapi::start();
    assert!(k.kubectl_in(&["apply", "-f", "-"], WIDGET_CRD).contains("customresourcedefinition.apiextensions.k8s.io/widgets.example.com created"));
    k.ok(&["wait", "--for", "condition=established", "crd/widgets.example.com", "--timeout=20s"]);
    // kubectl finds the new resource once discovery lists it.
    assert!(eventually(Duration::from_secs(10), || k.kubectl_with_input(&["apply", "-f", "-"], WIDGET).status.success()));
    let table = k.ok(&["get", "wd"]);
    // A path that finds nothing is a null cell, which kubectl leaves blank.
    assert!(table.starts_with("NAME   SIZE   READY   AGE") && table.contains("w1     3      "), "{table}");
    assert_eq!(k.json(&["get", "wd", "w1"])["spec"]["mode"], "fast", "the schema's default");
    assert!(k.ok(&["get", "all"]).contains("widget.example.com/w1"));
    assert!(k.ok(&["api-resources", "--api-group=example.com"]).contains("widgets"));
    // kubectl explain reads the kind's schema from the OpenAPI document of its version.
    let explained = k.ok(&["explain", "widgets.spec"]);
    assert!(explained.contains("KIND:       Widget") && explained.contains("size\t<integer>"), "{explained}");
    k.ok(&["patch", "widget", "w1", "--type=merge", "-p", r#"{"spec":{"size":4}}"#]);
    k.ok(&["patch", "widget", "w1", "--subresource=status", "--type=merge", "-p", r#"{"status":{"conditions":[{"type":"Ready","status":"True"}]}}"#]);
    let w1 = k.json(&["get", "widget", "w1"]);
    assert_eq!(
        (w1["spec"]["size"].as_i64(), w1["status"]["conditions"][0]["status"].as_str(), w1["metadata"]["generation"].as_i64()),
        (Some(4), Some("True"), Some(2))
    );
    assert!(k.ok(&["get", "wd"]).contains("w1     4      True"));
    // The CRD's CEL rule, in kube's words as kubectl shows them.
    let over = k.fails(&["patch", "widget", "w1", "--type=merge", "-p", r#"{"spec":{"size":11}}"#]);
    assert!(over.contains(r#"The Widget "w1" is invalid: spec: Invalid value: "object": size 11 is over 10"#), "{over}");
    let smp = k.fails(&["patch", "widget", "w1", "-p", r#"{"spec":{"size":5}}"#]);
    assert!(smp.contains("the body of the request was in an unknown format"), "{smp}");
    // Server-side apply: a field another manager set is a conflict, until forced.
    let out = k.kubectl_with_input(&["apply", "--server-side", "-f", "-"], WIDGET);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains(r#"conflict with "kubectl-patch" using example.com/v1: .spec.size"#), "{err}");
    assert!(k.kubectl_in(&["apply", "--server-side", "--force-conflicts", "-f", "-"], WIDGET).contains("serverside-applied"));
    let w1 = k.json(&["get", "widget", "w1", "--show-managed-fields"]);
    assert_eq!(w1["spec"]["size"], 3);
    let applied = w1["metadata"]["managedFields"].as_array().unwrap().iter().find(|e| e["manager"] == "kubectl" && e["operation"] == "Apply").cloned();
    assert!(applied.is_some_and(|e| e["fieldsV1"]["f:spec"].get("f:size").is_some()), "{w1}");

    // kubectl waits for the CRD to go, which it does once its resources are gone.
    k.ok(&["delete", "crd", "widgets.example.com", "--timeout=30s"]);
    let (status, _) = k.http(&[], "/apis/example.com/v1/namespaces/default/widgets");
    assert_eq!(status, 404);
    k.kubectl_in(&["apply", "-f", "-"], WIDGET_CRD);
    k.ok(&["wait", "--for", "condition=established", "crd/widgets.example.com", "--timeout=20s"]);
    assert!(eventually(Duration::from_secs(10), || k.kubectl(&["get", "widgets", "-o", "name"]).status.success()));
    assert_eq!(k.ok(&["get", "widgets", "-o", "name"]), "", "a CRD made again starts empty");

    // A rule is type-checked against the schema when the CRD is written.
    let bad = WIDGET_CRD.replace(r#"rule: "self.size <= 10""#, r#"rule: "self.size + 'x' == 1""#);
    let out = k.kubectl_with_input(&["apply", "-f", "-"], &bad);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("found no matching overload for '_+_' applied to '(int, string)'"), "{err}");
    let bad = WIDGET_CRD.replace(r#"rule: "self.size <= 10""#, r#"rule: "self.size""#);
    let err = String::from_utf8_lossy(&k.kubectl_with_input(&["apply", "-f", "-"], &bad).stderr).to_string();
    assert!(err.contains("x-kubernetes-validations[0].rule: Invalid value: ") && err.contains("cel expression must evaluate to a bool"), "{err}");
}

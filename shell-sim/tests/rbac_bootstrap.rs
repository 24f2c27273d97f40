//! kube's bootstrap RBAC policy at start: created where RBAC authorizes, and on each start
//! reconciled as kube reconciles it (what is missing is added back, what an administrator
//! added is kept, an object annotated `autoupdate: "false"` is left alone, a binding to
//! another role is made again).

use kapi_core::controllers::Enabled;
use kapi_sim::{Response, World, default_server, epoch, rbac_server};
use serde_json::{Value, json};

const CLUSTER_ROLES: &str = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
const CLUSTER_ROLE_BINDINGS: &str = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";

fn get(w: &mut World, path: &str) -> Response {
    w.call("GET", path, "", None, "")
}

fn put(w: &mut World, path: &str, body: &Value) -> Value {
    let r = w.call("PUT", path, "", Some(body), "application/json");
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.json()
}

fn names(w: &mut World, path: &str) -> Vec<String> {
    let list = get(w, path).json();
    list["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn the_policy_is_created_where_rbac_authorizes() {
    let mut w = World::new(rbac_server(), epoch(), 1);
    let roles = names(&mut w, CLUSTER_ROLES);
    assert_eq!(roles.len(), 66, "{roles:?}");
    for name in ["cluster-admin", "admin", "edit", "view", "system:node", "system:controller:deployment-controller", "system:public-info-viewer"] {
        assert!(roles.iter().any(|r| r == name), "{name}");
    }
    assert_eq!(names(&mut w, CLUSTER_ROLE_BINDINGS).len(), 47);
    let admin = get(&mut w, &format!("{CLUSTER_ROLES}/cluster-admin")).json();
    assert_eq!(admin["metadata"]["labels"]["kubernetes.io/bootstrapping"], "rbac-defaults");
    assert_eq!(admin["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"], "true");
    assert_eq!(admin["rules"], json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, {"verbs": ["*"], "nonResourceURLs": ["*"]}]));
    let leader = get(&mut w, "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/rolebindings/system::leader-locking-kube-scheduler").json();
    assert_eq!(leader["roleRef"]["name"], "system::leader-locking-kube-scheduler");
    assert_eq!(names(&mut w, "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-public/roles"), ["system:controller:bootstrap-signer"]);

    let ready = w.call("GET", "/readyz", "verbose", None, "");
    assert!(String::from_utf8_lossy(&ready.body).contains("[+]poststarthook/rbac/bootstrap-roles ok\n"));

    // Without RBAC, kube does not run the hook.
    let mut w = World::new(default_server(), epoch(), 1);
    assert!(names(&mut w, CLUSTER_ROLES).is_empty());
    let ready = w.call("GET", "/readyz", "verbose", None, "");
    assert!(!String::from_utf8_lossy(&ready.body).contains("rbac/bootstrap-roles"));
}

#[test]
fn each_start_gives_the_policys_objects_what_they_miss_and_keeps_the_rest() {
    let mut w = World::new(rbac_server(), epoch(), 2);
    let basic = format!("{CLUSTER_ROLES}/system:basic-user");
    let mut role = get(&mut w, &basic).json();
    let original = role["rules"].clone();
    let extra = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]});
    role["rules"] = json!([extra]);
    role["metadata"]["labels"]["kubernetes.io/bootstrapping"] = json!("mine");
    put(&mut w, &basic, &role);

    let discovery = format!("{CLUSTER_ROLES}/system:discovery");
    let mut kept = get(&mut w, &discovery).json();
    kept["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] = json!("false");
    kept["rules"] = json!([]);
    put(&mut w, &discovery, &kept);

    let binding = format!("{CLUSTER_ROLE_BINDINGS}/system:basic-user");
    let mut b = get(&mut w, &binding).json();
    let subjects = b["subjects"].clone();
    let alice = json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"});
    b["subjects"] = json!([alice]);
    put(&mut w, &binding, &b);

    // A binding of the policy that now names another role.
    let dns = format!("{CLUSTER_ROLE_BINDINGS}/system:kube-dns");
    let before = get(&mut w, &dns).json();
    assert_eq!(w.call("DELETE", &dns, "", None, "").head.status, 200);
    let mut other = before.clone();
    other["metadata"] = json!({"name": "system:kube-dns"});
    other["roleRef"]["name"] = json!("view");
    assert_eq!(w.call("POST", CLUSTER_ROLE_BINDINGS, "", Some(&other), "application/json").head.status, 201);

    w.bootstrap().expect("a second start succeeds");

    let role = get(&mut w, &basic).json();
    assert_eq!(role["metadata"]["labels"]["kubernetes.io/bootstrapping"], "mine", "an administrator's value wins");
    let rules = role["rules"].as_array().unwrap();
    assert_eq!(rules[0], extra, "what an administrator added stays");
    // kube adds the missing rules broken down: one group, resource and verb each.
    let missing: usize = original
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["apiGroups"].as_array().unwrap().len() * r["resources"].as_array().unwrap().len() * r["verbs"].as_array().unwrap().len())
        .sum();
    assert_eq!(rules.len(), 1 + missing);
    assert_eq!(rules[1], json!({"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews"]}));

    assert_eq!(get(&mut w, &discovery).json()["rules"], json!([]), "a protected role is left alone");

    let b = get(&mut w, &binding).json();
    let mut want = vec![alice];
    want.extend(subjects.as_array().unwrap().iter().cloned());
    assert_eq!(b["subjects"], json!(want));

    let after = get(&mut w, &dns).json();
    assert_eq!(after["roleRef"]["name"], "system:kube-dns");
    assert_ne!(after["metadata"]["uid"], before["metadata"]["uid"], "made again");

    // A start with nothing missing writes none of the policy's objects.
    let versions = |w: &mut World| -> Vec<Value> {
        [CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS]
            .iter()
            .flat_map(|p| get(w, p).json()["items"].as_array().unwrap().clone())
            .map(|i| i["metadata"]["resourceVersion"].clone())
            .collect()
    };
    let before = versions(&mut w);
    w.bootstrap().expect("a third start succeeds");
    assert_eq!(versions(&mut w), before);
}

#[test]
fn aggregated_roles_hold_the_rules_of_the_roles_they_select() {
    let mut w = World::new(rbac_server(), epoch(), 3);
    w.start_controllers(Enabled::ALL);
    let rules = |w: &mut World, name: &str| get(w, &format!("{CLUSTER_ROLES}/{name}")).json()["rules"].as_array().cloned().unwrap_or_default();
    let view = rules(&mut w, "view");
    assert_eq!(view, rules(&mut w, "system:aggregate-to-view"), "view holds what is labelled for it");
    // edit: what is labelled for edit (view itself is), in the order of the roles' names.
    let mut edit = rules(&mut w, "system:aggregate-to-edit");
    edit.extend(view.iter().filter(|r| !edit.contains(r)).cloned().collect::<Vec<_>>());
    assert_eq!(rules(&mut w, "edit"), edit);
    assert!(rules(&mut w, "admin").len() > edit.len());
    let managers = get(&mut w, &format!("{CLUSTER_ROLES}/view")).json()["metadata"]["managedFields"].clone();
    assert!(managers.as_array().unwrap().iter().any(|m| m["manager"] == "clusterrole-aggregation-controller" && m["operation"] == "Apply"), "{managers}");

    // A role labelled for view reaches view, edit and admin.
    let crontabs = json!({"verbs": ["get", "list", "watch"], "apiGroups": ["stable.example.com"], "resources": ["crontabs"]});
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "crontab-reader", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}, "rules": [crontabs]});
    assert_eq!(w.call("POST", CLUSTER_ROLES, "", Some(&role), "application/json").head.status, 201);
    for name in ["view", "edit", "admin"] {
        assert!(rules(&mut w, name).contains(&crontabs), "{name}");
    }
    // And leaves them with it.
    assert_eq!(w.call("DELETE", &format!("{CLUSTER_ROLES}/crontab-reader"), "", None, "").head.status, 200);
    for name in ["view", "edit", "admin"] {
        assert!(!rules(&mut w, name).contains(&crontabs), "{name}");
    }
}

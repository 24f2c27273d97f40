use serde_json::{Value, json};

use super::rbac::{Kind, Rule};
use super::*;

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo { name: name.into(), groups: groups.iter().map(|g| g.to_string()).collect(), ..Default::default() }
}

fn resource(verb: &str, group: &str, resource: &str, subresource: &str, namespace: &str, name: &str) -> Attributes {
    Attributes::resource(verb, group, resource, subresource, namespace, name)
}

fn path(verb: &str, path: &str) -> Attributes {
    Attributes { verb: verb.into(), path: path.into(), ..Default::default() }
}

/// The chain's decision where no webhook is asked.
trait Decides {
    fn authorize(&self, state: &Snapshot, user: &UserInfo, attrs: &Attributes) -> Decision;
}

impl Decides for Authorizer {
    fn authorize(&self, state: &Snapshot, user: &UserInfo, attrs: &Attributes) -> Decision {
        self.decide(state, user, attrs, &Asked::default(), Timestamp::UNIX_EPOCH).expect("no webhook in the chain")
    }
}

#[test]
fn a_rule_covers_verbs_groups_resources_subresources_names_and_paths_as_kube_matches_them() {
    let rule = Rule::read(
        &json!({"verbs": ["get", "list"], "apiGroups": ["", "apps"], "resources": ["pods", "deployments/scale", "*/status"], "resourceNames": ["web"]}),
    );
    assert!(rule.allows(&resource("get", "", "pods", "", "default", "web")));
    assert!(!rule.allows(&resource("get", "", "pods", "", "default", "db")), "another name");
    assert!(!rule.allows(&resource("delete", "", "pods", "", "default", "web")), "another verb");
    assert!(!rule.allows(&resource("get", "batch", "pods", "", "default", "web")), "another group");
    assert!(!rule.allows(&resource("get", "", "pods", "log", "default", "web")), "a subresource the rule does not name");
    assert!(rule.allows(&resource("get", "apps", "deployments", "scale", "default", "web")));
    assert!(!rule.allows(&resource("get", "apps", "deployments", "", "default", "web")), "the subresource is not the resource");
    assert!(rule.allows(&resource("get", "apps", "replicasets", "status", "default", "web")), "*/status");
    let any = Rule::read(&json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
    assert!(any.allows(&resource("deletecollection", "example.com", "widgets", "status", "", "")));
    assert!(!any.allows(&path("get", "/healthz")), "resource rules cover no path");
    let urls = Rule::read(&json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]}));
    assert!(urls.allows(&path("get", "/healthz")));
    assert!(!urls.allows(&path("get", "/healthz/etcd")));
    assert!(urls.allows(&path("get", "/apis/apps/v1")));
    assert!(!urls.allows(&path("post", "/apis/apps/v1")));
    assert!(!urls.allows(&resource("get", "", "pods", "", "", "")), "paths cover no resource");
    assert!(Rule::read(&json!({"verbs": ["get"], "nonResourceURLs": ["/api**"]})).allows(&path("get", "/apis")), "every trailing * is a wildcard");
}

fn state(p: &Policy) -> Snapshot {
    Snapshot { rbac: p.clone(), ..Default::default() }
}

fn policy() -> Policy {
    let mut p = Policy::default();
    p.put(Kind::ClusterRole, &json!({"metadata": {"name": "reader"}, "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]}));
    p.put(
        Kind::Role,
        &json!({"metadata": {"name": "cm-writer", "namespace": "dev"}, "rules": [{"verbs": ["create"], "apiGroups": [""], "resources": ["configmaps"]}]}),
    );
    p.put(
        Kind::ClusterRoleBinding,
        &json!({"metadata": {"name": "auditors-read"}, "roleRef": {"kind": "ClusterRole", "name": "reader"}, "subjects": [{"kind": "Group", "name": "auditors"}]}),
    );
    p.put(
        Kind::RoleBinding,
        &json!({"metadata": {"name": "robot-writes", "namespace": "dev"}, "roleRef": {"kind": "Role", "name": "cm-writer"},
            "subjects": [{"kind": "User", "name": "nobody"}, {"kind": "ServiceAccount", "name": "robot"}]}),
    );
    p.put(
        Kind::RoleBinding,
        &json!({"metadata": {"name": "alice-reads", "namespace": "dev"}, "roleRef": {"kind": "ClusterRole", "name": "reader"}, "subjects": [{"kind": "User", "name": "alice"}]}),
    );
    p
}

#[test]
fn bindings_grant_their_roles_to_their_subjects_cluster_wide_or_in_their_namespace() {
    let p = policy();
    let auditor = user("carol", &["auditors", "system:authenticated"]);
    assert_eq!(
        p.authorize(&auditor, &resource("list", "", "pods", "", "", "")),
        (Verdict::Allow, "RBAC: allowed by ClusterRoleBinding \"auditors-read\" of ClusterRole \"reader\" to Group \"auditors\"".into())
    );
    assert_eq!(p.authorize(&auditor, &resource("delete", "", "pods", "", "prod", "x")).0, Verdict::NoOpinion);
    let alice = user("alice", &["system:authenticated"]);
    assert_eq!(
        p.authorize(&alice, &resource("get", "", "pods", "", "dev", "x")),
        (Verdict::Allow, "RBAC: allowed by RoleBinding \"alice-reads/dev\" of ClusterRole \"reader\" to User \"alice\"".into())
    );
    assert_eq!(p.authorize(&alice, &resource("get", "", "pods", "", "prod", "x")).0, Verdict::NoOpinion, "a RoleBinding grants in its namespace only");
    assert_eq!(p.authorize(&alice, &resource("list", "", "pods", "", "", "")).0, Verdict::NoOpinion, "nor at the cluster scope");
    let robot = user("system:serviceaccount:dev:robot", &["system:serviceaccounts", "system:serviceaccounts:dev"]);
    assert_eq!(
        p.authorize(&robot, &resource("create", "", "configmaps", "", "dev", "")),
        (Verdict::Allow, "RBAC: allowed by RoleBinding \"robot-writes/dev\" of Role \"cm-writer\" to ServiceAccount \"robot/dev\"".into())
    );
    assert_eq!(p.authorize(&user("system:serviceaccount:prod:robot", &[]), &resource("create", "", "configmaps", "", "dev", "")).0, Verdict::NoOpinion);
}

#[test]
fn changes_replace_and_remove_what_they_name_and_a_missing_role_is_the_reason() {
    let mut p = policy();
    let before = p.clone();
    p.put(
        Kind::ClusterRoleBinding,
        &json!({"metadata": {"name": "auditors-read"}, "roleRef": {"kind": "ClusterRole", "name": "gone"}, "subjects": [{"kind": "Group", "name": "auditors"}]}),
    );
    let auditor = user("carol", &["auditors"]);
    assert_eq!(
        p.authorize(&auditor, &resource("list", "", "pods", "", "", "")),
        (Verdict::NoOpinion, "RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found".into())
    );
    assert_eq!(before.authorize(&auditor, &resource("list", "", "pods", "", "", "")).0, Verdict::Allow, "an earlier policy is unchanged");
    p.remove(Kind::ClusterRoleBinding, "", "auditors-read");
    assert_eq!(p.authorize(&auditor, &resource("list", "", "pods", "", "", "")), (Verdict::NoOpinion, String::new()));
    p.remove(Kind::Role, "dev", "cm-writer");
    let robot = user("system:serviceaccount:dev:robot", &[]);
    assert_eq!(p.authorize(&robot, &resource("create", "", "configmaps", "", "dev", "")).1, "RBAC: role.rbac.authorization.k8s.io \"cm-writer\" not found");
}

#[test]
fn the_chain_allows_masters_first_and_a_request_no_mode_allows_is_forbidden_with_kubes_message() {
    let rbac = Authorizer::parse("AlwaysDeny,RBAC").unwrap();
    let p = policy();
    let masters = user("admin", &["system:masters"]);
    assert!(rbac.authorize(&state(&p), &masters, &resource("delete", "", "nodes", "", "", "n1")).allowed);
    let alice = user("alice", &[]);
    let d = rbac.authorize(&state(&p), &alice, &resource("get", "", "pods", "log", "dev", "web"));
    assert_eq!(d, Decision { reason: "Everything is forbidden.".into(), ..Decision::default() });
    let e = forbidden(&alice, &resource("get", "", "pods", "log", "dev", "web"), &d.reason);
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            403,
            "pods \"web\" is forbidden: User \"alice\" cannot get resource \"pods/log\" in API group \"\" in the namespace \"dev\": Everything is forbidden."
        )
    );
    let e = forbidden(&alice, &resource("list", "apps", "deployments", "", "", ""), "");
    assert_eq!(e.message, "deployments.apps is forbidden: User \"alice\" cannot list resource \"deployments\" in API group \"apps\" at the cluster scope");
    let e = forbidden(&alice, &path("get", "/metrics"), "");
    assert_eq!(e.message, "forbidden: User \"alice\" cannot get path \"/metrics\"");
    let e = forbidden(&user("a<b>", &[]), &path("get", "/x&y"), "why <not>");
    assert_eq!(e.message, "forbidden: User \"a&lt;b&gt;\" cannot get path \"/x&amp;y\": why <not>", "escaped as kube escapes it, the reason not");
    let auditor = user("carol", &["auditors"]);
    let d = rbac.authorize(&state(&p), &auditor, &resource("list", "", "pods", "", "", ""));
    assert_eq!(
        d,
        Decision {
            allowed: true,
            reason: "RBAC: allowed by ClusterRoleBinding \"auditors-read\" of ClusterRole \"reader\" to Group \"auditors\"".into(),
            ..Decision::default()
        },
        "the reason of the mode that allows, alone"
    );
    assert!(Authorizer::parse("RBAC").unwrap().authorize(&state(&p), &alice, &resource("get", "", "pods", "", "dev", "x")).allowed);
    assert!(Authorizer::always_allow().authorize(&Snapshot::default(), &alice, &path("get", "/metrics")).allowed);

    assert_eq!(Authorizer::parse("RBAC,Bogus").unwrap_err(), "authorization-mode \"Bogus\" is not a valid mode");
    assert_eq!(Authorizer::parse("ABAC,RBAC").unwrap_err(), "authorization-mode \"ABAC\" is not implemented by kapi yet");
    assert_eq!(Authorizer::parse("Webhook,RBAC").unwrap_err(), "authorization-mode Webhook's authorization config file not passed");
    assert_eq!(Authorizer::parse("RBAC,RBAC").unwrap_err(), "authorization-mode [\"RBAC\" \"RBAC\"] has mode specified more than once");
    assert_eq!(Authorizer::parse("").unwrap_err(), "at least one authorization-mode must be passed");
}

#[test]
fn the_rules_a_user_holds_are_its_bindings_roles_in_the_namespace_and_the_cluster() {
    let p = policy();
    let rbac = Authorizer::parse("RBAC").unwrap();
    let alice = user("alice", &["auditors"]);
    let review = rbac.rules_for(&state(&p), &alice, "dev");
    let reader = Rule { verbs: vec!["get".into(), "list".into()], api_groups: vec!["".into()], resources: vec!["pods".into()], ..Default::default() };
    assert_eq!(review.resource_rules, vec![reader.clone(), reader.clone()], "the cluster's binding, then the namespace's");
    assert_eq!(rbac.rules_for(&state(&p), &alice, "prod").resource_rules, vec![reader]);
    let allow = Authorizer::parse("AlwaysAllow,AlwaysDeny").unwrap().rules_for(&state(&p), &alice, "dev");
    assert_eq!(
        (allow.resource_rules[0].resources.as_slice(), allow.non_resource_rules[0].non_resource_urls.as_slice()),
        (&["*".to_string()][..], &["*".to_string()][..])
    );
    let mut broken = policy();
    broken.remove(Kind::ClusterRole, "", "reader");
    let review = rbac.rules_for(&state(&broken), &alice, "dev");
    assert_eq!((review.resource_rules.len(), review.evaluation_error.as_str()), (0, "clusterrole.rbac.authorization.k8s.io \"reader\" not found"));
}

fn rules(v: Value) -> Vec<Rule> {
    v.as_array().unwrap().iter().map(Rule::read).collect()
}

#[test]
fn coverage_is_kubes_rule_by_atomic_rule() {
    use super::coverage::{to_json, uncovered};
    let owner = rules(json!([
        {"verbs": ["get", "list"], "apiGroups": ["apps"], "resources": ["deployments", "*/scale"]},
        {"verbs": ["*"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a", "b"]},
        {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/api/*"]}]));
    let missing = |wanted: Value| uncovered(&owner, &rules(wanted)).iter().map(to_json).collect::<Vec<_>>();
    assert!(missing(json!([{"verbs": ["list"], "apiGroups": ["apps"], "resources": ["deployments", "replicasets/scale"]}])).is_empty());
    assert!(missing(json!([{"verbs": ["delete"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["b"]}])).is_empty());
    assert!(missing(json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/api/v1"]}])).is_empty());
    assert_eq!(
        missing(
            json!([{"verbs": ["get", "watch"], "apiGroups": ["apps"], "resources": ["deployments"]}, {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}])
        ),
        [
            json!({"verbs": ["watch"], "apiGroups": ["apps"], "resources": ["deployments"]}),
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]})
        ],
        "a rule of some names does not grant all names"
    );
    assert_eq!(missing(json!([{"verbs": ["get"], "nonResourceURLs": ["/apis"]}])), [json!({"verbs": ["get"], "nonResourceURLs": ["/apis"]})]);
}

#[test]
fn the_bootstrap_policy_is_kubes_v1_33() {
    use super::bootstrap::policy;
    let all = policy();
    let count = |kind: Kind| all.iter().filter(|o| o.kind == kind).count();
    assert_eq!([count(Kind::ClusterRole), count(Kind::ClusterRoleBinding), count(Kind::Role), count(Kind::RoleBinding)], [66, 47, 7, 7]);
    for o in &all {
        assert_eq!(o.object["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"], "true");
        assert_eq!(o.object["metadata"]["labels"]["kubernetes.io/bootstrapping"], "rbac-defaults");
    }
    let view = all.iter().find(|o| o.object["metadata"]["name"] == "view").unwrap();
    assert_eq!(view.object["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"], "true");
    assert_eq!(view.object["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]["rbac.authorization.k8s.io/aggregate-to-view"], "true");
    // Each controller's role is bound to its service account in kube-system.
    let binding = all.iter().find(|o| o.kind == Kind::ClusterRoleBinding && o.object["metadata"]["name"] == "system:controller:job-controller").unwrap();
    assert_eq!(binding.object["subjects"], json!([{"kind": "ServiceAccount", "name": "job-controller", "namespace": "kube-system"}]));
}

#[test]
fn rbac_writes_grant_only_what_the_writer_holds() {
    use super::escalation::Write;
    let mut p = policy();
    p.put(
        Kind::ClusterRole,
        &json!({"metadata": {"name": "binder"}, "rules": [{"verbs": ["bind"], "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "resourceNames": ["admin-ish"]}]}),
    );
    p.put(
        Kind::ClusterRole,
        &json!({"metadata": {"name": "admin-ish"}, "rules": [{"verbs": ["*"], "apiGroups": ["", "apps"], "resources": ["pods", "deployments"]}]}),
    );
    p.put(
        Kind::RoleBinding,
        &json!({"metadata": {"name": "alice-binds", "namespace": "dev"}, "roleRef": {"kind": "ClusterRole", "name": "binder"}, "subjects": [{"kind": "User", "name": "alice"}]}),
    );
    let state = Snapshot { rbac: p, ..Default::default() };
    let check =
        super::Access { authorizer: std::sync::Arc::new(Authorizer::parse("RBAC").unwrap()), state, asked: Asked::default(), now: Timestamp::UNIX_EPOCH };
    let alice = user("alice", &["system:authenticated"]);
    let write = |kind: Kind| Write { kind, user: &alice, namespace: "dev", url_name: "" };
    let role = |rules: Value| json!({"metadata": {"name": "r", "namespace": "dev"}, "rules": rules});

    // What alice holds in dev (reading pods) she may grant.
    assert_eq!(check.check_escalation(&write(Kind::Role), &role(json!([{"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}])), None), Ok(()));
    let err = check
        .check_escalation(&write(Kind::Role), &role(json!([{"verbs": ["get", "delete", "watch"], "apiGroups": [""], "resources": ["pods", "secrets"]}, {"verbs": ["get"], "nonResourceURLs": ["/metrics"]}])), None)
        .unwrap_err();
    assert_eq!(err.code, 403);
    assert_eq!(
        err.message,
        "roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n\
         {APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\" \"watch\"]}\n\
         {APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\" \"watch\"]}\n\
         {NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}"
    );

    // Binding: a role she may bind, or one whose rules she holds; not another.
    let binding = |role: &str| json!({"metadata": {"name": "b", "namespace": "dev"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}});
    assert_eq!(check.check_escalation(&write(Kind::RoleBinding), &binding("admin-ish"), None), Ok(()), "bind is granted on it");
    assert_eq!(check.check_escalation(&write(Kind::RoleBinding), &binding("reader"), None), Ok(()), "she holds its rules");
    let mut writer = binding("cm-writer");
    writer["roleRef"]["kind"] = json!("Role");
    let err = check.check_escalation(&write(Kind::RoleBinding), &writer, None).unwrap_err();
    assert!(err.message.starts_with("rolebindings.rbac.authorization.k8s.io \"b\" is forbidden: user \"alice\""), "{}", err.message);
    assert!(err.message.ends_with("not currently held:\n{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"create\"]}"), "{}", err.message);
    let err = check.check_escalation(&write(Kind::RoleBinding), &binding("nope"), None).unwrap_err();
    assert_eq!((err.code, err.message.as_str()), (404, "clusterroles.rbac.authorization.k8s.io \"nope\" not found"));

    // An aggregation rule needs everything.
    let aggregated = json!({"metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}});
    let cluster = Write { kind: Kind::ClusterRole, user: &alice, namespace: "", url_name: "" };
    let err = check.check_escalation(&cluster, &aggregated, None).unwrap_err();
    assert_eq!(err.message, "clusterroles.rbac.authorization.k8s.io \"agg\" is forbidden: must have cluster-admin privileges to use the aggregationRule");

    // Changing only what the garbage collector changes is allowed; the masters may do anything.
    let old = role(json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]));
    let mut finalized = old.clone();
    finalized["metadata"]["finalizers"] = json!(["example.com/keep"]);
    assert_eq!(check.check_escalation(&write(Kind::Role), &finalized, Some(&old)), Ok(()));
    let admin = user("root", &["system:masters"]);
    assert_eq!(check.check_escalation(&Write { kind: Kind::ClusterRole, user: &admin, namespace: "", url_name: "" }, &aggregated, None), Ok(()));
}

#[test]
fn the_bootstrap_policy_is_in_effect_once_every_object_is_held() {
    let objects = bootstrap::policy();
    let mut held = Policy::default();
    assert!(!bootstrap::in_effect(&held, &objects));
    for o in &objects {
        held.put(o.kind, &o.object);
    }
    assert!(bootstrap::in_effect(&held, &objects));
    held.remove(Kind::RoleBinding, "kube-public", "system:controller:bootstrap-signer");
    assert!(!bootstrap::in_effect(&held, &objects));
}

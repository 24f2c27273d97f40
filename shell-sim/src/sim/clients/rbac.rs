//! The clients of a world whose server authorizes with RBAC: members (users of their own,
//! not `system:masters`, with bearer tokens of the token file) who get, list, create, patch
//! and delete configmaps, allowed or forbidden as the policy of the moment says; and an
//! administrator who keeps changing what the policy grants them (Roles, ClusterRoles and
//! their bindings, made, replaced and deleted).

use serde_json::{Value, json};

use super::{Client, Cx, Reply, labels, request, request_as};
use crate::sim::kinds::Kind;

/// Someone the token file knows who is not an administrator.
pub struct Person {
    pub token: &'static str,
    pub name: &'static str,
    pub groups: &'static [&'static str],
}

/// The members of every simulated world's token file.
pub const MEMBERS: [Person; 3] = [
    Person { token: "alice-token", name: "alice", groups: &["team"] },
    Person { token: "bob-token", name: "bob", groups: &["team", "ops"] },
    Person { token: "carol-token", name: "carol", groups: &[] },
];

/// The configmaps members work on (apart from the users').
const NAMES: u64 = 3;

pub struct Member {
    person: usize,
    namespaces: Vec<String>,
    busy: bool,
}

impl Member {
    pub fn new(person: usize, namespaces: Vec<String>) -> Member {
        Member { person, namespaces, busy: false }
    }
}

impl Client for Member {
    fn name(&self) -> String {
        format!("member-{}", MEMBERS[self.person].name)
    }

    fn wake(&mut self, cx: &mut Cx) {
        if self.busy || cx.calm {
            return;
        }
        let token = MEMBERS[self.person].token;
        let ns = cx.rng.pick(&self.namespaces).clone();
        let name = format!("member-{}", cx.rng.below(NAMES));
        let kind = Kind::ConfigMaps;
        let item = format!("{}/{name}", kind.path(Some(&ns)));
        let req = match cx.rng.below(100) {
            0..30 => request_as(token, "GET", &item, "", None, ""),
            30..45 => request_as(token, "GET", &kind.path(Some(&ns)), "", None, ""),
            45..55 => request_as(token, "GET", &kind.path(None), "", None, ""),
            55..75 => {
                let obj = kind.object(&name, labels(cx.rng), cx.rng, "member");
                request_as(token, "POST", &kind.path(Some(&ns)), "", Some(&obj), "application/json")
            }
            75..88 => request_as(token, "PATCH", &item, "", Some(&json!({"data": {"by": MEMBERS[self.person].name}})), "application/merge-patch+json"),
            _ => request_as(token, "DELETE", &item, "", None, ""),
        };
        self.busy = true;
        cx.send(0, req);
    }

    fn reply(&mut self, _tag: u64, _reply: Reply, cx: &mut Cx) {
        self.busy = false;
        cx.think(20);
    }
}

/// The administrator's roles, bindings and the roles they may name.
const ROLES: [&str; 2] = ["sim-r0", "sim-r1"];
const CLUSTER_ROLES: [&str; 2] = ["sim-c0", "sim-c1"];
const BINDINGS: [&str; 2] = ["sim-b0", "sim-b1"];
const CLUSTER_BINDINGS: [&str; 2] = ["sim-cb0", "sim-cb1"];
const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

pub struct RbacAdmin {
    namespaces: Vec<String>,
    busy: bool,
}

impl RbacAdmin {
    pub fn new(namespaces: Vec<String>) -> RbacAdmin {
        RbacAdmin { namespaces, busy: false }
    }

    /// Up to two rules about configmaps (or everything), some only for one of them.
    fn rules(cx: &mut Cx) -> Value {
        let rules: Vec<Value> = (0..cx.rng.between(1, 2))
            .map(|_| {
                let verbs: Vec<&str> = (0..cx.rng.between(1, 3)).map(|_| *cx.rng.pick(&["get", "list", "create", "patch", "delete", "*"])).collect();
                let mut rule =
                    json!({"verbs": verbs, "apiGroups": [cx.rng.pick(&["", "", "*"])], "resources": [cx.rng.pick(&["configmaps", "configmaps", "*"])]});
                if cx.rng.chance(0.2) {
                    rule["resourceNames"] = json!([format!("member-{}", cx.rng.below(NAMES))]);
                }
                rule
            })
            .collect();
        Value::Array(rules)
    }

    fn subjects(cx: &mut Cx) -> Value {
        let all = [
            json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}),
            json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"}),
            json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "carol"}),
            json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "team"}),
            json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "ops"}),
        ];
        Value::Array((0..cx.rng.between(1, 3)).map(|_| cx.rng.pick(&all).clone()).collect())
    }

    /// A role a binding names: one of the administrator's (which may not exist), or kube's `view`.
    fn role_ref(cx: &mut Cx, namespaced: bool) -> Value {
        let (kind, name) = match cx.rng.below(5) {
            0 | 1 if namespaced => ("Role", *cx.rng.pick(&ROLES)),
            0..=3 => ("ClusterRole", *cx.rng.pick(&CLUSTER_ROLES)),
            _ => ("ClusterRole", "view"),
        };
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name})
    }
}

impl Client for RbacAdmin {
    fn name(&self) -> String {
        "rbac-admin".into()
    }

    fn wake(&mut self, cx: &mut Cx) {
        if self.busy || cx.calm {
            return;
        }
        let ns = cx.rng.pick(&self.namespaces).clone();
        let (path, body) = match cx.rng.below(4) {
            0 => {
                let name = *cx.rng.pick(&ROLES);
                let body = json!({"kind": "Role", "apiVersion": "rbac.authorization.k8s.io/v1", "metadata": {"name": name, "namespace": ns}, "rules": Self::rules(cx)});
                (format!("{RBAC}/namespaces/{ns}/roles/{name}"), body)
            }
            1 => {
                let name = *cx.rng.pick(&CLUSTER_ROLES);
                let body = json!({"kind": "ClusterRole", "apiVersion": "rbac.authorization.k8s.io/v1", "metadata": {"name": name}, "rules": Self::rules(cx)});
                (format!("{RBAC}/clusterroles/{name}"), body)
            }
            2 => {
                let name = *cx.rng.pick(&BINDINGS);
                let body = json!({"kind": "RoleBinding", "apiVersion": "rbac.authorization.k8s.io/v1", "metadata": {"name": name, "namespace": ns},
                    "roleRef": Self::role_ref(cx, true), "subjects": Self::subjects(cx)});
                (format!("{RBAC}/namespaces/{ns}/rolebindings/{name}"), body)
            }
            _ => {
                let name = *cx.rng.pick(&CLUSTER_BINDINGS);
                let body = json!({"kind": "ClusterRoleBinding", "apiVersion": "rbac.authorization.k8s.io/v1", "metadata": {"name": name},
                    "roleRef": Self::role_ref(cx, false), "subjects": Self::subjects(cx)});
                (format!("{RBAC}/clusterrolebindings/{name}"), body)
            }
        };
        // A binding's role is fixed: a changed one is a binding made anew.
        let req = if cx.rng.chance(0.15) || path.contains("bindings/") && cx.rng.chance(0.2) {
            request("DELETE", &path, "", None, "")
        } else {
            request("PUT", &path, "", Some(&body), "application/json")
        };
        self.busy = true;
        cx.send(0, req);
    }

    fn reply(&mut self, _tag: u64, _reply: Reply, cx: &mut Cx) {
        self.busy = false;
        cx.think(60);
    }
}

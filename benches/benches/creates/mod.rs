//! The worlds the admission target's creates run in, shared by the criterion benchmark
//! (`hot_paths`), the instruction count (`examples/admission_instructions.rs`) and the paired
//! timing (`examples/admission_time.rs`): a simulated
//! server with the default namespace's service account, with no admission at all, with kube's
//! default plugins, and with those and ten validating admission policies on pods.

use std::sync::Arc;

use kapi_bench::objects::Kind;
use serde_json::{Value, json};

/// What a benchmark creates, by name.
pub type Body = dyn Fn(&str) -> Value;

/// The pod kapi-bench writes, in `default`.
pub fn pod(name: &str) -> Value {
    let mut p = Kind::Pod.object(name, 0);
    p["metadata"]["namespace"] = json!("default");
    p
}

/// A simulated server with the default namespace's service account, where pods can be created.
pub fn world_with_service_account() -> kapi_sim::World {
    world_with(kapi_sim::default_server())
}

/// The same with no admission plugin at all.
pub fn world_without_admission() -> kapi_sim::World {
    let mut off = kapi_sim::default_server();
    Arc::get_mut(&mut off.server).expect("the setup is not shared yet").admission = Arc::new(kapi_core::admission::Chain::default());
    world_with(off)
}

/// A simulated `setup` with the default namespace's service account.
fn world_with(setup: kapi_sim::Setup) -> kapi_sim::World {
    let mut world = kapi_sim::World::new(setup, kapi_sim::epoch(), 1);
    let sa = json!({"metadata": {"name": "default"}});
    let r = world.call("POST", "/api/v1/namespaces/default/serviceaccounts", "", Some(&sa), "application/json");
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    world
}

/// The default plugins' world with ten validating admission policies on pods, each with a
/// binding and two validations that every pod reads.
pub fn world_with_policies() -> kapi_sim::World {
    let mut world = world_with_service_account();
    for i in 0..10 {
        let policy = json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": format!("pods-{i}")},
            "spec": {
                "matchConstraints": {"resourceRules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]},
                "validations": [
                    {"expression": "object.spec.containers.all(c, !c.image.endsWith(':latest'))", "message": "pin the image"},
                    {"expression": format!("size(object.metadata.name) < {}", 64 + i)},
                ],
            },
        });
        let binding = json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": format!("pods-{i}")},
            "spec": {"policyName": format!("pods-{i}"), "validationActions": ["Deny"]},
        });
        for (path, body) in [("validatingadmissionpolicies", policy), ("validatingadmissionpolicybindings", binding)] {
            let r = world.call("POST", &format!("/apis/admissionregistration.k8s.io/v1/{path}"), "", Some(&body), "application/json");
            assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
        }
    }
    world
}

/// The pod kapi-bench writes as `world`'s admission leaves it, to be created again: what it
/// was given and what admission added, without what the server sets when it stores one.
pub fn admitted_pod(world: &mut kapi_sim::World) -> Value {
    let r = world.call("POST", "/api/v1/namespaces/default/pods", "", Some(&pod("admitted")), "application/json");
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let mut stored: Value = serde_json::from_slice(&r.body).expect("a pod");
    let metadata = stored["metadata"].as_object_mut().expect("metadata");
    for set in ["uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"] {
        metadata.remove(set);
    }
    stored.as_object_mut().expect("a pod").remove("status");
    stored
}

/// `body` created in `default`.
pub fn create(world: &mut kapi_sim::World, body: &Value) {
    let r = world.call("POST", "/api/v1/namespaces/default/pods", "", Some(body), "application/json");
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
}

/// `pod` named `name`.
pub fn renamed(pod: &Value, name: &str) -> Value {
    let mut p = pod.clone();
    p["metadata"]["name"] = json!(name);
    p
}

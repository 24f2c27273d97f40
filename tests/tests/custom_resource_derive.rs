//! A custom resource defined with the `kube` crate's `CustomResource` derive, as an operator
//! written in Rust defines one: its generated CRD installed and established, its objects
//! written, read, listed, watched and their status patched through the typed client, and the
//! CEL rule it declares enforced.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kapi_tests::Kapi;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, Config, CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(group = "kapi.dev", version = "v1", kind = "Gadget", namespaced, status = "GadgetStatus", shortname = "gd")]
#[kube(printcolumn = r#"{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}"#)]
#[kube(validation = "self.spec.size <= self.spec.max")]
pub struct GadgetSpec {
    size: i64,
    max: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    label: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct GadgetStatus {
    ready: bool,
}

async fn client(k: &Kapi) -> Client {
    let kc = Kubeconfig::read_from(k.kubeconfig()).unwrap();
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.unwrap();
    Client::try_from(config).unwrap()
}

fn gadget(name: &str, size: i64) -> Gadget {
    Gadget::new(name, GadgetSpec { size, max: 10, label: None })
}

#[tokio::test]
async fn a_derived_custom_resource_is_served() {
    let k = Kapi::start();
    let client = client(&k).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &Gadget::crd()).await.unwrap();
    let established = await_condition(crds, "gadgets.kapi.dev", conditions::is_crd_established());
    tokio::time::timeout(Duration::from_secs(20), established).await.unwrap().unwrap();

    let gadgets: Api<Gadget> = Api::namespaced(client, "default");
    // The resource is served once the new catalog is in place.
    let mut created = None;
    for _ in 0..100 {
        match gadgets.create(&PostParams::default(), &gadget("g1", 3)).await {
            Ok(g) => {
                created = Some(g);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let created = created.expect("the gadget is created");
    assert_eq!((created.spec.size, created.metadata.generation), (3, Some(1)));
    let mut stream = gadgets.watch(&WatchParams::default().timeout(10), &created.metadata.resource_version.clone().unwrap()).await.unwrap().boxed();

    let refused = gadgets.create(&PostParams::default(), &gadget("g2", 11)).await.unwrap_err();
    match refused {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
            assert_eq!(s.message, "Gadget.kapi.dev \"g2\" is invalid: <nil>: Invalid value: \"object\": failed rule: self.spec.size <= self.spec.max");
        }
        other => panic!("{other}"),
    }

    let status = serde_json::json!({"status": {"ready": true}});
    let patched = gadgets.patch_status("g1", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    assert_eq!(patched.status, Some(GadgetStatus { ready: true }));
    assert_eq!(patched.metadata.generation, Some(1), "a status change is no spec change");
    let listed = gadgets.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.iter().map(|g| g.spec.size).collect::<Vec<_>>(), vec![3]);
    match tokio::time::timeout(Duration::from_secs(5), stream.try_next()).await.unwrap().unwrap() {
        Some(WatchEvent::Modified(g)) => assert_eq!(g.status, Some(GadgetStatus { ready: true })),
        other => panic!("{other:?}"),
    }
}

//! What kube-apiserver creates when it starts: the default namespaces, the `kubernetes`
//! service in `default` and its endpoints, pointing at this server, the system priority
//! classes, the flow-control configuration (mandatory objects brought back to kube's spec), a
//! local APIService for every group version served, and, when RBAC authorizes, kube's
//! bootstrap RBAC policy, reconciled with what is stored ([`crate::authz::bootstrap`]).
//!
//! Call order: [`Bootstrap::new`], then loop on [`Bootstrap::poll`], sending each
//! [`BootstrapEffect::Kv`] to the store and feeding the answer with [`Bootstrap::handle`],
//! until [`BootstrapEffect::Done`]. Objects that already exist are left alone, except the
//! endpoints, which are brought up to date with the server's address, and the RBAC policy's,
//! which get what they miss.

use std::collections::VecDeque;
use std::sync::Arc;

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::admission::Found;
use crate::auth::apiserver_user;
use crate::authz::{self, bootstrap::PolicyObject, bootstrap::Reconciled, rbac::Kind};
use crate::catalog::{Catalog, Resource};
use crate::kv::{KvRequest, KvResult};
use crate::meta;
use crate::pipeline::Server;
use crate::rand::Rng;
use crate::registry::{DeleteOptions, FieldValidation, WriteContext, WriteEffect, WriteKind, WriteOp};
use crate::resources::DEFAULT_NAMESPACES;
use crate::resources::apiregistration::local_api_services;
use crate::resources::flowcontrol_bootstrap::{self, Keep};
use crate::resources::scheduling::{SYSTEM_CLASSES, system_class};
use crate::status::ApiError;
use crate::storage::{Outcome, StorageEffect, StorageEvent, StorageOp, StorageRequest};

/// The field manager kube-apiserver writes these objects as (and what else it writes itself,
/// through its loopback client).
pub(crate) const MANAGER: &str = "kube-apiserver";

#[derive(Debug)]
pub enum BootstrapEffect {
    Kv(KvRequest),
    /// Every object is in place, or the first error that prevented it.
    Done(Result<(), ApiError>),
}

#[derive(Clone)]
struct Item {
    res: Arc<Resource>,
    namespace: Option<String>,
    object: Value,
    existing: Existing,
}

/// What becomes of an object that exists already.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Existing {
    Keep,
    /// Replaced with the item's.
    Replace,
    /// Given what it misses of the item's (an object of the RBAC policy, of this kind).
    Reconcile(Kind),
}

/// An [`Item`] of a resource the catalog may not serve.
struct Planned {
    res: Option<Arc<Resource>>,
    namespace: Option<String>,
    object: Value,
    existing: Existing,
}

/// Where the object in hand is: being looked up, or being written.
enum Step {
    Lookup(Box<StorageOp<ApiError>>),
    Write(Box<WriteOp>),
}

pub struct Bootstrap {
    server: Arc<Server>,
    items: VecDeque<Item>,
    current: Option<(Item, Step)>,
    rng: Rng,
    done: bool,
}

impl Bootstrap {
    /// `address` and `port` are where clients inside the cluster reach this server; `catalog`
    /// is what it serves.
    pub fn new(server: Arc<Server>, catalog: &Catalog, address: &str, port: u16, cluster_ip: &str, seed: u64) -> Bootstrap {
        let get = |g: &str, r: &str| catalog.get(g, "v1", r).cloned();
        let mut items = VecDeque::new();
        for ns in DEFAULT_NAMESPACES {
            items.push_back(Planned {
                res: get("", "namespaces"),
                namespace: None,
                object: json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                existing: Existing::Keep,
            });
        }
        let labels = json!({"component": "apiserver", "provider": "kubernetes"});
        items.push_back(Planned {
            res: get("", "services"),
            namespace: Some("default".into()),
            object: json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
                "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "sessionAffinity": "None",
                    "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]}}),
            existing: Existing::Keep,
        });
        items.push_back(Planned {
            res: get("", "endpoints"),
            namespace: Some("default".into()),
            object: json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "kubernetes", "namespace": "default",
                    "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
                "subsets": [{"addresses": [{"ip": address}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]}),
            existing: Existing::Replace,
        });
        items.push_back(Planned {
            res: get("discovery.k8s.io", "endpointslices"),
            namespace: Some("default".into()),
            object: json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "kubernetes", "namespace": "default",
                    "labels": {"kubernetes.io/service-name": "kubernetes"}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": [address], "conditions": {"ready": true}}],
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}),
            existing: Existing::Replace,
        });
        for class in SYSTEM_CLASSES {
            items.push_back(Planned {
                res: get("scheduling.k8s.io", "priorityclasses"),
                namespace: None,
                object: system_class(*class),
                existing: Existing::Keep,
            });
        }
        let flow = |resource: &str, list: Vec<(Keep, Value)>| {
            let res = get("flowcontrol.apiserver.k8s.io", resource);
            let existing = |keep| if keep == Keep::Mandatory { Existing::Replace } else { Existing::Keep };
            list.into_iter().map(move |(keep, object)| Planned { res: res.clone(), namespace: None, object, existing: existing(keep) })
        };
        items.extend(flow("prioritylevelconfigurations", flowcontrol_bootstrap::priority_levels()));
        items.extend(flow("flowschemas", flowcontrol_bootstrap::flow_schemas()));
        let services = get("apiregistration.k8s.io", "apiservices");
        for object in local_api_services(catalog) {
            items.push_back(Planned { res: services.clone(), namespace: None, object, existing: Existing::Keep });
        }
        // kube runs the `rbac/bootstrap-roles` hook only where RBAC authorizes.
        if server.authorizer.load().uses_rbac() {
            for PolicyObject { kind, object } in authz::bootstrap::policy() {
                let namespace = meta::at(&object, &["metadata", "namespace"]).and_then(Value::as_str).map(str::to_string);
                items.push_back(Planned { res: get("rbac.authorization.k8s.io", kind.resource()), namespace, object, existing: Existing::Reconcile(kind) });
            }
        }
        // What `--runtime-config` turned off is not created, as kube's post-start hooks skip it.
        let items = items.into_iter().filter_map(|p| Some(Item { res: p.res?, namespace: p.namespace, object: p.object, existing: p.existing })).collect();
        Bootstrap { server, items, current: None, rng: Rng::new(seed), done: false }
    }

    fn context(prefix: &str, item: &Item, now: Timestamp, name: Option<String>) -> WriteContext {
        WriteContext {
            now,
            namespace: item.namespace.clone(),
            name,
            subresource: None,
            dry_run: false,
            field_manager: MANAGER.into(),
            field_validation: FieldValidation::Strict,
            body_findings: Default::default(),
            prefix: prefix.to_string(),
            user: apiserver_user(),
            access: None,
            admission: Default::default(),
            webhooks: Default::default(),
            policies: Default::default(),
            mutating_policies: Default::default(),
            catalog: None,
            equivalents: Vec::new(),
        }
    }

    pub fn poll(&mut self, now: Timestamp) -> Option<BootstrapEffect> {
        loop {
            if self.done {
                return None;
            }
            let Some((item, step)) = self.current.as_mut() else {
                let Some(item) = self.items.pop_front() else {
                    self.done = true;
                    return Some(BootstrapEffect::Done(Ok(())));
                };
                let ns = item.namespace.as_deref();
                let key = crate::storage::keys::object_key(&self.server.storage_root(&item.res), ns, crate::meta::name(&item.object));
                self.current = Some((item, Step::Lookup(Box::new(StorageOp::new(StorageRequest::Get { key, revision: 0 })))));
                continue;
            };
            match step {
                Step::Lookup(op) => match op.poll(now)? {
                    StorageEffect::Kv(req) => return Some(BootstrapEffect::Kv(req)),
                    StorageEffect::Done(Ok(Outcome::Found(found))) => {
                        let kind = match (found, item.existing) {
                            (None, _) => WriteKind::Create(item.object.clone()),
                            (Some(_), Existing::Replace) => WriteKind::Update(item.object.clone()),
                            (Some(kv), Existing::Reconcile(kind)) => {
                                let stored = match crate::registry::decode_stored(&item.res, &kv) {
                                    Ok(stored) => stored,
                                    Err(e) => {
                                        self.done = true;
                                        return Some(BootstrapEffect::Done(Err(e)));
                                    }
                                };
                                match authz::bootstrap::reconcile(kind, &stored, &item.object) {
                                    Reconciled::Update(object) => WriteKind::Update(object),
                                    Reconciled::Recreate => {
                                        // Deleted, then created as it is in the policy.
                                        self.items.push_front(Item { existing: Existing::Keep, ..item.clone() });
                                        WriteKind::Delete(DeleteOptions { precondition_uid: Some(meta::uid(&stored).to_string()), ..Default::default() })
                                    }
                                    Reconciled::Unchanged => {
                                        self.current = None;
                                        continue;
                                    }
                                }
                            }
                            (Some(_), Existing::Keep) => {
                                self.current = None;
                                continue;
                            }
                        };
                        let name = (!matches!(kind, WriteKind::Create(_))).then(|| crate::meta::name(&item.object).to_string());
                        let ctx = Self::context(&self.server.prefix, item, now, name);
                        *step = Step::Write(Box::new(WriteOp::new(item.res.clone(), ctx, kind, Found::default(), Rng::new(self.rng.next_u64()))));
                    }
                    StorageEffect::Done(r) => {
                        self.done = true;
                        let gr = item.res.info.group_resource();
                        let e = match r {
                            Err(e) => crate::registry::storage_error(e, &gr, ""),
                            Ok(o) => ApiError::internal(format!("unexpected storage outcome {o:?}")),
                        };
                        return Some(BootstrapEffect::Done(Err(e)));
                    }
                    StorageEffect::Transform(_) => unreachable!("a read does not transform"),
                },
                Step::Write(op) => match op.poll(now)? {
                    WriteEffect::Kv(req) => return Some(BootstrapEffect::Kv(req)),
                    // What starts with the server is built in: no webhook converts it.
                    WriteEffect::Convert(_) => op.converted(Err("no conversion webhook is called at start".into())),
                    WriteEffect::Admit(calls) => op.admitted(calls.iter().map(|_| Err("no admission webhook is called at start".into())).collect()),
                    WriteEffect::Provision(_) => op.provisioned(Err(ApiError::internal("the server makes no request of its own at start"))),
                    WriteEffect::Done(Ok(_)) => self.current = None,
                    WriteEffect::Done(Err(e)) => {
                        self.done = true;
                        return Some(BootstrapEffect::Done(Err(e)));
                    }
                },
            }
        }
    }

    pub fn handle(&mut self, now: Timestamp, result: KvResult) {
        match self.current.as_mut() {
            Some((_, Step::Lookup(op))) => op.handle(now, StorageEvent::Kv(result)),
            Some((_, Step::Write(op))) => op.handle(now, result),
            None => {}
        }
    }
}

//! Criterion micro-benchmarks of kapi-core's hot paths, on the pod kapi-bench writes:
//! JSON decode/encode, strategic merge patch, server-side apply, managed fields of a create,
//! a whole create through the core (with admission off, and with ten validating admission
//! policies), selector matching, one watch event dispatched to 1, 100 and
//! 10,000 watchers, a LIST body of 10,000 pods, a stored pod decoded for the watch cache, and
//! an RBAC decision among 110 and among 11,000 bindings.
//!
//! `cargo bench -p kapi-bench --bench hot_paths`. They run on jemalloc, as the `kapi` binary
//! does: much of a request's cost is allocation, and glibc's malloc would measure another one.

use std::sync::Arc;

use bytes::Bytes;
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use jiff::{SignedDuration, Timestamp};
use kapi_core::auth::UserInfo;
use kapi_core::authz::rbac::Kind as RbacKind;
use kapi_core::authz::{Attributes, Authorizer, Policy, Snapshot};
use kapi_core::cache::{CacheEffect, CacheEvent, CachedObject, WatchCache, WatchParams, WatchStart, WatcherId};
use kapi_core::catalog::Resource;
use kapi_core::codec::{self, Format, Output, View};
use kapi_core::kv::{Event, EventKind, KeyValue, KvRequest, KvResponse, Model, RangeRequest, WatchResponse};
use kapi_core::pipeline::{ListBody, Page};
use kapi_core::resources::{Settings, catalog};
use kapi_core::schema::schema;
use kapi_core::selector::{FieldSelector, LabelSelector};
use kapi_core::ssa::Typing;
use serde_json::{Value, json};

mod creates;

use creates::{Body, pod, world_with_service_account};

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const POD_DEF: &str = "io.k8s.api.core.v1.Pod";

fn now() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().expect("a timestamp")
}

fn pods() -> Arc<Resource> {
    catalog(&Settings::default()).get("", "v1", "pods").expect("pods are built in").clone()
}

fn codecs(c: &mut Criterion) {
    let value = pod("bench-000000");
    let bytes = codec::encode(&value, Format::Json).expect("encodes");
    let mut g = c.benchmark_group("pod_json");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("decode", |b| b.iter(|| codec::decode(&bytes, Format::Json).expect("decodes")));
    // What a create or update decodes with (unless `fieldValidation=Ignore`): repeated keys noticed.
    g.bench_function("decode_strict", |b| b.iter(|| codec::strict::decode(&bytes).expect("decodes")));
    g.bench_function("encode", |b| b.iter(|| codec::encode(&value, Format::Json).expect("encodes")));
    g.finish();
}

fn patches(c: &mut Criterion) {
    let def = schema().get(POD_DEF).expect("the pod schema");
    let live = pod("bench-000000");
    let smp = json!({
        "metadata": {"labels": {"churn": "1"}},
        "spec": {"containers": [{"name": "server", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53", "env": [{"name": "LOG_LEVEL", "value": "debug"}]}]},
    });
    c.bench_function("strategic_merge_patch/pod", |b| b.iter(|| kapi_core::patch::strategic_merge_patch(&live, &smp, def).expect("patches")));

    let by = kapi_core::ssa::Applier { typing: Typing::BuiltIn, group_version: "v1", subresource: "", manager: "bench", force: false, now: now() };
    let applied = kapi_core::ssa::apply(None, &live, &by).expect("applies");
    let mut config = live.clone();
    config["spec"]["containers"][0]["image"] = json!("registry.k8s.io/e2e-test-images/agnhost:2.53");
    c.bench_function("server_side_apply/pod", |b| b.iter(|| kapi_core::ssa::apply(Some(&applied), &config, &by).expect("applies")));
    c.bench_function("managed_fields/create_pod", |b| {
        b.iter_batched(|| live.clone(), |mut p| kapi_core::ssa::record_update(None, &mut p, Typing::BuiltIn, "kapi-bench", None, now()), BatchSize::SmallInput)
    });
}

/// A pod create through the request machine, registry, admission, storage protocol and watch
/// cache, against `kv::Model`: the core's whole CPU cost of a create, without TLS, HTTP or disk.
fn create(c: &mut Criterion) {
    let mut world = world_with_service_account();
    let mut n = 0u64;
    c.bench_function("create/pod_through_the_core", |b| {
        b.iter(|| {
            n += 1;
            creates::create(&mut world, &pod(&format!("bench-{n:08}")))
        })
    });
}

/// The admission target's creates: with no admission plugin at all, the pod as kapi-bench
/// writes it and the pod as kube's default plugins leave it (its service account's token
/// volume and mounts, tolerations, priority: the same object stored, so that the difference
/// is admission's own work); and with those plugins and ten validating admission policies on
/// pods, each with a binding (the plugins alone: `create/pod_through_the_core`).
fn create_admitted(c: &mut Criterion) {
    let mut policies = creates::world_with_policies();
    let admitted = creates::admitted_pod(&mut policies);
    let mut n = 0u64;
    let plain: fn(&str) -> Value = pod;
    let as_admitted = move |name: &str| creates::renamed(&admitted, name);
    let runs: [(&str, kapi_sim::World, &Body); 3] = [
        ("create/pod_admission_off", creates::world_without_admission(), &plain),
        ("create/pod_admission_off_as_admitted", creates::world_without_admission(), &as_admitted),
        ("create/pod_with_10_policies", policies, &plain),
    ];
    for (name, mut world, body) in runs {
        c.bench_function(name, |b| {
            b.iter(|| {
                n += 1;
                creates::create(&mut world, &body(&format!("bench-{n:08}")))
            })
        });
    }
}

/// A stored pod (as a create through the core stored it: defaults, managed fields, the service
/// account's volume) read into the watch cache, as for every write and every object of the
/// cache's initial LIST.
fn cache_object(c: &mut Criterion) {
    let mut world = world_with_service_account();
    let r = world.call("POST", "/api/v1/namespaces/default/pods", "", Some(&pod("bench-000000")), "application/json");
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let KvResponse::Range(read) = world.apply(&KvRequest::Range(RangeRequest::key("/registry/pods/default/bench-000000"))).expect("reads") else {
        panic!("a range answers a range")
    };
    let kv = read.kvs.into_iter().next().expect("the pod is stored");
    let res = pods();
    let mut g = c.benchmark_group("cache_object");
    g.throughput(Throughput::Bytes(kv.value.len() as u64));
    g.bench_function("stored_pod", |b| b.iter(|| CachedObject::from_kv(&res, &kv).expect("a pod")));
    g.finish();
}

fn selectors(c: &mut Criterion) {
    let labels = [("app", "kapi-bench"), ("tier", "backend"), ("pod-template-hash", "7d9f8b6c5d")];
    let label = LabelSelector::parse("app=kapi-bench,tier in (backend,frontend),!canary").expect("parses");
    let fields = [("metadata.name", "bench-000000".to_string()), ("metadata.namespace", "default".to_string()), ("spec.nodeName", "node-1".to_string())];
    let field = FieldSelector::parse("spec.nodeName=node-1,metadata.namespace!=kube-system").expect("parses");
    c.bench_function("selector/label_match", |b| b.iter(|| label.matches(&labels)));
    c.bench_function("selector/field_match", |b| b.iter(|| field.matches(&fields)));
}

/// A pods cache that has listed an empty store, is watching, and has `watchers` live watchers
/// of the JSON stream.
fn cache_with(watchers: u64) -> WatchCache {
    let mut cache = WatchCache::new(pods(), Bytes::from_static(b"/registry/pods/"), 2048);
    let mut model = Model::new();
    while let Some(e) = cache.poll(now()) {
        if let CacheEffect::Kv(req) = e {
            let (r, _) = model.apply(now(), &req);
            cache.handle(now(), CacheEvent::Kv(r));
        }
    }
    for id in 0..watchers {
        let params = WatchParams {
            namespace: None,
            labels: LabelSelector::default(),
            fields: FieldSelector::default(),
            start: WatchStart::After(model.revision()),
            bookmarks: false,
            output: Output { format: Format::Json, view: View::Object },
            deadline: now() + SignedDuration::from_secs(3600),
        };
        cache.handle(now(), CacheEvent::Register { id: WatcherId(id), params });
    }
    while cache.poll(now()).is_some() {}
    assert_eq!(cache.watcher_count(), watchers as usize);
    cache
}

/// The store's event for writing the pod at `revision`.
fn pod_event(value: &Bytes, revision: i64) -> WatchResponse {
    let kv = KeyValue {
        key: Bytes::from_static(b"/registry/pods/default/bench-000000"),
        value: value.clone(),
        create_revision: 2,
        mod_revision: revision,
        version: revision - 1,
        lease: 0,
    };
    WatchResponse::Events { header_revision: revision, events: vec![Event { kind: EventKind::Put, kv, prev_kv: None }] }
}

fn dispatch(c: &mut Criterion) {
    let value = codec::encode(&pod("bench-000000"), Format::Json).expect("encodes");
    let mut g = c.benchmark_group("watch_cache_dispatch");
    for watchers in [1u64, 100, 10_000] {
        let mut cache = cache_with(watchers);
        let mut revision = 1;
        g.throughput(Throughput::Elements(watchers));
        g.bench_with_input(BenchmarkId::from_parameter(watchers), &watchers, |b, _| {
            b.iter(|| {
                revision += 1;
                cache.handle(now(), CacheEvent::Watch(pod_event(&value, revision)));
                let mut delivered = 0;
                while let Some(e) = cache.poll(now()) {
                    if let CacheEffect::Deliver { ids, .. } = e {
                        delivered += ids.len() as u64;
                    }
                }
                assert_eq!(delivered, watchers);
            })
        });
    }
    g.finish();
}

fn list_encoding(c: &mut Criterion) {
    let res = pods();
    let items: Vec<Arc<CachedObject>> = (0..10_000)
        .map(|i| {
            let name = format!("bench-{i:06}");
            Arc::new(CachedObject::new(&res, Bytes::from(format!("/registry/pods/default/{name}")), 100 + i, &pod(&name)))
        })
        .collect();
    let page = Page { items, revision: 10_100, continue_token: None, remaining: None };
    let body_len = |page: &Page| {
        let mut body = ListBody::new(res.clone(), Output { format: Format::Json, view: View::Object }, page.clone(), now()).expect("a list body");
        std::iter::from_fn(|| body.next_chunk()).map(|c| c.len() as u64).sum::<u64>()
    };
    let mut g = c.benchmark_group("list_encoding");
    g.throughput(Throughput::Bytes(body_len(&page)));
    g.sample_size(20);
    g.bench_function("json/10000_pods", |b| b.iter_batched(|| page.clone(), |p| body_len(&p), BatchSize::LargeInput));
    g.finish();
}

/// A policy of `namespaces` namespaces with 10 RoleBindings each (of the `view` ClusterRole to
/// a user of their own and to one of 10 teams, bound in every namespace) and `cluster`
/// ClusterRoleBindings (to a user of their own each).
fn rbac_policy(namespaces: usize, cluster: usize) -> Policy {
    let mut p = Policy::default();
    let view = json!({"metadata": {"name": "view"}, "rules": [
        {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["configmaps", "services", "secrets"]},
        {"verbs": ["get", "list", "watch"], "apiGroups": ["", "apps"], "resources": ["pods", "deployments", "replicasets"]}]});
    p.put(RbacKind::ClusterRole, &view);
    for n in 0..namespaces {
        for b in 0..10 {
            let binding = json!({"metadata": {"name": format!("rb-{b}"), "namespace": format!("ns-{n}")}, "roleRef": {"kind": "ClusterRole", "name": "view"},
                "subjects": [{"kind": "User", "name": format!("user-{n}-{b}")}, {"kind": "Group", "name": format!("team-{b}")}]});
            p.put(RbacKind::RoleBinding, &binding);
        }
    }
    for c in 0..cluster {
        let binding = json!({"metadata": {"name": format!("crb-{c}")}, "roleRef": {"kind": "ClusterRole", "name": "view"}, "subjects": [{"kind": "User", "name": format!("admin-{c}")}]});
        p.put(RbacKind::ClusterRoleBinding, &binding);
    }
    p
}

fn rbac(c: &mut Criterion) {
    let mut g = c.benchmark_group("rbac_decision");
    let authorizer = Authorizer::parse("RBAC").expect("a mode");
    let user = UserInfo { name: "user-7-3".into(), groups: vec!["team-3".into(), "system:authenticated".into()], ..Default::default() };
    let read = |resource: &str| Attributes {
        verb: "get".into(),
        group: "apps".into(),
        resource: resource.into(),
        namespace: "ns-7".into(),
        name: "web".into(),
        resource_request: true,
        ..Default::default()
    };
    let (allowed, denied) = (read("deployments"), read("statefulsets"));
    let (asked, now) = (kapi_core::authz::Asked::default(), jiff::Timestamp::UNIX_EPOCH);
    for (namespaces, cluster) in [(10, 10), (1_000, 1_000)] {
        let p = Snapshot { rbac: rbac_policy(namespaces, cluster), ..Default::default() };
        let bindings = format!("{}", namespaces * 10 + cluster);
        g.bench_with_input(BenchmarkId::new("allowed", &bindings), &p, |b, p| b.iter(|| authorizer.decide(p, &user, &allowed, &asked, now)));
        g.bench_with_input(BenchmarkId::new("denied", &bindings), &p, |b, p| b.iter(|| authorizer.decide(p, &user, &denied, &asked, now)));
    }
    g.finish();
}

criterion_group!(benches, codecs, patches, create, create_admitted, cache_object, selectors, dispatch, list_encoding, rbac);
criterion_main!(benches);

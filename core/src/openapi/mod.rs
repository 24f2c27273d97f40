//! The OpenAPI documents (`/openapi/v2`, `/openapi/v3` and its per-group-version documents),
//! generated from the catalog and the same type definitions every other part uses. kubectl
//! reads them for `explain`, for client-side apply's patch strategies, and to learn that the
//! server validates fields.

mod gnostic;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use sha2::Digest;

use crate::catalog::{Catalog, Resource};
use crate::schema::schema;

pub use gnostic::encode as v2_protobuf;

pub const KUBE_VERSION: &str = "v1.33.0";

/// The media types `/openapi/v2` is served in as protobuf (the second is the older spelling).
pub const V2_PROTOBUF: [&str; 2] = ["application/com.github.proto-openapi.spec.v2.v1.0+protobuf", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"];

const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";
const RESOURCE_LIST: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList";

/// A definition as served: kapi's protobuf annotations removed.
fn served(def: &Value) -> Value {
    match def {
        Value::Object(m) => Value::Object(m.iter().filter(|(k, _)| !k.starts_with("x-kapi-")).map(|(k, v)| (k.clone(), served(v))).collect()),
        Value::Array(a) => Value::Array(a.iter().map(served).collect()),
        other => other.clone(),
    }
}

fn group_name_part(group: &str) -> String {
    let first = group.split('.').next().unwrap_or("");
    let base = if first.is_empty() { "core" } else { first };
    let mut c = base.chars();
    c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
}

fn cap(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
}

fn tag(r: &Resource) -> String {
    let g = r.info.group.split('.').next().unwrap_or("");
    format!("{}_{}", if g.is_empty() { "core" } else { g }, r.info.version)
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

fn query(name: &str, ty: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "type": ty, "uniqueItems": true, "description": description})
}

fn list_params() -> Vec<Value> {
    vec![
        query("allowWatchBookmarks", "boolean", "allowWatchBookmarks requests watch events with type \"BOOKMARK\"."),
        query("continue", "string", "The continue option should be set when retrieving more results from the server."),
        query("fieldSelector", "string", "A selector to restrict the list of returned objects by their fields. Defaults to everything."),
        query("labelSelector", "string", "A selector to restrict the list of returned objects by their labels. Defaults to everything."),
        query("limit", "integer", "limit is a maximum number of responses to return for a list call."),
        query("resourceVersion", "string", "resourceVersion sets a constraint on what resource versions a request may be served from."),
        query("resourceVersionMatch", "string", "resourceVersionMatch determines how resourceVersion is applied to list calls."),
        query("sendInitialEvents", "boolean", "`sendInitialEvents=true` may be set together with `watch=true`."),
        query("timeoutSeconds", "integer", "Timeout for the list/watch call."),
        query("watch", "boolean", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications."),
    ]
}

fn write_params(patch: bool) -> Vec<Value> {
    let mut p = vec![
        query(
            "dryRun",
            "string",
            "When present, indicates that modifications should not be persisted. Valid values are: - All: all dry run stages will be processed",
        ),
        query("fieldManager", "string", "fieldManager is a name associated with the actor or entity that is making these changes."),
        query(
            "fieldValidation",
            "string",
            "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict",
        ),
    ];
    if patch {
        p.push(query(
            "force",
            "boolean",
            "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people.",
        ));
    }
    p
}

fn delete_params() -> Vec<Value> {
    vec![
        query("dryRun", "string", "When present, indicates that modifications should not be persisted."),
        query("gracePeriodSeconds", "integer", "The duration in seconds before the object should be deleted."),
        query("orphanDependents", "boolean", "Deprecated: please use the PropagationPolicy."),
        query("propagationPolicy", "string", "Whether and how garbage collection will be performed."),
    ]
}

fn body(def: &str) -> Value {
    json!({"name": "body", "in": "body", "required": true, "schema": {"$ref": format!("#/definitions/{def}")}})
}

fn ok(def: &str) -> Value {
    json!({"200": {"description": "OK", "schema": {"$ref": format!("#/definitions/{def}")}}, "401": {"description": "Unauthorized"}})
}

/// One operation (swagger 2.0).
#[allow(clippy::too_many_arguments)]
fn op(r: &Resource, action: &str, id: String, params: Vec<Value>, responses: Value, kind: (&str, &str, &str), consumes: &[&str]) -> Value {
    let mut m = Map::new();
    m.insert("description".into(), json!(format!("{action} {}", r.info.kind)));
    if !consumes.is_empty() {
        m.insert("consumes".into(), json!(consumes));
    }
    m.insert("produces".into(), json!(["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"]));
    m.insert("schemes".into(), json!(["https"]));
    m.insert("tags".into(), json!([tag(r)]));
    m.insert("operationId".into(), json!(id));
    if !params.is_empty() {
        m.insert("parameters".into(), Value::Array(params));
    }
    m.insert("responses".into(), responses);
    m.insert("x-kubernetes-action".into(), json!(action));
    m.insert("x-kubernetes-group-version-kind".into(), gvk(kind.0, kind.1, kind.2));
    Value::Object(m)
}

fn base_path(r: &Resource) -> String {
    if r.info.group.is_empty() { format!("/api/{}", r.info.version) } else { format!("/apis/{}/{}", r.info.group, r.info.version) }
}

/// The paths of one resource, kube's way (collection, item, subresources, watch).
fn resource_paths(r: &Resource, paths: &mut BTreeMap<String, Value>) {
    let i = &r.info;
    let base = base_path(r);
    let prefix = format!("{}{}", group_name_part(&i.group), cap(&i.version));
    let scoped = if i.namespaced { format!("Namespaced{}", i.kind) } else { i.kind.to_string() };
    let kind = (i.group.as_str(), i.version.as_str(), i.kind.as_str());
    let def = i.definition.as_str();
    let list_def = match r.strategy.openapi_definitions() {
        Some(custom) => custom.list.0.clone(),
        None => schema().for_gvk(&i.group, &i.version, &format!("{}List", i.kind)).map(|d| d.name.clone()).unwrap_or_else(|| def.to_string()),
    };
    let ns_param = json!({"name": "namespace", "in": "path", "required": true, "type": "string", "uniqueItems": true, "description": "object name and auth scope, such as for teams and projects"});
    let name_param = |what: &str| json!({"name": "name", "in": "path", "required": true, "type": "string", "uniqueItems": true, "description": format!("name of the {what}")});
    let pretty = query("pretty", "string", "If 'true', then the output is pretty printed.");
    let collection = if i.namespaced { format!("{base}/namespaces/{{namespace}}/{}", i.resource) } else { format!("{base}/{}", i.resource) };
    let scope_params = if i.namespaced { vec![ns_param.clone(), pretty.clone()] } else { vec![pretty.clone()] };

    if !i.stored() {
        let mut post = Map::new();
        post.insert("post".into(), op(r, "post", format!("create{prefix}{scoped}"), [vec![body(def)], write_params(false)].concat(), ok(def), kind, &[]));
        post.insert("parameters".into(), Value::Array(scope_params));
        paths.insert(collection, Value::Object(post));
        return;
    }

    // The operations of the verbs the resource serves (namespaces have no deletecollection).
    let mut coll = Map::new();
    if i.has_verb("list") {
        coll.insert("get".into(), op(r, "list", format!("list{prefix}{scoped}"), list_params(), ok(&list_def), kind, &[]));
    }
    if i.has_verb("create") {
        coll.insert("post".into(), op(r, "post", format!("create{prefix}{scoped}"), [vec![body(def)], write_params(false)].concat(), ok(def), kind, &[]));
    }
    if i.has_verb("deletecollection") {
        let mut dc = delete_params();
        dc.insert(0, body(DELETE_OPTIONS));
        dc.extend(list_params().into_iter().filter(|p| p["name"] != "watch" && p["name"] != "allowWatchBookmarks"));
        coll.insert("delete".into(), op(r, "deletecollection", format!("delete{prefix}Collection{scoped}"), dc, ok(STATUS), kind, &[]));
    }
    coll.insert("parameters".into(), Value::Array(scope_params.clone()));
    paths.insert(collection.clone(), Value::Object(coll));

    let mut item = Map::new();
    if i.has_verb("get") {
        item.insert("get".into(), op(r, "get", format!("read{prefix}{scoped}"), vec![], ok(def), kind, &[]));
    }
    if i.has_verb("update") {
        item.insert("put".into(), op(r, "put", format!("replace{prefix}{scoped}"), [vec![body(def)], write_params(false)].concat(), ok(def), kind, &[]));
    }
    let patch_types = ["application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"];
    if i.has_verb("patch") {
        item.insert(
            "patch".into(),
            op(r, "patch", format!("patch{prefix}{scoped}"), [vec![body(PATCH)], write_params(true)].concat(), ok(def), kind, &patch_types),
        );
    }
    if i.has_verb("delete") {
        let mut del = delete_params();
        del.insert(0, body(DELETE_OPTIONS));
        item.insert("delete".into(), op(r, "delete", format!("delete{prefix}{scoped}"), del, ok(STATUS), kind, &[]));
    }
    let mut item_params = vec![name_param(&i.kind)];
    item_params.extend(scope_params.clone());
    item.insert("parameters".into(), Value::Array(item_params.clone()));
    paths.insert(format!("{collection}/{{name}}"), Value::Object(item));

    for s in &i.subresources {
        let sub_def = schema().for_gvk(&s.group, &s.version, &s.kind).map(|d| d.name.clone()).unwrap_or_else(|| def.to_string());
        let sub_kind = (s.group.as_str(), s.version.as_str(), s.kind.as_str());
        let sname = cap(&s.name);
        let mut m = Map::new();
        for verb in &s.verbs {
            let (method, action, id, params, consumes): (&str, &str, String, Vec<Value>, &[&str]) = match verb.as_str() {
                "get" => ("get", "get", format!("read{prefix}{scoped}{sname}"), vec![], &[]),
                "update" => ("put", "put", format!("replace{prefix}{scoped}{sname}"), [vec![body(&sub_def)], write_params(false)].concat(), &[]),
                "patch" => ("patch", "patch", format!("patch{prefix}{scoped}{sname}"), [vec![body(PATCH)], write_params(true)].concat(), &patch_types),
                "create" => ("post", "post", format!("create{prefix}{scoped}{sname}"), [vec![body(&sub_def)], write_params(false)].concat(), &[]),
                _ => continue,
            };
            m.insert(method.into(), op(r, action, id, params, ok(&sub_def), sub_kind, consumes));
        }
        m.insert("parameters".into(), Value::Array(item_params.clone()));
        paths.insert(format!("{collection}/{{name}}/{}", s.name), Value::Object(m));
    }

    if i.namespaced && i.has_verb("list") {
        let mut all = Map::new();
        all.insert("get".into(), op(r, "list", format!("list{prefix}{}ForAllNamespaces", i.kind), list_params(), ok(&list_def), kind, &[]));
        paths.insert(format!("{base}/{}", i.resource), Value::Object(all));
    }
    if i.has_verb("watch") {
        let watch_base = if i.namespaced { format!("{base}/watch/namespaces/{{namespace}}/{}", i.resource) } else { format!("{base}/watch/{}", i.resource) };
        let mut w = Map::new();
        w.insert("get".into(), op(r, "watchlist", format!("watch{prefix}{scoped}List"), list_params(), ok(WATCH_EVENT), kind, &[]));
        w.insert("parameters".into(), Value::Array(scope_params));
        paths.insert(watch_base.clone(), Value::Object(w));
        let mut wi = Map::new();
        wi.insert("get".into(), op(r, "watch", format!("watch{prefix}{scoped}"), list_params(), ok(WATCH_EVENT), kind, &[]));
        wi.insert("parameters".into(), Value::Array(item_params));
        paths.insert(format!("{watch_base}/{{name}}"), Value::Object(wi));
    }
}

/// The group-version discovery path (`GET /apis/<g>/<v>/`).
fn discovery_path(group: &str, version: &str, paths: &mut BTreeMap<String, Value>) {
    let base = if group.is_empty() { format!("/api/{version}/") } else { format!("/apis/{group}/{version}/") };
    let id = format!("get{}{}APIResources", group_name_part(group), cap(version));
    paths.insert(
        base,
        json!({"get": {"description": "get available resources", "consumes": ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"],
            "produces": ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"], "schemes": ["https"],
            "operationId": id, "responses": {"200": {"description": "OK", "schema": {"$ref": format!("#/definitions/{RESOURCE_LIST}")}}, "401": {"description": "Unauthorized"}}}}),
    );
}

/// `/openapi/v2`.
pub fn v2(catalog: &Catalog) -> Value {
    let mut paths = BTreeMap::new();
    for r in catalog.resources() {
        resource_paths(r, &mut paths);
    }
    for g in catalog.groups() {
        for v in catalog.versions(g) {
            discovery_path(g, v, &mut paths);
        }
    }
    let mut definitions: Map<String, Value> = schema().raw_definitions().iter().map(|(k, v)| (k.clone(), served(v))).collect();
    for custom in catalog.resources().filter_map(|r| r.strategy.openapi_definitions()) {
        definitions.insert(custom.object.0.clone(), custom.object_v2.clone());
        definitions.insert(custom.list.0.clone(), custom.list.1.clone());
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": KUBE_VERSION},
        "paths": paths,
        "definitions": definitions,
        "securityDefinitions": {"BearerToken": {"description": "Bearer Token authentication", "type": "apiKey", "name": "authorization", "in": "header"}},
        "security": [{"BearerToken": []}],
    })
}

/// The `/openapi/v3` path of a group version's document (`api/v1`, `apis/apps/v1`).
pub fn v3_key(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

/// The `/openapi/v3` index of documents of the given hashes, by path.
pub fn v3_index<'a>(hashes: impl IntoIterator<Item = (&'a String, &'a String)>) -> Value {
    let paths: Map<String, Value> =
        hashes.into_iter().map(|(k, hash)| (k.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{k}?hash={hash}")}))).collect();
    json!({"paths": paths})
}

/// The `?hash=` of a document (upper-case hex SHA-512, as kube-apiserver computes it).
pub fn hash(doc: &[u8]) -> String {
    sha2::Sha512::digest(doc).iter().map(|b| format!("{b:02X}")).collect()
}

/// Definitions reachable from `roots`.
fn reachable(roots: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    let raw = schema().raw_definitions();
    let mut seen = BTreeSet::new();
    let mut stack: Vec<String> = roots.into_iter().collect();
    while let Some(name) = stack.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        if let Some(def) = raw.get(&name) {
            collect_refs(def, &mut stack);
        }
    }
    seen
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref")
                && let Some(n) = r.strip_prefix("#/definitions/")
            {
                out.push(n.to_string());
            }
            m.values().for_each(|x| collect_refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

/// A swagger-2.0 schema in OpenAPI 3 form: component references, and `allOf` around
/// references that carry other keywords.
fn to_v3_schema(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out: Map<String, Value> = m.iter().filter(|(k, _)| !k.starts_with("x-kapi-")).map(|(k, x)| (k.clone(), to_v3_schema(x))).collect();
            if let Some(Value::String(r)) = out.get("$ref").cloned() {
                let r = r.replace("#/definitions/", "#/components/schemas/");
                if out.len() > 1 {
                    out.remove("$ref");
                    out.insert("allOf".into(), json!([{"$ref": r}]));
                } else {
                    out.insert("$ref".into(), json!(r));
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(to_v3_schema).collect()),
        other => other.clone(),
    }
}

/// A swagger-2.0 operation in OpenAPI 3 form.
fn to_v3_operation(op: &Value) -> Value {
    let mut out = Map::new();
    let mut params = Vec::new();
    let mut request_body = None;
    for p in op.get("parameters").and_then(Value::as_array).into_iter().flatten() {
        if p["in"] == "body" {
            let schema = to_v3_schema(&p["schema"]);
            let types: Vec<String> = op
                .get("consumes")
                .and_then(Value::as_array)
                .map(|c| c.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_else(|| vec!["*/*".into()]);
            let content: Map<String, Value> = types.into_iter().map(|t| (t, json!({"schema": schema.clone()}))).collect();
            request_body = Some(json!({"content": content, "required": p.get("required").cloned().unwrap_or(json!(false))}));
        } else {
            params.push(v3_parameter(p));
        }
    }
    for (k, v) in op.as_object().into_iter().flatten() {
        match k.as_str() {
            "parameters" | "consumes" | "produces" | "schemes" => {}
            "responses" => {
                let responses: Map<String, Value> = v
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(code, r)| {
                        let mut resp = json!({"description": r["description"]});
                        if let Some(s) = r.get("schema") {
                            let s = to_v3_schema(s);
                            resp["content"] = json!({"application/json": {"schema": s.clone()}, "application/yaml": {"schema": s.clone()}, "application/vnd.kubernetes.protobuf": {"schema": s}});
                        }
                        (code.clone(), resp)
                    })
                    .collect();
                out.insert("responses".into(), Value::Object(responses));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if !params.is_empty() {
        out.insert("parameters".into(), Value::Array(params));
    }
    if let Some(b) = request_body {
        out.insert("requestBody".into(), b);
    }
    Value::Object(out)
}

fn v3_parameter(p: &Value) -> Value {
    let mut m = Map::new();
    for k in ["name", "in", "description", "required"] {
        if let Some(v) = p.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    m.insert("schema".into(), json!({"type": p.get("type").cloned().unwrap_or(json!("string")), "uniqueItems": true}));
    Value::Object(m)
}

/// The `/openapi/v3` document of a group version, as JSON.
pub fn v3_group_version(catalog: &Catalog, group: &str, version: &str) -> Vec<u8> {
    let mut v2_paths = BTreeMap::new();
    let mut roots: Vec<String> = vec![DELETE_OPTIONS.into(), STATUS.into(), PATCH.into(), WATCH_EVENT.into(), RESOURCE_LIST.into()];
    let mut custom = Map::new();
    for r in catalog.resources_of(group, version) {
        resource_paths(r, &mut v2_paths);
        match r.strategy.openapi_definitions() {
            Some(defs) => {
                for (name, def) in [&defs.object, &defs.list] {
                    collect_refs(def, &mut roots);
                    custom.insert(name.clone(), to_v3_schema(def));
                }
            }
            None => roots.push(r.info.definition.to_string()),
        }
        if let Some(list) = schema().for_gvk(group, version, &format!("{}List", r.info.kind)) {
            roots.push(list.name.clone());
        }
        for s in &r.info.subresources {
            if let Some(d) = schema().for_gvk(&s.group, &s.version, &s.kind) {
                roots.push(d.name.clone());
            }
        }
    }
    discovery_path(group, version, &mut v2_paths);
    let paths: Map<String, Value> = v2_paths
        .into_iter()
        .map(|(p, item)| {
            let ops: Map<String, Value> = item
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| {
                    if k == "parameters" {
                        (k.clone(), Value::Array(v.as_array().into_iter().flatten().map(v3_parameter).collect()))
                    } else {
                        (k.clone(), to_v3_operation(v))
                    }
                })
                .collect();
            (p, Value::Object(ops))
        })
        .collect();
    let mut schemas: BTreeMap<&str, &RawValue> =
        reachable(roots).iter().filter_map(|n| V3_DEFINITIONS.get_key_value(n)).map(|(k, d)| (k.as_str(), &**d)).collect();
    let custom: Vec<(String, Box<RawValue>)> =
        custom.into_iter().map(|(k, d)| (k, serde_json::value::to_raw_value(&d).expect("JSON trees serialize"))).collect();
    schemas.extend(custom.iter().map(|(k, d)| (k.as_str(), &**d)));
    let doc = V3Document {
        components: Components {
            schemas,
            security_schemes: json!({"BearerToken": {"type": "apiKey", "description": "Bearer Token authentication", "name": "authorization", "in": "header"}}),
        },
        info: json!({"title": "Kubernetes", "version": KUBE_VERSION}),
        openapi: "3.0.0",
        paths,
    };
    serde_json::to_vec(&doc).expect("JSON trees serialize")
}

/// Every built-in definition in its OpenAPI v3 form, converted once.
static V3_DEFINITIONS: LazyLock<BTreeMap<String, Box<RawValue>>> = LazyLock::new(|| {
    let raw = schema().raw_definitions();
    raw.iter().map(|(n, d)| (n.clone(), serde_json::value::to_raw_value(&to_v3_schema(d)).expect("JSON trees serialize"))).collect()
});

/// A group version's document, its members in the order of their names (as a JSON tree's).
#[derive(Serialize)]
struct V3Document<'a> {
    components: Components<'a>,
    info: Value,
    openapi: &'static str,
    paths: Map<String, Value>,
}

#[derive(Serialize)]
struct Components<'a> {
    schemas: BTreeMap<&'a str, &'a RawValue>,
    #[serde(rename = "securitySchemes")]
    security_schemes: Value,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{Settings, catalog};

    #[test]
    fn v3_documents_carry_kinds_patch_strategies_and_operations() {
        let c = catalog(&Settings::default());
        let bytes = v3_group_version(&c, "apps", "v1");
        let apps: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(serde_json::to_vec(&apps).unwrap(), bytes, "the bytes of the JSON tree: members sorted by name");
        let dep = &apps["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(dep["x-kubernetes-group-version-kind"][0]["kind"], "Deployment");
        assert_eq!(dep["properties"]["metadata"]["allOf"][0]["$ref"], "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
        let containers = &apps["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        let patch = &apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(patch["operationId"], "patchAppsV1NamespacedDeployment");
        assert!(patch["parameters"].as_array().unwrap().iter().any(|p| p["name"] == "fieldValidation"));
        let hash = hash(&v3_group_version(&c, "", "v1"));
        let index = v3_index([(&v3_key("", "v1"), &hash)]);
        assert_eq!(index["paths"]["api/v1"]["serverRelativeURL"], format!("/openapi/v3/api/v1?hash={hash}"));
        let v2doc = v2(&c);
        assert!(v2doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/status"]["get"].is_object());
        assert!(v2doc["definitions"]["io.k8s.api.core.v1.Pod"]["properties"]["spec"].get("x-kapi-proto").is_none());
    }
}

//! Extension servers' OpenAPI v2 documents in kapi's `/openapi/v2`: kapi's own paths,
//! definitions and parameters first, then each server's, where one of the same name is there
//! already the first kept (kube-aggregator keeps the first path too, but renames a server's
//! definition whose name is taken and rewrites its references).
//!
//! Of a server's document only what its APIService hands it is kept: the paths under its
//! group version (`/apis/<group>/<version>/...`) and the definitions and shared parameters
//! they refer to, directly or through definitions (kube merges the whole document, whose
//! other paths requests never reach that server by).

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Map, Value};

/// What of an extension server's `/openapi/v2` is merged for one group version.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenApiV2 {
    paths: Arc<Map<String, Value>>,
    definitions: Arc<Map<String, Value>>,
    parameters: Arc<Map<String, Value>>,
}

/// Where a `$ref` to a definition, or to a shared parameter, points.
const DEFINITIONS: &str = "#/definitions/";
const PARAMETERS: &str = "#/parameters/";

impl OpenApiV2 {
    /// The parts of a `/openapi/v2` answer (`body`, JSON) that `group`/`version` serves;
    /// `None` for an answer that is not an OpenAPI v2 document.
    pub fn read(body: &[u8], group: &str, version: &str) -> Option<OpenApiV2> {
        let doc: Value = serde_json::from_slice(body).ok()?;
        doc.get("swagger")?;
        let prefix = if group.is_empty() { format!("/api/{version}") } else { format!("/apis/{group}/{version}") };
        let all_paths = doc.get("paths").and_then(Value::as_object);
        let ours = |p: &String| p.strip_prefix(&prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
        let paths: Map<String, Value> = all_paths.into_iter().flatten().filter(|(p, _)| ours(p)).map(|(p, v)| (p.clone(), v.clone())).collect();
        let section = |name: &str| doc.get(name).and_then(Value::as_object);
        let (all_definitions, all_parameters) = (section("definitions"), section("parameters"));
        let mut wanted = BTreeSet::new();
        let mut queue: Vec<String> = Vec::new();
        paths.values().for_each(|v| refs(v, &mut queue));
        let parameters: Map<String, Value> =
            queue.iter().filter_map(|r| r.strip_prefix(PARAMETERS)).filter_map(|n| Some((n.to_string(), all_parameters?.get(n)?.clone()))).collect();
        parameters.values().for_each(|v| refs(v, &mut queue));
        while let Some(target) = queue.pop() {
            let Some(name) = target.strip_prefix(DEFINITIONS) else { continue };
            if let Some(d) = all_definitions.and_then(|all| all.get(name))
                && wanted.insert(name.to_string())
            {
                refs(d, &mut queue);
            }
        }
        let definitions = wanted.into_iter().filter_map(|n| Some((n.clone(), all_definitions?.get(&n)?.clone()))).collect();
        Some(OpenApiV2 { paths: Arc::new(paths), definitions: Arc::new(definitions), parameters: Arc::new(parameters) })
    }

    /// Adds to `doc` (a `/openapi/v2` document) the paths, definitions and parameters it does
    /// not have.
    pub fn merge_into(&self, doc: &mut Value) {
        let Value::Object(doc) = doc else { return };
        for (part, entries) in [("paths", &self.paths), ("definitions", &self.definitions), ("parameters", &self.parameters)] {
            if entries.is_empty() {
                continue;
            }
            if let Value::Object(into) = doc.entry(part).or_insert_with(|| Value::Object(Map::new())) {
                for (k, v) in entries.iter() {
                    into.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
    }
}

/// What `v` refers to (`"$ref": "#/definitions/<name>"`, `"#/parameters/<name>"`), anywhere
/// in it.
fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("$ref", Value::String(r)) => out.push(r.clone()),
                    _ => refs(x, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

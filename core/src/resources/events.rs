//! Events: core/v1 and events.k8s.io/v1, one storage (`/registry/events`, core/v1 objects,
//! expiring after `--event-ttl`), converted field by field.

use serde_json::{Map, Value, json};

use super::{Settings, info, serve};
use crate::catalog::{FieldName, Resource, Strategy, field};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};

const EVENT: &str = "io.k8s.api.core.v1.Event";
const REF: &str = "io.k8s.api.core.v1.ObjectReference";

pub fn core(settings: &Settings) -> Resource {
    let mut i = info("", "v1", "Event", "events", true);
    i.short_names = crate::catalog::names(&["ev"]);
    let mut r = serve(i, Events { api: Api::Core });
    r.ttl_seconds = Some(settings.event_ttl_seconds);
    r
}

pub fn events_k8s_io(settings: &Settings) -> Resource {
    let mut i = info("events.k8s.io", "v1", "Event", "events", true);
    i.short_names = crate::catalog::names(&["ev"]);
    i.stored_as = Some(("".into(), "v1".into()));
    let mut r = serve(i, Events { api: Api::EventsK8sIo });
    r.ttl_seconds = Some(settings.event_ttl_seconds);
    r
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Api {
    Core,
    EventsK8sIo,
}

struct Events {
    api: Api,
}

/// events.k8s.io/v1 field names and their core/v1 counterparts.
const RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

fn rename(obj: Value, to_core: bool, api_version: &str) -> Value {
    let Value::Object(m) = obj else { return obj };
    let mut out = Map::new();
    for (k, v) in m {
        let renamed = RENAMES.iter().find_map(|(new, old)| if to_core { (k == *new).then_some(*old) } else { (k == *old).then_some(*new) });
        out.insert(renamed.map(str::to_string).unwrap_or(k), v);
    }
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!("Event"));
    Value::Object(out)
}

const COLUMNS: &[Column] = &[
    Column::new("Last Seen", "string", Describe::Field(EVENT, "lastTimestamp")),
    Column::new("Type", "string", Describe::Field(EVENT, "type")),
    Column::new("Reason", "string", Describe::Field(EVENT, "reason")),
    Column::new("Object", "string", Describe::Field(EVENT, "involvedObject")),
    Column::new("Subobject", "string", Describe::Field(REF, "fieldPath")).wide(),
    Column::new("Source", "string", Describe::Field(EVENT, "source")).wide(),
    Column::new("Message", "string", Describe::Field(EVENT, "message")),
    Column::new("First Seen", "string", Describe::Field(EVENT, "firstTimestamp")).wide(),
    Column::new("Count", "string", Describe::Field(EVENT, "count")).wide(),
    Column { name: "Name", ty: "string", format: "name", priority: 1, description: Describe::Field("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "name") },
];

impl Events {
    /// The object in core/v1 terms, whichever API serves it.
    fn core_view(&self, obj: &Value) -> Value {
        match self.api {
            Api::Core => obj.clone(),
            Api::EventsK8sIo => rename(obj.clone(), true, "v1"),
        }
    }
}

impl Strategy for Events {
    fn stored_as_served(&self) -> bool {
        self.api == Api::Core
    }

    fn served_from_stored(&self, stored: Value) -> Value {
        match self.api {
            Api::Core => stored,
            Api::EventsK8sIo => rename(stored, false, "events.k8s.io/v1"),
        }
    }

    fn stored_from_served(&self, served: &Value) -> Option<Value> {
        match self.api {
            Api::Core => None,
            Api::EventsK8sIo => Some(rename(served.clone(), true, "v1")),
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let core = self.core_view(obj);
        let (field, ns_field) = match self.api {
            Api::Core => ("involvedObject", "involvedObject.namespace"),
            Api::EventsK8sIo => ("regarding", "regarding.namespace"),
        };
        let ns = meta::str_at(&core, &["involvedObject", "namespace"]).unwrap_or_default();
        if !ns.is_empty() && ns != meta::namespace(obj) {
            errs.push(FieldError::invalid(ns_field, json!(ns), "does not match event.namespace"));
        }
        if self.api == Api::EventsK8sIo {
            for required in ["reportingController", "reportingInstance", "action", "reason"] {
                if obj.get(required).and_then(Value::as_str).is_none_or(str::is_empty) {
                    errs.push(FieldError::required(required, ""));
                }
            }
            if obj.get("eventTime").is_none() {
                errs.push(FieldError::required("eventTime", ""));
            }
            if obj.get(field).is_none() {
                errs.push(FieldError::required(field, ""));
            }
        }
        if let Some(t) = core.get("type").and_then(Value::as_str).filter(|t| !t.is_empty())
            && self.api == Api::EventsK8sIo
            && t != "Normal"
            && t != "Warning"
        {
            errs.push(FieldError::not_supported("type", json!(t), &["Normal", "Warning"]));
        }
        errs
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let e = self.core_view(obj);
        let s = |p: &[&str]| meta::str_at(&e, p).unwrap_or_default().to_string();
        let first = match meta::str_at(&e, &["firstTimestamp"]) {
            Some(t) => table::since(Some(t), now),
            None => table::since(meta::str_at(&e, &["eventTime"]), now),
        };
        let mut last = match meta::str_at(&e, &["lastTimestamp"]) {
            Some(t) => table::since(Some(t), now),
            None => first.clone(),
        };
        let mut count = e.get("count").and_then(Value::as_i64).unwrap_or(0);
        if let Some(series) = e.get("series") {
            last = table::since(series.get("lastObservedTime").and_then(Value::as_str), now);
            count = series.get("count").and_then(Value::as_i64).unwrap_or(0);
        } else if count == 0 {
            count = 1;
        }
        let kind = s(&["involvedObject", "kind"]).to_lowercase();
        let name = s(&["involvedObject", "name"]);
        let target = if name.is_empty() { kind } else { format!("{kind}/{name}") };
        let component = [s(&["source", "component"]), s(&["reportingComponent"])].into_iter().find(|x| !x.is_empty()).unwrap_or_default();
        let instance = [s(&["source", "host"]), s(&["reportingInstance"])].into_iter().find(|x| !x.is_empty()).unwrap_or_default();
        let source = if instance.is_empty() { component } else { format!("{component}, {instance}") };
        vec![
            json!(last),
            json!(s(&["type"])),
            json!(s(&["reason"])),
            json!(target),
            json!(s(&["involvedObject", "fieldPath"])),
            json!(source),
            json!(s(&["message"]).trim()),
            json!(first),
            json!(count),
            json!(meta::name(obj)),
        ]
    }

    fn selectable_fields(&self) -> &[FieldName] {
        match self.api {
            Api::Core => {
                const {
                    &[
                        field("involvedObject.kind"),
                        field("involvedObject.namespace"),
                        field("involvedObject.name"),
                        field("involvedObject.uid"),
                        field("involvedObject.apiVersion"),
                        field("involvedObject.resourceVersion"),
                        field("involvedObject.fieldPath"),
                        field("reason"),
                        field("reportingComponent"),
                        field("source"),
                        field("type"),
                    ]
                }
            }
            Api::EventsK8sIo => {
                const {
                    &[
                        field("regarding.kind"),
                        field("regarding.namespace"),
                        field("regarding.name"),
                        field("regarding.uid"),
                        field("regarding.apiVersion"),
                        field("regarding.resourceVersion"),
                        field("regarding.fieldPath"),
                        field("reason"),
                        field("reportingController"),
                        field("type"),
                    ]
                }
            }
        }
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        if field == "source" {
            return Some(meta::str_at(obj, &["source", "component"]).unwrap_or_default().to_string());
        }
        let path: Vec<&str> = field.split('.').collect();
        Some(meta::str_at(obj, &path).unwrap_or_default().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_between_the_two_apis() {
        let new = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"}, "note": "hi",
            "regarding": {"kind": "Pod", "name": "p"}, "reportingController": "kubelet", "deprecatedCount": 2});
        let core = rename(new.clone(), true, "v1");
        assert_eq!(core["message"], "hi");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["reportingComponent"], "kubelet");
        assert_eq!(core["count"], 2);
        assert_eq!(rename(core, false, "events.k8s.io/v1"), new);
    }
}

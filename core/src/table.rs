//! Server-side printing (`as=Table`): column definitions and the formatting helpers of
//! kube-apiserver's printers (`pkg/printers/internalversion`), so `kubectl get` prints what it
//! prints against a real cluster.

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::meta;
use crate::schema::schema;

/// A column of a table; `priority` 1 columns are shown by `kubectl get -o wide`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub ty: &'static str,
    pub format: &'static str,
    pub priority: i32,
    /// Where the description comes from: a `definition.field` of the schema, or literal text.
    pub description: Describe,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Describe {
    Field(&'static str, &'static str),
    Text(&'static str),
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

impl Column {
    pub const fn new(name: &'static str, ty: &'static str, description: Describe) -> Column {
        Column { name, ty, format: "", priority: 0, description }
    }

    pub const fn wide(self) -> Column {
        Column { priority: 1, ..self }
    }

    /// The `Name` column every kind starts with.
    pub const NAME: Column = Column { name: "Name", ty: "string", format: "name", priority: 0, description: Describe::Field(OBJECT_META, "name") };
    /// The `Age` column (time since `creationTimestamp`).
    pub const AGE: Column = Column::new("Age", "string", Describe::Field(OBJECT_META, "creationTimestamp"));
    /// The age column of custom resources without printer columns (a `date`).
    pub const AGE_DATE: Column = Column::new("Age", "date", Describe::Field(OBJECT_META, "creationTimestamp"));
    pub const CONTAINERS: Column = Column::new("Containers", "string", Describe::Text("Names of each container in the template.")).wide();
    pub const IMAGES: Column = Column::new("Images", "string", Describe::Text("Images referenced by each container in the template.")).wide();

    pub fn to_json(&self) -> Value {
        let description = match self.description {
            Describe::Text(t) => t.to_string(),
            Describe::Field(def, field) => schema().get(def).and_then(|d| d.properties.get(field)).map(|p| p.description.clone()).unwrap_or_default(),
        };
        json!({"name": self.name, "type": self.ty, "format": self.format, "description": description, "priority": self.priority})
    }
}

/// The columns of kinds without a printer (kube's default table convertor).
pub const DEFAULT_COLUMNS: &[Column] = &[Column::NAME, Column::new("Created At", "date", Describe::Field(OBJECT_META, "creationTimestamp"))];

pub fn created_at(obj: &Value) -> String {
    meta::str_at(obj, &["metadata", "creationTimestamp"]).unwrap_or_default().to_string()
}

/// `duration.HumanDuration`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 { format!("{}y", hours / 24 / 365) } else { format!("{}y{dy}d", hours / 24 / 365) };
    }
    format!("{}y", hours / 24 / 365)
}

/// `translateTimestampSince`: the age of a timestamp string, `<unknown>` when unset.
pub fn since(ts: Option<&str>, now: Timestamp) -> String {
    match ts.and_then(|s| s.parse::<Timestamp>().ok()) {
        Some(t) => human_duration(now.duration_since(t).as_secs()),
        None => "<unknown>".into(),
    }
}

/// The `Age` cell of an object.
pub fn age(obj: &Value, now: Timestamp) -> Value {
    Value::from(since(meta::str_at(obj, &["metadata", "creationTimestamp"]), now))
}

/// `labels.FormatLabels` of a string map: `a=b,c=d` sorted, or `<none>`.
pub fn format_labels(v: Option<&Value>) -> String {
    let mut pairs = meta::string_map(v);
    if pairs.is_empty() {
        return "<none>".into();
    }
    pairs.sort();
    pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// `metav1.LabelSelectorAsSelector(...).String()`: requirements sorted by key.
pub fn selector_string(sel: Option<&Value>) -> String {
    let Some(sel) = sel else { return "<none>".into() };
    let mut reqs: Vec<(String, String)> = Vec::new();
    for (k, v) in meta::string_map(sel.get("matchLabels")) {
        reqs.push((k.to_string(), format!("{k}={v}")));
    }
    for e in sel.get("matchExpressions").and_then(Value::as_array).into_iter().flatten() {
        let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
        let mut values: Vec<&str> = e.get("values").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        values.sort();
        let text = match e.get("operator").and_then(Value::as_str).unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return "<invalid>".into(),
        };
        reqs.push((key.to_string(), text));
    }
    if reqs.is_empty() {
        return "<none>".into();
    }
    reqs.sort();
    reqs.into_iter().map(|(_, t)| t).collect::<Vec<_>>().join(",")
}

/// `layoutContainerCells`: container names and images, comma separated.
pub fn containers_and_images(pod_spec: Option<&Value>) -> (Value, Value) {
    let containers = pod_spec.and_then(|s| s.get("containers")).and_then(Value::as_array);
    let field = |k: &str| -> Value {
        Value::from(containers.into_iter().flatten().map(|c| c.get(k).and_then(Value::as_str).unwrap_or_default()).collect::<Vec<_>>().join(","))
    };
    (field("name"), field("image"))
}

pub fn int_at(obj: &Value, path: &[&str]) -> i64 {
    meta::at(obj, path).and_then(Value::as_i64).unwrap_or(0)
}

pub fn str_or(obj: &Value, path: &[&str], default: &str) -> String {
    match meta::str_at(obj, path) {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => default.to_string(),
    }
}

/// What a table row carries as its object: nothing, the object's metadata, or the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(s: Option<&str>) -> Result<IncludeObject, String> {
        match s.unwrap_or("") {
            "" | "Metadata" => Ok(IncludeObject::Metadata),
            "None" => Ok(IncludeObject::None),
            "Object" => Ok(IncludeObject::Object),
            other => Err(format!("unsupported includeObject value: {other:?}")),
        }
    }
}

/// `PartialObjectMetadata` of an object.
pub fn partial_metadata(obj: &Value) -> Value {
    let mut m = Map::new();
    m.insert("kind".into(), json!("PartialObjectMetadata"));
    m.insert("apiVersion".into(), json!("meta.k8s.io/v1"));
    m.insert("metadata".into(), obj.get("metadata").cloned().unwrap_or_else(|| json!({})));
    Value::Object(m)
}

/// One row: its cells and the object as `include` asks.
pub fn row_json(cells: Vec<Value>, obj: &Value, include: IncludeObject) -> Value {
    let mut row = Map::new();
    row.insert("cells".into(), Value::Array(cells));
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            row.insert("object".into(), partial_metadata(obj));
        }
        IncludeObject::Object => {
            row.insert("object".into(), obj.clone());
        }
    }
    Value::Object(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations() {
        for (s, want) in [
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600 + 60, "3h1m"),
            (30 * 3600, "30h"),
            (50 * 3600, "2d2h"),
            (400 * 24 * 3600, "400d"),
        ] {
            assert_eq!(human_duration(s), want, "{s}");
        }
    }

    #[test]
    fn selector_strings() {
        let sel = json!({"matchLabels": {"b": "2", "a": "1"}, "matchExpressions": [{"key": "c", "operator": "In", "values": ["y", "x"]}]});
        assert_eq!(selector_string(Some(&sel)), "a=1,b=2,c in (x,y)");
        assert_eq!(format_labels(None), "<none>");
    }
}

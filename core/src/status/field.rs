//! Field-level validation errors (`k8s.io/apimachinery/pkg/util/validation/field`).

use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldErrorType {
    NotFound,
    Required,
    Duplicate,
    Invalid,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
    Internal,
    TypeInvalid,
}

impl FieldErrorType {
    fn text(self) -> &'static str {
        match self {
            FieldErrorType::NotFound => "Not found",
            FieldErrorType::Required => "Required value",
            FieldErrorType::Duplicate => "Duplicate value",
            FieldErrorType::Invalid | FieldErrorType::TypeInvalid => "Invalid value",
            FieldErrorType::NotSupported => "Unsupported value",
            FieldErrorType::Forbidden => "Forbidden",
            FieldErrorType::TooLong => "Too long",
            FieldErrorType::TooMany => "Too many",
            FieldErrorType::Internal => "Internal error",
        }
    }

    /// The `StatusCause.reason` of this error type.
    pub fn cause_reason(self) -> &'static str {
        match self {
            FieldErrorType::NotFound => "FieldValueNotFound",
            FieldErrorType::Required => "FieldValueRequired",
            FieldErrorType::Duplicate => "FieldValueDuplicate",
            FieldErrorType::Invalid => "FieldValueInvalid",
            FieldErrorType::NotSupported => "FieldValueNotSupported",
            FieldErrorType::Forbidden => "FieldValueForbidden",
            FieldErrorType::TooLong => "FieldValueTooLong",
            FieldErrorType::TooMany => "FieldValueTooMany",
            FieldErrorType::Internal => "InternalError",
            FieldErrorType::TypeInvalid => "FieldValueTypeInvalid",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    pub kind: FieldErrorType,
    pub field: String,
    /// `None` when kube omits the value from the message.
    pub bad_value: Option<BadValue>,
    pub detail: String,
}

impl Eq for FieldError {}

/// A bad value as kube prints it: a JSON value printed as Go's `%v`/`%q` print it, or text Go
/// printed otherwise (`%#v` of a type JSON has no word for, such as `0x0` for a `uint64`).
#[derive(Clone, Debug, PartialEq)]
pub enum BadValue {
    Json(Value),
    Go(String),
}

impl FieldError {
    fn new(kind: FieldErrorType, field: impl Into<String>, bad_value: Option<Value>, detail: impl Into<String>) -> Self {
        FieldError { kind, field: field.into(), bad_value: bad_value.map(BadValue::Json), detail: detail.into() }
    }

    /// Invalid, with a `map[string]string` value (labels) shown as Go's `%#v` shows it:
    /// `map[string]string{"a":"1", "b":"2"}`, or `map[string]string(nil)`.
    pub fn invalid_string_map(field: impl Into<String>, map: Option<&Value>, detail: impl Into<String>) -> Self {
        let go = match map.and_then(Value::as_object) {
            None => "map[string]string(nil)".to_string(),
            Some(m) => {
                let entries: Vec<String> =
                    m.iter().map(|(k, v)| format!("{}:{}", Value::from(k.as_str()), Value::from(v.as_str().unwrap_or_default()))).collect();
                format!("map[string]string{{{}}}", entries.join(", "))
            }
        };
        Self::invalid_go(field, go, detail)
    }

    /// `Invalid` with a bad value Go printed as `go` (verbatim).
    pub fn invalid_go(field: impl Into<String>, go: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError { kind: FieldErrorType::Invalid, field: field.into(), bad_value: Some(BadValue::Go(go.into())), detail: detail.into() }
    }

    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorType::Required, field, None, detail)
    }

    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorType::Invalid, field, Some(value), detail)
    }

    /// `TypeInvalid`: shown as an invalid value, with the cause reason `FieldValueTypeInvalid`.
    pub fn type_invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorType::TypeInvalid, field, Some(value), detail)
    }

    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorType::Forbidden, field, None, detail)
    }

    pub fn duplicate(field: impl Into<String>, value: Value) -> Self {
        Self::new(FieldErrorType::Duplicate, field, Some(value), "")
    }

    /// `Duplicate`, with a bad value Go printed as `go` (verbatim).
    pub fn duplicate_go(field: impl Into<String>, go: impl Into<String>) -> Self {
        FieldError { kind: FieldErrorType::Duplicate, field: field.into(), bad_value: Some(BadValue::Go(go.into())), detail: String::new() }
    }

    pub fn not_found(field: impl Into<String>, value: Value) -> Self {
        Self::new(FieldErrorType::NotFound, field, Some(value), "")
    }

    pub fn not_supported(field: impl Into<String>, value: Value, supported: &[&str]) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| super::quote(s)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(FieldErrorType::NotSupported, field, Some(value), detail)
    }

    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        Self::new(FieldErrorType::TooLong, field, None, format!("may not be more than {max} bytes"))
    }

    pub fn too_many(field: impl Into<String>, actual: usize, max: usize) -> Self {
        Self::new(FieldErrorType::TooMany, field, Some(Value::from(actual)), format!("must have at most {max} items"))
    }

    /// The message without the field path (`StatusCause.message`).
    pub fn body(&self) -> String {
        let mut s = match (&self.kind, &self.bad_value) {
            (FieldErrorType::Required | FieldErrorType::Forbidden | FieldErrorType::TooLong | FieldErrorType::Internal, _) | (_, None) => {
                self.kind.text().to_string()
            }
            (_, Some(BadValue::Json(v))) => format!("{}: {}", self.kind.text(), go_value(v)),
            (_, Some(BadValue::Go(text))) => format!("{}: {text}", self.kind.text()),
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// How Go's `%v`/`%q` print a bad value.
fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "\"null\"".into(),
        Value::String(s) => super::quote(s),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => other.to_string(),
    }
}

/// `utilerrors.NewAggregate(errs).Error()`: one message, or `[a, b]` with duplicates removed.
pub fn aggregate(errors: &[FieldError]) -> Option<String> {
    let mut seen = Vec::<String>::new();
    let mut known = std::collections::BTreeSet::<String>::new();
    for e in errors {
        let m = e.to_string();
        if known.insert(m.clone()) {
            seen.push(m);
        }
    }
    match seen.len() {
        0 => None,
        1 => seen.pop(),
        _ => Some(format!("[{}]", seen.join(", "))),
    }
}

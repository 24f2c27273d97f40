//! kube's format library (k8s.io/apiserver/pkg/cel/library `format.go`, v1.31):
//! `format.dns1123Label()`, `format.dns1123Subdomain()`, `format.dns1035Label()`,
//! `format.qualifiedName()`, the three `...Prefix()` forms (a trailing dash allowed, as for
//! `generateName`), `format.labelValue()`, `format.uri()`, `format.uuid()`, `format.byte()`,
//! `format.date()`, `format.datetime()`, `format.named(name)` (an optional), and of a format
//! `validate(s)`: an optional list of what is wrong with `s`, none when it is valid. The name
//! formats give kube's messages; the other five say what failed without Go's parser errors.

use std::sync::Arc;

use cel::common::types::{STRING_TYPE, Type};
use cel::common::value::CowVal;
use cel::objects::{Opaque, OptionalValue};
use cel::{DeclarationError, Env, ExecutionError, Value};

use super::library::{answer, subject, values};
use crate::apiextensions::format_accepts;
use crate::validation as names;

const NAME: &str = "kubernetes.NamedFormat";

#[derive(Debug, PartialEq, Eq)]
struct Format(&'static str);

impl Opaque for Format {
    fn runtime_type_name(&self) -> &str {
        NAME
    }
}

impl Format {
    /// What is wrong with `s` in this format.
    fn problems(&self, s: &str) -> Vec<String> {
        // kube's `maskTrailingDash`: a prefix may end with a dash.
        let prefix = || if s.len() > 1 && s.ends_with('-') { format!("{}a", &s[..s.len() - 1]) } else { s.to_string() };
        let fails = |what: &str| if format_accepts(what, s) { Vec::new() } else { vec![format!("does not match the {what} format")] };
        match self.0 {
            "dns1123Label" => names::dns1123_label(s),
            "dns1123Subdomain" => names::dns1123_subdomain(s),
            "dns1035Label" => names::dns1035_label(s),
            "qualifiedName" => names::qualified_name(s),
            "dns1123LabelPrefix" => names::dns1123_label(&prefix()),
            "dns1123SubdomainPrefix" => names::dns1123_subdomain(&prefix()),
            "dns1035LabelPrefix" => names::dns1035_label(&prefix()),
            "labelValue" => names::label_value(s),
            "datetime" => fails("date-time"),
            other => fails(other),
        }
    }
}

type Function = for<'b, 'v> fn(Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError>;

/// The formats, named once: by the name `format.named` takes (`FORMATS`), and one function
/// per format as `format.<name>()` calls it (`CONSTANTS`).
macro_rules! formats {
    ($($name:literal),*) => {
        const FORMATS: &[&str] = &[$($name),*];
        const CONSTANTS: &[(&str, Function)] = &[$((concat!("format.", $name), (|_| answer(Value::Opaque(Arc::new(Format($name))))) as Function)),*];
    };
}

formats!(
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime"
);

/// Registers the library on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    for (name, f) in CONSTANTS {
        env.add_overload(name, name, vec![], *f)?;
    }
    env.add_overload("format.named", "format_named", vec![STRING_TYPE], named)?;
    env.add_member_overload("validate", "format_validate", Type::new_opaque_type(NAME), vec![STRING_TYPE], validate)?;
    Ok(())
}

fn named<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [n] = values(args)?;
    let name = subject("format.named", &n)?;
    let found = FORMATS.iter().find(|f| **f == name.as_str()).map(|f| Value::Opaque(Arc::new(Format(f))));
    answer(Value::Opaque(Arc::new(found.map_or_else(OptionalValue::none, OptionalValue::of))))
}

fn validate<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [f, s] = values(args)?;
    let Value::Opaque(o) = &f else { return Err(ExecutionError::function_error("validate", "not a format")) };
    let format = o.downcast_ref::<Format>().ok_or_else(|| ExecutionError::function_error("validate", "not a format"))?;
    let problems = format.problems(&subject("validate", &s)?);
    let result = if problems.is_empty() {
        OptionalValue::none()
    } else {
        OptionalValue::of(Value::List(Arc::new(problems.into_iter().map(|p| Value::String(Arc::new(p))).collect())))
    };
    answer(Value::Opaque(Arc::new(result)))
}

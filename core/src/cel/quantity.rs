//! kube's quantity library (k8s.io/apiserver/pkg/cel/library `quantity.go`): `quantity(s)`
//! and `isQuantity(s)`, and of a quantity `sign()`, `isInteger()`, `asInteger()`,
//! `asApproximateFloat()`, `add(q | int)`, `sub(q | int)`, `isLessThan(q)`,
//! `isGreaterThan(q)` and `compareTo(q)`; two quantities are equal when their values are.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::types::{INT_TYPE, STRING_TYPE, Type};
use cel::common::value::CowVal;
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};

use super::library::{answer, subject, values};
use crate::quantity::{Format, Quantity};

const NAME: &str = "kubernetes.Quantity";

/// A quantity as a CEL value.
#[derive(Debug)]
struct CelQuantity(Quantity);

impl PartialEq for CelQuantity {
    fn eq(&self, other: &CelQuantity) -> bool {
        self.0.partial_cmp(&other.0) == Some(Ordering::Equal)
    }
}

impl Eq for CelQuantity {}

impl Opaque for CelQuantity {
    fn runtime_type_name(&self) -> &str {
        NAME
    }
}

type Function = for<'b, 'v> fn(Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError>;

/// Registers the library on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    let q = || Type::new_opaque_type(NAME);
    env.add_overload("quantity", "string_to_quantity", vec![STRING_TYPE], parse)?;
    env.add_overload("isQuantity", "is_quantity_string", vec![STRING_TYPE], is_quantity)?;
    let members: [(&str, &str, Vec<Type>, Function); 11] = [
        ("sign", "quantity_sign", vec![], sign),
        ("isInteger", "quantity_is_integer", vec![], is_integer),
        ("asInteger", "quantity_as_integer", vec![], as_integer),
        ("asApproximateFloat", "quantity_as_float", vec![], as_float),
        ("add", "quantity_add", vec![q()], add),
        ("add", "quantity_add_int", vec![INT_TYPE], add),
        ("sub", "quantity_sub", vec![q()], sub),
        ("sub", "quantity_sub_int", vec![INT_TYPE], sub),
        ("isLessThan", "quantity_less", vec![q()], less),
        ("isGreaterThan", "quantity_greater", vec![q()], greater),
        ("compareTo", "quantity_compare", vec![q()], compare),
    ];
    for (name, id, args, f) in members {
        env.add_member_overload(name, id, q(), args, f)?;
    }
    Ok(())
}

fn quantity(function: &str, v: &Value) -> Result<Quantity, ExecutionError> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<CelQuantity>().map(|q| q.0).ok_or_else(|| ExecutionError::function_error(function, "not a quantity")),
        Value::Int(i) => Ok(Quantity::from_i64(*i, Format::DecimalSI)),
        _ => Err(ExecutionError::function_error(function, "not a quantity")),
    }
}

fn wrap<'b, 'v>(q: Quantity) -> Result<CowVal<'b, 'v>, ExecutionError> {
    answer(Value::Opaque(Arc::new(CelQuantity(q))))
}

fn parse<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s] = values(args)?;
    let text = subject("quantity", &s)?;
    let q = Quantity::parse(&text).ok_or_else(|| {
        ExecutionError::function_error("quantity", "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    })?;
    wrap(q)
}

fn is_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s] = values(args)?;
    answer(Value::Bool(Quantity::parse(&subject("isQuantity", &s)?).is_some()))
}

fn one<'b, 'v>(function: &str, args: Vec<CowVal<'b, 'v>>) -> Result<Quantity, ExecutionError> {
    let [q] = values(args)?;
    quantity(function, &q)
}

fn two<'b, 'v>(function: &str, args: Vec<CowVal<'b, 'v>>) -> Result<(Quantity, Quantity), ExecutionError> {
    let [a, b] = values(args)?;
    Ok((quantity(function, &a)?, quantity(function, &b)?))
}

fn sign<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    answer(Value::Int(one("sign", args)?.sign()))
}

fn is_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    answer(Value::Bool(one("isInteger", args)?.as_i64().is_some()))
}

fn as_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let v = one("asInteger", args)?.as_i64().ok_or_else(|| ExecutionError::function_error("asInteger", "cannot convert value to integer"))?;
    answer(Value::Int(v))
}

fn as_float<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    answer(Value::Float(one("asApproximateFloat", args)?.as_f64()))
}

fn add<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = two("add", args)?;
    wrap(a.checked_add(&b).ok_or_else(|| ExecutionError::function_error("add", "quantity overflow"))?)
}

fn sub<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = two("sub", args)?;
    wrap(a.checked_add(&b.negated()).ok_or_else(|| ExecutionError::function_error("sub", "quantity overflow"))?)
}

fn ordering(function: &str, args: Vec<CowVal<'_, '_>>) -> Result<Ordering, ExecutionError> {
    let (a, b) = two(function, args)?;
    a.partial_cmp(&b).ok_or_else(|| ExecutionError::function_error(function, "quantities too far apart to compare"))
}

fn less<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    answer(Value::Bool(ordering("isLessThan", args)? == Ordering::Less))
}

fn greater<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    answer(Value::Bool(ordering("isGreaterThan", args)? == Ordering::Greater))
}

fn compare<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    answer(Value::Int(ordering("compareTo", args)? as i64))
}

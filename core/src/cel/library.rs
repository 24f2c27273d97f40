//! The CEL libraries kube-apiserver adds to the standard library and the strings extension
//! (k8s.io/apiserver/pkg/cel/library and cel-go's `ext.Sets`): the list functions
//! (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`), the regex functions (`find`,
//! `findAll`) and the set functions (`sets.contains`, `sets.equivalent`, `sets.intersects`).

use std::sync::Arc;

use cel::common::types::{INT_TYPE, LIST_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError, Value};

/// Registers the libraries on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    env.add_member_overload("indexOf", "list_index_of", LIST_TYPE, vec![cel::common::types::DYN_TYPE], index_of)?;
    env.add_member_overload("lastIndexOf", "list_last_index_of", LIST_TYPE, vec![cel::common::types::DYN_TYPE], last_index_of)?;
    env.add_member_overload("find", "string_find_string", STRING_TYPE, vec![STRING_TYPE], find)?;
    env.add_member_overload("findAll", "string_find_all_string", STRING_TYPE, vec![STRING_TYPE], find_all)?;
    env.add_member_overload("findAll", "string_find_all_string_int", STRING_TYPE, vec![STRING_TYPE, INT_TYPE], find_all_n)?;
    env.add_overload("sets.contains", "list_sets_contains_list", vec![LIST_TYPE, LIST_TYPE], sets_contains)?;
    env.add_overload("sets.equivalent", "list_sets_equivalent_list", vec![LIST_TYPE, LIST_TYPE], sets_equivalent)?;
    env.add_overload("sets.intersects", "list_sets_intersects_list", vec![LIST_TYPE, LIST_TYPE], sets_intersects)?;
    Ok(())
}

/// The arguments as values, the receiver first.
pub(super) fn values<const N: usize>(args: Vec<CowVal<'_, '_>>) -> Result<[Value; N], ExecutionError> {
    let values = args.iter().map(|a| Value::try_from(a.as_ref())).collect::<Result<Vec<_>, _>>()?;
    values.try_into().map_err(|v: Vec<Value>| ExecutionError::invalid_argument_count(N, v.len()))
}

/// A value as a function's result.
pub(super) fn answer<'b, 'v>(v: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let val: Box<dyn Val> = v.try_into()?;
    Ok(CowVal::from(val))
}

fn list_of(function: &str, v: Value) -> Result<Elements, ExecutionError> {
    match v {
        Value::List(items) => Ok(items),
        other => Err(ExecutionError::function_error(function, format!("not a list: {other:?}"))),
    }
}

/// Fails unless the list's elements are all of one type, and comparable.
fn comparable(function: &str, items: &[Value]) -> Result<(), ExecutionError> {
    for pair in items.windows(2) {
        if std::mem::discriminant(&pair[0]) != std::mem::discriminant(&pair[1]) || pair[0].partial_cmp(&pair[1]).is_none() {
            return Err(ExecutionError::function_error(function, "list elements must be comparable and of one type"));
        }
    }
    Ok(())
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list] = values(args)?;
    let items = list_of("isSorted", list)?;
    comparable("isSorted", &items)?;
    answer(Value::Bool(items.windows(2).all(|p| p[0] <= p[1])))
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list] = values(args)?;
    let items = list_of("sum", list)?;
    let mut total = match items.first() {
        None => Value::Int(0),
        Some(first @ (Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Duration(_))) => first.clone(),
        Some(other) => return Err(ExecutionError::function_error("sum", format!("cannot sum {other:?}"))),
    };
    for x in items.iter().skip(1) {
        total = match (total, x) {
            (Value::Int(a), Value::Int(b)) => Value::Int(a.checked_add(*b).ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?),
            (Value::UInt(a), Value::UInt(b)) => {
                Value::UInt(a.checked_add(*b).ok_or_else(|| ExecutionError::function_error("sum", "unsigned integer overflow"))?)
            }
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            (Value::Duration(a), Value::Duration(b)) => {
                Value::Duration(a.checked_add(b).ok_or_else(|| ExecutionError::function_error("sum", "duration overflow"))?)
            }
            _ => return Err(ExecutionError::function_error("sum", "list elements must be numbers of one type")),
        };
    }
    answer(total)
}

fn extreme<'b, 'v>(function: &str, args: Vec<CowVal<'b, 'v>>, wanted: std::cmp::Ordering) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list] = values(args)?;
    let items = list_of(function, list)?;
    comparable(function, &items)?;
    let mut best = items.first().cloned().ok_or_else(|| ExecutionError::function_error(function, format!("{function} called on empty list")))?;
    for x in items.iter().skip(1) {
        if x.partial_cmp(&best) == Some(wanted) {
            best = x.clone();
        }
    }
    answer(best)
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme("min", args, std::cmp::Ordering::Less)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme("max", args, std::cmp::Ordering::Greater)
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list, x] = values(args)?;
    let items = list_of("indexOf", list)?;
    answer(Value::Int(items.iter().position(|i| *i == x).map_or(-1, |i| i as i64)))
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list, x] = values(args)?;
    let items = list_of("lastIndexOf", list)?;
    answer(Value::Int(items.iter().rposition(|i| *i == x).map_or(-1, |i| i as i64)))
}

fn pattern(function: &str, v: &Value) -> Result<regex::Regex, ExecutionError> {
    let Value::String(p) = v else {
        return Err(ExecutionError::function_error(function, "the pattern must be a string"));
    };
    regex::Regex::new(p).map_err(|e| ExecutionError::function_error(function, e))
}

/// The string a function was given.
pub(super) fn subject(function: &str, v: &Value) -> Result<Arc<String>, ExecutionError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        _ => Err(ExecutionError::function_error(function, "not a string")),
    }
}

fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s, p] = values(args)?;
    let found = pattern("find", &p)?.find(&subject("find", &s)?).map(|m| m.as_str().to_string()).unwrap_or_default();
    answer(Value::String(Arc::new(found)))
}

fn all_found(s: &Value, p: &Value, limit: i64) -> Result<Value, ExecutionError> {
    let subject = subject("findAll", s)?;
    let re = pattern("findAll", p)?;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    Ok(Value::List(Arc::new(re.find_iter(&subject).take(limit).map(|m| Value::String(Arc::new(m.as_str().to_string()))).collect())))
}

fn find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s, p] = values(args)?;
    answer(all_found(&s, &p, -1)?)
}

fn find_all_n<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s, p, n] = values(args)?;
    let Value::Int(n) = n else {
        return Err(ExecutionError::function_error("findAll", "the limit must be an int"));
    };
    answer(all_found(&s, &p, n)?)
}

/// A list's elements.
type Elements = Arc<Vec<Value>>;

fn two_lists(function: &str, args: Vec<CowVal<'_, '_>>) -> Result<(Elements, Elements), ExecutionError> {
    let [a, b] = values(args)?;
    Ok((list_of(function, a)?, list_of(function, b)?))
}

/// Whether every element of `b` is in `a`.
fn contains_all(a: &[Value], b: &[Value]) -> bool {
    b.iter().all(|x| a.contains(x))
}

fn sets_contains<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = two_lists("sets.contains", args)?;
    answer(Value::Bool(contains_all(&a, &b)))
}

fn sets_equivalent<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = two_lists("sets.equivalent", args)?;
    answer(Value::Bool(contains_all(&a, &b) && contains_all(&b, &a)))
}

fn sets_intersects<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = two_lists("sets.intersects", args)?;
    answer(Value::Bool(b.iter().any(|x| a.contains(x))))
}

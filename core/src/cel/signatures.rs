//! The signatures of the functions and operators of kapi's CEL environment, as cel-go
//! declares them (its standard library, the strings extension, kube's libraries), for the
//! type check: what a call returns, and which calls match none of a function's overloads.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use super::types::{Bindings, Type, parse};

/// `name`, then its overload: `(params) -> result`, or `receiver.(params) -> result` for a
/// member function.
const DECLARED: &[(&str, &str)] = &[
    ("!_", "(bool) -> bool"),
    ("-_", "(int) -> int"),
    ("-_", "(double) -> double"),
    ("_&&_", "(bool, bool) -> bool"),
    ("_||_", "(bool, bool) -> bool"),
    ("@not_strictly_false", "(bool) -> bool"),
    ("_?_:_", "(bool, A, A) -> A"),
    ("_==_", "(A, A) -> bool"),
    ("_!=_", "(A, A) -> bool"),
    ("@in", "(A, list(A)) -> bool"),
    ("@in", "(A, map(A, B)) -> bool"),
    ("_[_]", "(list(A), int) -> A"),
    ("_[_]", "(map(A, B), A) -> B"),
    ("_[?_]", "(list(A), int) -> optional_type(A)"),
    ("_[?_]", "(map(A, B), A) -> optional_type(B)"),
    // cel-go's optional library: indexing what may be absent.
    ("_[_]", "(optional_type(list(A)), int) -> optional_type(A)"),
    ("_[_]", "(optional_type(map(A, B)), A) -> optional_type(B)"),
    ("_[?_]", "(optional_type(list(A)), int) -> optional_type(A)"),
    ("_[?_]", "(optional_type(map(A, B)), A) -> optional_type(B)"),
    ("_+_", "(int, int) -> int"),
    ("_+_", "(uint, uint) -> uint"),
    ("_+_", "(double, double) -> double"),
    ("_+_", "(string, string) -> string"),
    ("_+_", "(bytes, bytes) -> bytes"),
    ("_+_", "(list(A), list(A)) -> list(A)"),
    ("_+_", "(timestamp, duration) -> timestamp"),
    ("_+_", "(duration, timestamp) -> timestamp"),
    ("_+_", "(duration, duration) -> duration"),
    ("_-_", "(int, int) -> int"),
    ("_-_", "(uint, uint) -> uint"),
    ("_-_", "(double, double) -> double"),
    ("_-_", "(timestamp, timestamp) -> duration"),
    ("_-_", "(timestamp, duration) -> timestamp"),
    ("_-_", "(duration, duration) -> duration"),
    ("_*_", "(int, int) -> int"),
    ("_*_", "(uint, uint) -> uint"),
    ("_*_", "(double, double) -> double"),
    ("_/_", "(int, int) -> int"),
    ("_/_", "(uint, uint) -> uint"),
    ("_/_", "(double, double) -> double"),
    ("_%_", "(int, int) -> int"),
    ("_%_", "(uint, uint) -> uint"),
    ("size", "(string) -> int"),
    ("size", "(bytes) -> int"),
    ("size", "(list(A)) -> int"),
    ("size", "(map(A, B)) -> int"),
    ("size", "string.() -> int"),
    ("size", "bytes.() -> int"),
    ("size", "list(A).() -> int"),
    ("size", "map(A, B).() -> int"),
    ("contains", "string.(string) -> bool"),
    ("startsWith", "string.(string) -> bool"),
    ("endsWith", "string.(string) -> bool"),
    ("matches", "(string, string) -> bool"),
    ("matches", "string.(string) -> bool"),
    ("hasValue", "optional_type(A).() -> bool"),
    ("value", "optional_type(A).() -> A"),
    ("orValue", "optional_type(A).(A) -> A"),
    ("or", "optional_type(A).(optional_type(A)) -> optional_type(A)"),
    // Conversions, whatever they take (kapi does not refuse one cel-go would).
    ("int", "(A) -> int"),
    ("uint", "(A) -> uint"),
    ("double", "(A) -> double"),
    ("string", "(A) -> string"),
    ("bytes", "(A) -> bytes"),
    ("bool", "(A) -> bool"),
    ("timestamp", "(A) -> timestamp"),
    ("duration", "(A) -> duration"),
    ("type", "(A) -> type"),
    ("dyn", "(A) -> dyn"),
    // Timestamps and durations.
    ("getFullYear", "timestamp.() -> int"),
    ("getMonth", "timestamp.() -> int"),
    ("getDayOfYear", "timestamp.() -> int"),
    ("getDayOfMonth", "timestamp.() -> int"),
    ("getDate", "timestamp.() -> int"),
    ("getDayOfWeek", "timestamp.() -> int"),
    ("getHours", "timestamp.() -> int"),
    ("getMinutes", "timestamp.() -> int"),
    ("getSeconds", "timestamp.() -> int"),
    ("getMilliseconds", "timestamp.() -> int"),
    ("getHours", "duration.() -> int"),
    ("getMinutes", "duration.() -> int"),
    ("getSeconds", "duration.() -> int"),
    ("getMilliseconds", "duration.() -> int"),
    // The strings extension.
    ("charAt", "string.(int) -> string"),
    ("indexOf", "string.(string) -> int"),
    ("lastIndexOf", "string.(string) -> int"),
    ("lowerAscii", "string.() -> string"),
    ("upperAscii", "string.() -> string"),
    ("replace", "string.(string, string) -> string"),
    ("split", "string.(string) -> list(string)"),
    ("substring", "string.(int) -> string"),
    ("substring", "string.(int, int) -> string"),
    ("trim", "string.() -> string"),
    ("join", "list(string).() -> string"),
    ("join", "list(string).(string) -> string"),
    // kube's lists, regex, URL, quantity, IP and CIDR libraries.
    ("isSorted", "list(A).() -> bool"),
    ("sum", "list(A).() -> A"),
    ("min", "list(A).() -> A"),
    ("max", "list(A).() -> A"),
    ("indexOf", "list(A).(A) -> int"),
    ("lastIndexOf", "list(A).(A) -> int"),
    ("find", "string.(string) -> string"),
    ("findAll", "string.(string) -> list(string)"),
    ("url", "(string) -> kubernetes.URL"),
    ("isURL", "(string) -> bool"),
    ("getScheme", "kubernetes.URL.() -> string"),
    ("getHost", "kubernetes.URL.() -> string"),
    ("getHostname", "kubernetes.URL.() -> string"),
    ("getPort", "kubernetes.URL.() -> string"),
    ("getEscapedPath", "kubernetes.URL.() -> string"),
    ("getQuery", "kubernetes.URL.() -> map(string, list(string))"),
    ("quantity", "(string) -> kubernetes.Quantity"),
    ("isQuantity", "(string) -> bool"),
    ("sign", "kubernetes.Quantity.() -> int"),
    ("isInteger", "kubernetes.Quantity.() -> bool"),
    ("asInteger", "kubernetes.Quantity.() -> int"),
    ("asApproximateFloat", "kubernetes.Quantity.() -> double"),
    ("add", "kubernetes.Quantity.(kubernetes.Quantity) -> kubernetes.Quantity"),
    ("add", "kubernetes.Quantity.(int) -> kubernetes.Quantity"),
    ("sub", "kubernetes.Quantity.(kubernetes.Quantity) -> kubernetes.Quantity"),
    ("sub", "kubernetes.Quantity.(int) -> kubernetes.Quantity"),
    ("isLessThan", "kubernetes.Quantity.(kubernetes.Quantity) -> bool"),
    ("isGreaterThan", "kubernetes.Quantity.(kubernetes.Quantity) -> bool"),
    ("compareTo", "kubernetes.Quantity.(kubernetes.Quantity) -> int"),
    ("ip", "(string) -> net.IP"),
    ("isIP", "(string) -> bool"),
    ("family", "net.IP.() -> int"),
    ("isUnspecified", "net.IP.() -> bool"),
    ("isLoopback", "net.IP.() -> bool"),
    ("isLinkLocalMulticast", "net.IP.() -> bool"),
    ("isLinkLocalUnicast", "net.IP.() -> bool"),
    ("isGlobalUnicast", "net.IP.() -> bool"),
    ("cidr", "(string) -> net.CIDR"),
    ("isCIDR", "(string) -> bool"),
    ("containsIP", "net.CIDR.(net.IP) -> bool"),
    ("containsIP", "net.CIDR.(string) -> bool"),
    ("containsCIDR", "net.CIDR.(net.CIDR) -> bool"),
    ("containsCIDR", "net.CIDR.(string) -> bool"),
    ("ip", "net.CIDR.() -> net.IP"),
    ("prefixLength", "net.CIDR.() -> int"),
    ("masked", "net.CIDR.() -> net.CIDR"),
];

/// The functions whose every overload kapi declares: a call matching none of them is
/// refused as cel-go refuses it. A call of another function that matches none of the
/// overloads kapi knows is left to run (it may be one kapi does not list).
const COMPLETE: [&str; 29] = [
    "!_",
    "-_",
    "_&&_",
    "_||_",
    "@not_strictly_false",
    "_==_",
    "_!=_",
    "@in",
    "_[_]",
    "_+_",
    "_-_",
    "_*_",
    "_/_",
    "_%_",
    "_<_",
    "_<=_",
    "_>_",
    "_>=_",
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "hasValue",
    "value",
    "orValue",
    "or",
    "lowerAscii",
    "upperAscii",
];

/// The orderings: of two values of one of these types, and (cel-go's cross-type numeric
/// comparisons, which kube enables) of any two numbers.
const ORDERED: [&str; 8] = ["bool", "int", "uint", "double", "string", "bytes", "timestamp", "duration"];

struct Overload {
    member: bool,
    params: Vec<Type>,
    result: Type,
}

static OVERLOADS: LazyLock<BTreeMap<&'static str, Vec<Overload>>> = LazyLock::new(|| {
    let mut all: BTreeMap<&'static str, Vec<Overload>> = BTreeMap::new();
    for (name, signature) in DECLARED {
        all.entry(name).or_default().push(overload(signature));
    }
    for op in ["_<_", "_<=_", "_>_", "_>=_"] {
        for t in ORDERED {
            all.entry(op).or_default().push(overload(&format!("({t}, {t}) -> bool")));
        }
        for (a, b) in [("int", "uint"), ("int", "double"), ("uint", "int"), ("uint", "double"), ("double", "int"), ("double", "uint")] {
            all.entry(op).or_default().push(overload(&format!("({a}, {b}) -> bool")));
        }
    }
    all
});

fn overload(signature: &str) -> Overload {
    let (call, result) = signature.split_once(" -> ").expect("a signature has a result");
    let (receiver, params) = match call.split_once(".(") {
        Some((receiver, params)) => (Some(receiver), params),
        None => (None, call.strip_prefix('(').expect("a signature has parameters")),
    };
    let member = receiver.is_some();
    let mut types: Vec<Type> = receiver.map(parse).into_iter().collect();
    let params = params.strip_suffix(')').expect("parameters end with )");
    types.extend(split_top(params).into_iter().map(parse));
    Overload { member, params: types, result: parse(result) }
}

/// `text` split at the commas outside parentheses.
fn split_top(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if !text.trim().is_empty() {
        parts.push(&text[start..]);
    }
    parts
}

/// What a call of `name` with arguments of types `args` (the receiver first for a member
/// call) returns: `Ok` with its type (`dyn` when kapi does not know the function or which
/// overload is meant), or `Err` when it matches none of a function kapi fully declares.
pub fn result_of(name: &str, member: bool, args: &[Type]) -> Result<Type, ()> {
    let Some(overloads) = OVERLOADS.get(name) else { return Ok(Type::Dyn) };
    let numbers = matches!(name, "_==_" | "_!=_");
    let mut results = overloads.iter().filter(|o| o.member == member && o.params.len() == args.len()).filter_map(|o| {
        let mut bindings = Bindings::default();
        o.params.iter().zip(args).all(|(p, a)| bindings.accepts(p, a, numbers)).then(|| bindings.resolve(&o.result))
    });
    match results.next() {
        None if COMPLETE.contains(&name) => Err(()),
        None => Ok(Type::Dyn),
        Some(first) => Ok(if results.all(|r| r == first) { first } else { Type::Dyn }),
    }
}

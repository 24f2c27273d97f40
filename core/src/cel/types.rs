//! CEL types as cel-go's checker names and matches them, as far as kapi follows them: the
//! types of a schema's values, of literals, and of the results of the functions it knows.
//! [`Type::Dyn`] stands for anything kapi does not know, and matches every type, so that
//! nothing kube's checker accepts is refused.

use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq)]
pub enum Type {
    Dyn,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Null,
    Timestamp,
    Duration,
    /// A type, as `type(x)` or `int` give one.
    Type,
    List(Arc<Type>),
    Map(Arc<Type>, Arc<Type>),
    Optional(Arc<Type>),
    /// An object of known fields, by their CEL names (a reserved word's as `__word__`).
    Object(Arc<BTreeMap<String, Type>>),
    /// A type of kube's libraries (`kubernetes.Quantity`, `net.IP`...).
    Opaque(&'static str),
    /// A struct type, by its name: a mutation's `Object...` and `JSONPatch`.
    Struct(Arc<str>),
    /// A type parameter of a function's signature (`A` in `size(list(A))`).
    Param(char),
}

impl Type {
    pub fn list(item: Type) -> Type {
        Type::List(Arc::new(item))
    }

    pub fn map(key: Type, value: Type) -> Type {
        Type::Map(Arc::new(key), Arc::new(value))
    }

    pub fn optional(of: Type) -> Type {
        Type::Optional(Arc::new(of))
    }

    /// The type as cel-go prints it in its errors. kube names an object's type after a
    /// random one it draws for each rule; kapi calls it `object`.
    pub fn name(&self) -> String {
        match self {
            Type::Dyn => "dyn".into(),
            Type::Bool => "bool".into(),
            Type::Int => "int".into(),
            Type::Uint => "uint".into(),
            Type::Double => "double".into(),
            Type::String => "string".into(),
            Type::Bytes => "bytes".into(),
            Type::Null => "null_type".into(),
            Type::Timestamp => "google.protobuf.Timestamp".into(),
            Type::Duration => "google.protobuf.Duration".into(),
            Type::Type => "type".into(),
            Type::List(item) => format!("list({})", item.name()),
            Type::Map(key, value) => format!("map({}, {})", key.name(), value.name()),
            Type::Optional(of) => format!("optional_type({})", of.name()),
            Type::Object(_) => "object".into(),
            Type::Opaque(name) => (*name).into(),
            Type::Struct(name) => name.to_string(),
            Type::Param(p) => p.to_string(),
        }
    }

    /// What a comprehension over a value of this type binds to its variable: a list's
    /// items, a map's keys; `None` for a type that cannot be ranged over.
    pub fn element(&self) -> Option<Type> {
        match self {
            Type::List(item) => Some((**item).clone()),
            Type::Map(key, _) => Some((**key).clone()),
            Type::Dyn => Some(Type::Dyn),
            _ => None,
        }
    }

    fn is_number(&self) -> bool {
        matches!(self, Type::Int | Type::Uint | Type::Double)
    }
}

/// Type parameters bound while a signature is matched.
#[derive(Default)]
pub struct Bindings(BTreeMap<char, Type>);

impl Bindings {
    /// Whether an argument of type `arg` may be passed for a parameter of type `param`,
    /// binding the parameter's type variables. `numbers`: any number passes for any other
    /// (kapi does not refuse what cel-go's equality of mixed numbers may accept).
    pub fn accepts(&mut self, param: &Type, arg: &Type, numbers: bool) -> bool {
        match (param, arg) {
            (_, Type::Dyn) | (Type::Dyn, _) => {
                if let Type::Param(p) = param {
                    self.0.entry(*p).or_insert(Type::Dyn);
                }
                true
            }
            // cel-go accepts null where a type is nullable; kapi does not judge which are.
            (_, Type::Null) => true,
            (Type::Param(p), _) => match self.0.get(p).cloned() {
                Some(bound) => {
                    let ok = self.accepts(&bound, arg, numbers) || self.accepts(arg, &bound, numbers);
                    if ok && bound == Type::Dyn {
                        self.0.insert(*p, arg.clone());
                    }
                    ok
                }
                None => {
                    self.0.insert(*p, arg.clone());
                    true
                }
            },
            (Type::List(p), Type::List(a)) | (Type::Optional(p), Type::Optional(a)) => self.accepts(p, a, numbers),
            (Type::Map(pk, pv), Type::Map(ak, av)) => self.accepts(pk, ak, numbers) && self.accepts(pv, av, numbers),
            // Two objects of a schema may be of different types in cel-go (kube names each
            // node's); kapi lets them meet.
            (Type::Object(_), Type::Object(_)) => true,
            (p, a) if numbers && p.is_number() && a.is_number() => true,
            (p, a) => p == a,
        }
    }

    /// `t` with its type parameters replaced by what they are bound to (`dyn` if unbound).
    pub fn resolve(&self, t: &Type) -> Type {
        match t {
            Type::Param(p) => self.0.get(p).cloned().unwrap_or(Type::Dyn),
            Type::List(item) => Type::list(self.resolve(item)),
            Type::Map(key, value) => Type::map(self.resolve(key), self.resolve(value)),
            Type::Optional(of) => Type::optional(self.resolve(of)),
            other => other.clone(),
        }
    }
}

/// Parses a type as the signatures of [`super::signatures`] spell it: cel-go's names,
/// `timestamp` and `duration` for the protobuf types, a capital letter for a parameter.
pub fn parse(text: &str) -> Type {
    let text = text.trim();
    let inner = |prefix: &str| text.strip_prefix(prefix).and_then(|t| t.strip_suffix(')'));
    if let Some(item) = inner("list(") {
        return Type::list(parse(item));
    }
    if let Some(of) = inner("optional_type(") {
        return Type::optional(parse(of));
    }
    if let Some(kv) = inner("map(") {
        let (key, value) = kv.split_once(',').expect("a map type has a key and a value");
        return Type::map(parse(key), parse(value));
    }
    match text {
        "dyn" => Type::Dyn,
        "bool" => Type::Bool,
        "int" => Type::Int,
        "uint" => Type::Uint,
        "double" => Type::Double,
        "string" => Type::String,
        "bytes" => Type::Bytes,
        "null_type" => Type::Null,
        "timestamp" => Type::Timestamp,
        "duration" => Type::Duration,
        "type" => Type::Type,
        "kubernetes.Quantity" => Type::Opaque("kubernetes.Quantity"),
        "kubernetes.URL" => Type::Opaque("kubernetes.URL"),
        "net.IP" => Type::Opaque("net.IP"),
        "net.CIDR" => Type::Opaque("net.CIDR"),
        p if p.len() == 1 && p.chars().all(|c| c.is_ascii_uppercase()) => Type::Param(p.chars().next().unwrap_or('A')),
        other => panic!("signature type {other:?} is not one kapi knows"),
    }
}

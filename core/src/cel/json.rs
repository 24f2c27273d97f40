//! A JSON tree as the interpreter reads it, borrowed rather than converted: kube hands an
//! admission policy the decoded object as lazily wrapped values, and kapi's expressions read
//! the write's JSON in place the same way.
//!
//! Scalars become the interpreter's own values (strings borrowed, not copied). A list or map
//! becomes a [`Lazy`] node that holds a reference to its JSON and builds the interpreter's
//! list or map of it, one level deep, the first time it is read; its members are nodes in
//! turn. Copying a node (what a comprehension does with each item it binds) copies the
//! reference, and shares what is built of it. Every operation is the built list's or map's own, so a node behaves exactly as
//! the value cel-rust would have made of the whole tree: equality, `in`, `size`, indexing,
//! iteration, conversion, and the library functions that take a list or map.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cel::common::traits::{Adder, Comparer, Container, Divider, Indexer, Iterable, Modder, Multiplier, Negator, Sizer, Subtractor, Zeroer};
use cel::common::types::{CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, Type};
use cel::common::value::{Builtin, BuiltinRef, Val};
use serde_json::Value;

/// `v` as the interpreter reads it, as [`super::to_value`] would convert it: integers as
/// `int` (beyond an int64, `double`), other numbers as `double`, objects as maps.
pub fn val<'v>(v: &'v Value) -> Box<dyn Val + 'v> {
    match v {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Box::new(CelInt::from(i)),
            None => Box::new(CelDouble::from(n.as_f64().unwrap_or_default())),
        },
        Value::String(s) => Box::new(CelString::from(s.as_str())),
        Value::Array(_) => Box::new(Lazy::<CelList>::new(v)),
        Value::Object(_) => Box::new(Lazy::<CelMap>::new(v)),
    }
}

/// A list or map the interpreter can build from JSON, one level deep.
trait FromJson<'v>: Val + Sized + 'v {
    fn from_json(json: &'v Value) -> Self;
}

impl<'v> FromJson<'v> for CelList<'v> {
    fn from_json(json: &'v Value) -> Self {
        let items = json.as_array().map_or(&[][..], Vec::as_slice);
        CelList::from(items.iter().map(val).collect::<Vec<_>>())
    }
}

impl<'v> FromJson<'v> for CelMap<'v> {
    fn from_json(json: &'v Value) -> Self {
        let members = json.as_object().into_iter().flatten();
        CelMap::from(members.map(|(k, v)| (CelMapKey::from(k.as_str()), val(v))).collect::<HashMap<_, _>>())
    }
}

/// A JSON list or map, built into `T` when first read; its copies share what is built.
#[derive(Debug)]
struct Lazy<'v, T> {
    json: &'v Value,
    built: Arc<OnceLock<T>>,
}

impl<'v, T: FromJson<'v>> Lazy<'v, T> {
    fn new(json: &'v Value) -> Self {
        Lazy { json, built: Arc::default() }
    }

    fn built(&self) -> &T {
        self.built.get_or_init(|| T::from_json(self.json))
    }

    fn into_built(self) -> T {
        let Lazy { json, built } = self;
        Arc::into_inner(built).and_then(OnceLock::into_inner).unwrap_or_else(|| T::from_json(json))
    }
}

/// The `Val` accessors that hand out the built value's own: those whose answer may borrow for
/// the value's lifetime, then the others.
macro_rules! by_the_built {
    ($($borrowing:ident: $btrait:ident),*; $($plain:ident: $ptrait:ident),*) => {
        $(
            fn $borrowing<'b, 'w>(&'b self) -> Option<&'b (dyn $btrait + 'w)>
            where
                Self: 'w,
            {
                self.built().$borrowing()
            }
        )*
        $(
            fn $plain(&self) -> Option<&dyn $ptrait> {
                self.built().$plain()
            }
        )*
    };
}

/// Every operation is the built value's: the node is what cel-rust would have made of it.
impl<'v, T: FromJson<'v>> Val for Lazy<'v, T> {
    fn get_type(&self) -> &Type {
        T::cel_type()
    }

    fn cel_type() -> &'static Type {
        T::cel_type()
    }

    by_the_built! {
        as_adder: Adder, as_divider: Divider, as_indexer: Indexer, as_iterable: Iterable,
        as_modder: Modder, as_multiplier: Multiplier, as_negator: Negator, as_subtractor: Subtractor;
        as_comparer: Comparer, as_container: Container, as_sizer: Sizer, as_zeroer: Zeroer
    }

    fn into_indexer<'w>(self: Box<Self>) -> Option<Box<dyn Indexer + 'w>>
    where
        Self: 'w,
    {
        Box::new(self.into_built()).into_indexer()
    }

    fn equals(&self, other: &dyn Val) -> bool {
        self.built().equals(other)
    }

    /// The copy reads the same JSON, and shares what is built of it.
    fn clone_as_boxed<'w>(&self) -> Box<dyn Val + 'w>
    where
        Self: 'w,
    {
        Box::new(Lazy { json: self.json, built: Arc::clone(&self.built) })
    }

    /// The built list or map: what a function taking one, equality with one, and the
    /// conversion of a result find (cel-rust recovers its built-in values through this).
    fn as_builtin<'b, 'w>(&'b self) -> BuiltinRef<'b, 'w>
    where
        Self: 'w,
    {
        self.built().as_builtin()
    }

    fn into_builtin<'w>(self: Box<Self>) -> Option<Builtin<'w>>
    where
        Self: 'w,
    {
        Box::new(self.into_built()).into_builtin()
    }
}

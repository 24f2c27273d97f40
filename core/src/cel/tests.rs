use std::collections::BTreeMap;

use super::cost::{MAX_REQUEST_BYTES, RULE_LIMIT, Shape, estimate};
use super::{Expression, Value};

fn eval(source: &str) -> Result<Value, String> {
    Expression::compile(source)?.evaluate(Vec::new())
}

fn is_true(source: &str) {
    assert_eq!(eval(source), Ok(Value::Bool(true)), "{source}");
}

#[test]
fn the_standard_library_and_kubes_libraries_are_offered() {
    is_true("[1, 2, 3].all(x, x > 0) && [1, 2].exists(x, x == 2) && has({'a': 1}.a)");
    is_true("'abc'.matches('^a') && 'a-b'.split('-') == ['a', 'b'] && 'ABC'.lowerAscii() == 'abc'");
    is_true("[1, 2, 3].isSorted() && ![2, 1].isSorted() && [1, 2, 3].sum() == 6 && [].sum() == 0");
    is_true("[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3 && [1.5, 2.5].sum() == 4.0");
    is_true("[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2 && [1].indexOf(5) == -1");
    is_true("'abc 123 def 456'.find('[0-9]+') == '123' && 'abc 123 def 456'.findAll('[0-9]+') == ['123', '456']");
    is_true("'a1b2c3'.findAll('[0-9]', 2) == ['1', '2'] && 'abc'.find('x') == ''");
    is_true("sets.contains([1, 2, 3], [2, 1]) && !sets.contains([1], [2]) && sets.equivalent([1, 2, 2], [2, 1])");
    is_true("sets.intersects([1, 2], [2, 3]) && !sets.intersects([1], []) && optional.of(1).hasValue()");
    assert!(eval("[].min()").unwrap_err().contains("min called on empty list"));
    assert!(eval("[1, 'a'].isSorted()").is_err());
}

#[test]
fn variables_are_bound_and_references_known() {
    let e = Expression::compile("self.replicas <= oldSelf.replicas + 1").unwrap();
    assert!(e.uses("oldSelf") && e.uses("self") && !e.uses("other"));
    let obj = |n: i64| Value::Map(std::collections::HashMap::from([(cel::objects::Key::from("replicas"), Value::Int(n))]).into());
    assert_eq!(e.evaluate(vec![("self", obj(3)), ("oldSelf", obj(2))]), Ok(Value::Bool(true)));
    assert_eq!(e.evaluate(vec![("self", obj(4)), ("oldSelf", obj(2))]), Ok(Value::Bool(false)));
    assert!(Expression::compile("self.").is_err());
    assert!(Expression::compile("1 +").is_err());
}

fn list(max: u64, items: Shape) -> Shape {
    Shape::List { max, items: Box::new(items) }
}

fn cost(source: &str, shape: Shape) -> u64 {
    estimate(&Expression::compile(source).unwrap(), &[("self", shape)])
}

#[test]
fn costs_grow_with_the_sizes_that_bound_them() {
    let bounded = list(10, Shape::String { max: 10 });
    let unbounded = list(MAX_REQUEST_BYTES / 3, Shape::String { max: MAX_REQUEST_BYTES });
    assert!(cost("self.all(x, x.startsWith('a'))", bounded.clone()) < 100);
    assert!(cost("self.all(x, self.all(y, x != y))", bounded) < 1_000);
    assert!(cost("self.all(x, x.startsWith('a'))", unbounded.clone()) < RULE_LIMIT, "a prefix test reads only the prefix");
    assert!(cost("self.all(x, x.contains('a'))", unbounded.clone()) > RULE_LIMIT);
    assert!(cost("self.all(x, self.all(y, x == y))", list(MAX_REQUEST_BYTES / 2, Shape::Scalar)) > RULE_LIMIT);
    assert!(cost("size(self) < 5", unbounded) < 10);
    let object = Shape::Object { fields: BTreeMap::from([("name".to_string(), Shape::String { max: 63 })]) };
    assert!(cost("self.name.matches('^[a-z]+$')", object) < 100);
    assert!(cost("self.map(x, x * 2).filter(y, y > 3).size() > 0", list(100, Shape::Scalar)) < 5_000);
}

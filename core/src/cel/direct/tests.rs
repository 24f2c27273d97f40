//! The direct evaluator against the interpreter: on generated expressions over generated
//! objects, whatever the direct evaluator answers is the interpreter's answer.

use proptest::prelude::*;
use serde_json::{Value as Json, json};

use super::super::cost::{CALL_LIMIT, Shape, estimate};
use super::super::{Bindings, Expression, Value};
use super::evaluate;

/// The objects expressions are run on: a pod-like object with lists, maps, numbers of each
/// kind, nulls and strings that are not ASCII.
fn object() -> impl Strategy<Value = Json> {
    let name = prop_oneof![Just("web"), Just(""), Just("naïve-ü"), Just("web:latest")];
    let image = prop_oneof![Just(json!("nginx:latest")), Just(json!("nginx:1.27")), Just(json!(null)), Just(json!(3))];
    let container = (name.clone(), image).prop_map(|(n, i)| json!({"name": n, "image": i, "ports": [{"containerPort": 80}]}));
    let replicas = prop_oneof![Just(json!(3)), Just(json!(-1)), Just(json!(2.5)), Just(json!(u64::MAX)), Just(json!(null))];
    (name, proptest::collection::vec(container, 0..3), replicas, any::<bool>()).prop_map(|(n, containers, replicas, labelled)| {
        let labels = if labelled { json!({"app": n, "tier": "front"}) } else { json!({}) };
        json!({"metadata": {"name": n, "labels": labels}, "spec": {"containers": containers, "replicas": replicas, "paused": labelled}})
    })
}

/// Strings, of the object and literal.
fn text() -> impl Strategy<Value = String> {
    proptest::sample::select(
        &["object.metadata.name", "object.spec.containers[0].image", "c.image", "c.name", "'web'", "':latest'", "'nginx'", "'ü'", "''"][..],
    )
    .prop_map(str::to_string)
}

/// Expressions of every node the direct evaluator knows, and some it does not (`matches`,
/// unsigned literals, a second iteration variable), mixing types freely, with operands of
/// the types each operation takes more often than not.
fn expression() -> impl Strategy<Value = String> {
    let others = prop_oneof![
        Just("object".to_string()),
        Just("object.metadata.name".to_string()),
        Just("object.metadata.labels".to_string()),
        Just("object.metadata.labels['app']".to_string()),
        Just("object.spec.containers".to_string()),
        Just("object.spec.containers[0].image".to_string()),
        Just("object.spec.replicas".to_string()),
        Just("object.spec.paused".to_string()),
        Just("object.missing".to_string()),
        Just("oldObject".to_string()),
        Just("params".to_string()),
        Just("1".to_string()),
        Just("-3".to_string()),
        Just("2.5".to_string()),
        Just("3u".to_string()),
        Just("9223372036854775807".to_string()),
        Just("'web'".to_string()),
        Just("':latest'".to_string()),
        Just("'ü'".to_string()),
        Just("true".to_string()),
        Just("null".to_string()),
        Just("['web', 'app']".to_string()),
        Just("[1, 2.5]".to_string()),
        Just("has(object.metadata.labels.app)".to_string()),
        Just("has(object.spec.x)".to_string()),
    ];
    let leaf = prop_oneof![1 => text(), 3 => others];
    leaf.prop_recursive(4, 40, 3, |inner| {
        const BINARY: [&str; 11] = ["&&", "||", "==", "!=", "<", "<=", ">", ">=", "+", "-", "in"];
        prop_oneof![
            inner.clone().prop_map(|a| format!("!({a})")),
            inner.clone().prop_map(|a| format!("-({a})")),
            inner.clone().prop_map(|a| format!("size({a})")),
            (text(), text(), proptest::sample::select(&["startsWith", "endsWith", "contains", "==", "<", "+"][..])).prop_map(|(a, b, f)| match f {
                "==" | "<" | "+" => format!("{a} {f} {b}"),
                _ => format!("{a}.{f}({b})"),
            }),
            (
                text(),
                proptest::sample::select(&["object.spec.containers", "[object.metadata]", "object.metadata.labels"][..]),
                proptest::sample::select(&["all", "exists", "exists_one"][..]),
                text()
            )
                .prop_map(|(a, range, m, b)| format!("{range}.{m}(c, {a}.endsWith({b}) || {a} == {b})")),
            inner.clone().prop_map(|a| format!("({a}).size()")),
            (inner.clone(), inner.clone(), proptest::sample::select(&BINARY[..])).prop_map(|(a, b, op)| format!("({a}) {op} ({b})")),
            (inner.clone(), inner.clone(), inner.clone()).prop_map(|(a, b, c)| format!("({a}) ? ({b}) : ({c})")),
            (inner.clone(), inner.clone(), proptest::sample::select(&["startsWith", "endsWith", "contains", "matches"][..]))
                .prop_map(|(a, b, f)| format!("({a}).{f}({b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a})[{b}]")),
            (inner.clone(), inner.clone(), proptest::sample::select(&["all", "exists", "exists_one", "map", "filter"][..]))
                .prop_map(|(range, body, m)| format!("({range}).{m}(c, {})", body.replace("object.spec.containers[0]", "c"))),
            inner.clone().prop_map(|range| format!("({range}).all(k, v, true)")),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    #[test]
    fn what_the_direct_evaluator_answers_is_the_interpreters_answer(source in expression(), object in object(), old in object()) {
        let Ok(e) = Expression::compile(&source) else { return Ok(()) };
        let mut inputs = Bindings::default();
        inputs.bind_json("object", &object);
        inputs.bind_json("oldObject", &old);
        let own = Bindings::new([("params", Value::Null)]);
        let layers = [&own, &inputs];
        let interpreted = e.evaluate_in(&layers);
        if let Some(node) = &e.direct
            && let Ok((direct, cost)) = evaluate(node, &layers, u64::MAX)
        {
            prop_assert_eq!(Ok(direct), interpreted, "{}", source);
            let shapes = [("params", Shape::Scalar), ("object", Shape::of_json(&object)), ("oldObject", Shape::of_json(&old))];
            prop_assert!(cost <= estimate(&e, &shapes), "{}: cost {} over the estimate", source, cost);
        }
    }
}

/// The expressions admission policies are made of are evaluated directly (the generated ones
/// above would pass with none).
#[test]
fn a_policys_usual_expressions_are_evaluated_directly() {
    let object =
        json!({"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"replicas": 3, "containers": [{"name": "web", "image": "nginx:1.27"}]}});
    let mut inputs = Bindings::default();
    inputs.bind_json("object", &object);
    inputs.bind("oldObject", Value::Null);
    for (source, expected) in [
        ("object.spec.containers.all(c, !c.image.endsWith(':latest'))", Value::Bool(true)),
        ("size(object.metadata.name) < 64", Value::Bool(true)),
        ("object.spec.replicas <= 5 && 'app' in object.metadata.labels", Value::Bool(true)),
        ("has(object.metadata.labels.team) || oldObject == null", Value::Bool(true)),
        ("object.spec.containers.exists_one(c, c.name == 'web') ? object.metadata.name + '!' : ''", Value::String("web!".to_string().into())),
    ] {
        let e = Expression::compile(source).expect("compiles");
        let node = e.direct.as_ref().unwrap_or_else(|| panic!("{source} is lowered"));
        assert_eq!(evaluate(node, &[&inputs], u64::MAX).ok().map(|(v, _)| v), Some(expected), "{source}");
    }
    for source in ["object.spec.containers.map(c, c.name)", "object.spec.containers.exists(sets, sets.contains('b'))"] {
        let e = Expression::compile(source).expect("compiles");
        assert!(e.direct.is_none(), "{source}: the interpreter's (a list built; a namespace's function)");
    }
}

/// What an evaluation costs is counted as it runs: a loop that stops early costs what it ran,
/// where the estimate of the whole list passes the limit of a call; one that does not stop is
/// stopped once it passes it.
#[test]
fn an_evaluation_costs_what_it_ran() {
    let mut items = vec![json!("a")];
    items.extend(std::iter::repeat_n(json!("b"), 200_000));
    let object = json!({"items": items});
    let mut inputs = Bindings::default();
    inputs.bind_json("object", &object);
    let shapes = [("object", Shape::of_json(&object))];
    let found = Expression::compile("object.items.exists(x, x == 'a')").expect("compiles");
    assert!(estimate(&found, &shapes) > CALL_LIMIT);
    assert_eq!(found.evaluate_directly(&[&inputs], CALL_LIMIT), Some(Ok((Value::Bool(true), 12))));
    let all = Expression::compile("object.items.all(x, x != 'c')").expect("compiles");
    assert_eq!(all.evaluate_directly(&[&inputs], CALL_LIMIT), Some(Err(())));
    // An inner loop that stops at once costs (and reads) only what it ran, each time.
    let nested = Expression::compile("object.items.all(x, object.items.exists(y, y == 'a'))").expect("compiles");
    assert_eq!(nested.evaluate_directly(&[&inputs], CALL_LIMIT), Some(Err(())));
    let astray = Expression::compile("object.items.all(x, x != 1)").expect("compiles");
    assert_eq!(astray.evaluate_directly(&[&inputs], CALL_LIMIT), None, "a string and an int: the interpreter's");
}

use std::collections::BTreeMap;
use std::sync::Arc;

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
fn kubes_quantity_ip_cidr_and_url_libraries_are_offered() {
    is_true("quantity('1Gi').isGreaterThan(quantity('1000Mi')) && quantity('500m').compareTo(quantity('0.5')) == 0");
    is_true("quantity('1k') == quantity('1000') && quantity('1.5').add(1).asApproximateFloat() == 2.5 && quantity('2').sub(quantity('3')).sign() == -1");
    is_true("quantity('10').asInteger() == 10 && !quantity('0.1').isInteger() && isQuantity('5M') && !isQuantity('5 apples')");
    assert!(eval("quantity('0.1').asInteger()").is_err());
    assert!(eval("quantity('x')").unwrap_err().contains("quantities must match the regular expression"));
    is_true("isIP('10.0.0.1') && !isIP('10.0.0.300') && !isIP('::ffff:1.2.3.4') && ip('::1').family() == 6 && ip('127.0.0.1').isLoopback()");
    is_true(
        "ip('10.1.2.3').isGlobalUnicast() && !ip('169.254.0.1').isGlobalUnicast() && ip('fe80::1').isLinkLocalUnicast() && ip('ff02::1').isLinkLocalMulticast()",
    );
    is_true("ip.isCanonical('2001:db8::1') && !ip.isCanonical('2001:db8:0::1') && string(ip('2001:db8:0::1')) == '2001:db8::1' && ip('::1') == ip('0::1')");
    is_true("cidr('10.0.0.0/8').containsIP('10.1.2.3') && !cidr('10.0.0.0/8').containsIP(ip('11.0.0.1')) && cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')");
    is_true(
        "!cidr('10.1.0.0/16').containsCIDR(cidr('10.0.0.0/8')) && cidr('10.1.2.3/8').masked() == cidr('10.0.0.0/8') && cidr('10.1.2.3/8').ip() == ip('10.1.2.3')",
    );
    is_true("cidr('fd00::/64').prefixLength() == 64 && string(cidr('10.0.0.0/8')) == '10.0.0.0/8' && isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0/33')");
    is_true("url('https://user@example.com:8443/a%20b?x=1&x=2&y=%41').getHost() == 'example.com:8443' && url('https://example.com:8443/').getPort() == '8443'");
    is_true("url('https://[::1]:80/p').getHostname() == '::1' && url('https://example.com/a%20b').getEscapedPath() == '/a%20b' && url('/p').getScheme() == ''");
    is_true("url('https://e.com/?x=1&x=2&y=%41+b').getQuery() == {'x': ['1', '2'], 'y': ['A b']} && isURL('https://e.com') && !isURL('e.com/x')");
}

#[test]
fn kubes_format_library_is_offered() {
    is_true("!format.dns1123Label().validate('my-name').hasValue() && format.dns1123Label().validate('My_Name').hasValue()");
    is_true("!format.dns1123LabelPrefix().validate('my-').hasValue() && format.dns1123Label().validate('my-').hasValue()");
    is_true("format.named('uuid').hasValue() && !format.named('nope').hasValue() && !format.named('uri').value().validate('https://a/b').hasValue()");
    is_true("format.labelValue().validate('a b').value().size() == 1 && !format.datetime().validate('2024-01-01T00:00:00Z').hasValue()");
    assert_eq!(
        eval("format.dns1123Label().validate('A').value()[0]"),
        Ok(Value::String(Arc::new("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".into())))
    );
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
    Shape::List { max, items: std::sync::Arc::new(items) }
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
    let object = Shape::Object { fields: std::sync::Arc::new(BTreeMap::from([("name".to_string(), Shape::String { max: 63 })])) };
    assert!(cost("self.name.matches('^[a-z]+$')", object) < 100);
    assert!(cost("self.map(x, x * 2).filter(y, y > 3).size() > 0", list(100, Shape::Scalar)) < 5_000);
    let small = list(100, Shape::Scalar);
    let hidden = "(dyn(self) + []).all(a, (dyn(self) + []).all(b, (dyn(self) + []).all(c, true)))";
    assert!(cost(hidden, small.clone()) > RULE_LIMIT, "a list of unknown size is as long as a request allows");
    assert!(cost("self.all(x, x in dyn(self))", small.clone()) > RULE_LIMIT);
    assert!(cost("string(self).findAll('')", Shape::String { max: MAX_REQUEST_BYTES }) > 100_000);
    assert!(cost("self.all(x, duration(string(x)) > duration('1s'))", small) < 10_000, "conversions cost one, as cel-go's");
    let held = Shape::Object { fields: std::sync::Arc::new(BTreeMap::from([("x".to_string(), list(1000, Shape::Scalar))])) };
    assert!(cost("self.?x.optMap(xs, xs.map(a, xs.map(b, a + b))).orValue([]).size() > 0", held) > 1_000_000, "what optMap binds is its target");
}

#[test]
fn expressions_too_long_or_too_deep_are_refused_before_they_are_parsed() {
    let deep = vec!["1"; 5000].join("+");
    assert!(Expression::compile(&deep).unwrap_err().contains("expression recursion limit exceeded: 100"));
    let long = format!("'{}' == ''", "a".repeat(100_000));
    assert!(Expression::compile(&long).unwrap_err().contains("expression code point size exceeds limit"));
    let wide = vec!["self.a == 1"; 500].join(" && ");
    assert!(Expression::compile(&wide).is_ok(), "many clauses are not deep");
}

#[test]
fn an_actual_value_is_costed_at_its_own_sizes() {
    let map = |pairs: &[(&str, cel::Value)]| {
        cel::Value::Map(pairs.iter().map(|(k, v)| (cel::objects::Key::from(*k), v.clone())).collect::<std::collections::HashMap<_, _>>().into())
    };
    let text = |n: usize| cel::Value::String(std::sync::Arc::new("a".repeat(n)));
    // Maps with other keys each: the items' shape has every key, each at its widest.
    let items: Vec<cel::Value> = (0..1000).map(|i| map(&[(format!("k{i}").as_str(), text(i)), ("name", text(5))])).collect();
    let shape = Shape::of(&cel::Value::List(std::sync::Arc::new(items)));
    let Shape::List { max: 1000, items } = &shape else { panic!("{shape:?}") };
    let Shape::Members { fields, key: 4 } = &**items else { panic!("{items:?}") };
    assert_eq!((fields.len(), fields["name"].clone(), items.indexed()), (1001, Shape::String { max: 5 }, Shape::String { max: 999 }));
    assert!(cost("self.all(x, x.name.matches('^[a-z]+$'))", shape.clone()) < 50_000, "a member is costed at its own size");
    // Items of different kinds are costed at the larger, not as a request's whole body.
    let mixed = Shape::of(&cel::Value::List(std::sync::Arc::new(vec![text(3), cel::Value::List(std::sync::Arc::new(vec![text(1); 7]))])));
    assert!(cost("self.all(x, string(x).contains('a'))", mixed) < 1_000);
}

/// Expressions over `o`, read in place ([`super::Bindings::bind_json`], [`Shape::of_json`])
/// and converted first ([`super::to_value`], [`Shape::of`]): the same results, the same
/// errors, the same estimated costs.
#[test]
fn json_read_in_place_is_what_the_converted_value_is() {
    use super::{Bindings, to_value};
    let json = serde_json::json!({
        "metadata": {"name": "web", "labels": {"app": "web", "tier": "front"}, "annotations": {}},
        "spec": {
            "replicas": 3, "ratio": 0.5, "big": 18446744073709551615u64, "paused": false, "none": null,
            "containers": [
                {"name": "a", "image": "nginx:1.27", "ports": [{"containerPort": 80}, {"containerPort": 443}]},
                {"name": "b", "image": "busybox:latest", "args": ["sleep", "10"]},
            ],
            "tags": ["x", "y", "z"], "numbers": [3, 1, 2], "empty": [],
            "mixed": [{"a": "xx"}, {"a": "yyyy", "b": [1, 2]}, "str", [1, 2, 3], null],
        },
    });
    let expressions = [
        "o.metadata.name",
        "o.metadata.labels",
        "o.spec.containers",
        "o.spec.containers.all(c, !c.image.endsWith(':latest'))",
        "o.spec.containers.exists(c, c.name == 'b')",
        "o.spec.containers.map(c, c.name)",
        "o.spec.containers.filter(c, has(c.ports)).map(c, c.ports.map(p, p.containerPort))",
        "o.spec.containers[1].args + ['more']",
        "['first'] + o.spec.tags",
        "o.spec.tags == ['x', 'y', 'z'] && ['x', 'y', 'z'] == o.spec.tags",
        "o.metadata.labels == {'app': 'web', 'tier': 'front'} && {'tier': 'front', 'app': 'web'} == o.metadata.labels",
        "o.metadata.labels == o.metadata.labels && o.spec.containers[0] != o.spec.containers[1]",
        "o.metadata.annotations == {} && o.spec.empty == [] && size(o.spec.empty) == 0",
        "'app' in o.metadata.labels && !('x' in o.metadata.labels) && 'y' in o.spec.tags && 2 in o.spec.numbers",
        "size(o.spec.containers) + size(o.metadata.labels) + size(o.metadata.name)",
        "o.metadata.labels['tier'] + o.spec.tags[2]",
        "o.spec.numbers.isSorted() || o.spec.numbers.sum() == 6 && o.spec.numbers.max() == 3",
        "o.spec.tags.join('-') + string(o.spec.numbers.indexOf(1))",
        "sets.contains(o.spec.tags, ['z', 'x']) && sets.equivalent(o.spec.numbers, [1, 2, 3])",
        "o.spec.replicas * 2 + int(o.spec.ratio * 10.0)",
        "o.spec.big > 1.0 && o.spec.paused == false && o.spec.none == null",
        "has(o.spec.replicas) && !has(o.spec.missing) && has(o.metadata.labels.app)",
        "o.spec.?missing.orValue('default') + o.metadata.?name.orValue('')",
        "o.metadata.labels.all(k, k.size() > 2) && o.metadata.labels.exists_one(k, k == 'app')",
        "o.metadata.labels.map(k, k).size()",
        "o.spec.containers.map(c, {'n': c.name, 'p': c.?ports.orValue([])})",
        "o.spec.missing",
        "o.spec.tags[5]",
        "o.metadata.labels[1]",
        "o.spec.containers[0].image.foo",
        "type(o.spec) == map && type(o.spec.tags) == list",
        "o.spec.tags.exists(t, t == o.metadata.labels.app)",
        "o.spec.containers.all(c, c.all(k, k.size() < 10)) && o.metadata.labels.all(k, o.metadata.labels[k].matches('^[a-z]+$'))",
        "o.spec.containers.map(c, c.?ports.orValue([]).size()).sum() + o.spec.tags.join(',').size()",
        "o.spec.containers[0].name + o.metadata.labels[o.metadata.name] + (true ? o.spec.containers[1] : o.spec).name",
        "o.?spec.value().containers[0].name + o.spec.?containers.value()[1].args[0]",
        "o.spec.containers.map(c, c)[0].ports[1].containerPort + {'s': o.spec}.s.numbers[2]",
        "optional.of(o.metadata).value().labels.app + o.spec.?containers.orValue([])[0].name + [o.spec][0].tags[0]",
        "{o.metadata.name: o.spec}[o.metadata.name].replicas",
        "{o.spec.tags: 1}",
        "o.spec.tags[1u] + o.spec.tags[1.0]",
        "o.spec.tags[1.5]",
        "o.spec.tags[-1]",
        "o.spec.tags['a']",
        "o.metadata.labels[true]",
        "1 in o.metadata.labels",
        "o.spec.tags in o.metadata.labels",
        "o.spec < o.spec",
        "-o.spec.tags",
        "o.spec.tags + o.spec.ratio",
        "dyn(o.spec) == o.spec && o == o && o.spec.containers == o.spec.containers.map(c, c)",
        "o.spec.containers[0] in o.spec.containers && optional.of(o.spec) == optional.of(o.spec)",
        "optional.ofNonZeroValue(o.spec.empty).hasValue() || optional.ofNonZeroValue(o.metadata.annotations).hasValue()",
        "'%s'.format([o.spec.containers[1].args])",
        "o.?spec.?tags[?0].orValue('') + o.spec[?'tags'][?9].orValue('none')",
        "o.spec.containers.exists(c, c.ports[5].containerPort == 1)",
        "o.spec.?tags.optMap(t, t.join(',')).orValue('')",
        "o.spec.?containers.optMap(cs, cs.map(c, cs.map(d, d.name + c.name))).orValue([])",
        "[o.spec, o.metadata].map(x, string(x)).size()",
        "(o.spec.containers + o.spec.containers).size()",
        "o[o.metadata.name]",
        "o.spec.mixed.map(m, string(m)).size()",
        "o.spec.mixed[1].b.sum() + size(o.spec.mixed[3])",
    ];
    let mut lazy = Bindings::default();
    lazy.bind_json("o", &json);
    let converted = Bindings::new([("o", to_value(&json))]);
    // One shape read by every estimate, as one write's is by its policies' expressions.
    let in_place_shape = Shape::of_json(&json);
    for source in expressions {
        let e = Expression::compile(source).unwrap_or_else(|e| panic!("{source}: {e}"));
        let (read, made) = (e.evaluate_in(&[&lazy]), e.evaluate_in(&[&converted]));
        assert_eq!(read, made, "{source}");
        let (in_place, whole) = (estimate(&e, &[("o", in_place_shape.clone())]), estimate(&e, &[("o", Shape::of(&to_value(&json)))]));
        assert_eq!(in_place, whole, "{source}");
    }
}

#[test]
fn a_mutation_builds_objects_and_json_patches() {
    use super::mutation::{struct_paths, to_json};
    use serde_json::json;
    let run = |source: &str| Expression::compile_mutation(source).unwrap().evaluate(vec![("object", super::to_value(&json!({"spec": {"a": 1}})))]);
    let applied = run("Object{spec: Object.spec{replicas: object.spec.a + 1, ?paused: optional.none(), ?x: optional.of('y')}}").unwrap();
    assert_eq!(to_json(&applied), Ok(json!({"spec": {"replicas": 2, "x": "y"}})));
    let mut paths = Vec::new();
    struct_paths(&applied, "", &mut paths);
    assert_eq!(paths, [("Object".to_string(), String::new()), ("Object.spec".to_string(), ".spec".to_string())]);
    let patch = run("[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('a.io/b~c'), value: 'v'}]").unwrap();
    assert_eq!(to_json(&patch), Ok(json!([{"op": "add", "path": "/metadata/labels/a.io~1b~0c", "value": "v"}])));
    is_true_mutation("JSONPatch{op: 'test'}.op == 'test' && JSONPatch{op: 'a', path: '/x'} == JSONPatch{path: '/x', op: 'a'}");
    assert!(run("JSONPatch{op: dyn(1)}").unwrap_err().contains("unexpected type int for JSONPatchType 'op' field"));
    // Outside a mutation, none of it is declared.
    assert!(eval("Object{}").is_err() && eval("jsonpatch.escapeKey('a')").is_err());
}

fn is_true_mutation(source: &str) {
    assert_eq!(Expression::compile_mutation(source).unwrap().evaluate(Vec::new()), Ok(Value::Bool(true)), "{source}");
}

#[test]
fn a_mutations_types_are_checked_as_kubes() {
    let check = |source: &str, mutation: bool| {
        let e = if mutation { Expression::compile_mutation(source) } else { Expression::compile(source) }.unwrap();
        let checked = super::check(&e, &[("object", super::Type::Dyn)]);
        (checked.errors.first().map(|e| e.lines().next().unwrap_or_default().to_string()), checked.output.name())
    };
    assert_eq!(check("Object{spec: Object.spec{replicas: 1}}", true), (None, "Object".into()));
    assert_eq!(check("Object.spec.metadata{}", true), (None, "Object.spec.metadata".into()));
    assert_eq!(check("[JSONPatch{op: 'add', path: '/a', value: object}]", true), (None, "list(JSONPatch)".into()));
    assert_eq!(check("JSONPatch{op: 'add'}.path", true), (None, "string".into()));
    assert_eq!(check("jsonpatch.escapeKey('a')", true), (None, "string".into()));
    assert_eq!(check("JSONPatch{op: 1}", true).0.as_deref(), Some("ERROR: <input>:1:13: expected type of field 'op' is 'string' but provided type is 'int'"));
    assert_eq!(check("JSONPatch{opx: 'a'}", true).0.as_deref(), Some("ERROR: <input>:1:14: undefined field 'opx'"));
    assert_eq!(check("Other{}", true).0.as_deref(), Some("ERROR: <input>:1:6: undeclared reference to 'Other' (in container '')"));
    assert_eq!(check("Object{}", false).0.as_deref(), Some("ERROR: <input>:1:7: undeclared reference to 'Object' (in container '')"));
    assert_eq!(
        check("jsonpatch.escapeKey('a')", false).0.as_deref(),
        Some("ERROR: <input>:1:20: undeclared reference to 'jsonpatch.escapeKey' (in container '')")
    );
}

/// An authority that lets `jane` get pods in `default` and read `/healthz`, records what it
/// was asked, and cannot decide the verb `ask` yet.
#[derive(Debug, Default)]
struct Recording(std::sync::Mutex<Vec<(String, crate::authz::Attributes)>>);

impl super::authz::Authorize for Recording {
    fn authorize(&self, user: &crate::auth::UserInfo, a: &crate::authz::Attributes) -> Option<crate::authz::Decision> {
        self.0.lock().unwrap().push((user.name.clone(), a.clone()));
        if a.verb == "ask" {
            return None;
        }
        let pods = a.resource_request && a.verb == "get" && a.resource == "pods" && a.namespace == "default";
        let allowed = user.name == "jane" && (pods || a.path == "/healthz");
        Some(crate::authz::Decision { allowed, reason: if allowed { "ok".into() } else { String::new() }, ..Default::default() })
    }
}

fn with_authorizer(source: &str, authority: &Arc<Recording>) -> Result<Value, String> {
    use super::authz::{RequestResource, authorizer, request_resource};
    let user = crate::auth::UserInfo { name: "jane".into(), ..Default::default() };
    let r = RequestResource { group: "apps", resource: "deployments", subresource: "scale", namespace: "default", name: "web" };
    let authority: Arc<dyn super::authz::Authorize> = authority.clone();
    let variables = vec![("authorizer", authorizer(authority.clone(), user.clone())), ("authorizer.requestResource", request_resource(authority, user, r))];
    Expression::compile(source)?.evaluate(variables)
}

#[test]
fn the_authorizer_checks_what_the_user_may_do_as_kube_asks_its_authorizer() {
    let authority = Arc::new(Recording::default());
    let truth = |source: &str| assert_eq!(with_authorizer(source, &authority), Ok(Value::Bool(true)), "{source}");
    truth("authorizer.group('').resource('pods').namespace('default').check('get').allowed()");
    truth("authorizer.group('').resource('pods').namespace('default').check('get').reason() == 'ok'");
    truth("!authorizer.group('').resource('pods').check('get').allowed()");
    truth("authorizer.path('/healthz').check('get').allowed() && !authorizer.path('/healthz').check('get').errored()");
    truth("authorizer.path('/healthz').check('get').error() == ''");
    truth("!authorizer.serviceAccount('kube-system', 'builder').group('').resource('pods').namespace('default').check('get').allowed()");
    truth("!authorizer.requestResource.check('update').allowed()");
    truth(
        "authorizer.group('').resource('pods').subresource('log').namespace('ns').name('p').fieldSelector('spec.nodeName=n1')\
         .labelSelector('app=x').check('list').reason() == ''",
    );
    let asked = authority.0.lock().unwrap().clone();
    let service_account = &asked.iter().find(|(u, _)| u.starts_with("system:serviceaccount:")).unwrap().0;
    assert_eq!(service_account, "system:serviceaccount:kube-system:builder");
    let (_, scale) = asked.iter().find(|(_, a)| a.subresource == "scale").unwrap();
    assert_eq!((scale.group.as_str(), scale.resource.as_str(), scale.namespace.as_str(), scale.name.as_str()), ("apps", "deployments", "default", "web"));
    assert_eq!((scale.verb.as_str(), scale.version.as_str()), ("update", "*"));
    let (_, log) = asked.iter().find(|(_, a)| a.subresource == "log").unwrap();
    assert_eq!((log.namespace.as_str(), log.name.as_str(), log.field_selector.is_empty(), log.label_selector.is_empty()), ("ns", "p", false, false));

    let fails = |source: &str, why: &str| assert_eq!(with_authorizer(source, &authority), Err(why.to_string()), "{source}");
    fails("authorizer.path(' ').check('get').allowed()", "path must not be empty");
    fails("authorizer.group('').resource('').check('get').allowed()", "resource must not be empty");
    fails("authorizer.serviceAccount('ns', 'Bad_Name').group('').resource('pods').check('get').allowed()", "Invalid service account name");
    fails("authorizer.serviceAccount('a.b', 'ok').group('').resource('pods').check('get').allowed()", "Invalid service account namespace");
    assert!(with_authorizer("authorizer.group('').resource('pods').check('ask').allowed()", &authority).is_err());
    // An unparsable selector is left out of the check.
    truth("authorizer.group('').resource('pods').fieldSelector('!!').check('list').reason() == ''");
    let asked = authority.0.lock().unwrap().clone();
    assert!(asked.last().unwrap().1.field_selector.is_empty());
}

#[test]
fn an_authorization_check_costs_what_kube_charges_for_it() {
    let cost = |source: &str| estimate(&Expression::compile(source).unwrap(), &[("authorizer", Shape::Unknown)]);
    let one = cost("authorizer.group('').resource('pods').check('get').allowed()");
    assert!((350_000..350_010).contains(&one), "{one}");
    assert!(cost("authorizer.path('/a').check('get').allowed() && authorizer.path('/b').check('get').allowed()") < super::cost::CALL_LIMIT);
    assert!(cost("[1, 2, 3].all(x, authorizer.path('/a').check('get').allowed())") > super::cost::CALL_LIMIT);
    // A selector is charged its parsing; a check built of a long string, its reading.
    let selector = cost("authorizer.group('').resource('pods').labelSelector('app=web').check('list').allowed()");
    assert!(selector > one + 100, "{selector}");
    let long = Shape::String { max: MAX_REQUEST_BYTES };
    let built = estimate(&Expression::compile("authorizer.group('').resource('pods').name(s)").unwrap(), &[("authorizer", Shape::Unknown), ("s", long)]);
    assert!(built > MAX_REQUEST_BYTES / 10, "{built}");
}

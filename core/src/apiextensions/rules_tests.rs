use serde_json::{Value, json};

use super::rule_checks::check_rules;
use super::schema_rules::validate_schema;
use super::structural::Structural;

fn schema() -> Value {
    json!({"type": "object", "properties": {
        "spec": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.replicas <= self.max"},
                {"rule": "self.replicas >= 0", "message": "replicas must not be negative", "reason": "FieldValueForbidden"},
                {"rule": "self.max <= 10", "messageExpression": "'max is ' + string(self.max)", "fieldPath": ".max"},
                {"rule": "self.replicas >= oldSelf.replicas", "message": "replicas may not shrink"},
                {"rule": "has(self.__namespace__) || self.replicas < 5", "message": "namespace needed"}],
            "properties": {
                "replicas": {"type": "integer"}, "max": {"type": "integer"},
                "namespace": {"type": "string"},
                "ratio": {"type": "number", "x-kubernetes-validations": [{"rule": "self < 1.5"}]},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "maxItems": 10,
                    "items": {"type": "object", "required": ["name"],
                        "properties": {"name": {"type": "string", "maxLength": 20}, "port": {"type": "integer"}},
                        "x-kubernetes-validations": [{"rule": "self.port == oldSelf.port", "message": "port is immutable"}]}}}},
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}},
        "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('w')", "message": "name must start with w"}]})
}

fn errors(obj: Value, old: Option<Value>) -> Vec<String> {
    Structural::read(&schema()).validate_rules(&obj, old.as_ref()).iter().map(ToString::to_string).collect()
}

fn widget(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1", "namespace": "default"}, "spec": spec})
}

#[test]
fn rules_run_at_their_nodes_with_kubes_messages() {
    assert!(errors(widget(json!({"replicas": 1, "max": 2, "ratio": 1})), None).is_empty());
    assert_eq!(
        errors(widget(json!({"replicas": -3, "max": -4})), None),
        vec!["spec: Invalid value: \"object\": failed rule: self.replicas <= self.max", "spec: Forbidden: replicas must not be negative",]
    );
    assert_eq!(errors(widget(json!({"replicas": 1, "max": 12})), None), vec!["spec.max: Invalid value: \"object\": max is 12"]);
    assert_eq!(errors(widget(json!({"replicas": 6, "max": 8})), None), vec!["spec: Invalid value: \"object\": namespace needed"]);
    assert!(errors(widget(json!({"replicas": 6, "max": 8, "namespace": "x"})), None).is_empty(), "an escaped property name");
    assert_eq!(errors(widget(json!({"replicas": 1, "max": 2, "ratio": 2})), None), vec!["spec.ratio: Invalid value: \"number\": failed rule: self < 1.5"]);
    let mut other = widget(json!({"replicas": 1, "max": 2}));
    other["metadata"]["name"] = json!("x1");
    assert_eq!(errors(other, None), vec!["<nil>: Invalid value: \"object\": name must start with w"]);
}

#[test]
fn transition_rules_run_where_the_old_value_correlates() {
    let old = widget(json!({"replicas": 3, "max": 5, "ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]}));
    let shrunk = widget(json!({"replicas": 2, "max": 5, "ports": [{"name": "b", "port": 2}, {"name": "a", "port": 1}, {"name": "c", "port": 9}]}));
    assert_eq!(errors(shrunk.clone(), None), Vec::<String>::new(), "no old object: transition rules skipped");
    assert_eq!(errors(shrunk, Some(old.clone())), vec!["spec: Invalid value: \"object\": replicas may not shrink"]);
    let moved = widget(json!({"replicas": 3, "max": 5, "ports": [{"name": "b", "port": 2}, {"name": "a", "port": 7}]}));
    assert_eq!(errors(moved, Some(old)), vec!["spec.ports[1]: Invalid value: \"object\": port is immutable"]);
}

#[test]
fn runtime_errors_are_reported_with_the_rule() {
    assert_eq!(
        errors(widget(json!({"replicas": 1})), None),
        vec![
            "spec: Invalid value: \"object\": no such key: max evaluating rule: self.replicas <= self.max",
            "spec: Invalid value: \"object\": no such key: max evaluating rule: self.max <= 10",
        ]
    );
}

fn schema_errors(schema: Value) -> Vec<String> {
    validate_schema(&schema, "spec.validation.openAPIV3Schema", false).iter().map(ToString::to_string).collect()
}

#[test]
fn a_crds_rules_are_compiled_and_costed_when_it_is_written() {
    assert_eq!(schema_errors(schema()), Vec::<String>::new());
    let at = "spec.validation.openAPIV3Schema";
    let with = |rules: Value, props: Value| json!({"type": "object", "properties": props, "x-kubernetes-validations": rules});
    let errs = schema_errors(with(json!([{"rule": "self.", "reason": "Bad"}, {"rule": " "}]), json!({})));
    assert_eq!(
        errs,
        vec![
            format!(
                "{at}.x-kubernetes-validations[0].reason: Unsupported value: \"Bad\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""
            ),
            format!("{at}.x-kubernetes-validations[1].rule: Required value: rule is not specified"),
        ],
        "rules are compiled only where their entries are well formed"
    );
    let errs = schema_errors(with(json!([{"rule": "self.", "optionalOldSelf": true}]), json!({})));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].starts_with(&format!("{at}.x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{{Rule:\"self.\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(true)}}: compilation failed: ")), "{errs:?}");
    assert_eq!(
        schema_errors(with(json!([{"rule": "self == self", "optionalOldSelf": false}]), json!({}))),
        vec![format!("{at}.x-kubernetes-validations[0].optionalOldSelf: Invalid value: false: may not be set if oldSelf is not used in rule")]
    );

    let unbounded = json!({"names": {"type": "array", "items": {"type": "string"},
        "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x == y))"}]}});
    let errs = schema_errors(with(json!([]), unbounded));
    assert!(
        errs.iter().any(|e| e.starts_with(&format!(
            "{at}.properties[names].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x"
        ))),
        "{errs:?}"
    );
    let bounded = json!({"names": {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 10},
        "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x == y))"}]}});
    assert_eq!(schema_errors(with(json!([]), bounded)), Vec::<String>::new());

    let set = json!({"tags": {"type": "array", "x-kubernetes-list-type": "set", "maxItems": 4,
        "items": {"type": "string", "maxLength": 4, "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}});
    assert_eq!(
        schema_errors(with(json!([]), set)),
        vec![format!(
            "{at}.properties[tags].items.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within {at}.properties[tags]"
        )]
    );
    let bad_path = with(json!([{"rule": "true", "fieldPath": ".nope"}]), json!({"a": {"type": "string"}}));
    assert_eq!(schema_errors(bad_path), vec![format!("{at}.x-kubernetes-validations[0].fieldPath: Invalid value: \".nope\": fieldPath must be a valid path")]);
}

#[test]
fn values_are_typed_by_the_schema() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {
            "at": {"type": "string", "format": "date-time"}, "day": {"type": "string", "format": "date"},
            "blob": {"type": "string", "format": "byte"}, "ratio": {"type": "number"}, "wait": {"type": "string", "format": "duration"},
            "namespace": {"type": "string"}, "gone": {"type": "string", "nullable": true},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
        "x-kubernetes-validations": [
            {"rule": "self.at > timestamp('2020-01-01T00:00:00Z') && self.day == timestamp('2024-02-03T00:00:00Z')"},
            {"rule": "self.blob == b'hi' && self.ratio == 2.0 && self.namespace == self.__namespace__ && self.wait == duration('90m')"},
            {"rule": "!has(self.gone) && self.labels['a.b/c'] == 'x' && !has(self.free.anything)"}]}}});
    let obj = widget(json!({"at": "2024-05-06T07:08:09Z", "day": "2024-02-03", "blob": "aGk=", "ratio": 2, "namespace": "n", "wait": "1h30m",
        "gone": null, "labels": {"a.b/c": "x"}, "free": {"anything": 1}}));
    assert_eq!(Structural::read(&schema).validate_rules(&obj, None), Vec::new());
}

#[test]
fn unchanged_values_ratchet_and_optional_old_self_runs_on_create() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"a": {"type": "integer", "x-kubernetes-validations": [{"rule": "self < 10", "reason": "FieldValueDuplicate"}]},
            "b": {"type": "integer", "x-kubernetes-validations": [
                {"rule": "!oldSelf.hasValue() || self >= oldSelf.value()", "optionalOldSelf": true, "messageExpression": "''"},
                {"rule": "oldSelf.hasValue() || self == 1", "optionalOldSelf": true, "messageExpression": "'b starts at 1, not ' + string(self)"}]}}}}});
    let s = Structural::read(&schema);
    let check = |new: Value, old: Option<Value>| s.validate_rules(&new, old.as_ref()).iter().map(ToString::to_string).collect::<Vec<_>>();
    assert_eq!(
        check(widget(json!({"a": 12, "b": 2})), None),
        vec!["spec.a: Duplicate value: \"integer\"", "spec.b: Invalid value: \"integer\": b starts at 1, not 2"]
    );
    let old = widget(json!({"a": 12, "b": 1}));
    assert_eq!(check(widget(json!({"a": 12, "b": 3})), Some(old.clone())), Vec::<String>::new(), "an unchanged invalid value is let through");
    assert_eq!(
        check(widget(json!({"a": 13, "b": 0})), Some(old)),
        vec!["spec.a: Duplicate value: \"integer\"", "spec.b: Invalid value: \"integer\": failed rule: !oldSelf.hasValue() || self >= oldSelf.value()"]
    );
}

#[test]
fn a_rule_may_select_only_the_fields_the_schema_has() {
    let at = "spec.validation.openAPIV3Schema";
    let schema_with = |rule: &str, message: &str| {
        json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"size": {"type": "integer"}, "namespace": {"type": "string"}, "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "items": {"type": "array", "maxItems": 4, "items": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"known": {"type": "string", "maxLength": 8}}}},
            "x-kubernetes-validations": [{"rule": rule, "message": message}]}}})
    };
    let schema = |rule: &str| schema_with(rule, "");
    for ok in [
        "self.size > 0",
        "self.namespace == self.__namespace__",
        "self.labels.anything == 'x'",
        "self.items.all(i, i.name != '')",
        "self.free.known == 'a'",
        "has(self.size)",
    ] {
        assert_eq!(schema_errors(schema(ok)), Vec::<String>::new(), "{ok}");
    }
    assert_eq!(
        schema_errors(schema_with("self.size > 0 &&\n  self.items.all(i, i.nme != '')", "m")),
        vec![format!(
            "{at}.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{{Rule:\"self.size > 0 &&\\n  self.items.all(i, i.nme != '')\", Message:\"m\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}}: compilation failed: ERROR: <input>:2:22: undefined field 'nme'\n |   self.items.all(i, i.nme != '')\n | .....................^"
        )]
    );
    let errs = schema_errors(schema("has(self.sise) && self.free.other == 'a'"));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].ends_with("compilation failed: ERROR: <input>:1:4: undefined field 'sise'\n | has(self.sise) && self.free.other == 'a'\n | ...^\nERROR: <input>:1:28: undefined field 'other'\n | has(self.sise) && self.free.other == 'a'\n | ...........................^"), "{errs:?}");
}

#[test]
fn defaults_must_pass_the_rules_of_their_node() {
    let at = "spec.validation.openAPIV3Schema";
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "size": {"type": "integer", "default": 0, "x-kubernetes-validations": [{"rule": "self > 0"}, {"rule": "self == oldSelf"}]},
        "mode": {"type": "object", "default": {"a": "x"}, "properties": {"a": {"type": "string", "maxLength": 4, "x-kubernetes-validations": [{"rule": "self != 'x'", "message": "not x"}]}}}}}}});
    assert_eq!(
        schema_errors(schema),
        vec![
            format!("{at}.properties[spec].properties[mode].default.a: Invalid value: \"string\": not x"),
            format!("{at}.properties[spec].properties[size].default: Invalid value: \"integer\": failed rule: self > 0"),
        ]
    );
}

#[test]
fn a_declared_root_metadata_stays_the_objects_own() {
    // controller-gen writes `metadata: {type: object}` at the root of every CRD.
    let schema = json!({"type": "object", "properties": {"metadata": {"type": "object"}, "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
        "x-kubernetes-validations": [{"rule": "self.metadata.name.size() < 5", "message": "short names only"}]});
    assert_eq!(schema_errors(schema.clone()), Vec::<String>::new());
    let s = Structural::read(&schema);
    let mut obj = widget(json!({"size": 1}));
    obj["metadata"]["labels"] = json!({"a": "b"});
    let before = obj.clone();
    assert!(s.prune_object(&mut obj).is_empty());
    assert_eq!(obj, before, "metadata is not pruned by the declared empty object");
    assert!(s.validate_rules(&obj, None).is_empty());
    obj["metadata"]["name"] = json!("a-long-name");
    assert_eq!(s.validate_rules(&obj, None).iter().map(ToString::to_string).collect::<Vec<_>>(), vec!["<nil>: Invalid value: \"object\": short names only"]);
}

#[test]
fn values_under_an_unchanged_atomic_list_ratchet_with_it() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "other": {"type": "integer"},
        "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string", "x-kubernetes-validations": [{"rule": "self != 'bad'"}]}}}}}}}});
    let s = Structural::read(&schema);
    let old = widget(json!({"other": 1, "items": [{"name": "bad"}]}));
    assert!(s.validate_rules(&widget(json!({"other": 2, "items": [{"name": "bad"}]})), Some(&old)).is_empty(), "the list did not change");
    let changed = s.validate_rules(&widget(json!({"other": 2, "items": [{"name": "bad"}, {"name": "ok"}]})), Some(&old));
    assert_eq!(changed.iter().map(ToString::to_string).collect::<Vec<_>>(), vec!["spec.items[0].name: Invalid value: \"string\": failed rule: self != 'bad'"]);
}

fn rule_errors(s: &Structural, obj: &Value) -> Vec<String> {
    s.validate_rules(obj, None).iter().map(ToString::to_string).collect()
}

#[test]
fn a_rule_past_the_limit_of_one_call_is_cancelled_and_no_further_rule_runs() {
    // Written with `maxItems: 1100`, the static estimate stays under the 10 million a CRD's
    // rule may be estimated at, so the CRD is accepted; on 1,000 items the rule costs about
    // 4 million, past the 1 million one call may spend.
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "ids": {"type": "array", "maxItems": 1100, "items": {"type": "integer"},
            "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x == y || x != y))", "message": "ids checked"}]},
        "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self != 'bad'"}]}}}}});
    assert!(check_rules(&schema, "openAPIV3Schema").is_empty(), "a CRD with this schema is accepted");
    let s = Structural::read(&schema);
    let few = widget(json!({"ids": (0..100).collect::<Vec<_>>(), "name": "bad"}));
    assert_eq!(rule_errors(&s, &few), vec!["spec.name: Invalid value: \"string\": failed rule: self != 'bad'"]);
    let many = widget(json!({"ids": (0..1000).collect::<Vec<_>>(), "name": "bad"}));
    assert_eq!(
        rule_errors(&s, &many),
        vec![
            "spec.ids: Invalid value: \"array\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: ids checked"
        ],
        "the rule of `name`, after it, does not run"
    );
}

#[test]
fn the_rules_on_one_object_share_a_budget() {
    // Each item's rule costs about 650,000: under the limit of one call, but the sixteenth
    // passes the 10 million all of an object's rules may spend.
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "groups": {"type": "array", "items": {"type": "object", "properties": {"ids": {"type": "array", "maxItems": 300, "items": {"type": "integer"}}},
            "x-kubernetes-validations": [{"rule": "self.ids.all(x, self.ids.all(y, x == y || x != y))"}]}}}}}});
    let s = Structural::read(&schema);
    let group = json!({"ids": (0..300).collect::<Vec<_>>()});
    assert_eq!(rule_errors(&s, &widget(json!({"groups": vec![group.clone(); 10]}))), Vec::<String>::new());
    assert_eq!(
        rule_errors(&s, &widget(json!({"groups": vec![group; 20]}))),
        vec!["spec.groups[15]: Invalid value: \"object\": validation failed due to running out of cost budget, no further validation rules will be run"]
    );
}

#[test]
fn a_guarded_rule_is_charged_for_what_the_object_has() {
    // `has()` guards a field the object does not have: reading it is not charged as a list
    // of any size.
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "ids": {"type": "array", "items": {"type": "integer"}}, "other": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "!has(self.ids) || self.ids.all(x, self.ids.all(y, x <= y || x > y))", "message": "ids checked"}]}}});
    let s = Structural::read(&schema);
    assert!(rule_errors(&s, &widget(json!({"other": 1}))).is_empty());
    assert!(rule_errors(&s, &widget(json!({"ids": (0..200).collect::<Vec<_>>()}))).is_empty());
}

/// A schema of every kind of value, with `rule` (and `messageExpression`, `optionalOldSelf`)
/// on its root's `spec`; the errors of writing it.
fn typed_errors(entry: Value) -> Vec<String> {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {
            "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"}, "s": {"type": "string", "maxLength": 10},
            "created": {"type": "string", "format": "date-time"}, "ttl": {"type": "string", "format": "duration"},
            "raw": {"type": "string", "format": "byte", "maxLength": 10},
            "ios": {"x-kubernetes-int-or-string": true},
            "l": {"type": "array", "maxItems": 5, "items": {"type": "integer"}},
            "names": {"type": "array", "maxItems": 5, "items": {"type": "string", "maxLength": 10}},
            "m": {"type": "object", "maxProperties": 5, "additionalProperties": {"type": "string", "maxLength": 10}},
            "o": {"type": "object", "properties": {"x": {"type": "integer"}, "if": {"type": "string", "maxLength": 10}}},
            "envs": {"type": "array", "maxItems": 5, "items": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}, "value": {"type": "string", "maxLength": 10}}}}},
        "x-kubernetes-validations": [entry]}}});
    schema_errors(schema)
}

#[test]
fn rules_kube_accepts_type_check() {
    for rule in [
        "self.i < self.n && self.n < 1.5 && self.i == 1",
        "'k' in self.m && self.m['k'].matches('^[a-z]*$') && self.m.k == 'v'",
        "(size(self.l) == 0) != (size(self.names) == 0)",
        "self.envs.filter(e, e.name == 'A').all(e, e.value.startsWith('x'))",
        "self.created + self.ttl < timestamp('2030-01-01T00:00:00Z') && self.ttl > duration('1s')",
        "self.created.getFullYear() > 2000 && self.created.getFullYear('Europe/Paris') > 2000",
        "type(self.ios) == string ? self.ios == '99%' : self.ios == 42",
        "self.l.map(x, x * 2).all(y, y > 0) && self.l.exists_one(x, x == 1) && self.l.exists(x, x > 2)",
        "self.l.isSorted() && self.l.sum() > 2 && self.l.indexOf(2) == 1 && self.s.indexOf('b') == 1",
        "self.names.all(n, !(n in self.m)) && self.names.join(',').size() < 20 && self.s.split(',').size() > 1",
        "quantity(self.s).isLessThan(quantity('1Gi')) && isQuantity(self.s) && quantity(self.s).add(1).sign() == 1",
        "url(self.s).getScheme() == 'https' && isURL(self.s) && url(self.s).getQuery()['a'][0] == 'b'",
        "ip(self.s).family() == 4 && cidr(self.s).containsIP(self.s) && cidr(self.s).ip().isLoopback()",
        "self.m.all(k, self.m[k] != '') && [1, 2].all(x, x > 0) && {'a': 1}.a == 1",
        "self.?o.hasValue() && self.?o.orValue(self.o) == self.o || self.o.?x.orValue(0) == 1",
        "self.o.__if__ == 'a' && self.o.if == 'a' && has(self.o.x)",
        "string(self.raw) == 'x' && size(self.raw) == 1 && self.raw == b'x'",
        "dyn(self.i) == 'a' || self.s == null || self.o != null",
        "1u + 2u == 3u && -self.i < 0 && self.i % 2 == 0 && self.n / 2.0 > 1.0 && 1 != 1.0",
        "sets.contains(self.l, [1]) && format.dns1123Label().validate(self.s).hasValue() == false",
        "self.s.lowerAscii().upperAscii().trim().replace('a', 'b').substring(1) == 'x' && self.s.charAt(0) == 'x'",
        "int(self.s) > 0 && double(self.i) > 0.0 && uint(self.i) > 0u && bool('true')",
        "self.?o.?x.orValue(0) == 1 && self.?o.x.hasValue() && self.?m['k'].orValue('') == '' && self.?l[0].hasValue()",
        "type(self.s) == string || type(quantity(self.s)) == kubernetes.Quantity || type(self.created) == google.protobuf.Timestamp",
    ] {
        assert_eq!(typed_errors(json!({"rule": rule})), Vec::<String>::new(), "{rule}");
    }
    let transition = json!({"rule": "oldSelf.hasValue() ? self.i >= oldSelf.value().i && self.i >= oldSelf.orValue(self).i : true", "optionalOldSelf": true});
    assert_eq!(typed_errors(transition), Vec::<String>::new());
    let optional_fields = json!({"rule": "oldSelf.i.orValue(0) <= self.i && (has(oldSelf.s) || true)", "optionalOldSelf": true});
    assert_eq!(typed_errors(optional_fields), Vec::<String>::new());
    assert_eq!(typed_errors(json!({"rule": "self.i > 0", "messageExpression": "'i is ' + string(self.i)"})), Vec::<String>::new());
}

#[test]
fn rules_are_type_checked_as_kube_checks_them() {
    let detail = |entry: Value| {
        let errs = typed_errors(entry);
        assert_eq!(errs.len(), 1, "{errs:?}");
        errs[0].split_once("}: ").map(|(_, d)| d.to_string()).unwrap_or_default()
    };
    let failed = |rule: &str| detail(json!({"rule": rule}));
    assert_eq!(failed("self.i"), "cel expression must evaluate to a bool");
    assert_eq!(failed("self.l.map(x, x > 1)"), "cel expression must evaluate to a bool");
    assert_eq!(failed("42"), "cel expression must evaluate to a bool");
    assert_eq!(
        failed("self.s + 1 == 'a'"),
        "compilation failed: ERROR: <input>:1:8: found no matching overload for '_+_' applied to '(string, int)'\n | self.s + 1 == 'a'\n | .......^"
    );
    assert_eq!(
        failed("size(self.n) == 10"),
        "compilation failed: ERROR: <input>:1:5: found no matching overload for 'size' applied to '(double)'\n | size(self.n) == 10\n | ....^"
    );
    assert_eq!(
        failed("self.o == 10"),
        "compilation failed: ERROR: <input>:1:8: found no matching overload for '_==_' applied to '(object, int)'\n | self.o == 10\n | .......^"
    );
    assert_eq!(
        failed("self.s.foo == 1"),
        "compilation failed: ERROR: <input>:1:7: type 'string' does not support field selection\n | self.s.foo == 1\n | ......^"
    );
    assert_eq!(
        failed("self.s.all(c, c != 'a')"),
        "compilation failed: ERROR: <input>:1:5: expression of type 'string' cannot be range of a comprehension (must be list, map, or dynamic)\n | self.s.all(c, c != 'a')\n | ....^"
    );
    assert_eq!(failed("slef.i > 0"), "compilation failed: ERROR: <input>:1:1: undeclared reference to 'slef' (in container '')\n | slef.i > 0\n | ^");
    // An optional old self is an optional: compared only through what it holds.
    let optional = |rule: &str| detail(json!({"rule": rule, "optionalOldSelf": true}));
    assert!(optional("self.i >= oldSelf.i").contains("found no matching overload for '_>=_' applied to '(int, optional_type(int))'"));
    assert!(optional("self >= oldSelf").contains("found no matching overload for '_>=_' applied to '(object, optional_type(object))'"));
    assert!(optional("self.i >= oldSelf.orValue('').i").contains("found no matching overload for 'orValue' applied to 'optional_type(object).(string)'"));
    assert_eq!(detail(json!({"rule": "self.i == 5", "messageExpression": "42"})), "messageExpression must evaluate to a string");
}

//! Table-driven tests of the validator: each case is a schema, a value (and an old value for
//! transition rules) and the violations expected, in the parameter wording (`short()`) and, where
//! it matters, kube-apiserver's (`kube_message()`).

use kudo_schema::{Formats, Rule, check_schema, validate};
use serde_json::{Value, json};

/// (name, schema, value, old, expected short() of each violation as "path: short")
type Case = (&'static str, Value, Value, Option<Value>, &'static [&'static str]);

fn shorts(schema: &Value, value: &Value, old: Option<&Value>, formats: Formats) -> Vec<String> {
    validate(schema, value, old, "p", formats)
        .iter()
        .map(|v| format!("{}: {}", v.path, v.short()))
        .collect()
}

fn run(cases: Vec<Case>, formats: Formats) {
    for (name, schema, value, old, expected) in cases {
        let got = shorts(&schema, &value, old.as_ref(), formats);
        assert_eq!(got, *expected, "case {name}");
    }
}

#[test]
fn core_keywords() {
    let obj = json!({
        "type": "object",
        "required": ["a"],
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}
    });
    run(
        vec![
            ("integer ok", json!({"type": "integer"}), json!(3), None, &[]),
            (
                "integer as 2.0",
                json!({"type": "integer"}),
                json!(2.0),
                None,
                &[],
            ),
            (
                "integer wrong",
                json!({"type": "integer"}),
                json!("3"),
                None,
                &["p: \"3\" is not of type integer"],
            ),
            (
                "number takes integer",
                json!({"type": "number"}),
                json!(3),
                None,
                &[],
            ),
            (
                "boolean wrong",
                json!({"type": "boolean"}),
                json!(1),
                None,
                &["p: 1 is not of type boolean"],
            ),
            (
                "enum",
                json!({"enum": ["a", "b"]}),
                json!("c"),
                None,
                &["p: \"c\" is not one of [\"a\", \"b\"]"],
            ),
            (
                "enum numbers by value",
                json!({"enum": [1, 2]}),
                json!(1.0),
                None,
                &[],
            ),
            (
                "maximum",
                json!({"type": "integer", "maximum": 9}),
                json!(12),
                None,
                &["p: 12 is greater than the maximum of 9"],
            ),
            ("maximum equal", json!({"maximum": 9}), json!(9), None, &[]),
            (
                "exclusive maximum",
                json!({"maximum": 9, "exclusiveMaximum": true}),
                json!(9),
                None,
                &["p: 9 is not less than the exclusive maximum of 9"],
            ),
            (
                "minimum",
                json!({"minimum": 1}),
                json!(0),
                None,
                &["p: 0 is less than the minimum of 1"],
            ),
            (
                "exclusive minimum",
                json!({"minimum": 1, "exclusiveMinimum": true}),
                json!(1),
                None,
                &["p: 1 is not greater than the exclusive minimum of 1"],
            ),
            (
                "multipleOf",
                json!({"multipleOf": 3}),
                json!(7),
                None,
                &["p: 7 is not a multiple of 3"],
            ),
            (
                "multipleOf float",
                json!({"multipleOf": 0.1}),
                json!(0.3),
                None,
                &[],
            ),
            (
                "maxLength counts characters",
                json!({"maxLength": 3}),
                json!("äöü"),
                None,
                &[],
            ),
            (
                "maxLength",
                json!({"maxLength": 3}),
                json!("abcd"),
                None,
                &["p: \"abcd\" is longer than 3 characters"],
            ),
            (
                "minLength",
                json!({"minLength": 2}),
                json!("a"),
                None,
                &["p: \"a\" is shorter than 2 characters"],
            ),
            (
                "pattern is a search",
                json!({"pattern": "b+"}),
                json!("abba"),
                None,
                &[],
            ),
            (
                "pattern",
                json!({"pattern": "^[a-z]+$"}),
                json!("A1"),
                None,
                &["p: \"A1\" does not match the pattern \"^[a-z]+$\""],
            ),
            (
                "maxItems",
                json!({"maxItems": 1}),
                json!([1, 2]),
                None,
                &["p: [1,2] has more than 1 items"],
            ),
            (
                "minItems",
                json!({"minItems": 2}),
                json!([1]),
                None,
                &["p: [1] has fewer than 2 items"],
            ),
            (
                "uniqueItems",
                json!({"uniqueItems": true}),
                json!([1, 1.0]),
                None,
                &["p: [1,1.0] has duplicate items"],
            ),
            (
                "items",
                json!({"items": {"type": "integer", "maximum": 5}}),
                json!([1, 7]),
                None,
                &["p[1]: 7 is greater than the maximum of 5"],
            ),
            (
                "maxProperties",
                json!({"maxProperties": 1}),
                json!({"a": 1, "b": 2}),
                None,
                &["p: {\"a\":1,\"b\":2} has more than 1 properties"],
            ),
            (
                "minProperties",
                json!({"minProperties": 1}),
                json!({}),
                None,
                &["p: {} has fewer than 1 properties"],
            ),
            (
                "required",
                obj.clone(),
                json!({"b": "x"}),
                None,
                &["p.a: is required"],
            ),
            (
                "nested",
                obj.clone(),
                json!({"a": "x", "b": 1}),
                None,
                &[
                    "p.a: \"x\" is not of type integer",
                    "p.b: 1 is not of type string",
                ],
            ),
            (
                "unknown fields are not errors",
                obj.clone(),
                json!({"a": 1, "z": 1}),
                None,
                &[],
            ),
            (
                "additionalProperties false",
                json!({"properties": {"a": {}}, "additionalProperties": false}),
                json!({"a": 1, "z": 2}),
                None,
                &["p.z: is not an allowed field"],
            ),
            (
                "additionalProperties schema",
                json!({"additionalProperties": {"type": "integer"}}),
                json!({"k": "v"}),
                None,
                &["p.k: \"v\" is not of type integer"],
            ),
            (
                "null not nullable",
                json!({"type": "string"}),
                Value::Null,
                None,
                &["p: null is not of type string"],
            ),
            (
                "null nullable",
                json!({"type": "string", "nullable": true}),
                Value::Null,
                None,
                &[],
            ),
            (
                "int-or-string int",
                json!({"x-kubernetes-int-or-string": true}),
                json!(3),
                None,
                &[],
            ),
            (
                "int-or-string string",
                json!({"x-kubernetes-int-or-string": true}),
                json!("50%"),
                None,
                &[],
            ),
            (
                "int-or-string bool",
                json!({"x-kubernetes-int-or-string": true}),
                json!(true),
                None,
                &["p: true is not of type integer,string"],
            ),
        ],
        Formats::Kube,
    );
}

#[test]
fn cel_rules() {
    let pair = json!({
        "type": "object",
        "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.min <= self.max", "message": "min must not exceed max"}]
    });
    let immutable = json!({"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]});
    run(
        vec![
            ("holds", pair.clone(), json!({"min": 1, "max": 2}), None, &[]),
            (
                "broken with message",
                pair.clone(),
                json!({"min": 3, "max": 2}),
                None,
                &["p: min must not exceed max"],
            ),
            (
                "evaluation error",
                pair.clone(),
                json!({"min": 3}),
                None,
                &["p: no such key: max evaluating rule: min must not exceed max"],
            ),
            (
                "transition rule not on create",
                immutable.clone(),
                json!("a"),
                None,
                &[],
            ),
            (
                "transition rule same",
                immutable.clone(),
                json!("a"),
                Some(json!("a")),
                &[],
            ),
            (
                "transition rule changed",
                immutable.clone(),
                json!("b"),
                Some(json!("a")),
                &["p: failed rule: self == oldSelf"],
            ),
            (
                "rules skipped after a type error",
                pair.clone(),
                json!({"min": "x", "max": 2}),
                None,
                &[
                    "p.min: \"x\" is not of type integer",
                    ": some validation rules were not checked because the value was invalid",
                ],
            ),
            (
                "rules run after a bound error",
                json!({"type": "integer", "maximum": 5, "x-kubernetes-validations": [{"rule": "self % 2 == 1"}]}),
                json!(8),
                None,
                &[
                    "p: 8 is greater than the maximum of 5",
                    "p: failed rule: self % 2 == 1",
                ],
            ),
            (
                "map keys in rule paths",
                json!({"additionalProperties": {"type": "integer", "x-kubernetes-validations": [{"rule": "self > 1"}]}}),
                json!({"k": 1}),
                None,
                &["p[k]: failed rule: self > 1"],
            ),
            (
                "size of strings",
                json!({"type": "string", "x-kubernetes-validations": [{"rule": "size(self) < 3"}]}),
                json!("abcd"),
                None,
                &["p: failed rule: size(self) < 3"],
            ),
        ],
        Formats::Kube,
    );
}

#[test]
fn extended_formats_only_when_asked() {
    let q = json!({"type": "string", "format": "quantity"});
    assert!(validate(&q, &json!("lots"), None, "p", Formats::Kube).is_empty());
    let v = validate(&q, &json!("lots"), None, "p", Formats::Extended);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].rule, Rule::Format("quantity".into()));
    assert_eq!(v[0].short(), "\"lots\" is not a valid quantity");
    let uuid = json!({"type": "string", "format": "uuid"});
    assert_eq!(validate(&uuid, &json!("x"), None, "p", Formats::Kube).len(), 1);
}

#[test]
fn kube_wording() {
    let s = json!({"type": "object", "properties": {"NODE_COUNT": {"type": "integer", "maximum": 9}}});
    let v = validate(&s, &json!({"NODE_COUNT": 12}), None, "spec", Formats::Kube);
    assert_eq!(
        v[0].kube_message(),
        "spec.NODE_COUNT: Invalid value: 12: spec.NODE_COUNT in body should be less than or equal to 9"
    );
    let e = json!({"enum": ["a", 1]});
    let v = validate(&e, &json!("c"), None, "spec.x", Formats::Kube);
    assert_eq!(
        v[0].kube_message(),
        "spec.x: Unsupported value: \"c\": supported values: \"a\", \"1\""
    );
    // A format error is a type error to kube: it blocks the CEL rules, reported at `<nil>`.
    let f = json!({"type": "string", "format": "uuid", "x-kubernetes-validations": [{"rule": "self != ''"}]});
    let v = validate(&f, &json!("x"), None, "spec.id", Formats::Kube);
    let causes: Vec<_> = v.iter().map(|v| v.kube_cause()).collect();
    assert_eq!(causes[0].reason, "FieldValueTypeInvalid");
    assert_eq!(
        causes[0].to_string(),
        "spec.id: Invalid value: \"x\": spec.id in body must be of type uuid: \"x\""
    );
    assert_eq!(causes[1].field, "<nil>");
    assert!(
        causes[1]
            .message
            .starts_with("Invalid value: \"null\": some validation rules")
    );
    // minItems shows the count; maxItems is "Too many".
    let l = json!({"type": "array", "minItems": 2, "maxItems": 0});
    let v = validate(&l, &json!([1]), None, "spec.l", Formats::Kube);
    let msgs: Vec<String> = v.iter().map(|v| v.kube_message()).collect();
    assert_eq!(
        msgs,
        [
            "spec.l: Too many: 1: must have at most 0 items",
            "spec.l: Invalid value: 1: spec.l in body should have at least 2 items",
        ]
    );
}

#[test]
fn schema_checks() {
    let cases: Vec<(Value, &[&str])> = vec![
        (json!({"type": "integer", "minimum": 1, "maximum": 9}), &[]),
        (
            json!({"type": "int"}),
            &["type: must be one of integer, number, string, boolean, array, object, not \"int\""],
        ),
        (json!({"maximum": "9"}), &["maximum: must be a number, not \"9\""]),
        (
            json!({"minimum": 5, "maximum": 1}),
            &["minimum: 5 is greater than maximum 1"],
        ),
        (
            json!({"properties": {"a": {"pattern": "("}}}),
            &["properties.a: pattern: does not compile"],
        ),
        (
            json!({"x-kubernetes-validations": [{"rule": "self.a >"}]}),
            &["x-kubernetes-validations[0]: rule: does not compile"],
        ),
        (
            json!({"items": {"x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}),
            &["items.x-kubernetes-validations[0]: rule: uses oldSelf where no old value can exist"],
        ),
        (
            json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "items": {"x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}),
            &[],
        ),
    ];
    for (schema, expected) in cases {
        let got: Vec<String> = check_schema(&schema).iter().map(ToString::to_string).collect();
        assert_eq!(got.len(), expected.len(), "{schema}: {got:?}");
        for (g, e) in got.iter().zip(expected.iter()) {
            assert!(g.starts_with(e), "{schema}: {g:?} does not start with {e:?}");
        }
    }
}

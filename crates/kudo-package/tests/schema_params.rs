//! schema keywords on Parameters, package-level rules, their kube and
//! JSON-Schema 2020-12 forms, and the one rule set (`params::validate_all`) that `package verify`,
//! the CLI and the manager share.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kudo_api::{Parameter, ValidationRule};
use kudo_package::params::{check_rules, validate_all, validate_value, validate_values};
use kudo_package::reader::parse_params;
use kudo_package::resources::{ConvertOptions, to_resources};
use kudo_package::schema::{json_schema, kube_schema, param_schema, parameters_schema, typed_value};
use kudo_package::verify::{ParamChecks, verify};
use kudo_package::{Package, read_path};
use serde_json::json;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/schema-params")
}

fn load() -> Package {
    read_path(&fixture()).unwrap()
}

fn param(yaml: &str) -> Parameter {
    let text = format!("parameters:\n  - {}\n", yaml.replace('\n', "\n    "));
    parse_params(&text).unwrap().parameters.remove(0).def
}

fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn keywords_are_read_into_the_declaration_and_stored_on_the_operator_version() {
    let pkg = load();
    let replicas = &pkg.params.get("REPLICAS").unwrap().def;
    assert_eq!(replicas.schema.minimum, Some(1.into()));
    assert_eq!(replicas.schema.maximum, Some(9.into()));
    let ov = to_resources(&pkg, &ConvertOptions::default())
        .unwrap()
        .operator_version;
    let v = serde_json::to_value(&ov).unwrap();
    assert_eq!(v["spec"]["parameters"][0]["maximum"], 9);
    assert_eq!(v["spec"]["parameters"][3]["exclusiveMinimum"], 0);
    assert_eq!(v["spec"]["parameters"][4]["items"]["maximum"], 65535);
    assert_eq!(v["spec"]["parameters"][5]["additionalProperties"], false);
    assert_eq!(
        v["spec"]["parameterValidations"],
        json!([{"rule": "self.REPLICAS % 2 == 1", "message": "REPLICAS must be odd, so a quorum exists"}])
    );
    let back: kudo_api::OperatorVersion = serde_json::from_value(v).unwrap();
    assert_eq!(back, ov, "the stored OperatorVersion reads back unchanged");
}

#[test]
fn packages_without_keywords_store_exactly_what_they_stored_before() {
    let p = param("name: A\ntype: integer\ndefault: 3");
    assert!(p.schema.is_empty());
    assert_eq!(
        serde_json::to_string(&p).unwrap(),
        r#"{"name":"A","required":true,"default":"3","value-type":"integer","immutable":false}"#
    );
    let spec = kudo_api::OperatorVersionSpec::default();
    assert!(
        serde_json::to_value(&spec)
            .unwrap()
            .get("parameterValidations")
            .is_none()
    );
}

#[test]
fn object_is_read_as_map_and_unknown_keys_are_still_ignored() {
    let p = param("name: M\ntype: object\nsomething: else");
    assert_eq!(p.value_type, "map");
    assert!(p.schema.is_empty());
}

#[test]
fn a_keyword_of_the_wrong_type_is_a_read_error_naming_the_field() {
    let e = parse_params("parameters:\n  - name: A\n    maxLength: lots\n").unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("params.yaml") && msg.contains("parameters[0].maxLength"),
        "{msg}"
    );
}

#[test]
fn string_values_are_typed_by_the_declared_type() {
    let cases: &[(&str, &str, Option<serde_json::Value>)] = &[
        ("integer", "12", Some(json!(12))),
        ("integer", "+7", Some(json!(7))),
        ("integer", "x", None),
        ("number", "0.5", Some(json!(0.5))),
        ("number", "4", Some(json!(4))),
        ("number", "NaN", None),
        ("boolean", "T", Some(json!(true))),
        ("array", "[1, a]", Some(json!([1, "a"]))),
        ("map", "a: 1", Some(json!({"a": 1}))),
        ("map", "~", None),
        ("string", "012", Some(json!("012"))),
        ("", "yes", Some(json!("yes"))),
    ];
    for (ty, s, want) in cases {
        let p = Parameter {
            name: "P".into(),
            value_type: ty.to_string(),
            ..Default::default()
        };
        assert_eq!(&typed_value(&p, s), want, "{ty} {s:?}");
    }
}

#[test]
fn a_declaration_becomes_a_kube_structural_schema() {
    let p = param(
        "name: RATIO\ndescription: Ratio.\ntype: number\ndefault: 0.5\nexclusiveMinimum: 0\nmaximum: 1\nenum: [0.5, 1]",
    );
    assert_eq!(
        param_schema(&p),
        json!({
            "type": "number", "description": "Ratio.", "default": 0.5, "enum": [0.5, 1],
            "minimum": 0, "exclusiveMinimum": true, "maximum": 1,
        })
    );
}

#[test]
fn nested_schemas_are_converted_and_the_stricter_bound_wins() {
    let raw = json!({
        "type": "map",
        "properties": {"n": {"type": "integer", "minimum": 5, "exclusiveMinimum": 3}},
        "additionalProperties": {"type": "array", "items": {"type": "number", "exclusiveMaximum": 2, "maximum": 9}},
    });
    assert_eq!(
        kube_schema(&raw),
        json!({
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 5}},
            "additionalProperties": {"type": "array", "items": {"type": "number", "maximum": 2, "exclusiveMaximum": true}},
        })
    );
}

#[test]
fn the_parameter_set_is_one_object_schema_with_the_package_rules() {
    let pkg = load();
    let defs = pkg.params.definitions();
    let s = parameters_schema(&defs, &pkg.params.validations, false);
    assert_eq!(s["type"], "object");
    assert!(
        s["properties"].get("TOKEN").is_none(),
        "sensitive parameters are not CRD fields"
    );
    assert_eq!(s["properties"]["LIMITS"]["type"], "object");
    assert_eq!(s["x-kubernetes-validations"][0]["rule"], "self.REPLICAS % 2 == 1");
    assert!(s.get("required").is_none(), "every parameter has a default");
    let all = parameters_schema(&defs, &[], true);
    assert_eq!(all["properties"]["TOKEN"]["minLength"], 8);
    assert!(all.get("x-kubernetes-validations").is_none());
}

#[test]
fn the_json_schema_document_is_draft_2020_12_with_typed_defaults_and_enums() {
    let pkg = load();
    let doc = json_schema("typed-0.1.0", &pkg.params.definitions(), &pkg.params.validations);
    assert_eq!(doc["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(doc["type"], "object");
    let r = &doc["properties"]["REPLICAS"];
    assert_eq!(r["type"], "integer");
    assert_eq!(r["default"], 3);
    assert_eq!(r["title"], "Replicas");
    assert_eq!(r["description"], "Number of replicas.");
    assert_eq!(
        doc["properties"]["RATIO"]["exclusiveMinimum"], 0,
        "2020-12 form kept"
    );
    assert_eq!(doc["properties"]["MODE"]["enum"], json!(["fast", "safe"]));
    assert_eq!(doc["properties"]["TOKEN"]["writeOnly"], true);
    assert!(
        doc.get("additionalProperties").is_none(),
        "-P accepts undeclared names"
    );
    assert!(
        doc["description"]
            .as_str()
            .unwrap()
            .contains("REPLICAS must be odd")
    );
    let req = param("name: NEEDED\nrequired: true");
    let doc = json_schema("x", &[req], &[]);
    assert_eq!(doc["required"], json!(["NEEDED"]));
}

#[test]
fn kudo_rules_and_wording_come_first_and_unchanged() {
    let p = param("name: REPLICAS\ntype: integer\nmaximum: 9");
    assert_eq!(
        validate_value(&p, "x").unwrap_err().to_string(),
        "parameter \"REPLICAS\" has an invalid value \"x\": type is \"integer\" but format of \"x\" is invalid: strconv.ParseInt: parsing \"x\": invalid syntax"
    );
    assert_eq!(
        validate_value(&p, "").unwrap_err().to_string(),
        "parameter \"REPLICAS\" is required but has no value set"
    );
    let rules = [ValidationRule {
        rule: "self.REPLICAS % 2 == 1".into(),
        message: String::new(),
    }];
    assert!(
        check_rules(std::slice::from_ref(&p), &[], &values(&[("REPLICAS", "4")])).is_empty(),
        "no rules, nothing to judge"
    );
    let errs = validate_all(&[p], &rules, &values(&[("REPLICAS", "x")]));
    assert_eq!(
        errs.len(),
        1,
        "a rule is not judged over a refused value: {errs:?}"
    );
}

/// These need the validator of `kudo-schema` (branch `kudo-schema`, commit `kudo-schema core:` and
/// the CEL commit): with its stubs they fail, which is the point: they prove the values reach it.
mod with_the_validator {
    use super::*;

    #[test]
    fn schema_keywords_add_errors_naming_parameter_value_and_rule() {
        let p = param("name: REPLICAS\ntype: integer\nminimum: 1\nmaximum: 9");
        assert_eq!(
            validate_value(&p, "12").unwrap_err().to_string(),
            "parameter REPLICAS: 12 is greater than the maximum of 9"
        );
        assert!(validate_value(&p, "9").is_ok());
        let cases: &[(&str, &str, &str)] = &[
            (
                "name: PN\nmaxLength: 3",
                "abcd",
                "parameter PN: \"abcd\" is longer than 3 characters",
            ),
            (
                "name: PN\npattern: '^[a-z]+$'",
                "A1",
                "parameter PN: \"A1\" does not match the pattern \"^[a-z]+$\"",
            ),
            (
                "name: PN\ntype: number\nexclusiveMaximum: 1",
                "1",
                "parameter PN: 1 is not less than the exclusive maximum of 1",
            ),
            (
                "name: PN\ntype: array\nmaxItems: 1",
                "[1, 2]",
                "parameter PN: [1,2] has more than 1 items",
            ),
            (
                "name: PN\ntype: array\nitems: {type: integer, minimum: 1}",
                "[1, 0]",
                "parameter PN[1]: 0 is less than the minimum of 1",
            ),
        ];
        for (decl, value, want) in cases {
            let errs = validate_values(&[param(decl)], &values(&[("PN", value)]));
            assert_eq!(errs, vec![want.to_string()], "{decl} = {value}");
        }
    }

    #[test]
    fn the_fixture_verifies_and_its_rules_hold_for_its_defaults() {
        let v = verify(&load(), ParamChecks::default());
        assert!(v.is_valid(), "{:?}", v.errors);
        let pkg = load();
        let defs = pkg.params.definitions();
        let rules = &pkg.params.validations;
        assert!(validate_all(&defs, rules, &values(&[("REPLICAS", "5")])).is_empty());
        assert_eq!(
            validate_all(&defs, rules, &values(&[("REPLICAS", "4")])),
            vec!["parameters do not satisfy the rule \"self.REPLICAS % 2 == 1\": REPLICAS must be odd, so a quorum exists".to_string()]
        );
    }

    #[test]
    fn verify_names_the_parameter_and_keyword_of_a_bad_schema_and_a_bad_default() {
        let mut pkg = load();
        let p = &mut pkg.params.parameters[0].def;
        p.schema.pattern = Some("([a-z".into());
        p.schema.maximum = Some(2.into());
        let v = verify(&pkg, ParamChecks::default());
        assert!(
            v.errors.iter().any(
                |e| e.starts_with("parameter \"REPLICAS\" has an invalid schema: ") && e.contains("pattern")
            ),
            "{:?}",
            v.errors
        );
        pkg.params.parameters[0].def.schema.pattern = None;
        let v = verify(&pkg, ParamChecks::default());
        assert!(
            v.errors.contains(
                &"parameter \"REPLICAS\" has an invalid default value: 3 is greater than the maximum of 2"
                    .to_string()
            ),
            "{:?}",
            v.errors
        );
    }
}

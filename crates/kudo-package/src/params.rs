//! Parameter values: how package defaults become the strings the cluster stores, how user values
//! are validated (KUDO's wording), and how values reach templates.
//!
//! The cluster contract (kudo-behaviour.md §2.5, §3.4): every value is a string in
//! OperatorVersion/Instance; in templates only `array` and `map` values are decoded (from YAML),
//! everything else — including `integer`, `number` and `boolean` — stays a string.

use std::collections::BTreeMap;

use kudo_api::Parameter;

use crate::yaml::{go_s, go_sprint, to_yaml};
use kudo_api::strconv::go_quote;

/// An `array`/`map` value that is not YAML ([`decode_structured`]); the text is the YAML reader's
/// short message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StructuredValueError(pub String);

/// Why a value does not have its declared type (KUDO's wording, without the `parameter "X" …`
/// prefix): [`validate_string_for_type`], [`validate_decoded_for_type`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TypeError {
    /// An integer/number/boolean string Go's `strconv` refuses (`reason` is its message).
    #[error("type is \"{value_type}\" but format of {} is invalid: {reason}", go_quote(.value))]
    Scalar {
        /// The declared type (`integer`, `number` or `boolean`).
        value_type: String,
        /// The value as given.
        value: String,
        /// The message of Go's `strconv` for it.
        reason: String,
    },
    /// An `array`/`map` string that does not decode to one.
    #[error("type is \"{value_type}\", but format of {value} is invalid")]
    Structured {
        /// The declared type (`array` or `map`).
        value_type: String,
        /// The value as given.
        value: String,
    },
    /// A decoded non-string where a string is declared (`value` printed as Go's `%s`).
    #[error("type is \"string\" but format is invalid: {0}")]
    NotString(String),
    /// A decoded value of the wrong shape for integer/number/boolean.
    #[error("type is \"{value_type}\" but format of {value} is invalid")]
    NotScalar {
        /// The declared type (`integer`, `number` or `boolean`).
        value_type: String,
        /// The value as Go's `%s` prints it.
        value: String,
    },
    /// A decoded non-array value where `array` is declared (printed as Go's `%s`).
    #[error("type is \"array\" but value {0} is not an array")]
    NotArray(String),
    /// A decoded non-map value where `map` is declared (printed as Go's `%s`).
    #[error("type is \"map\" but value {0} is not a map")]
    NotMap(String),
}

/// Why an instance value is refused (KUDO's `ValidateValue`, [`validate_value`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamValueError {
    /// The parameter is required, has no default and no value was given.
    #[error("parameter {} is required but has no value set", go_quote(.name))]
    Required {
        /// The parameter's name.
        name: String,
    },
    /// The value does not have the parameter's declared type.
    #[error("parameter {} has an invalid value {}: {source}", go_quote(.name), go_quote(.value))]
    Type {
        /// The parameter's name.
        name: String,
        /// The value as given.
        value: String,
        /// Why the value is not of the declared type.
        source: TypeError,
    },
    /// The parameter has an `enum` and the value is not one of its entries.
    #[error(
        "parameter {} has an invalid value {}: value is {}, but only allowed values are {}",
        go_quote(.name), go_quote(.value), go_quote(.value), go_list(.allowed)
    )]
    NotAllowed {
        /// The parameter's name.
        name: String,
        /// The value as given.
        value: String,
        /// The declared `enum` values, as the OperatorVersion stores them.
        allowed: Vec<String>,
    },
    /// kudo-rs extension: the typed value breaks a schema keyword of the declaration.
    /// `path` is the parameter's name, with the element for a nested value (`PORTS[1]`);
    /// `message` is the validator's short wording (`12 is greater than the maximum of 9`).
    #[error("parameter {path}: {message}")]
    Schema {
        /// The parameter's name.
        name: String,
        /// Where in the value the violation is: the name, with the element for a nested value.
        path: String,
        /// The validator's short description of the violation.
        message: String,
    },
    /// kudo-rs extension: a package-level rule (`x-kubernetes-validations` of
    /// `params.yaml`) does not hold for the values together.
    #[error("parameters do not satisfy the rule {rule:?}{}", rule_message(.message))]
    Rule {
        /// The CEL expression of the rule.
        rule: String,
        /// The rule's own `message`, empty when it has none.
        message: String,
    },
}

fn rule_message(message: &str) -> String {
    if message.is_empty() {
        String::new()
    } else {
        format!(": {message}")
    }
}

/// An `array`/`map` value that cannot be decoded for templates ([`template_params`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parameter {} has an invalid {value_type} value: {source}", go_quote(.name))]
pub struct TemplateParamError {
    /// The parameter's name.
    pub name: String,
    /// The declared type (`array` or `map`).
    pub value_type: String,
    /// Why the stored value does not decode.
    pub source: StructuredValueError,
}

/// A malformed `-p NAME=VALUE` argument ([`parse_cli_params`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CliParamError {
    /// The argument has no `=`.
    #[error("parameter {0:?} is not of the form NAME=VALUE")]
    NotNameValue(String),
    /// The argument has nothing before its `=`.
    #[error("parameter {0:?} has an empty name")]
    EmptyName(String),
}

/// A `-P` parameter file or a KudoOperator task's parameter file that cannot be used
/// ([`parse_param_file`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamFileError {
    /// The file is not YAML.
    #[error("{file}: invalid YAML: {message}")]
    Yaml {
        /// The parameter file as named on the command line or in the task.
        file: String,
        /// The YAML reader's message.
        message: String,
    },
    /// The file's top level is not a map (an empty file is fine).
    #[error("{file}: a parameter file must be a YAML map of NAME: value")]
    NotAMap {
        /// The parameter file as named on the command line or in the task.
        file: String,
    },
    /// An entry of the file has a `null` value.
    #[error("{file}: parameter {key:?} has a null value")]
    Null {
        /// The parameter file as named on the command line or in the task.
        file: String,
        /// The parameter name whose value is `null`.
        key: String,
    },
}

/// The default an `array` or `map` parameter gets when `params.yaml` has none (or `default:`
/// empty): KUDO marshals the default of a structured parameter to YAML whatever it is, and the
/// YAML of nothing is `null`. So such a parameter always has a default on the cluster, "required"
/// never applies to it, and templates see nil (false in `if`, nothing to `range` over).
pub const NULL_DEFAULT: &str = "null\n";

/// The default the OperatorVersion stores for a package default (`None`: absent or `null`):
/// [`wrap_value`] of it, [`NULL_DEFAULT`] for an `array`/`map` without one, else none.
pub fn wrap_default(v: Option<&serde_json::Value>, value_type: &str) -> Option<String> {
    match (v, value_type) {
        (Some(v), _) => Some(wrap_value(v, value_type)),
        (None, "array" | "map") => Some(NULL_DEFAULT.to_string()),
        (None, _) => None,
    }
}

/// Package default/enum value → the string stored in the OperatorVersion: YAML text for
/// `array`/`map`, Go's `%v` for everything else.
pub fn wrap_value(v: &serde_json::Value, value_type: &str) -> String {
    match (value_type, v) {
        ("array" | "map", serde_json::Value::Array(_) | serde_json::Value::Object(_)) => to_yaml(v),
        _ => go_sprint(v),
    }
}

fn strconv_err(func: &str, s: &str, range: bool) -> String {
    format!(
        "strconv.{func}: parsing {}: {}",
        go_quote(s),
        if range {
            "value out of range"
        } else {
            "invalid syntax"
        }
    )
}

/// Go's `strconv.ParseInt(s, 10, 64)` error, if any.
fn parse_int_err(s: &str) -> Option<String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Some(strconv_err("ParseInt", s, false));
    }
    if s.parse::<i64>().is_err() {
        return Some(strconv_err("ParseInt", s, true));
    }
    None
}

/// Go's `strconv.ParseFloat(s, 64)` error, if any.
fn parse_float_err(s: &str) -> Option<String> {
    let lower = s.to_ascii_lowercase();
    let body = lower.strip_prefix(['+', '-']).unwrap_or(&lower);
    if matches!(body, "inf" | "infinity" | "nan") {
        return None;
    }
    // Rust accepts a few spellings Go does not ("inf" handled above); Go accepts `_` only with a
    // base prefix, which Rust rejects too.
    if body.is_empty()
        || !body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'+' | b'-'))
    {
        return Some(strconv_err("ParseFloat", s, false));
    }
    match s.parse::<f64>() {
        Ok(f) if f.is_infinite() => Some(strconv_err("ParseFloat", s, true)),
        Ok(_) => None,
        Err(_) => Some(strconv_err("ParseFloat", s, false)),
    }
}

/// Go's `strconv.ParseBool`.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Decodes a string value of an `array`/`map` parameter (YAML, like KUDO).
pub fn decode_structured(s: &str) -> Result<serde_json::Value, StructuredValueError> {
    kudo_template::data::yaml_to_json(s).map_err(|e| StructuredValueError(crate::yaml::reading_error(&e)))
}

/// KUDO's type check of a string value (`ValidateParameterValueForType` on the cluster side).
/// Returns the reason, without the `parameter "X" …` prefix.
pub fn validate_string_for_type(value_type: &str, s: &str) -> Result<(), TypeError> {
    let scalar = |reason: String| TypeError::Scalar {
        value_type: value_type.to_string(),
        value: s.to_string(),
        reason,
    };
    let structured = || TypeError::Structured {
        value_type: value_type.to_string(),
        value: s.to_string(),
    };
    match value_type {
        "integer" => parse_int_err(s).map_or(Ok(()), |e| Err(scalar(e))),
        "number" => parse_float_err(s).map_or(Ok(()), |e| Err(scalar(e))),
        "boolean" => match parse_bool(s) {
            None => Err(scalar(strconv_err("ParseBool", s, false))),
            Some(_) => Ok(()),
        },
        "array" => match decode_structured(s) {
            Ok(serde_json::Value::Array(_) | serde_json::Value::Null) => Ok(()),
            _ => Err(structured()),
        },
        "map" => match decode_structured(s) {
            Ok(serde_json::Value::Object(_) | serde_json::Value::Null) => Ok(()),
            _ => Err(structured()),
        },
        _ => Ok(()),
    }
}

/// KUDO's type check of a package default or enum value (decoded YAML). `value_type` is the type
/// as declared: an undeclared (empty) type checks nothing, as in KUDO.
pub fn validate_decoded_for_type(value_type: &str, v: &serde_json::Value) -> Result<(), TypeError> {
    use serde_json::Value as J;
    match (value_type, v) {
        ("string", J::String(_)) => Ok(()),
        ("string", other) => Err(TypeError::NotString(go_s(other))),
        ("integer", J::Number(n)) if n.is_i64() || n.is_u64() => Ok(()),
        ("number", J::Number(_)) => Ok(()),
        ("boolean", J::Bool(_)) => Ok(()),
        ("integer" | "number" | "boolean", J::String(s)) => validate_string_for_type(value_type, s),
        ("integer" | "number" | "boolean", other) => Err(TypeError::NotScalar {
            value_type: value_type.to_string(),
            value: go_s(other),
        }),
        ("array", J::Array(_)) | ("map", J::Object(_)) => Ok(()),
        ("array" | "map", J::String(s)) => validate_string_for_type(value_type, s),
        ("array", other) => Err(TypeError::NotArray(go_s(other))),
        ("map", other) => Err(TypeError::NotMap(go_s(other))),
        _ => Ok(()),
    }
}

fn go_list(vs: &[String]) -> String {
    format!("[{}]", vs.join(" "))
}

/// One value (`""` when unset) against its declaration: KUDO's `ValidateValue` (required without
/// default, type, enum: KUDO's wording, first error only), then — when those pass and a value is
/// set — the declaration's schema keywords, every violation, by the one validator.
pub fn check_value(p: &Parameter, value: &str) -> Vec<ParamValueError> {
    if let Err(e) = kudo_value_rules(p, value) {
        return vec![e];
    }
    if value.is_empty() || p.schema.is_empty() {
        return Vec::new();
    }
    let Some(typed) = crate::schema::typed_value(p, value) else {
        return Vec::new();
    };
    let schema = crate::schema::param_schema(p);
    kudo_schema::validate(&schema, &typed, None, &p.name, kudo_schema::Formats::Extended)
        .into_iter()
        // The structural violations say why nested rules were skipped.
        .filter(|v| v.rule != kudo_schema::Rule::NotChecked)
        .map(|v| ParamValueError::Schema {
            name: p.name.clone(),
            message: v.short(),
            path: v.path,
        })
        .collect()
}

/// The first error of [`check_value`]: KUDO's `ValidateValue` extended with the schema keywords.
pub fn validate_value(p: &Parameter, value: &str) -> Result<(), ParamValueError> {
    check_value(p, value).into_iter().next().map_or(Ok(()), Err)
}

/// The package-level rules over all values at once (set or defaulted, typed by
/// [`crate::schema::typed_values`]). Judged only when every value passed its own checks, so a
/// rule never reports on a value that is already refused.
pub fn check_rules(
    defs: &[Parameter],
    rules: &[kudo_api::ValidationRule],
    values: &BTreeMap<String, String>,
) -> Vec<ParamValueError> {
    if rules.is_empty() {
        return Vec::new();
    }
    let schema = crate::schema::rules_schema(rules);
    let object = serde_json::Value::Object(crate::schema::typed_values(defs, values));
    kudo_schema::validate(&schema, &object, None, "", kudo_schema::Formats::Extended)
        .into_iter()
        .filter_map(|v| match v.rule {
            kudo_schema::Rule::Cel { rule, message } if v.path.is_empty() => Some(ParamValueError::Rule {
                rule,
                message: message.unwrap_or_default(),
            }),
            _ => None,
        })
        .collect()
}

/// KUDO's `ValidateValue` for one value (`""` when unset): required-without-default, type, enum.
fn kudo_value_rules(p: &Parameter, value: &str) -> Result<(), ParamValueError> {
    let name = p.name.clone();
    if p.lacks_required_value(Some(value)) {
        return Err(ParamValueError::Required { name });
    }
    if value.is_empty() {
        return Ok(());
    }
    if let Err(source) = validate_string_for_type(p.value_type(), value) {
        return Err(ParamValueError::Type {
            name,
            value: value.to_string(),
            source,
        });
    }
    if let Some(allowed) = &p.r#enum
        && !allowed.iter().any(|a| a == value)
    {
        return Err(ParamValueError::NotAllowed {
            name,
            value: value.to_string(),
            allowed: allowed.clone(),
        });
    }
    Ok(())
}

/// Validates instance values against definitions: every definition is checked with its value (or
/// none), as the admission webhook does. Returns all errors, in definition order.
pub fn validate_values(defs: &[Parameter], values: &BTreeMap<String, String>) -> Vec<String> {
    validate_all(defs, &[], values)
}

/// [`validate_values`] plus the package-level `rules`, judged after every value passed
/// its own checks: THE parameter rule set of `package verify`, the CLI and the manager.
pub fn validate_all(
    defs: &[Parameter],
    rules: &[kudo_api::ValidationRule],
    values: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut errs = Vec::new();
    for d in defs {
        let v = values.get(&d.name).map(String::as_str).unwrap_or("");
        errs.extend(check_value(d, v).iter().map(ToString::to_string));
    }
    if errs.is_empty() {
        errs.extend(check_rules(defs, rules, values).iter().map(ToString::to_string));
    }
    errs
}

/// The effective string value of every declared parameter: the instance value if given, else the
/// default, else `""` (KUDO's `ParamsMap` before decoding). Undeclared instance values are ignored.
pub fn effective_values(defs: &[Parameter], values: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    defs.iter()
        .map(|d| {
            let v = values
                .get(&d.name)
                .or(d.default.as_ref())
                .cloned()
                .unwrap_or_default();
            (d.name.clone(), v)
        })
        .collect()
}

/// The `.Params` map templates see: `array`/`map` values decoded from YAML, everything else a
/// string. A value that fails to decode is an error naming the parameter (KUDO: `InvalidParams`).
pub fn template_params(
    defs: &[Parameter],
    values: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, kudo_template::Value>, TemplateParamError> {
    let eff = effective_values(defs, values);
    let mut out = BTreeMap::new();
    for d in defs {
        let s = eff.get(&d.name).cloned().unwrap_or_default();
        let v = match d.value_type() {
            "array" | "map" => {
                let decoded = decode_structured(&s).map_err(|source| TemplateParamError {
                    name: d.name.clone(),
                    value_type: d.value_type().to_string(),
                    source,
                })?;
                structured_template_value(d.value_type(), &decoded)
            }
            _ => kudo_template::Value::str(s.as_str()),
        };
        out.insert(d.name.clone(), v);
    }
    Ok(out)
}

/// What a template sees of a decoded `array`/`map` value. KUDO decodes an array into a Go
/// `[]interface{}`, so `null` (the default of an array without one) is a nil slice: it prints as
/// `[]`, is false in `if` and ranges over nothing, as an empty list does here. A `null` map is a
/// nil `interface{}` (`<no value>`).
fn structured_template_value(value_type: &str, decoded: &serde_json::Value) -> kudo_template::Value {
    match (value_type, decoded) {
        ("array", serde_json::Value::Null) => kudo_template::Value::list(Vec::new()),
        _ => kudo_template::Value::from_json(decoded),
    }
}

/// Parses `-p NAME=VALUE` arguments (value verbatim; later wins).
pub fn parse_cli_params(args: &[String]) -> Result<BTreeMap<String, String>, CliParamError> {
    let mut out = BTreeMap::new();
    for a in args {
        let Some((k, v)) = a.split_once('=') else {
            return Err(CliParamError::NotNameValue(a.clone()));
        };
        if k.is_empty() {
            return Err(CliParamError::EmptyName(a.clone()));
        }
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

/// Parses a `-P` parameter file: a YAML map; maps/lists re-serialised to YAML, scalars via `%v`,
/// `null` rejected.
pub fn parse_param_file(file: &str, text: &str) -> Result<BTreeMap<String, String>, ParamFileError> {
    let v = kudo_template::data::yaml_to_json(text).map_err(|e| ParamFileError::Yaml {
        file: file.to_string(),
        message: crate::yaml::reading_error(&e),
    })?;
    let obj = match v {
        serde_json::Value::Object(o) => o,
        serde_json::Value::Null => return Ok(BTreeMap::new()),
        _ => {
            return Err(ParamFileError::NotAMap {
                file: file.to_string(),
            });
        }
    };
    let mut out = BTreeMap::new();
    for (k, v) in obj {
        let s = match &v {
            serde_json::Value::Null => {
                return Err(ParamFileError::Null {
                    file: file.to_string(),
                    key: k,
                });
            }
            serde_json::Value::Array(_) | serde_json::Value::Object(_) => to_yaml(&v),
            other => go_sprint(other),
        };
        out.insert(k, s);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(ty: &str, default: Option<&str>, en: Option<Vec<&str>>) -> kudo_api::Parameter {
        kudo_api::Parameter {
            name: "P".into(),
            value_type: ty.into(),
            required: Some(true),
            default: default.map(String::from),
            r#enum: en.map(|v| v.into_iter().map(String::from).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn messages_follow_kudo_wording() {
        let d = def("integer", None, None);
        assert_eq!(
            validate_value(&d, "").map_err(|e| e.to_string()),
            Err("parameter \"P\" is required but has no value set".into())
        );
        assert_eq!(
            validate_value(&d, "abc").map_err(|e| e.to_string()),
            Err("parameter \"P\" has an invalid value \"abc\": type is \"integer\" but format of \"abc\" is invalid: strconv.ParseInt: parsing \"abc\": invalid syntax".into())
        );
        assert!(validate_value(&d, "-12").is_ok());
        let e = def("string", Some("a"), Some(vec!["a", "b"]));
        assert_eq!(
            validate_value(&e, "c").map_err(|e| e.to_string()),
            Err("parameter \"P\" has an invalid value \"c\": value is \"c\", but only allowed values are [a b]".into())
        );
        let b = def("boolean", Some("true"), None);
        assert!(validate_value(&b, "T").is_ok());
        assert!(validate_value(&b, "yes").is_err());
    }

    #[test]
    fn arrays_and_maps_are_decoded_for_templates_only() {
        let a = def("array", Some("[80, 443]"), None);
        let n = kudo_api::Parameter {
            name: "N".into(),
            value_type: "integer".into(),
            default: Some("3".into()),
            ..Default::default()
        };
        let m = template_params(&[a, n], &BTreeMap::new()).unwrap();
        assert_eq!(m["P"].type_name(), "[]interface {}");
        assert_eq!(m["N"].as_str(), Some("3"));
    }

    /// One "required" rule for every type, the CLI's and the manager's alike: one row per case.
    #[test]
    fn the_required_rule() {
        let optional = kudo_api::Parameter {
            required: Some(false),
            ..def("string", None, None)
        };
        let rows: [(&kudo_api::Parameter, Option<&str>, bool); 8] = [
            (&def("string", None, None), None, true),
            (&def("string", None, None), Some(""), true),
            (&def("string", None, None), Some("x"), false),
            (&def("integer", Some("3"), None), None, false),
            (&optional, None, false),
            (&def("map", Some(NULL_DEFAULT), None), None, false),
            (&def("array", Some(NULL_DEFAULT), None), Some(""), false),
            (&def("array", None, None), None, true),
        ];
        for (i, (p, value, lacks)) in rows.into_iter().enumerate() {
            assert_eq!(p.lacks_required_value(value), lacks, "row {i}");
            let refused = check_value(p, value.unwrap_or(""))
                .iter()
                .any(|e| matches!(e, ParamValueError::Required { .. }));
            assert_eq!(refused, lacks, "row {i}: the value check applies the same rule");
            let spec = kudo_api::OperatorVersionSpec {
                parameters: vec![p.clone()],
                ..Default::default()
            };
            let values: BTreeMap<String, String> = value
                .map(|v| ("P".to_string(), v.to_string()))
                .into_iter()
                .collect();
            assert_eq!(
                spec.missing_required(&values).len(),
                usize::from(lacks),
                "row {i}: install's check"
            );
        }
    }

    #[test]
    fn null_structured_defaults_are_nil_in_templates() {
        let a = def("array", Some(NULL_DEFAULT), None);
        let m = kudo_api::Parameter {
            name: "M".into(),
            ..def("map", Some(NULL_DEFAULT), None)
        };
        let v = template_params(&[a, m], &BTreeMap::new()).unwrap();
        let out = kudo_template::render(
            "t",
            "{{ if .P }}yes{{ else }}no{{ end }} {{ range .P }}x{{ end }}{{ .P }} {{ if .M }}yes{{ else }}no{{ end }} {{ .M }}",
            &kudo_template::Value::map(v),
        );
        assert_eq!(out.unwrap(), "no [] no <no value>");
    }

    #[test]
    fn param_file_values() {
        let m = parse_param_file("v.yaml", "A: 1\nB: [1, 2]\nC: yes\n").unwrap();
        assert_eq!(m["A"], "1");
        assert_eq!(m["B"], "- 1\n- 2\n");
        assert_eq!(m["C"], "true");
        assert!(parse_param_file("v.yaml", "A: ~\n").is_err());
    }
}

//! Parameter values: how package defaults become the strings the cluster stores, how user values
//! are validated (KUDO's wording), and how values reach templates.
//!
//! The cluster contract (kudo-behaviour.md §2.5, §3.4): every value is a string in
//! OperatorVersion/Instance; in templates only `array` and `map` values are decoded (from YAML),
//! everything else — including `integer`, `number` and `boolean` — stays a string.

use std::collections::BTreeMap;

use crate::yaml::{go_quote, go_s, go_sprint, to_yaml};

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
pub fn decode_structured(s: &str) -> Result<serde_json::Value, String> {
    serde_saphyr::from_str_with_options::<serde_json::Value>(s, crate::yaml::options())
        .map_err(|e| crate::yaml::short_error(&e))
}

/// KUDO's type check of a string value (`ValidateParameterValueForType` on the cluster side).
/// Returns the reason, without the `parameter "X" …` prefix.
pub fn validate_string_for_type(value_type: &str, s: &str) -> Result<(), String> {
    let q = go_quote(s);
    match value_type {
        "integer" => match parse_int_err(s) {
            Some(e) => Err(format!("type is \"integer\" but format of {q} is invalid: {e}")),
            None => Ok(()),
        },
        "number" => match parse_float_err(s) {
            Some(e) => Err(format!("type is \"number\" but format of {q} is invalid: {e}")),
            None => Ok(()),
        },
        "boolean" => match parse_bool(s) {
            None => Err(format!(
                "type is \"boolean\" but format of {q} is invalid: {}",
                strconv_err("ParseBool", s, false)
            )),
            Some(_) => Ok(()),
        },
        "array" => match decode_structured(s) {
            Ok(serde_json::Value::Array(_) | serde_json::Value::Null) => Ok(()),
            _ => Err(format!("type is \"array\", but format of {s} is invalid")),
        },
        "map" => match decode_structured(s) {
            Ok(serde_json::Value::Object(_) | serde_json::Value::Null) => Ok(()),
            _ => Err(format!("type is \"map\", but format of {s} is invalid")),
        },
        _ => Ok(()),
    }
}

/// KUDO's type check of a package default or enum value (decoded YAML). `value_type` is the type
/// as declared: an undeclared (empty) type checks nothing, as in KUDO.
pub fn validate_decoded_for_type(value_type: &str, v: &serde_json::Value) -> Result<(), String> {
    use serde_json::Value as J;
    match (value_type, v) {
        ("string", J::String(_)) => Ok(()),
        ("string", other) => Err(format!(
            "type is \"string\" but format is invalid: {}",
            go_s(other)
        )),
        ("integer", J::Number(n)) if n.is_i64() || n.is_u64() => Ok(()),
        ("number", J::Number(_)) => Ok(()),
        ("boolean", J::Bool(_)) => Ok(()),
        ("integer" | "number" | "boolean", J::String(s)) => validate_string_for_type(value_type, s),
        ("integer" | "number" | "boolean", other) => Err(format!(
            "type is \"{value_type}\" but format of {} is invalid",
            go_s(other)
        )),
        ("array", J::Array(_)) | ("map", J::Object(_)) => Ok(()),
        ("array" | "map", J::String(s)) => validate_string_for_type(value_type, s),
        ("array", other) => Err(format!(
            "type is \"array\" but value {} is not an array",
            go_s(other)
        )),
        ("map", other) => Err(format!("type is \"map\" but value {} is not a map", go_s(other))),
        _ => Ok(()),
    }
}

/// A parameter definition as the cluster sees it (OperatorVersion): enough to validate values.
pub trait ParamDef {
    fn name(&self) -> &str;
    fn value_type(&self) -> &str;
    fn is_required(&self) -> bool;
    fn default_string(&self) -> Option<String>;
    fn enum_strings(&self) -> Option<Vec<String>>;
}

impl ParamDef for kudo_api::Parameter {
    fn name(&self) -> &str {
        &self.name
    }
    fn value_type(&self) -> &str {
        kudo_api::Parameter::value_type(self)
    }
    fn is_required(&self) -> bool {
        kudo_api::Parameter::is_required(self)
    }
    fn default_string(&self) -> Option<String> {
        self.default.clone()
    }
    fn enum_strings(&self) -> Option<Vec<String>> {
        self.r#enum.clone()
    }
}

impl ParamDef for crate::model::Parameter {
    fn name(&self) -> &str {
        &self.name
    }
    fn value_type(&self) -> &str {
        crate::model::Parameter::value_type(self)
    }
    fn is_required(&self) -> bool {
        crate::model::Parameter::is_required(self)
    }
    fn default_string(&self) -> Option<String> {
        crate::model::Parameter::default_string(self)
    }
    fn enum_strings(&self) -> Option<Vec<String>> {
        crate::model::Parameter::enum_strings(self)
    }
}

fn go_list(vs: &[String]) -> String {
    format!("[{}]", vs.join(" "))
}

/// KUDO's `ValidateValue` for one value (`""` when unset): required-without-default, type, enum.
pub fn validate_value(p: &dyn ParamDef, value: &str) -> Result<(), String> {
    let name = go_quote(p.name());
    if p.is_required() && p.default_string().is_none() && value.is_empty() {
        return Err(format!("parameter {name} is required but has no value set"));
    }
    if value.is_empty() {
        return Ok(());
    }
    if let Err(e) = validate_string_for_type(p.value_type(), value) {
        return Err(format!(
            "parameter {name} has an invalid value {}: {e}",
            go_quote(value)
        ));
    }
    if let Some(allowed) = p.enum_strings()
        && !allowed.iter().any(|a| a == value)
    {
        return Err(format!(
            "parameter {name} has an invalid value {}: value is {}, but only allowed values are {}",
            go_quote(value),
            go_quote(value),
            go_list(&allowed)
        ));
    }
    Ok(())
}

/// Validates instance values against definitions: every definition is checked with its value (or
/// none), as the admission webhook does. Returns all errors, in definition order.
pub fn validate_values(defs: &[&dyn ParamDef], values: &BTreeMap<String, String>) -> Vec<String> {
    let mut errs = Vec::new();
    for d in defs {
        let v = values.get(d.name()).map(String::as_str).unwrap_or("");
        if let Err(e) = validate_value(*d, v) {
            errs.push(e);
        }
    }
    errs
}

/// The effective string value of every declared parameter: the instance value if given, else the
/// default, else `""` (KUDO's `ParamsMap` before decoding). Undeclared instance values are ignored.
pub fn effective_values(
    defs: &[&dyn ParamDef],
    values: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    defs.iter()
        .map(|d| {
            let v = values
                .get(d.name())
                .cloned()
                .or_else(|| d.default_string())
                .unwrap_or_default();
            (d.name().to_string(), v)
        })
        .collect()
}

/// The `.Params` map templates see: `array`/`map` values decoded from YAML, everything else a
/// string. A value that fails to decode is an error naming the parameter (KUDO: `InvalidParams`).
pub fn template_params(
    defs: &[&dyn ParamDef],
    values: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, kudo_template::Value>, String> {
    let eff = effective_values(defs, values);
    let mut out = BTreeMap::new();
    for d in defs {
        let s = eff.get(d.name()).cloned().unwrap_or_default();
        let v = match d.value_type() {
            "array" | "map" => {
                let decoded = decode_structured(&s).map_err(|e| {
                    format!(
                        "parameter {} has an invalid {} value: {e}",
                        go_quote(d.name()),
                        d.value_type()
                    )
                })?;
                kudo_template::Value::from_json(&decoded)
            }
            _ => kudo_template::Value::str(s.as_str()),
        };
        out.insert(d.name().to_string(), v);
    }
    Ok(out)
}

/// Parses `-p NAME=VALUE` arguments (value verbatim; later wins).
pub fn parse_cli_params(args: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for a in args {
        let Some((k, v)) = a.split_once('=') else {
            return Err(format!("parameter {a:?} is not of the form NAME=VALUE"));
        };
        if k.is_empty() {
            return Err(format!("parameter {a:?} has an empty name"));
        }
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

/// Parses a `-P` parameter file: a YAML map; maps/lists re-serialised to YAML, scalars via `%v`,
/// `null` rejected.
pub fn parse_param_file(file: &str, text: &str) -> Result<BTreeMap<String, String>, String> {
    let v = serde_saphyr::from_str_with_options::<serde_json::Value>(text, crate::yaml::options())
        .map_err(|e| format!("{file}: invalid YAML: {}", crate::yaml::short_error(&e)))?;
    let obj = match v {
        serde_json::Value::Object(o) => o,
        serde_json::Value::Null => return Ok(BTreeMap::new()),
        _ => {
            return Err(format!(
                "{file}: a parameter file must be a YAML map of NAME: value"
            ));
        }
    };
    let mut out = BTreeMap::new();
    for (k, v) in obj {
        let s = match &v {
            serde_json::Value::Null => return Err(format!("{file}: parameter {k:?} has a null value")),
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
            validate_value(&d, ""),
            Err("parameter \"P\" is required but has no value set".into())
        );
        assert_eq!(
            validate_value(&d, "abc"),
            Err("parameter \"P\" has an invalid value \"abc\": type is \"integer\" but format of \"abc\" is invalid: strconv.ParseInt: parsing \"abc\": invalid syntax".into())
        );
        assert!(validate_value(&d, "-12").is_ok());
        let e = def("string", Some("a"), Some(vec!["a", "b"]));
        assert_eq!(
            validate_value(&e, "c"),
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
        let defs: Vec<&dyn ParamDef> = vec![&a, &n];
        let m = template_params(&defs, &BTreeMap::new()).unwrap();
        assert_eq!(m["P"].type_name(), "[]interface {}");
        assert_eq!(m["N"].as_str(), Some("3"));
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

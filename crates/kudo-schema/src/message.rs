//! kube-apiserver's wording of a violation in a 422 for a custom resource.
//!
//! kube-apiserver turns its OpenAPI validator's errors into `field.Error`s of a few types (Invalid,
//! TypeInvalid, NotSupported, Required, TooLong, TooMany), each printed `<field>: <type>: <value>:
//! <detail>`, with the value as Go prints an unstructured value (`%v` for numbers and booleans, a
//! quoted string, `%#v` for lists and maps). The wording here was recorded from a real
//! kube-apiserver v1.28.7 (see the differential test in kudo-apiserver).

use serde_json::Value;

use crate::walk::type_name;
use crate::{Rule, Violation};

/// One entry of a 422's `details.causes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeCause {
    /// `FieldValueInvalid`, `FieldValueTypeInvalid`, `FieldValueNotSupported`,
    /// `FieldValueRequired`, `FieldValueTooLong`, `FieldValueTooMany`.
    pub reason: String,
    /// The field path; `<nil>` for an error about the whole object (as kube writes it).
    pub field: String,
    /// The message after the field path.
    pub message: String,
}

impl std::fmt::Display for KubeCause {
    /// As in the 422's message: `spec.X: Invalid value: ...`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// See [`Violation::kube_cause`].
pub(crate) fn kube_cause(v: &Violation) -> KubeCause {
    let (reason, message) = reason_and_message(v);
    // kube prints a nil field path as `<nil>`, in the message and in the cause alike.
    let field = if v.path.is_empty() {
        "<nil>".to_string()
    } else {
        v.path.clone()
    };
    KubeCause {
        reason: reason.to_string(),
        field,
        message,
    }
}

fn invalid(value: &Value, detail: String) -> (&'static str, String) {
    (
        "FieldValueInvalid",
        format!("Invalid value: {}: {detail}", go_value(value)),
    )
}

fn reason_and_message(v: &Violation) -> (&'static str, String) {
    let p = &v.path;
    let val = &v.value;
    match &v.rule {
        Rule::Type { expected } => {
            let actual = type_name(val);
            let detail = format!("{p} in body must be of type {expected}: \"{actual}\"");
            let shown = Value::from(actual);
            ("FieldValueTypeInvalid", invalid(&shown, detail).1)
        }
        Rule::Enum { allowed } => {
            let supported: Vec<String> = allowed.iter().map(supported_value).collect();
            (
                "FieldValueNotSupported",
                format!(
                    "Unsupported value: {}: supported values: {}",
                    go_value(val),
                    supported.join(", ")
                ),
            )
        }
        Rule::Maximum { limit, exclusive } => {
            let op = if *exclusive { "" } else { " or equal to" };
            let l = go_limit(limit);
            invalid(val, format!("{p} in body should be less than{op} {l}"))
        }
        Rule::Minimum { limit, exclusive } => {
            let op = if *exclusive { "" } else { " or equal to" };
            let l = go_limit(limit);
            invalid(val, format!("{p} in body should be greater than{op} {l}"))
        }
        Rule::MultipleOf(m) => invalid(
            val,
            format!("{p} in body should be a multiple of {}", go_limit(m)),
        ),
        Rule::MaxLength(n) => (
            "FieldValueTooLong",
            format!("Too long: may not be longer than {n}"),
        ),
        Rule::MinLength(n) => invalid(val, format!("{p} in body should be at least {n} chars long")),
        Rule::Pattern(re) => invalid(val, format!("{p} in body should match '{re}'")),
        Rule::Format(f) => {
            let shown = go_value(val);
            let detail = format!("{p} in body must be of type {f}: {shown}");
            ("FieldValueTypeInvalid", invalid(val, detail).1)
        }
        _ => counts_and_rules(v),
    }
}

/// The rules about counts of items and properties, presence, and CEL.
fn counts_and_rules(v: &Violation) -> (&'static str, String) {
    let p = &v.path;
    let val = &v.value;
    let len = match val {
        Value::Array(a) => a.len(),
        Value::Object(m) => m.len(),
        _ => 0,
    };
    match &v.rule {
        Rule::MaxItems(n) => (
            "FieldValueTooMany",
            format!("Too many: {len}: must have at most {n} items"),
        ),
        // kube shows the count as the value of these two.
        Rule::MinItems(n) => invalid(
            &Value::from(len),
            format!("{p} in body should have at least {n} items"),
        ),
        Rule::UniqueItems => invalid(val, format!("{p} in body shouldn't contain duplicates")),
        Rule::MaxProperties(n) => (
            "FieldValueTooMany",
            format!("Too many: {len}: must have at most {n} items"),
        ),
        Rule::MinProperties(n) => invalid(
            &Value::from(len),
            format!("{p} in body should have at least {n} properties"),
        ),
        Rule::Required => ("FieldValueRequired", "Required value".to_string()),
        Rule::NotAllowed => (
            "FieldValueForbidden",
            format!("Forbidden: {p} in body is a forbidden property"),
        ),
        Rule::Cel { rule, message } => {
            let detail = message.clone().unwrap_or_else(|| format!("failed rule: {}", rule.trim()));
            invalid(&Value::from(v.schema_type.as_str()), detail)
        }
        Rule::NotChecked => invalid(
            &Value::Null,
            "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".to_string(),
        ),
        _ => invalid(val, String::new()),
    }
}

/// An allowed value as kube lists it: strings as they are, others as JSON, then all quoted.
fn supported_value(v: &Value) -> String {
    match v {
        Value::String(s) => kudo_api::strconv::go_quote(s),
        other => kudo_api::strconv::go_quote(&other.to_string()),
    }
}

/// A limit (`maximum`, `multipleOf`...), which kube holds as a float64.
fn go_limit(v: &Value) -> String {
    v.as_f64().map_or_else(|| v.to_string(), go_float)
}

/// A value as Go's `%v` prints an unstructured scalar, `%#v` a list or map, `"null"` for nil.
pub(crate) fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "\"null\"".to_string(),
        Value::String(s) => kudo_api::strconv::go_quote(s),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => go_float(n.as_f64().unwrap_or(f64::NAN)),
        },
        other => go_syntax(other),
    }
}

/// Go's `%#v` of an unstructured value (`[]interface {}{1, "a"}`,
/// `map[string]interface {}{"a":1}`, keys sorted).
fn go_syntax(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".to_string(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_syntax).collect();
            format!("[]interface {{}}{{{}}}", parts.join(", "))
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", kudo_api::strconv::go_quote(k), go_syntax(&m[*k])))
                .collect();
            format!("map[string]interface {{}}{{{}}}", parts.join(", "))
        }
        other => go_value(other),
    }
}

/// Go's `%v` of a float64: the shortest representation, in exponent form (`1e+06`) when the
/// exponent is below -4 or at least 6 (`fmt.Println(1000000.0)` prints `1e+06`).
pub(crate) fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    let e = format!("{f:e}");
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        return format!("{f}");
    }
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_formatting() {
        assert_eq!(go_float(9.0), "9");
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(123456.0), "123456");
        assert_eq!(go_float(1234567.0), "1.234567e+06");
        assert_eq!(go_value(&serde_json::json!("a")), "\"a\"");
        assert_eq!(go_value(&serde_json::json!([1, "a"])), "[]interface {}{1, \"a\"}");
        assert_eq!(
            go_value(&serde_json::json!({"b": 1, "a": true})),
            "map[string]interface {}{\"a\":true, \"b\":1}"
        );
    }
}

//! [`crate::check_schema`]: mistakes in a schema itself, found before any value meets it.
//!
//! A mistake found here would otherwise show up as a confusing value error, or not at all (an
//! uncompilable `pattern` or CEL rule is skipped by the walk): a package author or CRD writer is
//! better told about the schema than about every value.

use serde_json::{Map, Value};

use crate::{SchemaError, cel};

const TYPES: [&str; 6] = ["integer", "number", "string", "boolean", "array", "object"];

/// See [`crate::check_schema`].
pub(crate) fn check(schema: &Value) -> Vec<SchemaError> {
    let mut out = Vec::new();
    node(schema, "", true, &mut out);
    out
}

fn push(out: &mut Vec<SchemaError>, path: &str, keyword: &str, message: impl Into<String>) {
    out.push(SchemaError {
        path: path.to_string(),
        keyword: keyword.to_string(),
        message: message.into(),
    });
}

fn child(path: &str, seg: &str) -> String {
    if path.is_empty() {
        seg.to_string()
    } else {
        format!("{path}.{seg}")
    }
}

/// Checks one node, then its children. `correlatable`: whether an old value can exist here on an
/// update (not below the items of a list that is not `x-kubernetes-list-type: map`), so whether
/// a rule may use `oldSelf`.
fn node(schema: &Value, path: &str, correlatable: bool, out: &mut Vec<SchemaError>) {
    let Some(m) = schema.as_object() else {
        push(out, path, "schema", "must be an object");
        return;
    };
    keyword_types(m, path, out);
    bounds(m, path, out);
    if let Some(p) = m.get("pattern").and_then(Value::as_str)
        && let Err(e) = regex::Regex::new(p)
    {
        let first = e.to_string().lines().last().unwrap_or_default().to_string();
        push(out, path, "pattern", format!("does not compile: {first}"));
    }
    rules(m, path, correlatable, out);
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        for (k, ps) in props {
            node(ps, &child(path, &format!("properties.{k}")), correlatable, out);
        }
    }
    if let Some(a @ Value::Object(_)) = m.get("additionalProperties") {
        node(a, &child(path, "additionalProperties"), correlatable, out);
    }
    if let Some(items) = m.get("items") {
        let map_list = m.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map");
        node(items, &child(path, "items"), correlatable && map_list, out);
    }
}

/// Each keyword's JSON type.
fn keyword_types(m: &Map<String, Value>, path: &str, out: &mut Vec<SchemaError>) {
    for (k, v) in m {
        if let Some(expected) = mistyped(k, v) {
            push(out, path, k, format!("must be {expected}, not {v}"));
        }
    }
}

/// What a known keyword's value should be, when it is not; `None` for a good or unknown keyword.
fn mistyped(keyword: &str, v: &Value) -> Option<&'static str> {
    let (ok, expected) = match keyword {
        "type" => (
            v.as_str().is_some_and(|t| TYPES.contains(&t)),
            "one of integer, number, string, boolean, array, object",
        ),
        "nullable"
        | "exclusiveMaximum"
        | "exclusiveMinimum"
        | "uniqueItems"
        | "x-kubernetes-int-or-string"
        | "x-kubernetes-preserve-unknown-fields" => (v.is_boolean(), "a boolean"),
        "maximum" | "minimum" => (v.is_number(), "a number"),
        "multipleOf" => (v.as_f64().is_some_and(|f| f > 0.0), "a number greater than 0"),
        "maxLength" | "minLength" | "maxItems" | "minItems" | "maxProperties" | "minProperties" => {
            (v.is_u64(), "a non-negative integer")
        }
        "pattern" | "format" | "description" => (v.is_string(), "a string"),
        "enum" => (v.is_array(), "a list"),
        "required" => (
            v.as_array().is_some_and(|r| r.iter().all(Value::is_string)),
            "a list of strings",
        ),
        "properties" => (
            v.as_object().is_some_and(|p| p.values().all(Value::is_object)),
            "a map of schemas",
        ),
        "items" => (v.is_object(), "a schema"),
        "additionalProperties" => (v.is_object() || v.is_boolean(), "a boolean or a schema"),
        "x-kubernetes-validations" => (v.is_array(), "a list of rules"),
        _ => (true, ""),
    };
    (!ok).then_some(expected)
}

/// Lower bounds above upper bounds.
fn bounds(m: &Map<String, Value>, path: &str, out: &mut Vec<SchemaError>) {
    let pairs = [
        ("minimum", "maximum"),
        ("minLength", "maxLength"),
        ("minItems", "maxItems"),
        ("minProperties", "maxProperties"),
    ];
    for (lo, hi) in pairs {
        let (Some(l), Some(h)) = (
            m.get(lo).and_then(Value::as_f64),
            m.get(hi).and_then(Value::as_f64),
        ) else {
            continue;
        };
        if l > h {
            push(out, path, lo, format!("{l} is greater than {hi} {h}"));
        }
    }
}

/// `x-kubernetes-validations`: each a `{rule, message}` whose rule compiles and uses `oldSelf`
/// only where an old value can exist.
fn rules(m: &Map<String, Value>, path: &str, correlatable: bool, out: &mut Vec<SchemaError>) {
    let Some(rules) = m.get("x-kubernetes-validations").and_then(Value::as_array) else {
        return;
    };
    const KW: &str = "x-kubernetes-validations";
    for (i, r) in rules.iter().enumerate() {
        let here = child(path, &format!("{KW}[{i}]"));
        let Some(rule) = r.get("rule").and_then(Value::as_str) else {
            push(out, &here, "rule", "must be a string");
            continue;
        };
        if r.get("message").is_some_and(|m| !m.is_string()) {
            push(out, &here, "message", "must be a string");
        }
        match cel::compile(rule) {
            Err(e) => push(out, &here, "rule", format!("does not compile: {e}")),
            Ok(c) if c.transition && !correlatable => push(
                out,
                &here,
                "rule",
                "uses oldSelf where no old value can exist (within the items of a list that is not x-kubernetes-list-type: map)",
            ),
            Ok(_) => {}
        }
    }
}

//! kuttl's partial-object matching and the failure diff.
//!
//! An expected object matches an actual one when it is a *subset* of it:
//! * mappings: every key of the expected mapping exists in the actual one and its value matches;
//!   keys only in the actual object are ignored;
//! * sequences: both have the same length and elements match pairwise, in order (kuttl does not
//!   search for elements, so an assert on one container of a two-container pod must list both);
//! * scalars: equal values of the same type (numbers compare by value, so `1` and `1.0` agree, as
//!   they do after Kubernetes' JSON round trip; `"1"` and `1` do not).

use serde_json::{Map, Value};

/// Where an expected object differs from an actual one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Field path such as `.spec.template.spec.containers[0].image` (empty for the root).
    pub path: String,
    /// What is wrong there.
    pub message: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Whether `expected` is a subset of `actual` (see the module docs).
pub fn is_subset(expected: &Value, actual: &Value) -> bool {
    mismatches(expected, actual).is_empty()
}

/// Every place where `expected` is not a subset of `actual`, in document order. Unlike kuttl,
/// which stops at the first difference, all of them are listed so one failed run shows the whole
/// picture.
pub fn mismatches(expected: &Value, actual: &Value) -> Vec<Mismatch> {
    let mut out = Vec::new();
    walk(expected, actual, &mut String::new(), &mut out);
    out
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn numbers_equal(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    match (a.as_i64(), b.as_i64()) {
        (Some(x), Some(y)) => x == y,
        _ => match (a.as_u64(), b.as_u64()) {
            (Some(x), Some(y)) => x == y,
            _ => a.as_f64() == b.as_f64(),
        },
    }
}

fn walk(expected: &Value, actual: &Value, path: &mut String, out: &mut Vec<Mismatch>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                let len = path.len();
                push_key(path, k);
                match a.get(k) {
                    None => out.push(Mismatch {
                        path: path.clone(),
                        message: "key is missing from the actual object".into(),
                    }),
                    Some(av) => walk(ev, av, path, out),
                }
                path.truncate(len);
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                out.push(Mismatch {
                    path: path.clone(),
                    message: format!(
                        "list length mismatch: expected {} items, actual has {}",
                        e.len(),
                        a.len()
                    ),
                });
                return;
            }
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(ev, av, path, out);
                path.truncate(len);
            }
        }
        (Value::Number(x), Value::Number(y)) => {
            if !numbers_equal(x, y) {
                out.push(Mismatch {
                    path: path.clone(),
                    message: format!("value mismatch: expected {x}, actual {y}"),
                });
            }
        }
        (e, a) if std::mem::discriminant(e) == std::mem::discriminant(a) => {
            if e != a {
                out.push(Mismatch {
                    path: path.clone(),
                    message: format!("value mismatch: expected {}, actual {}", scalar(e), scalar(a)),
                });
            }
        }
        (e, a) => out.push(Mismatch {
            path: path.clone(),
            message: format!(
                "type mismatch: expected {} {}, actual {} {}",
                type_name(e),
                scalar_or_shape(e),
                type_name(a),
                scalar_or_shape(a)
            )
            .replace("  ", " ")
            .trim_end()
            .to_string(),
        }),
    }
}

fn scalar_or_shape(v: &Value) -> String {
    match v {
        Value::Array(_) | Value::Object(_) => String::new(),
        other => scalar(other),
    }
}

fn push_key(path: &mut String, key: &str) {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        path.push('.');
        path.push_str(key);
    } else {
        path.push_str(&format!("[{key:?}]"));
    }
}

/// The actual object cut down to the shape of the expected one: only keys the expected object
/// mentions are kept (lists of equal length are pruned element-wise, other lists kept whole).
/// Diffing against this instead of the full object keeps failure output about the fields the test
/// cares about, not server-populated noise.
pub fn prune_to_expected(expected: &Value, actual: &Value) -> Value {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            let mut out = Map::new();
            for (k, ev) in e {
                if let Some(av) = a.get(k) {
                    out.insert(k.clone(), prune_to_expected(ev, av));
                }
            }
            Value::Object(out)
        }
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => Value::Array(
            e.iter()
                .zip(a)
                .map(|(ev, av)| prune_to_expected(ev, av))
                .collect(),
        ),
        (_, a) => a.clone(),
    }
}

/// YAML text of a value for diffs (falls back to JSON if YAML serialisation fails).
pub fn to_yaml(v: &Value) -> String {
    serde_saphyr::to_string(v).unwrap_or_else(|_| serde_json::to_string_pretty(v).unwrap_or_default())
}

/// A unified diff (expected → actual) of the expected object against the pruned actual one.
pub fn unified_diff(expected: &Value, actual: &Value) -> String {
    let exp = to_yaml(expected);
    let act = to_yaml(&prune_to_expected(expected, actual));
    similar::TextDiff::from_lines(&exp, &act)
        .unified_diff()
        .context_radius(3)
        .header("expected", "actual")
        .to_string()
}

/// Of several candidate objects, the one closest to `expected` (fewest mismatching fields; the
/// first on ties), with its mismatches.
pub fn closest<'a>(expected: &Value, candidates: &'a [Value]) -> Option<(&'a Value, Vec<Mismatch>)> {
    candidates
        .iter()
        .map(|c| (c, mismatches(expected, c)))
        .min_by_key(|(_, m)| m.len())
}

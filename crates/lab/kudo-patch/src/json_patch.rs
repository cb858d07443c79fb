//! RFC 6902 JSON Patch with kube-apiserver's behaviour.
//!
//! kube-apiserver applies `application/json-patch+json` with the Go `evanphx/json-patch`
//! library, which differs from a strict RFC reading in ways clients rely on:
//!
//! * `test` of a **missing** path succeeds when the expected value is `null` (or absent);
//!   kube-runtime's `finalizer()` sends `test /metadata/finalizers null` followed by `add`
//!   on objects that have no finalizers yet;
//! * negative array indices count from the end;
//! * a missing `value` member reads as `null`.
//!
//! Errors: a document that is not an array of operation objects is a
//! [`PatchError::BadRequest`] (400); an operation that cannot be applied is a
//! [`PatchError::Invalid`] (422) carrying the library's message, e.g.
//! `add operation does not apply: doc is missing path: "/spec/volumes/-": missing value`.

use serde_json::{Map, Value};

use crate::PatchError;

/// kube-apiserver refuses JSON patches with more operations than this (HTTP 413); the
/// API server checks it with [`operation_count`] before calling [`apply`].
pub const MAX_OPERATIONS: usize = 10_000;

/// Number of operations in a JSON Patch document (0 when it is not an array), so that the
/// server can enforce [`MAX_OPERATIONS`] as kube-apiserver does.
pub fn operation_count(patch: &Value) -> usize {
    patch.as_array().map_or(0, Vec::len)
}

/// Applies a JSON Patch document to `doc` and returns the patched copy; `doc` is untouched
/// when an operation fails (patches are atomic).
pub fn apply(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
    let ops = patch.as_array().ok_or_else(|| {
        PatchError::BadRequest(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
            json_kind(patch)
        ))
    })?;
    let mut out = doc.clone();
    for op in ops {
        let op = op.as_object().ok_or_else(|| {
            PatchError::BadRequest(format!(
                "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
                json_kind(op)
            ))
        })?;
        apply_op(&mut out, op)?;
    }
    Ok(out)
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn invalid(msg: String) -> PatchError {
    PatchError::Invalid(msg)
}

fn str_member<'a>(op: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    op.get(name).and_then(Value::as_str)
}

fn apply_op(doc: &mut Value, op: &Map<String, Value>) -> Result<(), PatchError> {
    let kind = str_member(op, "op").unwrap_or("unknown");
    let value = op.get("value").cloned().unwrap_or(Value::Null);
    let path = str_member(op, "path");
    match kind {
        "add" => {
            let path = path.ok_or_else(|| invalid("add operation missing path".into()))?;
            add(doc, path, value).map_err(|e| match e {
                OpFail::Missing => invalid(format!(
                    "add operation does not apply: doc is missing path: {path:?}: missing value"
                )),
                OpFail::Index(i) => invalid(index_msg(i)),
            })
        }
        "remove" => {
            let path = path.ok_or_else(|| invalid("remove operation missing path".into()))?;
            remove(doc, path).map(|_| ())
        }
        "replace" => {
            let path = path.ok_or_else(|| invalid("replace operation missing path".into()))?;
            replace(doc, path, value)
        }
        "move" => {
            let path = path.ok_or_else(|| invalid("move operation missing path".into()))?;
            let from = str_member(op, "from").ok_or_else(|| invalid("move operation missing from".into()))?;
            if path != from && path.starts_with(&format!("{from}/")) {
                return Err(invalid(format!(
                    "move operation does not apply: from path {from} is a prefix of destination {path}"
                )));
            }
            let moved = get(doc, from).cloned().ok_or_else(|| {
                invalid(format!(
                    "move operation does not apply: doc is missing from path: {from}: missing value"
                ))
            })?;
            remove(doc, from).map_err(|_| {
                invalid(format!(
                    "move operation does not apply: doc is missing from path: {from}: missing value"
                ))
            })?;
            add(doc, path, moved).map_err(|e| match e {
                OpFail::Missing => invalid(format!(
                    "move operation does not apply: doc is missing destination path: {path}: missing value"
                )),
                OpFail::Index(i) => invalid(index_msg(i)),
            })
        }
        "copy" => {
            let path = path.ok_or_else(|| invalid("copy operation missing path".into()))?;
            let from = str_member(op, "from").ok_or_else(|| invalid("copy operation missing from".into()))?;
            let copied = get(doc, from).cloned().ok_or_else(|| {
                invalid(format!(
                    "copy operation does not apply: doc is missing from path: {from}: missing value"
                ))
            })?;
            add(doc, path, copied).map_err(|e| match e {
                OpFail::Missing => invalid(format!(
                    "copy operation does not apply: doc is missing destination path: {path}: missing value"
                )),
                OpFail::Index(i) => invalid(index_msg(i)),
            })
        }
        "test" => {
            let path = path.ok_or_else(|| invalid("test operation missing path".into()))?;
            test(doc, path, &value)
        }
        other => Err(invalid(format!("Unexpected kind: {other}"))),
    }
}

fn index_msg(i: i64) -> String {
    format!("Unable to access invalid index: {i}: invalid index referenced")
}

enum OpFail {
    Missing,
    Index(i64),
}

/// Splits a JSON pointer into unescaped reference tokens; `None` for a pointer that does not
/// start with `/` (only the empty pointer, the whole document, is allowed otherwise).
fn tokens(path: &str) -> Option<Vec<String>> {
    if path.is_empty() {
        return Some(Vec::new());
    }
    let rest = path.strip_prefix('/')?;
    Some(
        rest.split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect(),
    )
}

/// Resolves an array index token; negative indices count from the end as in evanphx.
fn array_index(token: &str, len: usize, allow_end: bool) -> Result<usize, OpFail> {
    if token == "-" && allow_end {
        return Ok(len);
    }
    let i: i64 = token.parse().map_err(|_| OpFail::Missing)?;
    let max = if allow_end { len as i64 } else { len as i64 - 1 };
    let resolved = if i < 0 { i + len as i64 } else { i };
    if resolved < 0 || resolved > max {
        return Err(OpFail::Index(i));
    }
    Ok(resolved as usize)
}

fn get<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = doc;
    for t in tokens(path)? {
        cur = match cur {
            Value::Object(m) => m.get(&t)?,
            Value::Array(a) => a.get(array_index(&t, a.len(), false).ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// The container (object or array) holding the last token of `path`, plus that token.
fn parent_mut<'a>(doc: &'a mut Value, path: &str) -> Option<(&'a mut Value, String)> {
    let mut toks = tokens(path)?;
    let last = toks.pop()?;
    let mut cur = doc;
    for t in toks {
        cur = match cur {
            Value::Object(m) => m.get_mut(&t)?,
            Value::Array(a) => {
                let len = a.len();
                a.get_mut(array_index(&t, len, false).ok()?)?
            }
            _ => return None,
        };
    }
    match cur {
        Value::Object(_) | Value::Array(_) => Some((cur, last)),
        _ => None,
    }
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), OpFail> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, key) = parent_mut(doc, path).ok_or(OpFail::Missing)?;
    match parent {
        Value::Object(m) => {
            m.insert(key, value);
            Ok(())
        }
        Value::Array(a) => {
            let i = array_index(&key, a.len(), true)?;
            a.insert(i, value);
            Ok(())
        }
        _ => Err(OpFail::Missing),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, PatchError> {
    let missing = || {
        invalid(format!(
            "remove operation does not apply: doc is missing path: {path:?}: missing value"
        ))
    };
    if path.is_empty() {
        return Err(missing());
    }
    let (parent, key) = parent_mut(doc, path).ok_or_else(missing)?;
    match parent {
        Value::Object(m) => m
            .shift_remove(&key)
            .ok_or_else(|| invalid(format!("Unable to remove nonexistent key: {key}: missing value"))),
        Value::Array(a) => {
            let i = array_index(&key, a.len(), false).map_err(|e| match e {
                OpFail::Index(i) => invalid(format!(
                    "Unable to remove invalid index: {i}: invalid index referenced"
                )),
                OpFail::Missing => missing(),
            })?;
            Ok(a.remove(i))
        }
        _ => Err(missing()),
    }
}

fn replace(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, key) = parent_mut(doc, path).ok_or_else(|| {
        invalid(format!(
            "replace operation does not apply: doc is missing path: {path}: missing value"
        ))
    })?;
    let missing_key = || {
        invalid(format!(
            "replace operation does not apply: doc is missing key: {path}: missing value"
        ))
    };
    match parent {
        Value::Object(m) => match m.get_mut(&key) {
            Some(slot) => {
                *slot = value;
                Ok(())
            }
            None => Err(missing_key()),
        },
        Value::Array(a) => {
            let i = array_index(&key, a.len(), false).map_err(|e| match e {
                OpFail::Index(i) => invalid(index_msg(i)),
                OpFail::Missing => missing_key(),
            })?;
            a[i] = value;
            Ok(())
        }
        _ => Err(missing_key()),
    }
}

fn test(doc: &Value, path: &str, expected: &Value) -> Result<(), PatchError> {
    let failed = || invalid(format!("testing value {path} failed: test failed"));
    if path.is_empty() {
        return if json_equal(doc, expected) {
            Ok(())
        } else {
            Err(failed())
        };
    }
    // The container must exist; a missing key inside it compares as null.
    let mut toks = tokens(path).ok_or_else(|| {
        invalid(format!(
            "test operation does not apply: is missing path: {path}: missing value"
        ))
    })?;
    let last = toks.pop().unwrap_or_default();
    let mut parent = doc;
    for t in &toks {
        let next = match parent {
            Value::Object(m) => m.get(t),
            Value::Array(a) => array_index(t, a.len(), false).ok().and_then(|i| a.get(i)),
            _ => None,
        };
        parent = next.ok_or_else(|| {
            invalid(format!(
                "test operation does not apply: is missing path: {path}: missing value"
            ))
        })?;
    }
    let actual = match parent {
        Value::Object(m) => m.get(&last),
        Value::Array(a) => match array_index(&last, a.len(), false) {
            Ok(i) => a.get(i),
            Err(_) => None,
        },
        _ => {
            return Err(invalid(format!(
                "test operation does not apply: is missing path: {path}: missing value"
            )));
        }
    };
    match actual {
        None | Some(Value::Null) if expected.is_null() => Ok(()),
        None => Err(failed()),
        Some(v) if json_equal(v, expected) => Ok(()),
        Some(_) => Err(failed()),
    }
}

/// JSON equality where numbers compare by value (`1` equals `1.0`), as Go's decoding into
/// `float64` makes them compare in the reference implementation.
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(i), Some(j)) = (x.as_i64(), y.as_i64()) {
                i == j
            } else {
                x.as_f64() == y.as_f64()
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finalizer_test_null_then_add() {
        let doc = json!({"metadata": {"name": "x"}});
        let patch = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["kudo.dev/f"]}
        ]);
        let out = apply(&doc, &patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["kudo.dev/f"]));
    }

    #[test]
    fn test_null_against_present_value_fails() {
        let doc = json!({"metadata": {"finalizers": ["a"]}});
        let patch = json!([{"op": "test", "path": "/metadata/finalizers", "value": null}]);
        let err = apply(&doc, &patch).unwrap_err();
        assert_eq!(err.status_code(), 422);
        assert_eq!(
            err.to_string(),
            "testing value /metadata/finalizers failed: test failed"
        );
    }

    #[test]
    fn missing_parent_on_add_is_422_with_library_wording() {
        let doc = json!({"spec": {}});
        let patch = json!([{"op": "add", "path": "/spec/volumes/-", "value": 1}]);
        let err = apply(&doc, &patch).unwrap_err();
        assert_eq!(
            err,
            PatchError::Invalid(
                "add operation does not apply: doc is missing path: \"/spec/volumes/-\": missing value"
                    .into()
            )
        );
    }

    #[test]
    fn not_an_array_is_bad_request() {
        let err = apply(&json!({}), &json!({"op": "add"})).unwrap_err();
        assert_eq!(err.status_code(), 400);
    }

    #[test]
    fn negative_index_counts_from_end() {
        let out = apply(
            &json!({"a": [1, 2, 3]}),
            &json!([{"op": "remove", "path": "/a/-1"}]),
        )
        .unwrap();
        assert_eq!(out, json!({"a": [1, 2]}));
    }

    #[test]
    fn failed_op_leaves_no_partial_result() {
        let doc = json!({"a": 1});
        let patch = json!([
            {"op": "add", "path": "/b", "value": 2},
            {"op": "remove", "path": "/zzz"}
        ]);
        assert!(apply(&doc, &patch).is_err());
        assert_eq!(doc, json!({"a": 1}));
    }
}

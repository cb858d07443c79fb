//! RFC 7386 JSON merge patch (`application/merge-patch+json`).
//!
//! This is what kubectl uses for custom resources (they have no strategic-merge metadata)
//! and what kube-rs `Patch::Merge` sends: objects merge recursively, `null` deletes a key,
//! and anything else — arrays included — replaces the target wholesale.

use serde_json::{Map, Value};

/// Applies a merge patch to `doc`. Never fails: every JSON value is a valid merge patch.
pub fn apply(doc: &Value, patch: &Value) -> Value {
    match patch {
        Value::Object(_) => apply_owned(doc.clone(), patch),
        other => other.clone(),
    }
}

/// [`apply`] to a document the caller gives up: it is patched in place, so each patched level
/// is not copied again on the way down (an API server patching a large object's status copied
/// the object three times).
pub fn apply_owned(doc: Value, patch: &Value) -> Value {
    match patch {
        Value::Object(p) => {
            let mut out = match doc {
                Value::Object(d) => d,
                _ => Map::new(),
            };
            for (k, v) in p {
                if v.is_null() {
                    out.shift_remove(k);
                } else {
                    // Taken out and put back under the same key, which keeps its position.
                    let cur = out.get_mut(k).map(std::mem::take).unwrap_or(Value::Null);
                    let merged = apply_owned(cur, v);
                    out.insert(k.clone(), merged);
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_null_in_new_subtree_is_dropped() {
        assert_eq!(
            apply(&json!({}), &json!({"a": {"b": null, "c": 1}})),
            json!({"a": {"c": 1}})
        );
    }
}

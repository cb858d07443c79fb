//! Strategic merge patch (`application/strategic-merge-patch+json`) for built-in kinds.
//!
//! Behaviour follows the Kubernetes documentation of strategic merge patch and its
//! directives ("Update API Objects in Place Using kubectl patch", the api-machinery
//! strategic-merge-patch and preserve-order design notes):
//!
//! * objects merge recursively and `null` deletes a key;
//! * lists merge only when the field's patch strategy is `merge` (see
//!   [`crate::schema`]): lists of objects merge item by item on the merge key, lists of
//!   scalars (finalizers) merge as a set; every other list is replaced;
//! * `$patch: replace` (in an object, or as a list item) replaces instead of merging,
//!   `$patch: delete` deletes an object or, as a list item carrying the merge key, that item;
//!   `$patch: merge` is the default;
//! * `$retainKeys: [..]` drops every key of the original object not listed;
//! * `$deleteFromPrimitiveList/<field>: [..]` removes values from a scalar list;
//! * `$setElementOrder/<field>: [..]` fixes the order of the merged list; items only the
//!   server has keep their relative position.
//!
//! Ordering without `$setElementOrder`: patch items take the order of the patch, items only
//! on the server keep theirs, and the two are interleaved by their position on the server.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::schema::{self, Node, Schema};
use crate::{Gvk, PatchError};

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

/// Applies a strategic merge patch to `doc` using the merge metadata of `gvk`.
///
/// Kinds outside the built-in tables are patched with every list replaced (they have no
/// merge metadata); kube-apiserver refuses strategic merge patch for custom resources
/// altogether (HTTP 415) — use [`crate::schema::is_builtin`] to decide that before calling.
pub fn apply(doc: &Value, patch: &Value, gvk: &Gvk) -> Result<Value, PatchError> {
    if schema::is_builtin(gvk) {
        apply_with_schema(doc, patch, &Schema::cached(gvk))
    } else {
        apply_with_schema(doc, patch, &Schema::builtin(gvk))
    }
}

/// [`apply`] with an explicit schema.
pub fn apply_with_schema(doc: &Value, patch: &Value, schema: &Schema) -> Result<Value, PatchError> {
    let patch = patch.as_object().ok_or_else(|| {
        PatchError::BadRequest(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            kind_name(patch)
        ))
    })?;
    let original = doc.as_object().cloned().unwrap_or_default();
    merge_map(original, patch, &schema.root).map(Value::Object)
}

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Null => "null",
        Value::Object(_) => "object",
    }
}

fn is_directive_key(k: &str) -> bool {
    k == DIRECTIVE
        || k == RETAIN_KEYS
        || k.starts_with(DELETE_FROM_PRIMITIVE)
        || k.starts_with(SET_ELEMENT_ORDER)
}

/// Merges `patch` into `original` (owned, so unchanged subtrees are moved, not copied).
fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    node: &Node,
) -> Result<Map<String, Value>, PatchError> {
    if let Some(d) = patch.get(DIRECTIVE) {
        match d.as_str() {
            Some("replace") => {
                // The patch becomes the value; its own nulls and nested directives are still
                // interpreted (against nothing), as the typed server would store it.
                let rest: Map<String, Value> = patch
                    .iter()
                    .filter(|(k, _)| *k != DIRECTIVE)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                return merge_map(Map::new(), &rest, node);
            }
            Some("delete") => return Ok(Map::new()),
            Some("merge") => {}
            _ => {
                return Err(PatchError::BadRequest(format!(
                    "unknown patch type: {d} in map: {}",
                    Value::Object(patch.clone())
                )));
            }
        }
    }

    if let Some(rk) = patch.get(RETAIN_KEYS) {
        let keys: Vec<&str> = rk
            .as_array()
            .and_then(|a| a.iter().map(Value::as_str).collect::<Option<Vec<_>>>())
            .ok_or_else(|| PatchError::BadRequest("invalid patch format of retainKeys".into()))?;
        for (k, v) in patch {
            if !k.starts_with('$') && !v.is_null() && !keys.contains(&k.as_str()) {
                return Err(PatchError::Invalid(
                    "patch content doesn't match retainKeys list".into(),
                ));
            }
        }
        original.retain(|k, _| keys.contains(&k.as_str()));
    }

    // Deletions from primitive lists first, so that a patch may both delete and add values.
    for (key, values) in patch {
        let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE) else {
            continue;
        };
        let values = values
            .as_array()
            .ok_or_else(|| PatchError::BadRequest("invalid patch format of primitive list".into()))?;
        if let Some(Value::Array(list)) = original.get_mut(field) {
            list.retain(|item| !values.contains(item));
        }
    }

    // Fields whose list was merged together with its `$setElementOrder` directive.
    let mut ordered_fields: Vec<&str> = Vec::new();
    for (key, order) in patch {
        let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER) else {
            continue;
        };
        let order = order
            .as_array()
            .ok_or_else(|| PatchError::BadRequest("invalid patch format of setElementOrder list".into()))?;
        ordered_fields.push(field);
        let child = node.child(field);
        let merge_key = child.smp_list().and_then(|s| s.merge_key);
        let orig_list = match original.get_mut(field) {
            Some(Value::Array(a)) => Some(std::mem::take(a)),
            _ => None,
        };
        let server_order = identities(orig_list.as_deref().unwrap_or(&[]), merge_key);
        let merged = match (orig_list, patch.get(field)) {
            (_, Some(Value::Null)) => {
                original.shift_remove(field);
                continue;
            }
            (Some(o), Some(Value::Array(p))) => merge_list(o, p, child)?,
            (None, Some(Value::Array(p))) => merge_list(Vec::new(), p, child)?,
            (_, Some(other)) => {
                original.insert(field.to_string(), fresh(other, child)?);
                continue;
            }
            (Some(o), None) => o,
            (None, None) => continue,
        };
        let (in_order, server_only): (Vec<Value>, Vec<Value>) = merged
            .into_iter()
            .partition(|item| position(order, item, merge_key).is_some());
        let ordered = normalize_order(in_order, server_only, order, &server_order, merge_key);
        original.insert(field.to_string(), Value::Array(ordered));
    }

    for (k, v) in patch {
        if is_directive_key(k) || ordered_fields.contains(&k.as_str()) {
            continue;
        }
        let child = node.child(k);
        if v.is_null() {
            original.shift_remove(k);
            continue;
        }
        let merged = match (original.get_mut(k), v) {
            (Some(Value::Object(o)), Value::Object(p)) => {
                Value::Object(merge_map(std::mem::take(o), p, child)?)
            }
            (Some(Value::Array(o)), Value::Array(p)) => {
                Value::Array(merge_list(std::mem::take(o), p, child)?)
            }
            _ => fresh(v, child)?,
        };
        original.insert(k.clone(), merged);
    }
    Ok(original)
}

/// A patch value for a field the original does not have (or has with another type):
/// directives are still interpreted and nulls dropped, as the server does.
fn fresh(v: &Value, node: &Node) -> Result<Value, PatchError> {
    Ok(match v {
        Value::Object(p) => Value::Object(merge_map(Map::new(), p, node)?),
        Value::Array(p) => Value::Array(merge_list(Vec::new(), p, node)?),
        other => other.clone(),
    })
}

/// What identifies the items of a list for ordering: `{mergeKey: value}` stubs for lists of
/// objects, the values themselves for scalars.
fn identities(list: &[Value], merge_key: Option<&str>) -> Vec<Value> {
    match merge_key {
        Some(k) => list
            .iter()
            .map(|item| {
                let mut m = Map::new();
                if let Some(v) = item.get(k) {
                    m.insert(k.to_string(), v.clone());
                }
                Value::Object(m)
            })
            .collect(),
        None => list.iter().filter(|v| !v.is_object()).cloned().collect(),
    }
}

fn merge_list(original: Vec<Value>, patch: &[Value], node: &Node) -> Result<Vec<Value>, PatchError> {
    let strategy = node.smp_list();
    let merges = strategy.is_some_and(|s| s.smp_merges());
    if !merges {
        return Ok(patch.to_vec());
    }
    if original.is_empty() && patch.is_empty() {
        return Ok(Vec::new());
    }
    if original.iter().chain(patch).any(Value::is_array) {
        return Err(PatchError::Invalid("lists of lists are not supported".into()));
    }
    let merge_key = strategy.and_then(|s| s.merge_key);
    let item_node = node.item();
    let maps = original.iter().chain(patch).any(Value::is_object);
    if !maps {
        // Scalars: union, keeping the first occurrence.
        let server_order = original.clone();
        let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
        for v in original.into_iter().chain(patch.iter().cloned()) {
            if !merged.contains(&v) {
                merged.push(v);
            }
        }
        let (in_patch, server_only): (Vec<Value>, Vec<Value>) =
            merged.into_iter().partition(|v| patch.contains(v));
        return Ok(normalize_order(in_patch, server_only, patch, &server_order, None));
    }
    let Some(key) = merge_key else {
        return Err(PatchError::Internal(
            "cannot merge lists without merge key".to_string(),
        ));
    };

    let mut deletes: Vec<&Value> = Vec::new();
    let mut replace = false;
    // Patch items in patch order; `$patch: merge` items lose their directive.
    let mut items: Vec<Cow<'_, Map<String, Value>>> = Vec::new();
    for p in patch {
        let Some(obj) = p.as_object() else {
            return Err(PatchError::Internal(format!(
                "expected a map, but received a {} in list item {p}",
                kind_name(p)
            )));
        };
        match obj.get(DIRECTIVE) {
            None => items.push(Cow::Borrowed(obj)),
            Some(d) => match d.as_str() {
                Some("replace") => replace = true,
                Some("delete") => {
                    let k = obj.get(key).ok_or_else(|| {
                        PatchError::Internal(format!("delete patch type with no merge key defined: {p}"))
                    })?;
                    deletes.push(k);
                }
                Some("merge") => {
                    let mut o = obj.clone();
                    o.shift_remove(DIRECTIVE);
                    items.push(Cow::Owned(o));
                }
                _ => {
                    return Err(PatchError::BadRequest(format!(
                        "unknown patch type: {d} in map: {p}"
                    )));
                }
            },
        }
    }
    if replace {
        return items
            .iter()
            .map(|i| merge_map(Map::new(), i, item_node).map(Value::Object))
            .collect();
    }

    let server_order = identities(&original, Some(key));
    let mut result: Vec<Value> = original
        .into_iter()
        .filter(|o| !o.get(key).is_some_and(|k| deletes.contains(&k)))
        .collect();
    for item in &items {
        let k = item.get(key).ok_or_else(|| {
            PatchError::Internal(format!(
                "map: {} does not contain declared merge key: {key}",
                Value::Object(item.clone().into_owned())
            ))
        })?;
        match result.iter().position(|o| o.get(key) == Some(k)) {
            Some(pos) => {
                let base = match &mut result[pos] {
                    Value::Object(m) => std::mem::take(m),
                    _ => Map::new(),
                };
                result[pos] = Value::Object(merge_map(base, item, item_node)?);
            }
            None => result.push(Value::Object(merge_map(Map::new(), item, item_node)?)),
        }
    }
    let patch_order = identities_of_maps(&items, key);
    let (in_patch, server_only): (Vec<Value>, Vec<Value>) = result
        .into_iter()
        .partition(|v| position(&patch_order, v, Some(key)).is_some());
    Ok(normalize_order(
        in_patch,
        server_only,
        &patch_order,
        &server_order,
        Some(key),
    ))
}

fn identities_of_maps(items: &[Cow<'_, Map<String, Value>>], key: &str) -> Vec<Value> {
    items
        .iter()
        .map(|item| {
            let mut m = Map::new();
            if let Some(v) = item.get(key) {
                m.insert(key.to_string(), v.clone());
            }
            Value::Object(m)
        })
        .collect()
}

/// Position of `item` in `list`, identifying list-of-object items by their merge key and
/// scalars by value.
fn position(list: &[Value], item: &Value, merge_key: Option<&str>) -> Option<usize> {
    match merge_key {
        Some(k) => {
            let want = item.get(k)?;
            list.iter().position(|x| x.get(k) == Some(want))
        }
        None => list.iter().position(|x| x == item),
    }
}

/// Orders the merged list: patch items by `patch_order`, server-only items by
/// `server_order`, then interleaves the two by their position on the server (a server-only
/// item goes before a patch item only when the server had it before that item).
fn normalize_order(
    mut patch_items: Vec<Value>,
    mut server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: Option<&str>,
) -> Vec<Value> {
    patch_items.sort_by_key(|v| position(patch_order, v, merge_key).unwrap_or(usize::MAX));
    server_only.sort_by_key(|v| position(server_order, v, merge_key).unwrap_or(usize::MAX));
    let mut out = Vec::with_capacity(patch_items.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = patch_items.into_iter().peekable();
    loop {
        match (left.peek(), right.peek()) {
            (Some(l), Some(r)) => {
                let li = position(server_order, l, merge_key);
                let ri = position(server_order, r, merge_key);
                let take_left = matches!((li, ri), (Some(a), Some(b)) if a < b);
                if take_left {
                    out.extend(left.next());
                } else {
                    out.extend(right.next());
                }
            }
            (Some(_), None) => out.extend(left.next()),
            (None, Some(_)) => out.extend(right.next()),
            (None, None) => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deploy() -> Gvk {
        Gvk::new("apps", "v1", "Deployment")
    }

    #[test]
    fn finalizers_merge_as_set() {
        let doc = json!({"metadata": {"finalizers": ["a", "b"]}});
        let out = apply(
            &doc,
            &json!({"metadata": {"finalizers": ["c", "a"]}}),
            &Gvk::new("", "v1", "ConfigMap"),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["c", "a", "b"]));
    }

    #[test]
    fn delete_from_primitive_list() {
        let doc = json!({"metadata": {"finalizers": ["a", "b", "c"]}});
        let out = apply(
            &doc,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}),
            &Gvk::new("", "v1", "ConfigMap"),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "c"]));
    }

    #[test]
    fn unlisted_list_is_replaced() {
        let doc = json!({"spec": {"template": {"spec": {"tolerations": [{"key": "a"}]}}}});
        let out = apply(
            &doc,
            &json!({"spec": {"template": {"spec": {"tolerations": [{"key": "b"}]}}}}),
            &deploy(),
        )
        .unwrap();
        assert_eq!(
            out["spec"]["template"]["spec"]["tolerations"],
            json!([{"key": "b"}])
        );
    }

    #[test]
    fn missing_merge_key_is_an_error() {
        let doc = json!({"spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}});
        let err = apply(
            &doc,
            &json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}),
            &deploy(),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("does not contain declared merge key: name")
        );
    }

    #[test]
    fn list_replace_directive() {
        let doc = json!({"spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}}});
        let out = apply(
            &doc,
            &json!({"spec": {"template": {"spec": {"containers": [{"$patch": "replace"}, {"name": "c"}]}}}}),
            &deploy(),
        )
        .unwrap();
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"],
            json!([{"name": "c"}])
        );
    }

    #[test]
    fn map_replace_and_delete_directives() {
        let doc = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"x": "1"}});
        let out = apply(
            &doc,
            &json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}, "data": {"$patch": "delete"}}),
            &Gvk::new("", "v1", "ConfigMap"),
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"c": "3"}));
        assert_eq!(out["data"], json!({}));
    }
}

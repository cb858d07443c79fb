//! Small helpers over `serde_json::Value` objects.

use serde_json::{Map, Value};

/// RFC 3339 UTC with second precision, the format of Kubernetes `metav1.Time`.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `metadata` as a mutable map, created if absent or not an object.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let m = obj.as_object_mut().expect("object ensured above");
    let md = m.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if !md.is_object() {
        *md = Value::Object(Map::new());
    }
    md.as_object_mut().expect("object ensured above")
}

/// A string field of `metadata`.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(|v| v.as_str())
        .unwrap_or("")
}

/// `metadata.name`.
pub fn name(obj: &Value) -> &str {
    meta_str(obj, "name")
}

/// `metadata.namespace`.
pub fn namespace(obj: &Value) -> &str {
    meta_str(obj, "namespace")
}

/// `metadata.uid`.
pub fn uid(obj: &Value) -> &str {
    meta_str(obj, "uid")
}

/// `metadata.finalizers` as strings.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// Replace `metadata.finalizers` (removing the key when empty, as the real server does).
pub fn set_finalizers(obj: &mut Value, fins: &[String]) {
    let md = meta_mut(obj);
    if fins.is_empty() {
        md.remove("finalizers");
    } else {
        md.insert("finalizers".into(), Value::from(fins.to_vec()));
    }
}

/// Whether deletion has started.
pub fn is_deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// `metadata.labels` as a map (empty when absent).
pub fn labels(obj: &Value) -> Map<String, Value> {
    obj.pointer("/metadata/labels")
        .and_then(|v| v.as_object())
        .cloned()
        .unwrap_or_default()
}

/// Owner uids from `metadata.ownerReferences`.
pub fn owner_refs(obj: &Value) -> &[Value] {
    obj.get("metadata")
        .and_then(|m| m.get("ownerReferences"))
        .and_then(|v| v.as_array())
        .map_or(&[], Vec::as_slice)
}

/// Resolve a simple JSONPath such as `.spec.replicas` or `.status.conditions[0].type`.
pub fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let p = path.trim().trim_start_matches('{').trim_end_matches('}');
    let p = p.strip_prefix('$').unwrap_or(p);
    let mut cur = obj;
    for seg in p.split('.').filter(|s| !s.is_empty()) {
        let (field, idx) = match seg.find('[') {
            Some(i) => (&seg[..i], Some(&seg[i..])),
            None => (seg, None),
        };
        if !field.is_empty() {
            cur = cur.get(field)?;
        }
        if let Some(mut rest) = idx {
            while let Some(stripped) = rest.strip_prefix('[') {
                let end = stripped.find(']')?;
                let n: usize = stripped[..end].parse().ok()?;
                cur = cur.get(n)?;
                rest = &stripped[end + 1..];
            }
        }
    }
    Some(cur)
}

/// Whether two versions differ outside `metadata`, `status`, `apiVersion` and `kind`: what a
/// `generation` bump is about. Compared in place (copying both objects to compare them was a
/// thirtieth of the embedded server's CPU at 10,000 Instances).
pub fn spec_differs(a: &Value, b: &Value) -> bool {
    const NOT_SPEC: [&str; 4] = ["metadata", "status", "apiVersion", "kind"];
    let empty = serde_json::Map::new();
    let (a, b) = (a.as_object().unwrap_or(&empty), b.as_object().unwrap_or(&empty));
    let spec_keys =
        |m: &serde_json::Map<String, Value>| m.keys().filter(|k| !NOT_SPEC.contains(&k.as_str())).count();
    spec_keys(a) != spec_keys(b)
        || a.iter()
            .filter(|(k, _)| !NOT_SPEC.contains(&k.as_str()))
            .any(|(k, v)| b.get(k) != Some(v))
}

/// Go's `duration.HumanDuration`, used for the AGE column.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let s = secs.max(0);
    if s < 120 {
        return format!("{s}s");
    }
    let m = s / 60;
    if m < 10 {
        let rs = s % 60;
        return if rs == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{rs}s")
        };
    }
    if m < 180 {
        return format!("{m}m");
    }
    let h = s / 3600;
    if h < 8 {
        let rm = (s % 3600) / 60;
        return if rm == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{rm}m")
        };
    }
    if h < 48 {
        return format!("{h}h");
    }
    if h < 24 * 8 {
        let rh = h % 24;
        return if rh == 0 {
            format!("{}d", h / 24)
        } else {
            format!("{}d{rh}h", h / 24)
        };
    }
    if h < 24 * 365 * 2 {
        return format!("{}d", h / 24);
    }
    if h < 24 * 365 * 8 {
        let dy = (h / 24) % 365;
        return if dy == 0 {
            format!("{}y", h / 24 / 365)
        } else {
            format!("{}y{dy}d", h / 24 / 365)
        };
    }
    format!("{}y", h / 24 / 365)
}

/// Seconds since an RFC 3339 timestamp (0 when unparsable).
pub fn age_secs(ts: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(ts)
        .map(|t| (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::spec_differs;
    use serde_json::json;

    #[test]
    fn spec_differs_ignores_metadata_status_and_type_and_key_order() {
        let a = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a"}, "spec": {"r": 1}, "data": {"k": "v"}});
        let cases = [
            (
                json!({"apiVersion": "v2", "kind": "Y", "metadata": {"name": "b"}, "status": {"s": 1}, "spec": {"r": 1}, "data": {"k": "v"}}),
                false,
            ),
            (json!({"data": {"k": "v"}, "spec": {"r": 1}}), false),
            (json!({"spec": {"r": 2}, "data": {"k": "v"}}), true),
            (json!({"spec": {"r": 1}}), true),
            (json!({"spec": {"r": 1}, "data": {"k": "v"}, "extra": 0}), true),
        ];
        for (b, want) in cases {
            assert_eq!(spec_differs(&a, &b), want, "{b}");
            assert_eq!(spec_differs(&b, &a), want, "{b} (reversed)");
        }
    }
}

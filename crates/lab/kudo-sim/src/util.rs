//! Small pure helpers shared by the simulated controllers: deterministic hashing and naming,
//! label selectors, time formatting, condition bookkeeping and pod predicates.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Value, json};

/// Characters Kubernetes uses for generated name suffixes (no vowels, so no accidental words).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// 64-bit FNV-1a: tiny, dependency-free and stable across runs and platforms.
pub fn fnv64(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            // Separator so ("ab","c") and ("a","bc") differ.
            h ^= 0xff;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        for b in part.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Encodes a hash as `len` characters of the Kubernetes suffix alphabet.
pub fn encode_hash(mut h: u64, len: usize) -> String {
    let base = SUFFIX_ALPHABET.len() as u64;
    let mut out = String::with_capacity(len);
    for _ in 0..len {
        out.push(SUFFIX_ALPHABET[(h % base) as usize] as char);
        h /= base;
        if h == 0 {
            h = fnv64(&[&out]);
        }
    }
    out
}

/// The 5-character "random-looking" suffix of a generated pod name, derived from a seed
/// (owner uid) and a counter so that retries after a stale cache produce the same name.
pub fn name_suffix(seed: &str, n: u32) -> String {
    encode_hash(fnv64(&[seed, &n.to_string()]), 5)
}

/// 64 lowercase hex characters derived from the parts (fake sha256 digests and container ids).
pub fn hex64(parts: &[&str]) -> String {
    let mut out = String::with_capacity(64);
    let mut h = fnv64(parts);
    for i in 0..4u64 {
        out.push_str(&format!("{h:016x}"));
        h = fnv64(&[&format!("{h:x}"), &i.to_string()]);
    }
    out
}

/// JSON with object keys sorted recursively, so hashes do not depend on field order.
pub fn canonical_json(v: &Value) -> String {
    fn canon(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let sorted: BTreeMap<&String, Value> = m.iter().map(|(k, v)| (k, canon(v))).collect();
                let mut out = Map::new();
                for (k, v) in sorted {
                    out.insert(k.clone(), v);
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(canon).collect()),
            other => other.clone(),
        }
    }
    canon(v).to_string()
}

/// Hash of a pod template, used for `pod-template-hash` and revision names. The given label
/// keys are removed first because the controllers add them to the template themselves.
pub fn template_hash(template: &Value, ignore_labels: &[&str]) -> String {
    let mut t = template.clone();
    if let Some(labels) = t.pointer_mut("/metadata/labels").and_then(Value::as_object_mut) {
        for k in ignore_labels {
            labels.remove(*k);
        }
    }
    encode_hash(fnv64(&[&canonical_json(&t)]), 10)
}

/// Whether the label set satisfies the selector (matchLabels AND matchExpressions).
/// A selector with no requirements matches everything, like `labels.Everything()`.
pub fn selector_matches(sel: &LabelSelector, labels: Option<&BTreeMap<String, String>>) -> bool {
    let empty = BTreeMap::new();
    let labels = labels.unwrap_or(&empty);
    if let Some(ml) = &sel.match_labels {
        for (k, v) in ml {
            if labels.get(k) != Some(v) {
                return false;
            }
        }
    }
    for e in sel.match_expressions.iter().flatten() {
        let values = e.values.as_deref().unwrap_or(&[]);
        let ok = match e.operator.as_str() {
            "In" => labels.get(&e.key).is_some_and(|v| values.contains(v)),
            "NotIn" => labels.get(&e.key).is_none_or(|v| !values.contains(v)),
            "Exists" => labels.contains_key(&e.key),
            "DoesNotExist" => !labels.contains_key(&e.key),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// Milliseconds since the Unix epoch of a Kubernetes timestamp.
pub fn time_ms(t: &Time) -> i64 {
    t.0.as_millisecond()
}

/// RFC 3339 with second precision, the wire format of `metav1.Time`.
pub fn fmt_time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Day count since 1970-01-01 of a proleptic Gregorian date.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Resolves an int-or-percent against a total, rounding up or down like
/// `intstr.GetScaledValueFromIntOrPercent`. Invalid strings count as 0.
pub fn scaled_int_or_percent(v: Option<&IntOrString>, default_pct: i32, total: i32, round_up: bool) -> i32 {
    match v {
        Some(IntOrString::Int(i)) => (*i).max(0),
        Some(IntOrString::String(s)) => {
            match s.strip_suffix('%').and_then(|p| p.trim().parse::<i64>().ok()) {
                Some(p) => percent(p, total, round_up),
                None => s.trim().parse::<i32>().unwrap_or(0).max(0),
            }
        }
        None => percent(i64::from(default_pct), total, round_up),
    }
}

fn percent(p: i64, total: i32, round_up: bool) -> i32 {
    let num = p.max(0) * i64::from(total.max(0));
    let v = if round_up { (num + 99) / 100 } else { num / 100 };
    i32::try_from(v).unwrap_or(i32::MAX)
}

/// uid of the controlling owner (`controller: true` ownerReference), if any.
pub fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

/// Kind of the controlling owner, if any.
pub fn controller_kind(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.kind.as_str())
}

/// ownerReference JSON making `owner` the controller of a child, as the real controllers set it.
pub fn owner_ref(api_version: &str, kind: &str, meta: &ObjectMeta) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "name": meta.name.clone().unwrap_or_default(),
        "uid": meta.uid.clone().unwrap_or_default(),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// Pod phase, "Pending" when the status is still empty.
pub fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// True while a pod counts towards its controller's replicas: not being deleted and not finished.
pub fn pod_active(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && !matches!(pod_phase(pod), "Succeeded" | "Failed")
}

/// Status of a pod condition type ("True"/"False"/"Unknown"), if present.
pub fn pod_condition<'a>(pod: &'a Pod, ty: &str) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty)
}

/// Running with the Ready condition true: what every controller counts as "ready".
pub fn pod_ready(pod: &Pod) -> bool {
    pod_phase(pod) == "Running" && pod_condition(pod, "Ready").is_some_and(|c| c.status == "True")
}

/// Ready for at least `min_ready_seconds`: the controllers' notion of "available".
pub fn pod_available(pod: &Pod, min_ready_seconds: i32, now_ms: i64) -> bool {
    if !pod_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    match pod_condition(pod, "Ready").and_then(|c| c.last_transition_time.as_ref()) {
        Some(t) => time_ms(t) + i64::from(min_ready_seconds) * 1000 <= now_ms,
        None => false,
    }
}

/// When a pod that is ready but not yet available will become available, so the loop can wake.
pub fn pod_available_at(pod: &Pod, min_ready_seconds: i32) -> Option<i64> {
    if min_ready_seconds <= 0 || !pod_ready(pod) {
        return None;
    }
    pod_condition(pod, "Ready")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| time_ms(t) + i64::from(min_ready_seconds) * 1000)
}

/// Creation time in ms (0 when absent), for "newest first" orderings.
pub fn created_ms(meta: &ObjectMeta) -> i64 {
    meta.creation_timestamp.as_ref().map(time_ms).unwrap_or(0)
}

/// Desired condition, before timestamps are filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cond {
    pub type_: &'static str,
    pub status: &'static str,
    pub reason: String,
    pub message: String,
}

impl Cond {
    pub fn new(type_: &'static str, status: &'static str, reason: &str, message: impl Into<String>) -> Self {
        Cond {
            type_,
            status,
            reason: reason.to_string(),
            message: message.into(),
        }
    }
}

/// Builds a conditions array from the desired set, keeping `lastTransitionTime` (and
/// `lastUpdateTime` when `update_time` is set) of conditions whose status did not change, so that
/// re-running a pass with nothing new produces an identical array and no write.
/// Conditions of other types already present are kept unless listed in `remove`.
pub fn merge_conditions(
    existing: Option<&Value>,
    desired: &[Cond],
    remove: &[&str],
    now: &str,
    update_time: bool,
) -> Value {
    let existing: Vec<Value> = existing.and_then(Value::as_array).cloned().unwrap_or_default();
    let mut out: Vec<Value> = Vec::new();
    for c in desired {
        let old = existing.iter().find(|e| e["type"] == c.type_);
        let same_status = old.is_some_and(|o| o["status"] == c.status);
        let same_all = same_status
            && old.is_some_and(|o| {
                o["reason"].as_str().unwrap_or("") == c.reason
                    && o["message"].as_str().unwrap_or("") == c.message
            });
        let transition = if same_status {
            old.and_then(|o| o.get("lastTransitionTime").cloned())
                .unwrap_or_else(|| json!(now))
        } else {
            json!(now)
        };
        let mut v = json!({
            "type": c.type_,
            "status": c.status,
            "lastTransitionTime": transition,
        });
        if !c.reason.is_empty() {
            v["reason"] = json!(c.reason);
        }
        if !c.message.is_empty() {
            v["message"] = json!(c.message);
        }
        if update_time {
            v["lastUpdateTime"] = if same_all {
                old.and_then(|o| o.get("lastUpdateTime").cloned())
                    .unwrap_or_else(|| json!(now))
            } else {
                json!(now)
            };
        }
        out.push(v);
    }
    for e in &existing {
        let ty = e["type"].as_str().unwrap_or("");
        if !desired.iter().any(|c| c.type_ == ty) && !remove.contains(&ty) {
            out.push(e.clone());
        }
    }
    Value::Array(out)
}

/// Whether a JSON value is what Go's `omitempty` drops (0, false, "", [], {}, null), so a field
/// we write as 0 and a server returns as absent count as equal.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// Equality where a missing object key equals an empty value.
pub fn equiv(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.iter()
                .all(|(k, v)| y.get(k).map_or(is_empty(v), |w| equiv(v, w)))
                && y.iter().all(|(k, w)| x.contains_key(k) || is_empty(w))
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(v, w)| equiv(v, w)),
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b || (is_empty(a) && is_empty(b)),
    }
}

/// Whether applying `patch` as a JSON merge patch to `current` would change anything, so
/// controllers only write when their view differs (and the event loop converges).
pub fn merge_patch_changes(current: &Value, patch: &Value) -> bool {
    match patch {
        Value::Object(pm) => {
            let cm = current.as_object();
            pm.iter().any(|(k, pv)| {
                let cv = cm.and_then(|m| m.get(k));
                match (cv, pv) {
                    (None, pv) => !is_empty(pv),
                    (Some(cv), Value::Null) => !cv.is_null(),
                    (Some(cv), pv @ Value::Object(_)) => !cv.is_object() || merge_patch_changes(cv, pv),
                    (Some(cv), pv) => !equiv(cv, pv),
                }
            })
        }
        other => !equiv(current, other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_are_stable_and_distinct() {
        let a = name_suffix("uid-1", 0);
        assert_eq!(a, name_suffix("uid-1", 0));
        assert_eq!(a.len(), 5);
        assert!(a.bytes().all(|b| SUFFIX_ALPHABET.contains(&b)));
        assert_ne!(a, name_suffix("uid-1", 1));
        assert_ne!(a, name_suffix("uid-2", 0));
    }

    #[test]
    fn template_hash_ignores_key_order_and_own_labels() {
        let a = json!({"metadata": {"labels": {"app": "x", "pod-template-hash": "zzz"}}, "spec": {"a": 1, "b": 2}});
        let b = json!({"spec": {"b": 2, "a": 1}, "metadata": {"labels": {"app": "x"}}});
        assert_eq!(
            template_hash(&a, &["pod-template-hash"]),
            template_hash(&b, &["pod-template-hash"])
        );
        let c = json!({"spec": {"b": 3, "a": 1}, "metadata": {"labels": {"app": "x"}}});
        assert_ne!(template_hash(&b, &[]), template_hash(&c, &[]));
        assert_eq!(template_hash(&c, &[]).len(), 10);
    }

    #[test]
    fn time_formatting_round_trips_known_dates() {
        assert_eq!(fmt_time(0), "1970-01-01T00:00:00Z");
        // 2026-11-21T10:05:11Z
        assert_eq!(fmt_time(1_795_255_511_000), "2026-11-21T10:05:11Z");
        assert_eq!(days_from_civil(2000, 2, 29), 11_016);
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn int_or_percent_rounding() {
        let p = IntOrString::String("25%".into());
        assert_eq!(scaled_int_or_percent(Some(&p), 0, 10, true), 3);
        assert_eq!(scaled_int_or_percent(Some(&p), 0, 10, false), 2);
        assert_eq!(scaled_int_or_percent(None, 25, 1, true), 1);
        assert_eq!(scaled_int_or_percent(None, 25, 1, false), 0);
        assert_eq!(
            scaled_int_or_percent(Some(&IntOrString::Int(2)), 25, 10, false),
            2
        );
    }

    #[test]
    fn selectors() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
        let labels: BTreeMap<String, String> = [("app".to_string(), "a".to_string())].into();
        let sel = LabelSelector {
            match_labels: Some(labels.clone()),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "DoesNotExist".into(),
                values: None,
            }]),
        };
        assert!(selector_matches(&sel, Some(&labels)));
        let mut l2 = labels.clone();
        l2.insert("tier".into(), "web".into());
        assert!(!selector_matches(&sel, Some(&l2)));
        assert!(!selector_matches(&sel, None));
    }

    #[test]
    fn conditions_keep_times_when_unchanged() {
        let first = merge_conditions(None, &[Cond::new("Ready", "True", "", "")], &[], "T1", false);
        let again = merge_conditions(
            Some(&first),
            &[Cond::new("Ready", "True", "", "")],
            &[],
            "T2",
            false,
        );
        assert_eq!(first, again);
        let flipped = merge_conditions(
            Some(&first),
            &[Cond::new("Ready", "False", "", "")],
            &[],
            "T3",
            false,
        );
        assert_eq!(flipped[0]["lastTransitionTime"], "T3");
    }

    #[test]
    fn merge_patch_change_detection() {
        let cur = json!({"a": 1, "b": {"c": [1, 2]}});
        assert!(!merge_patch_changes(&cur, &json!({"a": 1})));
        assert!(!merge_patch_changes(
            &cur,
            &json!({"b": {"c": [1, 2]}, "z": null})
        ));
        assert!(merge_patch_changes(&cur, &json!({"b": {"c": [1]}})));
        assert!(merge_patch_changes(&cur, &json!({"a": null})));
        // Zero values equal absent fields (Go omitempty).
        assert!(!merge_patch_changes(&cur, &json!({"readyReplicas": 0})));
        assert!(!merge_patch_changes(
            &json!({"l": [{"x": 1}]}),
            &json!({"l": [{"x": 1, "y": 0}]})
        ));
    }
}

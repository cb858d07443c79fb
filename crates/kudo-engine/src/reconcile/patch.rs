//! The merge patches a reconcile sends for the Instance: its status subresource, and its spec and
//! metadata (guarded by the resourceVersion read). Pure: the manager computes nothing of a write
//! itself, it sends what these return (`None`: nothing changed, no request).

use std::collections::BTreeMap;

use kudo_api::{AutopilotRuleStatus, Instance, InstanceSpec, InstanceStatus, PlanExecution};
use serde_json::{Value, json};

use super::annotations::{ADMITTED_SPEC_ANNOTATION, RETRY_ANNOTATION};

/// What a reconcile wants stored in the Instance's spec and metadata.
#[derive(Debug, Clone, Copy)]
pub struct Stored<'a> {
    /// The spec to store (admission edits applied).
    pub spec: &'a InstanceSpec,
    /// The finalizers to store.
    pub finalizers: &'a [String],
    /// The spec the admitted-spec annotation should hold (`None`: leave it).
    pub remember: Option<&'a InstanceSpec>,
    /// Other annotations (`None` value: remove).
    pub annotations: &'a BTreeMap<&'a str, Option<String>>,
}

/// The merge patch from `old` to `new` status, `None` when they are equal. Plan statuses are sent
/// whole; conditions replace the list; schedules and autopilot rule states that went away are
/// nulled (a merge patch keeps every key it does not mention).
pub fn status_patch(old: &InstanceStatus, new: &InstanceStatus) -> Option<Value> {
    if old == new {
        return None;
    }
    let mut body = json!({
        "status": {
            "observedGeneration": new.observed_generation,
            "planStatus": plan_status_patch(new),
            "conditions": serde_json::to_value(&new.conditions).unwrap_or(Value::Null),
            "schedules": schedules_patch(old, new),
        }
    });
    if old.autopilot != new.autopilot {
        body["status"]["autopilot"] = autopilot_patch(&old.autopilot, &new.autopilot);
    }
    Some(body)
}

/// The one merge patch of `kubectl kudo plan trigger` and `plan retry`: the direct trigger of
/// `plan` (`trigger_uid` is the CLI's; admission gives the run its own) and the retry annotation —
/// naming the failed run `retry_of` for a retry, removed for a trigger (which restarts from the
/// top, so a pending retry must not turn it into a resume).
///
/// ```
/// let p = kudo_engine::reconcile::trigger_patch("backup", "u1", Some("f1"));
/// assert_eq!(p["spec"]["planExecution"]["planName"], "backup");
/// assert_eq!(p["metadata"]["annotations"]["kudo-rs.dev/retry"], "backup/f1");
/// ```
pub fn trigger_patch(plan: &str, trigger_uid: &str, retry_of: Option<&str>) -> Value {
    let retry = retry_of.map(|failed| crate::retry::annotation_value(plan, failed));
    json!({
        "metadata": {"annotations": {RETRY_ANNOTATION: retry}},
        "spec": {"planExecution": {"planName": plan, "uid": trigger_uid}},
    })
}

/// The merge patch that cancels the plan currently scheduled on an Instance. Sent by `kubectl kudo
/// plan cancel`; the manager accepts it at its next reconcile. Patching an Instance with no plan
/// scheduled is harmless: the terminal status is simply cleared.
pub fn cancel_patch() -> Value {
    json!({"spec": {"planExecution": {"status": "CANCELLED"}}})
}

/// The merge patch turning `inst`'s spec and metadata into `to`, carrying `resource_version` so a
/// concurrent edit is never overwritten (the conflict is retried with fresh data); `None` when
/// nothing changes.
pub fn spec_patch(inst: &Instance, to: &Stored<'_>, resource_version: Option<String>) -> Option<Value> {
    let mut patch = serde_json::Map::new();
    if let Some(spec) = spec_fields(&inst.spec, to.spec) {
        patch.insert("spec".into(), spec);
    }
    let mut meta = serde_json::Map::new();
    if to.finalizers != inst.metadata.finalizers.as_slice() {
        meta.insert("finalizers".into(), json!(to.finalizers));
    }
    let annotations = annotations_patch(inst, to);
    if !annotations.is_empty() {
        meta.insert("annotations".into(), Value::Object(annotations));
    }
    if patch.is_empty() && meta.is_empty() {
        return None;
    }
    if let Some(rv) = resource_version {
        meta.insert("resourceVersion".into(), json!(rv));
    }
    patch.insert("metadata".into(), Value::Object(meta));
    Some(Value::Object(patch))
}

/// [`spec_patch`], carrying the `lazy` annotations too when something else is written anyway
/// (see [`super::Settled::lazy`]); `None` when only lazy annotations changed.
pub fn spec_patch_along(
    inst: &Instance,
    to: &Stored<'_>,
    lazy: &BTreeMap<&str, Option<String>>,
    resource_version: Option<String>,
) -> Option<Value> {
    let alone = spec_patch(inst, to, resource_version.clone())?;
    if lazy.is_empty() {
        return Some(alone);
    }
    let mut annotations = to.annotations.clone();
    annotations.extend(lazy.iter().map(|(k, v)| (*k, v.clone())));
    let along = Stored {
        annotations: &annotations,
        ..*to
    };
    spec_patch(inst, &along, resource_version)
}

/// Whether storing `to` changes the spec proper, which makes the API server bump
/// `metadata.generation` (metadata-only changes do not).
pub fn bumps_generation(inst: &Instance, to: &Stored<'_>) -> bool {
    spec_fields(&inst.spec, to.spec).is_some()
}

/// The changed spec fields: `planExecution` (null when cleared) and the changed or removed
/// parameters.
fn spec_fields(old: &InstanceSpec, new: &InstanceSpec) -> Option<Value> {
    let mut out = serde_json::Map::new();
    if new.plan_execution != old.plan_execution {
        let pe = if new.plan_execution == PlanExecution::default() {
            Value::Null
        } else {
            serde_json::to_value(&new.plan_execution).unwrap_or(Value::Null)
        };
        out.insert("planExecution".into(), pe);
    }
    if new.parameters != old.parameters {
        let mut params = serde_json::Map::new();
        for (k, v) in &new.parameters {
            if old.parameters.get(k) != Some(v) {
                params.insert(k.clone(), json!(v));
            }
        }
        for k in old.parameters.keys().filter(|k| !new.parameters.contains_key(*k)) {
            params.insert(k.clone(), Value::Null);
        }
        out.insert("parameters".into(), Value::Object(params));
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// The annotations that change: the admitted spec (compared as a spec, not as text) and the
/// others as given.
fn annotations_patch(inst: &Instance, to: &Stored<'_>) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    let cur = |k: &str| inst.metadata.annotations.get(k).map(String::as_str);
    if let Some(r) = to.remember {
        let same = cur(ADMITTED_SPEC_ANNOTATION)
            .and_then(|s| serde_json::from_str::<InstanceSpec>(s).ok())
            .is_some_and(|s| &s == r);
        if !same {
            let text = serde_json::to_string(r).unwrap_or_default();
            out.insert(ADMITTED_SPEC_ANNOTATION.into(), json!(text));
        }
    }
    for (k, v) in to.annotations {
        if cur(k) != v.as_deref() {
            out.insert(k.to_string(), v.as_ref().map_or(Value::Null, |t| json!(t)));
        }
    }
    out
}

/// The `status.planStatus` of a merge patch. A plan status is an object, so a merge patch keeps
/// every key it does not mention: an empty message (serialized as absent) is sent as `null`, or
/// the previous run's message would stay on the server. Phases are a list and
/// are replaced whole.
fn plan_status_patch(new: &InstanceStatus) -> Value {
    let mut out = serde_json::Map::new();
    for (name, ps) in &new.plan_status {
        let mut v = serde_json::to_value(ps).unwrap_or(Value::Null);
        if ps.message.is_empty()
            && let Some(obj) = v.as_object_mut()
        {
            obj.insert("message".into(), Value::Null);
        }
        out.insert(name.clone(), v);
    }
    Value::Object(out)
}

/// The merge patch of `status.schedules`: entries of plans no longer scheduled are removed.
fn schedules_patch(old: &InstanceStatus, new: &InstanceStatus) -> Value {
    let mut out = serde_json::Map::new();
    for (name, st) in &new.schedules {
        out.insert(name.clone(), serde_json::to_value(st).unwrap_or(Value::Null));
    }
    for name in old.schedules.keys().filter(|n| !new.schedules.contains_key(*n)) {
        out.insert(name.clone(), Value::Null);
    }
    Value::Object(out)
}

/// `status.autopilot` as a merge patch from `old` to `new`: absent fields and rules are nulled.
pub fn autopilot_patch(
    old: &BTreeMap<String, AutopilotRuleStatus>,
    new: &BTreeMap<String, AutopilotRuleStatus>,
) -> Value {
    let mut m = serde_json::Map::new();
    for k in old.keys().filter(|k| !new.contains_key(*k)) {
        m.insert(k.clone(), Value::Null);
    }
    let opt = |v: &Option<String>| v.clone().map_or(Value::Null, Value::String);
    for (k, s) in new {
        let error = (!s.last_error.is_empty()).then(|| s.last_error.clone());
        m.insert(
            k.clone(),
            json!({
                "holdingSince": opt(&s.holding_since),
                "lastFired": opt(&s.last_fired),
                "lastError": opt(&error),
            }),
        );
    }
    Value::Object(m)
}

//! Typed objects and their Instances (a kudo-rs extension): what the manager does when a typed
//! object (a `Galera`, say) or its Instance changes. Pure: the controller reads the object, the Instance
//! of the same name and the OperatorVersions, and executes what these functions return.
//!
//! The typed object is the source of truth for the parameters it declares: its spec, rendered as
//! KUDO's strings, is the Instance's `spec.parameters` (and its `parameterSources` the Instance's);
//! the Instance is the source of truth for the run, mirrored into the object's `status`, which
//! speaks of the object's generation (see [`typed_conditions`]).

use std::collections::BTreeMap;

use kudo_api::{Condition, Instance, OperatorVersion, TypedApi};
use kudo_package::typed_api::parameters_of;
use serde_json::{Map, Value, json};

use crate::progress::{RECONCILING, STALLED};
use crate::readiness::{READY, set_condition};
use crate::time::Timestamp;

/// Label on an Instance made for a typed object: the typed API's CRD name, so the manager watches
/// only those Instances for the status mirror.
pub const TYPED_LABEL: &str = "kudo-rs.dev/typed-api";

/// What to do with the Instance of a typed object.
#[derive(Clone, Debug, PartialEq)]
pub enum InstanceAction {
    /// Create this Instance.
    Create(Value),
    /// Merge-patch the Instance with this.
    Patch(Value),
    /// In step already.
    Nothing,
    /// An Instance of that name exists and belongs to something else: left alone, reported.
    Conflict(String),
}

/// The OperatorVersion a new typed object's Instance runs: among `ovs` (those of the object's
/// namespace), the newest (by semantic version, then name) whose typed API is this kind. An
/// existing Instance keeps its own: upgrades are `kubectl kudo upgrade`'s.
pub fn choose_operator_version<'a>(
    ovs: &'a [OperatorVersion],
    api_version: &str,
    kind: &str,
) -> Option<&'a OperatorVersion> {
    let key = |ov: &OperatorVersion| {
        let v = ov.spec.version.trim_start_matches('v');
        (semver::Version::parse(v).ok(), ov.metadata.name.clone())
    };
    ovs.iter()
        .filter(|ov| ov.spec.api.as_ref().is_some_and(|a| serves(a, api_version, kind)))
        .max_by_key(|ov| key(ov))
}

fn serves(api: &TypedApi, api_version: &str, kind: &str) -> bool {
    api.kind == kind && api.group == api_version.split('/').next().unwrap_or_default()
}

/// The Instance of a typed object (`obj`: the object as JSON) given the Instance of that name, if
/// any, and the OperatorVersion: the new Instance's (on create) or the existing Instance's own.
pub fn instance_action(obj: &Value, ov: &OperatorVersion, existing: Option<&Instance>) -> InstanceAction {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let params = parameters_of(ov, &spec);
    let sources = spec.get("parameterSources").cloned().unwrap_or_else(|| json!({}));
    let Some(inst) = existing else {
        return InstanceAction::Create(new_instance(obj, ov, &params, &sources));
    };
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !owned_by(inst, uid) {
        return InstanceAction::Conflict(format!(
            "Instance {} exists and is not owned by this object: its parameters are left alone",
            inst.metadata.name
        ));
    }
    let mut patch = parameters_patch(ov, &inst.spec.parameters, &params);
    let have_sources = serde_json::to_value(&inst.spec.parameter_sources).unwrap_or_default();
    if have_sources != sources {
        patch.insert("parameterSources".into(), sources);
    }
    if patch.is_empty() {
        InstanceAction::Nothing
    } else {
        InstanceAction::Patch(json!({"spec": patch}))
    }
}

fn owned_by(inst: &Instance, uid: &str) -> bool {
    inst.metadata
        .other
        .get("ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid && r["controller"] == true))
}

/// `spec.parameters` changes: values the object sets that differ, and declared non-sensitive
/// parameters the object no longer sets removed (their default applies again).
fn parameters_patch(
    ov: &OperatorVersion,
    have: &BTreeMap<String, String>,
    want: &BTreeMap<String, String>,
) -> Map<String, Value> {
    let mut params = Map::new();
    for (k, v) in want.iter().filter(|(k, v)| have.get(*k) != Some(*v)) {
        params.insert(k.clone(), json!(v));
    }
    let typed: Vec<&str> = ov
        .spec
        .parameters
        .iter()
        .filter(|p| !p.is_sensitive())
        .map(|p| p.name.as_str())
        .collect();
    for k in have
        .keys()
        .filter(|k| !want.contains_key(*k) && typed.contains(&k.as_str()))
    {
        params.insert(k.clone(), Value::Null);
    }
    let mut out = Map::new();
    if !params.is_empty() {
        out.insert("parameters".into(), Value::Object(params));
    }
    out
}

fn new_instance(
    obj: &Value,
    ov: &OperatorVersion,
    params: &BTreeMap<String, String>,
    sources: &Value,
) -> Value {
    let meta = &obj["metadata"];
    let api = ov.spec.api.clone().unwrap_or_default();
    json!({
        "apiVersion": kudo_api::API_VERSION,
        "kind": "Instance",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {kudo_api::labels::OPERATOR: ov.spec.operator.name, TYPED_LABEL: api.crd_name()},
            "ownerReferences": [{
                "apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"],
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "operatorVersion": {"name": ov.metadata.name},
            "parameters": params,
            "parameterSources": sources,
        },
    })
}

/// `Reconciling` reason on a typed object whose Instance has not acted on the object's
/// generation yet (it was just created or patched, or the manager has not admitted the change).
pub const INSTANCE_PENDING: &str = "InstancePending";
/// `Stalled` reason on a typed object whose Instance belongs to something else.
pub const INSTANCE_CONFLICT: &str = "InstanceConflict";

/// The typed object's `status` once `action` is done for its Instance (`inst`, as read; `None`:
/// none yet): the plan last worked on and its status (the printer columns), the Instance's plan
/// statuses as they are, `observedGeneration` (the object's generation, which the manager acted
/// on) and the conditions of [`typed_conditions`].
pub fn status_of(obj: &Value, inst: Option<&Instance>, action: &InstanceAction, now: Timestamp) -> Value {
    let name = obj.pointer("/metadata/name").cloned().unwrap_or(Value::Null);
    let mut out = json!({"instance": name});
    let st = inst.and_then(|i| i.status.clone()).unwrap_or_default();
    let latest = st
        .plan_status
        .values()
        .filter(|p| p.last_updated_timestamp.is_some())
        .max_by(|a, b| a.last_updated_timestamp.cmp(&b.last_updated_timestamp));
    if let Some(p) = latest {
        out["plan"] = json!(p.name);
        out["status"] = serde_json::to_value(p.status).unwrap_or_default();
    }
    if let Some(g) = generation(obj) {
        out["observedGeneration"] = json!(g);
    }
    let conditions = typed_conditions(obj, inst, action, now);
    if !conditions.is_empty() {
        out["conditions"] = serde_json::to_value(&conditions).unwrap_or_default();
    }
    if !st.plan_status.is_empty() {
        out["planStatus"] = serde_json::to_value(&st.plan_status).unwrap_or_default();
    }
    out
}

/// The typed object's conditions, each observing the object's generation (never the
/// Instance's): while the Instance has not acted on the object's generation, `Reconciling`
/// ([`INSTANCE_PENDING`]) with the object's previous `Ready`; an Instance of someone else,
/// `Stalled` ([`INSTANCE_CONFLICT`]); otherwise the Instance's own conditions. One the Instance
/// judged at an older generation than its current one stays older than the object's (so
/// `kubectl wait` on the object waits as it would on the Instance).
pub fn typed_conditions(
    obj: &Value,
    inst: Option<&Instance>,
    action: &InstanceAction,
    now: Timestamp,
) -> Vec<Condition> {
    let g = generation(obj);
    let before: Vec<Condition> = obj
        .pointer("/status/conditions")
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default();
    let kept_ready = || before.iter().filter(|c| c.type_ == READY).cloned();
    let own = |type_: &str, reason: &str, message: String| {
        let mut out: Vec<Condition> = kept_ready().collect();
        let c = Condition {
            type_: type_.into(),
            status: "True".into(),
            observed_generation: g,
            last_transition_time: now.to_string(),
            reason: reason.into(),
            message,
        };
        let mut prev: Vec<Condition> = before.iter().filter(|p| p.type_ == type_).cloned().collect();
        set_condition(&mut prev, c);
        out.extend(prev);
        out
    };
    let inst = match (action, inst) {
        (InstanceAction::Conflict(msg), _) => return own(STALLED, INSTANCE_CONFLICT, msg.clone()),
        (InstanceAction::Nothing, Some(i)) if acted_on(i) => i,
        (_, i) => {
            let name = i.map_or_else(|| json_str(obj, "/metadata/name"), |i| i.metadata.name.clone());
            let msg = format!("Instance {name} has not acted on this change yet");
            return own(RECONCILING, INSTANCE_PENDING, msg);
        }
    };
    let current = inst.metadata.other.get("generation").and_then(Value::as_i64);
    let st = inst.status.clone().unwrap_or_default();
    st.conditions
        .into_iter()
        .map(|mut c| {
            let prev = before.iter().find(|p| p.type_ == c.type_);
            c.observed_generation = if c.observed_generation == current {
                g
            } else {
                // Judged at an older generation of the Instance: older than the object's.
                let older = g.map(|g| (g - 1).max(0));
                prev.and_then(|p| p.observed_generation)
                    .filter(|p| Some(*p) < g)
                    .or(older)
            };
            c
        })
        .collect()
}

/// The Instance has written a status for its current generation.
fn acted_on(inst: &Instance) -> bool {
    let current = inst.metadata.other.get("generation").and_then(Value::as_i64);
    let observed = inst.status.as_ref().and_then(|s| s.observed_generation);
    observed.is_some() && observed == current
}

fn generation(obj: &Value) -> Option<i64> {
    obj.pointer("/metadata/generation").and_then(Value::as_i64)
}

fn json_str(obj: &Value, pointer: &str) -> String {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The status subresource patch that makes the object's status [`status_of`], `None` when it
/// already is.
pub fn status_patch(
    obj: &Value,
    inst: Option<&Instance>,
    action: &InstanceAction,
    now: Timestamp,
) -> Option<Value> {
    let want = status_of(obj, inst, action, now);
    if obj.get("status") == Some(&want) {
        return None;
    }
    let mut patch = want.clone();
    // A merge patch keeps what it does not name: fields the mirror no longer has are nulled.
    if let Some(have) = obj.get("status").and_then(Value::as_object) {
        for k in have.keys().filter(|k| want.get(k.as_str()).is_none()) {
            patch[k.as_str()] = Value::Null;
        }
    }
    Some(json!({"status": patch}))
}

#[cfg(test)]
mod tests;

//! Typed objects and their Instances (a kudo-rs extension): what the manager does when a typed
//! object (a `Galera`, say) or its Instance changes. Pure: the controller reads the object, the Instance
//! of the same name and the OperatorVersions, and executes what these functions return.
//!
//! The typed object is the source of truth for the parameters it declares: its spec, rendered as
//! KUDO's strings, is the Instance's `spec.parameters` (and its `parameterSources` the Instance's);
//! the Instance is the source of truth for the run, mirrored into the object's `status`.

use std::collections::BTreeMap;

use kudo_api::{Instance, OperatorVersion, TypedApi};
use kudo_package::typed_api::parameters_of;
use serde_json::{Map, Value, json};

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

/// The typed object's `status` for its Instance: the plan last worked on and its status (the
/// printer columns), the Instance's conditions and plan statuses as they are.
pub fn status_of(inst: &Instance) -> Value {
    let st = inst.status.clone().unwrap_or_default();
    let latest = st
        .plan_status
        .values()
        .filter(|p| p.last_updated_timestamp.is_some())
        .max_by(|a, b| a.last_updated_timestamp.cmp(&b.last_updated_timestamp));
    let mut out = json!({"instance": inst.metadata.name});
    if let Some(p) = latest {
        out["plan"] = json!(p.name);
        out["status"] = serde_json::to_value(p.status).unwrap_or_default();
    }
    if !st.conditions.is_empty() {
        out["conditions"] = serde_json::to_value(&st.conditions).unwrap_or_default();
    }
    if !st.plan_status.is_empty() {
        out["planStatus"] = serde_json::to_value(&st.plan_status).unwrap_or_default();
    }
    out
}

/// The status subresource patch that mirrors `inst` into the object, `None` when it already does.
pub fn status_patch(obj: &Value, inst: &Instance) -> Option<Value> {
    let want = status_of(inst);
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

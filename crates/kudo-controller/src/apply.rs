//! Writing a task's objects: server-side apply (or a read, when this exact content was applied
//! before, see [`crate::applied`]) and foreground deletion, with the live object's health judged
//! for the engine's pass. Everything here answers with a [`TaskOutcome`] where a task is concerned.

use std::collections::BTreeSet;
use std::sync::Mutex;

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kudo_engine::waiting::describe;
use kudo_engine::{ErrorClass, Health, TaskOutcome, classify_api_error, health};
use kudo_kube::discovery::Resolved;
use serde_json::Value;

use crate::context::Context;
use crate::lean::Lean;
use crate::reasons::{self, fatal};

pub use kudo_engine::reconcile::ClusterObject;

/// Cluster-scoped objects applied during a reconcile. They get no owner reference (an owner
/// must be in the same namespace), so the controller records them on the Instance and deletes
/// them itself on uninstall (KUDO leaked them, #1073).
pub type ClusterObjects = Mutex<BTreeSet<ClusterObject>>;

/// What a plan's apply writes with: where cluster-scoped objects are noted, and whose objects
/// may be written ([`kudo_engine::ownership`]).
pub(crate) struct Writer<'a> {
    pub cluster: &'a ClusterObjects,
    pub claimant: &'a kudo_engine::ownership::Claimant,
    /// Cluster-scoped objects the Instance recorded before this reconcile.
    pub recorded: &'a BTreeSet<ClusterObject>,
}

/// Why drift repair could not apply an object ([`apply_object`]).
#[derive(Debug, thiserror::Error)]
pub enum ApplyObjectError {
    /// The object's kind could not be resolved (the task outcome that would have been reported).
    #[error("{0}")]
    Resolve(String),
    #[error("{0}")]
    Api(#[source] kube::Error),
}

/// The dynamic API for an object, or the task outcome when its kind cannot be used.
pub async fn api_for(ctx: &Context, obj: &Value) -> Result<(Api<Lean>, String, bool), TaskOutcome> {
    api_as(ctx, obj).await
}

/// [`api_for`] with any object type of the dynamic API (e.g. `DynamicObject` to read
/// managedFields, which [`Lean`] skips).
pub(crate) async fn api_as<K>(ctx: &Context, obj: &Value) -> Result<(Api<K>, String, bool), TaskOutcome>
where
    K: kube::Resource<DynamicType = kube::api::ApiResource, Scope = kube::core::DynamicResourceScope>,
{
    let av = obj["apiVersion"].as_str().unwrap_or("");
    let kind = obj["kind"].as_str().unwrap_or("");
    let Some(name) = obj["metadata"]["name"].as_str().filter(|n| !n.is_empty()) else {
        return Err(fatal(
            reasons::RESOURCE_VALIDATION_ERROR,
            format!("{kind} without metadata.name cannot be applied (generateName is not supported)"),
        ));
    };
    match ctx.cluster.discovery.resolve(av, kind).await {
        Ok(Resolved::Found { resource, namespaced }) => {
            let api = if namespaced {
                let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default");
                Api::namespaced_with(ctx.acting_client(), ns, &resource)
            } else {
                Api::all_with(ctx.acting_client(), &resource)
            };
            Ok((api, name.to_string(), namespaced))
        }
        Ok(Resolved::Unknown(msg)) => Err(fatal(reasons::TASK_ENHANCEMENT_ERROR, msg)),
        Err(e) => Err(TaskOutcome::Transient(format!(
            "discovery of {av}/{kind} failed: {e}"
        ))),
    }
}

/// Turns a failed API call into the task outcome: requests the server rejected as invalid are
/// fatal with the server's message, the rest is retried.
pub(crate) fn api_error(what: &str, obj: &Value, e: kube::Error) -> TaskOutcome {
    match e {
        kube::Error::Api(s) => {
            let msg = format!("{what} {} failed: {}", describe(obj), s.message);
            match classify_api_error(s.code, &s.reason) {
                ErrorClass::Fatal => fatal(reasons::RESOURCE_APPLY_ERROR, msg),
                ErrorClass::Transient => TaskOutcome::Transient(msg),
            }
        }
        other => TaskOutcome::Transient(format!("{what} {} failed: {other}", describe(obj))),
    }
}

/// Whether a cluster-scoped object is one the Instance applied before (recorded on it, or in
/// this reconcile).
fn is_recorded(writer: &Writer<'_>, obj: &Value, name: &str) -> bool {
    let me = ClusterObject {
        api_version: obj["apiVersion"].as_str().unwrap_or("").to_string(),
        kind: obj["kind"].as_str().unwrap_or("").to_string(),
        name: name.to_string(),
    };
    writer.recorded.contains(&me)
        || writer
            .cluster
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&me)
}

/// Notes a cluster-scoped object about to be applied (see [`ClusterObjects`]). Recorded before the
/// request: if it succeeds after a timeout we must still own it.
fn record_cluster_scoped(cluster: &ClusterObjects, obj: &Value, name: &str) {
    cluster
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(ClusterObject {
            api_version: obj["apiVersion"].as_str().unwrap_or("").to_string(),
            kind: obj["kind"].as_str().unwrap_or("").to_string(),
            name: name.to_string(),
        });
}

/// Server-side applies one object of a task and judges its health: `Ok(None)` healthy,
/// `Ok(Some(why))` still progressing.
pub(crate) async fn apply_for_task(
    ctx: &Context,
    obj: &Value,
    writer: &Writer<'_>,
) -> Result<Option<String>, TaskOutcome> {
    let (api, name, namespaced) = api_for(ctx, obj).await?;
    let known = !namespaced && is_recorded(writer, obj, &name);
    if let Some(applied) = ctx.memory.applied.already_applied(obj) {
        // The watch cache's copy when it is no older than our apply; else ask the server.
        let av = obj["apiVersion"].as_str().unwrap_or("");
        let kind = obj["kind"].as_str().unwrap_or("");
        let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default");
        if let Some(Some(cached)) = ctx.caches.child(av, kind, ns, &name)
            && applied.current(&cached)
        {
            return judge(ctx, cached);
        }
        match api.get_opt(&name).await {
            Ok(Some(live)) => {
                let live = serde_json::to_value(&live).map_err(|e| TaskOutcome::Transient(e.to_string()))?;
                return judge(ctx, with_type(live, obj));
            }
            // deleted since: apply again
            Ok(None) => {}
            Err(e) => return Err(api_error("get of", obj, e)),
        }
    }
    crate::ownership::claim(ctx, obj, &name, writer.claimant, namespaced, known).await?;
    if !namespaced {
        record_cluster_scoped(writer.cluster, obj, &name);
    }
    let pp = PatchParams::apply(&ctx.config.field_manager).force();
    let live = api
        .patch(&name, &pp, &Patch::Apply(obj))
        .await
        .map_err(|e| api_error("apply of", obj, e))?;
    let live = serde_json::to_value(&live).map_err(|e| TaskOutcome::Transient(e.to_string()))?;
    tracing::debug!(object = %describe(obj), "applied");
    ctx.metrics.object_applied();
    crate::failpoint::hit(crate::failpoint::AFTER_CHILD_APPLY);
    ctx.memory.applied.record(obj, &live);
    applied_echo(ctx, obj, &name, &live);
    judge(ctx, with_type(live, obj))
}

/// The watch event of a plan's own apply wakes nobody: the pass judged the object from the
/// apply's answer, which is what that event carries (see [`crate::echoes`]). Only for the kinds
/// the manager watches (any other version would never be taken back).
fn applied_echo(ctx: &Context, obj: &Value, name: &str, live: &Value) {
    let (av, kind) = (
        obj["apiVersion"].as_str().unwrap_or(""),
        obj["kind"].as_str().unwrap_or(""),
    );
    let ns = obj["metadata"]["namespace"].as_str().unwrap_or("");
    if let Some(rv) = live["metadata"]["resourceVersion"].as_str()
        && !ns.is_empty()
        && ctx.caches.watches(av, kind)
    {
        ctx.memory
            .child_echoes
            .wrote(ns, &crate::echoes::child_key(kind, name), rv);
    }
}

/// The live object with `apiVersion`/`kind` filled in from what we sent (servers always name the
/// type, but health rules depend on it).
fn with_type(mut live: Value, sent: &Value) -> Value {
    if live.get("apiVersion").is_none() {
        live["apiVersion"] = sent["apiVersion"].clone();
    }
    if live.get("kind").is_none() {
        live["kind"] = sent["kind"].clone();
    }
    live
}

fn judge(ctx: &Context, live: Value) -> Result<Option<String>, TaskOutcome> {
    match health(&live) {
        Health::Healthy => Ok(None),
        Health::Progressing(m) => Ok(Some(waiting_line(ctx, &live, &m))),
        Health::Failed(m) => Err(fatal(reasons::FAILED_TERMINAL_STATE, m)),
    }
}

/// What a step waits for on `live` (see [`kudo_engine::waiting`]): its verdict, and for a
/// workload the problems of its pods as the watch cache has them (no request is made).
fn waiting_line(ctx: &Context, live: &Value, verdict: &str) -> String {
    let kind = live["kind"].as_str().unwrap_or("");
    let ns = live["metadata"]["namespace"].as_str().unwrap_or("");
    let instance = live["metadata"]["labels"][kudo_api::labels::INSTANCE]
        .as_str()
        .unwrap_or("");
    let pods = if matches!(kind, "Deployment" | "StatefulSet" | "DaemonSet" | "Job") && !instance.is_empty() {
        ctx.caches
            .children_of_instance("v1", "Pod", ns, instance)
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let owned = kudo_engine::waiting::owned_pods(live, &pods);
    kudo_engine::waiting::waiting_line(live, verdict, &owned)
}

/// Server-side applies one object outside a plan (drift repair); returns the resourceVersion the
/// server answered with.
pub async fn apply_object(
    ctx: &Context,
    obj: &Value,
    cluster: &ClusterObjects,
) -> Result<Option<String>, ApplyObjectError> {
    let (api, name, namespaced) = api_for(ctx, obj)
        .await
        .map_err(|e| ApplyObjectError::Resolve(format!("{e:?}")))?;
    if !namespaced {
        record_cluster_scoped(cluster, obj, &name);
    }
    let pp = PatchParams::apply(&ctx.config.field_manager).force();
    let live = api
        .patch(&name, &pp, &Patch::Apply(obj))
        .await
        .map_err(ApplyObjectError::Api)?;
    Ok(live.0.metadata.resource_version)
}

/// Deletes one object (foreground propagation) and reports it done once it is gone.
pub async fn delete(ctx: &Context, obj: &Value) -> Result<Option<String>, TaskOutcome> {
    let (api, name, _) = match api_for(ctx, obj).await {
        Ok(x) => x,
        // A kind the server does not serve has no objects to delete.
        Err(TaskOutcome::Fatal { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let gone = || {
        tracing::debug!(object = %describe(obj), "deleted");
        Ok(None)
    };
    let going = || Ok(Some(format!("{} is being deleted", describe(obj))));
    // An object already being deleted is only looked at: re-issuing the DELETE on every pass
    // while its dependents go would be a write for nothing. The watch cache answers when it has
    // the object (a stale copy only costs a DELETE the server answers as usual); absence from
    // the cache may just mean it was created a moment ago, so the server decides that.
    let av = obj["apiVersion"].as_str().unwrap_or("");
    let kind = obj["kind"].as_str().unwrap_or("");
    let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default");
    let cached = match ctx.caches.child(av, kind, ns, &name) {
        Some(Some(c)) => Some(c["metadata"]["deletionTimestamp"].is_string()),
        _ => None,
    };
    match cached {
        Some(true) => return going(),
        Some(false) => {}
        None => match api.get_opt(&name).await {
            Ok(None) => return gone(),
            Ok(Some(live)) if live.0.metadata.deletion_timestamp.is_some() => return going(),
            Ok(Some(_)) => {}
            Err(e) => return Err(api_error("get of", obj, e)),
        },
    }
    match api.delete(&name, &DeleteParams::foreground()).await {
        // the server answers with the object while (foreground) deletion is in progress
        Ok(answer) if answer.is_left() => going(),
        Ok(_) => gone(),
        Err(kube::Error::Api(s)) if s.code == 404 => gone(),
        Err(e) => Err(api_error("delete of", obj, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_names_kind_namespace_and_name() {
        let obj = serde_json::json!({"kind": "Service", "metadata": {"name": "s", "namespace": "ns"}});
        assert_eq!(describe(&obj), "Service ns/s");
        let obj = serde_json::json!({"kind": "ClusterRole", "metadata": {"name": "r"}});
        assert_eq!(describe(&obj), "ClusterRole r");
    }
}

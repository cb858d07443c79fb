//! Drift repair: while an Instance is idle, the objects its completed lifecycle plans applied are
//! compared with the cluster and, depending on the Instance's drift policy, applied again.
//!
//! Only plans that ran to COMPLETE (deploy, update, upgrade) are considered, rendered with the
//! parameters and run uid of their last run, so objects of a plan that has not run yet are never
//! touched. An object counts as drifted when it is gone or when a field we set differs from the
//! live value (fields added by the server or other managers are ignored). A repair is a
//! server-side apply, which is idempotent; it is reported only when the server's resourceVersion
//! moved, so a false alarm (e.g. a quantity the server normalised) costs one no-op request and no
//! Event.

use kudo_api::{ExecutionStatus, InstanceStatus, OperatorVersion};
use kudo_engine::Timestamp;
use kudo_engine::reconcile::Policy;
use kudo_package::render::{Action, RenderContext, RenderedObject};
use serde_json::Value;

use crate::apply::{self, ClusterObjects};
use crate::context::Context;
use crate::render;

/// Result of a drift check.
#[derive(Debug, Default)]
pub struct DriftReport {
    /// Objects found missing or changed (`Kind ns/name: why`).
    pub drifted: Vec<String>,
    /// Of those, the ones a re-apply actually changed.
    pub repaired: Vec<Repaired>,
    /// Errors while checking or repairing (retried at the next idle reconcile).
    pub errors: Vec<String>,
}

/// An object a drift check re-applied.
#[derive(Debug, Clone)]
pub struct Repaired {
    /// `Kind ns/name (deleted|changed)`, for logs and Event notes.
    pub what: String,
    /// The object, as an Event's `related` object: the Event recorder merges Events with the same
    /// reason, action, regarding and related object into one series keeping the first note, so
    /// each repaired object needs its own (else only the first repair's note would be seen).
    pub object: k8s_openapi::api::core::v1::ObjectReference,
}

/// `want` ⊆ `live`: every field of `want` has the same value in `live`; lists must have the same
/// length and match element-wise.
pub fn is_subset(want: &Value, live: &Value) -> bool {
    match (want, live) {
        (Value::Object(w), Value::Object(l)) => w
            .iter()
            .all(|(k, v)| l.get(k).is_some_and(|lv| is_subset(v, lv)) || (v.is_null() && !l.contains_key(k))),
        (Value::Array(w), Value::Array(l)) => {
            w.len() == l.len() && w.iter().zip(l).all(|(a, b)| is_subset(a, b))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (a, b) => a == b || kudo_patch::quantity::same_quantity(a, b),
    }
}

/// Fields compared for drift: everything we render except metadata (the server and other
/// controllers legitimately add labels/annotations), status and write-only `stringData`; nor a
/// sharded manager's bucket label on a pod template (crate::views::label_bucket): a workload
/// applied before it gets it with its next plan run, not with a restart for drift.
fn comparable(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        for k in ["metadata", "status", "stringData", "apiVersion", "kind"] {
            m.remove(k);
        }
    }
    if let Some(labels) = o
        .pointer_mut("/spec/template/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(kudo_engine::shard::BUCKET_LABEL);
    }
    o
}

/// The lifecycle plans whose last run completed, oldest first (a later run's objects win).
fn completed_plans(status: &InstanceStatus) -> Vec<(String, String)> {
    let mut plans: Vec<(i64, String, String)> = ["deploy", "update", "upgrade"]
        .iter()
        .filter_map(|p| status.plan_status.get(*p))
        .filter(|ps| ps.status == ExecutionStatus::Complete && !ps.uid.is_empty())
        .map(|ps| {
            let t = ps
                .last_updated_timestamp
                .as_deref()
                .and_then(|t| Timestamp::parse(t).ok())
                .map_or(i64::MIN, |t| t.unix());
            (t, ps.name.clone(), ps.uid.clone())
        })
        .collect();
    plans.sort();
    plans.into_iter().map(|(_, n, u)| (n, u)).collect()
}

/// A rendered object's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ObjectId {
    api_version: String,
    kind: String,
    namespace: String,
    name: String,
}

impl ObjectId {
    fn of(obj: &Value) -> ObjectId {
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        ObjectId {
            api_version: s(&obj["apiVersion"]),
            kind: s(&obj["kind"]),
            namespace: s(&obj["metadata"]["namespace"]),
            name: s(&obj["metadata"]["name"]),
        }
    }
}

/// Folds one plan's rendered objects into the desired state, in plan order: an applied object
/// replaces an earlier rendering of it (first-seen order is kept), and an object a later task
/// deletes (e.g. galera's bootstrap objects, removed by the plan's last step) is not part of it.
fn fold_desired(objects: &mut Vec<(ObjectId, Value)>, rendered: &[RenderedObject]) {
    for o in rendered {
        let id = ObjectId::of(&o.object);
        match o.action {
            Action::Apply => match objects.iter_mut().find(|(i, _)| *i == id) {
                Some(slot) => slot.1 = o.object.clone(),
                None => objects.push((id, o.object.clone())),
            },
            Action::Delete => objects.retain(|(i, _)| *i != id),
            Action::PipePod | Action::ChildInstance => {}
        }
    }
}

/// The desired state: the objects of the completed lifecycle plans, later plans replacing
/// earlier renderings. `None` when a render cannot be trusted yet (a dependency of the
/// dependencies hash was unreadable: repairing with a guessed hash could roll pods for nothing).
async fn desired_objects(
    ctx: &Context,
    ov: &OperatorVersion,
    base: &RenderContext,
    sourced: &crate::param_sources::Sourced,
    status: &InstanceStatus,
    report: &mut DriftReport,
) -> Option<Vec<(ObjectId, Value)>> {
    let mut objects = Vec::new();
    for (plan, uid) in completed_plans(status) {
        let mut rctx = base.clone();
        rctx.plan_uid = uid;
        let rendered = match render::render(ctx, ov, &plan, rctx, sourced).await {
            Ok(r) => r,
            Err(e) => {
                report.errors.push(format!("rendering plan {plan}: {e}"));
                continue;
            }
        };
        if let Some(e) = rendered.transient() {
            report.errors.push(format!("rendering plan {plan}: {e}"));
            return None;
        }
        fold_desired(&mut objects, rendered.objects());
    }
    Some(objects)
}

/// The drift policy to act on, confirmed before the first repair: none in a namespace being
/// deleted, else the live Instance's (a failure to read it is reported and repairs nothing).
async fn confirm_policy(ctx: &Context, base: &RenderContext, report: &mut DriftReport) -> Policy {
    if namespace_terminating(ctx, &base.namespace).await {
        tracing::debug!(namespace = %base.namespace, "namespace is being deleted: no drift repair");
        return Policy::Ignore;
    }
    match live_policy(ctx, base).await {
        Ok(p) => p,
        Err(e) => {
            report.errors.push(format!("re-reading the drift policy: {e}"));
            Policy::Ignore
        }
    }
}

/// Checks (and with [`Policy::Repair`] re-applies) the objects of the completed lifecycle plans.
pub(crate) async fn check(
    ctx: &Context,
    ov: &OperatorVersion,
    base: &RenderContext,
    sourced: &crate::param_sources::Sourced,
    status: &InstanceStatus,
    policy: Policy,
    cluster: &ClusterObjects,
) -> DriftReport {
    let mut report = DriftReport::default();
    if policy == Policy::Ignore {
        return report;
    }
    let Some(objects) = desired_objects(ctx, ov, base, sourced, status, &mut report).await else {
        return report;
    };
    // `policy` was read when this reconcile started. Confirmed from the live Instance before
    // the first repair (see `live_policy`); `None` = not checked yet.
    let mut confirmed: Option<Policy> = None;
    for (
        ObjectId {
            kind,
            namespace: ns,
            name,
            ..
        },
        want,
    ) in objects
    {
        let what = if ns.is_empty() {
            format!("{kind} {name}")
        } else {
            format!("{kind} {ns}/{name}")
        };
        let (api, name, _) = match apply::api_for(ctx, &want).await {
            Ok(a) => a,
            Err(e) => {
                report.errors.push(format!("{what}: {e:?}"));
                continue;
            }
        };
        let (why, before_rv) = match drift_of(ctx, &api, &want, &kind, &ns, &name).await {
            Ok(Some(d)) => d,
            Ok(None) => continue,
            Err(e) => {
                report.errors.push(format!("{what}: {e}"));
                continue;
            }
        };
        report.drifted.push(format!("{what} ({why})"));
        if policy != Policy::Repair {
            continue;
        }
        if confirmed.is_none() {
            confirmed = Some(confirm_policy(ctx, base, &mut report).await);
        }
        if confirmed != Some(Policy::Repair) {
            continue;
        }
        match apply::apply_object(ctx, &want, cluster).await {
            Ok(after_rv) if after_rv != before_rv => report.repaired.push(Repaired {
                what: format!("{what} ({why})"),
                object: k8s_openapi::api::core::v1::ObjectReference {
                    api_version: want["apiVersion"].as_str().map(str::to_string),
                    kind: Some(kind.clone()),
                    namespace: Some(ns.clone()).filter(|n| !n.is_empty()),
                    name: Some(name.clone()),
                    ..Default::default()
                },
            }),
            Ok(_) => {}
            Err(e) => report.errors.push(format!("re-applying {what}: {e}")),
        }
    }
    report
}

/// Whether the object `want` describes drifted: `None` when the cluster has it as applied, else
/// why (`deleted`/`changed`) and the live resourceVersion. The watch cache clears an object that
/// is in sync; a missing or differing cached copy may be stale (e.g. right after our own
/// apply), so the server confirms the drift.
async fn drift_of(
    ctx: &Context,
    api: &kube::Api<crate::lean::Lean>,
    want: &Value,
    kind: &str,
    ns: &str,
    name: &str,
) -> Result<Option<(&'static str, Option<String>)>, kube::Error> {
    let av = want["apiVersion"].as_str().unwrap_or("");
    if let Some(Some(cached)) = ctx.caches.child(av, kind, ns, name)
        && is_subset(&comparable(want), &cached)
    {
        return Ok(None);
    }
    let live = api.get_opt(name).await?;
    let before_rv = live.as_ref().and_then(|l| l.0.metadata.resource_version.clone());
    let why = match &live {
        None => "deleted",
        Some(l) => {
            let lv = serde_json::to_value(l).unwrap_or(Value::Null);
            if is_subset(&comparable(want), &lv) {
                return Ok(None);
            }
            "changed"
        }
    };
    Ok(Some((why, before_rv)))
}

/// Whether namespace `ns` is being deleted. Nothing can be created in it any more (403 "being
/// terminated") and its objects, the Instance's OperatorVersion included, are going away on
/// purpose: drift repair and reports of missing objects would only be noise.
/// An unreadable namespace (e.g. a manager without the permission) counts as not terminating.
pub(crate) async fn namespace_terminating(ctx: &Context, ns: &str) -> bool {
    if ns.is_empty() {
        return false;
    }
    let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(ctx.cluster.client.clone());
    match api.get_opt(ns).await {
        Ok(Some(n)) => {
            n.metadata.deletion_timestamp.is_some()
                || n.status.and_then(|s| s.phase).as_deref() == Some("Terminating")
        }
        // Gone already: as good as terminating.
        Ok(None) => true,
        Err(e) => {
            tracing::debug!(namespace = ns, error = %e, "cannot read the namespace");
            false
        }
    }
}

/// The drift policy on the Instance as stored now. A reconcile reads the Instance once, at its
/// start, and reaches the drift check only after several requests; a policy switched to
/// `report` or `ignore` in between (e.g. just before a deliberate `kubectl scale`) must not be
/// overridden by a repair decided on the stale copy. The next reconcile (the annotation change
/// queues one) then reports with the new policy. A deleted Instance repairs nothing.
async fn live_policy(ctx: &Context, base: &RenderContext) -> Result<Policy, String> {
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        ctx.cluster.client.clone(),
        &base.namespace,
        &crate::resources::instance_resource(),
    );
    match api.get_opt(&base.instance_name).await {
        Ok(Some(i)) => Ok(Policy::from_annotations(&i.metadata.annotations.unwrap_or_default()).0),
        Ok(None) => Ok(Policy::Ignore),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn desired_state_follows_plan_order() {
        let r = |action: Action, name: &str, v: i64| RenderedObject {
            plan: "deploy".into(),
            phase: "p".into(),
            step: "s".into(),
            task: "t".into(),
            template: "x.yaml".into(),
            action,
            object: json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "ns"}, "data": {"v": v}}),
        };
        let mut objects = Vec::new();
        fold_desired(
            &mut objects,
            &[r(Action::Apply, "a", 1), r(Action::Apply, "b", 1)],
        );
        fold_desired(
            &mut objects,
            &[
                r(Action::Apply, "a", 2),
                r(Action::Delete, "b", 0),
                r(Action::PipePod, "c", 0),
            ],
        );
        let names: Vec<(&str, &Value)> = objects
            .iter()
            .map(|(id, o)| (id.name.as_str(), &o["data"]["v"]))
            .collect();
        assert_eq!(names, vec![("a", &json!(2))]);
        assert_eq!(objects[0].0.namespace, "ns");
    }

    #[test]
    fn subset_ignores_server_added_fields_but_not_changed_values() {
        let want = json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "n", "image": "nginx"}]}}}});
        let live = json!({"spec": {"replicas": 2, "strategy": {}, "template": {"spec": {"containers": [{"name": "n", "image": "nginx", "imagePullPolicy": "Always"}]}}}});
        assert!(is_subset(&want, &live));
        let scaled = json!({"spec": {"replicas": 5, "template": {"spec": {"containers": [{"name": "n", "image": "nginx"}]}}}});
        assert!(!is_subset(&want, &scaled));
        let extra_container = json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "n", "image": "nginx"}, {"name": "x"}]}}}});
        assert!(!is_subset(&want, &extra_container));
        assert!(is_subset(&json!({"a": 1}), &json!({"a": 1.0})));
        // the server stores quantities canonically
        assert!(is_subset(
            &json!({"cpu": 0.3, "memory": "1024Mi"}),
            &json!({"cpu": "300m", "memory": "1Gi"})
        ));
        assert!(!is_subset(&json!({"cpu": 0.3}), &json!({"cpu": "200m"})));
    }
}

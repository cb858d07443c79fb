//! The workload controllers of kube-controller-manager: ReplicaSet, Deployment, StatefulSet,
//! DaemonSet, Job and CronJob, one module each; the helpers they share are here.

mod cronjob;
mod daemonset;
mod deployment;
mod job;
mod replicaset;
mod statefulset;

pub use cronjob::cronjobs;
pub use daemonset::daemonsets;
pub use deployment::deployments;
pub use job::jobs;
pub use replicaset::replicasets;
pub use statefulset::statefulsets;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use crate::engine::{InvolvedObject, Sim, Snapshot, ar};
use crate::util::{created_ms, name_suffix, owner_ref, pod_phase, pod_ready, time_ms};

pub(super) const HASH_LABEL: &str = "pod-template-hash";
pub(super) const REVISION_ANN: &str = "deployment.kubernetes.io/revision";
pub(super) const STS_REVISION_LABEL: &str = "controller-revision-hash";

pub(super) fn name(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}
pub(super) fn ns(meta: &ObjectMeta) -> String {
    meta.namespace.clone().unwrap_or_default()
}
pub(super) fn uid(meta: &ObjectMeta) -> String {
    meta.uid.clone().unwrap_or_default()
}

pub(super) fn to_value<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

pub(super) fn status_of<T: serde::Serialize>(s: &Option<T>) -> Value {
    s.as_ref().map(to_value).unwrap_or_else(|| json!({}))
}

/// Pod JSON from a template: the template's labels/annotations/spec plus owner and extras.
pub(super) fn pod_from_template(
    template: &Value,
    namespace: &str,
    pod_name: &str,
    generate_name: Option<&str>,
    extra_labels: &[(&str, String)],
    extra_annotations: &[(&str, String)],
    owner: Value,
) -> Value {
    let mut metadata = json!({
        "name": pod_name,
        "namespace": namespace,
        "labels": template.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({})),
        "annotations": template.pointer("/metadata/annotations").cloned().unwrap_or_else(|| json!({})),
        "ownerReferences": [owner],
    });
    if let Some(g) = generate_name {
        metadata["generateName"] = json!(g);
    }
    if let Some(f) = template.pointer("/metadata/finalizers") {
        metadata["finalizers"] = f.clone();
    }
    for (k, v) in extra_labels {
        metadata["labels"][*k] = json!(v);
    }
    for (k, v) in extra_annotations {
        metadata["annotations"][*k] = json!(v);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
    })
}

/// Creates pods `<owner>-<suffix>` until `count` new ones were created, skipping taken names.
pub(super) async fn create_named_pods(
    sim: &mut Sim,
    snap: &Snapshot,
    owner: &InvolvedObject,
    count: i32,
    mut build: impl FnMut(&str) -> Value,
) {
    let mut created = 0;
    let mut n = 0u32;
    while created < count && n < 10_000 {
        let pod_name = format!("{}-{}", owner.name, name_suffix(&owner.uid, n));
        n += 1;
        if snap.has_pod(owner.namespace.as_deref(), &pod_name) {
            continue;
        }
        let obj = build(&pod_name);
        if sim.create(&ar::<Pod>(), owner.namespace.as_deref(), obj).await {
            sim.event(
                owner,
                "Normal",
                "SuccessfulCreate",
                &format!("Created pod: {pod_name}"),
                controller_of(&owner.kind),
                None,
                None,
            )
            .await;
        }
        created += 1;
    }
}

pub(super) fn controller_of(kind: &str) -> &'static str {
    match kind {
        "ReplicaSet" => "replicaset-controller",
        "Deployment" => "deployment-controller",
        "StatefulSet" => "statefulset-controller",
        "DaemonSet" => "daemonset-controller",
        "Job" => "job-controller",
        "CronJob" => "cronjob-controller",
        _ => "kudo-sim",
    }
}

/// Order in which a ReplicaSet gives up pods when scaling down: unscheduled, pending,
/// not ready, recently ready and newest first (the real controller's ranking, simplified).
pub(super) fn deletion_rank(p: &Pod) -> (u8, u8, u8, i64, i64, std::cmp::Reverse<String>) {
    let scheduled = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
    let phase = match pod_phase(p) {
        "Pending" => 0,
        "Running" => 2,
        _ => 1,
    };
    let ready_since = crate::util::pod_condition(p, "Ready")
        .filter(|c| c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(time_ms)
        .unwrap_or(0);
    (
        u8::from(scheduled),
        phase,
        u8::from(pod_ready(p)),
        -ready_since,
        -created_ms(&p.metadata),
        std::cmp::Reverse(name(&p.metadata)),
    )
}

/// ControllerRevision holding the template of a StatefulSet or DaemonSet revision, so
/// `kubectl rollout history` works and older revisions can be recreated.
pub(super) async fn ensure_revision<K: kube::Resource<DynamicType = ()>>(
    sim: &mut Sim,
    snap: &Snapshot,
    owner: &K,
    rev_name: &str,
    hash: &str,
    template: &Value,
) {
    let meta = owner.meta();
    if !snap.ready.revisions {
        return;
    }
    let mine: Vec<&ControllerRevision> = snap.revisions_of(meta);
    if mine.iter().any(|r| r.metadata.name.as_deref() == Some(rev_name)) {
        return;
    }
    let next = mine.iter().filter_map(|r| r.revision).max().unwrap_or(0) + 1;
    let mut labels = template
        .pointer("/metadata/labels")
        .cloned()
        .unwrap_or_else(|| json!({}));
    labels["controller.kubernetes.io/hash"] = json!(hash);
    let mut data_tmpl = template.clone();
    data_tmpl["$patch"] = json!("replace");
    let obj = json!({
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": rev_name,
            "namespace": meta.namespace,
            "labels": labels,
            "ownerReferences": [owner_ref(&K::api_version(&()), &K::kind(&()), meta)],
        },
        "data": {"spec": {"template": data_tmpl}},
        "revision": next,
    });
    sim.create(&ar::<ControllerRevision>(), meta.namespace.as_deref(), obj)
        .await;
}

/// An object a workload controller owns, as [`delete_owned`] removes it.
pub(super) struct Owned<'a> {
    /// Its kind's API resource.
    pub resource: &'a kube::api::ApiResource,
    /// Its namespace (the owner's).
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// The uid it had when the controller saw it, so a newer object of the name is never hit.
    pub uid: Option<&'a str>,
}

/// What a workload controller does when it removes an object it owns: delete it (guarded by its
/// uid so a newer object of the same name is never hit) and record its `SuccessfulDelete` Event
/// with the controller's own wording and component name.
pub(super) async fn delete_owned(
    sim: &mut Sim,
    owner: &InvolvedObject,
    owned: Owned<'_>,
    background: bool,
    message: &str,
    component: &str,
) {
    let Owned {
        resource,
        namespace,
        name,
        uid,
    } = owned;
    sim.delete(resource, Some(namespace), name, None, uid, background)
        .await;
    sim.event(
        owner,
        "Normal",
        "SuccessfulDelete",
        message,
        component,
        None,
        None,
    )
    .await;
}

//! The workload controllers of kube-controller-manager: ReplicaSet, Deployment, StatefulSet,
//! DaemonSet, Job and CronJob.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use crate::cron::Schedule;
use crate::engine::{InvolvedObject, Sim, Snapshot, ar};
use crate::rollout::{OldRs, fenceposts, scale_down_old, scale_up_new};
use crate::util::{
    Cond, created_ms, equiv, fmt_time, merge_conditions, merge_patch_changes, name_suffix, owner_ref,
    pod_active, pod_available, pod_available_at, pod_phase, pod_ready, scaled_int_or_percent, template_hash,
    time_ms,
};

const HASH_LABEL: &str = "pod-template-hash";
const REVISION_ANN: &str = "deployment.kubernetes.io/revision";
const STS_REVISION_LABEL: &str = "controller-revision-hash";

fn name(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}
fn ns(meta: &ObjectMeta) -> String {
    meta.namespace.clone().unwrap_or_default()
}
fn uid(meta: &ObjectMeta) -> String {
    meta.uid.clone().unwrap_or_default()
}

fn to_value<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

fn status_of<T: serde::Serialize>(s: &Option<T>) -> Value {
    s.as_ref().map(to_value).unwrap_or_else(|| json!({}))
}

/// Pod JSON from a template: the template's labels/annotations/spec plus owner and extras.
fn pod_from_template(
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
async fn create_named_pods(
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

fn controller_of(kind: &str) -> &'static str {
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
fn deletion_rank(p: &Pod) -> (u8, u8, u8, i64, i64, std::cmp::Reverse<String>) {
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

pub async fn replicasets(sim: &mut Sim, snap: &Snapshot) {
    if !(snap.ready.replicasets && snap.ready.pods) {
        return;
    }
    for rs in &snap.replicasets {
        if rs.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let spec = &rs.spec;
        let owner = InvolvedObject::of(rs.as_ref());
        let namespace = ns(&rs.metadata);
        let owned = snap.pods_of(&rs.metadata);
        let mut active: Vec<&Pod> = owned.iter().copied().filter(|p| pod_active(p)).collect();
        let want = spec.replicas.unwrap_or(1).max(0);
        let have = i32::try_from(active.len()).unwrap_or(i32::MAX);
        let template = spec.template.as_ref().map(to_value).unwrap_or_else(|| json!({}));
        if have < want {
            let oref = owner_ref("apps/v1", "ReplicaSet", &rs.metadata);
            let gen_name = format!("{}-", owner.name);
            create_named_pods(sim, snap, &owner, want - have, |pod_name| {
                pod_from_template(
                    &template,
                    &namespace,
                    pod_name,
                    Some(&gen_name),
                    &[],
                    &[],
                    oref.clone(),
                )
            })
            .await;
        } else if have > want {
            active.sort_by_key(|p| deletion_rank(p));
            let doomed: Vec<(String, String)> = active
                .iter()
                .take(usize::try_from(have - want).unwrap_or(0))
                .map(|p| (name(&p.metadata), uid(&p.metadata)))
                .collect();
            for (pod_name, pod_uid) in doomed {
                delete_owned(
                    sim,
                    &owner,
                    &namespace,
                    &ar::<Pod>(),
                    &pod_name,
                    Some(&pod_uid),
                    false,
                    &format!("Deleted pod: {pod_name}"),
                    "replicaset-controller",
                )
                .await;
            }
        }
        let min_ready = spec.min_ready_seconds.unwrap_or(0);
        let tmpl_labels = spec
            .template
            .as_ref()
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.labels.clone());
        let active: Vec<&Pod> = owned.iter().copied().filter(|p| pod_active(p)).collect();
        let count = |f: &dyn Fn(&Pod) -> bool| active.iter().filter(|p| f(p)).count();
        for p in &active {
            if let Some(at) = pod_available_at(p, min_ready)
                && at > sim.now
            {
                sim.wake_at(at);
            }
        }
        let now = sim.now;
        let status = json!({
            "replicas": active.len(),
            "fullyLabeledReplicas": count(&|p: &Pod| {
                tmpl_labels.iter().flatten().all(|(k, v)| p.metadata.labels.as_ref().and_then(|l| l.get(k)) == Some(v))
            }),
            "readyReplicas": count(&|p: &Pod| pod_ready(p)),
            "availableReplicas": count(&|p: &Pod| pod_available(p, min_ready, now)),
            "terminatingReplicas": owned.iter().filter(|p| p.metadata.deletion_timestamp.is_some()).count(),
            "observedGeneration": rs.metadata.generation.unwrap_or(0),
        });
        if merge_patch_changes(&status_of(&rs.status), &status) {
            sim.merge(
                &ar::<ReplicaSet>(),
                Some(&namespace),
                &owner.name,
                true,
                json!({ "status": status }),
            )
            .await;
        }
    }
}

fn revision_of(meta: &ObjectMeta) -> i64 {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(REVISION_ANN))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn strip_label(mut template: Value, label: &str) -> Value {
    if let Some(l) = template
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        l.remove(label);
    }
    template
}

pub async fn deployments(sim: &mut Sim, snap: &Snapshot) {
    if !(snap.ready.deployments && snap.ready.replicasets) {
        return;
    }
    for d in &snap.deployments {
        if d.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let spec = &d.spec;
        let owner = InvolvedObject::of(d.as_ref());
        let namespace = ns(&d.metadata);
        let desired = spec.replicas.unwrap_or(1).max(0);
        let template = to_value(&spec.template);
        let mut rss: Vec<&ReplicaSet> = snap.replicasets_of(&d.metadata);
        rss.sort_by_key(|r| (created_ms(&r.metadata), name(&r.metadata)));
        let new_rs = rss.iter().copied().find(|r| {
            let t = r.spec.template.as_ref().map(to_value).unwrap_or(Value::Null);
            equiv(&strip_label(t, HASH_LABEL), &template)
        });
        let olds: Vec<&ReplicaSet> = rss
            .iter()
            .copied()
            .filter(|r| Some(r.metadata.uid.as_ref()) != new_rs.map(|n| n.metadata.uid.as_ref()))
            .collect();
        let recreate = spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) == Some("Recreate");
        let ru = spec.strategy.as_ref().and_then(|s| s.rolling_update.as_ref());
        let (surge, unavail) = if recreate {
            (0, 0)
        } else {
            fenceposts(
                scaled_int_or_percent(ru.and_then(|r| r.max_surge.as_ref()), 25, desired, true),
                scaled_int_or_percent(ru.and_then(|r| r.max_unavailable.as_ref()), 25, desired, false),
            )
        };
        let paused = spec.paused == Some(true);
        let spec_replicas = |r: &ReplicaSet| r.spec.replicas.unwrap_or(1);
        let avail = |r: &ReplicaSet| r.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0);
        let max_old_rev = olds.iter().map(|r| revision_of(&r.metadata)).max().unwrap_or(0);

        let Some(new_rs) = new_rs else {
            if paused {
                sync_deployment_status(sim, d, None, &rss, desired, unavail).await;
                continue;
            }
            // New template: create its ReplicaSet.
            let hash = template_hash(&template, &[HASH_LABEL]);
            let rs_name = format!("{}-{hash}", owner.name);
            let old_total: i32 = olds.iter().map(|r| spec_replicas(r)).sum();
            let old_pods_alive = olds
                .iter()
                .any(|r| r.status.as_ref().map(|s| s.replicas).unwrap_or(0) > 0);
            let initial = if recreate {
                if old_total > 0 || old_pods_alive {
                    0
                } else {
                    desired
                }
            } else {
                scale_up_new(desired, surge, 0, old_total)
            };
            let mut rs_template = template.clone();
            rs_template["metadata"]["labels"][HASH_LABEL] = json!(hash);
            let mut selector = spec.selector.clone();
            selector
                .match_labels
                .get_or_insert_with(BTreeMap::new)
                .insert(HASH_LABEL.to_string(), hash.clone());
            let mut labels = spec
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone())
                .unwrap_or_default();
            labels.insert(HASH_LABEL.to_string(), hash.clone());
            let rev = (max_old_rev + 1).to_string();
            let obj = json!({
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": rs_name,
                    "namespace": namespace,
                    "labels": labels,
                    "annotations": {
                        REVISION_ANN: rev,
                        "deployment.kubernetes.io/desired-replicas": desired.to_string(),
                        "deployment.kubernetes.io/max-replicas": (desired + surge).to_string(),
                    },
                    "ownerReferences": [owner_ref("apps/v1", "Deployment", &d.metadata)],
                },
                "spec": {
                    "replicas": initial,
                    "minReadySeconds": spec.min_ready_seconds.unwrap_or(0),
                    "selector": to_value(&selector),
                    "template": rs_template,
                },
            });
            if sim.create(&ar::<ReplicaSet>(), Some(&namespace), obj).await {
                sim.event(
                    &owner,
                    "Normal",
                    "ScalingReplicaSet",
                    &format!("Scaled up replica set {rs_name} from 0 to {initial}"),
                    "deployment-controller",
                    None,
                    None,
                )
                .await;
                sim.merge(
                    &ar::<Deployment>(),
                    Some(&namespace),
                    &owner.name,
                    false,
                    json!({"metadata": {"annotations": {REVISION_ANN: rev}}}),
                )
                .await;
            }
            continue;
        };

        let new_name = name(&new_rs.metadata);
        // Keep the revision of the new ReplicaSet above all old ones (also after a rollback).
        let mut rev = revision_of(&new_rs.metadata);
        if rev <= max_old_rev {
            rev = max_old_rev + 1;
            sim.merge(
                &ar::<ReplicaSet>(),
                Some(&namespace),
                &new_name,
                false,
                json!({"metadata": {"annotations": {REVISION_ANN: rev.to_string()}}}),
            )
            .await;
        }
        if revision_of(&d.metadata) != rev {
            sim.merge(
                &ar::<Deployment>(),
                Some(&namespace),
                &owner.name,
                false,
                json!({"metadata": {"annotations": {REVISION_ANN: rev.to_string()}}}),
            )
            .await;
        }
        let new_replicas = spec_replicas(new_rs);
        let mut scale: Vec<(String, i32, i32)> = Vec::new(); // (rs, from, to)
        if !paused {
            if recreate {
                let old_running: i32 = olds
                    .iter()
                    .map(|r| r.status.as_ref().map(|s| s.replicas).unwrap_or(0))
                    .sum();
                for r in &olds {
                    if spec_replicas(r) > 0 {
                        scale.push((name(&r.metadata), spec_replicas(r), 0));
                    }
                }
                if scale.is_empty() && old_running == 0 && new_replicas != desired {
                    scale.push((new_name.clone(), new_replicas, desired));
                }
            } else {
                let all: i32 = rss.iter().map(|r| spec_replicas(r)).sum();
                let target = scale_up_new(desired, surge, new_replicas, all);
                if target != new_replicas {
                    scale.push((new_name.clone(), new_replicas, target));
                } else {
                    let old_view: Vec<OldRs> = olds
                        .iter()
                        .map(|r| OldRs {
                            replicas: spec_replicas(r),
                            available: avail(r),
                        })
                        .collect();
                    let targets = scale_down_old(desired, unavail, new_replicas, avail(new_rs), &old_view);
                    for (r, t) in olds.iter().zip(targets) {
                        if t != spec_replicas(r) {
                            scale.push((name(&r.metadata), spec_replicas(r), t));
                        }
                    }
                }
            }
        } else if olds.iter().all(|r| spec_replicas(r) == 0) && new_replicas != desired {
            // Paused deployments still scale.
            scale.push((new_name.clone(), new_replicas, desired));
        }
        for (rs_name, from, to) in scale {
            let mut patch = json!({"spec": {"replicas": to}});
            if rs_name == new_name {
                patch["metadata"] = json!({"annotations": {
                    "deployment.kubernetes.io/desired-replicas": desired.to_string(),
                    "deployment.kubernetes.io/max-replicas": (desired + surge).to_string(),
                }});
            }
            if sim
                .merge(&ar::<ReplicaSet>(), Some(&namespace), &rs_name, false, patch)
                .await
            {
                let verb = if to > from { "up" } else { "down" };
                sim.event(
                    &owner,
                    "Normal",
                    "ScalingReplicaSet",
                    &format!("Scaled {verb} replica set {rs_name} from {from} to {to}"),
                    "deployment-controller",
                    None,
                    None,
                )
                .await;
            }
        }
        // Old ReplicaSets beyond revisionHistoryLimit are deleted, oldest first.
        let limit = usize::try_from(spec.revision_history_limit.unwrap_or(10).max(0)).unwrap_or(10);
        let idle: Vec<&ReplicaSet> = olds
            .iter()
            .copied()
            .filter(|r| spec_replicas(r) == 0 && r.status.as_ref().map(|s| s.replicas).unwrap_or(0) == 0)
            .collect();
        if idle.len() > limit {
            for r in idle.iter().take(idle.len() - limit) {
                sim.delete(
                    &ar::<ReplicaSet>(),
                    Some(&namespace),
                    &name(&r.metadata),
                    None,
                    r.metadata.uid.as_deref(),
                    true,
                )
                .await;
            }
        }
        sync_deployment_status(sim, d, Some(new_rs), &rss, desired, unavail).await;
    }
}

async fn sync_deployment_status(
    sim: &mut Sim,
    d: &Deployment,
    new_rs: Option<&ReplicaSet>,
    rss: &[&ReplicaSet],
    desired: i32,
    max_unavailable: i32,
) {
    let st = |r: &ReplicaSet| r.status.clone().unwrap_or_default();
    let replicas: i32 = rss.iter().map(|r| st(r).replicas).sum();
    let spec_total: i32 = rss.iter().map(|r| r.spec.replicas.unwrap_or(1)).sum();
    let ready: i32 = rss.iter().map(|r| st(r).ready_replicas.unwrap_or(0)).sum();
    let available: i32 = rss.iter().map(|r| st(r).available_replicas.unwrap_or(0)).sum();
    let terminating: i32 = rss.iter().map(|r| st(r).terminating_replicas.unwrap_or(0)).sum();
    let updated = new_rs.map(|r| st(r).replicas).unwrap_or(0);
    let generation = d.metadata.generation.unwrap_or(0);
    let cur = status_of(&d.status);
    let spec = d.spec.clone();
    let new_name = new_rs.map(|r| name(&r.metadata)).unwrap_or_default();

    let available_cond = if available >= desired - max_unavailable {
        Cond::new(
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        Cond::new(
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    let complete = new_rs.is_some() && updated == desired && replicas == desired && available == desired;
    let deadline_ms = i64::from(spec.progress_deadline_seconds.unwrap_or(600)) * 1000;
    let prev = cur
        .get("conditions")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|c| c["type"] == "Progressing"))
        .cloned();
    let counts_changed = [
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
    ]
    .iter()
    .zip([replicas, updated, ready, available])
    .any(|(k, v)| cur.get(*k).and_then(Value::as_i64).unwrap_or(0) != i64::from(v));
    let progressing = if spec.paused == Some(true) {
        Cond::new(
            "Progressing",
            "Unknown",
            "DeploymentPaused",
            "Deployment is paused",
        )
    } else if complete {
        Cond::new(
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            format!("ReplicaSet \"{new_name}\" has successfully progressed."),
        )
    } else {
        let last = prev
            .as_ref()
            .and_then(|p| p.get("lastUpdateTime"))
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<k8s_openapi::jiff::Timestamp>().ok())
            .map(|t| t.as_millisecond());
        let timed_out = prev
            .as_ref()
            .is_some_and(|p| p["reason"] == "ProgressDeadlineExceeded")
            || (!counts_changed && last.is_some_and(|l| sim.now >= l + deadline_ms));
        if let Some(l) = last
            && !timed_out
        {
            sim.wake_at(l + deadline_ms);
        }
        if timed_out && !counts_changed {
            Cond::new(
                "Progressing",
                "False",
                "ProgressDeadlineExceeded",
                format!("ReplicaSet \"{new_name}\" has timed out progressing."),
            )
        } else {
            Cond::new(
                "Progressing",
                "True",
                "ReplicaSetUpdated",
                format!("ReplicaSet \"{new_name}\" is progressing."),
            )
        }
    };
    let mut conditions = merge_conditions(
        cur.get("conditions"),
        &[available_cond, progressing.clone()],
        &[],
        &sim.now_s,
        true,
    );
    // Progress (changing counts) refreshes lastUpdateTime of Progressing, which is what the
    // progress deadline is measured from.
    if counts_changed
        && progressing.reason == "ReplicaSetUpdated"
        && let Some(c) = conditions
            .as_array_mut()
            .and_then(|a| a.iter_mut().find(|c| c["type"] == "Progressing"))
    {
        c["lastUpdateTime"] = json!(sim.now_s);
    }
    // Keep the order real clusters show: Available, then Progressing.
    let status = json!({
        "observedGeneration": generation,
        "replicas": replicas,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": available,
        "unavailableReplicas": (spec_total - available).max(0),
        "terminatingReplicas": terminating,
        "conditions": conditions,
    });
    if merge_patch_changes(&cur, &status) {
        sim.merge(
            &ar::<Deployment>(),
            d.metadata.namespace.as_deref(),
            &name(&d.metadata),
            true,
            json!({ "status": status }),
        )
        .await;
    }
}

fn sts_ordinal(sts_name: &str, pod_name: &str) -> Option<i32> {
    pod_name.strip_prefix(sts_name)?.strip_prefix('-')?.parse().ok()
}

fn pvc_name(claim: &str, sts: &str, ordinal: i32) -> String {
    format!("{claim}-{sts}-{ordinal}")
}

pub async fn statefulsets(sim: &mut Sim, snap: &Snapshot) {
    if !(snap.ready.statefulsets && snap.ready.pods) {
        return;
    }
    for sts in &snap.statefulsets {
        if sts.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let spec = &sts.spec;
        let owner = InvolvedObject::of(sts.as_ref());
        let namespace = ns(&sts.metadata);
        let sts_name = owner.name.clone();
        let replicas = spec.replicas.unwrap_or(1).max(0);
        let start = spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0).max(0);
        let template = to_value(&spec.template);
        let hash = template_hash(&template, &[STS_REVISION_LABEL]);
        let update_rev = format!("{sts_name}-{hash}");
        sim.mem
            .revisions
            .insert((namespace.clone(), update_rev.clone()), template.clone());
        ensure_revision(sim, snap, sts.as_ref(), &update_rev, &hash, &template).await;
        let status = sts.status.clone().unwrap_or_default();
        let current_rev = status
            .current_revision
            .clone()
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| update_rev.clone());
        let rolling = spec
            .update_strategy
            .as_ref()
            .and_then(|u| u.type_.as_deref())
            .unwrap_or("RollingUpdate")
            == "RollingUpdate";
        let partition = if rolling {
            spec.update_strategy
                .as_ref()
                .and_then(|u| u.rolling_update.as_ref())
                .and_then(|r| r.partition)
                .unwrap_or(0)
                .max(0)
        } else {
            0
        };
        let monotonic = spec.pod_management_policy.as_deref() != Some("Parallel");
        let min_ready = spec.min_ready_seconds.unwrap_or(0);
        let owned = snap.pods_of(&sts.metadata);
        let by_ord: BTreeMap<i32, &Pod> = owned
            .iter()
            .filter_map(|p| sts_ordinal(&sts_name, &name(&p.metadata)).map(|o| (o, *p)))
            .collect();
        let in_range = |o: i32| o >= start && o < start + replicas;
        let rev_of = |p: &Pod| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(STS_REVISION_LABEL))
                .cloned()
                .unwrap_or_default()
        };
        let healthy = |p: &Pod| pod_ready(p) && p.metadata.deletion_timestamp.is_none();

        // 1. Create (or replace finished) pods in ordinal order.
        let mut blocked = false;
        for ord in start..start + replicas {
            match by_ord.get(&ord) {
                None => {
                    let use_current = rolling && (ord - start) < partition && current_rev != update_rev;
                    let (rev, tmpl) = if use_current {
                        match revision_template(sim, &namespace, &current_rev).await {
                            Some(t) => (current_rev.clone(), t),
                            None => (update_rev.clone(), template.clone()),
                        }
                    } else {
                        (update_rev.clone(), template.clone())
                    };
                    create_sts_pod(sim, snap, sts, ord, &rev, &tmpl).await;
                    if monotonic {
                        blocked = true;
                        break;
                    }
                }
                Some(p)
                    if matches!(pod_phase(p), "Failed" | "Succeeded")
                        && p.metadata.deletion_timestamp.is_none() =>
                {
                    let pod_name = name(&p.metadata);
                    sim.delete(
                        &ar::<Pod>(),
                        Some(&namespace),
                        &pod_name,
                        None,
                        p.metadata.uid.as_deref(),
                        false,
                    )
                    .await;
                    sim.event(
                        &owner,
                        "Warning",
                        "RecreatingFailedPod",
                        &format!("StatefulSet {namespace}/{sts_name} is recreating failed Pod {pod_name}"),
                        "statefulset-controller",
                        None,
                        None,
                    )
                    .await;
                    if monotonic {
                        blocked = true;
                        break;
                    }
                }
                Some(p) if monotonic && !healthy(p) => {
                    blocked = true;
                    break;
                }
                Some(_) => {}
            }
        }
        // 2. Scale down: highest ordinal first.
        let condemned: Vec<&Pod> = by_ord
            .iter()
            .rev()
            .filter(|(o, _)| !in_range(**o))
            .map(|(_, p)| *p)
            .collect();
        if !condemned.is_empty() && !blocked {
            let any_terminating = condemned.iter().any(|p| p.metadata.deletion_timestamp.is_some());
            let targets: Vec<&Pod> = if monotonic {
                if any_terminating {
                    vec![]
                } else {
                    condemned.iter().copied().take(1).collect()
                }
            } else {
                condemned
                    .iter()
                    .copied()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .collect()
            };
            for p in targets {
                let pod_name = name(&p.metadata);
                delete_owned(
                    sim,
                    &owner,
                    &namespace,
                    &ar::<Pod>(),
                    &pod_name,
                    p.metadata.uid.as_deref(),
                    false,
                    &format!("delete Pod {pod_name} in StatefulSet {sts_name} successful"),
                    "statefulset-controller",
                )
                .await;
            }
            blocked = monotonic;
        }
        // 3. Rolling update: highest ordinal first, one at a time, only when all are healthy.
        if rolling && !blocked {
            let all_there = (start..start + replicas).all(|o| by_ord.get(&o).is_some_and(|p| healthy(p)));
            if all_there
                && let Some((_, p)) = by_ord
                    .iter()
                    .rev()
                    .find(|(o, p)| in_range(**o) && (**o - start) >= partition && rev_of(p) != update_rev)
            {
                let pod_name = name(&p.metadata);
                delete_owned(
                    sim,
                    &owner,
                    &namespace,
                    &ar::<Pod>(),
                    &pod_name,
                    p.metadata.uid.as_deref(),
                    false,
                    &format!("delete Pod {pod_name} in StatefulSet {sts_name} successful"),
                    "statefulset-controller",
                )
                .await;
            }
        }
        // 4. PVC retention on scale down.
        let when_scaled_delete = spec
            .persistent_volume_claim_retention_policy
            .as_ref()
            .and_then(|p| p.when_scaled.as_deref())
            == Some("Delete");
        if when_scaled_delete {
            for claim in spec.volume_claim_templates.iter().flatten() {
                let claim_name = name(&claim.metadata);
                for pvc in &snap.pvcs {
                    let pn = name(&pvc.metadata);
                    if pvc.metadata.namespace.as_deref() != Some(&namespace)
                        || pvc.metadata.deletion_timestamp.is_some()
                    {
                        continue;
                    }
                    if let Some(o) = pn
                        .strip_prefix(&format!("{claim_name}-{sts_name}-"))
                        .and_then(|s| s.parse::<i32>().ok())
                        && !in_range(o)
                        && !by_ord.contains_key(&o)
                    {
                        sim.delete(
                            &ar::<PersistentVolumeClaim>(),
                            Some(&namespace),
                            &pn,
                            None,
                            None,
                            false,
                        )
                        .await;
                    }
                }
            }
        }
        // 5. Status.
        let mut st_replicas = 0;
        let mut ready = 0;
        let mut available = 0;
        let mut current = 0;
        let mut updated = 0;
        for p in by_ord.values() {
            if matches!(pod_phase(p), "Failed" | "Succeeded") {
                continue;
            }
            st_replicas += 1;
            if pod_ready(p) {
                ready += 1;
                if pod_available(p, min_ready, sim.now) {
                    available += 1;
                } else if let Some(at) = pod_available_at(p, min_ready) {
                    sim.wake_at(at);
                }
            }
            if p.metadata.deletion_timestamp.is_none() {
                let r = rev_of(p);
                if r == current_rev {
                    current += 1;
                }
                if r == update_rev {
                    updated += 1;
                }
            }
        }
        let (mut cur_rev_out, mut cur_count) = (current_rev.clone(), current);
        if updated == st_replicas && ready == st_replicas && st_replicas == replicas {
            cur_rev_out = update_rev.clone();
            cur_count = updated;
        }
        let status_json = json!({
            "observedGeneration": sts.metadata.generation.unwrap_or(0),
            "replicas": st_replicas,
            "readyReplicas": ready,
            "availableReplicas": available,
            "currentReplicas": cur_count,
            "updatedReplicas": updated,
            "currentRevision": cur_rev_out,
            "updateRevision": update_rev,
            "collisionCount": 0,
        });
        if merge_patch_changes(&status_of(&sts.status), &status_json) {
            sim.merge(
                &ar::<StatefulSet>(),
                Some(&namespace),
                &sts_name,
                true,
                json!({ "status": status_json }),
            )
            .await;
        }
    }
}

/// ControllerRevision holding the template of a StatefulSet or DaemonSet revision, so
/// `kubectl rollout history` works and older revisions can be recreated.
async fn ensure_revision<K: kube::Resource<DynamicType = ()>>(
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

/// What a workload controller does when it removes an object it owns: delete it (guarded by its
/// uid so a newer object of the same name is never hit) and record its `SuccessfulDelete` Event
/// with the controller's own wording and component name.
async fn delete_owned(
    sim: &mut Sim,
    owner: &InvolvedObject,
    namespace: &str,
    resource: &kube::api::ApiResource,
    name: &str,
    uid: Option<&str>,
    background: bool,
    message: &str,
    component: &str,
) {
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

async fn revision_template(sim: &mut Sim, namespace: &str, rev: &str) -> Option<Value> {
    if let Some(t) = sim.mem.revisions.get(&(namespace.to_string(), rev.to_string())) {
        return Some(t.clone());
    }
    let cr = sim.get(&ar::<ControllerRevision>(), Some(namespace), rev).await?;
    let mut t = cr.pointer("/data/spec/template")?.clone();
    if let Some(o) = t.as_object_mut() {
        o.remove("$patch");
    }
    sim.mem
        .revisions
        .insert((namespace.to_string(), rev.to_string()), t.clone());
    Some(t)
}

async fn create_sts_pod(
    sim: &mut Sim,
    snap: &Snapshot,
    sts: &StatefulSet,
    ord: i32,
    rev: &str,
    template: &Value,
) {
    let spec = &sts.spec;
    let owner = InvolvedObject::of(sts);
    let namespace = ns(&sts.metadata);
    let sts_name = owner.name.clone();
    let pod_name = format!("{sts_name}-{ord}");
    // Claims first, so the pod never starts without its volumes.
    let delete_with_set = spec
        .persistent_volume_claim_retention_policy
        .as_ref()
        .and_then(|p| p.when_deleted.as_deref())
        == Some("Delete");
    let mut volumes: Vec<Value> = template
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for claim in spec.volume_claim_templates.iter().flatten() {
        let claim_name = name(&claim.metadata);
        let pvc = pvc_name(&claim_name, &sts_name, ord);
        volumes.retain(|v| v["name"] != json!(claim_name));
        volumes.push(json!({"name": claim_name, "persistentVolumeClaim": {"claimName": pvc}}));
        let exists = snap
            .pvcs
            .iter()
            .any(|c| c.metadata.namespace.as_deref() == Some(&namespace) && name(&c.metadata) == pvc);
        if exists {
            continue;
        }
        let mut labels = claim.metadata.labels.clone().unwrap_or_default();
        for (k, v) in spec.selector.match_labels.iter().flatten() {
            labels.insert(k.clone(), v.clone());
        }
        let mut metadata = json!({
            "name": pvc,
            "namespace": namespace,
            "labels": labels,
            "annotations": claim.metadata.annotations.clone().unwrap_or_default(),
        });
        if delete_with_set {
            let mut o = owner_ref("apps/v1", "StatefulSet", &sts.metadata);
            o["controller"] = json!(false);
            metadata["ownerReferences"] = json!([o]);
        }
        let obj = json!({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": metadata,
            "spec": to_value(&claim.spec),
        });
        if sim
            .create(&ar::<PersistentVolumeClaim>(), Some(&namespace), obj)
            .await
        {
            sim.event(
                &owner,
                "Normal",
                "SuccessfulCreate",
                &format!("create Claim {pvc} Pod {pod_name} in StatefulSet {sts_name} success"),
                "statefulset-controller",
                None,
                None,
            )
            .await;
        }
    }
    let mut pod = pod_from_template(
        template,
        &namespace,
        &pod_name,
        None,
        &[
            (STS_REVISION_LABEL, rev.to_string()),
            ("statefulset.kubernetes.io/pod-name", pod_name.clone()),
            ("apps.kubernetes.io/pod-index", ord.to_string()),
        ],
        &[],
        owner_ref("apps/v1", "StatefulSet", &sts.metadata),
    );
    pod["spec"]["hostname"] = json!(pod_name);
    if let Some(svc) = spec.service_name.as_deref().filter(|s| !s.is_empty()) {
        pod["spec"]["subdomain"] = json!(svc);
    }
    if !volumes.is_empty() {
        pod["spec"]["volumes"] = Value::Array(volumes);
    }
    if sim.create(&ar::<Pod>(), Some(&namespace), pod).await {
        sim.event(
            &owner,
            "Normal",
            "SuccessfulCreate",
            &format!("create Pod {pod_name} in StatefulSet {sts_name} successful"),
            "statefulset-controller",
            None,
            None,
        )
        .await;
    }
}

pub async fn daemonsets(sim: &mut Sim, snap: &Snapshot) {
    if !(snap.ready.daemonsets && snap.ready.pods && snap.ready.nodes) {
        return;
    }
    for ds in &snap.daemonsets {
        if ds.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let spec = &ds.spec;
        let owner = InvolvedObject::of(ds.as_ref());
        let namespace = ns(&ds.metadata);
        let template = to_value(&spec.template);
        let hash = template_hash(&template, &[STS_REVISION_LABEL, "pod-template-generation"]);
        ensure_revision(
            sim,
            snap,
            ds.as_ref(),
            &format!("{}-{hash}", owner.name),
            &hash,
            &template,
        )
        .await;
        let node_selector = spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.node_selector.clone())
            .unwrap_or_default();
        let eligible: Vec<String> = snap
            .nodes
            .iter()
            .filter(|n| {
                node_selector
                    .iter()
                    .all(|(k, v)| n.metadata.labels.as_ref().and_then(|l| l.get(k)) == Some(v))
            })
            .map(|n| name(&n.metadata))
            .collect();
        let owned = snap.pods_of(&ds.metadata);
        let node_of = |p: &Pod| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default()
        };
        let is_updated =
            |p: &Pod| p.metadata.labels.as_ref().and_then(|l| l.get(STS_REVISION_LABEL)) == Some(&hash);
        let min_ready = spec.min_ready_seconds.unwrap_or(0);
        let oref = owner_ref("apps/v1", "DaemonSet", &ds.metadata);
        let generation = ds.metadata.generation.unwrap_or(0);
        // Missing pods, extra pods, pods on nodes that no longer qualify.
        for node in &eligible {
            let on_node: Vec<&Pod> = owned
                .iter()
                .copied()
                .filter(|p| node_of(p) == *node && pod_active(p))
                .collect();
            if on_node.is_empty() {
                let pod_name = format!(
                    "{}-{}",
                    owner.name,
                    crate::util::encode_hash(crate::util::fnv64(&[&owner.uid, node]), 5)
                );
                let mut pod = pod_from_template(
                    &template,
                    &namespace,
                    &pod_name,
                    Some(&format!("{}-", owner.name)),
                    &[
                        (STS_REVISION_LABEL, hash.clone()),
                        ("pod-template-generation", generation.to_string()),
                    ],
                    &[],
                    oref.clone(),
                );
                pod["spec"]["nodeName"] = json!(node);
                if sim.create(&ar::<Pod>(), Some(&namespace), pod).await {
                    sim.event(
                        &owner,
                        "Normal",
                        "SuccessfulCreate",
                        &format!("Created pod: {pod_name}"),
                        "daemonset-controller",
                        None,
                        None,
                    )
                    .await;
                }
            } else {
                for p in on_node.iter().skip(1) {
                    sim.delete(
                        &ar::<Pod>(),
                        Some(&namespace),
                        &name(&p.metadata),
                        None,
                        p.metadata.uid.as_deref(),
                        false,
                    )
                    .await;
                }
            }
        }
        for p in owned
            .iter()
            .filter(|p| pod_active(p) && !eligible.contains(&node_of(p)))
        {
            sim.delete(
                &ar::<Pod>(),
                Some(&namespace),
                &name(&p.metadata),
                None,
                p.metadata.uid.as_deref(),
                false,
            )
            .await;
        }
        // Rolling update within maxUnavailable.
        let rolling = spec
            .update_strategy
            .as_ref()
            .and_then(|u| u.type_.as_deref())
            .unwrap_or("RollingUpdate")
            == "RollingUpdate";
        let desired = i32::try_from(eligible.len()).unwrap_or(0);
        let active: Vec<&Pod> = owned
            .iter()
            .copied()
            .filter(|p| pod_active(p) && eligible.contains(&node_of(p)))
            .collect();
        if rolling {
            let max_unavail = scaled_int_or_percent(
                spec.update_strategy
                    .as_ref()
                    .and_then(|u| u.rolling_update.as_ref())
                    .and_then(|r| r.max_unavailable.as_ref()),
                0,
                desired,
                true,
            )
            .max(1);
            let unavailable = desired
                - i32::try_from(
                    active
                        .iter()
                        .filter(|p| pod_available(p, min_ready, sim.now))
                        .count(),
                )
                .unwrap_or(0);
            let mut budget = max_unavail - unavailable.max(0);
            let mut outdated: Vec<&Pod> = active.iter().copied().filter(|p| !is_updated(p)).collect();
            // Unavailable outdated pods go first: replacing them costs nothing.
            outdated.sort_by_key(|p| (pod_available(p, min_ready, sim.now), node_of(p)));
            for p in outdated {
                let free = !pod_available(p, min_ready, sim.now);
                if !free && budget <= 0 {
                    break;
                }
                if !free {
                    budget -= 1;
                }
                sim.delete(
                    &ar::<Pod>(),
                    Some(&namespace),
                    &name(&p.metadata),
                    None,
                    p.metadata.uid.as_deref(),
                    false,
                )
                .await;
            }
        }
        let count =
            |f: &dyn Fn(&Pod) -> bool| i32::try_from(active.iter().filter(|p| f(p)).count()).unwrap_or(0);
        let now = sim.now;
        let available = count(&|p: &Pod| pod_available(p, min_ready, now));
        for p in &active {
            if let Some(at) = pod_available_at(p, min_ready)
                && at > sim.now
            {
                sim.wake_at(at);
            }
        }
        let scheduled: HashSet<String> = active.iter().map(|p| node_of(p)).collect();
        let status = json!({
            "observedGeneration": generation,
            "desiredNumberScheduled": desired,
            "currentNumberScheduled": scheduled.len(),
            "numberMisscheduled": owned.iter().filter(|p| pod_active(p) && !eligible.contains(&node_of(p))).count(),
            "numberReady": count(&|p: &Pod| pod_ready(p)),
            "updatedNumberScheduled": count(&|p: &Pod| is_updated(p)),
            "numberAvailable": available,
            "numberUnavailable": (desired - available).max(0),
        });
        if merge_patch_changes(&status_of(&ds.status), &status) {
            sim.merge(
                &ar::<DaemonSet>(),
                Some(&namespace),
                &owner.name,
                true,
                json!({ "status": status }),
            )
            .await;
        }
    }
}

fn job_finished(status: &Value) -> Option<&'static str> {
    let conds = status.get("conditions").and_then(Value::as_array)?;
    for c in conds {
        if c["status"] == "True" {
            if c["type"] == "Complete" {
                return Some("Complete");
            }
            if c["type"] == "Failed" {
                return Some("Failed");
            }
        }
    }
    None
}

/// "0-2,5" style list of completed indexes, as in `status.completedIndexes`.
pub fn format_indexes(indexes: &[i32]) -> String {
    let mut v: Vec<i32> = indexes.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    out.join(",")
}

const INDEX_ANN: &str = "batch.kubernetes.io/job-completion-index";

fn pod_index(p: &Pod) -> Option<i32> {
    p.metadata.annotations.as_ref()?.get(INDEX_ANN)?.parse().ok()
}

pub async fn jobs(sim: &mut Sim, snap: &Snapshot) {
    if !(snap.ready.jobs && snap.ready.pods) {
        return;
    }
    for job in &snap.jobs {
        let Some(spec) = job.spec.as_ref() else { continue };
        let owner = InvolvedObject::of(job.as_ref());
        let namespace = ns(&job.metadata);
        let cur = status_of(&job.status);
        if let Some(done) = job_finished(&cur) {
            // TTL after finished.
            if let Some(ttl) = spec.ttl_seconds_after_finished
                && job.metadata.deletion_timestamp.is_none()
            {
                let finished_at = cur
                    .get("completionTime")
                    .and_then(Value::as_str)
                    .or_else(|| {
                        cur["conditions"]
                            .as_array()
                            .and_then(|a| a.iter().find(|c| c["type"] == done))
                            .and_then(|c| c["lastTransitionTime"].as_str())
                    })
                    .and_then(|s| s.parse::<k8s_openapi::jiff::Timestamp>().ok())
                    .map(|t| t.as_millisecond());
                if let Some(f) = finished_at {
                    let due = f + i64::from(ttl.max(0)) * 1000;
                    if sim.now >= due {
                        sim.delete(
                            &ar::<Job>(),
                            Some(&namespace),
                            &owner.name,
                            None,
                            job.metadata.uid.as_deref(),
                            true,
                        )
                        .await;
                    } else {
                        sim.wake_at(due);
                    }
                }
            }
            continue;
        }
        if job.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let owned = snap.pods_of(&job.metadata);
        let active: Vec<&Pod> = owned.iter().copied().filter(|p| pod_active(p)).collect();
        let ok_pods: Vec<&Pod> = owned
            .iter()
            .copied()
            .filter(|p| pod_phase(p) == "Succeeded")
            .collect();
        let failed_pods = owned.iter().filter(|p| pod_phase(p) == "Failed").count();
        let indexed = spec.completion_mode.as_deref() == Some("Indexed");
        let succeeded = i32::try_from(ok_pods.len())
            .unwrap_or(0)
            .max(job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0));
        let failed = i32::try_from(failed_pods)
            .unwrap_or(0)
            .max(job.status.as_ref().and_then(|s| s.failed).unwrap_or(0));
        let completions = spec.completions;
        let parallelism = spec.parallelism.unwrap_or(1).max(0);
        let backoff = spec.backoff_limit.unwrap_or(6).max(0);
        let suspended = spec.suspend == Some(true);
        let start_ms = job
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(time_ms)
            .unwrap_or(sim.now);
        let start_s = fmt_time(start_ms);
        let done_indexes: Vec<i32> = ok_pods.iter().filter_map(|p| pod_index(p)).collect();
        let succeeded_for_completion = if indexed {
            i32::try_from(done_indexes.iter().collect::<HashSet<_>>().len()).unwrap_or(0)
        } else {
            succeeded
        };

        let mut failure: Option<(&str, &str)> = None;
        if failed > backoff {
            failure = Some((
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            ));
        } else if let Some(ads) = spec.active_deadline_seconds
            && !suspended
        {
            let due = start_ms + ads * 1000;
            if sim.now >= due {
                failure = Some((
                    "DeadlineExceeded",
                    "Job was active longer than specified deadline",
                ));
            } else {
                sim.wake_at(due);
            }
        }
        let complete = failure.is_none()
            && match completions {
                Some(c) => succeeded_for_completion >= c,
                None => succeeded >= 1 && active.is_empty(),
            };
        let mut status = json!({
            "active": active.len(),
            "ready": active.iter().filter(|p| pod_ready(p)).count(),
            "succeeded": succeeded,
            "failed": failed,
            "terminating": owned.iter().filter(|p| p.metadata.deletion_timestamp.is_some()).count(),
            "uncountedTerminatedPods": {},
        });
        if !suspended || cur.get("startTime").is_some() {
            status["startTime"] = json!(start_s);
        }
        if indexed {
            status["completedIndexes"] = json!(format_indexes(&done_indexes));
        }
        if let Some((reason, message)) = failure {
            for p in &active {
                sim.delete(
                    &ar::<Pod>(),
                    Some(&namespace),
                    &name(&p.metadata),
                    None,
                    p.metadata.uid.as_deref(),
                    false,
                )
                .await;
            }
            status["active"] = json!(0);
            status["ready"] = json!(0);
            status["conditions"] = merge_conditions(
                cur.get("conditions"),
                &[
                    Cond::new("FailureTarget", "True", reason, message),
                    Cond::new("Failed", "True", reason, message),
                ],
                &[],
                &sim.now_s,
                true,
            );
            sim.event(&owner, "Warning", reason, message, "job-controller", None, None)
                .await;
        } else if complete {
            status["conditions"] = merge_conditions(
                cur.get("conditions"),
                &[
                    Cond::new(
                        "SuccessCriteriaMet",
                        "True",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                    ),
                    Cond::new(
                        "Complete",
                        "True",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                    ),
                ],
                &[],
                &sim.now_s,
                true,
            );
            status["completionTime"] = json!(sim.now_s);
            sim.event(
                &owner,
                "Normal",
                "Completed",
                "Job completed",
                "job-controller",
                None,
                None,
            )
            .await;
        } else if suspended {
            for p in &active {
                sim.delete(
                    &ar::<Pod>(),
                    Some(&namespace),
                    &name(&p.metadata),
                    None,
                    p.metadata.uid.as_deref(),
                    false,
                )
                .await;
            }
            status["conditions"] = merge_conditions(
                cur.get("conditions"),
                &[Cond::new("Suspended", "True", "JobSuspended", "Job suspended")],
                &[],
                &sim.now_s,
                true,
            );
        } else {
            if cur.pointer("/conditions").is_some() {
                status["conditions"] = merge_conditions(
                    cur.get("conditions"),
                    &[Cond::new("Suspended", "False", "JobResumed", "Job resumed")],
                    &[],
                    &sim.now_s,
                    true,
                );
            }
            let have = i32::try_from(active.len()).unwrap_or(0);
            let want = match completions {
                Some(c) => parallelism.min((c - succeeded_for_completion).max(0)),
                None => {
                    if succeeded > 0 {
                        0
                    } else {
                        parallelism
                    }
                }
            };
            let template = to_value(&spec.template);
            let job_uid = owner.uid.clone();
            let base_labels = vec![
                ("batch.kubernetes.io/controller-uid", job_uid.clone()),
                ("batch.kubernetes.io/job-name", owner.name.clone()),
                ("controller-uid", job_uid.clone()),
                ("job-name", owner.name.clone()),
            ];
            let oref = owner_ref("batch/v1", "Job", &job.metadata);
            if have < want {
                if indexed {
                    let busy: HashSet<i32> = active
                        .iter()
                        .filter_map(|p| pod_index(p))
                        .chain(done_indexes.iter().copied())
                        .collect();
                    let total = completions.unwrap_or(1);
                    let todo: Vec<i32> = (0..total)
                        .filter(|i| !busy.contains(i))
                        .take(usize::try_from(want - have).unwrap_or(0))
                        .collect();
                    for idx in todo {
                        let attempt = owned.iter().filter(|p| pod_index(p) == Some(idx)).count();
                        let prefix = format!("{}-{idx}", owner.name);
                        let pod_name = format!(
                            "{prefix}-{}",
                            name_suffix(&job_uid, u32::try_from(attempt).unwrap_or(0))
                        );
                        let mut labels = base_labels.clone();
                        labels.push((INDEX_ANN, idx.to_string()));
                        let mut pod = pod_from_template(
                            &template,
                            &namespace,
                            &pod_name,
                            Some(&format!("{prefix}-")),
                            &labels,
                            &[(INDEX_ANN, idx.to_string())],
                            oref.clone(),
                        );
                        pod["spec"]["hostname"] = json!(prefix);
                        if sim.create(&ar::<Pod>(), Some(&namespace), pod).await {
                            sim.event(
                                &owner,
                                "Normal",
                                "SuccessfulCreate",
                                &format!("Created pod: {pod_name}"),
                                "job-controller",
                                None,
                                None,
                            )
                            .await;
                        }
                    }
                } else {
                    let gen_name = format!("{}-", owner.name);
                    create_named_pods(sim, snap, &owner, want - have, |pod_name| {
                        pod_from_template(
                            &template,
                            &namespace,
                            pod_name,
                            Some(&gen_name),
                            &base_labels,
                            &[],
                            oref.clone(),
                        )
                    })
                    .await;
                }
            } else if have > want {
                let mut extra = active.clone();
                extra.sort_by_key(|p| deletion_rank(p));
                for p in extra.iter().take(usize::try_from(have - want).unwrap_or(0)) {
                    sim.delete(
                        &ar::<Pod>(),
                        Some(&namespace),
                        &name(&p.metadata),
                        None,
                        p.metadata.uid.as_deref(),
                        false,
                    )
                    .await;
                }
            }
        }
        if merge_patch_changes(&cur, &status) {
            sim.merge(
                &ar::<Job>(),
                Some(&namespace),
                &owner.name,
                true,
                json!({ "status": status }),
            )
            .await;
        }
    }
}

pub async fn cronjobs(sim: &mut Sim, snap: &Snapshot) {
    if !(snap.ready.cronjobs && snap.ready.jobs) {
        return;
    }
    for cj in &snap.cronjobs {
        if cj.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let spec = &cj.spec;
        let owner = InvolvedObject::of(cj.as_ref());
        let namespace = ns(&cj.metadata);
        let cur = status_of(&cj.status);
        let schedule = match Schedule::parse(&spec.schedule) {
            Ok(s) => s,
            Err(e) => {
                sim.event(
                    &owner,
                    "Warning",
                    "InvalidSchedule",
                    &format!("invalid schedule: {}: {e}", spec.schedule),
                    "cronjob-controller",
                    None,
                    None,
                )
                .await;
                continue;
            }
        };
        if let Some(tz) = spec.time_zone.as_deref()
            && !matches!(tz, "UTC" | "Etc/UTC" | "")
        {
            sim.event(
                &owner,
                "Warning",
                "UnsupportedTimeZone",
                &format!("time zone {tz:?} is simulated as UTC"),
                "cronjob-controller",
                None,
                None,
            )
            .await;
        }
        let mut mine: Vec<&Job> = snap.jobs_of(&cj.metadata);
        mine.sort_by_key(|j| (created_ms(&j.metadata), name(&j.metadata)));
        let finished = |j: &Job| job_finished(&status_of(&j.status));
        let active: Vec<&Job> = mine
            .iter()
            .copied()
            .filter(|j| finished(j).is_none() && j.metadata.deletion_timestamp.is_none())
            .collect();
        // History limits.
        for (kind, limit) in [
            ("Complete", spec.successful_jobs_history_limit.unwrap_or(3)),
            ("Failed", spec.failed_jobs_history_limit.unwrap_or(1)),
        ] {
            let done: Vec<&Job> = mine
                .iter()
                .copied()
                .filter(|j| finished(j) == Some(kind) && j.metadata.deletion_timestamp.is_none())
                .collect();
            let limit = usize::try_from(limit.max(0)).unwrap_or(0);
            if done.len() > limit {
                for j in done.iter().take(done.len() - limit) {
                    let job_name = name(&j.metadata);
                    delete_owned(
                        sim,
                        &owner,
                        &namespace,
                        &ar::<Job>(),
                        &job_name,
                        j.metadata.uid.as_deref(),
                        true,
                        &format!("Deleted job {job_name}"),
                        "cronjob-controller",
                    )
                    .await;
                }
            }
        }
        let mut last_schedule = cur
            .get("lastScheduleTime")
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut active_refs: Vec<Value> = active
            .iter()
            .map(|j| {
                json!({"apiVersion": "batch/v1", "kind": "Job", "name": name(&j.metadata),
                       "namespace": namespace, "uid": uid(&j.metadata),
                       "resourceVersion": j.metadata.resource_version})
            })
            .collect();
        if spec.suspend != Some(true) {
            let after = last_schedule
                .as_deref()
                .and_then(|s| s.parse::<k8s_openapi::jiff::Timestamp>().ok())
                .map(|t| t.as_millisecond())
                .unwrap_or_else(|| created_ms(&cj.metadata));
            if let Some(t) = schedule.latest_between(after, sim.now) {
                let too_late = spec
                    .starting_deadline_seconds
                    .is_some_and(|sds| sim.now - t > sds * 1000);
                let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
                let forbid = policy == "Forbid" && !active.is_empty();
                if too_late {
                    sim.event(
                        &owner,
                        "Warning",
                        "MissSchedule",
                        &format!("Missed scheduled time to start a job: {}", fmt_time(t)),
                        "cronjob-controller",
                        None,
                        None,
                    )
                    .await;
                } else if forbid {
                    sim.event(
                        &owner,
                        "Normal",
                        "JobAlreadyActive",
                        "Not starting job because prior execution is running and concurrency policy is Forbid",
                        "cronjob-controller",
                        None,
                        None,
                    )
                    .await;
                } else {
                    if policy == "Replace" {
                        for j in &active {
                            let job_name = name(&j.metadata);
                            delete_owned(
                                sim,
                                &owner,
                                &namespace,
                                &ar::<Job>(),
                                &job_name,
                                j.metadata.uid.as_deref(),
                                true,
                                &format!("Deleted job {job_name}"),
                                "cronjob-controller",
                            )
                            .await;
                        }
                        active_refs.clear();
                    }
                    let job_name = format!("{}-{}", owner.name, t / 60_000);
                    let jt = &spec.job_template;
                    let mut annotations = jt
                        .metadata
                        .as_ref()
                        .and_then(|m| m.annotations.clone())
                        .unwrap_or_default();
                    annotations.insert(
                        "batch.kubernetes.io/cronjob-scheduled-timestamp".into(),
                        fmt_time(t),
                    );
                    let obj = json!({
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "metadata": {
                            "name": job_name,
                            "namespace": namespace,
                            "labels": jt.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default(),
                            "annotations": annotations,
                            "ownerReferences": [owner_ref("batch/v1", "CronJob", &cj.metadata)],
                        },
                        "spec": to_value(&jt.spec),
                    });
                    if sim.create(&ar::<Job>(), Some(&namespace), obj).await {
                        sim.event(
                            &owner,
                            "Normal",
                            "SuccessfulCreate",
                            &format!("Created job {job_name}"),
                            "cronjob-controller",
                            None,
                            None,
                        )
                        .await;
                        active_refs.push(json!({"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "namespace": namespace}));
                        last_schedule = Some(fmt_time(t));
                    }
                }
            }
            if let Some(next) = schedule.next_after(sim.now) {
                sim.wake_at(next);
            }
        }
        let last_success = mine
            .iter()
            .filter(|j| finished(j) == Some("Complete"))
            .filter_map(|j| {
                j.status
                    .as_ref()
                    .and_then(|s| s.completion_time.as_ref())
                    .map(time_ms)
            })
            .max()
            .map(fmt_time)
            .or_else(|| {
                cur.get("lastSuccessfulTime")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
        let mut status = json!({ "active": active_refs });
        if let Some(l) = last_schedule {
            status["lastScheduleTime"] = json!(l);
        }
        if let Some(l) = last_success {
            status["lastSuccessfulTime"] = json!(l);
        }
        if merge_patch_changes(&cur, &status) {
            sim.merge(
                &ar::<CronJob>(),
                Some(&namespace),
                &owner.name,
                true,
                json!({ "status": status }),
            )
            .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_indexes_format() {
        assert_eq!(format_indexes(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(format_indexes(&[3]), "3");
        assert_eq!(format_indexes(&[]), "");
    }

    #[test]
    fn ordinals_and_claims() {
        assert_eq!(sts_ordinal("web", "web-12"), Some(12));
        assert_eq!(sts_ordinal("web", "web-x"), None);
        assert_eq!(sts_ordinal("web", "webby-1"), None);
        assert_eq!(pvc_name("data", "web", 0), "data-web-0");
    }
}

//! The Deployment controller: a ReplicaSet per pod template (`pod-template-hash`), rolling updates
//! and recreate, revisions, status and conditions.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use crate::engine::{InvolvedObject, Sim, Snapshot, ar};
use crate::rollout::{OldRs, fenceposts, scale_down_old, scale_up_new};
use crate::util::{
    Cond, created_ms, equiv, merge_conditions, merge_patch_changes, owner_ref, scaled_int_or_percent,
    template_hash,
};

use super::{HASH_LABEL, REVISION_ANN, name, ns, status_of, to_value};

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

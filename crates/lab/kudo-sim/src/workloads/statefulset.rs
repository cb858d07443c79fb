//! The StatefulSet controller: ordered pods with stable names, claims from `volumeClaimTemplates`,
//! ControllerRevisions, rolling updates by ordinal.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use serde_json::{Value, json};

use crate::engine::{InvolvedObject, Sim, Snapshot, ar};
use crate::util::{
    merge_patch_changes, owner_ref, pod_available, pod_available_at, pod_phase, pod_ready, template_hash,
};

use super::{
    Owned, STS_REVISION_LABEL, delete_owned, ensure_revision, name, ns, pod_from_template, status_of,
    to_value,
};

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
                    Owned {
                        resource: &ar::<Pod>(),
                        namespace: &namespace,
                        name: &pod_name,
                        uid: p.metadata.uid.as_deref(),
                    },
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
                    Owned {
                        resource: &ar::<Pod>(),
                        namespace: &namespace,
                        name: &pod_name,
                        uid: p.metadata.uid.as_deref(),
                    },
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_and_claims() {
        assert_eq!(sts_ordinal("web", "web-12"), Some(12));
        assert_eq!(sts_ordinal("web", "web-x"), None);
        assert_eq!(sts_ordinal("web", "webby-1"), None);
        assert_eq!(pvc_name("data", "web", 0), "data-web-0");
    }
}

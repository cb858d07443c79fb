//! The ReplicaSet controller: pods up to `spec.replicas`, surplus deleted in kube-controller-
//! manager's order, status counts.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use crate::engine::{InvolvedObject, Sim, Snapshot, ar};
use crate::util::{merge_patch_changes, owner_ref, pod_active, pod_available, pod_available_at, pod_ready};

use super::{
    Owned, create_named_pods, delete_owned, deletion_rank, name, ns, pod_from_template, status_of, to_value,
    uid,
};

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
                    Owned {
                        resource: &ar::<Pod>(),
                        namespace: &namespace,
                        name: &pod_name,
                        uid: Some(&pod_uid),
                    },
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

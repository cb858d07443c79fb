//! The DaemonSet controller: one pod per schedulable node, rolling updates through
//! ControllerRevisions.

use std::collections::HashSet;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use crate::engine::{InvolvedObject, Sim, Snapshot, ar};
use crate::util::{
    merge_patch_changes, owner_ref, pod_active, pod_available, pod_available_at, pod_ready,
    scaled_int_or_percent, template_hash,
};

use super::{STS_REVISION_LABEL, ensure_revision, name, ns, pod_from_template, status_of, to_value};

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

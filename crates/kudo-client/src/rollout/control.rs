//! `rollout pause|resume|abort`: one merge patch of the Rollout's spec each. `resume` also gives
//! the approval a wave waits for.

use kudo_engine::rollout::wave_phase;
use serde_json::json;

use super::{api, get, rollout_error};
use crate::Result;
use crate::cluster::{Cluster, patch_params};

/// What `resume` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumed {
    /// It was paused.
    pub unpaused: bool,
    /// The waves it approved (those waiting for approval).
    pub approved: Vec<String>,
}

async fn patch(cluster: &Cluster, name: &str, body: serde_json::Value) -> Result<()> {
    api(cluster)
        .patch(name, &patch_params(), &kube::api::Patch::Merge(&body))
        .await
        .map_err(|e| rollout_error(e, name))?;
    Ok(())
}

/// Stops the rollout from changing more Instances (those changing go on).
pub async fn pause(cluster: &Cluster, name: &str) -> Result<()> {
    patch(cluster, name, json!({"spec": {"paused": true}})).await
}

/// Lets a paused rollout go on, and approves every wave that waits for approval.
pub async fn resume(cluster: &Cluster, name: &str) -> Result<Resumed> {
    let r = get(cluster, name).await?;
    let waiting: Vec<String> = r
        .status
        .iter()
        .flat_map(|s| &s.waves)
        .filter(|w| w.phase == wave_phase::WAITING_FOR_APPROVAL)
        .map(|w| w.name.clone())
        .filter(|w| !r.spec.approved_waves.contains(w))
        .collect();
    let mut approved = r.spec.approved_waves.clone();
    approved.extend(waiting.iter().cloned());
    let rv = r.metadata.other.get("resourceVersion").cloned();
    patch(
        cluster,
        name,
        json!({"metadata": {"resourceVersion": rv}, "spec": {"paused": null, "approvedWaves": approved}}),
    )
    .await?;
    Ok(Resumed {
        unpaused: r.spec.paused,
        approved: waiting,
    })
}

/// Ends the rollout: no Instance is changed any more; it is Aborted once none is changing.
pub async fn abort(cluster: &Cluster, name: &str) -> Result<()> {
    patch(cluster, name, json!({"spec": {"abort": true}})).await
}

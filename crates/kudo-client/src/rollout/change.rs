//! The writes a rollout makes to one Instance (the manager's rollout controller calls these with
//! the decisions of [`kudo_engine::rollout::decide`]): the change, as `update`/`upgrade` write it,
//! plus the rollout's mark; and the cancellation of the rollout's own run before a rollback. Each
//! is guarded by the resourceVersion of the Instance the decision was made on, so a decision made
//! on a stale copy (another replica's write, or the rollout's own not seen yet) writes nothing.

use kudo_api::rollout::Target;
use kudo_api::{Instance, OperatorVersion};
use kudo_engine::rollout::{ROLLOUT_ANNOTATION, RolloutMark};
use serde_json::json;

use crate::checks::{check_values, refuse_denied};
use crate::cluster::{Cluster, KudoKind, api_error, patch_params};
use crate::{Error, Result};

fn resource_version(inst: &Instance) -> Option<serde_json::Value> {
    inst.metadata.other.get("resourceVersion").cloned()
}

/// One guarded merge patch of the Instance; a conflict is [`Error::Changed`].
async fn guarded(cluster: &Cluster, inst: &Instance, patch: serde_json::Value) -> Result<()> {
    let name = &inst.metadata.name;
    match cluster
        .api(KudoKind::Instance)
        .patch(name, &patch_params(), &kube::api::Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Err(Error::Changed(name.clone())),
        Err(e) => Err(api_error(e, KudoKind::Instance, name)),
    }
}

/// The OperatorVersion the change gives `inst` (`current` when the target names none).
async fn target_ov(
    cluster: &Cluster,
    inst: &Instance,
    target: &Target,
    current: &OperatorVersion,
) -> Result<OperatorVersion> {
    match target
        .operator_version
        .as_deref()
        .filter(|o| *o != current.metadata.name)
    {
        None => Ok(current.clone()),
        Some(_) => {
            let mut moved = inst.clone();
            moved.spec = kudo_engine::rollout::proposed(inst, target);
            cluster.operator_version_of(&moved).await
        }
    }
}

/// Writes the rollout's change of `inst` (in `cluster`'s namespace, as read): the target
/// OperatorVersion and parameter values, checked as `upgrade`/`update` check them (values against
/// the OperatorVersion, KUDO's admission rules), with `mark`, in one merge patch. An Instance a
/// typed object owns gets the mark (and the OperatorVersion) first and its parameters through the
/// typed object, as `update` changes it.
pub async fn change(cluster: &Cluster, inst: &Instance, target: &Target, mark: &RolloutMark) -> Result<()> {
    let current = cluster.operator_version_of(inst).await?;
    let new_ov = target_ov(cluster, inst, target, &current).await?;
    let proposed = kudo_engine::rollout::proposed(inst, target);
    check_values(&new_ov, &proposed.parameters, false)?;
    refuse_denied(inst, &proposed, &current, &new_ov)?;
    let typed = !target.parameters.is_empty() && crate::typed_api::owner_name(inst, &new_ov).is_some();
    let mut patch = json!({
        "metadata": {
            "resourceVersion": resource_version(inst),
            "annotations": {ROLLOUT_ANNOTATION: mark.to_annotation()},
        },
        "spec": {},
    });
    if proposed.operator_version != inst.spec.operator_version {
        patch["spec"]["operatorVersion"] = json!({"name": proposed.operator_version.name});
    }
    if !typed && !target.parameters.is_empty() {
        patch["spec"]["parameters"] = serde_json::to_value(&target.parameters)?;
    }
    guarded(cluster, inst, patch).await?;
    if typed {
        crate::typed_api::update_owner(
            cluster,
            inst,
            &new_ov,
            &target.parameters,
            &serde_json::Value::Null,
        )
        .await?;
    }
    Ok(())
}

/// Cancels the run `run` of `inst` (the rollout's own, before rolling it back): the patch of
/// `plan cancel`, written only while that run is the Instance's scheduled one.
pub async fn cancel(cluster: &Cluster, inst: &Instance, run: &str) -> Result<()> {
    if inst.spec.plan_execution.uid != run {
        return Err(Error::Changed(inst.metadata.name.clone()));
    }
    let mut patch = kudo_engine::reconcile::cancel_patch();
    patch["metadata"] = json!({"resourceVersion": resource_version(inst)});
    guarded(cluster, inst, patch).await
}

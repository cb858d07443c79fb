//! `rollback`: an Instance back to the values of one of its revisions. The decisions are
//! [`kudo_engine::rollback`]'s; this module reads the Instance, its revisions and
//! OperatorVersions, refuses before writing anything ([`prepare`]), and writes one merge patch
//! guarded by the Instance's resourceVersion ([`write`]). `kubectl kudo rollback` and the rollouts
//! of the manager (`onFailure: Rollback`) both go through here.

use std::collections::BTreeMap;
use std::time::Duration;

use kudo_api::{Instance, InstanceSpec, OperatorVersion};
use kudo_engine::revision::{ROLLBACK_ANNOTATION, Revision};
use kudo_engine::rollback::{self, Judged, RollbackMark};
use serde::Serialize;

use crate::cluster::{Cluster, KudoKind, api_error, patch_params};
use crate::{Error, Result};

/// What a rollback will write, judged before anything is.
#[derive(Debug, Clone)]
pub struct RollbackPlan {
    /// The revision rolled back to.
    pub target: Revision,
    /// The newest revision when the rollback was judged.
    pub from: u64,
    /// The spec the Instance gets.
    pub proposed: InstanceSpec,
    /// The plan that runs and whether a running plan blocks the rollback (`--force` cancels it).
    pub judged: Judged,
    /// The OperatorVersion the Instance runs, and the one the rollback restores.
    pub current_ov: OperatorVersion,
    /// The OperatorVersion of the revision rolled back to.
    pub target_ov: OperatorVersion,
}

fn refused(inst: &Instance, message: impl std::fmt::Display) -> Error {
    Error::RollbackRefused {
        instance: inst.metadata.name.clone(),
        message: message.to_string(),
    }
}

/// Reads what the rollback of `inst` to revision `to` (default: the newest whose plan completed
/// and whose values differ) needs and judges it; `Err` is the refusal (nothing was written).
pub async fn prepare(cluster: &Cluster, inst: &Instance, to: Option<u64>) -> Result<RollbackPlan> {
    let current_ov = cluster.operator_version_of(inst).await?;
    let revs = crate::revisions::of(&cluster.client, inst).await?;
    let target = rollback::target(&revs, &inst.spec, &current_ov, to).map_err(|e| refused(inst, e))?;
    let target_ov: OperatorVersion = cluster
        .get(KudoKind::OperatorVersion, &target.data.operator_version)
        .await?
        .ok_or_else(|| {
            refused(
                inst,
                format!(
                    "the OperatorVersion {} of revision {} no longer exists",
                    target.data.operator_version, target.number
                ),
            )
        })?;
    let proposed = rollback::restored_spec(&inst.spec, &target.data, &current_ov);
    let admitted = kudo_engine::reconcile::admitted_spec(inst);
    let judged = rollback::judge(
        inst,
        admitted.as_ref(),
        &proposed,
        &current_ov,
        &target_ov,
        target.number,
    )
    .map_err(|e| refused(inst, e))?;
    Ok(RollbackPlan {
        target: target.clone(),
        from: kudo_engine::revision::next_number(&revs) - 1,
        proposed,
        judged,
        current_ov,
        target_ov,
    })
}

/// KUDO's rule for a rollback while a plan runs: refused when [`prepare`] found a running plan
/// the rollback's plan would not restart (the CLI's `--force` cancels it first).
pub fn refuse_blocked(inst: &Instance, plan: &RollbackPlan) -> Result<()> {
    match &plan.judged.blocked_by {
        Some(running) => Err(Error::RollbackBlocked {
            instance: inst.metadata.name.clone(),
            running: running.clone(),
            plan: plan.judged.plan.clone(),
        }),
        None => Ok(()),
    }
}

/// The merge patch of a rollback: the restored values (a value the target lacks is removed), the
/// mark, and the resourceVersion the decision was made on.
fn rollback_patch(inst: &Instance, plan: &RollbackPlan) -> Result<serde_json::Value> {
    fn merged<V: Serialize + PartialEq>(
        old: &BTreeMap<String, V>,
        new: &BTreeMap<String, V>,
    ) -> Result<serde_json::Map<String, serde_json::Value>> {
        let mut m = serde_json::Map::new();
        for k in old.keys().filter(|k| !new.contains_key(*k)) {
            m.insert(k.clone(), serde_json::Value::Null);
        }
        for (k, v) in new.iter().filter(|(k, v)| old.get(*k) != Some(*v)) {
            m.insert(k.clone(), serde_json::to_value(v)?);
        }
        Ok(m)
    }
    let mark = RollbackMark {
        from: plan.from,
        to: plan.target.number,
        uid: None,
    };
    let p = &plan.proposed;
    Ok(serde_json::json!({
        "metadata": {
            "resourceVersion": inst.metadata.other.get("resourceVersion"),
            "annotations": {ROLLBACK_ANNOTATION: mark.to_annotation()},
        },
        "spec": {
            "operatorVersion": {"name": p.operator_version.name},
            "parameters": merged(&inst.spec.parameters, &p.parameters)?,
            "parameterSources": merged(&inst.spec.parameter_sources, &p.parameter_sources)?,
        },
    }))
}

/// Writes the rollback guarded by the resourceVersion it was judged on. The manager writes the
/// Instance's status while a plan runs, so a conflict is likely then: the Instance is read and the
/// rollback judged again (same target revision), a few times. Returns what was written.
pub async fn write(cluster: &Cluster, mut inst: Instance, mut plan: RollbackPlan) -> Result<RollbackPlan> {
    let api = cluster.api(KudoKind::Instance);
    let name = inst.metadata.name.clone();
    for _ in 0..10 {
        let patch = rollback_patch(&inst, &plan)?;
        match api
            .patch(&name, &patch_params(), &kube::api::Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(plan),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                inst = cluster.instance(&name).await?;
                let again = prepare(cluster, &inst, Some(plan.target.number)).await?;
                if let Some(running) = &again.judged.blocked_by {
                    return Err(refused(
                        &inst,
                        format!("plan '{running}' started meanwhile; try again"),
                    ));
                }
                plan = again;
            }
            Err(e) => return Err(api_error(e, KudoKind::Instance, &name)),
        }
    }
    Err(refused(
        &inst,
        "the Instance kept changing while the rollback was written; try again",
    ))
}

/// The Instance as it will be once its running plan is cancelled: no plan scheduled, in the spec
/// and in the spec the manager admitted (what a rollback after `--force` is judged on).
pub fn without_run(inst: &Instance) -> Result<Instance> {
    let mut calm = inst.clone();
    calm.spec.plan_execution = Default::default();
    if let Some(mut admitted) = kudo_engine::reconcile::admitted_spec(inst) {
        admitted.plan_execution = Default::default();
        calm.metadata.annotations.insert(
            kudo_engine::reconcile::ADMITTED_SPEC_ANNOTATION.to_string(),
            serde_json::to_string(&admitted)?,
        );
    }
    Ok(calm)
}

/// Cancels the running plan of Instance `name` (`plan cancel`) and waits, up to `timeout`, until
/// the manager has stopped it and cleared `spec.planExecution`. Returns the Instance as it is then.
pub async fn cancel_and_wait(
    cluster: &Cluster,
    name: &str,
    running: &str,
    timeout: Duration,
) -> Result<Instance> {
    cluster
        .merge_patch(KudoKind::Instance, name, kudo_engine::reconcile::cancel_patch())
        .await?;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let inst = cluster.instance(name).await?;
        let admitted = kudo_engine::reconcile::admitted_spec(&inst);
        let idle = |s: &InstanceSpec| s.plan_execution.plan_name.is_empty();
        if idle(&inst.spec) && admitted.as_ref().is_none_or(idle) {
            return Ok(inst);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(Error::NotCancelled {
                plan: running.to_string(),
                instance: name.to_string(),
                seconds: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

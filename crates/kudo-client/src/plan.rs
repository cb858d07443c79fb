//! Starting and stopping plans by hand: `plan trigger` (a fresh run of a plan, from the top, as
//! KUDO's), `plan retry` (the FATAL_ERROR run again from its first failed step) and `plan cancel`.
//! Triggers and retries are judged by KUDO's admission rules before anything is written, so a
//! refusal writes nothing.

use kudo_api::{Instance, InstanceSpec, OperatorVersion};

use crate::checks::refuse_denied;
use crate::cluster::{Cluster, KudoKind};
use crate::wait::PreviousRuns;
use crate::{Error, Result};

/// A `plan trigger`: the plan to run on which Instance.
#[derive(Debug, Clone)]
pub struct TriggerRequest {
    /// The Instance, in the cluster's namespace.
    pub instance: String,
    /// The plan to run.
    pub plan: String,
}

/// A checked trigger: the Instance and OperatorVersion read, the plan known to exist. A preview
/// (`--dry-run`) stops here; [`trigger`] writes it.
pub struct PreparedTrigger {
    /// The Instance as read.
    pub instance: Instance,
    /// The OperatorVersion it runs.
    pub operator_version: OperatorVersion,
    /// The plan to run.
    pub plan: String,
}

impl PreparedTrigger {
    /// The spec the trigger proposes (for a preview).
    pub fn proposed(&self) -> InstanceSpec {
        trigger_spec(&self.instance, &self.plan)
    }
}

/// What a trigger or retry wrote: the run a `--wait` follows is any not among `previous`.
#[derive(Debug, Clone)]
pub struct Triggered {
    /// The plan scheduled.
    pub plan: String,
    /// The runs the Instance knew before.
    pub previous: PreviousRuns,
}

/// What `plan retry` scheduled: the plan and the failed run it resumes.
#[derive(Debug, Clone)]
pub struct Retried {
    /// The retried plan and the failed run's uid.
    pub target: kudo_engine::retry::RetryTarget,
    /// The runs the Instance knew before.
    pub previous: PreviousRuns,
}

/// Reads the Instance and checks that its OperatorVersion has the plan. Writes nothing.
pub async fn prepare_trigger(cluster: &Cluster, req: &TriggerRequest) -> Result<PreparedTrigger> {
    let (instance, ov) = cluster.instance_and_operator_version(&req.instance).await?;
    if !ov.spec.plans.contains_key(&req.plan) {
        return Err(Error::UnknownPlan {
            plan: req.plan.clone(),
            operator_version: ov.metadata.name.clone(),
            known: ov.spec.plans.keys().cloned().collect(),
        });
    }
    Ok(PreparedTrigger {
        instance,
        operator_version: ov,
        plan: req.plan.clone(),
    })
}

/// Schedules a prepared trigger, unless KUDO's admission rules refuse it.
pub async fn trigger(cluster: &Cluster, prepared: &PreparedTrigger) -> Result<Triggered> {
    trigger_plan(
        cluster,
        &prepared.instance,
        &prepared.operator_version,
        &prepared.plan,
    )
    .await?;
    Ok(Triggered {
        plan: prepared.plan.clone(),
        previous: PreviousRuns::of(&prepared.instance),
    })
}

/// `plan cancel`: marks the plan scheduled on Instance `instance` CANCELLED (the manager stops it
/// at its next task boundary). Returns the plan's name; with no plan scheduled, nothing is
/// written.
pub async fn cancel(cluster: &Cluster, instance: &str) -> Result<String> {
    let inst = cluster.instance(instance).await?;
    let plan = inst.spec.plan_execution.plan_name;
    if plan.is_empty() {
        return Err(Error::NoPlanRunning {
            namespace: cluster.namespace.clone(),
            instance: instance.to_string(),
        });
    }
    cluster
        .merge_patch(
            KudoKind::Instance,
            instance,
            kudo_engine::reconcile::cancel_patch(),
        )
        .await?;
    Ok(plan)
}

/// `plan retry` of the Instance `instance` (`plan`: which plan, default the FATAL_ERROR one
/// updated last): see [`retry_plan`].
pub async fn retry(cluster: &Cluster, instance: &str, plan: Option<&str>) -> Result<Retried> {
    let (inst, ov) = cluster.instance_and_operator_version(instance).await?;
    let target = retry_plan(cluster, &inst, &ov, plan).await?;
    Ok(Retried {
        target,
        previous: PreviousRuns::of(&inst),
    })
}

/// `plan retry`: picks the failed run ([`kudo_engine::retry::target`]), checks that the manager
/// would admit the trigger (as `plan trigger` does), then writes the retry annotation and the
/// trigger in one merge patch ([`write_trigger`]). A refusal writes nothing.
pub async fn retry_plan(
    cluster: &Cluster,
    instance: &Instance,
    ov: &OperatorVersion,
    plan: Option<&str>,
) -> Result<kudo_engine::retry::RetryTarget> {
    let who = format!("{}/{}", cluster.namespace, instance.metadata.name);
    let status = instance.status.clone().unwrap_or_default();
    let target = kudo_engine::retry::target(&who, &instance.spec, &status, plan)?;
    if !ov.spec.plans.contains_key(&target.plan) {
        return Err(Error::RetriedPlanGone {
            plan: target.plan,
            operator_version: ov.metadata.name.clone(),
        });
    }
    write_trigger(cluster, instance, ov, &target.plan, Some(&target.failed_uid)).await?;
    Ok(target)
}

/// Schedules `plan` with a fresh uid (what KUDO's `plan trigger` wrote), unless KUDO's admission
/// rules refuse it (e.g. another plan is running): then nothing is written.
pub async fn trigger_plan(
    cluster: &Cluster,
    instance: &Instance,
    ov: &OperatorVersion,
    plan: &str,
) -> Result<()> {
    write_trigger(cluster, instance, ov, plan, None).await
}

/// Writes the direct trigger of `plan` ([`kudo_engine::reconcile::trigger_patch`]; `retry_of`: the
/// failed run a retry resumes) unless KUDO's admission rules refuse it.
async fn write_trigger(
    cluster: &Cluster,
    instance: &Instance,
    ov: &OperatorVersion,
    plan: &str,
    retry_of: Option<&str>,
) -> Result<()> {
    let proposed = trigger_spec(instance, plan);
    refuse_denied(instance, &proposed, ov, ov)?;
    let patch = kudo_engine::reconcile::trigger_patch(plan, &proposed.plan_execution.uid, retry_of);
    cluster
        .merge_patch(KudoKind::Instance, &instance.metadata.name, patch)
        .await
}

/// The spec `plan trigger` writes: `planExecution` naming `plan` with a fresh uid.
pub fn trigger_spec(instance: &Instance, plan: &str) -> InstanceSpec {
    let mut proposed = instance.spec.clone();
    proposed.plan_execution.plan_name = plan.to_string();
    proposed.plan_execution.uid = uuid::Uuid::new_v4().to_string();
    proposed
}

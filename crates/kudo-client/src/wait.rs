//! Waiting for a plan run to finish, shared by `--wait` flags, and waiting for an Instance's plans
//! to settle (`plan status --wait`), which reports every poll so the caller can redraw.

use std::collections::BTreeSet;
use std::time::Duration;

use kudo_api::{ExecutionStatus, Instance, OperatorVersion, PlanStatus};

use crate::cluster::Cluster;
use crate::{Error, Result};

/// How a waited-for run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The run of `plan` reached the terminal `status` (COMPLETE or a failure).
    Finished {
        /// The plan that ran.
        plan: String,
        /// Its terminal status.
        status: ExecutionStatus,
    },
}

/// The plan runs an Instance knew before a change, so a wait after the change follows a run the
/// change caused and never reports an earlier one.
///
/// The manager clears `spec.planExecution` when a run ends, so the scheduled uid alone is not
/// enough: every uid recorded in `status.planStatus` counts as previous too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreviousRuns {
    uids: BTreeSet<String>,
}

impl PreviousRuns {
    /// The runs `instance` shows (scheduled and recorded), read before the change is written.
    pub fn of(instance: &Instance) -> PreviousRuns {
        let mut uids: BTreeSet<String> = instance
            .status
            .iter()
            .flat_map(|s| s.plan_status.values())
            .map(|p| p.uid.clone())
            .collect();
        uids.insert(instance.spec.plan_execution.uid.clone());
        uids.remove("");
        PreviousRuns { uids }
    }

    /// Whether `uid` names a run that started after these (an empty uid names no run).
    pub fn is_new(&self, uid: &str) -> bool {
        !uid.is_empty() && !self.uids.contains(uid)
    }
}

/// The run a wait should follow: the scheduled plan when it is new, else the most recently
/// updated plan status whose run is new (a run that already ended is no longer scheduled).
fn current_run(instance: &Instance, previous: &PreviousRuns) -> Option<(String, ExecutionStatus)> {
    let pe = &instance.spec.plan_execution;
    let statuses = instance.status.as_ref().map(|s| &s.plan_status);
    if !pe.plan_name.is_empty() && previous.is_new(&pe.uid) {
        let st = match statuses.and_then(|s| s.get(&pe.plan_name)) {
            Some(p) if p.uid == pe.uid => p.status,
            _ => ExecutionStatus::Pending,
        };
        return Some((pe.plan_name.clone(), st));
    }
    statuses?
        .values()
        .filter(|p| previous.is_new(&p.uid))
        .max_by(|a, b| a.last_updated_timestamp.cmp(&b.last_updated_timestamp))
        .map(|p| (p.name.clone(), p.status))
}

/// Polls the Instance until a run that is not one of `previous` (any run when `None`, for a new
/// Instance) reaches a terminal status; an error once `timeout` has passed.
pub async fn wait_for_plan(
    cluster: &Cluster,
    name: &str,
    previous: Option<PreviousRuns>,
    timeout: Duration,
) -> Result<WaitOutcome> {
    let previous = previous.unwrap_or_default();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let instance = cluster.instance(name).await?;
        let run = current_run(&instance, &previous);
        if let Some((plan, status)) = &run
            && status.is_terminal()
        {
            return Ok(WaitOutcome::Finished {
                plan: plan.clone(),
                status: *status,
            });
        }
        if tokio::time::Instant::now() > deadline {
            let (seconds, instance) = (timeout.as_secs(), name.to_string());
            return Err(match run {
                Some((plan, status)) => Error::PlanTimeout {
                    seconds,
                    plan,
                    instance,
                    status,
                },
                None => Error::NoPlanStarted { seconds, instance },
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// How an Instance's plans settled ([`wait_until_settled`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// The manager refused the change (condition `ChangeAccepted=False`), with its message.
    Denied(String),
    /// The plan shown live finished; `failed` when it did not end COMPLETE.
    Finished {
        /// Whether the last executed plan did not finish successfully.
        failed: bool,
    },
}

/// The manager's verdict on a change it refused to run (condition `ChangeAccepted=False`).
fn denied_change(instance: &Instance) -> Option<String> {
    let status = instance.status.as_ref()?;
    status
        .conditions
        .iter()
        .find(|c| c.type_ == "ChangeAccepted" && c.status == "False")
        .map(|c| c.message.clone())
}

/// True when the plan shown live has finished, or the manager refused the change. An Instance on
/// which no plan ran yet is not settled: the manager may not have picked it up yet.
fn settled(instance: &Instance) -> bool {
    if denied_change(instance).is_some() {
        return true;
    }
    if !instance.spec.plan_execution.plan_name.is_empty() {
        return false;
    }
    last_executed_plan(instance).is_some_and(|p| p.status.is_terminal())
}

/// The run `spec.planExecution` schedules while the Instance's status does not show it yet (a
/// manager writes a run's status with its first waiting lines, or when it ends sooner): as the
/// manager will write it, every phase and step PENDING, the plan IN_PROGRESS once the manager
/// admitted it (else PENDING). `None` when no run is scheduled or the status shows it.
pub fn scheduled_run(instance: &Instance, ov: &OperatorVersion) -> Option<PlanStatus> {
    let pe = &instance.spec.plan_execution;
    if pe.plan_name.is_empty() || pe.uid.is_empty() {
        return None;
    }
    let shown = instance
        .status
        .as_ref()
        .and_then(|s| s.plan_status.get(&pe.plan_name));
    if shown.is_some_and(|p| p.uid == pe.uid) {
        return None;
    }
    // The run's tree from the OperatorVersion alone: the reset below overwrites everything a
    // previous run left in it.
    let mut status = kudo_api::InstanceStatus::default();
    kudo_engine::status::ensure_plan_statuses(&ov.spec, &mut status);
    let mut ps = status.plan_status.remove(&pe.plan_name)?;
    kudo_engine::status::reset_for_run(&mut ps, &pe.uid, kudo_engine::Timestamp::from_unix(0));
    ps.last_updated_timestamp = None;
    if pe.status == Some(ExecutionStatus::InProgress) {
        ps.status = ExecutionStatus::InProgress;
    }
    Some(ps)
}

/// The plan shown live (`plan status`, and what [`wait_until_settled`] judges): the running plan
/// updated last, else the plan that ran last.
pub fn last_executed_plan(instance: &Instance) -> Option<&PlanStatus> {
    let status = instance.status.as_ref()?;
    let running = status
        .plan_status
        .values()
        .filter(|p| p.status.is_running())
        .max_by(|a, b| a.last_updated_timestamp.cmp(&b.last_updated_timestamp));
    running.or_else(|| {
        status
            .plan_status
            .values()
            .filter(|p| p.status != ExecutionStatus::NeverRun && p.last_updated_timestamp.is_some())
            .max_by(|a, b| a.last_updated_timestamp.cmp(&b.last_updated_timestamp))
    })
}

/// Polls the Instance `name` (every 500 ms) until its plans settle ([`Settled`]), calling
/// `observe` with each poll's Instance and OperatorVersion and whether it is the last poll (settled,
/// or `timeout` passed), so the caller can redraw on each poll or print once at the end. An error
/// once `timeout` has passed, after the last `observe`.
pub async fn wait_until_settled(
    cluster: &Cluster,
    name: &str,
    timeout: Duration,
    observe: &mut dyn FnMut(&Instance, &OperatorVersion, bool) -> std::io::Result<()>,
) -> Result<Settled> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let (inst, ov) = cluster.instance_and_operator_version(name).await?;
        let done = settled(&inst);
        let timed_out = !done && tokio::time::Instant::now() > deadline;
        observe(&inst, &ov, done || timed_out)?;
        if done {
            if let Some(msg) = denied_change(&inst) {
                return Ok(Settled::Denied(msg));
            }
            let failed = last_executed_plan(&inst).is_some_and(|p| !p.status.is_finished());
            return Ok(Settled::Finished { failed });
        }
        if timed_out {
            return Err(Error::SettleTimeout {
                seconds: timeout.as_secs(),
                instance: name.to_string(),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(plan_execution: serde_json::Value, plan_status: serde_json::Value) -> Instance {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1",
            "kind": "Instance",
            "metadata": {"name": "i"},
            "spec": {"operatorVersion": {"name": "ov"}, "planExecution": plan_execution},
            "status": {"planStatus": plan_status},
        }))
        .expect("instance")
    }

    fn deploy(uid: &str, status: &str, at: &str) -> serde_json::Value {
        serde_json::json!({"deploy": {"name": "deploy", "status": status, "uid": uid, "lastUpdatedTimestamp": at}})
    }

    /// the manager Cleared planExecution after the last run, so the old code
    /// had an empty previous uid and took the previous COMPLETE run for the new one.
    #[test]
    fn a_finished_earlier_run_is_not_the_new_one() {
        let before = instance(
            serde_json::json!({}),
            deploy("u1", "COMPLETE", "2026-01-01T00:00:00Z"),
        );
        let previous = PreviousRuns::of(&before);
        // Right after the update, before the manager picked it up.
        assert_eq!(current_run(&before, &previous), None);
        // The manager scheduled the new run: followed while it is in progress.
        let running = instance(
            serde_json::json!({"planName": "deploy", "uid": "u2"}),
            deploy("u2", "IN_PROGRESS", "2026-01-01T00:01:00Z"),
        );
        assert_eq!(
            current_run(&running, &previous),
            Some(("deploy".into(), ExecutionStatus::InProgress))
        );
        // Scheduled, status not written yet: pending.
        let scheduled = instance(
            serde_json::json!({"planName": "deploy", "uid": "u2"}),
            deploy("u1", "COMPLETE", "2026-01-01T00:00:00Z"),
        );
        assert_eq!(
            current_run(&scheduled, &previous),
            Some(("deploy".into(), ExecutionStatus::Pending))
        );
        // Finished and unscheduled again: found through its status.
        let done = instance(
            serde_json::json!({}),
            deploy("u2", "FATAL_ERROR", "2026-01-01T00:02:00Z"),
        );
        assert_eq!(
            current_run(&done, &previous),
            Some(("deploy".into(), ExecutionStatus::FatalError))
        );
    }

    #[test]
    fn a_new_instance_follows_any_run() {
        let fresh = instance(serde_json::json!({}), serde_json::json!({}));
        let previous = PreviousRuns::default();
        assert_eq!(current_run(&fresh, &previous), None);
        let done = instance(
            serde_json::json!({}),
            deploy("u1", "COMPLETE", "2026-01-01T00:00:00Z"),
        );
        assert_eq!(
            current_run(&done, &previous),
            Some(("deploy".into(), ExecutionStatus::Complete))
        );
    }
}

//! `kubectl kudo rollback` (kudo-rs extension): which revision, which spec, which plan,
//! and whether a running plan is in the way. Pure; the CLI reads the revisions and writes the
//! spec, the controller admits it like any change and records the run as a new revision.
//!
//! A rollback is an ordinary change of the Instance spec (the target revision's parameters,
//! parameter sources and OperatorVersion) admitted by KUDO's rules ([`crate::triggers::decide`]),
//! plus a mark ([`crate::revision::ROLLBACK_ANNOTATION`]) that tells the manager two things: run
//! the package's `rollback` plan instead of the plan the trigger rules chose, when the package has
//! one; and record the run as started by a rollback. So everything KUDO refuses for a change
//! (an immutable parameter changed, an upgrade while a plan runs, another plan than the running
//! one) is refused for a rollback too — the CLI says so before writing, and `--force` cancels the
//! running plan first.

use kudo_api::{Instance, InstanceSpec, OperatorVersion, PlanExecution};
use serde::{Deserialize, Serialize};

use crate::revision::{ROLLBACK_PLAN, Revision, RevisionData, recorded_parameters};
use crate::triggers::{ChangeDenied, Decision, judge_client_change};

/// Why no rollback can be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RollbackError {
    /// The Instance has no revisions (it never ran a plan under kudo-rs's history).
    #[error("it has no recorded revisions (kudo-rs records every plan run from this version on)")]
    NoHistory,
    /// `--to-revision` names a revision that does not exist; holds it and the existing numbers.
    #[error("revision {0} does not exist (revisions: {1})")]
    NoSuchRevision(u64, String),
    /// The chosen revision has the current parameters and OperatorVersion already.
    #[error("revision {0} has the current parameters and OperatorVersion: nothing to roll back")]
    Unchanged(u64),
    #[error(
        "no earlier revision whose plan completed has other parameters or another OperatorVersion; name one with --to-revision"
    )]
    /// No earlier completed revision differs from the current spec, and none was named.
    NoTarget,
    /// KUDO's rules for a change refuse the rollback (not only because a plan is running).
    #[error("{0}")]
    Denied(String),
    /// The restored spec would trigger no plan (holds the target revision).
    #[error("the change to revision {0} would start no plan")]
    NoPlan(u64),
}

/// The mark `kubectl kudo rollback` writes on the Instance with the restored spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RollbackMark {
    /// The newest revision when the rollback was requested.
    pub from: u64,
    /// The revision rolled back to.
    pub to: u64,
    /// The run the manager admitted for it; absent until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

impl RollbackMark {
    /// Reads the mark from the annotation value; `None` when it is not a valid mark.
    pub fn parse(value: &str) -> Option<RollbackMark> {
        serde_json::from_str(value).ok()
    }

    /// The annotation value, JSON such as `{"from":5,"to":3}`.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The mark of a rollback not admitted yet: the next admitted run is the rollback's.
    pub fn pending(annotations: &std::collections::BTreeMap<String, String>) -> Option<RollbackMark> {
        let m = RollbackMark::parse(annotations.get(crate::revision::ROLLBACK_ANNOTATION)?)?;
        m.uid.is_none().then_some(m)
    }

    /// The mark on an Instance, admitted or not.
    pub fn of_any(annotations: &std::collections::BTreeMap<String, String>) -> Option<RollbackMark> {
        RollbackMark::parse(annotations.get(crate::revision::ROLLBACK_ANNOTATION)?)
    }

    /// The mark of the run `uid`, if that run is a rollback (for `.Rollback` in templates).
    pub fn of_run(
        annotations: &std::collections::BTreeMap<String, String>,
        uid: &str,
    ) -> Option<RollbackMark> {
        let m = RollbackMark::parse(annotations.get(crate::revision::ROLLBACK_ANNOTATION)?)?;
        (m.uid.as_deref() == Some(uid)).then_some(m)
    }
}

/// Whether the Instance's current values are those `data` recorded (`ov`: the OperatorVersion it
/// runs): a rollback to that revision would change nothing.
pub fn restores(data: &RevisionData, current: &InstanceSpec, ov: &OperatorVersion) -> bool {
    data.operator_version == current.operator_version.name
        && data.parameters == recorded_parameters(current, ov)
        && data.parameter_sources == current.parameter_sources
}

/// The revision to roll back to: `to` when given, else the newest revision whose plan completed
/// and whose values differ from the current ones (`ov`: the OperatorVersion the Instance runs).
pub fn target<'r>(
    revs: &'r [Revision],
    current: &InstanceSpec,
    ov: &OperatorVersion,
    to: Option<u64>,
) -> Result<&'r Revision, RollbackError> {
    if revs.is_empty() {
        return Err(RollbackError::NoHistory);
    }
    match to {
        Some(n) => {
            let Some(r) = revs.iter().find(|r| r.number == n) else {
                let have: Vec<String> = revs.iter().map(|r| r.number.to_string()).collect();
                return Err(RollbackError::NoSuchRevision(n, have.join(", ")));
            };
            if restores(&r.data, current, ov) {
                return Err(RollbackError::Unchanged(n));
            }
            Ok(r)
        }
        None => revs
            .iter()
            .rev()
            .find(|r| {
                r.outcome == Some(crate::revision::Outcome::Complete) && !restores(&r.data, current, ov)
            })
            .ok_or(RollbackError::NoTarget),
    }
}

/// The spec a rollback to `target` writes: its parameters and sources and its OperatorVersion;
/// plain values of parameters the current OperatorVersion marks sensitive (never recorded) stay
/// as they are, and so does everything else (plan execution, service account).
pub fn restored_spec(
    current: &InstanceSpec,
    target: &RevisionData,
    current_ov: &OperatorVersion,
) -> InstanceSpec {
    let mut spec = current.clone();
    let recorded = recorded_parameters(current, current_ov);
    spec.parameters.retain(|k, _| !recorded.contains_key(k));
    spec.parameters.extend(target.parameters.clone());
    spec.parameter_sources = target.parameter_sources.clone();
    spec.operator_version.name = target.operator_version.clone();
    spec
}

/// What a rollback will do, judged before anything is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    /// The plan KUDO's trigger rules choose for the change.
    pub triggered: String,
    /// The plan that runs: the package's `rollback` plan when it has one, else `triggered`.
    pub plan: String,
    /// A running plan KUDO's rules do not let this change through: `--force` cancels it first.
    pub blocked_by: Option<String>,
}

/// Judges rolling `stored` (last admitted spec `admitted`, OperatorVersion `old_ov`) back to
/// `proposed` (from [`restored_spec`], OperatorVersion `new_ov`) by KUDO's rules for a change.
pub fn judge(
    stored: &Instance,
    admitted: Option<&InstanceSpec>,
    proposed: &InstanceSpec,
    old_ov: &OperatorVersion,
    new_ov: &OperatorVersion,
    to: u64,
) -> Result<Judged, RollbackError> {
    let base = admitted.unwrap_or(&stored.spec);
    let running = running_plan(base);
    let triggered = match judge_client_change(stored, admitted, proposed, old_ov, new_ov) {
        Ok(d) => scheduled(d, to)?,
        Err(ChangeDenied(message)) => {
            // Denied: only because of the running plan (then --force helps), or for good?
            if running.is_none() {
                return Err(RollbackError::Denied(message));
            }
            let idle = |s: &InstanceSpec| InstanceSpec {
                plan_execution: PlanExecution::default(),
                ..s.clone()
            };
            let mut calm = stored.clone();
            calm.spec = idle(&stored.spec);
            let calm_admitted = idle(base);
            match judge_client_change(&calm, Some(&calm_admitted), &idle(proposed), old_ov, new_ov) {
                Ok(d) => scheduled(d, to)?,
                Err(_) => return Err(RollbackError::Denied(message)),
            }
        }
    };
    let plan = plan_for(&triggered, new_ov);
    let blocked_by = running
        .filter(|r| *r != triggered || *r != plan)
        .map(str::to_string);
    Ok(Judged {
        triggered,
        plan,
        blocked_by,
    })
}

fn scheduled(d: Decision, to: u64) -> Result<String, RollbackError> {
    match d {
        Decision::Schedule { plan, .. } => Ok(plan),
        _ => Err(RollbackError::NoPlan(to)),
    }
}

/// The plan scheduled or running by `spec`, if any.
fn running_plan(spec: &InstanceSpec) -> Option<&str> {
    let pe = &spec.plan_execution;
    (!pe.plan_name.is_empty() && !pe.status.is_some_and(|s| s.is_terminal())).then_some(pe.plan_name.as_str())
}

/// For the manager: the plan an admitted rollback runs instead of `triggered`.
pub fn plan_for(triggered: &str, ov: &OperatorVersion) -> String {
    if ov.spec.plans.contains_key(ROLLBACK_PLAN) {
        ROLLBACK_PLAN.to_string()
    } else {
        triggered.to_string()
    }
}

//! What an Instance's status says to readers that know Kubernetes' conventions but not KUDO:
//! kstatus (Flux `wait`/`healthChecks`, Helm 4 `--wait`, kpt, Config Sync), `kubectl wait
//! --for=condition=Ready` and Argo CD's health checks (kudo-rs extension).
//!
//! Every status the manager writes says which generation it speaks of
//! (`status.observedGeneration`, and `observedGeneration` on each condition it sets), and adds two
//! conditions with kstatus' "abnormal-true" polarity, present only while True (as Flux's own
//! controllers keep them):
//! * `Reconciling`: a run of the admitted spec is going on (reason: the plan; message: where it
//!   is), or the Instance waits for something to appear (its OperatorVersion).
//! * `Stalled`: the generation cannot become ready without a change: its run ended FATAL_ERROR
//!   (a lifecycle run was cancelled), its change was refused (KUDO's admission), or the Instance
//!   cannot be read at all. The message names the step and its error, or the refusal.
//!
//! `Ready` keeps KUDO's statuses, reasons and messages ([`crate::readiness`]); what is added is
//! its `observedGeneration`, which moves to the written generation only when `Ready` judged it:
//! a plan that leaves `Ready` alone (a backup) or a refused change leaves it on the generation it
//! last judged, so `kubectl wait --for=condition=Ready` (which ignores a condition older than
//! `metadata.generation`) returns only once the current generation's plan is COMPLETE.
//!
//! Written generations are never ahead of the object: a status is written with the generation
//! of the Instance it was decided on, or, after the reconcile's own spec write, the generation
//! that write returned ([`crate::readiness::reobserve`]).

use kudo_api::{Condition, ExecutionStatus, InstanceStatus, PlanStatus};

use crate::readiness::{
    CHANGE_ACCEPTED, CHANGE_DENIED, PLAN_IN_FATAL_ERROR, READY, last_failed_lifecycle_plan, latest_of,
    set_condition,
};
use crate::time::Timestamp;

/// Condition: a run of the admitted spec is going on, or the Instance waits to be able to run.
pub const RECONCILING: &str = "Reconciling";
/// Condition: the current generation cannot become ready without a change by the user.
pub const STALLED: &str = "Stalled";
/// `Stalled` reason: a lifecycle run (deploy, update, upgrade) was cancelled.
pub const PLAN_CANCELLED: &str = "PlanCancelled";

/// What the Instance is doing when its status is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity<'a> {
    /// The manager executes this run (the plan and its uid): running, or ended in this reconcile.
    Run {
        /// The plan being run.
        plan: &'a str,
        /// The run's `planExecution.uid`.
        uid: &'a str,
    },
    /// No plan is scheduled.
    Idle,
    /// Nothing can run (`reason`, `message`): until the user fixes something (`stalled`), or
    /// until something appears (an OperatorVersion applied after its Instance).
    Blocked {
        /// Reason of the `Stalled` condition when `stalled`, else of `Reconciling`.
        reason: &'a str,
        /// The condition's message.
        message: &'a str,
        /// Whether only a change by the user can unblock the Instance (`Stalled=True`).
        stalled: bool,
    },
}

/// Completes `new` (the status about to be written, decided from `old`, the status as stored) for
/// `activity`: `observedGeneration`, the `Reconciling` and `Stalled` conditions, and `Ready`'s
/// generation (see the module docs). Pure; the caller writes the result when it differs.
pub fn conclude(
    old: &InstanceStatus,
    new: &mut InstanceStatus,
    activity: &Activity<'_>,
    generation: Option<i64>,
    now: Timestamp,
) {
    new.observed_generation = generation;
    let denial = denial(&new.conditions);
    let reconciling = match activity {
        Activity::Run { plan, uid } => running(new, plan, uid),
        Activity::Blocked {
            reason,
            message,
            stalled: false,
        } => Some((reason.to_string(), message.to_string())),
        _ => None,
    };
    let stalled = match activity {
        Activity::Blocked {
            reason,
            message,
            stalled: true,
        } => Some((reason.to_string(), message.to_string())),
        _ => denial
            .clone()
            .map(|m| (CHANGE_DENIED.to_string(), m))
            .or_else(|| failed(new, activity)),
    };
    keep(&mut new.conditions, RECONCILING, reconciling, generation, now);
    keep(&mut new.conditions, STALLED, stalled, generation, now);
    if denial.is_some() {
        // A refused generation was not judged ready: Ready stays on the generation it had.
        let before = old.conditions.iter().find(|c| c.type_ == READY);
        if let Some(ready) = new.conditions.iter_mut().find(|c| c.type_ == READY) {
            ready.observed_generation = before.and_then(|c| c.observed_generation);
        }
    }
}

/// The message of this reconcile's refusal (`ChangeAccepted=False`), if any.
fn denial(conditions: &[Condition]) -> Option<String> {
    conditions
        .iter()
        .find(|c| c.type_ == CHANGE_ACCEPTED && c.status == "False")
        .map(|c| c.message.clone())
}

/// Sets `type_` True with `(reason, message)`, or removes it (`None`): the abnormal-true
/// conditions of every status the manager writes (also `kudo_engine::source::status`).
pub(crate) fn keep(
    conditions: &mut Vec<Condition>,
    type_: &str,
    value: Option<(String, String)>,
    generation: Option<i64>,
    now: Timestamp,
) {
    match value {
        Some((reason, message)) => {
            set_condition(
                conditions,
                Condition {
                    type_: type_.into(),
                    status: "True".into(),
                    observed_generation: generation,
                    last_transition_time: now.to_string(),
                    reason: reason_of(&reason),
                    message,
                },
            );
        }
        None => conditions.retain(|c| c.type_ != type_),
    }
}

/// A condition reason as metav1.Condition requires it (`[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?`):
/// other characters of a plan name become `_`, and a name not starting with a letter is prefixed.
///
/// ```
/// use kudo_engine::progress::reason_of;
/// assert_eq!(reason_of("deploy"), "deploy");
/// assert_eq!(reason_of("node-update"), "node_update");
/// assert_eq!(reason_of("2nd"), "Plan_2nd");
/// ```
pub fn reason_of(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_alphabetic()) {
        out.insert_str(0, "Plan_");
    }
    out
}

/// `Reconciling` of a run that has not ended: the plan as reason, the active steps as message.
fn running(status: &InstanceStatus, plan: &str, uid: &str) -> Option<(String, String)> {
    let Some(ps) = status.plan_status.get(plan).filter(|p| p.uid == uid) else {
        return Some((plan.to_string(), format!("plan {plan} is starting")));
    };
    if ps.status.is_terminal() {
        return None;
    }
    Some((plan.to_string(), position(ps)))
}

/// Where a running plan is: its first active step (`IN_PROGRESS` or `ERROR`, else the first
/// pending one) as `plan P, phase F, step S`, with a step's error and the number of other
/// active steps (parallel strategies).
fn position(ps: &PlanStatus) -> String {
    let steps: Vec<_> = ps
        .phases
        .iter()
        .flat_map(|ph| ph.steps.iter().map(move |st| (ph, st)))
        .collect();
    let active: Vec<_> = steps
        .iter()
        .filter(|(_, st)| matches!(st.status, ExecutionStatus::InProgress | ExecutionStatus::Error))
        .collect();
    let first = active.first().copied().or_else(|| {
        steps
            .iter()
            .find(|(_, st)| matches!(st.status, ExecutionStatus::Pending | ExecutionStatus::NeverRun))
    });
    let Some((ph, st)) = first else {
        return format!("plan {} is {}", ps.name, ps.status);
    };
    let mut msg = format!("plan {}, phase {}, step {}", ps.name, ph.name, st.name);
    if st.status == ExecutionStatus::Error && !st.message.is_empty() {
        msg.push_str(&format!(": {}", st.message));
    }
    if active.len() > 1 {
        msg.push_str(&format!(" (and {} more steps)", active.len() - 1));
    }
    msg
}

/// `Stalled` from the run the status speaks of: the executed run once it ended, or for an idle
/// Instance its last failed lifecycle run, else the run updated last. FATAL_ERROR stalls; so does
/// a cancelled lifecycle run, whose objects are left half-applied (KUDO's `Ready=Unknown`,
/// `PlanInFatalError`).
fn failed(status: &InstanceStatus, activity: &Activity<'_>) -> Option<(String, String)> {
    let ps = match activity {
        Activity::Run { plan, uid } => status.plan_status.get(*plan).filter(|p| p.uid == *uid)?,
        // A failed lifecycle run stands until the user acts, as KUDO's readiness says
        // (`Ready=Unknown`, `PlanInFatalError`), even when another plan ran since.
        Activity::Idle => match last_failed_lifecycle_plan(status) {
            Some(plan) => status.plan_status.get(&plan)?,
            None => latest_of(status.plan_status.values())?,
        },
        Activity::Blocked { .. } => return None,
    };
    match ps.status {
        ExecutionStatus::FatalError => Some((PLAN_IN_FATAL_ERROR.to_string(), failure(ps))),
        ExecutionStatus::Cancelled if matches!(ps.name.as_str(), "deploy" | "update" | "upgrade") => {
            let why = if ps.message.is_empty() {
                format!("plan {} was cancelled", ps.name)
            } else {
                ps.message.clone()
            };
            Some((PLAN_CANCELLED.to_string(), why))
        }
        _ => None,
    }
}

/// The failure of a FATAL_ERROR run: the failed step and its message (KUDO puts it there), else
/// the phase's or the plan's message.
fn failure(ps: &PlanStatus) -> String {
    for ph in &ps.phases {
        for st in &ph.steps {
            if st.status == ExecutionStatus::FatalError {
                let at = format!("plan {}, phase {}, step {}", ps.name, ph.name, st.name);
                return match [&st.message, &ph.message, &ps.message]
                    .into_iter()
                    .find(|m| !m.is_empty())
                {
                    Some(m) => format!("{at}: {m}"),
                    None => format!("{at} failed"),
                };
            }
        }
    }
    let detail = ps.phases.iter().map(|ph| &ph.message).find(|m| !m.is_empty());
    match detail.or((!ps.message.is_empty()).then_some(&ps.message)) {
        Some(m) => format!("plan {}: {m}", ps.name),
        None => format!("plan {} failed with a fatal error", ps.name),
    }
}

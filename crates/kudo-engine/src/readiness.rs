//! The Instance's `Ready` condition (KUDO KEP-34).
//!
//! While a plan runs, readiness follows the plan ([`plan_condition`]); when no plan is scheduled
//! the controller lists the instance's objects of [`IDLE_READINESS_KINDS`] (labels
//! `kudo.dev/instance=<name>,heritage=kudo`) and [`ready_condition`] judges them with
//! [`crate::health()`] — unless the last lifecycle run failed ([`idle_readiness`]).
//!
//! Difference from KUDO: Pods in phase `Succeeded` (finished Job pods) are ignored; KUDO counted
//! them as not ready, so operators that leave completed Job pods around never became Ready.

use kudo_api::{Condition, ExecutionStatus, InstanceStatus, PlanStatus};
use serde_json::Value;

use crate::health::{Health, health};
use crate::time::Timestamp;

/// The Instance's readiness condition type.
pub const READY: &str = "Ready";
/// `Ready=True` reason: the last plan completed or every watched object is healthy.
pub const RESOURCES_READY: &str = "ResourcesReady";
/// `Ready=False` reason: some of the Instance's objects are not healthy (the message says which).
pub const RESOURCE_NOT_READY: &str = "ResourceNotReady";
/// `Ready=Unknown` reason: a deploy, update or upgrade plan is running.
pub const PLAN_IN_PROGRESS: &str = "PlanInProgress";
/// `Ready=Unknown` reason: a plan ended in FATAL_ERROR (or a lifecycle plan was cancelled).
pub const PLAN_IN_FATAL_ERROR: &str = "PlanInFatalError";
/// Condition reporting a spec change KUDO's webhook would have rejected.
pub const CHANGE_ACCEPTED: &str = "ChangeAccepted";
/// Reason of `ChangeAccepted=False`.
pub const CHANGE_DENIED: &str = "ChangeDenied";

fn cond(status: &str, reason: &str, message: String, now: Timestamp) -> Condition {
    Condition {
        type_: READY.into(),
        status: status.into(),
        observed_generation: None,
        last_transition_time: now.to_string(),
        reason: reason.into(),
        message,
    }
}

/// `Ready=False` with `reason` and `message`: an Instance that cannot run at all (its
/// OperatorVersion is missing or unreadable, the Instance itself does not decode).
pub fn not_ready_condition(reason: &str, message: String, now: Timestamp) -> Condition {
    cond("False", reason, message, now)
}

/// The (group, kind)s of the objects KUDO's readiness (KEP-34) judges for an idle Instance. KUDO
/// listed ReplicaSets too, but judged every ReplicaSet healthy: they cannot change the verdict nor
/// its message, so they are neither read nor watched.
pub const IDLE_READINESS_KINDS: &[(&str, &str)] = &[
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("", "Pod"),
];

/// The most recently updated of deploy/update/upgrade when its last run ended in FATAL_ERROR.
pub fn last_failed_lifecycle_plan(status: &InstanceStatus) -> Option<String> {
    let lifecycle = ["deploy", "update", "upgrade"]
        .iter()
        .filter_map(|p| status.plan_status.get(*p));
    let latest = latest_of(lifecycle)?;
    (latest.status == ExecutionStatus::FatalError).then(|| latest.name.clone())
}

/// The plan status updated last among `plans` that ran (unparseable times count as oldest).
pub fn latest_of<'a>(plans: impl Iterator<Item = &'a PlanStatus>) -> Option<&'a PlanStatus> {
    plans
        .filter(|ps| ps.status != ExecutionStatus::NeverRun)
        .max_by_key(|ps| updated_at(ps))
}

/// When a plan status last changed, as Unix seconds (`i64::MIN` when unknown).
pub fn updated_at(ps: &PlanStatus) -> i64 {
    ps.last_updated_timestamp
        .as_deref()
        .and_then(|t| Timestamp::parse(t).ok())
        .map_or(i64::MIN, |t| t.unix())
}

/// The `Ready` condition of an idle Instance when it does not depend on its objects: a failed
/// lifecycle run keeps readiness Unknown until the user acts (healthy-looking leftovers of a
/// half-applied plan do not make it Ready; KUDO reported them as ready once the failed plan was
/// unscheduled). `None`: judge the objects of [`IDLE_READINESS_KINDS`] with [`ready_condition`].
pub fn idle_readiness(status: &InstanceStatus, now: Timestamp) -> Option<Condition> {
    let plan = last_failed_lifecycle_plan(status)?;
    Some(plan_condition(&plan, ExecutionStatus::FatalError, now).unwrap_or_else(|| ready_condition(&[], now)))
}

/// Ready condition of an idle instance from its live objects: True/ResourcesReady when every
/// object is healthy, otherwise False/ResourceNotReady with the messages of the unhealthy objects
/// joined by `", "` (KUDO's format).
pub fn ready_condition(objects: &[Value], now: Timestamp) -> Condition {
    let mut messages = Vec::new();
    for obj in objects {
        let is_pod = obj.get("kind").and_then(Value::as_str) == Some("Pod")
            && obj.get("apiVersion").and_then(Value::as_str) == Some("v1");
        if is_pod && obj.pointer("/status/phase").and_then(Value::as_str) == Some("Succeeded") {
            continue;
        }
        match health(obj) {
            Health::Healthy => {}
            Health::Progressing(m) | Health::Failed(m) => messages.push(m),
        }
    }
    if messages.is_empty() {
        cond("True", RESOURCES_READY, String::new(), now)
    } else {
        cond("False", RESOURCE_NOT_READY, messages.join(", "), now)
    }
}

/// Ready condition while a plan is scheduled, or `None` when KUDO leaves the condition alone:
/// deploy/update/upgrade in progress → Unknown/PlanInProgress (other plans, e.g. backup, do not
/// make a running instance unready); any plan in FATAL_ERROR → Unknown/PlanInFatalError; a plan
/// COMPLETE → True/ResourcesReady. CANCELLED (ours) → Unknown/PlanInFatalError for the plans that
/// mark progress, since the resources are in an unknown intermediate state.
pub fn plan_condition(plan: &str, status: ExecutionStatus, now: Timestamp) -> Option<Condition> {
    let lifecycle = matches!(plan, "deploy" | "update" | "upgrade");
    match status {
        ExecutionStatus::Complete => Some(cond("True", RESOURCES_READY, String::new(), now)),
        ExecutionStatus::FatalError => Some(cond(
            "Unknown",
            PLAN_IN_FATAL_ERROR,
            format!("Plan {plan} failed with a fatal error"),
            now,
        )),
        ExecutionStatus::Cancelled if lifecycle => Some(cond(
            "Unknown",
            PLAN_IN_FATAL_ERROR,
            format!("Plan {plan} was cancelled"),
            now,
        )),
        ExecutionStatus::NeverRun
        | ExecutionStatus::Pending
        | ExecutionStatus::InProgress
        | ExecutionStatus::Error
            if lifecycle =>
        {
            Some(cond(
                "Unknown",
                PLAN_IN_PROGRESS,
                format!("Plan {plan} is running"),
                now,
            ))
        }
        _ => None,
    }
}

/// Records this reconcile's admission outcome in `conditions`: a denial (KUDO's message) sets
/// `ChangeAccepted=False`; an admitted change removes the condition.
pub fn record_admission(
    conditions: &mut Vec<Condition>,
    denial: Option<&str>,
    generation: Option<i64>,
    now: Timestamp,
) {
    match denial {
        Some(msg) => {
            set_condition(
                conditions,
                Condition {
                    type_: CHANGE_ACCEPTED.into(),
                    status: "False".into(),
                    observed_generation: generation,
                    last_transition_time: now.to_string(),
                    reason: CHANGE_DENIED.into(),
                    message: msg.to_string(),
                },
            );
        }
        None => conditions.retain(|c| c.type_ != CHANGE_ACCEPTED),
    }
}

/// Inserts or updates a condition by type (Kubernetes `meta.SetStatusCondition` semantics):
/// `lastTransitionTime` only moves when the status value changes. Returns whether anything
/// changed, so the caller can skip a status write (KUDO writes only on change).
pub fn set_condition(conditions: &mut Vec<Condition>, new: Condition) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        None => {
            conditions.push(new);
            true
        }
        Some(existing) => {
            let mut changed = false;
            if existing.status != new.status {
                existing.status = new.status;
                existing.last_transition_time = new.last_transition_time;
                changed = true;
            }
            if existing.reason != new.reason {
                existing.reason = new.reason;
                changed = true;
            }
            if existing.message != new.message {
                existing.message = new.message;
                changed = true;
            }
            if existing.observed_generation != new.observed_generation {
                existing.observed_generation = new.observed_generation;
                changed = true;
            }
            changed
        }
    }
}

/// Moves every condition that says it observed generation `from` to `to`: a reconcile that
/// changed the spec itself (unscheduling a finished run) writes its status after that spec write,
/// whose generation `to` differs from the one read (`from`) only by the manager's own change, so
/// what was judged at `from` holds at `to`. Conditions of older generations are left alone. Never
/// called with a generation the object has not reached (see [`crate::progress`]).
pub fn reobserve(conditions: &mut [Condition], from: Option<i64>, to: Option<i64>) {
    for c in conditions.iter_mut().filter(|c| c.observed_generation == from) {
        c.observed_generation = to;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        Timestamp::parse("2024-05-01T10:00:00Z").unwrap()
    }

    fn deploy(name: &str, available: i64) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "generation": 1},
            "spec": {"replicas": 2}, "status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": available}})
    }

    #[test]
    fn reobserve_moves_only_the_conditions_of_the_generation_read() {
        let mut conds = vec![ready_condition(&[], now())];
        record_admission(&mut conds, Some("no"), Some(3), now());
        conds[0].observed_generation = Some(2);
        reobserve(&mut conds, Some(3), Some(4));
        let gens: Vec<_> = conds.iter().map(|c| c.observed_generation).collect();
        assert_eq!(gens, vec![Some(2), Some(4)]);
    }

    #[test]
    fn admission_outcome_sets_or_clears_change_accepted() {
        let mut conds = vec![ready_condition(&[], now())];
        record_admission(&mut conds, Some("no"), Some(3), now());
        let c = conds.iter().find(|c| c.type_ == CHANGE_ACCEPTED).unwrap();
        assert_eq!(
            (
                c.status.as_str(),
                c.reason.as_str(),
                c.message.as_str(),
                c.observed_generation
            ),
            ("False", CHANGE_DENIED, "no", Some(3))
        );
        assert_eq!(c.last_transition_time, "2024-05-01T10:00:00Z");
        record_admission(&mut conds, None, Some(4), now());
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].type_, READY);
    }

    #[test]
    fn all_healthy_is_ready() {
        let c = ready_condition(&[deploy("a", 2), deploy("b", 2)], now());
        assert_eq!(c.type_, "Ready");
        assert_eq!(c.status, "True");
        assert_eq!(c.reason, "ResourcesReady");
        assert_eq!(c.message, "");
        assert_eq!(c.last_transition_time, "2024-05-01T10:00:00Z");
        let empty = ready_condition(&[], now());
        assert_eq!(empty.status, "True");
    }

    #[test]
    fn unhealthy_messages_are_concatenated() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "status": {"phase": "Pending"}});
        let c = ready_condition(&[deploy("a", 1), deploy("ok", 2), pod], now());
        assert_eq!(c.status, "False");
        assert_eq!(c.reason, "ResourceNotReady");
        assert_eq!(
            c.message,
            "deployment \"a\" is not healthy: Waiting for deployment \"a\" rollout to finish: 1 of 2 updated replicas are available..., pod ns/p is not running yet: Pending"
        );
    }

    #[test]
    fn completed_job_pods_do_not_count() {
        let done = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "job-x", "namespace": "ns"}, "status": {"phase": "Succeeded"}});
        assert_eq!(ready_condition(&[done], now()).status, "True");
    }

    #[test]
    fn plan_conditions() {
        let c = plan_condition("deploy", ExecutionStatus::InProgress, now()).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("Unknown", "PlanInProgress")
        );
        assert!(plan_condition("backup", ExecutionStatus::InProgress, now()).is_none());
        let c = plan_condition("backup", ExecutionStatus::FatalError, now()).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("Unknown", "PlanInFatalError")
        );
        let c = plan_condition("update", ExecutionStatus::Complete, now()).unwrap();
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "ResourcesReady"));
        assert!(plan_condition("upgrade", ExecutionStatus::Cancelled, now()).is_some());
    }

    #[test]
    fn set_condition_keeps_transition_time_when_status_unchanged() {
        let mut conds = Vec::new();
        assert!(set_condition(&mut conds, ready_condition(&[], now())));
        let later = Timestamp::parse("2024-05-01T11:00:00Z").unwrap();
        assert!(!set_condition(&mut conds, ready_condition(&[], later)));
        assert_eq!(conds[0].last_transition_time, "2024-05-01T10:00:00Z");
        assert!(set_condition(
            &mut conds,
            ready_condition(&[deploy("a", 0)], later)
        ));
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].status, "False");
        assert_eq!(conds[0].last_transition_time, "2024-05-01T11:00:00Z");
        // reason/message changes without a status change keep the time
        let even_later = Timestamp::parse("2024-05-01T12:00:00Z").unwrap();
        assert!(set_condition(
            &mut conds,
            ready_condition(&[deploy("b", 0)], even_later)
        ));
        assert_eq!(conds[0].last_transition_time, "2024-05-01T11:00:00Z");
    }
}

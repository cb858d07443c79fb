//! Plan status bookkeeping around a run: the parts of KUDO's reconcile that shape
//! `Instance.status.planStatus` before the execution pass touches it.

use kudo_api::{
    ExecutionStatus, InstanceSpec, InstanceStatus, OperatorVersionSpec, PhaseStatus, PlanExecution,
    PlanStatus, StepStatus,
};

use crate::time::Timestamp;

/// Gives every plan of the OperatorVersion a status entry, and rebuilds the phase/step lists of
/// existing entries in the OV's current order.
///
/// Why rebuild: after an OV upgrade a plan may have gained, lost or reordered phases and steps;
/// the execution pass treats a missing phase/step status as FATAL ("missing phase status", KUDO
/// #1754), so the lists must follow the new OV while statuses of phases/steps that still exist
/// are kept by name (KUDO's fix #1755). New phases/steps start as NEVER_RUN. Entries of plans that
/// no longer exist in the OV are kept (they are history, nothing executes them).
///
/// Returns whether anything changed, so the caller can skip a status write.
pub fn ensure_plan_statuses(ov: &OperatorVersionSpec, status: &mut InstanceStatus) -> bool {
    let mut changed = false;
    for (plan_name, plan) in &ov.plans {
        let existing = status.plan_status.get(plan_name);
        let mut entry = match existing {
            Some(ps) => ps.clone(),
            None => PlanStatus {
                name: plan_name.clone(),
                status: ExecutionStatus::NeverRun,
                ..PlanStatus::default()
            },
        };
        if entry.name.is_empty() {
            entry.name = plan_name.clone();
        }
        let old_phases = std::mem::take(&mut entry.phases);
        for phase in &plan.phases {
            let old_phase = old_phases.iter().find(|p| p.name == phase.name);
            let mut ps = PhaseStatus {
                name: phase.name.clone(),
                status: old_phase.map_or(ExecutionStatus::NeverRun, |p| p.status),
                message: old_phase.map(|p| p.message.clone()).unwrap_or_default(),
                steps: Vec::with_capacity(phase.steps.len()),
            };
            for step in &phase.steps {
                let old_step = old_phase.and_then(|p| p.steps.iter().find(|s| s.name == step.name));
                ps.steps.push(StepStatus {
                    name: step.name.clone(),
                    status: old_step.map_or(ExecutionStatus::NeverRun, |s| s.status),
                    message: old_step.map(|s| s.message.clone()).unwrap_or_default(),
                    waiting_for: old_step.map(|s| s.waiting_for.clone()).unwrap_or_default(),
                });
            }
            entry.phases.push(ps);
        }
        if existing != Some(&entry) {
            changed = true;
            status.plan_status.insert(plan_name.clone(), entry);
        }
    }
    changed
}

/// True when `uid` names a run this status has not seen yet, i.e. [`reset_for_run`] is due.
pub fn needs_reset(plan_status: &PlanStatus, uid: &str) -> bool {
    plan_status.uid != uid
}

/// Starts a new run of a plan: a new `planExecution.uid` means "run again from scratch", so the
/// uid is stored and the plan, every phase and every step become PENDING with messages cleared
/// (KUDO's `ResetPlanStatus`). The controller emits KUDO's `PlanStarted` event at the first pass
/// (see [`crate::PassSummary::events`]).
pub fn reset_for_run(plan_status: &mut PlanStatus, uid: &str, now: Timestamp) {
    plan_status.uid = uid.to_string();
    plan_status.status = ExecutionStatus::Pending;
    plan_status.message.clear();
    plan_status.last_updated_timestamp = Some(now.to_string());
    for phase in &mut plan_status.phases {
        phase.status = ExecutionStatus::Pending;
        phase.message.clear();
        for step in &mut phase.steps {
            step.status = ExecutionStatus::Pending;
            step.message.clear();
            step.waiting_for.clear();
        }
    }
}

/// Marks a plan FATAL_ERROR for a failure found before any task could run (KUDO's controller-level
/// fatals: `InvalidPlan`, `InvalidParams`, `CircularDependency`): the message goes on the plan.
pub fn mark_plan_fatal(plan_status: &mut PlanStatus, message: &str, now: Timestamp) {
    plan_status.status = ExecutionStatus::FatalError;
    plan_status.message = message.to_string();
    plan_status.last_updated_timestamp = Some(now.to_string());
}

/// KUDO's requeue delay for a non-terminal plan: 1 s in the first minute after the plan status
/// last changed, growing by one second per minute up to 60 s. Health is polled, not watched, so a
/// plan waiting on a rollout needs this; a missing or unparseable timestamp gives the shortest delay.
pub fn requeue_after_secs(plan_status: &PlanStatus, now: Timestamp) -> u64 {
    let minutes = plan_status
        .last_updated_timestamp
        .as_deref()
        .and_then(|t| Timestamp::parse(t).ok())
        .map_or(0, |t| now.seconds_since(t).max(0) / 60);
    1 + minutes.min(59) as u64
}

/// Mirrors a pass's outcome into `spec.planExecution`: a finished plan is unscheduled, a running
/// one gets its status. Only the run being executed is touched in `spec` (a denied
/// planExecution edit is left alone). Returns the executed spec with the same change (what the
/// admitted-spec annotation should hold).
pub fn mirror_run_status(
    spec: &mut InstanceSpec,
    exec: &InstanceSpec,
    plan_status: ExecutionStatus,
) -> InstanceSpec {
    let mut e = exec.clone();
    if plan_status.is_terminal() {
        e.plan_execution = PlanExecution::default();
    } else {
        e.plan_execution.status = Some(plan_status);
    }
    if spec.plan_execution.uid == exec.plan_execution.uid {
        spec.plan_execution = e.plan_execution.clone();
    }
    e
}

/// How a pass's waits end, for [`pass_requeue_secs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Some task waits for something no watch reports (a transient error, a Dummy/Pipe task, a
    /// deletion, an unwatched kind): poll with KUDO's backoff.
    Poll,
    /// Every waiting task waits for a watched object of this Instance: its watch event triggers
    /// the next pass, and the timer is only a backstop of this many seconds.
    Watch {
        /// Seconds after which to pass again even without a watch event.
        backstop_secs: u64,
    },
}

/// When to look at a plan again after a pass: `None` once it is terminal; else KUDO's delay
/// ([`requeue_after_secs`]) when the pass must poll, or the backstop when a watch will wake it —
/// KUDO polled a running plan with a 1–60 s backoff, and polling 1,000 running Instances every
/// second was most of the manager's CPU in the `scale 1000` bench. Either is
/// shortened to the next step/plan timeout (`next_deadline`, at least 1 s away).
pub fn pass_requeue_secs(
    plan_status: &PlanStatus,
    wake: Wake,
    next_deadline: Option<Timestamp>,
    now: Timestamp,
) -> Option<u64> {
    if plan_status.status.is_terminal() {
        return None;
    }
    let mut secs = match wake {
        Wake::Poll => requeue_after_secs(plan_status, now),
        Wake::Watch { backstop_secs } => backstop_secs.max(1),
    };
    if let Some(d) = next_deadline {
        secs = secs.min(d.seconds_since(now).max(1) as u64);
    }
    Some(secs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kudo_api::{Phase, Plan, Step};

    #[test]
    fn run_status_is_mirrored_into_the_executed_run_only() {
        let run = |uid: &str| InstanceSpec {
            plan_execution: PlanExecution {
                plan_name: "deploy".into(),
                uid: uid.into(),
                status: None,
            },
            ..InstanceSpec::default()
        };
        let exec = run("a");
        let mut spec = run("a");
        let e = mirror_run_status(&mut spec, &exec, ExecutionStatus::InProgress);
        assert_eq!(e.plan_execution.status, Some(ExecutionStatus::InProgress));
        assert_eq!(spec.plan_execution, e.plan_execution);
        let e = mirror_run_status(&mut spec, &exec, ExecutionStatus::Complete);
        assert_eq!(e.plan_execution, PlanExecution::default());
        assert_eq!(spec.plan_execution, PlanExecution::default());
        // a denied edit scheduled another run: the stored spec keeps it
        let mut denied = run("b");
        let e = mirror_run_status(&mut denied, &exec, ExecutionStatus::Complete);
        assert_eq!(denied, run("b"));
        assert_eq!(e.plan_execution, PlanExecution::default());
    }

    #[test]
    fn pass_requeue_follows_kudo_then_the_next_deadline() {
        let now = Timestamp::parse("2024-05-01T10:10:00Z").unwrap();
        let mut ps = PlanStatus {
            status: ExecutionStatus::InProgress,
            last_updated_timestamp: Some("2024-05-01T10:00:00Z".into()),
            ..PlanStatus::default()
        };
        let poll = Wake::Poll;
        assert_eq!(pass_requeue_secs(&ps, poll, None, now), Some(11));
        assert_eq!(
            pass_requeue_secs(&ps, poll, Some(now.plus_seconds(4)), now),
            Some(4)
        );
        assert_eq!(pass_requeue_secs(&ps, poll, Some(now), now), Some(1));
        assert_eq!(
            pass_requeue_secs(&ps, poll, Some(now.plus_seconds(600)), now),
            Some(11)
        );
        ps.status = ExecutionStatus::Complete;
        assert_eq!(pass_requeue_secs(&ps, poll, Some(now.plus_seconds(4)), now), None);
    }

    #[test]
    fn pass_requeue_waits_for_the_watch_with_a_backstop_and_keeps_deadlines() {
        let now = Timestamp::parse("2024-05-01T10:10:00Z").unwrap();
        let mut ps = PlanStatus {
            status: ExecutionStatus::InProgress,
            last_updated_timestamp: Some("2024-05-01T10:10:00Z".into()),
            ..PlanStatus::default()
        };
        let watch = Wake::Watch { backstop_secs: 60 };
        // Just updated: KUDO would poll in about a second; a watched wait needs only the backstop.
        assert!(pass_requeue_secs(&ps, Wake::Poll, None, now).unwrap() < 60);
        assert_eq!(pass_requeue_secs(&ps, watch, None, now), Some(60));
        assert_eq!(
            pass_requeue_secs(&ps, watch, Some(now.plus_seconds(7)), now),
            Some(7)
        );
        assert_eq!(
            pass_requeue_secs(&ps, Wake::Watch { backstop_secs: 0 }, None, now),
            Some(1)
        );
        ps.status = ExecutionStatus::FatalError;
        assert_eq!(pass_requeue_secs(&ps, watch, None, now), None);
    }
    use std::collections::BTreeMap;

    fn plan(phases: &[(&str, &[&str])]) -> Plan {
        Plan {
            phases: phases
                .iter()
                .map(|(n, steps)| Phase {
                    name: n.to_string(),
                    steps: steps
                        .iter()
                        .map(|s| Step {
                            name: s.to_string(),
                            ..Step::default()
                        })
                        .collect(),
                    ..Phase::default()
                })
                .collect(),
            ..Plan::default()
        }
    }

    fn ov(plans: Vec<(&str, Plan)>) -> OperatorVersionSpec {
        OperatorVersionSpec {
            plans: plans
                .into_iter()
                .map(|(n, p)| (n.to_string(), p))
                .collect::<BTreeMap<_, _>>(),
            ..Default::default()
        }
    }

    fn now() -> Timestamp {
        Timestamp::parse("2024-01-01T00:00:00Z").unwrap()
    }

    #[test]
    fn every_plan_gets_never_run_entry() {
        let ov = ov(vec![
            ("deploy", plan(&[("main", &["a", "b"])])),
            ("backup", plan(&[("p", &["s"])])),
        ]);
        let mut st = InstanceStatus::default();
        assert!(ensure_plan_statuses(&ov, &mut st));
        let d = &st.plan_status["deploy"];
        assert_eq!(d.name, "deploy");
        assert_eq!(d.status, ExecutionStatus::NeverRun);
        assert_eq!(d.phases.len(), 1);
        assert_eq!(d.phases[0].name, "main");
        assert_eq!(d.phases[0].status, ExecutionStatus::NeverRun);
        assert_eq!(
            d.phases[0]
                .steps
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert!(
            d.phases[0]
                .steps
                .iter()
                .all(|s| s.status == ExecutionStatus::NeverRun)
        );
        assert_eq!(st.plan_status["backup"].phases[0].steps[0].name, "s");
        // idempotent
        assert!(!ensure_plan_statuses(&ov, &mut st));
    }

    #[test]
    fn upgrade_rebuilds_in_new_order_keeping_statuses_by_name() {
        let old = ov(vec![("deploy", plan(&[("main", &["a", "b"]), ("gone", &["x"])]))]);
        let mut st = InstanceStatus::default();
        ensure_plan_statuses(&old, &mut st);
        {
            let d = st.plan_status.get_mut("deploy").unwrap();
            d.status = ExecutionStatus::Complete;
            d.uid = "u1".into();
            d.phases[0].status = ExecutionStatus::Complete;
            d.phases[0].steps[0].status = ExecutionStatus::Complete;
            d.phases[0].steps[1].status = ExecutionStatus::FatalError;
            d.phases[0].steps[1].message = "boom".into();
        }
        // new OV: a new phase "rbac" first, steps reordered and one added, phase "gone" removed
        let new = ov(vec![(
            "deploy",
            plan(&[("rbac", &["r"]), ("main", &["c", "b", "a"])]),
        )]);
        assert!(ensure_plan_statuses(&new, &mut st));
        let d = &st.plan_status["deploy"];
        assert_eq!(d.status, ExecutionStatus::Complete);
        assert_eq!(d.uid, "u1");
        assert_eq!(
            d.phases.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["rbac", "main"]
        );
        assert_eq!(d.phases[0].status, ExecutionStatus::NeverRun);
        assert_eq!(d.phases[0].steps[0].status, ExecutionStatus::NeverRun);
        assert_eq!(d.phases[1].status, ExecutionStatus::Complete);
        let steps: Vec<_> = d.phases[1]
            .steps
            .iter()
            .map(|s| (s.name.as_str(), s.status, s.message.as_str()))
            .collect();
        assert_eq!(
            steps,
            [
                ("c", ExecutionStatus::NeverRun, ""),
                ("b", ExecutionStatus::FatalError, "boom"),
                ("a", ExecutionStatus::Complete, "")
            ]
        );
    }

    #[test]
    fn plans_removed_from_ov_are_kept() {
        let mut st = InstanceStatus::default();
        ensure_plan_statuses(&ov(vec![("deploy", plan(&[])), ("old", plan(&[]))]), &mut st);
        ensure_plan_statuses(&ov(vec![("deploy", plan(&[]))]), &mut st);
        assert!(st.plan_status.contains_key("old"));
    }

    #[test]
    fn reset_makes_everything_pending_and_clears_messages() {
        let ov = ov(vec![("deploy", plan(&[("main", &["a", "b"])]))]);
        let mut st = InstanceStatus::default();
        ensure_plan_statuses(&ov, &mut st);
        let d = st.plan_status.get_mut("deploy").unwrap();
        d.status = ExecutionStatus::FatalError;
        d.message = "plan msg".into();
        d.phases[0].status = ExecutionStatus::FatalError;
        d.phases[0].message = "phase msg".into();
        d.phases[0].steps[0].status = ExecutionStatus::Complete;
        d.phases[0].steps[1].status = ExecutionStatus::FatalError;
        d.phases[0].steps[1].message = "step msg".into();
        assert!(needs_reset(d, "new-uid"));
        reset_for_run(d, "new-uid", now());
        assert!(!needs_reset(d, "new-uid"));
        assert_eq!(d.uid, "new-uid");
        assert_eq!(d.status, ExecutionStatus::Pending);
        assert_eq!(d.message, "");
        assert_eq!(d.last_updated_timestamp.as_deref(), Some("2024-01-01T00:00:00Z"));
        assert_eq!(d.phases[0].status, ExecutionStatus::Pending);
        assert_eq!(d.phases[0].message, "");
        for s in &d.phases[0].steps {
            assert_eq!(s.status, ExecutionStatus::Pending);
            assert_eq!(s.message, "");
        }
    }

    #[test]
    fn mark_fatal_puts_message_on_plan() {
        let mut ps = PlanStatus {
            name: "deploy".into(),
            status: ExecutionStatus::Pending,
            ..Default::default()
        };
        mark_plan_fatal(&mut ps, "bad params", now());
        assert_eq!(ps.status, ExecutionStatus::FatalError);
        assert_eq!(ps.message, "bad params");
    }

    #[test]
    fn requeue_grows_one_second_per_minute_capped_at_60() {
        let mut ps = PlanStatus::default();
        assert_eq!(requeue_after_secs(&ps, now()), 1);
        ps.last_updated_timestamp = Some("2023-12-31T23:59:30Z".into());
        assert_eq!(requeue_after_secs(&ps, now()), 1);
        ps.last_updated_timestamp = Some("2023-12-31T23:55:00Z".into());
        assert_eq!(requeue_after_secs(&ps, now()), 6);
        ps.last_updated_timestamp = Some("2023-12-30T00:00:00Z".into());
        assert_eq!(requeue_after_secs(&ps, now()), 60);
        ps.last_updated_timestamp = Some("garbage".into());
        assert_eq!(requeue_after_secs(&ps, now()), 1);
    }
}

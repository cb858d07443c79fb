//! A run's start is written with its first waiting lines (kudo-rs).
//!
//! KUDO wrote the status of a new run at its first pass (every step PENDING, the first IN_PROGRESS)
//! and again when anything moved. Most runs of a small plan are one rollout that is over within
//! seconds, so that first write was a third of the status writes of a deploy, shown to nobody.
//! The manager therefore leaves the new run's status unwritten while the run is only starting:
//! until the waiting lines' grace ([`WAITING_GRACE_SECS`] after the plan started) has passed, as
//! long as nothing but the start happened. Whatever happens next (a step finishes, an error, the
//! grace ends) is written with the whole tree, so a run that outlives the grace costs no write
//! more than before and one that ends within it costs one less.
//!
//! Nothing is lost meanwhile: the admission wrote the run into `spec.planExecution` (plan, uid,
//! `IN_PROGRESS`), which `kubectl kudo plan status` and `--wait` read, and a pass that started
//! from a status without the run is exactly the first pass again (no step finished, so there is
//! nothing to redo), so the next reconcile, or another manager after a crash, decides the same.

use kudo_api::{ExecutionStatus, InstanceStatus, PlanStatus};

use crate::pass::WAITING_GRACE_SECS;
use crate::progress::{RECONCILING, STALLED};
use crate::readiness::READY;
use crate::time::Timestamp;

/// The run whose first pass is judged, and when it started.
#[derive(Debug, Clone, Copy)]
pub struct Starting<'a> {
    /// The plan being run.
    pub plan: &'a str,
    /// The run's `planExecution.uid`.
    pub uid: &'a str,
    /// When the plan first went IN_PROGRESS (the timing the admission stored); `None`: unknown,
    /// and the status is written.
    pub started: Option<Timestamp>,
    /// The stored `spec.planExecution` names this run. A run only this reconcile decided (the
    /// cleanup plan of an Instance being deleted, whose spec is not written) would be decided
    /// again with another uid by the next reconcile: its status is written at once.
    pub durable: bool,
    /// The manager's clock at this reconcile.
    pub now: Timestamp,
}

/// Whether the status this reconcile produced (`new`, from the stored `old`) may stay unwritten
/// because it only says that the run `run` started (see the module docs). `Some(t)`: write it by
/// `t` at the latest (the reconcile wakes then); `None`: write it now.
pub fn start_unwritten(old: &InstanceStatus, new: &InstanceStatus, run: &Starting<'_>) -> Option<Timestamp> {
    // An Instance without a status the manager wrote reads as ready to kstatus (no
    // observedGeneration, no conditions): its first status goes out with its first reconcile.
    old.observed_generation?;
    let written_by = run.started?.plus_seconds(WAITING_GRACE_SECS);
    let stored = old.plan_status.get(run.plan).is_some_and(|p| p.uid == run.uid);
    let ps = new.plan_status.get(run.plan)?;
    let only_started = ps.uid == run.uid && ps.status == ExecutionStatus::InProgress && only_starting(ps);
    let unwritten = run.durable && run.now < written_by && !stored && only_started;
    (unwritten && nothing_else(old, new, run.plan)).then_some(written_by)
}

/// No step finished, failed, said something or waits with lines yet.
fn only_starting(ps: &PlanStatus) -> bool {
    ps.message.is_empty()
        && ps.phases.iter().flat_map(|p| &p.steps).all(|s| {
            matches!(s.status, ExecutionStatus::Pending | ExecutionStatus::InProgress)
                && s.message.is_empty()
                && s.waiting_for.is_empty()
        })
}

/// Nothing else changed: the other plans are as stored or newly listed as NEVER_RUN, the
/// conditions as stored but for those that follow the run (`Ready` says the plan runs;
/// `Reconciling` and `Stalled` are concluded when the status is written), the rest equal. The
/// stored `observedGeneration` is older than the admission's generation, which keeps kstatus'
/// verdict InProgress while the start stays unwritten.
fn nothing_else(old: &InstanceStatus, new: &InstanceStatus, plan: &str) -> bool {
    let other_plans =
        new.plan_status
            .iter()
            .filter(|(p, _)| *p != plan)
            .all(|(p, s)| match old.plan_status.get(p) {
                Some(o) => o == s,
                None => s.status == ExecutionStatus::NeverRun,
            })
            && old
                .plan_status
                .keys()
                .all(|p| p == plan || new.plan_status.contains_key(p));
    let not_ready = |c: &&kudo_api::Condition| ![READY, RECONCILING, STALLED].contains(&c.type_.as_str());
    other_plans
        && old
            .conditions
            .iter()
            .filter(not_ready)
            .eq(new.conditions.iter().filter(not_ready))
        && old.autopilot == new.autopilot
        && old.schedules == new.schedules
}

#[cfg(test)]
mod tests {
    use super::*;
    use kudo_api::{Condition, PhaseStatus, StepStatus};

    /// A status the manager wrote (at generation 1) with nothing in it.
    fn seen() -> InstanceStatus {
        InstanceStatus {
            observed_generation: Some(1),
            ..InstanceStatus::default()
        }
    }

    fn t(s: u64) -> Timestamp {
        Timestamp::from_unix(1_800_000_000).plus_seconds(s)
    }

    fn step(name: &str, status: ExecutionStatus) -> StepStatus {
        StepStatus {
            name: name.into(),
            status,
            ..StepStatus::default()
        }
    }

    fn plan(uid: &str, status: ExecutionStatus, steps: Vec<StepStatus>) -> PlanStatus {
        PlanStatus {
            name: "deploy".into(),
            status,
            uid: uid.into(),
            phases: vec![PhaseStatus {
                name: "main".into(),
                status,
                steps,
                ..PhaseStatus::default()
            }],
            ..PlanStatus::default()
        }
    }

    fn with(plans: &[(&str, PlanStatus)], ready: Option<&str>) -> InstanceStatus {
        let mut s = seen();
        for (name, p) in plans {
            s.plan_status.insert(name.to_string(), p.clone());
        }
        if let Some(r) = ready {
            s.conditions.push(Condition {
                type_: READY.into(),
                status: r.into(),
                ..Condition::default()
            });
        }
        s
    }

    #[test]
    fn only_a_start_within_the_grace_stays_unwritten() {
        use ExecutionStatus::*;
        let waiting = plan(
            "u2",
            InProgress,
            vec![step("app", InProgress), step("more", Pending)],
        );
        let never = PlanStatus {
            name: "backup".into(),
            ..PlanStatus::default()
        };
        let fresh = with(
            &[("deploy", waiting.clone()), ("backup", never.clone())],
            Some("Unknown"),
        );
        let mut finished = waiting.clone();
        finished.phases[0].steps[0].status = Complete;
        let mut lines = waiting.clone();
        lines.phases[0].steps[0].waiting_for =
            vec!["Deployment ns/web: 0 of 1 updated replicas are available".into()];
        let mut erred = waiting.clone();
        erred.phases[0].steps[0].status = Error;
        erred.phases[0].steps[0].message = "connection refused".into();
        let mut other = fresh.clone();
        other.conditions.push(Condition {
            type_: "Drifted".into(),
            status: "True".into(),
            ..Condition::default()
        });
        let previous = with(
            &[("deploy", plan("u1", Complete, vec![step("app", Complete)]))],
            Some("True"),
        );
        let mut after_failure = previous.clone();
        for (type_, status) in [(STALLED, "True"), (RECONCILING, "True")] {
            after_failure.conditions.push(Condition {
                type_: type_.into(),
                status: status.into(),
                ..Condition::default()
            });
        }
        let mut backup_ran = fresh.clone();
        backup_ran.plan_status.get_mut("backup").unwrap().status = Complete;
        let run = |now: u64| Starting {
            plan: "deploy",
            uid: "u2",
            started: Some(t(0)),
            durable: true,
            now: t(now),
        };
        let cases: Vec<(&str, InstanceStatus, InstanceStatus, Starting<'_>, bool)> = vec![
            (
                "a first pass over a status the manager wrote",
                seen(),
                fresh.clone(),
                run(1),
                true,
            ),
            (
                "a new Instance's first pass: no status yet, which kstatus reads as ready",
                InstanceStatus::default(),
                fresh.clone(),
                run(1),
                false,
            ),
            (
                "Stalled and Reconciling stored: they follow the run",
                after_failure,
                with(&[("deploy", waiting.clone())], Some("Unknown")),
                run(1),
                true,
            ),
            (
                "an update's first pass",
                previous.clone(),
                with(&[("deploy", waiting.clone())], Some("Unknown")),
                run(1),
                true,
            ),
            (
                "the grace is over",
                seen(),
                fresh.clone(),
                run(WAITING_GRACE_SECS),
                false,
            ),
            (
                "a run the spec does not hold",
                seen(),
                fresh.clone(),
                Starting {
                    durable: false,
                    ..run(1)
                },
                false,
            ),
            (
                "the start time is unknown",
                seen(),
                fresh.clone(),
                Starting {
                    started: None,
                    ..run(1)
                },
                false,
            ),
            (
                "the run is stored already",
                fresh.clone(),
                fresh.clone(),
                run(1),
                false,
            ),
            (
                "a step finished",
                seen(),
                with(&[("deploy", finished)], None),
                run(1),
                false,
            ),
            (
                "a step waits with lines",
                seen(),
                with(&[("deploy", lines)], None),
                run(1),
                false,
            ),
            (
                "a step erred",
                seen(),
                with(&[("deploy", erred)], None),
                run(1),
                false,
            ),
            ("another plan's status moved", seen(), backup_ran, run(1), false),
            ("another condition changed", seen(), other, run(1), false),
            (
                "the plan ended",
                seen(),
                with(
                    &[("deploy", plan("u2", Complete, vec![step("app", Complete)]))],
                    None,
                ),
                run(1),
                false,
            ),
        ];
        for (name, old, new, r, unwritten) in cases {
            assert_eq!(
                start_unwritten(&old, &new, &r),
                unwritten.then_some(t(WAITING_GRACE_SECS)),
                "{name}"
            );
        }
    }
}

//! Plans the manager starts on its own (kudo-rs extension): scheduled plans (`schedule:`) and
//! autopilot rules (`when:`).
//!
//! The manager never writes `status.planStatus` to start such a plan. It proposes the Instance spec a
//! user's `kubectl kudo plan trigger` (and, for autopilot `setParameters`, `kubectl kudo update -p`)
//! would have written, and passes that proposal through the same admission
//! ([`crate::triggers::decide`]) a user's change goes through. So a self-started plan obeys every
//! KUDO rule a human trigger obeys (no override of a running plan, no trigger while deleting,
//! parameter validation, immutability), and there is exactly one place those rules live.
//!
//! This module is that seam, kept pure: [`proposed_spec`] computes the proposal and [`admit`]
//! admits it; the caller gives the run its uid through [`crate::triggers::Admission::apply`] (the
//! engine draws no random numbers), writes it, and reports [`Origin`] in the `PlanStarted` Event.

use std::collections::BTreeMap;

use kudo_api::{Instance, InstanceSpec, OperatorVersion, PlanExecution};

use crate::triggers::{Admission, Decision, InstanceChange, decide};

/// Who started a plan without a human.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The plan's `schedule:` came due; `due` is the occurrence (RFC 3339, UTC).
    Schedule {
        /// The occurrence that came due, RFC 3339 UTC.
        due: String,
    },
    /// An autopilot rule of the plan's `when:` fired; `observed` describes what it saw.
    Autopilot {
        /// The rule's key, `PLAN/INDEX` (as in `status.autopilot`).
        rule: String,
        /// What the condition saw when it fired, for the Event.
        observed: String,
    },
    /// The value of sensitive parameters changed in their Secret (`parameters`: their names,
    /// comma-separated); the plan is their trigger plan.
    Rotation {
        /// Names of the rotated parameters, comma-separated.
        parameters: String,
    },
}

impl std::fmt::Display for Origin {
    /// The clause the `PlanStarted` Event appends, e.g. `by schedule (due 2026-01-01T00:00:00Z)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Schedule { due } => write!(f, "by schedule (due {due})"),
            Origin::Autopilot { rule, observed } => {
                write!(f, "by autopilot rule {rule} (observed {observed})")
            }
            Origin::Rotation { parameters } => {
                write!(f, "by a change of parameter(s) {parameters} in their Secret")
            }
        }
    }
}

/// A plan the manager wants to start, and the parameter values to set with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Initiation {
    /// The plan to start, e.g. `backup`.
    pub plan: String,
    /// Values written into `spec.parameters` with the trigger (autopilot `setParameters`; empty
    /// for schedules).
    pub set_parameters: BTreeMap<String, String>,
    /// What started it, for the `PlanStarted` Event and the revision history.
    pub origin: Origin,
}

/// The spec a user would have written to start `init.plan` on an Instance whose spec is `current`:
/// `spec.parameters` updated with `init.set_parameters` and `spec.planExecution` naming the plan
/// (uid and status left empty; the admitted [`crate::triggers::Admission::apply`] gives the run its
/// fresh uid and `NEVER_RUN`).
///
/// With an empty `set_parameters` this is exactly `kubectl kudo plan trigger`: `decide` schedules
/// the plan as [`crate::triggers::ScheduleReason::DirectTrigger`], or denies it (e.g. a plan is
/// scheduled or running). Note KUDO's rule that a direct trigger together with a parameter change
/// that itself triggers a plan is denied; a caller with `set_parameters` sees that denial from
/// `decide` like a user would.
pub fn proposed_spec(current: &InstanceSpec, init: &Initiation) -> InstanceSpec {
    let mut spec = current.clone();
    for (k, v) in &init.set_parameters {
        spec.parameters.insert(k.clone(), v.clone());
    }
    spec.plan_execution = PlanExecution {
        plan_name: init.plan.clone(),
        uid: String::new(),
        status: None,
    };
    spec
}

/// Admits an initiation against the admitted Instance `admitted` (no plan scheduled) the way two
/// user changes would be — the one place where every self-started plan (schedule, rotation,
/// autopilot rule) is admitted: first the parameter change alone (`kubectl kudo update -p`; an
/// unknown, immutable or invalid value is denied with the same message), then the plan trigger on
/// top of it. The parameters' own trigger plans are not run: the rule names the plan to run.
/// Returns the Instance to admit (spec = the proposal) and the admission to apply to it.
pub fn admit(admitted: &Instance, ov: &OperatorVersion, init: &Initiation) -> (Instance, Admission) {
    let proposed = proposed_spec(&admitted.spec, init);
    let mut params_only = admitted.clone();
    params_only.spec.parameters = proposed.parameters.clone();
    let first = decide(&InstanceChange {
        old: Some(admitted),
        new: &params_only,
        old_ov: ov,
        new_ov: ov,
        deleting: false,
    });
    let mut new = admitted.clone();
    new.spec = proposed;
    if let Decision::Deny { .. } = first.decision {
        return (new, first);
    }
    let mut base = params_only;
    base.spec.plan_execution = Default::default();
    let second = decide(&InstanceChange {
        old: Some(&base),
        new: &new,
        old_ov: ov,
        new_ov: ov,
        deleting: false,
    });
    (new, second)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sched(plan: &str) -> Initiation {
        Initiation {
            plan: plan.into(),
            set_parameters: BTreeMap::new(),
            origin: Origin::Schedule {
                due: "2026-01-01T00:00:00Z".into(),
            },
        }
    }

    #[test]
    fn schedule_names_the_plan_and_keeps_everything_else() {
        let mut cur = InstanceSpec::default();
        cur.parameters.insert("A".into(), "1".into());
        cur.operator_version.name = "op-0.1.0".into();
        let p = proposed_spec(&cur, &sched("backup"));
        assert_eq!(p.plan_execution.plan_name, "backup");
        assert!(p.plan_execution.uid.is_empty());
        assert_eq!(p.plan_execution.status, None);
        assert_eq!(p.parameters, cur.parameters);
        assert_eq!(p.operator_version, cur.operator_version);
    }

    #[test]
    fn set_parameters_overwrite_and_add() {
        let mut cur = InstanceSpec::default();
        cur.parameters.insert("N".into(), "1".into());
        cur.parameters.insert("KEEP".into(), "x".into());
        let mut init = sched("recover");
        init.set_parameters.insert("N".into(), "2".into());
        init.set_parameters.insert("NEW".into(), "y".into());
        init.origin = Origin::Autopilot {
            rule: "0".into(),
            observed: "load=high".into(),
        };
        let p = proposed_spec(&cur, &init);
        assert_eq!(p.parameters["N"], "2");
        assert_eq!(p.parameters["NEW"], "y");
        assert_eq!(p.parameters["KEEP"], "x");
        assert_eq!(p.plan_execution.plan_name, "recover");
    }

    #[test]
    fn origin_reads_well_in_an_event() {
        assert_eq!(
            sched("b").origin.to_string(),
            "by schedule (due 2026-01-01T00:00:00Z)"
        );
        let a = Origin::Autopilot {
            rule: "recover[0]".into(),
            observed: "replicas 2/3".into(),
        };
        assert_eq!(
            a.to_string(),
            "by autopilot rule recover[0] (observed replicas 2/3)"
        );
    }
}

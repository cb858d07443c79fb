//! What admission decided for one reconcile: the spec to store, the spec to execute, what to
//! remember as admitted, and who started the run.

use std::collections::BTreeMap;

use kudo_api::{ExecutionStatus, Instance, InstanceSpec, OperatorVersion, PlanExecution};

use super::annotations::RETRY_ANNOTATION;
use super::effect::{Effect, LogLevel};
use crate::initiate::Initiation;
use crate::retry;
use crate::revision::{ROLLBACK_ANNOTATION, StartedBy};
use crate::rollback::RollbackMark;
use crate::rollout::{ROLLOUT_ANNOTATION, RolloutMark};
use crate::triggers::{Admission, Decision, ScheduleReason, cleanup_run};

/// Generator of fresh run uids, handed in by the caller (the engine draws no random numbers).
pub type Uids<'u> = &'u mut (dyn FnMut() -> String + Send);

/// What admission decided for this reconcile.
#[derive(Debug, Clone, PartialEq)]
pub struct Admitted {
    /// The spec to store (admission edits applied); equals the current spec for a denial.
    pub spec: InstanceSpec,
    /// The finalizers to store, e.g. with [`kudo_api::CLEANUP_FINALIZER`] added or removed.
    pub finalizers: Vec<String>,
    /// The spec whose plan and parameters are executed; `None` when nothing was ever admitted.
    pub exec: Option<InstanceSpec>,
    /// Why the change was refused (the `ChangeAccepted=False` message); `None` when admitted.
    pub denial: Option<String>,
    /// Spec the admitted-spec annotation should hold.
    pub remember: Option<InstanceSpec>,
    /// Other annotations to write with the admission (`None`: remove).
    pub annotations: BTreeMap<&'static str, Option<String>>,
    /// Who started the run this admission scheduled (recorded as a revision once persisted);
    /// `None` when no run was scheduled.
    pub started: Option<StartedBy>,
}

impl Admitted {
    /// The stored spec and finalizers stay as they are; `exec` is executed and remembered.
    pub fn keeping(inst: &Instance, exec: Option<InstanceSpec>, denial: Option<String>) -> Admitted {
        Admitted {
            spec: inst.spec.clone(),
            finalizers: inst.metadata.finalizers.clone(),
            exec: exec.clone(),
            denial,
            remember: exec,
            annotations: BTreeMap::new(),
            started: None,
        }
    }

    /// The spec to execute when it runs another OperatorVersion than `stored` (the spec as
    /// stored) names: a denied upgrade keeps executing against the previously admitted
    /// OperatorVersion, whose sensitive values are then read (and validated) for it. `None`: the
    /// stored spec's OperatorVersion runs.
    pub fn other_operator_version(&self, stored: &InstanceSpec) -> Option<&InstanceSpec> {
        self.exec
            .as_ref()
            .filter(|e| e.operator_version != stored.operator_version)
    }

    /// Whether nothing is pending: no denied change and no cancellation in flight (the stored
    /// spec is the executed one). A trigger on top of an unclean spec would smuggle a denied
    /// change in.
    pub fn clean(&self) -> bool {
        self.denial.is_none() && self.exec.as_ref() == Some(&self.spec)
    }

    /// Whether a plan is scheduled or running, or something is pending (see [`Self::clean`]):
    /// self-started plans wait.
    pub fn busy(&self) -> bool {
        !self.spec.plan_execution.plan_name.is_empty() || !self.clean()
    }

    /// What the engine's admission of the change to `inst` (from the admitted `old_spec`) means
    /// for this reconcile.
    pub fn from_decision(
        inst: &Instance,
        admission: &Admission,
        old_spec: Option<InstanceSpec>,
        uids: Uids<'_>,
        out: &mut Vec<Effect>,
    ) -> Admitted {
        match &admission.decision {
            Decision::Cancel { plan, uid } => {
                // Execute the admitted spec (not a denied parameter change that may be stored
                // too) with the run marked CANCELLED; the pass stops it.
                let mut e = old_spec.unwrap_or_else(|| inst.spec.clone());
                e.plan_execution = PlanExecution {
                    plan_name: plan.clone(),
                    uid: uid.clone(),
                    status: Some(ExecutionStatus::Cancelled),
                };
                out.push(Effect::log(
                    LogLevel::Info,
                    format!("plan cancellation requested: plan {plan}, run {uid}"),
                ));
                Admitted::keeping(inst, Some(e), None)
            }
            Decision::Deny { message } => Admitted::keeping(inst, old_spec, Some(message.clone())),
            decision => Admitted::applied(inst, admission, decision, uids(), out),
        }
    }

    /// An admitted change applied to `inst` with the run uid `new_uid`.
    fn applied(
        inst: &Instance,
        admission: &Admission,
        decision: &Decision,
        new_uid: String,
        out: &mut Vec<Effect>,
    ) -> Admitted {
        let mut new = inst.clone();
        admission.apply(&mut new, &new_uid);
        let mut annotations = BTreeMap::new();
        let mut started = None;
        if let Decision::Schedule { plan, reason } = decision {
            out.push(Effect::log(
                LogLevel::Info,
                format!("plan scheduled: plan {plan}, reason {reason:?}, run {new_uid}"),
            ));
            if !retry::kept_through(reason) && inst.metadata.annotations.contains_key(RETRY_ANNOTATION) {
                // An install, upgrade or parameter change is never a retry.
                annotations.insert(RETRY_ANNOTATION, None);
            }
            started = Some(started_by_user(inst, plan, reason));
        }
        Admitted {
            spec: new.spec.clone(),
            finalizers: new.metadata.finalizers.clone(),
            exec: Some(new.spec.clone()),
            denial: None,
            remember: Some(new.spec),
            annotations,
            started,
        }
    }

    /// Admits a plan the manager starts on its own (a schedule's or a rotation's plan trigger)
    /// on top of this admission, by the same rules as a user's change
    /// ([`crate::initiate::admit`]): an admitted run replaces the spec to store and to
    /// execute. Returns the decision.
    pub fn propose(
        &mut self,
        inst: &Instance,
        ov: &OperatorVersion,
        init: &Initiation,
        uids: Uids<'_>,
        out: &mut Vec<Effect>,
    ) -> Decision {
        let mut old = inst.clone();
        old.spec = self.spec.clone();
        let (new, admission) = crate::initiate::admit(&old, ov, init);
        if let Decision::Schedule { .. } = &admission.decision {
            let a = Admitted::from_decision(&new, &admission, Some(self.spec.clone()), uids, out);
            self.spec = a.spec;
            self.exec = a.exec;
            self.remember = a.remember;
            self.started = Some(StartedBy::from_origin(&init.origin));
        }
        admission.decision
    }

    /// The run this admission schedules and that has not begun yet ([`Self::begin`]).
    fn new_run(&self) -> Option<&PlanExecution> {
        self.exec
            .as_ref()
            .map(|e| &e.plan_execution)
            .filter(|pe| pe.status == Some(ExecutionStatus::NeverRun) && !pe.plan_name.is_empty())
    }

    /// Stores the run this admission scheduled as already IN_PROGRESS, with its plan start in the
    /// timing annotation: the pass that follows in the same reconcile would mirror exactly that
    /// into the spec a moment later, so the admission write carries it and the pass writes no spec
    /// (one Instance write and its echo fewer per run; KUDO showed NEVER_RUN until its first
    /// reconcile). A spec whose run is not new is left alone.
    pub fn begin(&mut self, now: crate::time::Timestamp) {
        let Some(uid) = self.new_run().map(|pe| pe.uid.clone()) else {
            return;
        };
        for spec in [Some(&mut self.spec), self.exec.as_mut(), self.remember.as_mut()]
            .into_iter()
            .flatten()
            .filter(|s| s.plan_execution.uid == uid)
        {
            spec.plan_execution.status = Some(ExecutionStatus::InProgress);
        }
        let timing = crate::pass::Timing {
            uid,
            plan_started: Some(now.to_string()),
            ..Default::default()
        };
        self.annotations
            .insert(crate::pass::TIMING_ANNOTATION, timing.to_annotation());
    }

    /// A user's change that `kubectl kudo rollback` marked ([`RollbackMark::pending`]): the run
    /// is the package's `rollback` plan when it has one, it is recorded as a rollback, and the
    /// mark is stamped with the run's uid (so it is not taken again, and templates of that run
    /// see `.Rollback`).
    pub fn with_rollback(mut self, inst: &Instance, ov: &OperatorVersion, out: &mut Vec<Effect>) -> Admitted {
        let Some(mark) = RollbackMark::pending(&inst.metadata.annotations) else {
            return self;
        };
        if self.started != Some(StartedBy::User) {
            return self;
        }
        let plan = crate::rollback::plan_for(&self.spec.plan_execution.plan_name, ov);
        for spec in [Some(&mut self.spec), self.exec.as_mut(), self.remember.as_mut()]
            .into_iter()
            .flatten()
        {
            spec.plan_execution.plan_name = plan.clone();
        }
        let uid = self.spec.plan_execution.uid.clone();
        out.push(Effect::log(
            LogLevel::Info,
            format!(
                "rollback admitted: plan {plan}, run {uid}, from {} to {}",
                mark.from, mark.to
            ),
        ));
        self.started = Some(StartedBy::Rollback {
            from: mark.from,
            to: mark.to,
        });
        let stamped = RollbackMark {
            uid: Some(uid),
            ..mark
        };
        self.annotations
            .insert(ROLLBACK_ANNOTATION, Some(stamped.to_annotation()));
        self
    }

    /// A user's change that a fleet rollout marked ([`RolloutMark::pending`]): the run is
    /// recorded as the rollout's, and the mark is stamped with the run's uid, which is how the
    /// rollout follows it (and knows, from the Instance alone, that it changed it).
    pub fn with_rollout(mut self, inst: &Instance, out: &mut Vec<Effect>) -> Admitted {
        let Some(mark) = RolloutMark::pending(&inst.metadata.annotations) else {
            return self;
        };
        if self.started != Some(StartedBy::User) {
            return self;
        }
        let uid = self.spec.plan_execution.uid.clone();
        out.push(Effect::log(
            LogLevel::Info,
            format!(
                "rollout {} admitted: plan {}, run {uid}",
                mark.name, self.spec.plan_execution.plan_name
            ),
        ));
        self.started = Some(StartedBy::Rollout {
            name: mark.name.clone(),
        });
        let stamped = RolloutMark {
            run: Some(uid),
            ..mark
        };
        self.annotations
            .insert(ROLLOUT_ANNOTATION, Some(stamped.to_annotation()));
        self
    }

    /// On deletion, schedules the `cleanup` plan in the spec to store and to execute when the
    /// engine says so ([`cleanup_run`]).
    pub fn with_cleanup(
        mut self,
        inst: &Instance,
        ov: &OperatorVersion,
        deleting: bool,
        uids: Uids<'_>,
        out: &mut Vec<Effect>,
    ) -> Admitted {
        if deleting
            && let Some(e) = &self.exec
            && let Some(pe) = cleanup_run(inst, e, ov, true, uids)
        {
            out.push(Effect::log(
                LogLevel::Info,
                format!("instance is being deleted, scheduling cleanup: run {}", pe.uid),
            ));
            self.spec.plan_execution = pe.clone();
            let mut e2 = e.clone();
            e2.plan_execution = pe;
            self.exec = Some(e2.clone());
            self.remember = Some(e2);
        }
        self
    }
}

/// Who started a run admitted from a user's change: a retry when `kubectl kudo plan retry` marked
/// exactly the failed run this trigger replaces (the rule the run's reset follows too), else the
/// user.
pub fn started_by_user(inst: &Instance, plan: &str, reason: &ScheduleReason) -> StartedBy {
    let marked = inst
        .metadata
        .annotations
        .get(RETRY_ANNOTATION)
        .map(String::as_str);
    match inst.status.as_ref().and_then(|s| s.plan_status.get(plan)) {
        Some(ps) if retry::kept_through(reason) && retry::is_retry_of(marked, ps) => {
            StartedBy::Retry { of: ps.uid.clone() }
        }
        _ => StartedBy::User,
    }
}

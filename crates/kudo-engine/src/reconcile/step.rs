//! The step of one reconcile once the admission is stored: which run it works on and what ends it
//! without a task ([`plan_step`]), and how a pass ends ([`after_pass`]): the plan's status and
//! readiness, the requeue, whether the status is written now, and the Events. The manager renders
//! and runs the tasks in between.

use std::collections::BTreeMap;
use std::time::Duration;

use kudo_api::{ExecutionStatus, InstanceSpec, InstanceStatus, OperatorVersion, PlanStatus};

use super::annotations::RETRY_ANNOTATION;
use super::effect::{Effect, LogLevel};
use super::start::{Starting, start_unwritten};
use crate::pass::{PassSummary, PlanPass, TIMING_ANNOTATION, Timing, reasons};
use crate::readiness::{plan_condition, set_condition};
use crate::retry;
use crate::status::{
    Wake, ensure_plan_statuses, mark_plan_fatal, needs_reset, pass_requeue_secs, reset_for_run,
};
use crate::time::Timestamp;

/// What the step of one reconcile starts from.
#[derive(Debug, Clone, Copy)]
pub struct StepInput<'a> {
    /// The OperatorVersion the admitted spec runs.
    pub ov: &'a OperatorVersion,
    /// The admitted spec being executed.
    pub exec: &'a InstanceSpec,
    /// The Instance's annotations (the retry mark, the plan timing).
    pub annotations: &'a BTreeMap<String, String>,
    /// The Instance's namespace.
    pub namespace: &'a str,
    /// The Instance's name.
    pub name: &'a str,
    /// The manager's clock at this reconcile.
    pub now: Timestamp,
}

impl StepInput<'_> {
    fn plan(&self) -> &str {
        &self.exec.plan_execution.plan_name
    }
}

/// What the step does.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// No plan is scheduled: the idle step ([`super::idle_step`]).
    Idle,
    /// The run ends, or ended, without a task: the OperatorVersion lacks the plan (FATAL_ERROR),
    /// a cancellation was requested (the unfinished run becomes CANCELLED; `cancelled` is that
    /// pass), or the run is terminal already. Its plan status is stored as it is
    /// ([`store_plan_status`]).
    Ended {
        /// The plan status to store as it is.
        plan_status: PlanStatus,
        /// The pass that marked the unfinished run CANCELLED, if a cancellation ended it.
        cancelled: Option<Box<PassSummary>>,
        /// Events, log lines and status changes of the decision.
        effects: Vec<Effect>,
    },
    /// Render the plan and pass over it ([`start_pass`]); `retry_of` is the failed run a
    /// `plan retry` replaces (the new run keeps its COMPLETE steps).
    Pass {
        /// The plan status the pass starts from (initialised for a new run).
        plan_status: PlanStatus,
        /// `planExecution.uid` of the failed run a `plan retry` replaces, if this run is a retry.
        retry_of: Option<String>,
        /// Events, log lines and status changes of the decision.
        effects: Vec<Effect>,
    },
}

/// Decides the step of the run `input.exec` schedules, initialising `status`'s plan statuses
/// (and the run's, when it is new: see [`start_run`]).
pub fn plan_step(input: &StepInput<'_>, status: &mut InstanceStatus) -> Step {
    let (plan, now) = (input.plan(), input.now);
    if plan.is_empty() {
        return Step::Idle;
    }
    ensure_plan_statuses(&input.ov.spec, status);
    let mut ps = status
        .plan_status
        .get(plan)
        .cloned()
        .unwrap_or_else(|| PlanStatus {
            name: plan.to_string(),
            ..PlanStatus::default()
        });
    let mut effects = Vec::new();
    let retry_of = start_run(
        &mut ps,
        &input.exec.plan_execution.uid,
        input.annotations,
        now,
        &mut effects,
    );
    let ended = |plan_status, cancelled, effects| Step::Ended {
        plan_status,
        cancelled,
        effects,
    };
    if !input.ov.spec.plans.contains_key(plan) {
        let msg = format!("could not find required plan: {plan}");
        if !ps.status.is_terminal() {
            mark_plan_fatal(&mut ps, &msg, now);
            effects.push(Effect::event(
                crate::EventType::Warning,
                reasons::INVALID_PLAN,
                plan,
                &msg,
            ));
        }
        return ended(ps, None, effects);
    }
    if input.exec.plan_execution.status == Some(ExecutionStatus::Cancelled) {
        // Nothing is rendered or applied; the pass marks the unfinished run CANCELLED (a run that
        // already ended keeps its status).
        let mut cancelled = None;
        if let Ok(mut pass) = PlanPass::start(&input.ov.spec, plan, ps.clone(), now) {
            pass.request_cancel();
            let (new_ps, summary) = pass.finish();
            effects.extend(pass_events(&summary, plan, &input.exec.plan_execution.uid, None));
            (ps, cancelled) = (new_ps, Some(Box::new(summary)));
        }
        effects.push(Effect::log(
            LogLevel::Info,
            format!("plan cancelled: status {}", ps.status),
        ));
        return ended(ps, cancelled, effects);
    }
    if ps.status.is_terminal() {
        // A terminal plan runs nothing; the settle step unschedules it.
        return ended(ps, None, effects);
    }
    Step::Pass {
        plan_status: ps,
        retry_of,
        effects,
    }
}

/// Initialises the status of the run `plan_uid` when it is new: `plan retry` (the retry
/// annotation names exactly the FATAL_ERROR run being replaced) keeps its COMPLETE steps, any
/// other new run restarts the plan (KUDO). Decided from the Instance alone, so a restarted
/// manager decides the same. Returns the failed run a retry replaces.
fn start_run(
    ps: &mut PlanStatus,
    plan_uid: &str,
    annotations: &BTreeMap<String, String>,
    now: Timestamp,
    effects: &mut Vec<Effect>,
) -> Option<String> {
    if !needs_reset(ps, plan_uid) {
        return None;
    }
    let annotation = annotations.get(RETRY_ANNOTATION).map(String::as_str);
    if !retry::is_retry_of(annotation, ps) {
        reset_for_run(ps, plan_uid, now);
        return None;
    }
    let failed = std::mem::take(&mut ps.uid);
    retry::reset_for_retry(ps, plan_uid, now);
    effects.push(Effect::log(
        LogLevel::Info,
        retry::started_message(&ps.name, &failed, ps, &[]),
    ));
    Some(failed)
}

/// The pass of [`Step::Pass`] over `plan_status`, for the Instance, with the plan timing the
/// annotations hold and, for a retry, the failed run it replaces and the objects deleted to be
/// created again (`recreated`). `Err`: the plan vanished from the OperatorVersion (checked by
/// [`plan_step`] already), with the plan status marked FATAL_ERROR.
pub fn start_pass<'a>(
    input: &StepInput<'a>,
    plan_status: PlanStatus,
    retry_of: Option<&str>,
    recreated: Vec<String>,
) -> Result<PlanPass<'a>, Box<PlanStatus>> {
    let timing = Timing::from_annotation(input.annotations.get(TIMING_ANNOTATION).map(String::as_str));
    let mut failed = plan_status.clone();
    match PlanPass::start(&input.ov.spec, input.plan(), plan_status, input.now) {
        Ok(p) => {
            let p = p.with_instance(input.namespace, input.name).with_timing(timing);
            Ok(match retry_of {
                Some(failed) => p.with_retry_of(failed).with_recreated(recreated),
                None => p,
            })
        }
        Err(e) => {
            mark_plan_fatal(&mut failed, &e.to_string(), input.now);
            Err(Box::new(failed))
        }
    }
}

/// The plan could not be rendered (invalid parameters, a plan-level template error): the run
/// fails at once, saying why on the plan and in a Warning Event.
pub fn render_failed(input: &StepInput<'_>, plan_status: &mut PlanStatus, error: &str) -> Vec<Effect> {
    let msg = format!("{}/{}: {error}", input.namespace, input.name);
    mark_plan_fatal(plan_status, &msg, input.now);
    vec![Effect::event(
        crate::EventType::Warning,
        reasons::INVALID_PARAMS,
        input.plan(),
        &msg,
    )]
}

/// Stores a plan's status in `status` with the readiness it implies (the `Ready` condition for
/// the lifecycle plans, observing `generation`); returns the plan's execution status.
pub fn store_plan_status(
    status: &mut InstanceStatus,
    plan: &str,
    plan_status: PlanStatus,
    now: Timestamp,
    generation: Option<i64>,
) -> ExecutionStatus {
    let st = plan_status.status;
    status.plan_status.insert(plan.to_string(), plan_status);
    if let Some(mut c) = plan_condition(plan, st, now) {
        c.observed_generation = generation;
        set_condition(&mut status.conditions, c);
    }
    st
}

/// What a pass left, for [`after_pass`].
#[derive(Debug, Clone, Copy)]
pub struct PassEnd<'a> {
    /// The run's plan and uid.
    pub plan: &'a str,
    /// `planExecution.uid` of the run.
    pub uid: &'a str,
    /// What the pass did.
    pub summary: &'a PassSummary,
    /// Some task waits for something no watch reports (a Dummy or Pipe task, a deletion, an
    /// unwatched kind).
    pub polled: bool,
    /// How long a wait for watched objects goes without a look at most.
    pub backstop: Duration,
    /// The failed run a retry replaces.
    pub retry_of: Option<&'a str>,
    /// The retry deleted objects to create them anew: the status (and the `PlanStarted` Event
    /// that names them) is written at once, even while only the run's start happened.
    pub recreated: bool,
    /// The status as stored, and whether the stored spec names this run.
    pub stored: &'a InstanceStatus,
    /// Whether the stored `spec.planExecution` names this run (see [`Starting::durable`]).
    pub durable: bool,
    /// The Instance's `metadata.generation`, recorded as the `Ready` condition's generation.
    pub generation: Option<i64>,
    /// The manager's clock at this reconcile.
    pub now: Timestamp,
}

/// How a pass ends ([`after_pass`]).
#[derive(Debug, Clone, PartialEq)]
pub struct AfterPass {
    /// The plan's execution status after the pass.
    pub status: ExecutionStatus,
    /// When to pass again without a watch event (`None`: the run is terminal).
    pub requeue: Option<Duration>,
    /// The timing annotation to store.
    pub timing: Option<String>,
    /// The status stays as stored (only the run's start happened, see [`start_unwritten`]):
    /// `status` was reset to it, and the pass's Events wait for the pass that writes.
    pub keep_stored_status: bool,
    /// The Events and log lines the end of the pass asks for.
    pub effects: Vec<Effect>,
}

/// Ends a pass that left `plan_status` and `end.summary`: stores the plan status and its
/// readiness in `status` (or keeps the stored status while only the start happened), chooses the
/// requeue (a watch wakes a wait for watched objects, the backstop only guards it; other waits
/// keep KUDO's backoff; a timeout or the waiting lines' grace comes sooner) and names the Events.
pub fn after_pass(end: &PassEnd<'_>, plan_status: PlanStatus, status: &mut InstanceStatus) -> AfterPass {
    let (summary, now) = (end.summary, end.now);
    let wake = if !end.polled && summary.transient_errors.is_empty() {
        Wake::Watch {
            backstop_secs: end.backstop.as_secs(),
        }
    } else {
        Wake::Poll
    };
    let requeue = pass_requeue_secs(&plan_status, wake, summary.next_deadline, now)
        .map(|secs| Duration::from_secs(secs).min(end.backstop));
    let plan = end.plan;
    let st = store_plan_status(status, plan, plan_status, now, end.generation);
    let timing = summary.timing.to_annotation();
    let starting = Starting {
        plan,
        uid: end.uid,
        started: summary
            .timing
            .plan_started
            .as_deref()
            .and_then(|t| Timestamp::parse(t).ok()),
        durable: end.durable,
        now,
    };
    if let Some(by) = start_unwritten(end.stored, status, &starting).filter(|_| !end.recreated) {
        // Only the start happened: the status stays as stored, and so do its Events (the next
        // pass starts the run again and announces it with the status it writes).
        *status = end.stored.clone();
        let wait = Duration::from_secs(by.seconds_since(now).max(1) as u64);
        return AfterPass {
            status: st,
            requeue: Some(requeue.map_or(wait, |r| r.min(wait))),
            timing,
            keep_stored_status: true,
            effects: vec![Effect::log(
                LogLevel::Debug,
                format!("the run's start is written with its first waiting lines, by {by}"),
            )],
        };
    }
    AfterPass {
        status: st,
        requeue,
        timing,
        keep_stored_status: false,
        effects: pass_events(summary, plan, end.uid, end.retry_of),
    }
}

/// The Events of a pass, each series named by the plan. A series keeps its first note: a retry's
/// PlanStarted, which says where the run resumes, gets a series of its own (one per failed run).
/// The run's start and end happen once per run (`uid`): published once however often the pass
/// that announces them is repeated.
fn pass_events(summary: &PassSummary, plan: &str, uid: &str, retry_of: Option<&str>) -> Vec<Effect> {
    summary
        .events
        .iter()
        .map(|ev| {
            let action = match retry_of {
                Some(failed) if ev.reason == reasons::PLAN_STARTED => format!("{plan} retry of {failed}"),
                _ => plan.to_string(),
            };
            if ev.reason == reasons::PLAN_STARTED || ev.reason == reasons::PLAN_FINISHED {
                let key = format!("{uid}/{}/{action}", ev.reason);
                Effect::event_once(ev.type_, &ev.reason, &action, &ev.message, key)
            } else {
                Effect::event(ev.type_, &ev.reason, &action, &ev.message)
            }
        })
        .collect()
}

//! Scheduled plans (kudo-rs extension, [`crate::schedule`]): for each plan with a `schedule:`,
//! renders and parses it, asks whether an occurrence is due, and when it is, proposes the spec
//! `kubectl kudo plan trigger` would write and passes it through the same admission as a user's
//! change; an admitted run replaces this reconcile's admission, so it is persisted (with its new
//! uid) before anything executes.
//!
//! Restarts: the occurrence is recorded as `lastScheduleTime` in the status this reconcile
//! writes; a crash between the spec write (run scheduled) and the status write finds the plan
//! running on restart, so the same occurrence is only reported as skipped, never run twice.

use std::collections::BTreeMap;
use std::time::Duration;

use kudo_api::{OperatorVersion, ScheduleStatus};
use kudo_package::render::{RenderContext, render_schedule};

use super::Initiator;
use crate::initiate::{Initiation, Origin};
use crate::pass::EventType;
use crate::reconcile::admitted::{Admitted, Uids};
use crate::reconcile::effect::{Effect, LogLevel, StatusChange};
use crate::reconcile::observed::{Admitting, Observed, Scheduled};
use crate::schedule::{self, Schedule};
use crate::time::Timestamp;
use crate::triggers::Decision;

/// Event reason: an occurrence of a scheduled plan came while another plan ran (or the instance
/// had a pending change) and was not run.
pub const SCHEDULED_PLAN_SKIPPED: &str = "ScheduledPlanSkipped";
/// Event reason: a plan's `schedule:` does not render or parse; the plan is not scheduled.
pub const INVALID_SCHEDULE: &str = "InvalidSchedule";

pub(super) struct Schedules;

impl Initiator for Schedules {
    fn name(&self) -> &'static str {
        "schedules"
    }

    fn initiate(&self, obs: &Observed<'_>, adm: &mut Admitting, uids: Uids<'_>) {
        let (Some(admitted), false) = (adm.admitted.as_mut(), obs.deleting) else {
            return;
        };
        let prev = obs
            .inst
            .status
            .as_ref()
            .map(|s| s.schedules.clone())
            .unwrap_or_default();
        let mut out = Scheduled::default();
        let Some(parameters) = admitted.exec.as_ref().map(|e| e.parameters.clone()) else {
            out.statuses = prev;
            record(adm, out);
            return;
        };
        let meta = &obs.inst.metadata;
        let (name, ns) = (meta.name.as_str(), meta.namespace.as_deref().unwrap_or(""));
        let rctx = RenderContext::offline(name, ns, parameters);
        for (plan, p) in &obs.ov.spec.plans {
            if p.schedule.is_none() {
                continue;
            }
            let Some(sched) = schedule_of(obs.ov, plan, &rctx, &mut adm.effects) else {
                continue;
            };
            let at = Occurrence {
                plan,
                sched: &sched,
                prev: prev.get(plan),
            };
            at.decide(obs, admitted, &mut out, uids, &mut adm.effects);
        }
        record(adm, out);
    }
}

/// Keeps the schedule check, and has its statuses written and its next occurrence woken for
/// once the admission is stored.
fn record(adm: &mut Admitting, out: Scheduled) {
    adm.stored
        .push(Effect::Status(StatusChange::Schedules(out.statuses.clone())));
    if let Some(d) = out.wake {
        adm.stored.push(Effect::Requeue(d));
    }
    adm.scheduled = Some(out);
}

/// One scheduled plan in one reconcile.
struct Occurrence<'a> {
    plan: &'a str,
    sched: &'a Schedule,
    /// Its `status.schedules` entry as read.
    prev: Option<&'a ScheduleStatus>,
}

impl Occurrence<'_> {
    fn decide(
        &self,
        obs: &Observed<'_>,
        admitted: &mut Admitted,
        out: &mut Scheduled,
        uids: Uids<'_>,
        effects: &mut Vec<Effect>,
    ) {
        let recorded = |f: fn(&ScheduleStatus) -> Option<&String>| {
            self.prev.and_then(f).and_then(|t| Timestamp::parse(t).ok())
        };
        let history = schedule::History {
            last: recorded(|s| s.last_schedule_time.as_ref()),
            next: recorded(|s| s.next_schedule_time.as_ref()),
        };
        let (plan, now, last) = (self.plan, obs.now, history.last);
        let pe = &admitted.spec.plan_execution;
        let finishing = pe.status.is_some_and(|s| s.is_terminal());
        match schedule::decide(self.sched, history, now, admitted.busy()) {
            schedule::Decision::Wait { next } => out.record(plan, last, next, now),
            schedule::Decision::Skip { .. } if finishing && admitted.clean() => {
                // The last run just ended; its planExecution is cleared by the next
                // reconcile. Decide then rather than skip an occurrence nothing blocks.
                out.statuses
                    .insert(plan.to_string(), self.prev.cloned().unwrap_or_default());
                out.wake_in(Duration::from_secs(1));
            }
            schedule::Decision::Skip { due, next } => {
                let why = if pe.plan_name.is_empty() {
                    "a change of the instance is pending".to_string()
                } else {
                    format!("plan '{}' is running", pe.plan_name)
                };
                effects.extend(self.skipped(due, &why));
                out.record(plan, Some(due), next, now);
            }
            schedule::Decision::Due { due, next } => {
                self.start(obs, admitted, due, uids, effects);
                out.record(plan, Some(due), next, now);
            }
        }
    }

    /// Proposes the run of the plan for the occurrence `due` like a user's `plan trigger` and
    /// reports what the admission answered (a denial skips the occurrence).
    fn start(
        &self,
        obs: &Observed<'_>,
        admitted: &mut Admitted,
        due: Timestamp,
        uids: Uids<'_>,
        out: &mut Vec<Effect>,
    ) {
        let plan = self.plan;
        let init = Initiation {
            plan: plan.to_string(),
            set_parameters: BTreeMap::new(),
            origin: Origin::Schedule { due: due.to_string() },
        };
        match &admitted.propose(obs.inst, obs.ov, &init, uids, out) {
            Decision::Schedule { .. } => {
                let uid = admitted.spec.plan_execution.uid.clone();
                let msg = format!(
                    "Plan {plan} (run {uid}) started by schedule '{}' (due {due})",
                    self.sched.expr()
                );
                out.push(Effect::log(LogLevel::Info, msg.clone()));
                let reason = crate::reasons::PLAN_STARTED;
                out.push(Effect::event(EventType::Normal, reason, &action(plan, due), &msg));
            }
            Decision::Deny { message } => out.extend(self.skipped(due, message)),
            other => out.push(Effect::log(
                LogLevel::Debug,
                format!("scheduled trigger of plan {plan} not admitted: {other:?}"),
            )),
        }
    }

    /// The `ScheduledPlanSkipped` Event of an occurrence that could not run.
    fn skipped(&self, due: Timestamp, why: &str) -> [Effect; 2] {
        let msg = format!(
            "Scheduled run of plan {} (schedule '{}', due {due}) skipped: {why}",
            self.plan,
            self.sched.expr()
        );
        [
            Effect::log(LogLevel::Info, msg.clone()),
            Effect::event(
                EventType::Normal,
                SCHEDULED_PLAN_SKIPPED,
                &action(self.plan, due),
                &msg,
            ),
        ]
    }
}

/// The parsed `schedule:` of `plan`, rendered over the parameters; `None` when the plan is not
/// scheduled, or its schedule is invalid (reported with a Warning Event).
fn schedule_of(
    ov: &OperatorVersion,
    plan: &str,
    rctx: &RenderContext,
    out: &mut Vec<Effect>,
) -> Option<Schedule> {
    let parsed = render_schedule(ov, plan, rctx)
        .map_err(|e| e.to_string())
        .and_then(|expr| {
            schedule::parse(expr.as_deref().unwrap_or(""))
                .map_err(|e| format!("schedule of plan {plan:?}: {e}"))
        });
    match parsed {
        Ok(s) => s,
        Err(msg) => {
            out.push(Effect::log(LogLevel::Warn, msg.clone()));
            out.push(Effect::event(
                EventType::Warning,
                INVALID_SCHEDULE,
                "Schedule",
                &msg,
            ));
            None
        }
    }
}

/// The Event action of one occurrence of a scheduled plan: one Event series per occurrence (the
/// recorder merges Events of one reason and action, keeping the first note).
fn action(plan: &str, due: Timestamp) -> String {
    let mut a = format!("Schedule {plan} {due}");
    while a.len() > 128 {
        a.pop();
    }
    a
}

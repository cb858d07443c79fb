//! Autopilot rules: the manager evaluates them over the objects they look at (the
//! [`Observation::Autopilot`] this initiator asks for, [`crate::autopilot::Rules`]); a rule that
//! fires is admitted like a user's `update -p` plus `plan trigger` ([`crate::initiate::admit`]).
//! A denial starts nothing: it becomes the rule's error. The rules' states, their errors and a
//! firing are reported once the admission is stored.

use std::collections::BTreeMap;

use super::Initiator;
use crate::autopilot::{AUTOPILOT_RULE_ERROR, AUTOPILOT_TRIGGERED, Evaluation, has_rules, triggered_message};
use crate::initiate::Initiation;
use crate::pass::EventType;
use crate::reconcile::admitted::{Admitted, Uids};
use crate::reconcile::annotations::admitted_spec;
use crate::reconcile::effect::{Effect, LogLevel, StatusChange};
use crate::reconcile::observed::{Admitting, Autopilot as Read, AutopilotRead, Needs, Observation, Observed};
use crate::revision::StartedBy;
use crate::triggers::Decision;

pub(super) struct Autopilot;

impl Initiator for Autopilot {
    fn name(&self) -> &'static str {
        "autopilot"
    }

    /// The rules' evaluation; none while deleting or without rules. Rules wait while a plan is
    /// scheduled or running and while a change of the spec is not admitted yet.
    fn needs(&self, obs: &Observed<'_>) -> Needs {
        let read = if obs.deleting || !has_rules(obs.ov) {
            AutopilotRead::None
        } else {
            let inst = obs.inst;
            let idle = admitted_spec(inst).as_ref() == Some(&inst.spec)
                && inst.spec.plan_execution.plan_name.is_empty();
            AutopilotRead::Rules { waiting: !idle }
        };
        vec![Observation::Autopilot(read)]
    }

    fn initiate(&self, obs: &Observed<'_>, adm: &mut Admitting, uids: Uids<'_>) {
        if obs.deleting {
            return;
        }
        let Read::Evaluated(eval) = &obs.autopilot else {
            // Rules removed (e.g. by an upgrade): their state goes with them.
            adm.stored
                .push(Effect::Status(StatusChange::Autopilot(BTreeMap::new())));
            return;
        };
        let mut eval = eval.clone();
        if let Some(init) = eval.fire.clone() {
            fire(obs, &init, &mut eval, adm, uids);
        }
        report(&eval, adm.fired.as_ref(), &mut adm.stored);
    }
}

/// Admits the firing `init` on top of the stored spec, or turns the admission's refusal into the
/// rule's error.
fn fire(obs: &Observed<'_>, init: &Initiation, eval: &mut Evaluation, adm: &mut Admitting, uids: Uids<'_>) {
    let (proposed, admission) = crate::initiate::admit(obs.inst, obs.ov, init);
    match &admission.decision {
        Decision::Schedule { .. } => {
            let spec = Some(obs.inst.spec.clone());
            let mut a = Admitted::from_decision(&proposed, &admission, spec, uids, &mut adm.effects);
            a.started = Some(StartedBy::from_origin(&init.origin));
            adm.admitted = Some(a);
            adm.fired = Some(init.clone());
        }
        other => {
            let message = match other {
                Decision::Deny { message } => message.clone(),
                d => format!("unexpected admission {d:?}"),
            };
            eval.denied(&message);
            adm.autopilot_denial = Some(message);
        }
    }
}

/// The evaluation's effects: each new error (a warning and an Event), the firing, the rules'
/// states, and when to evaluate again.
fn report(eval: &Evaluation, fired: Option<&Initiation>, out: &mut Vec<Effect>) {
    for (rule, msg) in &eval.errors {
        out.push(Effect::log(LogLevel::Warn, msg.clone()));
        out.push(Effect::event(EventType::Warning, AUTOPILOT_RULE_ERROR, rule, msg));
    }
    if let Some(init) = fired {
        let msg = triggered_message(init);
        out.push(Effect::log(LogLevel::Info, msg.clone()));
        out.push(Effect::event(
            EventType::Normal,
            AUTOPILOT_TRIGGERED,
            &init.plan,
            &msg,
        ));
    }
    out.push(Effect::Status(StatusChange::Autopilot(eval.states.clone())));
    if let Some(d) = eval.requeue {
        out.push(Effect::Requeue(d));
    }
}

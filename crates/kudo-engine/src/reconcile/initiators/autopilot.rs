//! An autopilot rule that fired (evaluated by the manager, which reads what rules look at),
//! admitted like a user's `update -p` plus `plan trigger` ([`crate::initiate::admit`]). A
//! denial starts nothing: it becomes the rule's error.

use super::{Initiator, Observed};
use crate::reconcile::{Admitted, Admitting, Uids};
use crate::revision::StartedBy;
use crate::triggers::Decision;

pub(super) struct Autopilot;

impl Initiator for Autopilot {
    fn name(&self) -> &'static str {
        "autopilot"
    }

    fn initiate(&self, obs: &Observed<'_>, adm: &mut Admitting, uids: Uids<'_>) {
        let Some(init) = obs.autopilot_fire else {
            return;
        };
        if obs.deleting {
            return;
        }
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
                adm.autopilot_denial = Some(message);
            }
        }
    }
}

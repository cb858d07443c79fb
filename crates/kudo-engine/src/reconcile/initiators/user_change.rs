//! The user's change of the spec, judged by KUDO's admission rules against the last admitted
//! spec (what KUDO's webhook did), then the rollback and rollout marks and, on deletion, the cleanup
//! plan.

use super::Initiator;
use crate::reconcile::admitted::{Admitted, Uids};
use crate::reconcile::annotations::admitted_spec;
use crate::reconcile::observed::{Admitting, Observed};
use crate::triggers::{InstanceChange, decide};

pub(super) struct UserChange;

impl Initiator for UserChange {
    fn name(&self) -> &'static str {
        "user change"
    }

    fn initiate(&self, obs: &Observed<'_>, adm: &mut Admitting, uids: Uids<'_>) {
        if adm.admitted.is_some() {
            // An autopilot firing was admitted on top of the stored spec.
            return;
        }
        let (inst, ov, deleting) = (obs.inst, obs.ov, obs.deleting);
        let out = &mut adm.effects;
        let admitted = match admitted_spec(inst) {
            None if deleting => Admitted::keeping(inst, None, None),
            None => {
                let change = InstanceChange {
                    old: None,
                    new: inst,
                    old_ov: ov,
                    new_ov: ov,
                    deleting,
                };
                Admitted::from_decision(inst, &decide(&change), None, uids, out)
                    .with_rollback(inst, ov, out)
                    .with_rollout(inst, out)
            }
            Some(a) if a == inst.spec => Admitted::keeping(inst, Some(a), None),
            Some(a) => {
                let mut old = inst.clone();
                old.spec = a.clone();
                let change = InstanceChange {
                    old: Some(&old),
                    new: inst,
                    old_ov: obs.admitted_ov.unwrap_or(ov),
                    new_ov: ov,
                    deleting,
                };
                Admitted::from_decision(inst, &decide(&change), Some(a), uids, out)
                    .with_rollback(inst, ov, out)
                    .with_rollout(inst, out)
            }
        };
        adm.admitted = Some(admitted.with_cleanup(inst, ov, deleting, uids, out));
    }
}

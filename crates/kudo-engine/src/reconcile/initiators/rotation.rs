//! Rotation of sensitive parameters ([`crate::rotation`]): when the data of a referenced Secret
//! changed, the parameters' trigger plan is proposed like a user's `plan trigger`; the new
//! fingerprints are written with the admission (one patch), so a restart neither loses nor
//! repeats the run.

use std::collections::BTreeMap;

use super::Initiator;
use crate::initiate::{Initiation, Origin};
use crate::pass::EventType;
use crate::reconcile::admitted::{Admitted, Uids};
use crate::reconcile::annotations::FINGERPRINTS_ANNOTATION;
use crate::reconcile::effect::{Effect, LogLevel};
use crate::reconcile::observed::{Admitting, Needs, Observation, Observed, Sensitive};
use crate::rotation::{Decision as Rotation_, Fingerprints};
use crate::triggers::Decision;

/// Event reason: the value of a sensitive parameter changed in its Secret (rotation).
pub const PARAMETER_ROTATED: &str = "ParameterRotated";

pub(super) struct Rotation;

impl Initiator for Rotation {
    fn name(&self) -> &'static str {
        "rotation"
    }

    /// The fingerprints, except while deleting (no key is read or made then).
    fn needs(&self, obs: &Observed<'_>) -> Needs {
        if obs.deleting {
            Needs::new()
        } else {
            vec![Observation::Sensitive]
        }
    }

    fn initiate(&self, obs: &Observed<'_>, adm: &mut Admitting, uids: Uids<'_>) {
        let Some(admitted) = adm.admitted.as_mut() else {
            return;
        };
        if obs.deleting || admitted.exec.is_none() {
            return;
        }
        let recorded_text = obs.inst.metadata.annotations.get(FINGERPRINTS_ANNOTATION);
        let (current, fresh) = match &obs.sensitive {
            Sensitive::NotRead | Sensitive::Unknown => return,
            Sensitive::NoSources => {
                if recorded_text.is_some() {
                    admitted.annotations.insert(FINGERPRINTS_ANNOTATION, None);
                }
                return;
            }
            Sensitive::Current {
                fingerprints,
                fresh_key,
            } => (fingerprints, *fresh_key),
        };
        let recorded: Option<Fingerprints> = if fresh {
            None
        } else {
            recorded_text.and_then(|t| serde_json::from_str(t).ok())
        };
        let out = &mut adm.effects;
        let record = match crate::rotation::decide(recorded.as_ref(), current, admitted.busy(), obs.ov) {
            Rotation_::Keep => return,
            Rotation_::Record(fp) => fp,
            Rotation_::Invalid { message, record } => {
                out.push(Effect::log(
                    LogLevel::Warn,
                    format!("sensitive parameter rotation triggers no plan: {message}"),
                ));
                out.push(Effect::event(
                    EventType::Warning,
                    PARAMETER_ROTATED,
                    "Rotation",
                    &message,
                ));
                record
            }
            Rotation_::Trigger {
                plan,
                parameters,
                record,
            } => {
                start(obs, admitted, &plan, &parameters.join(", "), uids, out);
                record
            }
        };
        admitted.annotations.insert(
            FINGERPRINTS_ANNOTATION,
            Some(serde_json::to_string(&record).unwrap_or_default()),
        );
    }
}

/// Proposes the trigger plan of rotated parameters `names` like a user's `plan trigger` and
/// reports what the admission answered.
fn start(
    obs: &Observed<'_>,
    admitted: &mut Admitted,
    plan: &str,
    names: &str,
    uids: Uids<'_>,
    out: &mut Vec<Effect>,
) {
    let init = Initiation {
        plan: plan.to_string(),
        set_parameters: BTreeMap::new(),
        origin: Origin::Rotation {
            parameters: names.to_string(),
        },
    };
    match &admitted.propose(obs.inst, obs.ov, &init, uids, out) {
        Decision::Schedule { .. } => {
            let uid = admitted.spec.plan_execution.uid.clone();
            let msg = format!(
                "The value of parameter(s) {names} changed in their Secret: plan {plan} (run {uid}) started"
            );
            out.push(Effect::log(LogLevel::Info, msg.clone()));
            out.push(Effect::event(
                EventType::Normal,
                PARAMETER_ROTATED,
                &format!("Rotation {uid}"),
                &msg,
            ));
        }
        Decision::Deny { message } => {
            let msg = format!(
                "The value of parameter(s) {names} changed in their Secret, but plan {plan} cannot start: {message}"
            );
            out.push(Effect::log(LogLevel::Warn, msg.clone()));
            out.push(Effect::event(
                EventType::Warning,
                PARAMETER_ROTATED,
                "Rotation",
                &msg,
            ));
        }
        other => out.push(Effect::log(
            LogLevel::Debug,
            format!("rotation trigger not admitted: {other:?}"),
        )),
    }
}

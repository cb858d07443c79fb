//! A Rollout's kstatus conditions: `Reconciling` (work remains), `Stalled` (it cannot go on
//! without someone), `Ready` (done), each saying the generation it observed, as
//! `status.observedGeneration` does. kstatus reads the abnormal-true `Reconciling`/`Stalled`; the
//! three are always all present, with `False` where they do not apply, so a watcher (`kubectl
//! wait --for=condition=Ready`, Flux, Argo CD) needs no default.

use kudo_api::Condition;

use super::phase;
use crate::readiness::{READY, set_condition};
use crate::time::Timestamp;

/// Condition type True while work remains (`Progressing`, `RollingBack`, `Paused`, …).
pub const RECONCILING: &str = "Reconciling";
/// Condition type True when the rollout cannot go on without someone (`Halted`, `Invalid`, …).
pub const STALLED: &str = "Stalled";

/// `(Reconciling, Stalled, Ready)` of a rollout phase.
fn truth(p: &str) -> (bool, bool, bool) {
    match p {
        phase::COMPLETE => (false, false, true),
        phase::HALTED | phase::ROLLED_BACK | phase::ABORTED | phase::INVALID => (false, true, false),
        // Progressing, RollingBack, Paused, WaitingForApproval: work remains.
        _ => (true, false, false),
    }
}

/// Sets the three conditions for `phase` (its name is their reason, `message` their message).
pub fn set(conditions: &mut Vec<Condition>, p: &str, message: &str, generation: Option<i64>, now: Timestamp) {
    let (reconciling, stalled, ready) = truth(p);
    for (type_, on) in [(RECONCILING, reconciling), (STALLED, stalled), (READY, ready)] {
        set_condition(
            conditions,
            Condition {
                type_: type_.to_string(),
                status: if on { "True" } else { "False" }.to_string(),
                observed_generation: generation,
                last_transition_time: now.to_string(),
                reason: p.to_string(),
                message: message.to_string(),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_phase_has_one_abnormal_or_ready_condition() {
        let now = Timestamp::from_unix(1_800_000_000);
        let cases = [
            (phase::PROGRESSING, "True", "False", "False"),
            (phase::PAUSED, "True", "False", "False"),
            (phase::WAITING_FOR_APPROVAL, "True", "False", "False"),
            (phase::ROLLING_BACK, "True", "False", "False"),
            (phase::HALTED, "False", "True", "False"),
            (phase::ROLLED_BACK, "False", "True", "False"),
            (phase::ABORTED, "False", "True", "False"),
            (phase::INVALID, "False", "True", "False"),
            (phase::COMPLETE, "False", "False", "True"),
        ];
        for (p, r, s, ok) in cases {
            let mut c = Vec::new();
            set(&mut c, p, "m", Some(3), now);
            let get = |t: &str| c.iter().find(|c| c.type_ == t).unwrap();
            assert_eq!(
                (
                    get(RECONCILING).status.as_str(),
                    get(STALLED).status.as_str(),
                    get(READY).status.as_str()
                ),
                (r, s, ok),
                "{p}"
            );
            assert!(
                c.iter()
                    .all(|c| c.observed_generation == Some(3) && c.reason == p),
                "{p}"
            );
        }
        // The transition time moves only with the status.
        let mut c = Vec::new();
        set(&mut c, phase::PROGRESSING, "a", Some(1), now);
        set(&mut c, phase::PAUSED, "b", Some(2), now.plus_seconds(5));
        let ready = c.iter().find(|c| c.type_ == READY).unwrap();
        assert_eq!(ready.last_transition_time, now.to_string());
        set(&mut c, phase::COMPLETE, "c", Some(2), now.plus_seconds(9));
        let ready = c.iter().find(|c| c.type_ == READY).unwrap();
        assert_eq!(ready.last_transition_time, now.plus_seconds(9).to_string());
    }
}

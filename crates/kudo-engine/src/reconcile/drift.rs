//! Drift repair's decisions: the policy an Instance chose ([`Policy`]), and the `Drifted`
//! condition of an idle Instance after the manager's drift check (what the check found decides
//! the condition and whether users are told, once per distinct finding).

use std::collections::BTreeMap;

use kudo_api::Condition;

use super::effect::{Effect, LogLevel};
use crate::pass::EventType;
use crate::readiness::set_condition;
use crate::time::Timestamp;

/// Annotation choosing what happens to drifted objects: `repair` (default), `report`, `ignore`.
pub const DRIFT_POLICY_ANNOTATION: &str = "kudo.dev/drift-policy";
/// Same as [`DRIFT_POLICY_ANNOTATION`] under our own prefix (checked when the former is absent).
pub const DRIFT_POLICY_ANNOTATION_RS: &str = "kudo-rs.dev/drift-policy";

/// What to do about drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Re-apply drifted objects as the last plan left them (the default).
    Repair,
    /// Leave drifted objects alone; report them in the `Drifted` condition and an Event.
    Report,
    /// Do not check for drift.
    Ignore,
}

impl Policy {
    /// The policy from the Instance annotations; an unknown value falls back to `repair` and is
    /// returned as the error message to report.
    pub fn from_annotations(a: &BTreeMap<String, String>) -> (Policy, Option<String>) {
        let v = a
            .get(DRIFT_POLICY_ANNOTATION)
            .or_else(|| a.get(DRIFT_POLICY_ANNOTATION_RS));
        match v.map(|s| s.trim()) {
            None | Some("") | Some("repair") => (Policy::Repair, None),
            Some("report") => (Policy::Report, None),
            Some("ignore") => (Policy::Ignore, None),
            Some(other) => (
                Policy::Repair,
                Some(format!(
                    "unknown drift policy {other:?} (expected repair, report or ignore): repairing"
                )),
            ),
        }
    }
}

/// Condition (policy `report`) listing managed objects changed outside a plan.
pub const DRIFTED: &str = "Drifted";
/// Event reason: drifted objects were found and left alone (policy `report`).
pub const DRIFT_DETECTED: &str = "DriftDetected";

/// What one drift check found.
#[derive(Debug, Clone, Copy)]
pub struct DriftFound<'a> {
    /// The policy is `report` (found objects are not repaired).
    pub report: bool,
    /// Objects found missing or changed (`Kind ns/name: why`).
    pub drifted: &'a [String],
    /// The check failed somewhere (retried at the next idle reconcile).
    pub failed: bool,
}

/// Updates `conditions` for what the check found: under policy `report`, `Drifted=True` naming
/// the objects (a Warning Event when that list is new); otherwise, once a check succeeded, no
/// `Drifted` condition (a failed check leaves it as it was).
pub fn drift_condition(
    found: DriftFound<'_>,
    conditions: &mut Vec<Condition>,
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Effect> {
    if !found.report || found.drifted.is_empty() {
        if !found.failed {
            conditions.retain(|c| c.type_ != DRIFTED);
        }
        return Vec::new();
    }
    let msg = format!(
        "objects changed outside a plan (policy report, not repaired): {}",
        found.drifted.join(", ")
    );
    let known = conditions
        .iter()
        .any(|c| c.type_ == DRIFTED && c.status == "True" && c.message == msg);
    let effects = if known {
        Vec::new()
    } else {
        vec![
            Effect::log(LogLevel::Warn, msg.clone()),
            Effect::event(EventType::Warning, DRIFT_DETECTED, "DriftRepair", &msg),
        ]
    };
    set_condition(
        conditions,
        Condition {
            type_: DRIFTED.into(),
            status: "True".into(),
            observed_generation: generation,
            last_transition_time: now.to_string(),
            reason: DRIFT_DETECTED.into(),
            message: msg,
        },
    );
    effects
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_from_annotations() {
        let mut a = BTreeMap::new();
        assert_eq!(Policy::from_annotations(&a), (Policy::Repair, None));
        a.insert(DRIFT_POLICY_ANNOTATION_RS.to_string(), "report".to_string());
        assert_eq!(Policy::from_annotations(&a), (Policy::Report, None));
        a.insert(DRIFT_POLICY_ANNOTATION.to_string(), "ignore".to_string());
        assert_eq!(Policy::from_annotations(&a), (Policy::Ignore, None));
        a.insert(DRIFT_POLICY_ANNOTATION.to_string(), "fix".to_string());
        let (p, err) = Policy::from_annotations(&a);
        assert_eq!(p, Policy::Repair);
        assert!(err.unwrap().contains("unknown drift policy"));
    }
}

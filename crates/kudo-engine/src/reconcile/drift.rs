//! The `Drifted` condition of an idle Instance after the manager's drift check: what the check
//! found decides the condition and whether users are told (once per distinct finding).

use kudo_api::Condition;

use super::{Effect, LogLevel};
use crate::pass::EventType;
use crate::readiness::set_condition;
use crate::time::Timestamp;

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

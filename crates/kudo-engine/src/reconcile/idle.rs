//! The idle step of an Instance without a plan scheduled: where its readiness comes from, and
//! whether (and under which policy) its objects are checked for drift.

use std::collections::BTreeMap;

use kudo_api::{Condition, InstanceStatus};

use super::drift::{DRIFTED, Policy};
use super::effect::{Effect, LogLevel};
use crate::readiness::{idle_readiness, last_failed_lifecycle_plan};
use crate::time::Timestamp;

/// What the idle step does.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleStep {
    /// The `Ready` condition, when it does not depend on the objects (a failed lifecycle run);
    /// `None`: the manager judges the objects of [`crate::readiness::IDLE_READINESS_KINDS`].
    pub ready: Option<Condition>,
    /// Check the objects of the completed lifecycle runs for drift under this policy; `None`: no
    /// check (the Instance is being deleted, a lifecycle run failed, or drift is ignored).
    pub drift: Option<Policy>,
    /// Events, log lines and status changes the idle step asks for.
    pub effects: Vec<Effect>,
}

/// The idle step of an Instance whose status is `status` (the `Drifted` condition is removed
/// here when its drift is ignored), its annotations choosing the drift policy.
pub fn idle_step(
    status: &mut InstanceStatus,
    deleting: bool,
    annotations: &BTreeMap<String, String>,
    now: Timestamp,
) -> IdleStep {
    let ready = idle_readiness(status, now);
    let mut step = IdleStep {
        ready,
        drift: None,
        effects: Vec::new(),
    };
    if deleting || last_failed_lifecycle_plan(status).is_some() {
        return step;
    }
    let (policy, bad) = Policy::from_annotations(annotations);
    step.effects
        .extend(bad.map(|msg| Effect::log(LogLevel::Warn, msg)));
    if policy == Policy::Ignore {
        status.conditions.retain(|c| c.type_ != DRIFTED);
    } else {
        step.drift = Some(policy);
    }
    step
}

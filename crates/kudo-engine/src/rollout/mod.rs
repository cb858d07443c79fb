//! Fleet rollouts (a kudo-rs extension): what a `kudo-rs.dev` Rollout
//! ([`kudo_api::rollout::Rollout`]) does next, decided from the objects alone.
//!
//! The manager's rollout controller reads the Rollout, the Instances it selects (with their
//! OperatorVersions and, where [`wanted_revisions`] asks, their revisions) and calls [`decide`],
//! which returns the status to write and the [`Action`]s to execute: change an Instance (as
//! `kubectl kudo update`/`upgrade` would, with the [`RolloutMark`]), stop the rollout's own run of
//! one, or roll one back (as `kubectl kudo rollback` would). The Instance controller runs the
//! plans; the rollout only writes specs and watches them run.
//!
//! Everything the decision needs lives in the objects: which wave each Instance is in, and what
//! happened to it, in the Rollout's status; whether the rollout changed an Instance, and which run
//! is its own, in the Instance's mark. So a restarted manager, or the replica a shard moved to,
//! decides the same, and an Instance is changed at most once: a change is written only to an
//! Instance without the mark, guarded by the resourceVersion it was judged on.
//!
//! The course of a rollout:
//! * Waves run in order ([`settings`], [`waves`]). A wave starts once the one before completed and,
//!   if it asks for approval, once `spec.approvedWaves` names it; then its Instances are changed,
//!   at most `maxConcurrent` at a time. An Instance busy with a plan waits (it is never
//!   cancelled); one already at the target is skipped; one KUDO's rules would refuse fails.
//! * A changed Instance is healthy when the rollout's run completed, its `Ready` condition is True
//!   for its current generation, no plan runs, and every gate rule holds. It fails when its run
//!   ends otherwise, or when it is not healthy within `progressDeadline` of the change.
//! * A wave completes when every changed Instance of it has been healthy, together, for
//!   `gate.minSuccessTime` (the failed ones aside).
//! * More failures than `maxFailures`: no Instance is changed any more (`Halted`); with
//!   `onFailure: Rollback` every Instance the rollout changed goes back to the revision it had
//!   before the rollout's run (`RollingBack`, then `RolledBack`).
//! * `paused` changes no Instance until cleared; `abort` ends the rollout once no Instance is
//!   changing. Complete, RolledBack and Aborted are final.

mod conditions;
mod decide;
mod instance;
mod mark;
mod settings;
mod waves;

pub use conditions::{RECONCILING, STALLED};
pub use decide::{decide, wanted_revisions};
pub use instance::{Judged, View, busy, judge, proposed, view};
pub use mark::{ROLLOUT_ANNOTATION, RolloutMark};
pub use settings::{CANARY, DEFAULT_PROGRESS_DEADLINE, REMAINING, Settings, SpecError, WaveDef, settings};
pub use waves::{Candidate, assign};

use kudo_api::rollout::{Rollout, RolloutStatus};
use kudo_api::{Instance, OperatorVersion};

use crate::revision::Revision;
use crate::time::Timestamp;

/// `status.phase` of a Rollout.
pub mod phase {
    /// Waves run (Instances change, or a gate is awaited), or an abort waits for changes to end.
    pub const PROGRESSING: &str = "Progressing";
    /// `spec.paused` is set: no Instance is changed until it is cleared.
    pub const PAUSED: &str = "Paused";
    /// The next wave asks for approval and `spec.approvedWaves` does not name it yet.
    pub const WAITING_FOR_APPROVAL: &str = "WaitingForApproval";
    /// More failures than `maxFailures` with `onFailure: Pause`.
    pub const HALTED: &str = "Halted";
    /// More failures than `maxFailures` with `onFailure: Rollback`: the changed Instances go back
    /// to the revisions they had before.
    pub const ROLLING_BACK: &str = "RollingBack";
    /// Every wave completed (final).
    pub const COMPLETE: &str = "Complete";
    /// Every changed Instance was rolled back, or failed to be (final).
    pub const ROLLED_BACK: &str = "RolledBack";
    /// `spec.abort` was set and no Instance is changing any more (final).
    pub const ABORTED: &str = "Aborted";
    /// The spec cannot be used (the message says why).
    pub const INVALID: &str = "Invalid";
}

/// `phase` of an Instance of a rollout.
pub mod instance_phase {
    /// Its wave has not reached it.
    pub const PENDING: &str = "Pending";
    /// Its turn came, but another plan keeps it busy (the message says which).
    pub const WAITING: &str = "Waiting";
    /// Changed; its run goes on or it is not healthy yet.
    pub const PROGRESSING: &str = "Progressing";
    /// Its run completed and it is healthy: it waits for its wave's gate.
    pub const HEALTHY: &str = "Healthy";
    /// Its wave's gate passed while it was healthy: the change is done.
    pub const SUCCEEDED: &str = "Succeeded";
    /// Its run ended other than COMPLETE, it was not healthy within `progressDeadline`, or KUDO's
    /// rules refused the change; `failure` says why, and the failure budget counts it.
    pub const FAILED: &str = "Failed";
    /// Not changed: it had the target already, or it joined too late.
    pub const SKIPPED: &str = "Skipped";
    /// Deleted, or no longer selected.
    pub const DELETED: &str = "Deleted";
    /// Going back to its revision before the rollout's run (`onFailure: Rollback`).
    pub const ROLLING_BACK: &str = "RollingBack";
    /// Back on the values of its revision before the rollout's run.
    pub const ROLLED_BACK: &str = "RolledBack";
    /// Its rollback was refused or cannot be made (the message says why).
    pub const ROLLBACK_FAILED: &str = "RollbackFailed";
}

/// `phase` of a wave.
pub mod wave_phase {
    /// Not started: an earlier wave has not completed yet.
    pub const PENDING: &str = "Pending";
    /// Waits for `spec.approvedWaves` to name it (`kubectl kudo rollout resume`).
    pub const WAITING_FOR_APPROVAL: &str = "WaitingForApproval";
    /// Its Instances are being changed, or its gate is awaited.
    pub const PROGRESSING: &str = "Progressing";
    /// Its gate passed: every changed Instance was healthy together for `minSuccessTime`.
    pub const COMPLETE: &str = "Complete";
}

/// Whether a rollout in this phase is over: nothing is decided for it any more.
pub fn is_final(p: &str) -> bool {
    matches!(p, phase::COMPLETE | phase::ROLLED_BACK | phase::ABORTED)
}

/// Whether the rollout is over (final phase, for its current spec).
pub fn finished(r: &Rollout) -> bool {
    r.status.as_ref().is_some_and(|s| is_final(&s.phase))
}

/// "1 Instance", "3 Instances": how a rollout's messages and the CLI count Instances.
///
/// ```
/// assert_eq!(kudo_engine::rollout::instances(1), "1 Instance");
/// assert_eq!(kudo_engine::rollout::instances(0), "0 Instances");
/// ```
pub fn instances(n: usize) -> String {
    format!("{n} Instance{}", if n == 1 { "" } else { "s" })
}

/// `namespace/name`: how the rollout's status names an Instance.
pub fn key(inst: &Instance) -> String {
    format!(
        "{}/{}",
        inst.metadata.namespace.as_deref().unwrap_or_default(),
        inst.metadata.name
    )
}

/// An Instance the rollout selects, as the controller read it.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    /// The Instance as read, with the resourceVersion its change is guarded by.
    pub instance: &'a Instance,
    /// The OperatorVersion it runs; `None` when it does not exist.
    pub current_ov: Option<&'a OperatorVersion>,
    /// The target OperatorVersion where the Instance looks up its own (its own OperatorVersion
    /// when the target names none); `None` when it does not exist there.
    pub target_ov: Option<&'a OperatorVersion>,
    /// Its revisions, when [`wanted_revisions`] asked for them.
    pub revisions: Option<&'a [Revision]>,
}

/// What a decision starts from: the Rollout as stored, every Instance it selects in the
/// manager's scope, and the clock.
#[derive(Debug, Clone)]
pub struct Observed<'a> {
    /// The Rollout as stored, its status the record the decision starts from.
    pub rollout: &'a Rollout,
    /// Every Instance the rollout selects in the manager's scope.
    pub instances: Vec<Seen<'a>>,
    /// The clock: deadlines and the gate's `minSuccessTime` are measured against it.
    pub now: Timestamp,
}

/// What the controller executes, each guarded by the resourceVersion of the Instance read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write the target into the Instance (`instance`: `namespace/name`) with `mark`; `plan`
    /// is the plan KUDO's rules say it runs.
    Change {
        /// The Instance to change, `namespace/name`.
        instance: String,
        /// The plan the change runs, by KUDO's trigger rules (recorded in the status).
        plan: String,
        /// The mark to write with the change (without `run`: the manager adds it on admission).
        mark: RolloutMark,
    },
    /// Cancel the rollout's own run `run` of the Instance (a rollback waits for it to stop).
    Cancel {
        /// The Instance, `namespace/name`.
        instance: String,
        /// The uid of the rollout's own run (from its mark): only that run is cancelled.
        run: String,
    },
    /// Roll the Instance back to revision `to` (its newest before the rollout's run).
    Rollback {
        /// The Instance, `namespace/name`.
        instance: String,
        /// The revision number to restore the values of.
        to: u64,
    },
}

/// The outcome of [`decide`].
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The status to write (when it differs from the stored one).
    pub status: RolloutStatus,
    /// What to write to Instances: changes, cancellations of its own runs, rollbacks.
    pub actions: Vec<Action>,
    /// Decide again after at most this many seconds, without any event (`None`: never, the
    /// rollout is over).
    pub requeue: Option<u64>,
}

//! Everything that starts or changes a run: a user's change of the spec, an autopilot rule,
//! the rotation of a sensitive parameter, a plan's schedule. Each is an [`Initiator`] in its own
//! file, registered in [`INITIATORS`]; a new kind of self-started change is a new file and a new
//! line there, not a new step in the manager's reconcile.

mod autopilot;
mod rotation;
mod schedules;
mod user_change;

pub use rotation::PARAMETER_ROTATED;
pub use schedules::{INVALID_SCHEDULE, SCHEDULED_PLAN_SKIPPED};

use super::admitted::Uids;
use super::observed::{Admitting, Needs, Observed};

/// One source of changes to an Instance's run. Pure: it reads [`Observed`] and the admission so
/// far, and adds its admission and [`super::Effect`]s to `adm`.
pub trait Initiator: Sync {
    /// Short name (logs, tests).
    fn name(&self) -> &'static str;
    /// What must be read before [`Self::initiate`] (read once per reconcile).
    fn needs(&self, _obs: &Observed<'_>) -> Needs {
        Needs::new()
    }
    /// Decides this source's change from `obs`, adding its admission and effects to `adm`; new runs
    /// take their uid from `uids`.
    fn initiate(&self, obs: &Observed<'_>, adm: &mut Admitting, uids: Uids<'_>);
}

/// The initiators in the order they decide. An autopilot firing comes first and replaces the
/// admission of the stored spec; the user's change is admitted otherwise (and the cleanup plan
/// on deletion); rotation and schedules then see the Instance busy when either started a run.
pub static INITIATORS: &[&dyn Initiator] = &[
    &autopilot::Autopilot,
    &user_change::UserChange,
    &rotation::Rotation,
    &schedules::Schedules,
];

//! The record of the last run that ended, carried by the write that unschedules it.
//!
//! A terminal pass writes the unscheduling spec first and the run's final status second, so that
//! the status can name the generation that spec write produced: written first, it would claim a
//! generation the object does not have yet (see [`crate::progress`]). A manager stopped between
//! the two writes would leave the end unrecorded — the spec no longer schedules the run while the
//! stored status still shows it running — so the unscheduling write also stores the run's final
//! plan status in [`ENDED_RUN_ANNOTATION`] ([`ended_record`]), and any later reconcile restores it
//! into a status that lacks it ([`restore_ended`]). The record costs no request: it rides with
//! the unscheduling, and it is replaced by the next run's.

use std::collections::BTreeMap;

use kudo_api::{Instance, InstanceStatus, PlanStatus};

use crate::readiness::updated_at;

/// Instance annotation: the final plan status (JSON) of the run the manager unscheduled last.
pub const ENDED_RUN_ANNOTATION: &str = "kudo-rs.dev/ended-run";

/// The value [`ENDED_RUN_ANNOTATION`] takes when this reconcile's spec write unschedules the run
/// `inst` (as stored) schedules: its plan status in `status` is terminal. `None`: nothing to
/// record, or recorded already.
pub fn ended_record(inst: &Instance, status: &InstanceStatus) -> Option<String> {
    let pe = &inst.spec.plan_execution;
    let ps = status.plan_status.get(&pe.plan_name)?;
    if pe.plan_name.is_empty() || ps.uid != pe.uid || !ps.status.is_terminal() {
        return None;
    }
    let record = serde_json::to_string(ps).ok()?;
    let current = inst.metadata.annotations.get(ENDED_RUN_ANNOTATION);
    (current != Some(&record)).then_some(record)
}

/// Restores into `status` the end [`ENDED_RUN_ANNOTATION`] records when the status does not show
/// it: the recorded run is shown unfinished, or an older run of its plan is shown, or none. A run
/// of that plan that is scheduled now (`scheduled_uid`), or one updated after the record, is left
/// alone. Returns whether `status` changed.
pub fn restore_ended(
    status: &mut InstanceStatus,
    annotations: &BTreeMap<String, String>,
    scheduled_uid: &str,
) -> bool {
    let Some(record) = annotations
        .get(ENDED_RUN_ANNOTATION)
        .and_then(|a| serde_json::from_str::<PlanStatus>(a).ok())
    else {
        return false;
    };
    if record.name.is_empty() || !record.status.is_terminal() {
        return false;
    }
    let restore = match status.plan_status.get(&record.name) {
        None => true,
        Some(shown) if shown == &record => false,
        Some(shown) if shown.uid == record.uid => !shown.status.is_terminal(),
        Some(shown) => shown.uid != scheduled_uid && updated_at(shown) <= updated_at(&record),
    };
    if restore {
        status.plan_status.insert(record.name.clone(), record);
    }
    restore
}

//! The decisions of one reconcile of an Instance, kept pure (observe → decide → effect).
//!
//! The manager reads what it needs ([`Observed`]), runs every [`Initiator`] of
//! [`initiators::INITIATORS`] in order over it, and then executes what they decided: the spec
//! and annotations to store and to execute ([`Admitted`]), and [`Effect`]s (Events, log lines,
//! status fields to write, when to look again), in the order they were produced. No initiator
//! performs IO; an initiator that needs something read first says so ([`Initiator::needs`]: a
//! set of [`Observation`]s) and the manager reads it in one `observe` before calling it (lazily,
//! so a reconcile reads nothing no decision needs — the request budget per Instance counts).
//!
//! The rest of a reconcile is decided here too: which step runs and how a pass ends
//! ([`plan_step`], [`after_pass`]), the idle step ([`idle_step`]), and what is written
//! ([`settle`], the patches).
//!
//! Run ids: the engine draws no random numbers; the caller hands a generator of fresh run uids.

mod admitted;
mod annotations;
mod drift;
mod effect;
mod ended;
mod idle;
mod initiating;
pub mod initiators;
mod observed;
mod patch;
mod settle;
mod start;
mod step;

pub use admitted::{Admitted, Uids, started_by_user};
pub use annotations::{ADMITTED_SPEC_ANNOTATION, FINGERPRINTS_ANNOTATION, RETRY_ANNOTATION, admitted_spec};
pub use drift::{
    DRIFT_DETECTED, DRIFT_POLICY_ANNOTATION, DRIFT_POLICY_ANNOTATION_RS, DRIFTED, DriftFound, Policy,
    drift_condition,
};
pub use effect::{Effect, LogLevel, Requeue, StatusChange};
pub use ended::{ENDED_RUN_ANNOTATION, ended_record, restore_ended};
pub use idle::{IdleStep, idle_step};
pub use initiating::{Initiating, initiate_all};
pub use initiators::{INITIATORS, Initiator};
pub use observed::{
    Admitting, Autopilot, AutopilotRead, Needs, Observation, Observed, Provided, Scheduled, Sensitive,
};
pub use patch::{
    Stored, autopilot_patch, bumps_generation, cancel_patch, spec_patch, spec_patch_along, status_patch,
    trigger_patch,
};
pub use settle::{
    CLUSTER_OBJECTS_ANNOTATION, CLUSTER_OBJECTS_FINALIZER, ClusterObject, Settle, Settled, settle,
    stored_cluster_objects,
};
pub use start::{Starting, start_unwritten};
pub use step::{
    AfterPass, PassEnd, Step, StepInput, after_pass, plan_step, render_failed, start_pass, store_plan_status,
};

//! The pure (sans-IO) KUDO plan engine: every decision KUDO v0.19's controller and admission
//! webhook make about plans, with the IO left to the caller.
//!
//! Nothing here talks to an API server, spawns a task or reads the clock. The async controller
//! fetches objects, passes them in as values (typed `kudo_api` objects or `serde_json::Value`s as
//! the API server returns them), and performs the IO the engine asks for. That keeps the KUDO
//! semantics exhaustively unit-testable and lets one `now` govern a whole reconcile.
//!
//! # Executing a plan: the pull-based pass
//!
//! KUDO runs a plan as a series of *passes*, one per reconcile ([`PlanPass`]). A pass walks the
//! phases and steps in order and runs every task of every step it reaches. Instead of calling
//! into the controller for each task, the pass is a state machine the controller *pulls* from:
//!
//! ```no_run
//! # use kudo_engine::*;
//! # fn do_io(_: &TaskCall<'_>) -> TaskOutcome { TaskOutcome::Done }
//! # fn demo(ov: &kudo_api::OperatorVersionSpec, status: kudo_api::PlanStatus, now: Timestamp) -> Result<(), PassError> {
//! let mut pass = PlanPass::start(ov, "deploy", status, now)?
//!     .with_instance("default", "my-instance")
//!     .with_timing(Timing::from_annotation(None));
//! while let Some(call) = pass.next_task() {
//!     let outcome = do_io(&call); // in the controller: apply/delete/pipe/... then health, awaited
//!     pass.report(outcome);
//! }
//! let (new_status, summary) = pass.finish();
//! # let _ = (new_status, summary); Ok(()) }
//! ```
//!
//! Invariants of a pass:
//! * A terminal plan (COMPLETE, FATAL_ERROR, CANCELLED) is returned unchanged and yields no task.
//! * Otherwise the plan becomes IN_PROGRESS; phases are visited in spec order, COMPLETE ones are
//!   skipped, running ones (PENDING/IN_PROGRESS/ERROR) become IN_PROGRESS; the same for steps.
//! * Every task of a visited step is yielded, in list order, on every pass until the step is
//!   complete; a step is complete iff all its tasks reported [`TaskOutcome::Done`] in this pass.
//! * [`TaskOutcome::Transient`] puts the step in ERROR with KUDO's message
//!   `A transient error when executing task <plan>.<phase>.<step>.<task>. Will retry. <err>` and
//!   the pass continues with the next task.
//! * [`TaskOutcome::Fatal`], a missing phase/step status, an unknown task name, an invalid task,
//!   an invalid or expired `timeout` end the pass at once with FATAL_ERROR (message on the step for
//!   step-level failures, on the phase for a missing step status, on the plan for a missing phase
//!   status or plan-level failures — KUDO's layout).
//! * A `serial` phase stops at its first incomplete step, a `serial` plan at its first incomplete
//!   phase; any other strategy string (including empty) behaves as parallel. All phases complete →
//!   plan COMPLETE.
//! * [`PlanPass::request_cancel`] stops the pass at the next task boundary; a non-terminal plan
//!   becomes CANCELLED (our addition).
//! * `next_task` hands out at most one call at a time and repeats it until it is reported; the
//!   [`TaskCall`] borrows only the OperatorVersion, so it may be held across `.await`.
//! * `lastUpdatedTimestamp` is bumped only when something in the status tree changed.
//!
//! # The rest
//! * [`status`]: plan status initialisation on install/upgrade and reset for a new run.
//! * [`retry`]: `plan retry`, re-running a FATAL_ERROR plan from its first failed step.
//! * [`triggers`]: the admission-webhook rules (what plan a change of an Instance schedules, what
//!   KUDO would have denied, parameter validation), as a pure function, since kudo-rs has no webhook.
//! * [`mod@health`] and [`readiness`]: when an applied object counts as healthy, and the Instance's
//!   `Ready` condition.
//! * [`tasks`]: task build-time validation, effective parameter values, Toggle's choice.
//! * [`errors`]: which API errors are transient and which fatal.
//! * [`ownership`]: whether an apply may write an existing object, or adopt it.
//! * [`field_ownership`]: moving field ownership from another writer to kudo's apply manager.

pub mod autopilot;
pub mod dependencies;
pub mod errors;
pub mod field_ownership;
pub mod health;
pub mod initiate;
pub mod migrate;
pub mod ownership;
pub mod pass;
pub mod pipe;
pub mod progress;
pub mod readiness;
pub mod reconcile;
pub mod retry;
pub mod revision;
pub mod rollback;
pub mod rollout;
pub mod rotation;
pub mod schedule;
pub mod scope;
pub mod shard;
pub mod source;
pub mod status;
pub mod tasks;
pub mod time;
pub mod triggers;
pub mod typed;
pub mod waiting;

pub use errors::{ErrorClass, classify_api_error};
pub use health::{Health, health};
pub use initiate::{Initiation, Origin, proposed_spec};
pub use pass::{
    Event, EventType, Fatal, PassError, PassSummary, PlanPass, TIMING_ANNOTATION, TaskCall, TaskOutcome,
    Timing, WAITING_GRACE_SECS, reasons,
};
pub use readiness::{
    not_ready_condition, plan_condition, ready_condition, record_admission, reobserve, set_condition,
};
pub use status::{
    Wake, ensure_plan_statuses, mark_plan_fatal, mirror_run_status, needs_reset, pass_requeue_secs,
    requeue_after_secs, reset_for_run,
};
pub use tasks::{
    TaskBuildError, ToggleAction, ToggleError, effective_parameters, toggle_action, validate_task,
};
pub use time::{TimeError, Timestamp, parse_duration};
pub use triggers::{
    Admission, Decision, InstanceChange, ScheduleReason, cleanup_finalizer_removable, cleanup_run, decide,
    should_schedule_cleanup, validate_parameters,
};
pub use waiting::bounded_waiting;

//! The reasons of the task outcomes and Events the manager itself produces (the engine's are
//! [`kudo_engine::reasons`]), and the fatal task outcome they name.

use kudo_engine::TaskOutcome;

pub const TASK_RENDERING_ERROR: &str = "TaskRenderingError";
pub const TASK_ENHANCEMENT_ERROR: &str = "TaskEnhancementError";
pub const RESOURCE_VALIDATION_ERROR: &str = "ResourceValidationError";
pub const RESOURCE_APPLY_ERROR: &str = "ResourceApplyError";
pub const FAILED_TERMINAL_STATE: &str = "FailedTerminalStateError";
pub const TOGGLE_TASK_ERROR: &str = "ToggleTaskError";
pub const DUMMY_TASK_ERROR: &str = "DummyTaskError";
pub const PIPE_TASK_ERROR: &str = "PipeTaskError";
pub const KUDO_OPERATOR_TASK_ERROR: &str = "KudoOperatorTaskError";
pub const SERVICE_ACCOUNT_NOT_FOUND: &str = "ServiceAccountNotFound";
/// An object the plan renders exists and is not this Instance's (`kudo_engine::ownership`).
pub const OWNERSHIP_CONFLICT: &str = "OwnershipConflict";

/// A task outcome that fails the plan with `reason` and `message`.
pub fn fatal(reason: &str, message: impl Into<String>) -> TaskOutcome {
    TaskOutcome::Fatal {
        reason: reason.to_string(),
        message: message.into(),
    }
}

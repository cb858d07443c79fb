//! One execution pass over a plan (KUDO's `workflow.Execute`), as a pull-based state machine.
//!
//! See the crate documentation for the driving loop and the invariants.

use std::collections::{BTreeMap, BTreeSet};

use kudo_api::{ExecutionStatus, OperatorVersionSpec, Plan, PlanStatus, Task};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::tasks::validate_task;
use crate::time::{Timestamp, parse_duration};
use crate::waiting::bounded_waiting;

/// Event reasons the pass reports; the strings are KUDO's where KUDO had one.
pub mod reasons {
    /// Normal Event when a plan run starts.
    pub const PLAN_STARTED: &str = "PlanStarted";
    /// Event when a run reaches a terminal status (Normal on COMPLETE, Warning otherwise).
    pub const PLAN_FINISHED: &str = "PlanFinished";
    /// A step names a task the OperatorVersion does not declare: the plan fails fatally.
    pub const UNKNOWN_TASK_NAME: &str = "UnknownTaskName";
    /// A task's spec is invalid for its kind ([`crate::tasks::validate_task`]): fatal.
    pub const TASK_BUILD_ERROR: &str = "TaskBuildError";
    /// The plan status lacks a phase the plan declares: fatal.
    pub const MISSING_PHASE_STATUS: &str = "MissingPhaseStatus";
    /// A phase status lacks a step the phase declares: fatal.
    pub const MISSING_STEP_STATUS: &str = "MissingStepStatus";
    /// A `KudoOperator` dependency graph with a cycle or a missing OperatorVersion (KUDO's name for
    /// both).
    pub const CIRCULAR_DEPENDENCY: &str = "CircularDependency";
    /// Ours: a `timeout` field that is not a valid duration.
    pub const INVALID_TIMEOUT: &str = "InvalidTimeout";
    /// Ours: a step exceeded its `timeout`.
    pub const STEP_TIMEOUT: &str = "StepTimeout";
    /// Ours: the plan exceeded its `timeout`.
    pub const PLAN_TIMEOUT: &str = "PlanTimeout";
    /// Ours: the run was cancelled on request.
    pub const PLAN_CANCELLED: &str = "PlanCancelled";
    /// The scheduled plan does not exist in the OperatorVersion.
    pub const INVALID_PLAN: &str = "InvalidPlan";
    /// The plan could not be rendered (invalid parameters, a plan-level template error).
    pub const INVALID_PARAMS: &str = "InvalidParams";
}

/// Annotation under which the controller persists [`Timing`] on the Instance (JSON).
pub const TIMING_ANNOTATION: &str = "kudo-rs.dev/plan-timing";

/// Errors that prevent a pass from being started at all.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PassError {
    /// KUDO: `InvalidPlan` — the scheduled plan does not exist in the OperatorVersion. The
    /// controller should mark the plan FATAL with [`crate::mark_plan_fatal`].
    #[error("could not find required plan: {0}")]
    PlanNotFound(String),
}

/// The controller's answer for one [`TaskCall`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskOutcome {
    /// The task finished (for Apply: every object is healthy; for Delete: every object is gone).
    Done,
    /// Not finished yet (e.g. an object is still rolling out). The optional text says what is
    /// awaited, one line per object; it is reported in [`PassSummary::waiting`] and kept in the
    /// step's `waiting_for` (bounded, see [`crate::waiting::bounded_waiting`]), not in its message (KUDO's status
    /// layout leaves a waiting step's message empty).
    InProgress(Option<String>),
    /// A retryable failure (API errors, health-check errors): step → ERROR, pass continues.
    Transient(String),
    /// A non-retryable failure: the pass stops and the plan becomes FATAL_ERROR. `reason` is the
    /// Kubernetes event reason (KUDO's: `TaskRenderingError`, `FailedTerminalStateError`, ...).
    Fatal {
        /// The Event reason, e.g. `TaskRenderingError`.
        reason: String,
        /// What failed, for the Event and the plan status.
        message: String,
    },
}

/// One task the controller must execute now. Borrows only from the OperatorVersion spec, so it can
/// be held across an `.await` while the pass itself stays untouched.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskCall<'a> {
    /// The plan being run.
    pub plan: &'a str,
    /// The phase of the task's step.
    pub phase: &'a str,
    /// The step the task belongs to.
    pub step: &'a str,
    /// The task's name as the step lists it.
    pub task_name: &'a str,
    /// The task, as the OperatorVersion declares it.
    pub task: &'a Task,
    /// `planStatus.uid` of the run (KUDO labels objects with it).
    pub plan_uid: String,
}

/// Kubernetes event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// An informational Event, e.g. a plan started or completed.
    Normal,
    /// A failure users should look at, e.g. a plan that ended in FATAL_ERROR.
    Warning,
}

/// An event the controller should emit on the Instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Normal or Warning.
    pub type_: EventType,
    /// The Event's reason, one of [`reasons`] or a task's.
    pub reason: String,
    /// The Event's human-readable message.
    pub message: String,
}

/// The fatal failure that ended the pass, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fatal {
    /// The Event reason, e.g. `StepTimeout`.
    pub reason: String,
    /// What failed, as written to the plan status.
    pub message: String,
}

/// Start times the `timeout` fields are measured from. KUDO's status has no start times, so the
/// engine keeps them here and the controller persists them (as JSON under [`TIMING_ANNOTATION`])
/// and passes them back into the next pass. Keyed by the run's uid: timing of another run is
/// discarded. Losing it is safe: clocks restart at the next pass (timeouts only get later).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Timing {
    /// `planExecution.uid` of the run the start times belong to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// When the plan first went IN_PROGRESS (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_started: Option<String>,
    /// phase → step → when the step first went IN_PROGRESS (RFC 3339). Only unfinished steps.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub steps: BTreeMap<String, BTreeMap<String, String>>,
}

impl Timing {
    /// Reads the annotation value; anything unreadable counts as "no timing yet" (see type docs).
    pub fn from_annotation(value: Option<&str>) -> Timing {
        value
            .and_then(|v| serde_json::from_str(v).ok())
            .unwrap_or_default()
    }

    /// The annotation value, or `None` when there is nothing to keep (remove the annotation).
    pub fn to_annotation(&self) -> Option<String> {
        if self.is_empty() {
            None
        } else {
            serde_json::to_string(self).ok()
        }
    }

    /// Whether nothing is recorded (no plan or step start time).
    pub fn is_empty(&self) -> bool {
        self.plan_started.is_none() && self.steps.is_empty()
    }

    fn step_started(&self, phase: &str, step: &str) -> Option<Timestamp> {
        self.steps
            .get(phase)?
            .get(step)
            .and_then(|t| Timestamp::parse(t).ok())
    }
}

/// What a pass did, for the controller to act on.
#[derive(Debug, Clone, PartialEq)]
pub struct PassSummary {
    /// The plan the pass ran.
    pub plan: String,
    /// The plan's status before the pass.
    pub status_before: ExecutionStatus,
    /// The plan's status after the pass.
    pub status: ExecutionStatus,
    /// Whether any status or message in the plan's tree changed (the timestamp is bumped only
    /// then, which is what makes [`crate::requeue_after_secs`] grow while a plan waits).
    pub changed: bool,
    /// Events to emit, in order.
    pub events: Vec<Event>,
    /// The fatal failure that ended the pass, if any.
    pub fatal: Option<Fatal>,
    /// Number of [`TaskCall`]s handed out and reported.
    pub tasks_run: usize,
    /// `plan.phase.step.task` → transient error text, for logging.
    pub transient_errors: Vec<(String, String)>,
    /// `plan.phase.step.task` → what an in-progress task waits for, for logging/conditions.
    pub waiting: Vec<(String, String)>,
    /// Timing to persist (see [`Timing::to_annotation`]); empty once the plan is terminal.
    pub timing: Timing,
    /// Earliest instant at which a step or plan timeout expires or a waiting step's grace ends
    /// ([`WAITING_GRACE_SECS`]), so the controller can requeue no later than that. `None` when
    /// terminal or nothing is timed.
    pub next_deadline: Option<Timestamp>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pos {
    PhaseStart(usize),
    StepStart(usize, usize),
    Task(usize, usize, usize),
    StepEnd(usize, usize),
    PhaseEnd(usize),
    PlanEnd,
    Finished,
}

/// What one move of the pass's cursor ([`PlanPass::advance`]) produced.
enum Move<'a> {
    /// The cursor moved; keep going.
    Continue,
    /// This task must be executed now.
    Run((usize, usize, usize, &'a Task)),
    /// The pass is over.
    Stop,
}

/// One pass over a plan. Created by [`PlanPass::start`], driven with [`PlanPass::next_task`] /
/// [`PlanPass::report`], consumed by [`PlanPass::finish`].
#[derive(Debug)]
pub struct PlanPass<'a> {
    spec: &'a OperatorVersionSpec,
    plan: &'a Plan,
    plan_name: &'a str,
    original: PlanStatus,
    status: PlanStatus,
    now: Timestamp,
    instance: String,
    timing: Timing,
    cancel_requested: bool,
    /// The failed run this run retries (see [`PlanPass::with_retry_of`]).
    retry_of: Option<String>,
    /// Objects deleted before this retry so that it creates them anew (see
    /// [`PlanPass::with_recreated`]).
    recreated: Vec<String>,
    pos: Pos,
    outstanding: Option<(usize, usize, usize, &'a Task)>,
    began: bool,
    // indexes into status.phases / phase.steps of the current phase/step
    phase_status_idx: usize,
    step_status_idx: usize,
    phases_left: usize,
    steps_left: usize,
    tasks_left: BTreeSet<&'a str>,
    events: Vec<Event>,
    fatal: Option<Fatal>,
    tasks_run: usize,
    transient_errors: Vec<(String, String)>,
    waiting: Vec<(String, String)>,
    /// What the tasks of the current step reported waiting for, one line per object; written
    /// to the step's `waiting_for` when the step ends the pass unfinished.
    step_waiting: Vec<String>,
    /// When the earliest step that waits without lines yet ([`WAITING_GRACE_SECS`]) gets them.
    grace_ends: Option<Timestamp>,
}

/// How long a step waits before its `waiting_for` lines are written (kudo-rs). Most
/// waits are a rollout progressing normally and end within seconds; writing each passing state
/// of its pods (`0 of 2 updated replicas are available`, then `1 of 2`, …) doubled the status
/// writes of a deploy. A step still waiting after this long gets its lines at once (the pass
/// asks for a reconcile then through [`PassSummary::next_deadline`]), and from then on they
/// follow every change as before.
pub const WAITING_GRACE_SECS: u64 = 5;

impl<'a> PlanPass<'a> {
    /// Begins a pass over `plan_name` of `spec`, starting from `status` (the plan's entry in
    /// `Instance.status.planStatus`, already initialised/reset by the caller). `now` is the
    /// reconcile's instant; it is used for timestamps and timeouts.
    ///
    /// Terminal plans (COMPLETE, FATAL_ERROR, CANCELLED) are left unchanged: `next_task` yields
    /// nothing and `finish` returns the status as given.
    pub fn start(
        spec: &'a OperatorVersionSpec,
        plan_name: &str,
        status: PlanStatus,
        now: Timestamp,
    ) -> Result<PlanPass<'a>, PassError> {
        let (name, plan) = spec
            .plans
            .get_key_value(plan_name)
            .ok_or_else(|| PassError::PlanNotFound(plan_name.to_string()))?;
        let terminal = status.status.is_terminal();
        Ok(PlanPass {
            spec,
            plan,
            plan_name: name.as_str(),
            original: status.clone(),
            status,
            now,
            instance: String::new(),
            timing: Timing::default(),
            cancel_requested: false,
            retry_of: None,
            recreated: Vec::new(),
            pos: if terminal {
                Pos::Finished
            } else {
                Pos::PhaseStart(0)
            },
            outstanding: None,
            began: false,
            phase_status_idx: 0,
            step_status_idx: 0,
            phases_left: plan.phases.len(),
            steps_left: 0,
            tasks_left: BTreeSet::new(),
            events: Vec::new(),
            fatal: None,
            tasks_run: 0,
            transient_errors: Vec::new(),
            waiting: Vec::new(),
            step_waiting: Vec::new(),
            grace_ends: None,
        })
    }

    /// `namespace/name` of the Instance, used in fatal messages the way KUDO words them.
    pub fn with_instance(mut self, namespace: &str, name: &str) -> Self {
        self.instance = format!("{namespace}/{name}");
        self
    }

    /// Start times persisted by the previous pass (see [`Timing`]).
    pub fn with_timing(mut self, timing: Timing) -> Self {
        self.timing = timing;
        self
    }

    /// Marks this run as the retry of the failed run `failed_uid` (`plan retry`, whose status
    /// [`crate::retry::reset_for_retry`] reset): its `PlanStarted` Event says where it resumes.
    pub fn with_retry_of(mut self, failed_uid: &str) -> Self {
        self.retry_of = Some(failed_uid.to_string());
        self
    }

    /// The objects (`Job ns/name`) the controller deleted before this retry's first pass because
    /// their failure was terminal ([`crate::retry::recreate_reason`]): the `PlanStarted` Event
    /// names them.
    pub fn with_recreated(mut self, recreated: Vec<String>) -> Self {
        self.recreated = recreated;
        self
    }

    /// Requests cancellation: the pass stops at the next task boundary (the outstanding task, if
    /// any, is still reported) and a non-terminal plan becomes CANCELLED.
    pub fn request_cancel(&mut self) {
        self.cancel_requested = true;
    }

    /// The working copy of the plan status (read-only view while the pass runs).
    pub fn status(&self) -> &PlanStatus {
        &self.status
    }

    /// The next task to execute, or `None` when the pass is over. Until the returned call is
    /// [`report`](Self::report)ed, the same call is returned again.
    pub fn next_task(&mut self) -> Option<TaskCall<'a>> {
        if let Some((i, j, k, task)) = self.outstanding {
            return Some(self.call(i, j, k, task));
        }
        if self.pos == Pos::Finished {
            return None;
        }
        if self.cancel_requested {
            self.cancel();
            return None;
        }
        let (i, j, k, task) = self.advance()?;
        self.outstanding = Some((i, j, k, task));
        Some(self.call(i, j, k, task))
    }

    /// Reports the outcome of the call last returned by [`next_task`](Self::next_task). A report
    /// with no outstanding call is ignored.
    pub fn report(&mut self, outcome: TaskOutcome) {
        let Some((i, j, k, _)) = self.outstanding.take() else {
            return;
        };
        self.tasks_run += 1;
        let plan = self.plan;
        let phase = &plan.phases[i];
        let step = &phase.steps[j];
        let task_name = step.tasks[k].as_str();
        let path = format!("{}.{}.{}.{}", self.plan_name, phase.name, step.name, task_name);
        match outcome {
            TaskOutcome::Done => {
                self.tasks_left.remove(task_name);
            }
            TaskOutcome::InProgress(msg) => {
                if let Some(m) = msg {
                    self.step_waiting.extend(m.lines().map(str::to_string));
                    self.waiting.push((path, m));
                }
            }
            TaskOutcome::Transient(err) => {
                let message = format!("A transient error when executing task {path}. Will retry. {err}");
                let st = &mut self.status.phases[self.phase_status_idx].steps[self.step_status_idx];
                st.status = ExecutionStatus::Error;
                st.message = message;
                self.transient_errors.push((path, err));
            }
            TaskOutcome::Fatal { reason, message } => {
                let msg = format!(
                    "Error during execution: fatal error: {}failed in {path}: {message}",
                    self.who()
                );
                self.fail_step(&reason, msg);
                return;
            }
        }
        self.pos = Pos::Task(i, j, k + 1);
    }

    /// Ends the pass: returns the new plan status and what happened. Calling it before the pass is
    /// over (tasks not yet pulled) ends the pass where it stands; an unreported call counts as not
    /// done.
    pub fn finish(mut self) -> (PlanStatus, PassSummary) {
        let status_before = self.original.status;
        if self.outstanding.take().is_some() {
            self.pos = Pos::PlanEnd;
        }
        if self.cancel_requested {
            // also after the walk ended: an unfinished plan stops here
            self.cancel();
        }
        self.pos = Pos::Finished;
        let changed = !same_tree(&self.original, &self.status);
        if changed || (self.status.last_updated_timestamp.is_none() && !status_before.is_terminal()) {
            self.status.last_updated_timestamp = Some(self.now.to_string());
        }
        let terminal = self.status.status.is_terminal();
        if terminal && !status_before.is_terminal() {
            self.events.push(Event {
                type_: if self.status.status == ExecutionStatus::Complete {
                    EventType::Normal
                } else {
                    EventType::Warning
                },
                reason: reasons::PLAN_FINISHED.into(),
                message: format!(
                    "Execution of plan {} finished with status {}",
                    self.plan_name, self.status.status
                ),
            });
        }
        let (timing, next_deadline) = if terminal {
            (Timing::default(), None)
        } else {
            (self.timing.clone(), self.next_deadline())
        };
        let summary = PassSummary {
            plan: self.plan_name.to_string(),
            status_before,
            status: self.status.status,
            changed,
            events: self.events,
            fatal: self.fatal,
            tasks_run: self.tasks_run,
            transient_errors: self.transient_errors,
            waiting: self.waiting,
            timing,
            next_deadline,
        };
        (self.status, summary)
    }

    // ------------------------------------------------------------------ internals

    fn who(&self) -> String {
        if self.instance.is_empty() {
            String::new()
        } else {
            format!("{} ", self.instance)
        }
    }

    fn call(&self, i: usize, j: usize, k: usize, task: &'a Task) -> TaskCall<'a> {
        let plan: &'a Plan = self.plan;
        let phase = &plan.phases[i];
        let step = &phase.steps[j];
        TaskCall {
            plan: self.plan_name,
            phase: &phase.name,
            step: &step.name,
            task_name: &step.tasks[k],
            task,
            plan_uid: self.status.uid.clone(),
        }
    }

    fn begin_plan(&mut self) {
        if matches!(
            self.original.status,
            ExecutionStatus::Pending | ExecutionStatus::NeverRun
        ) {
            let message = match &self.retry_of {
                Some(failed) => {
                    crate::retry::started_message(self.plan_name, failed, &self.original, &self.recreated)
                }
                None => format!("Execution of plan {} started", self.plan_name),
            };
            self.events.push(Event {
                type_: EventType::Normal,
                reason: reasons::PLAN_STARTED.into(),
                message,
            });
        }
        self.status.status = ExecutionStatus::InProgress;
        self.status.message.clear();
        if self.timing.uid != self.status.uid {
            self.timing = Timing {
                uid: self.status.uid.clone(),
                ..Timing::default()
            };
        }
        if self
            .timing
            .plan_started
            .as_deref()
            .and_then(|t| Timestamp::parse(t).ok())
            .is_none()
        {
            self.timing.plan_started = Some(self.now.to_string());
        }
    }

    /// Moves the cursor until a task must be executed (returned) or the pass ends (`None`).
    fn advance(&mut self) -> Option<(usize, usize, usize, &'a Task)> {
        loop {
            let moved = match self.pos {
                Pos::Finished => return None,
                Pos::PhaseStart(i) => self.phase_start(i),
                Pos::StepStart(i, j) => self.step_start(i, j),
                Pos::Task(i, j, k) => self.task_at(i, j, k),
                Pos::StepEnd(i, j) => self.step_end(i, j),
                Pos::PhaseEnd(i) => self.phase_end(i),
                Pos::PlanEnd => self.plan_end(),
            };
            match moved {
                Move::Continue => {}
                Move::Run(task) => return Some(task),
                Move::Stop => return None,
            }
        }
    }

    /// Enters phase `i` (the first time: starts the plan and checks its timeout).
    fn phase_start(&mut self, i: usize) -> Move<'a> {
        let plan: &'a Plan = self.plan;
        if !self.began {
            self.began = true;
            self.begin_plan();
            if let Some(t) = &plan.timeout
                && let Err(e) = parse_duration(t)
            {
                let msg = format!(
                    "{}fatal error: invalid timeout of plan {}: {e}",
                    self.who(),
                    self.plan_name
                );
                self.status.status = ExecutionStatus::FatalError;
                self.status.message = msg.clone();
                self.set_fatal(reasons::INVALID_TIMEOUT, msg);
                return Move::Stop;
            }
        }
        if i >= plan.phases.len() {
            self.pos = Pos::PlanEnd;
            return Move::Continue;
        }
        let phase = &plan.phases[i];
        let Some(pi) = self.status.phases.iter().position(|p| p.name == phase.name) else {
            let msg = format!(
                "{}fatal error: missing phase status: {}.{}",
                self.who(),
                self.plan_name,
                phase.name
            );
            self.status.status = ExecutionStatus::FatalError;
            self.status.message = msg.clone();
            self.set_fatal(reasons::MISSING_PHASE_STATUS, msg);
            return Move::Stop;
        };
        self.phase_status_idx = pi;
        let ps = &mut self.status.phases[pi];
        if ps.status.is_finished() {
            self.phases_left -= 1;
            self.pos = Pos::PhaseStart(i + 1);
            return Move::Continue;
        }
        if ps.status.is_running() {
            ps.status = ExecutionStatus::InProgress;
            ps.message.clear();
        }
        self.steps_left = phase.steps.len();
        self.pos = Pos::StepStart(i, 0);
        Move::Continue
    }

    /// Enters step `j` of phase `i`: its status, its timeout, when it started.
    fn step_start(&mut self, i: usize, j: usize) -> Move<'a> {
        let plan: &'a Plan = self.plan;
        let phase = &plan.phases[i];
        if j >= phase.steps.len() {
            self.pos = Pos::PhaseEnd(i);
            return Move::Continue;
        }
        let step = &phase.steps[j];
        let pi = self.phase_status_idx;
        let Some(si) = self.status.phases[pi]
            .steps
            .iter()
            .position(|s| s.name == step.name)
        else {
            let msg = format!(
                "{}fatal error: missing step status: {}.{}.{}",
                self.who(),
                self.plan_name,
                phase.name,
                step.name
            );
            self.status.phases[pi].status = ExecutionStatus::FatalError;
            self.status.phases[pi].message = msg.clone();
            self.status.status = ExecutionStatus::FatalError;
            self.status.message.clear();
            self.set_fatal(reasons::MISSING_STEP_STATUS, msg);
            return Move::Stop;
        };
        self.step_status_idx = si;
        let st = &mut self.status.phases[pi].steps[si];
        if st.status.is_finished() {
            self.steps_left -= 1;
            self.pos = Pos::StepStart(i, j + 1);
            return Move::Continue;
        }
        if st.status.is_running() {
            st.status = ExecutionStatus::InProgress;
            st.message.clear();
        }
        if let Some(t) = &step.timeout
            && let Err(e) = parse_duration(t)
        {
            let msg = format!(
                "{}fatal error: invalid timeout of step {}.{}.{}: {e}",
                self.who(),
                self.plan_name,
                phase.name,
                step.name
            );
            self.fail_step(reasons::INVALID_TIMEOUT, msg);
            return Move::Stop;
        }
        let entry = self.timing.steps.entry(phase.name.clone()).or_default();
        if entry
            .get(&step.name)
            .and_then(|t| Timestamp::parse(t).ok())
            .is_none()
        {
            entry.insert(step.name.clone(), self.now.to_string());
        }
        self.tasks_left = step.tasks.iter().map(String::as_str).collect();
        self.step_waiting.clear();
        self.pos = Pos::Task(i, j, 0);
        Move::Continue
    }

    /// Task `k` of step `j` of phase `i`: returned to run unless it is missing or invalid.
    fn task_at(&mut self, i: usize, j: usize, k: usize) -> Move<'a> {
        let plan: &'a Plan = self.plan;
        let phase = &plan.phases[i];
        let step = &phase.steps[j];
        if k >= step.tasks.len() {
            self.pos = Pos::StepEnd(i, j);
            return Move::Continue;
        }
        let tn = step.tasks[k].as_str();
        let spec: &'a OperatorVersionSpec = self.spec;
        let Some(task) = spec.tasks.iter().find(|t| t.name == tn) else {
            let msg = format!(
                "{}fatal error: missing task {}.{}.{}.{}",
                self.who(),
                self.plan_name,
                phase.name,
                step.name,
                tn
            );
            self.fail_step(reasons::UNKNOWN_TASK_NAME, msg);
            return Move::Stop;
        };
        if let Err(e) = validate_task(task) {
            let msg = format!(
                "{}fatal error: failed to build task {}.{}.{}.{}: {e}",
                self.who(),
                self.plan_name,
                phase.name,
                step.name,
                tn
            );
            self.fail_step(reasons::TASK_BUILD_ERROR, msg);
            return Move::Stop;
        }
        Move::Run((i, j, k, task))
    }

    /// After the tasks of step `j`: complete, timed out, or waiting (a serial phase stops here).
    fn step_end(&mut self, i: usize, j: usize) -> Move<'a> {
        let plan: &'a Plan = self.plan;
        let phase = &plan.phases[i];
        let step = &phase.steps[j];
        if self.tasks_left.is_empty() {
            let st = &mut self.status.phases[self.phase_status_idx].steps[self.step_status_idx];
            st.status = ExecutionStatus::Complete;
            st.message.clear();
            st.waiting_for.clear();
            self.steps_left -= 1;
            if let Some(m) = self.timing.steps.get_mut(&phase.name) {
                m.remove(&step.name);
                if m.is_empty() {
                    self.timing.steps.remove(&phase.name);
                }
            }
            self.pos = Pos::StepStart(i, j + 1);
            return Move::Continue;
        }
        if let (Some(t), Some(started)) = (&step.timeout, self.timing.step_started(&phase.name, &step.name)) {
            let secs = parse_duration(t).unwrap_or(u64::MAX);
            if self.now.seconds_since(started) >= i64::try_from(secs).unwrap_or(i64::MAX) {
                let msg = format!(
                    "{}fatal error: step {}.{}.{} did not complete within {t} (running since {})",
                    self.who(),
                    self.plan_name,
                    phase.name,
                    step.name,
                    started
                );
                self.fail_step(reasons::STEP_TIMEOUT, msg);
                return Move::Stop;
            }
        }
        let grace_ends = self
            .timing
            .step_started(&phase.name, &step.name)
            .map(|started| started.plus_seconds(WAITING_GRACE_SECS))
            .filter(|ends| self.now < *ends);
        let st = &mut self.status.phases[self.phase_status_idx].steps[self.step_status_idx];
        match grace_ends {
            Some(ends) if st.waiting_for.is_empty() && !self.step_waiting.is_empty() => {
                self.grace_ends = Some(self.grace_ends.map_or(ends, |e| e.min(ends)));
            }
            _ => st.waiting_for = bounded_waiting(&self.step_waiting),
        }
        self.pos = if phase.strategy.is_serial() {
            Pos::PhaseEnd(i)
        } else {
            Pos::StepStart(i, j + 1)
        };
        Move::Continue
    }

    /// After phase `i`: complete, or waiting (a serial plan stops here).
    fn phase_end(&mut self, i: usize) -> Move<'a> {
        let plan: &'a Plan = self.plan;
        if self.steps_left == 0 {
            let ps = &mut self.status.phases[self.phase_status_idx];
            ps.status = ExecutionStatus::Complete;
            ps.message.clear();
            self.phases_left -= 1;
            self.pos = Pos::PhaseStart(i + 1);
        } else if plan.strategy.is_serial() {
            self.pos = Pos::PlanEnd;
        } else {
            self.pos = Pos::PhaseStart(i + 1);
        }
        Move::Continue
    }

    /// The end of the pass: the plan is complete, or its timeout is checked.
    fn plan_end(&mut self) -> Move<'a> {
        self.pos = Pos::Finished;
        if self.phases_left == 0 {
            self.status.status = ExecutionStatus::Complete;
            self.status.message.clear();
            return Move::Stop;
        }
        self.check_plan_timeout();
        Move::Stop
    }

    fn check_plan_timeout(&mut self) {
        let Some(t) = &self.plan.timeout else { return };
        let Ok(secs) = parse_duration(t) else { return };
        let Some(started) = self
            .timing
            .plan_started
            .as_deref()
            .and_then(|s| Timestamp::parse(s).ok())
        else {
            return;
        };
        if self.now.seconds_since(started) < i64::try_from(secs).unwrap_or(i64::MAX) {
            return;
        }
        let msg = format!(
            "{}fatal error: plan {} did not complete within {t} (running since {started})",
            self.who(),
            self.plan_name
        );
        self.status.status = ExecutionStatus::FatalError;
        self.status.message = msg.clone();
        for ph in &mut self.status.phases {
            if matches!(ph.status, ExecutionStatus::InProgress | ExecutionStatus::Error) {
                ph.status = ExecutionStatus::FatalError;
                for st in &mut ph.steps {
                    if matches!(st.status, ExecutionStatus::InProgress | ExecutionStatus::Error) {
                        st.status = ExecutionStatus::FatalError;
                        st.message = msg.clone();
                    }
                }
            }
        }
        self.set_fatal(reasons::PLAN_TIMEOUT, msg);
    }

    /// Step, phase and plan become FATAL_ERROR, the message goes on the step only (KUDO), and the
    /// pass is over.
    fn fail_step(&mut self, reason: &str, message: String) {
        let ps = &mut self.status.phases[self.phase_status_idx];
        ps.status = ExecutionStatus::FatalError;
        ps.message.clear();
        let st = &mut ps.steps[self.step_status_idx];
        st.status = ExecutionStatus::FatalError;
        st.message = message.clone();
        st.waiting_for.clear();
        self.status.status = ExecutionStatus::FatalError;
        self.status.message.clear();
        self.set_fatal(reason, message);
    }

    fn set_fatal(&mut self, reason: &str, message: String) {
        self.events.push(Event {
            type_: EventType::Warning,
            reason: reason.to_string(),
            message: message.clone(),
        });
        self.fatal = Some(Fatal {
            reason: reason.to_string(),
            message,
        });
        self.outstanding = None;
        self.pos = Pos::Finished;
    }

    fn cancel(&mut self) {
        self.pos = Pos::Finished;
        self.outstanding = None;
        if self.status.status.is_terminal() {
            return;
        }
        let msg = format!("Plan {} was cancelled on request", self.plan_name);
        self.status.status = ExecutionStatus::Cancelled;
        self.status.message = msg.clone();
        for ph in &mut self.status.phases {
            if ph.status.is_running() {
                ph.status = ExecutionStatus::Cancelled;
                ph.message.clear();
            }
            for st in &mut ph.steps {
                if st.status.is_running() {
                    st.status = ExecutionStatus::Cancelled;
                    st.waiting_for.clear();
                }
            }
        }
        self.events.push(Event {
            type_: EventType::Normal,
            reason: reasons::PLAN_CANCELLED.into(),
            message: msg,
        });
    }

    fn next_deadline(&self) -> Option<Timestamp> {
        let mut best: Option<Timestamp> = None;
        let mut consider = |t: Timestamp| best = Some(best.map_or(t, |b| b.min(t)));
        if let Some(t) = self.grace_ends {
            consider(t);
        }
        if let (Some(t), Some(started)) = (
            &self.plan.timeout,
            self.timing
                .plan_started
                .as_deref()
                .and_then(|s| Timestamp::parse(s).ok()),
        ) && let Ok(secs) = parse_duration(t)
        {
            consider(started.plus_seconds(secs));
        }
        for phase in &self.plan.phases {
            for step in &phase.steps {
                if let (Some(t), Some(started)) =
                    (&step.timeout, self.timing.step_started(&phase.name, &step.name))
                    && let Ok(secs) = parse_duration(t)
                {
                    consider(started.plus_seconds(secs));
                }
            }
        }
        best
    }
}

/// Compares two plan status trees ignoring the timestamp.
fn same_tree(a: &PlanStatus, b: &PlanStatus) -> bool {
    a.status == b.status
        && a.message == b.message
        && a.uid == b.uid
        && a.name == b.name
        && a.phases == b.phases
}

//! The step of a reconcile once its admission is stored: the engine chooses it
//! ([`kudo_engine::reconcile::plan_step`]); for a pass of the scheduled plan the engine's
//! [`PlanPass`] hands out tasks, the controller renders and executes them (see [`crate::task`])
//! and reports their outcomes back, and the engine says how the pass ends
//! ([`kudo_engine::reconcile::after_pass`]).

use std::collections::BTreeMap;
use std::time::Duration;

use kudo_api::{PlanStatus, TaskKind};
use kudo_engine::reconcile::{
    PassEnd, Step, StepInput, after_pass, plan_step, render_failed, start_pass, store_plan_status,
};
use kudo_engine::rollback::RollbackMark;
use kudo_engine::{EventType, PlanPass, TaskOutcome, mirror_run_status};
use kudo_package::render::RenderContext;
use tracing::{Instrument, debug, info, info_span, warn};

use super::{Outcome, PassInput, ReconcileError, Reconciler, Writes};
use crate::param_sources;
use crate::render::{self, Rendered};
use crate::task;
use crate::translate::API_VERSION_TRANSLATED;

/// A pass's outcome: the plan's status, the requeue delay (`None` when terminal) and the timing
/// annotation to store.
type PassResult = (kudo_api::ExecutionStatus, Option<Duration>, Option<String>);

impl Reconciler<'_> {
    /// The idle step, or one pass of the scheduled plan whose outcome is mirrored into the spec
    /// to write; returns the pass's requeue delay.
    pub(super) async fn idle_or_pass(
        &self,
        input: &PassInput<'_>,
        out: &mut Outcome,
        deleting: bool,
        writes: &mut Writes,
    ) -> Result<Option<Duration>, ReconcileError> {
        let step_input = self.step_input(input);
        let step = plan_step(&step_input, &mut out.status);
        if step == Step::Idle {
            self.idle(input, out, deleting).await?;
            return Ok(None);
        }
        let run = &input.exec.plan_execution;
        let span = info_span!("plan", plan = %run.plan_name, uid = %run.uid);
        let (st, requeue, timing) = self.step(input, &step_input, step, out).instrument(span).await;
        writes.timing = timing;
        writes.remember = Some(mirror_run_status(&mut writes.spec, input.exec, st));
        Ok(requeue)
    }

    /// A step on the scheduled run: it ends without a task, or a pass runs.
    async fn step(
        &self,
        input: &PassInput<'_>,
        step_input: &StepInput<'_>,
        step: Step,
        out: &mut Outcome,
    ) -> PassResult {
        match step {
            Step::Idle => (kudo_api::ExecutionStatus::NeverRun, None, None),
            Step::Ended {
                plan_status,
                cancelled,
                effects,
            } => {
                if let Some(summary) = &cancelled {
                    self.count_pass(input, summary);
                }
                self.execute(input.raw, &effects, out).await;
                self.without_pass(input, out, plan_status)
            }
            Step::Pass {
                plan_status,
                retry_of,
                effects,
            } => {
                self.execute(input.raw, &effects, out).await;
                self.pass(input, step_input, out, plan_status, retry_of.as_deref())
                    .await
            }
        }
    }

    fn step_input<'i>(&'i self, input: &PassInput<'i>) -> StepInput<'i> {
        StepInput {
            ov: input.ov,
            exec: input.exec,
            annotations: input.annotations,
            namespace: &self.ns,
            name: &self.name,
            now: input.now,
        }
    }

    /// Ends a run that ran no task: the plan status is stored as it is, with its readiness.
    fn without_pass(&self, input: &PassInput<'_>, out: &mut Outcome, ps: PlanStatus) -> PassResult {
        let plan = &input.exec.plan_execution.plan_name;
        let st = store_plan_status(&mut out.status, plan, ps, input.now, input.generation);
        (st, None, None)
    }

    /// Renders the plan and passes over it; a plan that cannot be rendered fails at once.
    async fn pass(
        &self,
        input: &PassInput<'_>,
        step: &StepInput<'_>,
        out: &mut Outcome,
        mut ps: PlanStatus,
        retry_of: Option<&str>,
    ) -> PassResult {
        let rendered = match self.render(input).await {
            Ok(r) => r,
            Err(e) => {
                let effects = render_failed(step, &mut ps, &e.to_string());
                self.execute(input.raw, &effects, out).await;
                return self.without_pass(input, out, ps);
            }
        };
        let recreated = match retry_of {
            Some(_) => self.recreate_failed(&ps.uid, &ps, &rendered).await,
            None => Vec::new(),
        };
        let recreating = !recreated.is_empty();
        let mut pass = match start_pass(step, ps, retry_of, recreated) {
            Ok(p) => p,
            Err(failed) => {
                // Unreachable in practice: the plan's existence was checked by the step.
                let st = failed.status;
                out.status.plan_status.insert(failed.name.clone(), *failed);
                return (st, None, None);
            }
        };
        // Whether some task waits for something no watch reports (see the requeue below).
        let polled = self.run_tasks(input, &mut pass, rendered).await;
        let (new_ps, summary) = pass.finish();
        self.count_pass(input, &summary);
        log_pass(&summary);
        let run = &input.exec.plan_execution;
        let stored = input.stored.status.clone().unwrap_or_default();
        let end = PassEnd {
            plan: &run.plan_name,
            uid: &run.uid,
            summary: &summary,
            polled,
            backstop: self.ctx.config.requeue_backstop,
            retry_of,
            recreated: recreating,
            stored: &stored,
            durable: input.stored.spec.plan_execution.uid == run.uid,
            generation: input.generation,
            now: input.now,
        };
        let ended = after_pass(&end, new_ps, &mut out.status);
        out.start_unwritten = ended.keep_stored_status;
        self.execute(input.raw, &ended.effects, out).await;
        (ended.status, ended.requeue, ended.timing)
    }

    /// The plan pass in the metrics (a run that became terminal, its duration).
    fn count_pass(&self, input: &PassInput<'_>, summary: &kudo_engine::PassSummary) {
        let uid = &input.exec.plan_execution.uid;
        self.ctx
            .metrics
            .plan_pass(input.ov, uid, input.annotations, summary, input.now);
    }

    /// Renders the scheduled plan, announcing each translation of a removed API version once per
    /// plan run with an Event.
    pub(super) async fn render(&self, input: &PassInput<'_>) -> Result<Rendered, render::PlanRenderError> {
        let plan = input.exec.plan_execution.plan_name.as_str();
        let plan_uid = input.exec.plan_execution.uid.as_str();
        let rctx = RenderContext {
            instance_name: self.name.clone(),
            namespace: self.ns.clone(),
            parameters: input.exec.parameters.clone(),
            plan_uid: plan_uid.to_string(),
            instance_uid: input.instance_uid.to_string(),
            is_namespaced: None,
            live_dependency: None,
            rollback: RollbackMark::of_run(input.annotations, plan_uid).map(|m| (m.from, m.to)),
            parse_memo: Some(self.ctx.memory.parse_memo.clone()),
        };
        let mut rendered = render::render(self.ctx, input.ov, plan, rctx, input.sourced).await?;
        if let Ok(values) = input.sourced {
            rendered.source_child_parameters(&input.exec.parameter_sources, values);
        }
        for t in rendered.translations() {
            if self.ctx.memory.translations.first(plan_uid, t) {
                let msg = t.message();
                info!("{msg}");
                // One Event series per object (the recorder merges by reason and action).
                let mut action = format!("Translate {}", t.object);
                while action.len() > 128 {
                    action.pop();
                }
                self.event(
                    input.raw,
                    EventType::Warning,
                    API_VERSION_TRANSLATED,
                    &action,
                    &msg,
                )
                .await;
            }
        }
        Ok(rendered)
    }

    /// Runs every task the engine hands out in this pass; returns whether some task waits for
    /// something no watch reports. A Pipe task that completes created the ConfigMaps/Secrets
    /// later tasks mount, so the plan is rendered again before the next task: rendered before,
    /// their dependencies hash would be that of missing objects, and the next pass's correct
    /// hash would then change an immutable field (a Job's template). KUDO rendered each task
    /// when it ran.
    async fn run_tasks(
        &self,
        input: &PassInput<'_>,
        pass: &mut PlanPass<'_>,
        mut rendered: Rendered,
    ) -> bool {
        let params = self.task_parameters(input);
        let claimant = kudo_engine::ownership::Claimant {
            namespace: self.ns.clone(),
            name: self.name.clone(),
            adopt: kudo_engine::ownership::may_adopt(input.stored),
            manager: self.ctx.config.field_manager.clone(),
        };
        let recorded = kudo_engine::reconcile::stored_cluster_objects(input.stored);
        let writer = crate::apply::Writer {
            cluster: &self.cluster,
            claimant: &claimant,
            recorded: &recorded,
        };
        let mut polled = false;
        while let Some(call) = pass.next_task() {
            let outcome = task::run_task(self.ctx, &call, input.ov, &rendered, &params, &writer)
                .instrument(info_span!(
                    "task",
                    phase = call.phase,
                    step = call.step,
                    task = call.task_name
                ))
                .await;
            self.ctx.metrics.task_outcome(&outcome);
            polled |= !task::wait_ends_on_watch(self.ctx, &call, &rendered, &outcome, &self.ns, &self.name);
            debug!(phase = call.phase, step = call.step, task = call.task_name, outcome = ?outcome, "task ran");
            let piped = call.task.kind == TaskKind::Pipe && outcome == TaskOutcome::Done;
            pass.report(outcome);
            if piped {
                match self.render(input).await {
                    Ok(r) => rendered = r,
                    // The same inputs rendered a moment ago: keep that render, the next pass retries.
                    Err(e) => warn!(error = %e, "rendering again after a Pipe task"),
                }
            }
        }
        polled
    }

    /// The parameters Toggle tasks see: sourced (sensitive) values merged in, as templates see
    /// them, defaults filled in.
    fn task_parameters(&self, input: &PassInput<'_>) -> BTreeMap<String, String> {
        let exec = input.exec;
        let with_sourced = match input.sourced {
            Ok(values) => param_sources::merged(&exec.parameters, values),
            Err(_) => exec.parameters.clone(),
        };
        kudo_engine::effective_parameters(&input.ov.spec.parameters, &with_sourced)
    }
}

/// Logs what a plan pass met: transient errors, waits and a changed plan status.
fn log_pass(summary: &kudo_engine::PassSummary) {
    for (path, err) in &summary.transient_errors {
        warn!(task = %path, error = %err, "transient task error");
    }
    for (path, msg) in &summary.waiting {
        debug!(task = %path, waiting = %msg, "waiting");
    }
    if summary.status != summary.status_before {
        info!(status = %summary.status, "plan status changed");
    }
}

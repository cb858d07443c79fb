//! One pass of the scheduled plan: the engine's [`PlanPass`] hands out tasks, the controller
//! renders and executes them (see [`crate::execute`]) and reports their outcomes back.

use super::*;

impl Reconciler<'_> {
    /// The idle step, or one pass of the scheduled plan whose outcome is mirrored into the spec
    /// to write; returns the pass's requeue delay.
    pub(super) async fn idle_or_pass(
        &self,
        input: &PassInput<'_>,
        status: &mut InstanceStatus,
        deleting: bool,
        writes: &mut Writes,
    ) -> Result<Option<Duration>, ReconcileError> {
        let run = &input.exec.plan_execution;
        if run.plan_name.is_empty() {
            self.idle(input, status, deleting).await?;
            return Ok(None);
        }
        let span = info_span!("plan", plan = %run.plan_name, uid = %run.uid);
        let (plan_status, pass_requeue, timing) = self.execute(input, status).instrument(span).await;
        writes.timing = timing;
        writes.remember = Some(mirror_run_status(&mut writes.spec, input.exec, plan_status));
        Ok(pass_requeue)
    }

    /// One execution pass of the scheduled plan. Returns the plan's status after the pass, the
    /// requeue delay (None when the plan is terminal) and the timing annotation to store.
    pub(super) async fn execute(&self, input: &PassInput<'_>, status: &mut InstanceStatus) -> PassResult {
        let PassInput {
            raw, ov, exec, now, ..
        } = *input;
        let plan = exec.plan_execution.plan_name.as_str();
        let plan_uid = exec.plan_execution.uid.as_str();
        ensure_plan_statuses(&ov.spec, status);

        let mut ps = status
            .plan_status
            .get(plan)
            .cloned()
            .unwrap_or_else(|| PlanStatus {
                name: plan.to_string(),
                ..PlanStatus::default()
            });
        let retry_of = start_run(&mut ps, plan_uid, input.annotations, now);
        if !ov.spec.plans.contains_key(plan) {
            let msg = format!("could not find required plan: {plan}");
            if !ps.status.is_terminal() {
                mark_plan_fatal(&mut ps, &msg, now);
                self.event(raw, EventType::Warning, reasons::INVALID_PLAN, plan, &msg)
                    .await;
            }
            return self.without_pass(input, status, ps);
        }

        if exec.plan_execution.status == Some(ExecutionStatus::Cancelled) {
            // A cancel request: nothing is rendered or applied; the pass marks the unfinished
            // run CANCELLED (a run that already ended keeps its status).
            if let Ok(mut pass) = PlanPass::start(&ov.spec, plan, ps.clone(), now) {
                pass.request_cancel();
                let (new_ps, summary) = pass.finish();
                self.ctx
                    .metrics
                    .plan_pass(ov, plan_uid, input.annotations, &summary, now);
                for ev in &summary.events {
                    self.event(raw, ev.type_, &ev.reason, plan, &ev.message).await;
                }
                ps = new_ps;
            }
            info!(status = %ps.status, "plan cancelled");
            return self.without_pass(input, status, ps);
        }
        if ps.status.is_terminal() {
            // A terminal plan runs nothing; the caller unschedules it.
            return self.without_pass(input, status, ps);
        }
        let rendered = match self.render(input).await {
            Ok(r) => r,
            Err(msg) => {
                let msg = format!("{}/{}: {msg}", self.ns, self.name);
                mark_plan_fatal(&mut ps, &msg, now);
                self.event(raw, EventType::Warning, reasons::INVALID_PARAMS, plan, &msg)
                    .await;
                return self.without_pass(input, status, ps);
            }
        };
        self.run_pass(input, status, ps, rendered, retry_of.as_deref())
            .await
    }

    /// Ends a pass that ran no task: the plan status is stored as it is, with its readiness.
    pub(super) fn without_pass(
        &self,
        input: &PassInput<'_>,
        status: &mut InstanceStatus,
        ps: PlanStatus,
    ) -> PassResult {
        let plan = input.exec.plan_execution.plan_name.as_str();
        let st = ps.status;
        status.plan_status.insert(plan.to_string(), ps);
        self.plan_ready(status, plan, st, input.now, input.generation);
        (st, None, None)
    }

    /// Renders the scheduled plan, announcing each translation of a removed API version once per
    /// plan run with an Event.
    pub(super) async fn render(
        &self,
        input: &PassInput<'_>,
    ) -> Result<render::Rendered, render::PlanRenderError> {
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

    /// Runs the plan pass over the rendered plan: every task the engine hands out, then the
    /// pass's Events, metrics and the next requeue. `retry_of` is the failed run a retry run
    /// replaces (its first pass says where it resumes).
    pub(super) async fn run_pass(
        &self,
        input: &PassInput<'_>,
        status: &mut InstanceStatus,
        mut ps: PlanStatus,
        rendered: render::Rendered,
        retry_of: Option<&str>,
    ) -> PassResult {
        let PassInput {
            raw,
            ov,
            exec,
            annotations,
            now,
            generation,
            ..
        } = *input;
        let plan = exec.plan_execution.plan_name.as_str();
        let plan_uid = exec.plan_execution.uid.as_str();
        let timing = Timing::from_annotation(annotations.get(TIMING_ANNOTATION).map(String::as_str));
        // Toggle tasks see sourced (sensitive) values like templates do.
        let with_sourced = match input.sourced {
            Ok(values) => param_sources::merged(&exec.parameters, values),
            Err(_) => exec.parameters.clone(),
        };
        let params = kudo_engine::effective_parameters(&ov.spec.parameters, &with_sourced);
        let mut pass = match PlanPass::start(&ov.spec, plan, ps.clone(), now) {
            Ok(p) => {
                let p = p.with_instance(&self.ns, &self.name).with_timing(timing);
                match retry_of {
                    Some(failed) => p.with_retry_of(failed),
                    None => p,
                }
            }
            Err(e) => {
                // Unreachable in practice: the plan's existence was checked above.
                let msg = e.to_string();
                mark_plan_fatal(&mut ps, &msg, now);
                let st = ps.status;
                status.plan_status.insert(plan.to_string(), ps);
                return (st, None, None);
            }
        };
        // Whether some task waits for something no watch reports (see the requeue below).
        let polled = self.run_tasks(input, &mut pass, rendered, &params).await;
        let (new_ps, summary) = pass.finish();
        self.ctx
            .metrics
            .plan_pass(ov, plan_uid, annotations, &summary, now);
        log_pass(&summary);
        let st = new_ps.status;
        let wake = if !polled && summary.transient_errors.is_empty() {
            Wake::Watch {
                backstop_secs: self.ctx.config.requeue_backstop.as_secs(),
            }
        } else {
            Wake::Poll
        };
        let requeue = pass_requeue_secs(&new_ps, wake, summary.next_deadline, now)
            .map(|secs| Duration::from_secs(secs).min(self.ctx.config.requeue_backstop));
        status.plan_status.insert(plan.to_string(), new_ps);
        self.plan_ready(status, plan, st, now, generation);
        let timing = summary.timing.to_annotation();
        if let Some(by) = start_unwritten(input, status, &summary) {
            // Only the start happened: the status stays as stored, and so do its Events (the
            // next pass starts the run again and announces it with the status it writes).
            debug!(until = %by, "the run's start is written with its first waiting lines");
            *status = input.stored.status.clone().unwrap_or_default();
            let by = Duration::from_secs(by.seconds_since(now).max(1) as u64);
            return (st, Some(requeue.map_or(by, |r| r.min(by))), timing);
        }
        for ev in &summary.events {
            // A series keeps its first note: a retry's PlanStarted, which says where the run
            // resumes, gets a series of its own (one per failed run).
            let action = match retry_of {
                Some(failed) if ev.reason == kudo_engine::reasons::PLAN_STARTED => {
                    format!("{plan} retry of {failed}")
                }
                _ => plan.to_string(),
            };
            self.event(raw, ev.type_, &ev.reason, &action, &ev.message).await;
        }
        (st, requeue, timing)
    }

    /// Runs every task the engine hands out in this pass; returns whether some task waits for
    /// something no watch reports. A Pipe task that completes created the ConfigMaps/Secrets
    /// later tasks mount, so the plan is rendered again before the next task: rendered before,
    /// their dependencies hash would be that of missing objects, and the next pass's correct
    /// hash would then change an immutable field (a Job's template). KUDO rendered each task
    /// when it ran.
    pub(super) async fn run_tasks(
        &self,
        input: &PassInput<'_>,
        pass: &mut PlanPass<'_>,
        mut rendered: render::Rendered,
        params: &BTreeMap<String, String>,
    ) -> bool {
        let mut polled = false;
        while let Some(call) = pass.next_task() {
            let outcome = task::run_task(self.ctx, &call, input.ov, &rendered, params, &self.cluster)
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

    pub(super) fn plan_ready(
        &self,
        status: &mut InstanceStatus,
        plan: &str,
        st: ExecutionStatus,
        now: Timestamp,
        generation: Option<i64>,
    ) {
        if let Some(mut c) = plan_condition(plan, st, now) {
            c.observed_generation = generation;
            set_condition(&mut status.conditions, c);
        }
    }
}

/// Initialises the status of the run `plan_uid` when it is new: `plan retry` (the retry annotation
/// names exactly the FATAL_ERROR run being replaced) keeps its COMPLETE steps, any other new run
/// restarts the plan (KUDO). Decided from the Instance alone, so a restarted manager decides the
/// same. Returns the failed run a retry replaces.
pub(super) fn start_run(
    ps: &mut PlanStatus,
    plan_uid: &str,
    annotations: &BTreeMap<String, String>,
    now: Timestamp,
) -> Option<String> {
    if !needs_reset(ps, plan_uid) {
        return None;
    }
    let annotation = annotations.get(RETRY_ANNOTATION).map(String::as_str);
    if !retry::is_retry_of(annotation, ps) {
        reset_for_run(ps, plan_uid, now);
        return None;
    }
    let failed = std::mem::take(&mut ps.uid);
    retry::reset_for_retry(ps, plan_uid, now);
    info!(failed_uid = %failed, "{}", retry::started_message(&ps.name, &failed, ps));
    Some(failed)
}

/// When the status `status` a pass left may stay unwritten because it only says that the run
/// started ([`kudo_engine::reconcile::start_unwritten`]); the instant to write it by.
fn start_unwritten(
    input: &PassInput<'_>,
    status: &InstanceStatus,
    summary: &kudo_engine::PassSummary,
) -> Option<Timestamp> {
    let run = &input.exec.plan_execution;
    let starting = kudo_engine::reconcile::Starting {
        plan: &run.plan_name,
        uid: &run.uid,
        started: summary
            .timing
            .plan_started
            .as_deref()
            .and_then(|t| Timestamp::parse(t).ok()),
        durable: input.stored.spec.plan_execution.uid == run.uid,
        now: input.now,
    };
    let none = InstanceStatus::default();
    let stored = input.stored.status.as_ref().unwrap_or(&none);
    kudo_engine::reconcile::start_unwritten(stored, status, &starting)
}

/// What one pass over an Instance works from, shared by plan execution and the idle step
/// (readiness, drift repair).
#[derive(Clone, Copy)]
pub(super) struct PassInput<'a> {
    pub(super) raw: &'a DynamicObject,
    /// The Instance as stored, `raw` decoded: its status is what a status write would change,
    /// its `spec.planExecution` the run a next reconcile would find.
    pub(super) stored: &'a Instance,
    /// The OperatorVersion the admitted spec runs.
    pub(super) ov: &'a OperatorVersion,
    /// The admitted spec being executed.
    pub(super) exec: &'a InstanceSpec,
    pub(super) instance_uid: &'a str,
    pub(super) annotations: &'a BTreeMap<String, String>,
    pub(super) now: Timestamp,
    pub(super) generation: Option<i64>,
    /// `spec.parameterSources` resolved once for this reconcile.
    pub(super) sourced: &'a param_sources::Sourced,
}

/// A pass's outcome: the plan's status, the requeue delay (`None` when terminal) and the timing
/// annotation to store.
pub(super) type PassResult = (ExecutionStatus, Option<Duration>, Option<String>);

/// Logs what a plan pass met: transient errors, waits and a changed plan status.
pub(super) fn log_pass(summary: &kudo_engine::PassSummary) {
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

//! Running one task the engine's pass hands out: each task kind's IO (Apply/Delete/Toggle
//! objects, a Pipe's generator Pod, a KudoOperator's child Instance after its dependency checks,
//! a Dummy's declared outcome), answered with a [`TaskOutcome`] for the pass.

use std::collections::BTreeMap;

use kudo_api::{OperatorVersion, TaskKind};
use kudo_engine::{TaskCall, TaskOutcome};
use kudo_package::render::{Action, RenderedObject};

use crate::apply::{self, Writer};
use crate::context::Context;
use crate::reasons::{self, fatal};
use crate::render::Rendered;

/// A Dummy task's outcome: what its spec says (`wantErr`, `fatal`, `done`).
fn dummy(call: &TaskCall<'_>) -> TaskOutcome {
    let spec = &call.task.spec;
    if spec.want_err {
        if spec.fatal {
            fatal(
                reasons::DUMMY_TASK_ERROR,
                format!("dummy task {} failed fatally", call.task_name),
            )
        } else {
            TaskOutcome::Transient(format!("dummy task {} failed", call.task_name))
        }
    } else if spec.done {
        TaskOutcome::Done
    } else {
        TaskOutcome::InProgress(Some(format!("dummy task {} is not done", call.task_name)))
    }
}

/// Runs one task of the pass.
pub async fn run_task(
    ctx: &Context,
    call: &TaskCall<'_>,
    ov: &OperatorVersion,
    rendered: &Rendered,
    params: &BTreeMap<String, String>,
    cluster: &Writer<'_>,
) -> TaskOutcome {
    if let Some(e) = rendered.unresolved() {
        return TaskOutcome::Transient(e.to_string());
    }
    if let Some(missing) = crate::impersonation::current().and_then(|a| a.missing) {
        return fatal(reasons::SERVICE_ACCOUNT_NOT_FOUND, missing);
    }
    let spec = &call.task.spec;
    match &call.task.kind {
        TaskKind::Dummy => dummy(call),
        TaskKind::Pipe => {
            if let Some(e) = rendered.error(call) {
                return fatal(reasons::TASK_RENDERING_ERROR, e);
            }
            let Some(pod) = rendered
                .for_task(call)
                .find(|o| o.action == Action::PipePod)
                .map(|o| &o.object)
            else {
                return fatal(
                    reasons::PIPE_TASK_ERROR,
                    format!("task {}: the pipe pod template rendered no Pod", call.task_name),
                );
            };
            let instance = pod["metadata"]["labels"]["kudo.dev/instance"]
                .as_str()
                .unwrap_or_default();
            let names = match ov.spec.plans.get(call.plan) {
                Some(plan) => kudo_package::pipes_for_plan(instance, call.plan, plan, &ov.spec.tasks),
                None => Default::default(),
            };
            crate::pipe::run(ctx, call.task_name, &spec.pipe, pod, &names, cluster).await
        }
        TaskKind::KudoOperator => {
            if let Some(e) = rendered.error(call) {
                return fatal(reasons::KUDO_OPERATOR_TASK_ERROR, e);
            }
            if let Err(outcome) = crate::dependencies::check(ctx, call, ov, rendered).await {
                return outcome;
            }
            run_objects(ctx, rendered.for_task(call), cluster).await
        }
        TaskKind::Apply | TaskKind::Delete | TaskKind::Toggle => {
            if call.task.kind == TaskKind::Toggle
                && let Err(e) = kudo_engine::toggle_action(call.task, params)
            {
                return fatal(reasons::TOGGLE_TASK_ERROR, e.to_string());
            }
            if let Some(e) = rendered.error(call) {
                return fatal(reasons::TASK_RENDERING_ERROR, e);
            }
            if let Some(e) = rendered.unreadable_dependency() {
                return TaskOutcome::Transient(e.to_string());
            }
            run_objects(ctx, rendered.for_task(call), cluster).await
        }
        TaskKind::Unknown(other) => fatal(
            kudo_engine::reasons::UNKNOWN_TASK_NAME,
            format!("unknown task kind {other}"),
        ),
    }
}

/// Whether the wait of a task that reported `outcome` is certain to end with a watch event, so
/// the pass need not be polled (see `reconcile::pass`): the task is still progressing, and
/// each of its objects is applied (not deleted, not a pipe pod), of a kind the manager watches,
/// in the Instance's namespace and labelled `heritage=kudo` plus `kudo.dev/instance` naming
/// this Instance — so any change of the object (its status turning healthy included) triggers a
/// reconcile of this Instance. Transient errors and every other kind of wait (Dummy, Pipe,
/// deletions, kinds that are not watched such as custom resources or cluster-scoped objects)
/// answer `false`: those are polled with KUDO's backoff.
pub(crate) fn wait_ends_on_watch(
    ctx: &Context,
    call: &TaskCall<'_>,
    rendered: &Rendered,
    outcome: &TaskOutcome,
    ns: &str,
    instance: &str,
) -> bool {
    match outcome {
        TaskOutcome::Done | TaskOutcome::Fatal { .. } => return true,
        TaskOutcome::Transient(_) => return false,
        TaskOutcome::InProgress(_) => {}
    }
    match &call.task.kind {
        TaskKind::Apply | TaskKind::Toggle | TaskKind::KudoOperator => {}
        TaskKind::Delete | TaskKind::Pipe | TaskKind::Dummy | TaskKind::Unknown(_) => return false,
    }
    let mut objects = rendered.for_task(call).peekable();
    if objects.peek().is_none() {
        return false;
    }
    objects.all(|o| {
        let obj = &o.object;
        let labels = &obj["metadata"]["labels"];
        matches!(o.action, Action::Apply | Action::ChildInstance)
            && obj["metadata"]["namespace"].as_str() == Some(ns)
            && labels["heritage"].as_str() == Some("kudo")
            && labels[kudo_api::labels::INSTANCE].as_str() == Some(instance)
            && ctx.caches.watches(
                obj["apiVersion"].as_str().unwrap_or(""),
                obj["kind"].as_str().unwrap_or(""),
            )
    })
}

/// Applies or deletes the task's objects in order. Every object is handled even when an earlier
/// one is still progressing (KUDO applied a step's objects together); the first fatal error stops.
async fn run_objects<'r>(
    ctx: &Context,
    objects: impl Iterator<Item = &'r RenderedObject>,
    cluster: &Writer<'_>,
) -> TaskOutcome {
    let mut waiting = Vec::new();
    let mut transient = Vec::new();
    for obj in objects {
        let res = match obj.action {
            Action::Apply => apply::apply_for_task(ctx, &obj.object, cluster).await,
            Action::Delete => apply::delete(ctx, &obj.object).await,
            // Handled by the Pipe task itself (crate::pipe); never listed among plain objects.
            Action::PipePod => Ok(None),
            // Server-side applied like any object: creation, or an update of the child's
            // operatorVersion/parameters that the child's own admission turns into its
            // update/upgrade plan. Health is the child's plan outcome (kudo_engine::health).
            Action::ChildInstance => {
                apply::apply_for_task(ctx, &crate::impersonation::inherit(&obj.object), cluster).await
            }
        };
        match res {
            Ok(None) => {}
            Ok(Some(msg)) => waiting.push(msg),
            Err(TaskOutcome::Transient(e)) => transient.push(e),
            Err(other) => return other,
        }
    }
    if !transient.is_empty() {
        TaskOutcome::Transient(transient.join("; "))
    } else if !waiting.is_empty() {
        // one line per object: the step's `waitingFor` (kudo_engine::waiting)
        TaskOutcome::InProgress(Some(waiting.join("\n")))
    } else {
        TaskOutcome::Done
    }
}

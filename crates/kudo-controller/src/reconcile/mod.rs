//! One reconcile of an Instance: admission of spec changes (KUDO's webhook rules, run here), plan
//! status bookkeeping, one execution pass, then persisting status, spec and Events.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kudo_api::{
    CLEANUP_FINALIZER, Condition, ExecutionStatus, Instance, InstanceSpec, InstanceStatus, OperatorVersion,
    PlanStatus, TaskKind,
};
use kudo_engine::initiate::Initiation;
use kudo_engine::readiness::CHANGE_DENIED;
use kudo_engine::reconcile::{Admitted, DriftFound, Settle, Stored, drift_condition, stored_cluster_objects};
use kudo_engine::retry;
use kudo_engine::rollback::RollbackMark;
use kudo_engine::{
    EventType, PlanPass, TIMING_ANNOTATION, TaskOutcome, Timestamp, Timing, Wake, ensure_plan_statuses,
    mark_plan_fatal, mirror_run_status, needs_reset, not_ready_condition, pass_requeue_secs, plan_condition,
    ready_condition, record_admission, reset_for_run, set_condition,
};
use kudo_package::render::RenderContext;
use serde_json::{Value, json};
use tracing::{Instrument, debug, info, info_span, warn};

mod idle;
mod initiate;
mod observe;
mod pass;
mod persist;
mod publish;

use observe::{Read, decode_instance};
use pass::PassInput;
use persist::Writes;

use crate::autopilot;
use crate::context::Context;
use crate::drift;
use crate::param_sources;
use crate::reasons;
use crate::resources::{instance_resource, operator_version_resource};
use crate::translate::API_VERSION_TRANSLATED;
use crate::{apply, render, task};
use kudo_engine::reconcile::{CLUSTER_OBJECTS_FINALIZER, RETRY_ANNOTATION};

use kudo_engine::reconcile::DRIFTED;
/// Event reason: drifted objects were applied again.
pub const DRIFT_REPAIRED: &str = "DriftRepaired";

/// `Ready=False` reason (and Event reason) of an Instance that is not a valid kudo.dev/v1beta1
/// Instance although the CRD schema admitted it, so a user of `kubectl get` sees why nothing runs.
pub const INVALID_INSTANCE: &str = "InvalidInstance";

/// `Ready=False` reason (and Event reason) of an Instance whose OperatorVersion exists but does not
/// decode (wrong shape in the schema's free-form parts: plans, task specs).
pub const INVALID_OPERATOR_VERSION: &str = "InvalidOperatorVersion";

/// Unexpected failures of a reconcile (not plan errors, which live in the Instance status).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A request to the API server failed; the reconcile is retried after
    /// [`crate::config::ControllerConfig::error_requeue`].
    #[error("API request failed: {0}")]
    Api(#[from] kube::Error),
    /// An Instance or OperatorVersion does not match the kudo.dev/v1beta1 schema.
    #[error("{0} cannot be decoded: {1}")]
    Decode(String, serde_json::Error),
    /// The server returned an Instance without `metadata.uid` (needed for owner references).
    #[error("instance {0} has no uid")]
    NoUid(String),
}

fn now() -> Timestamp {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    Timestamp::from_unix(secs)
}

/// kube-runtime's error hook: retry after the configured delay.
pub fn error_policy(obj: Arc<DynamicObject>, err: &ReconcileError, ctx: Arc<Context>) -> Action {
    let ns = obj.metadata.namespace.as_deref().unwrap_or("");
    let name = obj.metadata.name.as_deref().unwrap_or("");
    if let ReconcileError::Api(kube::Error::Api(s)) = err
        && s.code == 409
    {
        // Someone changed the Instance since our copy was read: read it from the server next
        // time and retry soon (our cache may not have seen that change yet).
        ctx.caches.saw_instance(ns, name, None);
        debug!(instance = %format!("{ns}/{name}"), "conflict writing the instance, retrying");
        return Action::requeue(Duration::from_millis(200));
    }
    warn!(
        instance = %format!("{}/{}", obj.metadata.namespace.as_deref().unwrap_or(""), obj.metadata.name.as_deref().unwrap_or("")),
        error = %err,
        "reconcile failed, retrying"
    );
    Action::requeue(ctx.config.error_requeue)
}

/// One reconcile as the queue runs it (and [`crate::Stepper`]): only for an Instance of a shard
/// this replica holds, cancelled if the shard goes to another replica meanwhile, and counted in the
/// metrics.
pub(crate) async fn gated(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    // Another replica's shard: nothing to do until this one holds it.
    let ns = obj.metadata.namespace.as_deref().unwrap_or_default();
    let name = obj.metadata.name.as_deref().unwrap_or_default();
    let Some(pass) = ctx.shards.enter(ns, name) else {
        return Ok(Action::await_change());
    };
    let metrics = ctx.metrics.clone();
    let in_flight = metrics.reconcile_started();
    let res = pass.run(reconcile(obj, ctx)).await;
    in_flight.finish(!matches!(res, Some(Err(_))));
    // Cancelled: the shard went to another replica.
    res.unwrap_or_else(|| Ok(Action::await_change()))
}

/// One reconcile of the Instance `obj` names (see the module docs).
async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let ns = obj.metadata.namespace.clone().unwrap_or_default();
    let name = obj.metadata.name.clone().unwrap_or_default();
    let span = info_span!("reconcile", instance = %format!("{ns}/{name}"));
    let reconciler = Reconciler::new(&ctx, &ns, &name);
    match crate::impersonation::scope(reconciler.run().instrument(span)).await {
        // The Instance disappeared while we worked on it (deleted, finalizer released).
        Err(ReconcileError::Api(kube::Error::Api(s)))
            if s.code == 404 && s.details.as_ref().is_some_and(|d| d.kind == "instances") =>
        {
            Ok(Action::await_change())
        }
        other => other,
    }
}

struct Reconciler<'c> {
    ctx: &'c Context,
    ns: String,
    name: String,
    /// Decoded without managedFields (crate::lean): nothing here reads them.
    api: Api<crate::lean::Lean>,
    /// Cluster-scoped objects applied by this reconcile's pass.
    cluster: apply::ClusterObjects,
}

impl<'c> Reconciler<'c> {
    fn new(ctx: &'c Context, ns: &str, name: &str) -> Self {
        let iar = instance_resource();
        Reconciler {
            ctx,
            ns: ns.to_string(),
            name: name.to_string(),
            api: Api::namespaced_with(ctx.cluster.client.clone(), ns, &iar),
            cluster: Default::default(),
        }
    }

    async fn run(&self) -> Result<Action, ReconcileError> {
        let me =
            kube::runtime::reflector::ObjectRef::new_with(&self.name, instance_resource()).within(&self.ns);
        let read = match self.read(&me).await? {
            ControlFlow::Continue(r) => r,
            ControlFlow::Break(action) => return Ok(action),
        };
        let now = now();
        let init = self.initiate(&read, &me, now).await?;
        let Read {
            raw,
            inst,
            ov,
            uid,
            who,
            deleting,
        } = read;
        let (auto, fired, mut admitted, sourced, scheduled) =
            (init.auto, init.fired, init.admitted, init.sourced, init.scheduled);
        admitted.begin(now);
        let (raw, inst) = self.persist_admission(raw, inst, &admitted, &who).await?;
        self.record_revision(&inst, &uid, &admitted, &ov, now).await;
        let generation = raw.metadata.generation;
        let Admitted {
            exec,
            denial,
            remember,
            ..
        } = admitted;
        let old_status = inst.status.clone().unwrap_or_default();
        let mut status = old_status.clone();
        if let Some(sch) = &scheduled {
            status.schedules = sch.statuses.clone();
        }
        self.record_denial(&raw, &mut status, denial.as_deref(), generation, now)
            .await;
        let fired = fired.as_ref();
        let auto_requeue = self
            .report_autopilot(&raw, auto, fired, &mut status, deleting)
            .await;

        let Some(exec) = exec else {
            // A creation KUDO would have rejected: nothing runs until the spec is fixed.
            self.write_status(&old_status, &status).await?;
            let requeue = self.ctx.config.idle_resync;
            return Ok(Action::requeue(auto_requeue.map_or(requeue, |r| r.min(requeue))));
        };
        let run = &exec.plan_execution;
        let mut annotations = inst.metadata.annotations.clone();
        self.ctx
            .memory
            .timings
            .overlay(&self.ns, &self.name, &run.uid, &mut annotations);
        let (ov, sourced) = self.executed_ov(&inst, &exec, ov, sourced).await?;
        let mut writes = Writes::new(&inst, remember, old_status);
        let input = PassInput {
            raw: &raw,
            stored: &inst,
            ov: &ov,
            exec: &exec,
            instance_uid: &uid,
            annotations: &annotations,
            now,
            generation,
            sourced: &sourced,
        };
        let requeue = self
            .idle_or_pass(&input, &mut status, deleting, &mut writes)
            .await?
            .unwrap_or(self.ctx.config.idle_resync);
        // The next schedule occurrence and autopilot evaluation shorten the wait.
        let requeue = [scheduled.and_then(|s| s.wake), auto_requeue]
            .into_iter()
            .flatten()
            .fold(requeue, Duration::min);
        let ended = kudo_engine::revision::ended(&writes.old_status, &status, &run.plan_name, &run.uid);
        let timing = self
            .persist_run(&raw, &inst, &ov, deleting, writes, &status)
            .await?
            .filter(|_| !run.plan_name.is_empty());
        self.ctx
            .memory
            .timings
            .keep(&self.ns, &self.name, timing.as_deref());
        if let Some(outcome) = ended {
            self.ctx
                .cluster
                .revisions
                .finish(&inst, &run.uid, outcome, now)
                .await;
        }
        Ok(Action::requeue(requeue))
    }

    /// Records the run this admission started as a revision (see [`crate::revisions`]).
    async fn record_revision(
        &self,
        inst: &Instance,
        uid: &str,
        admitted: &Admitted,
        ov: &OperatorVersion,
        now: Timestamp,
    ) {
        if let (Some(by), Some(exec)) = (&admitted.started, &admitted.exec) {
            let run = crate::revisions::Run {
                inst,
                uid,
                spec: exec,
                ov,
            };
            self.ctx.cluster.revisions.record(&run, by.clone(), now).await;
        }
    }

    /// The OperatorVersion and sensitive values the executed spec runs with: a denied upgrade
    /// keeps executing against the previously admitted OperatorVersion (the sourced values are
    /// validated against the OperatorVersion that runs).
    async fn executed_ov(
        &self,
        inst: &Instance,
        exec: &InstanceSpec,
        ov: Arc<OperatorVersion>,
        sourced: param_sources::Sourced,
    ) -> Result<(Arc<OperatorVersion>, param_sources::Sourced), ReconcileError> {
        if exec.operator_version == inst.spec.operator_version {
            return Ok((ov, sourced));
        }
        let exec_ov = self.get_ov(inst, exec).await?.unwrap_or(ov);
        let sourced = self.resolve_sources(&exec_ov, Some(exec)).await;
        Ok((exec_ov, sourced))
    }

    /// Publishes the autopilot evaluation and keeps its rule states in `status`; returns when to
    /// evaluate again.
    async fn report_autopilot(
        &self,
        raw: &DynamicObject,
        auto: Option<autopilot::Evaluation>,
        fired: Option<&Initiation>,
        status: &mut InstanceStatus,
        deleting: bool,
    ) -> Option<Duration> {
        match auto {
            Some(a) => {
                self.publish_autopilot(raw, &a, fired).await;
                status.autopilot = a.states;
                a.requeue
            }
            None => {
                // Rules removed (e.g. by an upgrade): their state goes with them.
                if !deleting {
                    status.autopilot.clear();
                }
                None
            }
        }
    }

    /// The Events of an autopilot evaluation: errors (once each) and a firing.
    async fn publish_autopilot(
        &self,
        raw: &DynamicObject,
        eval: &autopilot::Evaluation,
        fired: Option<&Initiation>,
    ) {
        for (rule, msg) in &eval.errors {
            warn!(rule = %rule, "{msg}");
            self.event(
                raw,
                EventType::Warning,
                autopilot::AUTOPILOT_RULE_ERROR,
                rule,
                msg,
            )
            .await;
        }
        if let Some(init) = fired {
            let msg = autopilot::triggered_message(init);
            info!("{msg}");
            self.event(
                raw,
                EventType::Normal,
                autopilot::AUTOPILOT_TRIGGERED,
                &init.plan,
                &msg,
            )
            .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::idle::last_failed_lifecycle_plan;
    use super::*;

    fn ps(name: &str, status: ExecutionStatus, at: &str) -> PlanStatus {
        PlanStatus {
            name: name.into(),
            status,
            last_updated_timestamp: Some(at.into()),
            ..PlanStatus::default()
        }
    }

    #[test]
    fn idle_readiness_follows_the_latest_failed_lifecycle_plan() {
        let mut st = InstanceStatus::default();
        st.plan_status.insert(
            "deploy".into(),
            ps("deploy", ExecutionStatus::Complete, "2026-01-01T10:00:00Z"),
        );
        assert_eq!(last_failed_lifecycle_plan(&st), None);
        st.plan_status.insert(
            "update".into(),
            ps("update", ExecutionStatus::FatalError, "2026-01-01T11:00:00Z"),
        );
        assert_eq!(last_failed_lifecycle_plan(&st), Some("update".into()));
        // A later successful deploy supersedes the failed update.
        st.plan_status.insert(
            "deploy".into(),
            ps("deploy", ExecutionStatus::Complete, "2026-01-01T12:00:00Z"),
        );
        assert_eq!(last_failed_lifecycle_plan(&st), None);
        // Other plans (e.g. backup) do not affect readiness.
        st.plan_status.insert(
            "backup".into(),
            ps("backup", ExecutionStatus::FatalError, "2026-01-01T13:00:00Z"),
        );
        assert_eq!(last_failed_lifecycle_plan(&st), None);
    }
}

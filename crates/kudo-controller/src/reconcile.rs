//! One reconcile of an Instance: admission of spec changes (KUDO's webhook rules, run here), plan
//! status bookkeeping, one execution pass, then persisting status, spec and Events.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event as KEvent, EventType as KEventType};
use kudo_api::{
    CLEANUP_FINALIZER, Condition, ExecutionStatus, Instance, InstanceSpec, InstanceStatus, OperatorVersion,
    PlanExecution, PlanStatus,
};
use kudo_engine::{
    Decision, EventType, InstanceChange, PlanPass, TIMING_ANNOTATION, TaskOutcome, Timestamp, Timing,
    cleanup_finalizer_removable, decide, ensure_plan_statuses, mark_plan_fatal, needs_reset, plan_condition,
    ready_condition, requeue_after_secs, reset_for_run, set_condition, should_schedule_cleanup,
};
use kudo_package::render::RenderContext;
use serde_json::{Value, json};
use tracing::{Instrument, debug, info, info_span, warn};

use crate::drift;
use crate::execute::{self, reasons};
use crate::translate::API_VERSION_TRANSLATED;
use crate::{
    ADMITTED_SPEC_ANNOTATION, CLUSTER_OBJECTS_ANNOTATION, CLUSTER_OBJECTS_FINALIZER, Context,
    instance_resource, operator_version_resource,
};

/// Condition (policy `report`) listing managed objects changed outside a plan.
pub const DRIFTED: &str = "Drifted";
/// Event reason: drifted objects were applied again.
pub const DRIFT_REPAIRED: &str = "DriftRepaired";
/// Event reason: drifted objects were found and left alone (policy `report`).
pub const DRIFT_DETECTED: &str = "DriftDetected";

/// Condition reporting a spec change KUDO's webhook would have rejected.
pub const CHANGE_ACCEPTED: &str = "ChangeAccepted";

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
    /// [`crate::ControllerConfig::error_requeue`].
    #[error("API request failed: {0}")]
    Api(#[from] kube::Error),
    /// An Instance or OperatorVersion does not match the kudo.dev/v1beta1 schema.
    #[error("{0} cannot be decoded: {1}")]
    Decode(String, serde_json::Error),
    /// The server returned an Instance without `metadata.uid` (needed for owner references).
    #[error("instance {0} has no uid")]
    NoUid(String),
}

/// `serde_json::from_value` that names where a field of the wrong shape is (`spec.plans.deploy.phases:
/// invalid type …`), for status messages a user can act on.
fn decode<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, serde_json::Error> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            inner
        } else {
            <serde_json::Error as serde::de::Error>::custom(format!("{path}: {inner}"))
        }
    })
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

/// Entry point called by the kube-runtime controller.
pub async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let ns = obj.metadata.namespace.clone().unwrap_or_default();
    let name = obj.metadata.name.clone().unwrap_or_default();
    let span = info_span!("reconcile", instance = %format!("{ns}/{name}"));
    match Reconciler::new(&ctx, &ns, &name).run().instrument(span).await {
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
    api: Api<DynamicObject>,
    /// Cluster-scoped objects applied by this reconcile's pass.
    cluster: execute::ClusterObjects,
}

/// What admission decided for this reconcile.
struct Admitted {
    /// The spec to store (admission edits applied); equals the current spec for a denial.
    spec: InstanceSpec,
    finalizers: Vec<String>,
    /// The spec whose plan and parameters are executed; `None` when nothing was ever admitted.
    exec: Option<InstanceSpec>,
    denial: Option<String>,
    /// Spec the admitted-spec annotation should hold.
    remember: Option<InstanceSpec>,
}

/// How many times an Event write is tried when the API server refuses it transiently.
const EVENT_TRIES: u32 = 3;

/// Whether a refused request may succeed when sent again unchanged: server errors, throttling,
/// and transport failures (the request may not have reached the server).
fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code >= 500 || s.code == 429,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

impl<'c> Reconciler<'c> {
    fn new(ctx: &'c Context, ns: &str, name: &str) -> Self {
        let iar = instance_resource();
        Reconciler {
            ctx,
            ns: ns.to_string(),
            name: name.to_string(),
            api: Api::namespaced_with(ctx.client.clone(), ns, &iar),
            cluster: Default::default(),
        }
    }

    /// Our own writes to the Instance carry the configured field manager too, so
    /// `managedFields` shows which fields the controller owns.
    fn patch_params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(self.ctx.config.field_manager.clone()),
            ..PatchParams::default()
        }
    }

    fn reference(&self, raw: &DynamicObject) -> ObjectReference {
        ObjectReference {
            api_version: Some(kudo_api::API_VERSION.into()),
            kind: Some("Instance".into()),
            name: Some(self.name.clone()),
            namespace: Some(self.ns.clone()),
            uid: raw.metadata.uid.clone(),
            resource_version: raw.metadata.resource_version.clone(),
            ..Default::default()
        }
    }

    /// Publishes an Event. `action` separates Event series: the recorder merges Events with the
    /// same reason and action into one series keeping the first note, so plan events use the
    /// plan name as action to keep each plan's message.
    async fn event(&self, raw: &DynamicObject, type_: EventType, reason: &str, action: &str, message: &str) {
        self.event_related(raw, type_, reason, action, message, None)
            .await;
    }

    /// [`Self::event`] with a related object (the Event's `related`), which also separates
    /// Event series.
    async fn event_related(
        &self,
        raw: &DynamicObject,
        type_: EventType,
        reason: &str,
        action: &str,
        message: &str,
        related: Option<ObjectReference>,
    ) {
        let mut note = message.to_string();
        if note.len() > 1000 {
            let mut cut = 1000;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
        }
        let ev = KEvent {
            type_: match type_ {
                EventType::Normal => KEventType::Normal,
                EventType::Warning => KEventType::Warning,
            },
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: related,
        };
        let reference = self.reference(raw);
        // Like client-go's recorder, a refused Event is retried when the refusal is transient
        // (5xx, 429): plan events are how users follow a run, and one 500 should not lose one.
        let mut backoff = Duration::from_millis(50);
        for attempt in 1..=EVENT_TRIES {
            match self.ctx.recorder.publish(&ev, &reference).await {
                Ok(()) => return,
                Err(e) if attempt < EVENT_TRIES && is_transient(&e) => {
                    tokio::time::sleep(backoff).await;
                    backoff *= 4;
                }
                Err(e) => {
                    warn!(reason, error = %e, "publishing event failed");
                    return;
                }
            }
        }
    }

    async fn get_ov(
        &self,
        inst: &Instance,
        spec: &InstanceSpec,
    ) -> Result<Option<OperatorVersion>, ReconcileError> {
        let ov_ns = spec.operator_version_namespace(inst.metadata.namespace.as_deref().unwrap_or(""));
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.ctx.client.clone(), ov_ns, &operator_version_resource());
        // From the cache; a miss (e.g. an OperatorVersion created a moment ago) asks the server.
        let raw = match self
            .ctx
            .caches
            .operator_version(ov_ns, &spec.operator_version.name)
        {
            Some(cached) => (*cached).clone(),
            None => match api.get_opt(&spec.operator_version.name).await? {
                Some(raw) => raw,
                None => return Ok(None),
            },
        };
        let v = serde_json::to_value(&raw)
            .map_err(|e| ReconcileError::Decode(spec.operator_version.name.clone(), e))?;
        let ov: OperatorVersion =
            decode(v).map_err(|e| ReconcileError::Decode(spec.operator_version.name.clone(), e))?;
        Ok(Some(ov))
    }

    /// The Instance as of our newest knowledge: the cached copy when it is the version this
    /// manager last wrote or read (see [`crate::cache`]), else a GET. `None`: it is gone.
    async fn current(&self) -> Result<Option<DynamicObject>, ReconcileError> {
        match self.ctx.caches.instance(&self.ns, &self.name) {
            Ok(cached) => Ok(cached.map(|c| (*c).clone())),
            Err(()) => {
                let got = self.api.get_opt(&self.name).await?;
                self.ctx.caches.saw_instance(
                    &self.ns,
                    &self.name,
                    got.as_ref().and_then(|g| g.metadata.resource_version.as_deref()),
                );
                Ok(got)
            }
        }
    }

    async fn run(&self) -> Result<Action, ReconcileError> {
        let Some(raw) = self.current().await? else {
            return Ok(Action::await_change());
        };
        let who = format!("{}/{}", self.ns, self.name);
        let v = serde_json::to_value(&raw).map_err(|e| ReconcileError::Decode(who.clone(), e))?;
        let inst: Instance = match decode(v) {
            Ok(inst) => inst,
            // A field the CRD schema admits but kudo.dev/v1beta1 does not (e.g. an unknown
            // planExecution.status): say so on the Instance instead of failing every retry silently.
            Err(e) => {
                let msg = format!("instance {who} cannot be read: {e}; fix its spec");
                return self.report_invalid_instance(&raw, &msg).await;
            }
        };
        let uid = raw
            .metadata
            .uid
            .clone()
            .ok_or_else(|| ReconcileError::NoUid(who.clone()))?;
        let deleting = raw.metadata.deletion_timestamp.is_some();
        let has_finalizer = inst.metadata.finalizers.iter().any(|f| f == CLEANUP_FINALIZER);
        if deleting && !has_finalizer {
            if inst
                .metadata
                .finalizers
                .iter()
                .any(|f| f == CLUSTER_OBJECTS_FINALIZER)
            {
                return self.release_cluster_objects(&raw, &inst).await;
            }
            // Nothing of ours holds the Instance: the garbage collector removes its objects.
            return Ok(Action::await_change());
        }

        let ov = match self.get_ov(&inst, &inst.spec).await {
            Ok(ov) => ov,
            // An OperatorVersion with fields of the wrong shape where the CRD schema is free-form
            // (plans, task specs): this Instance cannot run, others are not affected.
            Err(ReconcileError::Decode(_, e)) => {
                let msg = format!(
                    "OperatorVersion {}/{} of instance {who} cannot be read: {e}",
                    inst.spec.operator_version_namespace(&self.ns),
                    inst.spec.operator_version.name
                );
                warn!("{msg}");
                let old = inst.status.clone().unwrap_or_default();
                let mut new = old.clone();
                set_condition(
                    &mut new.conditions,
                    Condition {
                        type_: kudo_engine::readiness::READY.into(),
                        status: "False".into(),
                        observed_generation: None,
                        last_transition_time: now().to_string(),
                        reason: INVALID_OPERATOR_VERSION.into(),
                        message: msg.clone(),
                    },
                );
                if self.write_status(&old, &new).await?.is_some() {
                    self.event(
                        &raw,
                        EventType::Warning,
                        INVALID_OPERATOR_VERSION,
                        "Reconcile",
                        &msg,
                    )
                    .await;
                }
                // Looked at again when the OperatorVersion changes (watched) or after the delay.
                return Ok(Action::requeue(self.ctx.config.error_requeue));
            }
            Err(e) => return Err(e),
        };
        let Some(ov) = ov else {
            if drift::namespace_terminating(self.ctx, &self.ns).await {
                // The namespace deletion removed the OperatorVersion; the Instance goes next.
                debug!(instance = %who, "namespace is being deleted: OperatorVersion gone");
                return Ok(Action::await_change());
            }
            let msg = format!(
                "OperatorVersion {}/{} of instance {who} does not exist",
                inst.spec.operator_version_namespace(&self.ns),
                inst.spec.operator_version.name
            );
            warn!("{msg}");
            // KUDO's webhook refused such an Instance; stored anyway, it says why in its status
            // (Ready=False) as well as in an Event, and is looked at again when OperatorVersions change.
            let old = inst.status.clone().unwrap_or_default();
            let mut new = old.clone();
            set_condition(
                &mut new.conditions,
                Condition {
                    type_: kudo_engine::readiness::READY.into(),
                    status: "False".into(),
                    observed_generation: None,
                    last_transition_time: now().to_string(),
                    reason: "OperatorVersionNotFound".into(),
                    message: msg.clone(),
                },
            );
            self.write_status(&old, &new).await?;
            self.event(
                &raw,
                EventType::Warning,
                "InvalidOperatorVersion",
                "Reconcile",
                &msg,
            )
            .await;
            return Ok(Action::requeue(self.ctx.config.error_requeue));
        };

        let admitted = self.admit(&inst, &ov, deleting).await?;
        let now = now();

        // --- the spec to execute, and the cleanup plan on deletion
        let mut spec = admitted.spec.clone();
        let mut exec = admitted.exec.clone();
        let finalizers = admitted.finalizers.clone();
        let mut remember = admitted.remember.clone();
        if deleting && let Some(e) = &exec {
            let mut probe = inst.clone();
            probe.spec = e.clone();
            if should_schedule_cleanup(&probe, &ov, true) {
                let pe = PlanExecution {
                    plan_name: kudo_engine::triggers::CLEANUP.into(),
                    uid: uuid::Uuid::new_v4().to_string(),
                    status: Some(ExecutionStatus::NeverRun),
                };
                info!(plan = "cleanup", uid = %pe.uid, "instance is being deleted, scheduling cleanup");
                spec.plan_execution = pe.clone();
                let mut e2 = e.clone();
                e2.plan_execution = pe;
                exec = Some(e2.clone());
                remember = Some(e2);
            }
        }

        // Persist admission results (a newly scheduled run's uid, defaults, finalizer) before
        // executing anything, so the run is durable even if a later write fails.
        let (raw, inst) = match self
            .write_spec(
                &inst,
                &spec,
                &finalizers,
                remember.as_ref(),
                &BTreeMap::new(),
                resource_version(&raw),
            )
            .await?
        {
            Some(updated) => {
                let v = serde_json::to_value(&updated).map_err(|e| ReconcileError::Decode(who.clone(), e))?;
                let i: Instance =
                    serde_json::from_value(v).map_err(|e| ReconcileError::Decode(who.clone(), e))?;
                (updated, i)
            }
            None => (raw, inst),
        };
        let generation = raw.metadata.generation;
        let mut spec = inst.spec.clone();
        let mut finalizers = inst.metadata.finalizers.clone();

        // --- status: denial condition
        let old_status = inst.status.clone().unwrap_or_default();
        let mut status = old_status.clone();
        match &admitted.denial {
            Some(msg) => {
                warn!(denied = %msg, "spec change not admitted");
                set_condition(
                    &mut status.conditions,
                    Condition {
                        type_: CHANGE_ACCEPTED.into(),
                        status: "False".into(),
                        observed_generation: generation,
                        last_transition_time: now.to_string(),
                        reason: "ChangeDenied".into(),
                        message: msg.clone(),
                    },
                );
                self.event(&raw, EventType::Warning, "ChangeDenied", "Admission", msg)
                    .await;
            }
            None => status.conditions.retain(|c| c.type_ != CHANGE_ACCEPTED),
        }

        let annotations = inst.metadata.annotations.clone();
        let Some(exec) = exec else {
            // A creation KUDO would have rejected: nothing runs until the spec is fixed.
            self.write_status(&old_status, &status).await?;
            return Ok(Action::requeue(self.ctx.config.idle_resync));
        };
        // A denied upgrade keeps executing against the previously admitted OperatorVersion.
        let ov = if exec.operator_version != inst.spec.operator_version {
            self.get_ov(&inst, &exec).await?.unwrap_or(ov)
        } else {
            ov
        };
        let plan = exec.plan_execution.plan_name.clone();
        let mut timing_annotation = annotations.get(TIMING_ANNOTATION).cloned();

        let mut requeue = self.ctx.config.idle_resync;
        if plan.is_empty() {
            // --- idle: readiness from the live workloads
            // A failed lifecycle run keeps the instance's readiness Unknown until the user acts:
            // healthy-looking leftovers of a half-applied plan do not make it Ready (KUDO
            // reported them as ready once the failed plan was unscheduled).
            let mut cond = match last_failed_lifecycle_plan(&status) {
                Some(plan) => plan_condition(&plan, ExecutionStatus::FatalError, now)
                    .unwrap_or_else(|| ready_condition(&[], now)),
                None => ready_condition(&self.workloads().await?, now),
            };
            cond.observed_generation = generation;
            set_condition(&mut status.conditions, cond);
            if !deleting && last_failed_lifecycle_plan(&status).is_none() {
                self.drift(&raw, &ov, &exec, &uid, &annotations, &mut status, now, generation)
                    .await;
            }
        } else {
            let plan_uid = exec.plan_execution.uid.clone();
            let span = info_span!("plan", plan = %plan, uid = %plan_uid);
            let (plan_status, pass_requeue, timing) = self
                .execute(&raw, &ov, &exec, &uid, &mut status, now, generation, &annotations)
                .instrument(span)
                .await;
            timing_annotation = timing;
            // Mirror the run's status into spec.planExecution; a finished plan is unscheduled.
            // (Only for the run being executed: a denied planExecution edit is left alone.)
            let mut e = exec.clone();
            if plan_status.is_terminal() {
                e.plan_execution = PlanExecution::default();
            } else {
                e.plan_execution.status = Some(plan_status);
            }
            if spec.plan_execution.uid == exec.plan_execution.uid {
                spec.plan_execution = e.plan_execution.clone();
            }
            remember = Some(e);
            if let Some(r) = pass_requeue {
                requeue = r;
            }
        }

        // --- finalizer: removable once cleanup COMPLETED (or there is no cleanup plan)
        if deleting {
            let mut probe = inst.clone();
            probe.status = Some(status.clone());
            if cleanup_finalizer_removable(&probe, &ov) {
                info!("cleanup finished, removing finalizer");
                finalizers.retain(|f| f != CLEANUP_FINALIZER);
            }
        }

        // --- cluster-scoped objects applied by the pass are recorded for uninstall
        let mut extra = BTreeMap::from([(TIMING_ANNOTATION, timing_annotation)]);
        let stored = stored_cluster_objects(&inst);
        let mut recorded = stored.clone();
        recorded.extend(
            self.cluster
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned(),
        );
        if recorded != stored {
            extra.insert(
                CLUSTER_OBJECTS_ANNOTATION,
                Some(serde_json::to_string(&recorded).unwrap_or_default()),
            );
        }
        // (Kubernetes forbids adding finalizers to an Instance being deleted.)
        if !recorded.is_empty() && !deleting && !finalizers.iter().any(|f| f == CLUSTER_OBJECTS_FINALIZER) {
            finalizers.push(CLUSTER_OBJECTS_FINALIZER.to_string());
        }

        // Status first: a crash before the spec write re-runs a terminal pass, which is a no-op.
        let rv = self
            .write_status(&old_status, &status)
            .await?
            .or_else(|| resource_version(&raw));
        self.write_spec(&inst, &spec, &finalizers, remember.as_ref(), &extra, rv)
            .await?;
        Ok(Action::requeue(requeue))
    }

    /// Uninstall of an Instance whose plans created cluster-scoped objects: delete them, then
    /// release the Instance (namespaced objects are left to the garbage collector).
    async fn release_cluster_objects(
        &self,
        raw: &DynamicObject,
        inst: &Instance,
    ) -> Result<Action, ReconcileError> {
        let mut pending = Vec::new();
        for (api_version, kind, name) in stored_cluster_objects(inst) {
            let obj = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
            match execute::delete(self.ctx, &obj).await {
                Ok(None) => {}
                Ok(Some(waiting)) => pending.push(waiting),
                Err(TaskOutcome::Transient(e)) => pending.push(e),
                Err(other) => pending.push(format!("{other:?}")),
            }
        }
        if !pending.is_empty() {
            debug!(pending = %pending.join(", "), "waiting for cluster-scoped objects to be deleted");
            // Cluster-scoped kinds are not watched: poll until they are gone.
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
        info!("cluster-scoped objects deleted, releasing the instance");
        let finalizers: Vec<String> = inst
            .metadata
            .finalizers
            .iter()
            .filter(|f| *f != CLUSTER_OBJECTS_FINALIZER)
            .cloned()
            .collect();
        self.write_spec(
            inst,
            &inst.spec,
            &finalizers,
            None,
            &BTreeMap::new(),
            resource_version(raw),
        )
        .await?;
        Ok(Action::await_change())
    }

    /// Runs KUDO's admission rules against the last admitted spec.
    async fn admit(
        &self,
        inst: &Instance,
        ov: &OperatorVersion,
        deleting: bool,
    ) -> Result<Admitted, ReconcileError> {
        let stored: Option<InstanceSpec> = inst
            .metadata
            .annotations
            .get(ADMITTED_SPEC_ANNOTATION)
            .and_then(|s| serde_json::from_str(s).ok());
        let unchanged = |spec: InstanceSpec| Admitted {
            spec: inst.spec.clone(),
            finalizers: inst.metadata.finalizers.clone(),
            exec: Some(spec.clone()),
            denial: None,
            remember: Some(spec),
        };
        let (admission, old_spec) = match stored {
            None if deleting => {
                return Ok(Admitted {
                    spec: inst.spec.clone(),
                    finalizers: inst.metadata.finalizers.clone(),
                    exec: None,
                    denial: None,
                    remember: None,
                });
            }
            None => (
                decide(&InstanceChange {
                    old: None,
                    new: inst,
                    old_ov: ov,
                    new_ov: ov,
                    deleting,
                }),
                None,
            ),
            Some(a) if a == inst.spec => return Ok(unchanged(a)),
            Some(a) => {
                let mut old = inst.clone();
                old.spec = a.clone();
                let old_ov = if a.operator_version == inst.spec.operator_version {
                    None
                } else {
                    self.get_ov(&old, &a).await?
                };
                (
                    decide(&InstanceChange {
                        old: Some(&old),
                        new: inst,
                        old_ov: old_ov.as_ref().unwrap_or(ov),
                        new_ov: ov,
                        deleting,
                    }),
                    Some(a),
                )
            }
        };
        match &admission.decision {
            Decision::Cancel { plan, uid } => {
                // Execute the admitted spec (not a denied parameter change that may be stored
                // too) with the run marked CANCELLED; the pass stops it.
                let mut e = old_spec.unwrap_or_else(|| inst.spec.clone());
                e.plan_execution = PlanExecution {
                    plan_name: plan.clone(),
                    uid: uid.clone(),
                    status: Some(ExecutionStatus::Cancelled),
                };
                info!(plan = %plan, uid = %uid, "plan cancellation requested");
                Ok(Admitted {
                    spec: inst.spec.clone(),
                    finalizers: inst.metadata.finalizers.clone(),
                    exec: Some(e.clone()),
                    denial: None,
                    remember: Some(e),
                })
            }
            Decision::Deny { message } => Ok(Admitted {
                spec: inst.spec.clone(),
                finalizers: inst.metadata.finalizers.clone(),
                exec: old_spec.clone(),
                denial: Some(message.clone()),
                remember: old_spec,
            }),
            decision => {
                let mut new = inst.clone();
                let new_uid = uuid::Uuid::new_v4().to_string();
                admission.apply(&mut new, &new_uid);
                if let Decision::Schedule { plan, reason } = decision {
                    info!(plan = %plan, reason = ?reason, uid = %new_uid, "plan scheduled");
                }
                Ok(Admitted {
                    spec: new.spec.clone(),
                    finalizers: new.metadata.finalizers.clone(),
                    exec: Some(new.spec.clone()),
                    denial: None,
                    remember: Some(new.spec),
                })
            }
        }
    }

    /// One execution pass of the scheduled plan. Returns the plan's status after the pass, the
    /// requeue delay (None when the plan is terminal) and the timing annotation to store.
    #[allow(clippy::too_many_arguments)]
    async fn execute(
        &self,
        raw: &DynamicObject,
        ov: &OperatorVersion,
        exec: &InstanceSpec,
        instance_uid: &str,
        status: &mut InstanceStatus,
        now: Timestamp,
        generation: Option<i64>,
        annotations: &BTreeMap<String, String>,
    ) -> (ExecutionStatus, Option<Duration>, Option<String>) {
        let plan = exec.plan_execution.plan_name.as_str();
        let plan_uid = exec.plan_execution.uid.as_str();
        ensure_plan_statuses(&ov.spec, status);
        let timing = Timing::from_annotation(annotations.get(TIMING_ANNOTATION).map(String::as_str));

        let mut ps = status
            .plan_status
            .get(plan)
            .cloned()
            .unwrap_or_else(|| PlanStatus {
                name: plan.to_string(),
                ..PlanStatus::default()
            });
        if needs_reset(&ps, plan_uid) {
            reset_for_run(&mut ps, plan_uid, now);
        }
        if !ov.spec.plans.contains_key(plan) {
            let msg = format!("could not find required plan: {plan}");
            if !ps.status.is_terminal() {
                mark_plan_fatal(&mut ps, &msg, now);
                self.event(raw, EventType::Warning, reasons::INVALID_PLAN, plan, &msg)
                    .await;
            }
            let st = ps.status;
            status.plan_status.insert(plan.to_string(), ps);
            self.plan_ready(status, plan, st, now, generation);
            return (st, None, None);
        }

        if exec.plan_execution.status == Some(ExecutionStatus::Cancelled) {
            // A cancel request: nothing is rendered or applied; the pass marks the unfinished
            // run CANCELLED (a run that already ended keeps its status).
            if let Ok(mut pass) = PlanPass::start(&ov.spec, plan, ps.clone(), now) {
                pass.request_cancel();
                let (new_ps, summary) = pass.finish();
                self.ctx
                    .metrics
                    .plan_pass(ov, plan_uid, annotations, &summary, now);
                for ev in &summary.events {
                    self.event(raw, ev.type_, &ev.reason, plan, &ev.message).await;
                }
                ps = new_ps;
            }
            let st = ps.status;
            info!(status = %st, "plan cancelled");
            status.plan_status.insert(plan.to_string(), ps);
            self.plan_ready(status, plan, st, now, generation);
            return (st, None, None);
        }
        if ps.status.is_terminal() {
            // A terminal plan runs nothing; the caller unschedules it.
            let st = ps.status;
            status.plan_status.insert(plan.to_string(), ps);
            self.plan_ready(status, plan, st, now, generation);
            return (st, None, None);
        }
        let rctx = RenderContext {
            instance_name: self.name.clone(),
            namespace: self.ns.clone(),
            parameters: exec.parameters.clone(),
            plan_uid: plan_uid.to_string(),
            instance_uid: instance_uid.to_string(),
            is_namespaced: None,
            live_dependency: None,
        };
        let rendered = match execute::render(self.ctx, ov, plan, rctx, &exec.parameter_sources).await {
            Ok(r) => {
                for t in r.translations() {
                    if self.ctx.translations.first(plan_uid, t) {
                        let msg = t.message();
                        info!("{msg}");
                        // One Event series per object (the recorder merges by reason and action).
                        let mut action = format!("Translate {}", t.object);
                        while action.len() > 128 {
                            action.pop();
                        }
                        self.event(raw, EventType::Warning, API_VERSION_TRANSLATED, &action, &msg)
                            .await;
                    }
                }
                r
            }
            Err(msg) => {
                let msg = format!("{}/{}: {msg}", self.ns, self.name);
                mark_plan_fatal(&mut ps, &msg, now);
                self.event(raw, EventType::Warning, reasons::INVALID_PARAMS, plan, &msg)
                    .await;
                let st = ps.status;
                status.plan_status.insert(plan.to_string(), ps);
                self.plan_ready(status, plan, st, now, generation);
                return (st, None, None);
            }
        };
        let params = kudo_engine::effective_parameters(&ov.spec.parameters, &exec.parameters);

        let mut pass = match PlanPass::start(&ov.spec, plan, ps.clone(), now) {
            Ok(p) => p.with_instance(&self.ns, &self.name).with_timing(timing),
            Err(e) => {
                // Unreachable in practice: the plan's existence was checked above.
                let msg = e.to_string();
                mark_plan_fatal(&mut ps, &msg, now);
                let st = ps.status;
                status.plan_status.insert(plan.to_string(), ps);
                return (st, None, None);
            }
        };
        while let Some(call) = pass.next_task() {
            let outcome = execute::run_task(self.ctx, &call, ov, &rendered, &params, &self.cluster)
                .instrument(info_span!(
                    "task",
                    phase = call.phase,
                    step = call.step,
                    task = call.task_name
                ))
                .await;
            self.ctx.metrics.task_outcome(&outcome);
            debug!(phase = call.phase, step = call.step, task = call.task_name, outcome = ?outcome, "task ran");
            pass.report(outcome);
        }
        let (new_ps, summary) = pass.finish();
        self.ctx
            .metrics
            .plan_pass(ov, plan_uid, annotations, &summary, now);
        for (path, err) in &summary.transient_errors {
            warn!(task = %path, error = %err, "transient task error");
        }
        for (path, msg) in &summary.waiting {
            debug!(task = %path, waiting = %msg, "waiting");
        }
        if summary.status != summary.status_before {
            info!(status = %summary.status, "plan status changed");
        }
        for ev in &summary.events {
            self.event(raw, ev.type_, &ev.reason, plan, &ev.message).await;
        }
        let st = new_ps.status;
        let requeue = if st.is_terminal() {
            None
        } else {
            let mut secs = requeue_after_secs(&new_ps, now);
            if let Some(d) = summary.next_deadline {
                secs = secs.min(d.seconds_since(now).max(1) as u64);
            }
            Some(Duration::from_secs(secs).min(self.ctx.config.requeue_backstop))
        };
        status.plan_status.insert(plan.to_string(), new_ps);
        self.plan_ready(status, plan, st, now, generation);
        (st, requeue, summary.timing.to_annotation())
    }

    /// Drift check of an idle Instance (see [`crate::drift`]): Events and the `Drifted`
    /// condition. Failures are logged and retried at the next idle reconcile.
    #[allow(clippy::too_many_arguments)]
    async fn drift(
        &self,
        raw: &DynamicObject,
        ov: &OperatorVersion,
        exec: &InstanceSpec,
        instance_uid: &str,
        annotations: &BTreeMap<String, String>,
        status: &mut InstanceStatus,
        now: Timestamp,
        generation: Option<i64>,
    ) {
        let (policy, bad) = drift::Policy::from_annotations(annotations);
        if let Some(msg) = bad {
            warn!("{msg}");
        }
        if policy == drift::Policy::Ignore {
            status.conditions.retain(|c| c.type_ != DRIFTED);
            return;
        }
        let base = RenderContext {
            instance_name: self.name.clone(),
            namespace: self.ns.clone(),
            parameters: exec.parameters.clone(),
            plan_uid: String::new(),
            instance_uid: instance_uid.to_string(),
            is_namespaced: None,
            live_dependency: None,
        };
        let rep = drift::check(
            self.ctx,
            ov,
            &base,
            &exec.parameter_sources,
            status,
            policy,
            &self.cluster,
        )
        .await;
        self.ctx.metrics.drift(&rep);
        for e in &rep.errors {
            warn!(error = %e, "drift check");
        }
        // One Event per object, the object as `related`: the recorder would merge them otherwise.
        for r in &rep.repaired {
            let msg = format!("re-applied an object changed outside a plan: {}", r.what);
            info!("{msg}");
            self.event_related(
                raw,
                EventType::Normal,
                DRIFT_REPAIRED,
                "DriftRepair",
                &msg,
                Some(r.object.clone()),
            )
            .await;
        }
        if policy == drift::Policy::Report && !rep.drifted.is_empty() {
            let msg = format!(
                "objects changed outside a plan (policy report, not repaired): {}",
                rep.drifted.join(", ")
            );
            let was = status
                .conditions
                .iter()
                .any(|c| c.type_ == DRIFTED && c.status == "True" && c.message == msg);
            if !was {
                warn!("{msg}");
                self.event(raw, EventType::Warning, DRIFT_DETECTED, "DriftRepair", &msg)
                    .await;
            }
            set_condition(
                &mut status.conditions,
                Condition {
                    type_: DRIFTED.into(),
                    status: "True".into(),
                    observed_generation: generation,
                    last_transition_time: now.to_string(),
                    reason: DRIFT_DETECTED.into(),
                    message: msg,
                },
            );
        } else if rep.errors.is_empty() {
            status.conditions.retain(|c| c.type_ != DRIFTED);
        }
    }

    fn plan_ready(
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

    /// The workloads KUDO's readiness looks at (KEP-34), as JSON with apiVersion/kind.
    async fn workloads(&self) -> Result<Vec<Value>, ReconcileError> {
        let selector = format!("{}={},heritage=kudo", kudo_api::labels::INSTANCE, self.name);
        let kinds = [
            ("apps", "v1", "Deployment", "deployments"),
            ("apps", "v1", "StatefulSet", "statefulsets"),
            ("apps", "v1", "ReplicaSet", "replicasets"),
            ("apps", "v1", "DaemonSet", "daemonsets"),
            ("", "v1", "Pod", "pods"),
        ];
        let mut out = Vec::new();
        for (g, v, k, plural) in kinds {
            let ar = ApiResource::from_gvk_with_plural(&kube::api::GroupVersionKind::gvk(g, v, k), plural);
            // From the watch cache; a LIST only while that cache is not synced.
            let labels = [
                (kudo_api::labels::INSTANCE, self.name.as_str()),
                ("heritage", "kudo"),
            ];
            if let Some(cached) = self
                .ctx
                .caches
                .children_labelled(&ar.api_version, k, &self.ns, &labels)
            {
                out.extend(cached);
                continue;
            }
            let api: Api<DynamicObject> = Api::namespaced_with(self.ctx.client.clone(), &self.ns, &ar);
            let list = api.list(&ListParams::default().labels(&selector)).await?;
            for item in list.items {
                let mut v = serde_json::to_value(&item).unwrap_or(Value::Null);
                v["apiVersion"] = json!(ar.api_version);
                v["kind"] = json!(k);
                out.push(v);
            }
        }
        Ok(out)
    }

    /// Merge-patches the status subresource when it changed; returns the new resourceVersion.
    /// An Instance that does not decode as kudo.dev/v1beta1 gets `Ready=False` reason
    /// [`INVALID_INSTANCE`] (and one Warning Event per change of that message), written from its
    /// raw JSON; nothing else is done with it until it is fixed.
    async fn report_invalid_instance(
        &self,
        raw: &DynamicObject,
        msg: &str,
    ) -> Result<Action, ReconcileError> {
        warn!("{msg}");
        let old: Vec<Condition> = raw
            .data
            .pointer("/status/conditions")
            .and_then(|c| serde_json::from_value(c.clone()).ok())
            .unwrap_or_default();
        let mut new = old.clone();
        set_condition(
            &mut new,
            Condition {
                type_: kudo_engine::readiness::READY.into(),
                status: "False".into(),
                observed_generation: raw.metadata.generation,
                last_transition_time: now().to_string(),
                reason: INVALID_INSTANCE.into(),
                message: msg.to_string(),
            },
        );
        if new != old {
            let body = json!({"status": {"conditions": new}});
            let updated = self
                .api
                .patch_status(&self.name, &self.patch_params(), &Patch::Merge(&body))
                .await?;
            self.ctx
                .caches
                .saw_instance(&self.ns, &self.name, updated.metadata.resource_version.as_deref());
            self.event(raw, EventType::Warning, INVALID_INSTANCE, "Reconcile", msg)
                .await;
        }
        // A fix is a spec change, which the Instance watch delivers.
        Ok(Action::await_change())
    }

    async fn write_status(
        &self,
        old: &InstanceStatus,
        new: &InstanceStatus,
    ) -> Result<Option<String>, ReconcileError> {
        if old == new {
            return Ok(None);
        }
        let body = json!({
            "status": {
                "planStatus": plan_status_patch(new),
                "conditions": serde_json::to_value(&new.conditions).unwrap_or(Value::Null),
            }
        });
        let updated = self
            .api
            .patch_status(&self.name, &self.patch_params(), &Patch::Merge(&body))
            .await?;
        self.ctx
            .caches
            .saw_instance(&self.ns, &self.name, updated.metadata.resource_version.as_deref());
        Ok(updated.metadata.resource_version)
    }

    /// Writes spec and metadata changes with one merge patch guarded by the resourceVersion, so a
    /// concurrent user edit is never overwritten (the conflict is retried with fresh data).
    async fn write_spec(
        &self,
        inst: &Instance,
        spec: &InstanceSpec,
        finalizers: &[String],
        remember: Option<&InstanceSpec>,
        extra_annotations: &BTreeMap<&str, Option<String>>,
        resource_version: Option<String>,
    ) -> Result<Option<DynamicObject>, ReconcileError> {
        let mut patch = serde_json::Map::new();
        let mut meta = serde_json::Map::new();
        let mut annotations = serde_json::Map::new();

        let mut spec_patch = serde_json::Map::new();
        if spec.plan_execution != inst.spec.plan_execution {
            let pe = if spec.plan_execution == PlanExecution::default() {
                Value::Null
            } else {
                serde_json::to_value(&spec.plan_execution).unwrap_or(Value::Null)
            };
            spec_patch.insert("planExecution".into(), pe);
        }
        if spec.parameters != inst.spec.parameters {
            let mut params = serde_json::Map::new();
            for (k, v) in &spec.parameters {
                if inst.spec.parameters.get(k) != Some(v) {
                    params.insert(k.clone(), json!(v));
                }
            }
            for k in inst.spec.parameters.keys() {
                if !spec.parameters.contains_key(k) {
                    params.insert(k.clone(), Value::Null);
                }
            }
            spec_patch.insert("parameters".into(), Value::Object(params));
        }
        if !spec_patch.is_empty() {
            patch.insert("spec".into(), Value::Object(spec_patch));
        }
        if finalizers != inst.metadata.finalizers.as_slice() {
            meta.insert("finalizers".into(), json!(finalizers));
        }
        let cur = |k: &str| inst.metadata.annotations.get(k).map(String::as_str);
        if let Some(r) = remember {
            let text = serde_json::to_string(r).unwrap_or_default();
            let same = cur(ADMITTED_SPEC_ANNOTATION)
                .and_then(|s| serde_json::from_str::<InstanceSpec>(s).ok())
                .is_some_and(|s| &s == r);
            if !same {
                annotations.insert(ADMITTED_SPEC_ANNOTATION.into(), json!(text));
            }
        }
        for (k, v) in extra_annotations {
            if cur(k) != v.as_deref() {
                annotations.insert(k.to_string(), v.as_ref().map_or(Value::Null, |t| json!(t)));
            }
        }
        if !annotations.is_empty() {
            meta.insert("annotations".into(), Value::Object(annotations));
        }
        if patch.is_empty() && meta.is_empty() {
            return Ok(None);
        }
        if let Some(rv) = resource_version {
            meta.insert("resourceVersion".into(), json!(rv));
        }
        patch.insert("metadata".into(), Value::Object(meta));
        let body = Value::Object(patch);
        debug!(patch = %body, "writing instance spec/metadata");
        let updated = self
            .api
            .patch(&self.name, &self.patch_params(), &Patch::Merge(&body))
            .await?;
        self.ctx
            .caches
            .saw_instance(&self.ns, &self.name, updated.metadata.resource_version.as_deref());
        Ok(Some(updated))
    }
}

fn resource_version(raw: &DynamicObject) -> Option<String> {
    raw.metadata.resource_version.clone()
}

/// The most recently updated of deploy/update/upgrade when its last run ended in FATAL_ERROR.
fn last_failed_lifecycle_plan(status: &InstanceStatus) -> Option<String> {
    let latest = ["deploy", "update", "upgrade"]
        .iter()
        .filter_map(|p| status.plan_status.get(*p))
        .filter(|ps| ps.status != ExecutionStatus::NeverRun)
        .max_by_key(|ps| {
            ps.last_updated_timestamp
                .as_deref()
                .and_then(|t| Timestamp::parse(t).ok())
                .map_or(i64::MIN, |t| t.unix())
        })?;
    (latest.status == ExecutionStatus::FatalError).then(|| latest.name.clone())
}

/// The cluster-scoped objects recorded on the Instance (see [`CLUSTER_OBJECTS_ANNOTATION`]).
fn stored_cluster_objects(inst: &Instance) -> BTreeSet<(String, String, String)> {
    inst.metadata
        .annotations
        .get(CLUSTER_OBJECTS_ANNOTATION)
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
}

/// The `status.planStatus` of a merge patch. A plan status is an object, so a merge patch keeps
/// every key it does not mention: an empty message (serialized as absent) is sent as `null`, or
/// the previous run's message would stay on the server (issue 14, bug 2). Phases are a list and
/// are replaced whole.
fn plan_status_patch(new: &InstanceStatus) -> Value {
    let mut out = serde_json::Map::new();
    for (name, ps) in &new.plan_status {
        let mut v = serde_json::to_value(ps).unwrap_or(Value::Null);
        if ps.message.is_empty()
            && let Some(obj) = v.as_object_mut()
        {
            obj.insert("message".into(), Value::Null);
        }
        out.insert(name.clone(), v);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ps(name: &str, status: ExecutionStatus, at: &str) -> PlanStatus {
        PlanStatus {
            name: name.into(),
            status,
            last_updated_timestamp: Some(at.into()),
            ..PlanStatus::default()
        }
    }

    /// Issue 14, bug 2: a merge patch keeps keys it does not mention, so a cleared plan message
    /// must be sent as null.
    #[test]
    fn a_cleared_plan_message_is_patched_as_null() {
        let mut st = InstanceStatus::default();
        st.plan_status.insert(
            "deploy".into(),
            ps("deploy", ExecutionStatus::InProgress, "2026-01-01T00:00:00Z"),
        );
        let mut failed = ps("backup", ExecutionStatus::FatalError, "2026-01-01T00:00:00Z");
        failed.message = "broken".into();
        st.plan_status.insert("backup".into(), failed);
        let patch = plan_status_patch(&st);
        assert_eq!(patch["deploy"]["message"], Value::Null);
        assert!(patch["deploy"].as_object().unwrap().contains_key("message"));
        assert_eq!(patch["backup"]["message"], "broken");
        assert_eq!(patch["deploy"]["status"], "IN_PROGRESS");
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

    #[test]
    fn cluster_objects_annotation_round_trips() {
        let mut inst: Instance = serde_json::from_value(json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
            "metadata": {"name": "i"}, "spec": {}
        }))
        .unwrap();
        assert!(stored_cluster_objects(&inst).is_empty());
        let set = BTreeSet::from([(
            "rbac.authorization.k8s.io/v1".to_string(),
            "ClusterRole".to_string(),
            "r".to_string(),
        )]);
        inst.metadata.annotations.insert(
            CLUSTER_OBJECTS_ANNOTATION.into(),
            serde_json::to_string(&set).unwrap(),
        );
        assert_eq!(stored_cluster_objects(&inst), set);
        inst.metadata
            .annotations
            .insert(CLUSTER_OBJECTS_ANNOTATION.into(), "not json".into());
        assert!(stored_cluster_objects(&inst).is_empty());
    }
}

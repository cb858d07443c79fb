//! One reconcile of an Instance: admission of spec changes (KUDO's webhook rules, run here), plan
//! status bookkeeping, one execution pass, then persisting status, spec and Events.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kudo_api::{
    CLEANUP_FINALIZER, Condition, ExecutionStatus, Instance, InstanceSpec, InstanceStatus, OperatorVersion,
    PlanExecution, PlanStatus, TaskKind,
};
use kudo_engine::initiate::Initiation;
use kudo_engine::readiness::CHANGE_DENIED;
use kudo_engine::reconcile::Admitted;
use kudo_engine::retry;
use kudo_engine::rollback::RollbackMark;
use kudo_engine::{
    EventType, PlanPass, TIMING_ANNOTATION, TaskOutcome, Timestamp, Timing, Wake,
    cleanup_finalizer_removable, ensure_plan_statuses, mark_plan_fatal, mirror_run_status, needs_reset,
    not_ready_condition, pass_requeue_secs, plan_condition, ready_condition, record_admission, reset_for_run,
    set_condition,
};
use kudo_package::render::RenderContext;
use serde_json::{Value, json};
use tracing::{Instrument, debug, info, info_span, warn};

mod initiate;

use crate::autopilot;
use crate::drift;
use crate::execute::{self, reasons};
use crate::param_sources;
use crate::translate::API_VERSION_TRANSLATED;
use crate::{
    ADMITTED_SPEC_ANNOTATION, CLUSTER_OBJECTS_ANNOTATION, CLUSTER_OBJECTS_FINALIZER, Context,
    RETRY_ANNOTATION, instance_resource, operator_version_resource,
};

/// Condition (policy `report`) listing managed objects changed outside a plan.
pub const DRIFTED: &str = "Drifted";
/// Event reason: drifted objects were applied again.
pub const DRIFT_REPAIRED: &str = "DriftRepaired";
/// Event reason: drifted objects were found and left alone (policy `report`).
pub const DRIFT_DETECTED: &str = "DriftDetected";

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
    api: Api<DynamicObject>,
    /// Cluster-scoped objects applied by this reconcile's pass.
    cluster: execute::ClusterObjects,
}

/// What a reconcile read before deciding anything ([`Reconciler::read`]).
struct Read {
    raw: DynamicObject,
    inst: Instance,
    ov: Arc<OperatorVersion>,
    uid: String,
    /// `namespace/name`, for messages.
    who: String,
    deleting: bool,
}

/// What a reconcile writes back after its pass, besides the status.
struct Writes {
    spec: InstanceSpec,
    finalizers: Vec<String>,
    /// Spec the admitted-spec annotation should hold.
    remember: Option<InstanceSpec>,
    /// The timing annotation.
    timing: Option<String>,
    /// The status as read, to diff against.
    old_status: InstanceStatus,
}

impl Writes {
    /// Starts from what the Instance holds now.
    fn new(inst: &Instance, remember: Option<InstanceSpec>, old_status: InstanceStatus) -> Writes {
        Writes {
            spec: inst.spec.clone(),
            finalizers: inst.metadata.finalizers.clone(),
            remember,
            timing: inst.metadata.annotations.get(TIMING_ANNOTATION).cloned(),
            old_status,
        }
    }
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
        let ev = crate::events::Event {
            type_,
            reason,
            action,
            note: &note,
            related: related.as_ref(),
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

    /// The OperatorVersion an Instance spec references, decoded. A cached copy is decoded once
    /// per resourceVersion (see [`crate::cache::Caches::decoded_operator_version`]); a cache miss
    /// reads and decodes the server's copy.
    async fn get_ov(
        &self,
        inst: &Instance,
        spec: &InstanceSpec,
    ) -> Result<Option<Arc<OperatorVersion>>, ReconcileError> {
        let ov_ns = spec.operator_version_namespace(inst.metadata.namespace.as_deref().unwrap_or(""));
        let name = &spec.operator_version.name;
        // Path-aware decoding, so a field of the wrong shape is named in the Instance's status.
        let decode_ov = |raw: &DynamicObject| -> Result<OperatorVersion, ReconcileError> {
            let v = serde_json::to_value(raw).map_err(|e| ReconcileError::Decode(name.clone(), e))?;
            decode(v).map_err(|e| ReconcileError::Decode(name.clone(), e))
        };
        // From the cache; a miss (e.g. an OperatorVersion created a moment ago) asks the server.
        if let Some(ov) = self.ctx.caches.decoded_operator_version(ov_ns, name, decode_ov) {
            return ov.map(Some);
        }
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.ctx.client.clone(), ov_ns, &operator_version_resource());
        match api.get_opt(name).await? {
            Some(raw) => Ok(Some(Arc::new(decode_ov(&raw)?))),
            None => Ok(None),
        }
    }

    /// The Instance as of our newest knowledge: the cached copy when it is the version this
    /// manager last wrote or read (see [`crate::cache`]), else a GET. `None`: it is gone.
    async fn current(&self) -> Result<Option<DynamicObject>, ReconcileError> {
        match self.ctx.caches.instance(&self.ns, &self.name) {
            Ok(cached) => Ok(cached),
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

    /// Reads the Instance and its OperatorVersion. `Break` ends the reconcile with that action:
    /// the Instance is gone or unreadable, deleted without a cleanup finalizer, or its
    /// OperatorVersion is missing.
    async fn read(
        &self,
        me: &kube::runtime::reflector::ObjectRef<DynamicObject>,
    ) -> Result<ControlFlow<Action, Read>, ReconcileError> {
        let Some(raw) = self.current().await? else {
            self.ctx.autopilot.forget(me);
            return Ok(ControlFlow::Break(Action::await_change()));
        };
        self.establish_identity(&raw).await;
        let who = format!("{}/{}", self.ns, self.name);
        let inst = match self.read_instance(&raw, &who).await? {
            ControlFlow::Continue(inst) => inst,
            ControlFlow::Break(action) => return Ok(ControlFlow::Break(action)),
        };
        let uid = raw
            .metadata
            .uid
            .clone()
            .ok_or_else(|| ReconcileError::NoUid(who.clone()))?;
        let deleting = raw.metadata.deletion_timestamp.is_some();
        let has_finalizer = inst.metadata.finalizers.iter().any(|f| f == CLEANUP_FINALIZER);
        if deleting && !has_finalizer {
            return self
                .delete_without_cleanup(&raw, &inst)
                .await
                .map(ControlFlow::Break);
        }
        if deleting && self.released_without_account(&raw, &inst, &who).await? {
            return Ok(ControlFlow::Break(Action::await_change()));
        }
        let ov = match self.read_operator_version(&raw, &inst, &who).await? {
            ControlFlow::Continue(ov) => ov,
            ControlFlow::Break(action) => return Ok(ControlFlow::Break(action)),
        };
        Ok(ControlFlow::Continue(Read {
            raw,
            inst,
            ov,
            uid,
            who,
            deleting,
        }))
    }

    /// An Instance deleted with its namespace after its ServiceAccount went first: its cleanup
    /// plan cannot run as that account, and holding the finalizer would keep the namespace
    /// terminating forever, so it is released with a Warning (as for a lost OperatorVersion).
    async fn released_without_account(
        &self,
        raw: &DynamicObject,
        inst: &Instance,
        who: &str,
    ) -> Result<bool, ReconcileError> {
        let Some(missing) = crate::impersonation::current().and_then(|a| a.missing) else {
            return Ok(false);
        };
        if !drift::namespace_terminating(self.ctx, &self.ns).await {
            return Ok(false);
        }
        self.release_uncleanable(raw, inst, who, reasons::SERVICE_ACCOUNT_NOT_FOUND, &missing)
            .await?;
        Ok(true)
    }

    /// Releases the cleanup finalizer of an Instance whose cleanup plan cannot run (`why`), with
    /// a Warning: holding it would keep the Instance, and its terminating namespace, forever.
    async fn release_uncleanable(
        &self,
        raw: &DynamicObject,
        inst: &Instance,
        who: &str,
        reason: &str,
        why: &str,
    ) -> Result<(), ReconcileError> {
        let msg = format!("the cleanup plan of instance {who} cannot run: {why}; releasing the instance");
        warn!("{msg}");
        self.event(raw, EventType::Warning, reason, "Cleanup", &msg).await;
        self.release_finalizer(raw, inst, CLEANUP_FINALIZER).await
    }

    /// From here on, requests for this Instance are made as its ServiceAccount (see
    /// [`crate::impersonation`]).
    async fn establish_identity(&self, raw: &DynamicObject) {
        let spec_account = raw.data["spec"]["serviceAccountName"].as_str().unwrap_or("");
        let default = self.ctx.config.default_service_account.as_deref();
        let acting = self.ctx.identities.acting(&self.ns, spec_account, default).await;
        crate::impersonation::establish(acting);
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
            mut ov,
            uid,
            who,
            deleting,
        } = read;
        let (auto, fired, admitted, mut sourced, scheduled) =
            (init.auto, init.fired, init.admitted, init.sourced, init.scheduled);
        let (raw, inst) = self.persist_admission(raw, inst, &admitted, &who).await?;
        if let (Some(by), Some(exec)) = (&admitted.started, &admitted.exec) {
            let run = crate::revisions::Run {
                inst: &inst,
                uid: &uid,
                spec: exec,
                ov: &ov,
            };
            crate::revisions::record(self.ctx, &run, by.clone(), now).await;
        }
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

        let annotations = inst.metadata.annotations.clone();
        let Some(exec) = exec else {
            // A creation KUDO would have rejected: nothing runs until the spec is fixed.
            self.write_status(&old_status, &status).await?;
            let requeue = self.ctx.config.idle_resync;
            return Ok(Action::requeue(auto_requeue.map_or(requeue, |r| r.min(requeue))));
        };
        // A denied upgrade keeps executing against the previously admitted OperatorVersion
        // (the sourced values are validated against the OperatorVersion that runs).
        if exec.operator_version != inst.spec.operator_version {
            let exec_ov = self.get_ov(&inst, &exec).await?.unwrap_or(ov);
            sourced = self.resolve_sources(&exec_ov, Some(&exec)).await;
            ov = exec_ov;
        }
        let mut writes = Writes::new(&inst, remember, old_status);
        let input = PassInput {
            raw: &raw,
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
        let run = &exec.plan_execution;
        let ended = kudo_engine::revision::ended(&writes.old_status, &status, &run.plan_name, &run.uid);
        self.persist_run(&raw, &inst, &ov, deleting, writes, &status)
            .await?;
        if let Some(outcome) = ended {
            crate::revisions::finish(self.ctx, &inst, &run.uid, outcome, now).await;
        }
        Ok(Action::requeue(requeue))
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

    /// An Instance being deleted that no cleanup finalizer holds: the cluster-scoped objects it
    /// recorded are released; otherwise nothing of ours holds it and the garbage collector
    /// removes its objects.
    async fn delete_without_cleanup(
        &self,
        raw: &DynamicObject,
        inst: &Instance,
    ) -> Result<Action, ReconcileError> {
        if inst
            .metadata
            .finalizers
            .iter()
            .any(|f| f == CLUSTER_OBJECTS_FINALIZER)
        {
            return self.release_cluster_objects(raw, inst).await;
        }
        Ok(Action::await_change())
    }

    /// The idle step, or one pass of the scheduled plan whose outcome is mirrored into the spec
    /// to write; returns the pass's requeue delay.
    async fn idle_or_pass(
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

    /// Persists admission results (a newly scheduled run's uid, defaults, finalizer) before
    /// executing anything, so the run is durable even if a later write fails. Returns the
    /// Instance as stored.
    async fn persist_admission(
        &self,
        raw: DynamicObject,
        inst: Instance,
        admitted: &Admitted,
        who: &str,
    ) -> Result<(DynamicObject, Instance), ReconcileError> {
        let written = self
            .write_spec(
                &inst,
                &admitted.spec,
                &admitted.finalizers,
                admitted.remember.as_ref(),
                &admitted.annotations,
                resource_version(&raw),
            )
            .await?;
        Ok(match written {
            Some(updated) => {
                let i = decode_instance(&updated, who)?;
                (updated, i)
            }
            None => (raw, inst),
        })
    }

    /// The `ChangeAccepted` condition of this reconcile's admission, and an Event for a denial.
    async fn record_denial(
        &self,
        raw: &DynamicObject,
        status: &mut InstanceStatus,
        denial: Option<&str>,
        generation: Option<i64>,
        now: Timestamp,
    ) {
        record_admission(&mut status.conditions, denial, generation, now);
        if let Some(msg) = denial {
            warn!(denied = %msg, "spec change not admitted");
            self.event(raw, EventType::Warning, CHANGE_DENIED, "Admission", msg)
                .await;
        }
    }

    /// Writes what the pass decided: the cleanup finalizer goes once cleanup COMPLETED (or
    /// there is no cleanup plan), cluster-scoped objects the pass applied are recorded for
    /// uninstall, then status and spec are written (status first: a crash before the spec write
    /// re-runs a terminal pass, which is a no-op).
    async fn persist_run(
        &self,
        raw: &DynamicObject,
        inst: &Instance,
        ov: &OperatorVersion,
        deleting: bool,
        mut writes: Writes,
        status: &InstanceStatus,
    ) -> Result<(), ReconcileError> {
        if deleting {
            let mut probe = inst.clone();
            probe.status = Some(status.clone());
            if cleanup_finalizer_removable(&probe, ov) {
                info!("cleanup finished, removing finalizer");
                writes.finalizers.retain(|f| f != CLEANUP_FINALIZER);
            }
        }
        let mut extra = BTreeMap::from([(TIMING_ANNOTATION, writes.timing)]);
        if inst
            .metadata
            .annotations
            .get(RETRY_ANNOTATION)
            .is_some_and(|a| retry::is_spent(a, status))
        {
            extra.insert(RETRY_ANNOTATION, None);
        }
        let applied = self.cluster.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(annotation) = record_cluster_objects(inst, &applied, deleting, &mut writes.finalizers) {
            extra.insert(CLUSTER_OBJECTS_ANNOTATION, Some(annotation));
        }
        let rv = self
            .write_status(&writes.old_status, status)
            .await?
            .or_else(|| resource_version(raw));
        self.write_spec(
            inst,
            &writes.spec,
            &writes.finalizers,
            writes.remember.as_ref(),
            &extra,
            rv,
        )
        .await?;
        Ok(())
    }

    /// The Instance as kudo.dev/v1beta1, or (Break) what to do when it does not decode: a field
    /// the CRD schema admits but the type does not (e.g. an unknown planExecution.status) is said
    /// on the Instance instead of failing every retry silently.
    async fn read_instance(
        &self,
        raw: &DynamicObject,
        who: &str,
    ) -> Result<ControlFlow<Action, Instance>, ReconcileError> {
        match decode_instance(raw, who) {
            Ok(inst) => Ok(ControlFlow::Continue(inst)),
            Err(ReconcileError::Decode(_, e)) => {
                let msg = format!("instance {who} cannot be read: {e}; fix its spec");
                Ok(ControlFlow::Break(self.report_invalid_instance(raw, &msg).await?))
            }
            Err(e) => Err(e),
        }
    }

    /// The Instance's OperatorVersion, or (Break) what to do when it is missing or does not decode.
    async fn read_operator_version(
        &self,
        raw: &DynamicObject,
        inst: &Instance,
        who: &str,
    ) -> Result<ControlFlow<Action, Arc<OperatorVersion>>, ReconcileError> {
        let action = match self.get_ov(inst, &inst.spec).await {
            Ok(Some(ov)) => return Ok(ControlFlow::Continue(ov)),
            Ok(None) => self.operator_version_unusable(raw, inst, who, None).await?,
            Err(ReconcileError::Decode(_, e)) => {
                self.operator_version_unusable(raw, inst, who, Some(&e)).await?
            }
            Err(e) => return Err(e),
        };
        Ok(ControlFlow::Break(action))
    }

    /// The Instance's OperatorVersion cannot be used: it does not exist (KUDO's webhook refused
    /// such an Instance; stored anyway, reason `OperatorVersionNotFound`) or it has fields of the
    /// wrong shape where the CRD schema is free-form (plans, task specs; reason
    /// [`INVALID_OPERATOR_VERSION`]). The Instance says why in its status (Ready=False) and in a
    /// Warning Event when that changes; others are not affected. Looked at again when
    /// OperatorVersions change (watched) or after the error delay.
    async fn operator_version_unusable(
        &self,
        raw: &DynamicObject,
        inst: &Instance,
        who: &str,
        decode_error: Option<&serde_json::Error>,
    ) -> Result<Action, ReconcileError> {
        let (reason, problem) = match decode_error {
            None => {
                if drift::namespace_terminating(self.ctx, &self.ns).await {
                    // The namespace deletion removed the OperatorVersion; the Instance goes next.
                    debug!(instance = %who, "namespace is being deleted: OperatorVersion gone");
                    if raw.metadata.deletion_timestamp.is_some()
                        && inst.metadata.finalizers.iter().any(|f| f == CLEANUP_FINALIZER)
                    {
                        // Its cleanup plan cannot run without the OperatorVersion.
                        let why = "its OperatorVersion was deleted with the namespace";
                        self.release_uncleanable(raw, inst, who, INVALID_OPERATOR_VERSION, why)
                            .await?;
                    }
                    return Ok(Action::await_change());
                }
                ("OperatorVersionNotFound", "does not exist".to_string())
            }
            Some(e) => (INVALID_OPERATOR_VERSION, format!("cannot be read: {e}")),
        };
        let msg = format!(
            "OperatorVersion {}/{} of instance {who} {problem}",
            inst.spec.operator_version_namespace(&self.ns),
            inst.spec.operator_version.name
        );
        warn!("{msg}");
        if self.set_not_ready(inst, reason, &msg).await? {
            self.event(
                raw,
                EventType::Warning,
                INVALID_OPERATOR_VERSION,
                "Reconcile",
                &msg,
            )
            .await;
        }
        Ok(Action::requeue(self.ctx.config.error_requeue))
    }

    /// Sets `Ready=False` with `reason` and `msg` on the Instance's status; true when the status
    /// changed (written).
    async fn set_not_ready(&self, inst: &Instance, reason: &str, msg: &str) -> Result<bool, ReconcileError> {
        let old = inst.status.clone().unwrap_or_default();
        let mut new = old.clone();
        set_condition(
            &mut new.conditions,
            not_ready_condition(reason, msg.to_string(), now()),
        );
        Ok(self.write_status(&old, &new).await?.is_some())
    }

    /// The idle step: readiness from the live workloads, then the drift check. A failed lifecycle
    /// run keeps the instance's readiness Unknown until the user acts: healthy-looking leftovers
    /// of a half-applied plan do not make it Ready (KUDO reported them as ready once the failed
    /// plan was unscheduled).
    async fn idle(
        &self,
        input: &PassInput<'_>,
        status: &mut InstanceStatus,
        deleting: bool,
    ) -> Result<(), ReconcileError> {
        let now = input.now;
        let mut cond = match last_failed_lifecycle_plan(status) {
            Some(plan) => plan_condition(&plan, ExecutionStatus::FatalError, now)
                .unwrap_or_else(|| ready_condition(&[], now)),
            None => ready_condition(&self.workloads().await?, now),
        };
        cond.observed_generation = input.generation;
        set_condition(&mut status.conditions, cond);
        if !deleting && last_failed_lifecycle_plan(status).is_none() {
            self.drift(input, status).await;
        }
        Ok(())
    }

    /// Uninstall of an Instance whose plans created cluster-scoped objects: delete them, then
    /// release the Instance (namespaced objects are left to the garbage collector).
    async fn release_cluster_objects(
        &self,
        raw: &DynamicObject,
        inst: &Instance,
    ) -> Result<Action, ReconcileError> {
        let mut pending = Vec::new();
        for execute::ClusterObject {
            api_version,
            kind,
            name,
        } in stored_cluster_objects(inst)
        {
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
        self.release_finalizer(raw, inst, CLUSTER_OBJECTS_FINALIZER)
            .await?;
        Ok(Action::await_change())
    }

    /// Removes one of our finalizers from the Instance, keeping its spec (optimistic: the
    /// resourceVersion read).
    async fn release_finalizer(
        &self,
        raw: &DynamicObject,
        inst: &Instance,
        finalizer: &str,
    ) -> Result<(), ReconcileError> {
        let finalizers: Vec<String> = inst
            .metadata
            .finalizers
            .iter()
            .filter(|f| *f != finalizer)
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
        Ok(())
    }

    /// Reads `spec.parameterSources` of the spec to execute (none: no read).
    async fn resolve_sources(
        &self,
        ov: &OperatorVersion,
        exec: Option<&InstanceSpec>,
    ) -> param_sources::Sourced {
        match exec {
            Some(e) if !e.parameter_sources.is_empty() => {
                param_sources::resolve(self.ctx, &self.ns, ov, &e.parameter_sources).await
            }
            _ => Ok(param_sources::SourcedValues::new()),
        }
    }

    /// One execution pass of the scheduled plan. Returns the plan's status after the pass, the
    /// requeue delay (None when the plan is terminal) and the timing annotation to store.
    async fn execute(&self, input: &PassInput<'_>, status: &mut InstanceStatus) -> PassResult {
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
    fn without_pass(&self, input: &PassInput<'_>, status: &mut InstanceStatus, ps: PlanStatus) -> PassResult {
        let plan = input.exec.plan_execution.plan_name.as_str();
        let st = ps.status;
        status.plan_status.insert(plan.to_string(), ps);
        self.plan_ready(status, plan, st, input.now, input.generation);
        (st, None, None)
    }

    /// Renders the scheduled plan, announcing each translation of a removed API version once per
    /// plan run with an Event.
    async fn render(&self, input: &PassInput<'_>) -> Result<execute::Rendered, execute::PlanRenderError> {
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
        };
        let mut rendered = execute::render(self.ctx, input.ov, plan, rctx, input.sourced).await?;
        if let Ok(values) = input.sourced {
            rendered.source_child_parameters(&input.exec.parameter_sources, values);
        }
        for t in rendered.translations() {
            if self.ctx.translations.first(plan_uid, t) {
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
    async fn run_pass(
        &self,
        input: &PassInput<'_>,
        status: &mut InstanceStatus,
        mut ps: PlanStatus,
        rendered: execute::Rendered,
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
        (st, requeue, summary.timing.to_annotation())
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
        mut rendered: execute::Rendered,
        params: &BTreeMap<String, String>,
    ) -> bool {
        let mut polled = false;
        while let Some(call) = pass.next_task() {
            let outcome = execute::run_task(self.ctx, &call, input.ov, &rendered, params, &self.cluster)
                .instrument(info_span!(
                    "task",
                    phase = call.phase,
                    step = call.step,
                    task = call.task_name
                ))
                .await;
            self.ctx.metrics.task_outcome(&outcome);
            polled |=
                !execute::wait_ends_on_watch(self.ctx, &call, &rendered, &outcome, &self.ns, &self.name);
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

    /// Drift check of an idle Instance (see [`crate::drift`]): Events and the `Drifted`
    /// condition. Failures are logged and retried at the next idle reconcile.
    async fn drift(&self, input: &PassInput<'_>, status: &mut InstanceStatus) {
        let PassInput {
            raw,
            ov,
            exec,
            instance_uid,
            annotations,
            now,
            generation,
            sourced,
        } = *input;
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
            rollback: None,
        };
        let rep = drift::check(self.ctx, ov, &base, sourced, status, policy, &self.cluster).await;
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
            ("apps", "Deployment"),
            ("apps", "StatefulSet"),
            ("apps", "ReplicaSet"),
            ("apps", "DaemonSet"),
            ("", "Pod"),
        ];
        let mut out = Vec::new();
        for (g, k) in kinds {
            let ar = crate::known_resource(g, k);
            // From the watch cache; a LIST only while that cache is not synced.
            if let Some(cached) =
                self.ctx
                    .caches
                    .children_of_instance(&ar.api_version, k, &self.ns, &self.name)
            {
                out.extend(cached);
                continue;
            }
            let api: Api<DynamicObject> = Api::namespaced_with(self.ctx.acting_client(), &self.ns, &ar);
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
        let mut ready = not_ready_condition(INVALID_INSTANCE, msg.to_string(), now());
        ready.observed_generation = raw.metadata.generation;
        set_condition(&mut new, ready);
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

    /// Merge-patches the status subresource when it changed; returns the new resourceVersion.
    async fn write_status(
        &self,
        old: &InstanceStatus,
        new: &InstanceStatus,
    ) -> Result<Option<String>, ReconcileError> {
        if old == new {
            return Ok(None);
        }
        let mut body = json!({
            "status": {
                "planStatus": plan_status_patch(new),
                "conditions": serde_json::to_value(&new.conditions).unwrap_or(Value::Null),
                "schedules": schedules_patch(old, new),
            }
        });
        if old.autopilot != new.autopilot {
            body["status"]["autopilot"] = autopilot::status_patch(&old.autopilot, &new.autopilot);
        }
        debug!(patch = %body, "writing instance status");
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

/// Initialises the status of the run `plan_uid` when it is new: `plan retry` (the retry annotation
/// names exactly the FATAL_ERROR run being replaced) keeps its COMPLETE steps, any other new run
/// restarts the plan (KUDO). Decided from the Instance alone, so a restarted manager decides the
/// same. Returns the failed run a retry replaces.
fn start_run(
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

/// What one pass over an Instance works from, shared by plan execution and the idle step
/// (readiness, drift repair).
#[derive(Clone, Copy)]
struct PassInput<'a> {
    raw: &'a DynamicObject,
    /// The OperatorVersion the admitted spec runs.
    ov: &'a OperatorVersion,
    /// The admitted spec being executed.
    exec: &'a InstanceSpec,
    instance_uid: &'a str,
    annotations: &'a BTreeMap<String, String>,
    now: Timestamp,
    generation: Option<i64>,
    /// `spec.parameterSources` resolved once for this reconcile.
    sourced: &'a param_sources::Sourced,
}

/// A pass's outcome: the plan's status, the requeue delay (`None` when terminal) and the timing
/// annotation to store.
type PassResult = (ExecutionStatus, Option<Duration>, Option<String>);

fn decode_instance(raw: &DynamicObject, who: &str) -> Result<Instance, ReconcileError> {
    let v = serde_json::to_value(raw).map_err(|e| ReconcileError::Decode(who.to_string(), e))?;
    decode(v).map_err(|e| ReconcileError::Decode(who.to_string(), e))
}

/// Adds the cluster-scoped objects a pass applied to those recorded on the Instance: returns the
/// new annotation value when the set grew, and adds the finalizer that releases them on uninstall
/// (Kubernetes forbids adding finalizers to an Instance being deleted).
fn record_cluster_objects(
    inst: &Instance,
    applied: &BTreeSet<execute::ClusterObject>,
    deleting: bool,
    finalizers: &mut Vec<String>,
) -> Option<String> {
    let stored = stored_cluster_objects(inst);
    let mut recorded = stored.clone();
    recorded.extend(applied.iter().cloned());
    if !recorded.is_empty() && !deleting && !finalizers.iter().any(|f| f == CLUSTER_OBJECTS_FINALIZER) {
        finalizers.push(CLUSTER_OBJECTS_FINALIZER.to_string());
    }
    (recorded != stored).then(|| serde_json::to_string(&recorded).unwrap_or_default())
}

/// The cluster-scoped objects recorded on the Instance (see [`CLUSTER_OBJECTS_ANNOTATION`]).
fn stored_cluster_objects(inst: &Instance) -> BTreeSet<execute::ClusterObject> {
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

/// The merge patch of `status.schedules`: entries of plans no longer scheduled are removed.
fn schedules_patch(old: &InstanceStatus, new: &InstanceStatus) -> Value {
    let mut out = serde_json::Map::new();
    for (name, st) in &new.schedules {
        out.insert(name.clone(), serde_json::to_value(st).unwrap_or(Value::Null));
    }
    for name in old.schedules.keys() {
        if !new.schedules.contains_key(name) {
            out.insert(name.clone(), Value::Null);
        }
    }
    Value::Object(out)
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
        let set = BTreeSet::from([execute::ClusterObject {
            api_version: "rbac.authorization.k8s.io/v1".to_string(),
            kind: "ClusterRole".to_string(),
            name: "r".to_string(),
        }]);
        assert_eq!(
            serde_json::to_string(&set).unwrap(),
            r#"[["rbac.authorization.k8s.io/v1","ClusterRole","r"]]"#
        );
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

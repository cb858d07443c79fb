//! One reconcile of an Instance, observe → decide → effect: read the Instance and its
//! OperatorVersion ([`observe`]), let the engine's initiators admit what runs, reading what they
//! ask for ([`initiate`]), store the admission ([`persist`]), execute the effects the engine
//! returned ([`effects`]), run the step the engine chose — a plan pass ([`pass`]) or the idle
//! step ([`idle`]) — and write what [`kudo_engine::reconcile::settle`] decided. Nothing here
//! decides what KUDO would do: every decision is a `kudo_engine` function.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kudo_api::{Instance, InstanceSpec, InstanceStatus, OperatorVersion};
use kudo_engine::progress::{Activity, conclude};
use kudo_engine::reconcile::{Admitted, Requeue, restore_ended};
use kudo_engine::{TIMING_ANNOTATION, Timestamp};
use tracing::{Instrument, debug, info_span, warn};

mod effects;
mod idle;
mod initiate;
mod observe;
mod pass;
mod persist;
mod publish;
mod recreate;
mod verified;

use crate::apply::ClusterObjects;
use crate::context::Context;
use crate::lean::Lean;
use crate::param_sources::Sourced;
use crate::resources::instance_resource;

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

/// The wall clock as the engine's decisions take it.
pub(crate) fn now() -> Timestamp {
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
    /// Decoded without managedFields ([`crate::lean`]): nothing here reads them.
    api: Api<Lean>,
    /// Cluster-scoped objects applied by this reconcile's pass.
    cluster: ClusterObjects,
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
        let me = ObjectRef::new_with(&self.name, instance_resource()).within(&self.ns);
        let read = match self.read(&me).await? {
            ControlFlow::Continue(r) => r,
            ControlFlow::Break(action) => return Ok(action),
        };
        let now = now();
        let init = self.initiate(&read, &me, now).await?;
        let stored = self
            .store_admission(read, init.admitted, init.sourced, now)
            .await?;
        let mut out = Outcome::new(&stored, now);
        self.execute(&stored.raw, &init.later, &mut out).await;
        let Some(exec) = stored.admitted.exec.clone() else {
            return self.rest_unadmitted(&out, now).await;
        };
        let (ov, sourced) = self.executed_ov(&stored, &exec).await?;
        let annotations = self.annotations(&stored.inst, &exec);
        let input = PassInput {
            raw: &stored.raw,
            stored: &stored.inst,
            ov: &ov,
            exec: &exec,
            instance_uid: &stored.uid,
            annotations: &annotations,
            now,
            generation: stored.raw.metadata.generation,
            sourced: &sourced,
        };
        let mut writes = Writes::new(&stored.inst, stored.admitted.remember.clone(), out.old.clone());
        let requeue = self
            .idle_or_pass(&input, &mut out, stored.deleting, &mut writes)
            .await?;
        self.settle_run(&input, stored.deleting, writes, &out).await?;
        let base = requeue.unwrap_or(self.ctx.config.idle_resync);
        Ok(Action::requeue(out.requeue.or(base)))
    }

    /// A creation KUDO would have rejected: its status says why, and nothing runs until the spec
    /// is fixed.
    async fn rest_unadmitted(&self, out: &Outcome, now: Timestamp) -> Result<Action, ReconcileError> {
        let (old, mut status) = (&out.old, out.status.clone());
        conclude(old, &mut status, &Activity::Idle, out.generation, now);
        self.write_status(old, &status).await?;
        Ok(Action::requeue(out.requeue.or(self.ctx.config.idle_resync)))
    }

    /// The OperatorVersion and sensitive values the executed spec runs with: another
    /// OperatorVersion than the stored spec's when the engine says so
    /// ([`Admitted::other_operator_version`]; the stored one stands in when it is gone).
    async fn executed_ov(
        &self,
        stored: &StoredAdmission,
        exec: &InstanceSpec,
    ) -> Result<(Arc<OperatorVersion>, Sourced), ReconcileError> {
        let Some(other) = stored.admitted.other_operator_version(&stored.inst.spec) else {
            return Ok((stored.ov.clone(), stored.sourced.clone()));
        };
        let exec_ov = self
            .get_ov(&stored.inst, other)
            .await?
            .unwrap_or_else(|| stored.ov.clone());
        let sourced = self.resolve_sources(&exec_ov, Some(exec)).await;
        Ok((exec_ov, sourced))
    }

    /// The Instance's annotations with the plan timing this manager keeps in memory for the run
    /// (see [`crate::timings`]).
    fn annotations(&self, inst: &Instance, exec: &InstanceSpec) -> BTreeMap<String, String> {
        let mut annotations = inst.metadata.annotations.clone();
        let uid = &exec.plan_execution.uid;
        self.ctx
            .memory
            .timings
            .overlay(&self.ns, &self.name, uid, &mut annotations);
        annotations
    }
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

/// A reconcile once its admission is stored ([`Reconciler::store_admission`]).
struct StoredAdmission {
    /// The Instance as stored now, raw and decoded.
    raw: DynamicObject,
    inst: Instance,
    /// The OperatorVersion the stored spec names.
    ov: Arc<OperatorVersion>,
    uid: String,
    deleting: bool,
    admitted: Admitted,
    /// `spec.parameterSources` of the spec to execute, resolved once for the reconcile.
    sourced: Sourced,
}

/// What the executed effects leave for the status write and the requeue.
struct Outcome {
    /// The status as stored, to diff against.
    old: InstanceStatus,
    /// The status this reconcile writes.
    status: InstanceStatus,
    /// The soonest look again the effects asked for.
    requeue: Requeue,
    /// The generation the admission write left, which conditions say they observed.
    generation: Option<i64>,
    /// The pass only started a run whose status stays as stored for now
    /// ([`kudo_engine::reconcile::start_unwritten`]): nothing is concluded on it.
    start_unwritten: bool,
    now: Timestamp,
}

impl Outcome {
    /// Starts from the stored status, with the end of a run whose status write was lost restored
    /// ([`restore_ended`]).
    fn new(stored: &StoredAdmission, now: Timestamp) -> Outcome {
        let old = stored.inst.status.clone().unwrap_or_default();
        let mut status = old.clone();
        let inst = &stored.inst;
        let uid = &inst.spec.plan_execution.uid;
        if restore_ended(&mut status, &inst.metadata.annotations, uid) {
            debug!("restoring the end of a run whose status was not written");
        }
        Outcome {
            status,
            old,
            requeue: Requeue::default(),
            generation: stored.raw.metadata.generation,
            start_unwritten: false,
            now,
        }
    }
}

/// What one pass over an Instance works from, shared by plan execution and the idle step
/// (readiness, drift repair).
#[derive(Clone, Copy)]
struct PassInput<'a> {
    raw: &'a DynamicObject,
    /// The Instance as stored, `raw` decoded: its status is what a status write would change,
    /// its `spec.planExecution` the run a next reconcile would find.
    stored: &'a Instance,
    /// The OperatorVersion the admitted spec runs.
    ov: &'a OperatorVersion,
    /// The admitted spec being executed.
    exec: &'a InstanceSpec,
    instance_uid: &'a str,
    annotations: &'a BTreeMap<String, String>,
    now: Timestamp,
    generation: Option<i64>,
    /// `spec.parameterSources` resolved once for this reconcile.
    sourced: &'a Sourced,
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

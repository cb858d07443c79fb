//! Persist: the writes of a reconcile — the admission before anything executes, then the pass's
//! status and spec (guarded by the resourceVersion), finalizers and the cluster-scoped objects to
//! release on uninstall.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use kudo_api::{Instance, InstanceStatus, OperatorVersion};
use kudo_engine::progress::{Activity, conclude};
use kudo_engine::reconcile::{
    Admitted, CLUSTER_OBJECTS_FINALIZER, Settle, Stored, bumps_generation, spec_patch_along, status_patch,
    stored_cluster_objects,
};
use kudo_engine::{TaskOutcome, Timestamp, reobserve};
use serde_json::{Value, json};
use tracing::{debug, info};

use super::observe::decode_instance;
use super::{Outcome, PassInput, Read, ReconcileError, Reconciler, StoredAdmission, Writes};
use crate::apply;
use crate::param_sources::Sourced;

impl Reconciler<'_> {
    /// An Instance being deleted that no cleanup finalizer holds: the cluster-scoped objects it
    /// recorded are released; otherwise nothing of ours holds it and the garbage collector
    /// removes its objects.
    pub(super) async fn delete_without_cleanup(
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

    /// Stores what the initiators admitted: a new run begins (stored IN_PROGRESS with its plan
    /// start), the admission is persisted before anything executes, and a run it started is
    /// recorded as a revision.
    pub(super) async fn store_admission(
        &self,
        read: Read,
        mut admitted: Admitted,
        sourced: Sourced,
        now: Timestamp,
    ) -> Result<StoredAdmission, ReconcileError> {
        let Read {
            raw,
            inst,
            ov,
            uid,
            who,
            deleting,
        } = read;
        admitted.begin(now);
        let (raw, inst) = self.persist_admission(raw, inst, &admitted, &who).await?;
        self.record_revision(&inst, &uid, &admitted, &ov, now).await;
        Ok(StoredAdmission {
            raw,
            inst,
            ov,
            uid,
            deleting,
            admitted,
            sourced,
        })
    }

    /// Records the run this admission started as a revision (see [`crate::revisions`]); a run
    /// going that was admitted before gets the revision a killed manager may have left unwritten.
    async fn record_revision(
        &self,
        inst: &Instance,
        uid: &str,
        admitted: &Admitted,
        ov: &Arc<OperatorVersion>,
        now: Timestamp,
    ) {
        let Some(exec) = &admitted.exec else { return };
        let run = crate::revisions::Run {
            inst,
            uid,
            spec: exec,
            ov,
        };
        let revisions = &self.ctx.cluster.revisions;
        // Boxed: the reconcile's future is large already, and debug builds run it on test
        // threads' 2 MiB stacks.
        match &admitted.started {
            Some(by) => Box::pin(revisions.record(&run, by.clone(), now)).await,
            None if going(inst, exec) => Box::pin(revisions.resume(&run, now)).await,
            None => {}
        }
    }

    /// Writes what the run's step left (see [`Self::persist_run`]), keeps the plan timing that was
    /// not stored, and records a run that ended on its revision.
    pub(super) async fn settle_run(
        &self,
        input: &PassInput<'_>,
        deleting: bool,
        writes: Writes,
        out: &Outcome,
    ) -> Result<(), ReconcileError> {
        let run = &input.exec.plan_execution;
        let status = &out.status;
        let ended = kudo_engine::revision::ended(&writes.old_status, status, &run.plan_name, &run.uid);
        // The outcome goes on the revision before the status says the run ended: killed in
        // between, the next manager ends the run again and records it again (the same patch);
        // the other way round, a kill there left the revision without its outcome for good.
        if let Some(outcome) = ended {
            let revisions = &self.ctx.cluster.revisions;
            Box::pin(revisions.finish(input.stored, &run.uid, outcome, input.now)).await;
        }
        let timing = self
            .persist_run(input, deleting, writes, out)
            .await?
            .filter(|_| !run.plan_name.is_empty());
        self.ctx
            .memory
            .timings
            .keep(&self.ns, &self.name, timing.as_deref());
        Ok(())
    }

    /// Persists admission results (a newly scheduled run's uid, defaults, finalizer) before
    /// executing anything, so the run is durable even if a later write fails. Returns the
    /// Instance as stored.
    pub(super) async fn persist_admission(
        &self,
        raw: DynamicObject,
        inst: Instance,
        admitted: &Admitted,
        who: &str,
    ) -> Result<(DynamicObject, Instance), ReconcileError> {
        let stored = Stored {
            spec: &admitted.spec,
            finalizers: &admitted.finalizers,
            remember: admitted.remember.as_ref(),
            annotations: &admitted.annotations,
        };
        let written = self
            .write_spec(&inst, &stored, &BTreeMap::new(), resource_version(&raw))
            .await?;
        Ok(match written {
            Some(updated) => {
                crate::failpoint::hit(crate::failpoint::AFTER_ADMISSION_WRITE);
                // The pass below continues from exactly this version: its event is an echo.
                self.echo(&updated);
                let i = decode_instance(&updated, who)?;
                (updated, i)
            }
            None => (raw, inst),
        })
    }

    /// Writes what the pass decided: the cleanup finalizer goes once cleanup COMPLETED (or
    /// there is no cleanup plan), cluster-scoped objects the pass applied are recorded for
    /// uninstall, then status and spec are written in the order [`Self::write_run`] chooses, the
    /// status completed by [`conclude`]. Returns the timing the pass produced when it was not
    /// stored, for the manager to keep in memory (see [`crate::timings`]).
    async fn persist_run(
        &self,
        input: &PassInput<'_>,
        deleting: bool,
        writes: Writes,
        out: &Outcome,
    ) -> Result<Option<String>, ReconcileError> {
        let applied = self.cluster.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let settle = Settle {
            inst: input.stored,
            ov: input.ov,
            status: &out.status,
            deleting,
            timing: writes.timing.clone(),
            applied: &applied,
        };
        let settled = kudo_engine::reconcile::settle(&settle, writes.finalizers.clone());
        if settled.cleanup_released {
            crate::failpoint::hit(crate::failpoint::MID_DELETE);
            info!("cleanup finished, removing finalizer");
        }
        let stored = Stored {
            spec: &writes.spec,
            finalizers: &settled.finalizers,
            remember: writes.remember.as_ref(),
            annotations: &settled.annotations,
        };
        let written = self
            .write_run(input, &stored, &settled.lazy, &writes, out)
            .await?;
        let timing_kept = written.is_none() && !settled.lazy.is_empty();
        Ok(writes.timing.filter(|_| timing_kept))
    }

    /// Writes the status and the spec of a run's reconcile; returns the spec write's answer.
    ///
    /// When the spec write unschedules the run that just ended (it bumps the generation), the spec
    /// goes first, guarded by the resourceVersion read, and the status follows with the generation
    /// that write produced: a status written first would claim a generation the object does not
    /// have yet, and the status names its generation so that kstatus reads the end as Current
    /// without another write. The unscheduling carries the run's end for the case the status
    /// write is lost ([`kudo_engine::reconcile::ENDED_RUN_ANNOTATION`]). Otherwise the status goes
    /// first with the generation read, guarded by its resourceVersion when the spec write bumps
    /// the generation, and the spec write is guarded by the status write's version: a change of
    /// anyone else in between is a conflict and is reconciled.
    async fn write_run(
        &self,
        input: &PassInput<'_>,
        stored: &Stored<'_>,
        lazy: &BTreeMap<&str, Option<String>>,
        writes: &Writes,
        out: &Outcome,
    ) -> Result<Option<DynamicObject>, ReconcileError> {
        let (raw, inst, old) = (input.raw, input.stored, &writes.old_status);
        let run = &input.exec.plan_execution;
        let activity = match run.plan_name.as_str() {
            "" => Activity::Idle,
            plan => Activity::Run { plan, uid: &run.uid },
        };
        let read = raw.metadata.generation;
        let mut status = out.status.clone();
        let bumps = bumps_generation(inst, stored);
        let ends = status
            .plan_status
            .get(&run.plan_name)
            .is_some_and(|ps| ps.uid == run.uid && ps.status.is_terminal());
        if bumps && ends {
            let written = self.write_spec(inst, stored, lazy, resource_version(raw)).await?;
            let after = written.as_ref().and_then(|w| w.metadata.generation).or(read);
            reobserve(&mut status.conditions, read, after);
            conclude(old, &mut status, &activity, after, input.now);
            self.write_status(old, &status).await?;
            return Ok(written);
        }
        if !out.start_unwritten {
            conclude(old, &mut status, &activity, read, input.now);
        }
        let guard = if bumps { resource_version(raw) } else { None };
        let rv = self
            .write_status_guarded(old, &status, guard)
            .await?
            .or_else(|| resource_version(raw));
        self.write_spec(inst, stored, lazy, rv).await
    }

    /// Uninstall of an Instance whose plans created cluster-scoped objects: delete them, then
    /// release the Instance (namespaced objects are left to the garbage collector).
    pub(super) async fn release_cluster_objects(
        &self,
        raw: &DynamicObject,
        inst: &Instance,
    ) -> Result<Action, ReconcileError> {
        let mut pending = Vec::new();
        for apply::ClusterObject {
            api_version,
            kind,
            name,
        } in stored_cluster_objects(inst)
        {
            let obj = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
            match apply::delete(self.ctx, &obj).await {
                Ok(None) => crate::failpoint::hit(crate::failpoint::MID_DELETE),
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
    pub(super) async fn release_finalizer(
        &self,
        raw: &DynamicObject,
        inst: &Instance,
        finalizer: &str,
    ) -> Result<(), ReconcileError> {
        crate::failpoint::hit(crate::failpoint::MID_DELETE);
        let finalizers: Vec<String> = inst
            .metadata
            .finalizers
            .iter()
            .filter(|f| *f != finalizer)
            .cloned()
            .collect();
        let stored = Stored {
            spec: &inst.spec,
            finalizers: &finalizers,
            remember: None,
            annotations: &BTreeMap::new(),
        };
        self.write_spec(inst, &stored, &BTreeMap::new(), resource_version(raw))
            .await?;
        Ok(())
    }

    /// Merge-patches the status subresource when it changed; returns the new resourceVersion.
    pub(super) async fn write_status(
        &self,
        old: &InstanceStatus,
        new: &InstanceStatus,
    ) -> Result<Option<String>, ReconcileError> {
        self.write_status_guarded(old, new, None).await
    }

    /// [`Self::write_status`], failing with a conflict unless the Instance is still at
    /// `resource_version` (when given).
    pub(super) async fn write_status_guarded(
        &self,
        old: &InstanceStatus,
        new: &InstanceStatus,
        resource_version: Option<String>,
    ) -> Result<Option<String>, ReconcileError> {
        let Some(mut body) = status_patch(old, new) else {
            return Ok(None);
        };
        if let Some(rv) = resource_version {
            body["metadata"] = json!({ "resourceVersion": rv });
        }
        debug!(patch = %body, "writing instance status");
        self.patch_status(&body).await
    }

    /// Merge-patches the status subresource with `body` and remembers the version written (so
    /// the next reconcile may use the cache); returns the new resourceVersion.
    pub(super) async fn patch_status(&self, body: &Value) -> Result<Option<String>, ReconcileError> {
        let updated = self
            .api
            .patch_status(&self.name, &self.patch_params(), &Patch::Merge(body))
            .await?
            .0;
        crate::failpoint::hit(crate::failpoint::AFTER_STATUS_WRITE);
        self.wrote(&updated);
        // A status change decides nothing a fresh reconcile would decide differently (admission
        // reads the spec): its event is an echo.
        self.echo(&updated);
        Ok(updated.metadata.resource_version)
    }

    /// Writes spec and metadata changes with one merge patch guarded by the resourceVersion, so a
    /// concurrent user edit is never overwritten (the conflict is retried with fresh data); the
    /// `lazy` annotations go along when anything else is written.
    pub(super) async fn write_spec(
        &self,
        inst: &Instance,
        stored: &Stored<'_>,
        lazy: &BTreeMap<&str, Option<String>>,
        resource_version: Option<String>,
    ) -> Result<Option<DynamicObject>, ReconcileError> {
        let Some(mut body) = spec_patch_along(inst, stored, lazy, resource_version) else {
            return Ok(None);
        };
        let shards = self.ctx.shards.count();
        let bucket =
            kudo_engine::shard::missing_bucket_label(shards, &inst.metadata.labels, &self.ns, &self.name);
        if let Some(bucket) = &bucket {
            // Rides along with a write made anyway (the admission, first of all): the replica
            // holding the Instance's shard watches it by this label from then on.
            body["metadata"]["labels"][kudo_engine::shard::BUCKET_LABEL] = serde_json::json!(bucket);
            self.ctx.shards.labelling(&self.ns, &self.name, true);
        }
        debug!(patch = %body, "writing instance spec/metadata");
        let written = self
            .api
            .patch(&self.name, &self.patch_params(), &Patch::Merge(&body))
            .await;
        if written.is_err() && bucket.is_some() {
            self.ctx.shards.labelling(&self.ns, &self.name, false);
        }
        let updated = written?.0;
        self.wrote(&updated);
        Ok(Some(updated))
    }

    /// Remembers a version of the Instance this reconcile wrote: the next reconcile may read it
    /// from the cache.
    fn wrote(&self, updated: &DynamicObject) {
        let rv = updated.metadata.resource_version.as_deref();
        self.ctx.caches.saw_instance(&self.ns, &self.name, rv);
    }

    /// Marks a version this reconcile wrote and acted on as an echo: its watch event wakes
    /// nobody (see [`crate::echoes`]). Not for a spec write that ends the reconcile: unscheduling
    /// a run may make a change that waited for it admissible, which the next reconcile admits.
    fn echo(&self, updated: &DynamicObject) {
        if let Some(rv) = updated.metadata.resource_version.as_deref() {
            self.ctx.memory.echoes.wrote(&self.ns, &self.name, rv);
        }
    }

    /// Our own writes to the Instance carry the configured field manager too, so
    /// `managedFields` shows which fields the controller owns.
    pub(super) fn patch_params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(self.ctx.config.field_manager.clone()),
            ..PatchParams::default()
        }
    }
}

/// Whether the run `exec` schedules has not ended in `inst`'s status.
fn going(inst: &Instance, exec: &kudo_api::InstanceSpec) -> bool {
    let run = &exec.plan_execution;
    !run.uid.is_empty()
        && !inst
            .status
            .as_ref()
            .and_then(|s| s.plan_status.get(&run.plan_name))
            .is_some_and(|ps| ps.uid == run.uid && ps.status.is_terminal())
}

pub(super) fn resource_version(raw: &DynamicObject) -> Option<String> {
    raw.metadata.resource_version.clone()
}

//! Persist: the writes of a reconcile — the admission before anything executes, then the pass's
//! status and spec (guarded by the resourceVersion), finalizers and the cluster-scoped objects to
//! release on uninstall.

use super::*;

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
    pub(super) async fn record_denial(
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
    pub(super) async fn persist_run(
        &self,
        raw: &DynamicObject,
        inst: &Instance,
        ov: &OperatorVersion,
        deleting: bool,
        writes: Writes,
        status: &InstanceStatus,
    ) -> Result<(), ReconcileError> {
        let applied = self.cluster.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let settle = Settle {
            inst,
            ov,
            status,
            deleting,
            timing: writes.timing,
            applied: &applied,
        };
        let settled = kudo_engine::reconcile::settle(&settle, writes.finalizers);
        if settled.cleanup_released {
            info!("cleanup finished, removing finalizer");
        }
        let rv = self
            .write_status(&writes.old_status, status)
            .await?
            .or_else(|| resource_version(raw));
        self.write_spec(
            inst,
            &writes.spec,
            &settled.finalizers,
            writes.remember.as_ref(),
            &settled.annotations,
            rv,
        )
        .await?;
        Ok(())
    }

    /// Uninstall of an Instance whose plans created cluster-scoped objects: delete them, then
    /// release the Instance (namespaced objects are left to the garbage collector).
    pub(super) async fn release_cluster_objects(
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
    pub(super) async fn release_finalizer(
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

    /// Merge-patches the status subresource when it changed; returns the new resourceVersion.
    pub(super) async fn write_status(
        &self,
        old: &InstanceStatus,
        new: &InstanceStatus,
    ) -> Result<Option<String>, ReconcileError> {
        let Some(body) = kudo_engine::reconcile::status_patch(old, new) else {
            return Ok(None);
        };
        debug!(patch = %body, "writing instance status");
        self.patch_status(&body).await
    }

    /// Merge-patches the status subresource with `body` and remembers the version written (so
    /// the next reconcile may use the cache); returns the new resourceVersion.
    pub(super) async fn patch_status(&self, body: &Value) -> Result<Option<String>, ReconcileError> {
        let updated = self
            .api
            .patch_status(&self.name, &self.patch_params(), &Patch::Merge(body))
            .await?;
        self.ctx
            .caches
            .saw_instance(&self.ns, &self.name, updated.metadata.resource_version.as_deref());
        Ok(updated.metadata.resource_version)
    }

    /// Writes spec and metadata changes with one merge patch guarded by the resourceVersion, so a
    /// concurrent user edit is never overwritten (the conflict is retried with fresh data).
    pub(super) async fn write_spec(
        &self,
        inst: &Instance,
        spec: &InstanceSpec,
        finalizers: &[String],
        remember: Option<&InstanceSpec>,
        extra_annotations: &BTreeMap<&str, Option<String>>,
        resource_version: Option<String>,
    ) -> Result<Option<DynamicObject>, ReconcileError> {
        let stored = Stored {
            spec,
            finalizers,
            remember,
            annotations: extra_annotations,
        };
        let Some(body) = kudo_engine::reconcile::spec_patch(inst, &stored, resource_version) else {
            return Ok(None);
        };
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

    /// Our own writes to the Instance carry the configured field manager too, so
    /// `managedFields` shows which fields the controller owns.
    pub(super) fn patch_params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(self.ctx.config.field_manager.clone()),
            ..PatchParams::default()
        }
    }
}

pub(super) fn resource_version(raw: &DynamicObject) -> Option<String> {
    raw.metadata.resource_version.clone()
}

/// What a reconcile writes back after its pass, besides the status.
pub(super) struct Writes {
    pub(super) spec: InstanceSpec,
    pub(super) finalizers: Vec<String>,
    /// Spec the admitted-spec annotation should hold.
    pub(super) remember: Option<InstanceSpec>,
    /// The timing annotation.
    pub(super) timing: Option<String>,
    /// The status as read, to diff against.
    pub(super) old_status: InstanceStatus,
}

impl Writes {
    /// Starts from what the Instance holds now.
    pub(super) fn new(inst: &Instance, remember: Option<InstanceSpec>, old_status: InstanceStatus) -> Writes {
        Writes {
            spec: inst.spec.clone(),
            finalizers: inst.metadata.finalizers.clone(),
            remember,
            timing: inst.metadata.annotations.get(TIMING_ANNOTATION).cloned(),
            old_status,
        }
    }
}

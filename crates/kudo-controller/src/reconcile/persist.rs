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

/// The `status.planStatus` of a merge patch. A plan status is an object, so a merge patch keeps
/// every key it does not mention: an empty message (serialized as absent) is sent as `null`, or
/// the previous run's message would stay on the server (issue 14, bug 2). Phases are a list and
/// are replaced whole.
pub(super) fn plan_status_patch(new: &InstanceStatus) -> Value {
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
pub(super) fn schedules_patch(old: &InstanceStatus, new: &InstanceStatus) -> Value {
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

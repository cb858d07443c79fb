//! The idle step of an Instance without a running plan: readiness from its workloads, then the
//! drift check (see [`crate::drift`]).

use super::*;

impl Reconciler<'_> {
    /// The idle step: readiness from the live workloads, then the drift check. A failed lifecycle
    /// run keeps the instance's readiness Unknown until the user acts: healthy-looking leftovers
    /// of a half-applied plan do not make it Ready (KUDO reported them as ready once the failed
    /// plan was unscheduled).
    pub(super) async fn idle(
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

    /// Drift check of an idle Instance (see [`crate::drift`]): Events and the `Drifted`
    /// condition. Failures are logged and retried at the next idle reconcile.
    pub(super) async fn drift(&self, input: &PassInput<'_>, status: &mut InstanceStatus) {
        let PassInput {
            raw,
            ov,
            exec,
            instance_uid,
            annotations,
            now,
            generation,
            sourced,
            ..
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
            parse_memo: Some(self.ctx.memory.parse_memo.clone()),
        };
        let rep = drift::check(self.ctx, ov, &base, sourced, status, policy, &self.cluster).await;
        self.ctx.metrics.drift(rep.drifted.len(), rep.repaired.len());
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
        let found = DriftFound {
            report: policy == drift::Policy::Report,
            drifted: &rep.drifted,
            failed: !rep.errors.is_empty(),
        };
        for e in drift_condition(found, &mut status.conditions, generation, now) {
            self.effect(raw, &e).await;
        }
    }

    /// The workloads KUDO's readiness looks at (KEP-34), as JSON with apiVersion/kind. KUDO
    /// listed ReplicaSets too, but judged every ReplicaSet healthy: they cannot change the
    /// verdict nor its message, so they are neither read nor watched.
    pub(super) async fn workloads(&self) -> Result<Vec<Value>, ReconcileError> {
        let selector = format!("{}={},heritage=kudo", kudo_api::labels::INSTANCE, self.name);
        let kinds = [
            ("apps", "Deployment"),
            ("apps", "StatefulSet"),
            ("apps", "DaemonSet"),
            ("", "Pod"),
        ];
        let mut out = Vec::new();
        for (g, k) in kinds {
            let ar = kudo_kube::known_resource(g, k);
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
}

/// The most recently updated of deploy/update/upgrade when its last run ended in FATAL_ERROR.
pub(super) fn last_failed_lifecycle_plan(status: &InstanceStatus) -> Option<String> {
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

//! The idle step of an Instance without a running plan, as the engine decides it
//! ([`kudo_engine::reconcile::idle_step`]): readiness from its workloads, then the drift check
//! (see [`crate::drift`]).

use kube::api::{Api, DynamicObject, ListParams};
use kudo_engine::readiness::IDLE_READINESS_KINDS;
use kudo_engine::reconcile::{DriftFound, Policy, drift_condition, idle_step};
use kudo_engine::{EventType, ready_condition, set_condition};
use kudo_package::render::RenderContext;
use serde_json::{Value, json};
use tracing::{info, warn};

use super::{DRIFT_REPAIRED, Outcome, PassInput, ReconcileError, Reconciler};
use crate::drift;

impl Reconciler<'_> {
    /// The idle step: readiness (from the live workloads unless a lifecycle run failed), then
    /// the drift check under the Instance's policy.
    pub(super) async fn idle(
        &self,
        input: &PassInput<'_>,
        out: &mut Outcome,
        deleting: bool,
    ) -> Result<(), ReconcileError> {
        let now = input.now;
        let step = idle_step(&mut out.status, deleting, input.annotations, now);
        self.execute(input.raw, &step.effects, out).await;
        let mut cond = match step.ready {
            Some(c) => c,
            None => ready_condition(&self.workloads().await?, now),
        };
        cond.observed_generation = input.generation;
        set_condition(&mut out.status.conditions, cond);
        if let Some(policy) = step.drift {
            self.drift(input, out, policy).await;
        }
        Ok(())
    }

    /// Drift check of an idle Instance (see [`crate::drift`]): Events and the `Drifted`
    /// condition. Failures are logged and retried at the next idle reconcile.
    async fn drift(&self, input: &PassInput<'_>, out: &mut Outcome, policy: Policy) {
        let PassInput {
            raw,
            ov,
            exec,
            instance_uid,
            now,
            generation,
            sourced,
            ..
        } = *input;
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
        let rep = drift::check(self.ctx, ov, &base, sourced, &out.status, policy, &self.cluster).await;
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
            report: policy == Policy::Report,
            drifted: &rep.drifted,
            failed: !rep.errors.is_empty(),
        };
        let effects = drift_condition(found, &mut out.status.conditions, generation, now);
        self.execute(raw, &effects, out).await;
    }

    /// The workloads KUDO's readiness looks at ([`IDLE_READINESS_KINDS`]), as JSON with
    /// apiVersion/kind.
    async fn workloads(&self) -> Result<Vec<Value>, ReconcileError> {
        let selector = format!("{}={},heritage=kudo", kudo_api::labels::INSTANCE, self.name);
        let mut out = Vec::new();
        for (g, k) in IDLE_READINESS_KINDS {
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

//! The initiators' part of a reconcile: the engine's [`Initiating`] runs every initiator of
//! [`kudo_engine::reconcile::INITIATORS`] and asks for what they need read; [`Reconciler::observe`]
//! reads it (the sensitive parameters, the objects of autopilot rules) in one go. Nothing is
//! decided here.

use std::sync::Arc;

use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use kudo_api::{Instance, InstanceSpec, OperatorVersion};
use kudo_engine::Timestamp;
use kudo_engine::autopilot::Rules;
use kudo_engine::reconcile::{
    Admitted, Autopilot, AutopilotRead, Effect, Initiating, Observation, Observed, Provided, Sensitive,
    admitted_spec,
};
use tracing::warn;

use super::{Read, ReconcileError, Reconciler};
use crate::autopilot;
use crate::param_sources::{self, Sourced};

/// What the initiators of one reconcile produced.
pub(super) struct Initiated {
    /// The admission this reconcile persists.
    pub admitted: Admitted,
    /// The sensitive parameters' values, read once for the reconcile: the rotation check, the
    /// pass and the drift check share them.
    pub sourced: Sourced,
    /// The effects to execute once the admission is stored, the initiators' Events and lines
    /// first.
    pub later: Vec<Effect>,
}

impl Reconciler<'_> {
    /// Admits the stored spec and every self-started change (see the module docs).
    pub(super) async fn initiate(
        &self,
        read: &Read,
        me: &ObjectRef<DynamicObject>,
        now: Timestamp,
    ) -> Result<Initiated, ReconcileError> {
        let (inst, ov) = (&read.inst, &read.ov);
        let admitted_ov = self.admitted_ov(inst).await?;
        let obs = Observed::new(inst, ov, admitted_ov.as_deref(), read.deleting, now);
        let mut run = Initiating::new(obs);
        let mut sourced = None;
        let mut uids = || uuid::Uuid::new_v4().to_string();
        while let Some(needs) = run.advance(&mut uids) {
            for need in needs {
                let provided = self.observe(need, &run, read, me, now, &mut sourced).await;
                run.provide(provided);
            }
        }
        let adm = run.finish();
        // Nothing is published before the admission is stored: a manager killed in between
        // would have announced a run (PlanStarted) that the next manager admits under another
        // uid and announces again.
        let mut later = adm.effects;
        later.extend(adm.stored);
        let admitted = adm
            .admitted
            .unwrap_or_else(|| Admitted::keeping(inst, None, None));
        let sourced = match sourced {
            Some(s) => s,
            None => self.resolve_sources(ov, admitted.exec.as_ref()).await,
        };
        Ok(Initiated {
            admitted,
            sourced,
            later,
        })
    }

    /// Reads what an initiator asked for. The values of the sensitive parameters read on the way
    /// are kept in `sourced` for the rest of the reconcile.
    async fn observe(
        &self,
        need: Observation,
        run: &Initiating<'_>,
        read: &Read,
        me: &ObjectRef<DynamicObject>,
        now: Timestamp,
        sourced: &mut Option<Sourced>,
    ) -> Provided {
        match need {
            Observation::Sensitive => {
                let exec = run.exec().cloned();
                let (values, sensitive) = self.observe_sensitive(&read.ov, exec.as_ref(), &read.uid).await;
                *sourced = Some(values);
                Provided::Sensitive(sensitive)
            }
            Observation::Autopilot(AutopilotRead::None) => {
                self.ctx.autopilot.forget(me);
                Provided::Autopilot(Autopilot::NotEvaluated)
            }
            Observation::Autopilot(AutopilotRead::Rules { waiting }) => {
                let rules = Rules::new(&read.inst, &read.ov, waiting, now);
                let reads = autopilot::Reads {
                    discovery: &self.ctx.cluster.discovery,
                    client: self.ctx.acting_client(),
                    watches: &self.ctx.autopilot,
                };
                let evaluation = autopilot::evaluate(&reads, me, rules, &self.ns).await;
                Provided::Autopilot(Autopilot::Evaluated(evaluation))
            }
        }
    }

    /// The OperatorVersion of the last admitted spec when it names another one than the stored
    /// spec (the old side of an upgrade); `None` otherwise or when it is gone.
    async fn admitted_ov(&self, inst: &Instance) -> Result<Option<Arc<OperatorVersion>>, ReconcileError> {
        match admitted_spec(inst) {
            Some(a) if a.operator_version != inst.spec.operator_version => {
                let mut old = inst.clone();
                old.spec = a.clone();
                self.get_ov(&old, &a).await
            }
            _ => Ok(None),
        }
    }

    /// Reads the sensitive parameters of the spec to execute, and their fingerprints for the
    /// rotation check.
    async fn observe_sensitive(
        &self,
        ov: &OperatorVersion,
        exec: Option<&InstanceSpec>,
        instance_uid: &str,
    ) -> (Sourced, Sensitive) {
        let sourced = self.resolve_sources(ov, exec).await;
        let sensitive = match (exec, &sourced) {
            (Some(e), _) if e.parameter_sources.is_empty() => Sensitive::NoSources,
            (Some(e), Ok(values)) => self.fingerprints(e, values, instance_uid).await,
            _ => Sensitive::Unknown,
        };
        (sourced, sensitive)
    }

    async fn fingerprints(
        &self,
        exec: &InstanceSpec,
        values: &param_sources::SourcedValues,
        instance_uid: &str,
    ) -> Sensitive {
        match param_sources::fingerprint_key(self.ctx, &self.ns, &self.name, instance_uid).await {
            Ok((key, fresh_key)) => Sensitive::Current {
                fingerprints: param_sources::fingerprints(&key, &exec.parameter_sources, values),
                fresh_key,
            },
            Err(e) => {
                warn!(error = %e, "sensitive parameters: cannot check for rotation");
                Sensitive::Unknown
            }
        }
    }
}

//! The initiators' part of a reconcile: observe what they need, let the engine decide
//! ([`kudo_engine::reconcile::initiate_all`] runs every initiator of
//! [`kudo_engine::reconcile::INITIATORS`]) and execute the effects they produced. Nothing is
//! decided here.

use std::sync::Arc;

use kube::api::DynamicObject;
use kudo_api::{Instance, InstanceSpec, OperatorVersion};
use kudo_engine::Timestamp;
use kudo_engine::initiate::Initiation;
use kudo_engine::reconcile::{
    Admitted, Effect, Initiating, LogLevel, Observed, Scheduled, Sensitive, admitted_spec,
};
use tracing::{debug, info, warn};

use super::{Read, ReconcileError, Reconciler};
use crate::autopilot;
use crate::param_sources;

/// What the initiators of one reconcile produced.
pub(super) struct Initiated {
    /// The autopilot rules' evaluation (`None` without rules, or while deleting).
    pub auto: Option<autopilot::Evaluation>,
    /// The autopilot firing admitted by this reconcile, if any.
    pub fired: Option<Initiation>,
    /// The admission this reconcile persists.
    pub admitted: Admitted,
    /// The sensitive parameters' values, read once for the reconcile: the rotation check, the
    /// pass and the drift check share them.
    pub sourced: param_sources::Sourced,
    /// The schedule check (`None` while deleting).
    pub scheduled: Option<Scheduled>,
}

impl Reconciler<'_> {
    /// Admits the stored spec and every self-started change (see the module docs).
    pub(super) async fn initiate(
        &self,
        read: &Read,
        me: &kube::runtime::reflector::ObjectRef<DynamicObject>,
        now: Timestamp,
    ) -> Result<Initiated, ReconcileError> {
        let Read {
            raw,
            inst,
            ov,
            uid,
            deleting,
            ..
        } = read;
        let mut auto = if !deleting && autopilot::has_rules(ov) {
            Some(self.evaluate_autopilot(inst, ov, now).await)
        } else {
            self.ctx.autopilot.forget(me);
            None
        };
        let fire = auto.as_ref().and_then(|a| a.fire.clone());
        let admitted_ov = self.admitted_ov(inst).await?;
        let mut run = Initiating::new(Observed {
            inst,
            ov,
            admitted_ov: admitted_ov.as_deref(),
            deleting: *deleting,
            now,
            autopilot_fire: fire.as_ref(),
            sensitive: Sensitive::NotRead,
        });
        let mut sourced = None;
        let mut uids = || uuid::Uuid::new_v4().to_string();
        while run.advance(&mut uids).is_some() {
            let exec = run.exec().cloned();
            let (values, sensitive) = self.observe_sensitive(ov, exec.as_ref(), uid).await;
            sourced = Some(values);
            run.provide(sensitive);
        }
        let adm = run.finish();
        if let (Some(msg), Some(a)) = (&adm.autopilot_denial, auto.as_mut()) {
            a.denied(msg);
        }
        for e in &adm.effects {
            self.effect(raw, e).await;
        }
        let admitted = adm
            .admitted
            .unwrap_or_else(|| Admitted::keeping(inst, None, None));
        let sourced = match sourced {
            Some(s) => s,
            None => self.resolve_sources(ov, admitted.exec.as_ref()).await,
        };
        Ok(Initiated {
            auto,
            fired: adm.fired,
            admitted,
            sourced,
            scheduled: adm.scheduled,
        })
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
    ) -> (param_sources::Sourced, Sensitive) {
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

    /// Executes one effect an initiator decided.
    pub(super) async fn effect(&self, raw: &DynamicObject, e: &Effect) {
        match e {
            Effect::Event {
                type_,
                reason,
                action,
                message,
            } => self.event(raw, *type_, reason, action, message).await,
            Effect::Log { level, message } => match level {
                LogLevel::Debug => debug!("{message}"),
                LogLevel::Info => info!("{message}"),
                LogLevel::Warn => warn!("{message}"),
            },
        }
    }

    /// Evaluates the OperatorVersion's autopilot rules (see [`crate::autopilot`]). Rules wait
    /// while a plan is scheduled or running and while a change of the spec is not admitted yet.
    async fn evaluate_autopilot(
        &self,
        inst: &Instance,
        ov: &OperatorVersion,
        now: Timestamp,
    ) -> autopilot::Evaluation {
        let admitted = admitted_spec(inst);
        let idle = admitted.as_ref() == Some(&inst.spec) && inst.spec.plan_execution.plan_name.is_empty();
        let reads = autopilot::Reads {
            discovery: &self.ctx.cluster.discovery,
            client: self.ctx.acting_client(),
            watches: &self.ctx.autopilot,
        };
        autopilot::evaluate_rules(&reads, inst, ov, !idle, now).await
    }
}

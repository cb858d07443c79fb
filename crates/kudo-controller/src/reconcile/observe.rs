//! Observe: what one reconcile reads before deciding (the Instance from the cache or the server,
//! its OperatorVersion, the sensitive parameters), and what it does when that cannot be read.

use std::ops::ControlFlow;
use std::sync::Arc;

use kube::api::{Api, DynamicObject};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kudo_api::{CLEANUP_FINALIZER, Condition, Instance, InstanceSpec, InstanceStatus, OperatorVersion};
use kudo_engine::progress::{Activity, conclude};
use kudo_engine::{EventType, not_ready_condition, set_condition};
use serde_json::{Value, json};
use tracing::{debug, warn};

use super::{INVALID_INSTANCE, INVALID_OPERATOR_VERSION, Read, ReconcileError, Reconciler, now};
use crate::drift;
use crate::param_sources::{self, Sourced};
use crate::reasons;
use crate::resources::operator_version_resource;

impl Reconciler<'_> {
    /// The OperatorVersion an Instance spec references, decoded. A cached copy is decoded once
    /// per resourceVersion (see [`crate::cache::Caches::decoded_operator_version`]); a cache miss
    /// reads and decodes the server's copy.
    pub(super) async fn get_ov(
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
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.ctx.cluster.client.clone(),
            ov_ns,
            &operator_version_resource(),
        );
        match api.get_opt(name).await? {
            Some(raw) => Ok(Some(Arc::new(decode_ov(&raw)?))),
            None => Ok(None),
        }
    }

    /// The Instance as of our newest knowledge: the cached copy when it is the version this
    /// manager last wrote or read (see [`crate::cache`]), else a GET. `None`: it is gone.
    pub(super) async fn current(&self) -> Result<Option<DynamicObject>, ReconcileError> {
        match self.ctx.caches.instance(&self.ns, &self.name) {
            Ok(cached) => Ok(cached),
            Err(()) => {
                let got = self.api.get_opt(&self.name).await?.map(|l| l.0);
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
    pub(super) async fn read(
        &self,
        me: &ObjectRef<DynamicObject>,
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
    pub(super) async fn released_without_account(
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
    pub(super) async fn release_uncleanable(
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
    pub(super) async fn establish_identity(&self, raw: &DynamicObject) {
        let spec_account = raw.data["spec"]["serviceAccountName"].as_str().unwrap_or("");
        let default = self.ctx.config.default_service_account.as_deref();
        let acting = self
            .ctx
            .cluster
            .identities
            .acting(&self.ns, spec_account, default)
            .await;
        crate::impersonation::establish(acting);
    }

    /// The Instance as kudo.dev/v1beta1, or (Break) what to do when it does not decode: a field
    /// the CRD schema admits but the type does not (e.g. an unknown planExecution.status) is said
    /// on the Instance instead of failing every retry silently.
    pub(super) async fn read_instance(
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
    pub(super) async fn read_operator_version(
        &self,
        raw: &DynamicObject,
        inst: &Instance,
        who: &str,
    ) -> Result<ControlFlow<Action, Arc<OperatorVersion>>, ReconcileError> {
        let action = match self.get_ov(inst, &inst.spec).await {
            Ok(Some(ov)) => match self.refuse_unverified(raw, inst, &ov, who).await? {
                Some(action) => action,
                None => return Ok(ControlFlow::Continue(ov)),
            },
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
    pub(super) async fn operator_version_unusable(
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
        // A missing OperatorVersion may still come (applied after its Instance from Git); one
        // that does not decode needs a fix.
        let block = Activity::Blocked {
            reason,
            message: &msg,
            stalled: decode_error.is_some(),
        };
        if self.set_not_ready(raw, inst, &block).await? {
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

    /// Sets `Ready=False` with the reason and message of `block` on the Instance's status,
    /// concluded for it (see [`conclude`]); true when the status changed (written).
    pub(super) async fn set_not_ready(
        &self,
        raw: &DynamicObject,
        inst: &Instance,
        block: &Activity<'_>,
    ) -> Result<bool, ReconcileError> {
        let Activity::Blocked { reason, message, .. } = *block else {
            return Ok(false);
        };
        let old = inst.status.clone().unwrap_or_default();
        let mut new = old.clone();
        let now = now();
        let mut ready = not_ready_condition(reason, message.to_string(), now);
        ready.observed_generation = raw.metadata.generation;
        set_condition(&mut new.conditions, ready);
        conclude(&old, &mut new, block, raw.metadata.generation, now);
        Ok(self.write_status(&old, &new).await?.is_some())
    }

    /// An Instance that does not decode as kudo.dev/v1beta1 gets `Ready=False` reason
    /// [`INVALID_INSTANCE`] (and one Warning Event per change of that message), written from its
    /// raw JSON; nothing else is done with it until it is fixed.
    pub(super) async fn report_invalid_instance(
        &self,
        raw: &DynamicObject,
        msg: &str,
    ) -> Result<Action, ReconcileError> {
        warn!("{msg}");
        let conditions: Vec<Condition> = raw
            .data
            .pointer("/status/conditions")
            .and_then(|c| serde_json::from_value(c.clone()).ok())
            .unwrap_or_default();
        let old = InstanceStatus {
            observed_generation: raw
                .data
                .pointer("/status/observedGeneration")
                .and_then(Value::as_i64),
            conditions,
            ..InstanceStatus::default()
        };
        let (mut new, now, generation) = (old.clone(), now(), raw.metadata.generation);
        let mut ready = not_ready_condition(INVALID_INSTANCE, msg.to_string(), now);
        ready.observed_generation = generation;
        set_condition(&mut new.conditions, ready);
        let block = Activity::Blocked {
            reason: INVALID_INSTANCE,
            message: msg,
            stalled: true,
        };
        conclude(&old, &mut new, &block, generation, now);
        if new != old {
            let body = json!({"status": {"conditions": new.conditions, "observedGeneration": generation}});
            self.patch_status(&body).await?;
            self.event(raw, EventType::Warning, INVALID_INSTANCE, "Reconcile", msg)
                .await;
        }
        // A fix is a spec change, which the Instance watch delivers.
        Ok(Action::await_change())
    }

    /// Reads `spec.parameterSources` of the spec to execute (none: no read).
    pub(super) async fn resolve_sources(&self, ov: &OperatorVersion, exec: Option<&InstanceSpec>) -> Sourced {
        match exec {
            Some(e) if !e.parameter_sources.is_empty() => {
                param_sources::resolve(self.ctx, &self.ns, ov, &e.parameter_sources).await
            }
            _ => Ok(param_sources::SourcedValues::new()),
        }
    }
}

/// `serde_json::from_value` that names where a field of the wrong shape is (`spec.plans.deploy.phases:
/// invalid type …`), for status messages a user can act on.
pub(super) fn decode<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, serde_json::Error> {
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

pub(super) fn decode_instance(raw: &DynamicObject, who: &str) -> Result<Instance, ReconcileError> {
    let v = serde_json::to_value(raw).map_err(|e| ReconcileError::Decode(who.to_string(), e))?;
    decode(v).map_err(|e| ReconcileError::Decode(who.to_string(), e))
}

//! `--require-verified-sources` in the Instance reconcile: an Instance whose OperatorVersion the
//! policy refuses (`kudo_engine::source::policy`) says so on its status (`Ready=False`, reason
//! `UnverifiedOperatorVersion`) and in a Warning Event naming the OperatorVersion and why, and
//! nothing is applied for it; being deleted, it is released without running its cleanup plan
//! (which would apply the refused content).

use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kudo_api::{CLEANUP_FINALIZER, Instance, OperatorVersion};
use kudo_engine::EventType;
use kudo_engine::progress::Activity;
use kudo_engine::source::policy::{UNVERIFIED_REASON, refusal};
use tracing::warn;

use super::{ReconcileError, Reconciler};

impl Reconciler<'_> {
    /// `Some(action)` ends the reconcile: the policy is on and refuses `ov`.
    pub(super) async fn refuse_unverified(
        &self,
        raw: &DynamicObject,
        inst: &Instance,
        ov: &OperatorVersion,
        who: &str,
    ) -> Result<Option<Action>, ReconcileError> {
        if !self.ctx.config.require_verified_sources {
            return Ok(None);
        }
        let ns = inst.spec.operator_version_namespace(&self.ns);
        let why = match crate::sources::policy::verified(&self.ctx.cluster.client, ns, ov).await? {
            Ok(_) => return Ok(None),
            Err(why) => why,
        };
        let msg = refusal(who, ns, &ov.metadata.name, &why);
        let finalized = inst.metadata.finalizers.iter().any(|f| f == CLEANUP_FINALIZER);
        if raw.metadata.deletion_timestamp.is_some() && finalized {
            self.release_uncleanable(raw, inst, who, UNVERIFIED_REASON, &msg)
                .await?;
            return Ok(Some(Action::await_change()));
        }
        warn!("{msg}");
        // Stalled: only a change makes it runnable (a source storing it, or the policy lifted).
        let block = Activity::Blocked {
            reason: UNVERIFIED_REASON,
            message: &msg,
            stalled: true,
        };
        if self.set_not_ready(raw, inst, &block).await? {
            self.event(raw, EventType::Warning, UNVERIFIED_REASON, "Reconcile", &msg)
                .await;
        }
        Ok(Some(Action::requeue(self.ctx.config.error_requeue)))
    }
}

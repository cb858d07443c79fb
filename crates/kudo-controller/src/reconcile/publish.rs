//! Events on the Instance (the retry of a transient refusal is the recorder's).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::DynamicObject;
use kudo_engine::EventType;
use tracing::warn;

use super::Reconciler;

impl Reconciler<'_> {
    pub(super) fn reference(&self, raw: &DynamicObject) -> ObjectReference {
        ObjectReference {
            api_version: Some(kudo_api::API_VERSION.into()),
            kind: Some("Instance".into()),
            name: Some(self.name.clone()),
            namespace: Some(self.ns.clone()),
            uid: raw.metadata.uid.clone(),
            resource_version: raw.metadata.resource_version.clone(),
            ..Default::default()
        }
    }

    /// Publishes an Event. `action` separates Event series: the recorder merges Events with the
    /// same reason and action into one series keeping the first note, so plan events use the
    /// plan name as action to keep each plan's message.
    pub(super) async fn event(
        &self,
        raw: &DynamicObject,
        type_: EventType,
        reason: &str,
        action: &str,
        message: &str,
    ) {
        self.event_related(raw, type_, reason, action, message, None)
            .await;
    }

    /// [`Self::event`] with a related object (the Event's `related`), which also separates
    /// Event series.
    pub(super) async fn event_related(
        &self,
        raw: &DynamicObject,
        type_: EventType,
        reason: &str,
        action: &str,
        message: &str,
        related: Option<ObjectReference>,
    ) {
        let ev = crate::events::Event {
            type_,
            reason,
            action,
            note: message,
            related: related.as_ref(),
            once: None,
        };
        self.publish_event(raw, ev).await;
    }

    /// Publishes `ev` about the Instance, its note cut to the 1,000 bytes an Event may carry.
    pub(super) async fn publish_event(&self, raw: &DynamicObject, mut ev: crate::events::Event<'_>) {
        let mut cut = ev.note.len().min(1000);
        while !ev.note.is_char_boundary(cut) {
            cut -= 1;
        }
        ev.note = &ev.note[..cut];
        crate::failpoint::hit(crate::failpoint::BEFORE_EVENT);
        let reference = self.reference(raw);
        if let Err(e) = self.ctx.cluster.recorder.publish(&ev, &reference).await {
            warn!(reason = ev.reason, error = %e, "publishing event failed");
        }
    }
}

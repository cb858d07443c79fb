//! Events on the Instance, retried when the refusal is transient.

use std::time::Duration;

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
        let mut note = message.to_string();
        if note.len() > 1000 {
            let mut cut = 1000;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
        }
        let ev = crate::events::Event {
            type_,
            reason,
            action,
            note: &note,
            related: related.as_ref(),
        };
        crate::failpoint::hit(crate::failpoint::BEFORE_EVENT);
        let reference = self.reference(raw);
        // Like client-go's recorder, a refused Event is retried when the refusal is transient
        // (5xx, 429): plan events are how users follow a run, and one 500 should not lose one.
        let mut backoff = Duration::from_millis(50);
        for attempt in 1..=EVENT_TRIES {
            match self.ctx.cluster.recorder.publish(&ev, &reference).await {
                Ok(()) => return,
                Err(e) if attempt < EVENT_TRIES && is_transient(&e) => {
                    tokio::time::sleep(backoff).await;
                    backoff *= 4;
                }
                Err(e) => {
                    warn!(reason, error = %e, "publishing event failed");
                    return;
                }
            }
        }
    }
}

/// How many times an Event write is tried when the API server refuses it transiently.
pub(super) const EVENT_TRIES: u32 = 3;

/// Whether a refused request may succeed when sent again unchanged: server errors, throttling,
/// and transport failures (the request may not have reached the server).
pub(super) fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code >= 500 || s.code == 429,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

//! Publishing Events (`events.k8s.io/v1`) in series, as client-go's event recorder does: the
//! first occurrence creates an Event, a repeat within six minutes (same type, reason, action,
//! regarding and related object) raises its `series.count`.
//!
//! kube-runtime's `Recorder` does the same, but keeps every Event it published, whole and inline
//! in its hash table, for six minutes, and scans them all at every publish. In the `scale 1000`
//! bench that table was 8.9 MB, a sixth of the manager's heap (docs/benchmarks.md).
//! This one keeps, per series, its key, the Event's name and its count.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kudo_engine::EventType;

/// Reporting controller name of the Events the manager publishes (KUDO's manager name).
pub const REPORTER: &str = "kudo-manager";

/// How long a series stays open after its last occurrence (client-go and kube-runtime: 6 min).
const SERIES_TTL: SignedDuration = SignedDuration::from_mins(6);

/// How often expired series are dropped (a full scan, so not at every publish).
const SWEEP_EVERY: SignedDuration = SignedDuration::from_secs(30);

/// One Event to publish about an object.
pub(crate) struct Event<'a> {
    pub type_: EventType,
    /// Why (`PlanStarted`, `DriftRepaired`…).
    pub reason: &'a str,
    /// What was done; it also separates series of one reason.
    pub action: &'a str,
    /// The human-readable message; only the first occurrence's is kept by a series.
    pub note: &'a str,
    /// A second object the Event is about (`related`); it also separates series.
    pub related: Option<&'a ObjectReference>,
}

/// Publishes Events as one reporting controller (and replica).
pub(crate) struct Recorder {
    client: Client,
    controller: String,
    instance: String,
    series: Mutex<Series>,
}

#[derive(Default)]
struct Series {
    open: HashMap<Box<str>, Open>,
    swept: Option<Timestamp>,
}

/// An open series: the Event that carries it and how many occurrences it has counted.
struct Open {
    name: Box<str>,
    namespace: Box<str>,
    count: i32,
    last: Timestamp,
}

impl Recorder {
    /// `instance` names the replica that acts (its leader-election identity or pod name); without
    /// one, the controller's name is used, as kube-runtime does.
    pub fn new(client: Client, controller: &str, instance: Option<String>) -> Recorder {
        Recorder {
            client,
            controller: controller.to_string(),
            instance: instance.unwrap_or_else(|| controller.to_string()),
            series: Mutex::default(),
        }
    }

    /// Publishes `ev` about `regarding`: a new Event, or the next count of its open series.
    pub async fn publish(&self, ev: &Event<'_>, regarding: &ObjectReference) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = series_key(ev, regarding);
        let open = {
            let mut s = self.series.lock().unwrap_or_else(|e| e.into_inner());
            if s.swept.is_none_or(|t| t + SWEEP_EVERY <= now) {
                s.open.retain(|_, o| o.last + SERIES_TTL > now);
                s.swept = Some(now);
            }
            s.open
                .get(&key)
                .filter(|o| o.last + SERIES_TTL > now)
                .map(|o| (o.name.clone(), o.namespace.clone(), o.count + 1))
        };
        if let Some((name, namespace, count)) = open {
            let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
            let body = serde_json::json!({
                "series": {"count": count, "lastObservedTime": MicroTime(now)}
            });
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&body))
                .await
            {
                Ok(_) => {
                    self.remember(key, name, namespace, count, now);
                    return Ok(());
                }
                // The Event expired on the server (its TTL is an hour by default): start anew.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let namespace = regarding.namespace.clone().unwrap_or_else(|| "default".into());
        let name = format!(
            "{}.{:x}",
            regarding.name.as_deref().unwrap_or(&self.controller),
            now.as_nanosecond()
        );
        let event = K8sEvent {
            action: Some(ev.action.to_string()),
            reason: Some(ev.reason.to_string()),
            note: Some(ev.note.to_string()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            related: ev.related.cloned(),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(
                match ev.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_string(),
            ),
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            ..K8sEvent::default()
        };
        Api::<K8sEvent>::namespaced(self.client.clone(), &namespace)
            .create(&PostParams::default(), &event)
            .await?;
        self.remember(key, name.into(), namespace.into(), 1, now);
        Ok(())
    }

    fn remember(&self, key: Box<str>, name: Box<str>, namespace: Box<str>, count: i32, last: Timestamp) {
        let mut s = self.series.lock().unwrap_or_else(|e| e.into_inner());
        s.open.insert(
            key,
            Open {
                name,
                namespace,
                count,
                last,
            },
        );
    }
}

/// What makes two Events one series: type, reason, action, and the regarding and related
/// objects (the note is not part of it: a series keeps its first note).
fn series_key(ev: &Event<'_>, regarding: &ObjectReference) -> Box<str> {
    let mut k = String::with_capacity(160);
    let _ = write!(k, "{:?}\0{}\0{}", ev.type_, ev.reason, ev.action);
    for r in std::iter::once(regarding).chain(ev.related) {
        for part in [&r.api_version, &r.kind, &r.namespace, &r.name, &r.uid] {
            k.push('\0');
            k.push_str(part.as_deref().unwrap_or(""));
        }
    }
    k.into_boxed_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str, uid: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            namespace: Some("ns".into()),
            name: Some(name.into()),
            uid: Some(uid.into()),
            ..ObjectReference::default()
        }
    }

    fn ev<'a>(reason: &'a str, action: &'a str, related: Option<&'a ObjectReference>) -> Event<'a> {
        Event {
            type_: EventType::Normal,
            reason,
            action,
            note: "a note",
            related,
        }
    }

    #[test]
    fn series_are_separated_by_reason_action_and_objects_not_by_note() {
        let a = obj("a", "1");
        let b = obj("b", "2");
        let key = |e: &Event<'_>, r: &ObjectReference| series_key(e, r);
        let base = key(&ev("R", "X", None), &a);
        let mut other_note = ev("R", "X", None);
        other_note.note = "another note";
        assert_eq!(key(&other_note, &a), base);
        assert_ne!(key(&ev("R2", "X", None), &a), base);
        assert_ne!(key(&ev("R", "Y", None), &a), base);
        assert_ne!(key(&ev("R", "X", None), &b), base);
        assert_ne!(key(&ev("R", "X", Some(&b)), &a), base);
        assert_ne!(key(&ev("R", "X", Some(&b)), &a), key(&ev("R", "X", Some(&a)), &a));
        let mut warning = ev("R", "X", None);
        warning.type_ = EventType::Warning;
        assert_ne!(key(&warning, &a), base);
    }
}

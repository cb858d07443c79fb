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
use std::time::Duration;

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
    /// `Some(key)`: an occurrence that happens once per key (a run's start or end). It gets an
    /// Event of its own under a name derived from the key and the regarding object, never a
    /// series count, so announcing it again (a manager killed before the status write that
    /// followed, a pass repeated after a conflict) finds the first Event and adds nothing.
    pub once: Option<&'a str>,
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

/// The write that publishes one occurrence.
enum Write {
    /// The next count of an open series.
    Count {
        name: Box<str>,
        namespace: Box<str>,
        count: i32,
    },
    /// The first Event of a series.
    Create(Box<K8sEvent>),
}

/// What one attempt achieved.
enum Sent {
    Done,
    /// The series' Event is gone from the server.
    Gone,
}

/// How many times an Event write is tried when the API server refuses it transiently.
const EVENT_TRIES: u32 = 3;

/// Whether a refused request may succeed when sent again unchanged: server errors, throttling,
/// and transport failures (the request may not have reached the server).
fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code >= 500 || s.code == 429,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
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
    ///
    /// A write refused transiently (5xx, 429, a transport failure) is sent again, as client-go's
    /// recorder does: plan events are how users follow a run, and one 500 should not lose one.
    /// Both writes are idempotent when repeated: a count is set, not added, and a new Event
    /// keeps the name it was first sent with, so when the refusal hid a stored write (the
    /// response lost on its way back) the repeat meets `AlreadyExists` and the Event exists once.
    pub async fn publish(&self, ev: &Event<'_>, regarding: &ObjectReference) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        if let Some(once) = ev.once {
            return self.publish_once(ev, regarding, once, now).await;
        }
        let key = series_key(ev, regarding);
        let mut write = match self.open_series(&key, now) {
            Some((name, namespace, count)) => Write::Count {
                name,
                namespace,
                count,
            },
            None => Write::Create(Box::new(self.new_event(ev, regarding, now))),
        };
        // The Event expired on the server (its TTL is an hour by default): start anew.
        while let Sent::Gone = self.send_retrying(&write, false, now).await? {
            write = Write::Create(Box::new(self.new_event(ev, regarding, now)));
        }
        let (name, namespace, count) = match write {
            Write::Count {
                name,
                namespace,
                count,
            } => (name, namespace, count),
            Write::Create(e) => (
                e.metadata.name.unwrap_or_default().into(),
                e.metadata.namespace.unwrap_or_default().into(),
                1,
            ),
        };
        self.remember(key, name, namespace, count, now);
        Ok(())
    }

    /// [`Self::publish`] of an Event of its own, named after `once`: `AlreadyExists` means it
    /// was published already, by this manager or one before it.
    async fn publish_once(
        &self,
        ev: &Event<'_>,
        regarding: &ObjectReference,
        once: &str,
        now: Timestamp,
    ) -> Result<(), kube::Error> {
        let mut event = self.new_event(ev, regarding, now);
        event.metadata.name = Some(once_name(regarding, once));
        self.send_retrying(&Write::Create(Box::new(event)), true, now)
            .await
            .map(drop)
    }

    /// [`Self::send`], sent again while the refusal is transient (at most [`EVENT_TRIES`]
    /// attempts, 50 ms apart, then four times longer each); `repeated` when a write of the same
    /// Event may be stored already before the first attempt.
    async fn send_retrying(
        &self,
        write: &Write,
        repeated: bool,
        now: Timestamp,
    ) -> Result<Sent, kube::Error> {
        let mut backoff = Duration::from_millis(50);
        let mut attempt = 1;
        loop {
            match self.send(write, repeated || attempt > 1, now).await {
                Err(e) if attempt < EVENT_TRIES && is_transient(&e) => {
                    tokio::time::sleep(backoff).await;
                    backoff *= 4;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// The open series `key` belongs to: its Event's name and namespace, and the next count.
    fn open_series(&self, key: &str, now: Timestamp) -> Option<(Box<str>, Box<str>, i32)> {
        let mut s = self.series.lock().unwrap_or_else(|e| e.into_inner());
        if s.swept.is_none_or(|t| t + SWEEP_EVERY <= now) {
            s.open.retain(|_, o| o.last + SERIES_TTL > now);
            s.swept = Some(now);
        }
        s.open
            .get(key)
            .filter(|o| o.last + SERIES_TTL > now)
            .map(|o| (o.name.clone(), o.namespace.clone(), o.count + 1))
    }

    /// One attempt of `write`; `repeated` when an earlier attempt of the same write may have
    /// been stored.
    async fn send(&self, write: &Write, repeated: bool, now: Timestamp) -> Result<Sent, kube::Error> {
        match write {
            Write::Count {
                name,
                namespace,
                count,
            } => {
                let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), namespace);
                let body = serde_json::json!({
                    "series": {"count": count, "lastObservedTime": MicroTime(now)}
                });
                match api
                    .patch(name, &PatchParams::default(), &Patch::Merge(&body))
                    .await
                {
                    Ok(_) => Ok(Sent::Done),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(Sent::Gone),
                    Err(e) => Err(e),
                }
            }
            Write::Create(event) => {
                let namespace = event.metadata.namespace.as_deref().unwrap_or("default");
                match Api::<K8sEvent>::namespaced(self.client.clone(), namespace)
                    .create(&PostParams::default(), event)
                    .await
                {
                    Ok(_) => Ok(Sent::Done),
                    Err(kube::Error::Api(s)) if repeated && s.reason == "AlreadyExists" => Ok(Sent::Done),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// The first Event of a series; its name is unique per occurrence (regarding object and the
    /// time in nanoseconds), so only a repeat of this very write can meet `AlreadyExists`.
    fn new_event(&self, ev: &Event<'_>, regarding: &ObjectReference, now: Timestamp) -> K8sEvent {
        let namespace = regarding.namespace.clone().unwrap_or_else(|| "default".into());
        let name = format!(
            "{}.{:x}",
            regarding.name.as_deref().unwrap_or(&self.controller),
            now.as_nanosecond()
        );
        K8sEvent {
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
                name: Some(name),
                namespace: Some(namespace),
                ..ObjectMeta::default()
            },
            ..K8sEvent::default()
        }
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

/// The name of the Event of a once-only occurrence: the regarding object's name (cut so the
/// whole stays a valid name) and a digest of its uid and `once`, the same in every manager.
fn once_name(regarding: &ObjectReference, once: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in [regarding.uid.as_deref().unwrap_or_default(), "\0", once] {
        h.update(part.as_bytes());
    }
    let digest = h.finalize();
    let cut: String = regarding
        .name
        .as_deref()
        .unwrap_or("kudo")
        .chars()
        .take(200)
        .collect();
    let mut name = cut.trim_end_matches(['-', '.']).to_string();
    name.push('.');
    for b in &digest[..8] {
        let _ = write!(name, "{b:02x}");
    }
    name
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
            once: None,
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

    /// The embedded API server with namespace `ns`, and a client of it.
    async fn server_with_namespace() -> (kudo_apiserver::RunningServer, Client) {
        let server = kudo_apiserver::ApiServer::start(kudo_apiserver::Config::default())
            .await
            .expect("api server");
        let client = Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
        let ns = k8s_openapi::api::core::v1::Namespace {
            metadata: ObjectMeta {
                name: Some("ns".into()),
                ..ObjectMeta::default()
            },
            ..Default::default()
        };
        Api::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        (server, client)
    }

    /// Every write stored but answered 500 (the response lost on its way back): the repeats
    /// find what the first attempt stored, so one occurrence is one Event and a repeat of the
    /// series is one count, not a second Event per attempt.
    #[tokio::test]
    async fn a_lost_acknowledgement_does_not_duplicate_the_event() {
        use kudo_apiserver::FaultConfig;
        let (server, client) = server_with_namespace().await;
        let rec = Recorder::new(client.clone(), REPORTER, None);
        let a = obj("a", "1");
        let lost = FaultConfig {
            lost_write_rate: 1.0,
            seed: Some(1),
            ..FaultConfig::default()
        };
        server.faults().set(lost).unwrap();
        let first = rec.publish(&ev("PlanStarted", "deploy", None), &a).await;
        let again = rec.publish(&ev("PlanStarted", "deploy", None), &a).await;
        let counters = server.faults().counters();
        server.faults().clear();
        // The repeat of a stored count is answered 500 again (a patch meets no AlreadyExists),
        // so the last attempt's refusal is returned, while the count was stored.
        assert!(first.is_ok(), "{first:?}");
        assert!(again.is_err(), "{again:?}");
        assert!(counters.lost_writes >= 2, "{counters:?}");
        let events = Api::<K8sEvent>::namespaced(client, "ns")
            .list(&Default::default())
            .await
            .unwrap()
            .items;
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].series.as_ref().map(|s| s.count), Some(2), "{events:?}");
    }

    /// A run's start announced by two managers (the first killed before its status write), each
    /// write's answer lost as well: one Event, no series count.
    #[tokio::test]
    async fn a_once_only_event_announced_again_by_another_manager_exists_once() {
        use kudo_apiserver::FaultConfig;
        let (server, client) = server_with_namespace().await;
        let a = obj("a", "1");
        let mut started = ev("PlanStarted", "deploy", None);
        started.once = Some("run-1/PlanStarted/deploy");
        server
            .faults()
            .set(FaultConfig {
                lost_write_rate: 1.0,
                seed: Some(1),
                ..FaultConfig::default()
            })
            .unwrap();
        for _ in 0..2 {
            let manager = Recorder::new(client.clone(), REPORTER, None);
            let r = manager.publish(&started, &a).await;
            assert!(r.is_ok(), "{r:?}");
        }
        server.faults().clear();
        let mut next_run = ev("PlanStarted", "deploy", None);
        next_run.once = Some("run-2/PlanStarted/deploy");
        Recorder::new(client.clone(), REPORTER, None)
            .publish(&next_run, &a)
            .await
            .unwrap();
        let events = Api::<K8sEvent>::namespaced(client, "ns")
            .list(&Default::default())
            .await
            .unwrap()
            .items;
        assert_eq!(events.len(), 2, "one per run: {events:?}");
        assert!(events.iter().all(|e| e.series.is_none()), "{events:?}");
    }
}

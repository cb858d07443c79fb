//! In-process garbage collector and namespace controller: ownerReference cascading (background,
//! foreground, orphan) and namespace termination.
//!
//! A deleted namespace stays `Terminating` with its contents for the configured
//! `namespace_termination_delay` (measured from when this controller first sees it terminating),
//! then its remaining contents are deleted and, once it is empty, the namespace itself goes (an
//! already empty namespace goes at once).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::backend::ObjKey;
use crate::meta;
use crate::store::{DeleteOptions, Propagation, Store};

/// When each terminating namespace (by uid) was first seen, and how long to wait before
/// deleting its contents.
pub(crate) struct Terminations {
    delay: Duration,
    seen: HashMap<String, Instant>,
}

impl Terminations {
    pub(crate) fn new(delay: Duration) -> Self {
        Terminations {
            delay,
            seen: HashMap::new(),
        }
    }

    /// Whether the contents of the terminating namespace `uid` may be deleted now.
    fn due(&mut self, uid: &str) -> bool {
        let since = *self.seen.entry(uid.to_string()).or_insert_with(Instant::now);
        since.elapsed() >= self.delay
    }

    /// Whether a terminating namespace's delay has ended (its contents may still be going).
    fn any_due(&self) -> bool {
        self.seen.values().any(|s| s.elapsed() >= self.delay)
    }

    /// How long until the earliest pending namespace is due, if any.
    fn next_due(&self) -> Option<Duration> {
        self.seen
            .values()
            .map(|s| self.delay.saturating_sub(s.elapsed()))
            .filter(|d| !d.is_zero())
            .min()
    }
}

/// When the collector sweeps on its own, without a change asking for it.
///
/// A full sweep reads every object, so its cost grows with the store: on a store of 10,000
/// Instances and their objects a sweep a second was the server's largest cost. So a
/// sweep runs only when a change asks for one (something went or started going, owner references
/// changed, a new dependent's owner is missing, a namespace appeared), when time-driven work
/// falls due (a pod whose graceful deletion expires, a terminating namespace's delay), and as a
/// safety net every [`Cadence::IDLE`] (or [`Cadence::IDLE_FACTOR`] times the last sweep's
/// duration, when that is longer: at 10,000 Instances a sweep reads ~150,000 objects and took
/// over a second, so the net alone was an eighth of the server's CPU); and two sweeps are at
/// least [`Cadence::COST_FACTOR`] times the last one's duration apart, so a busy large store
/// spends at most about a fifth of a core collecting garbage.
struct Cadence {
    last_full: Instant,
    cost: Duration,
    /// When the earliest pod whose graceful deletion is pending expires.
    pod_expiry: Option<Instant>,
}

impl Cadence {
    const IDLE: Duration = Duration::from_secs(10);
    const IDLE_FACTOR: u32 = 50;
    const COST_FACTOR: u32 = 4;
    const MAX_GAP: Duration = Duration::from_secs(2);

    fn new() -> Self {
        Cadence {
            last_full: Instant::now(),
            cost: Duration::ZERO,
            pod_expiry: None,
        }
    }

    /// How long to sleep unless a change wakes the loop first.
    fn wait(&self, terms: &Terminations) -> Duration {
        let now = Instant::now();
        let idle = (self.last_full + self.idle()).saturating_duration_since(now);
        let pods = self.pod_expiry.map(|t| t.saturating_duration_since(now));
        [Some(idle), pods, terms.next_due()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(idle)
    }

    /// Whether time-driven work (or the safety net) wants a sweep now.
    fn due(&self, terms: &Terminations) -> bool {
        let now = Instant::now();
        self.pod_expiry.is_some_and(|t| t <= now) || self.last_full + self.idle() <= now || terms.any_due()
    }

    /// The safety net's interval: it grows with the store, like the sweep's cost.
    fn idle(&self) -> Duration {
        Self::IDLE.max(self.cost * Self::IDLE_FACTOR)
    }

    /// How long to hold back the next sweep after the last one's cost.
    fn gap(&self) -> Duration {
        let earliest = self.last_full + (self.cost * Self::COST_FACTOR).min(Self::MAX_GAP);
        earliest.saturating_duration_since(Instant::now())
    }

    fn swept(&mut self, started: Instant, pod_expiry: Option<Duration>) {
        self.last_full = Instant::now();
        self.cost = self.last_full - started;
        self.pod_expiry = pod_expiry.map(|d| self.last_full + d);
    }
}

/// Run until `shutdown` flips; wakes on relevant store changes and when time-driven work falls
/// due (see [`Cadence`]).
pub(crate) async fn run(
    store: Store,
    namespace_delay: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut terms = Terminations::new(namespace_delay);
    let mut cadence = Cadence::new();
    loop {
        tokio::select! {
            _ = store.gc_wakeup().notified() => {}
            _ = tokio::time::sleep(cadence.wait(&terms)) => {}
            _ = shutdown.changed() => return,
        }
        // Let a burst of writes settle into one sweep.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let pending = store.take_gc_pending();
        // New dependents whose owners all exist (most creations on a busy cluster) need no sweep.
        let asked = pending.full
            || !pending.new_dependents.is_empty() && !owners_exist(&store, &pending.new_dependents);
        if !asked && !cadence.due(&terms) {
            continue;
        }
        let gap = cadence.gap();
        if !gap.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(gap) => {}
                _ = shutdown.changed() => return,
            }
        }
        // Changes made meanwhile are seen by this sweep; their wake-up only costs a cheap check.
        let _ = store.take_gc_pending();
        let started = Instant::now();
        // Repeat while a sweep changes something, so cascades finish promptly.
        let mut last = Swept::default();
        for _ in 0..50 {
            last = sweep(&store, &mut terms);
            if !last.changed {
                break;
            }
        }
        cadence.swept(started, last.pod_expiry);
    }
}

/// Whether every owner reference of every one of `keys` (objects just created) names an object
/// that exists with that uid. Objects already gone are fine (their deletion asked for a sweep).
fn owners_exist(store: &Store, keys: &[ObjKey]) -> bool {
    keys.iter().all(|key| {
        let Some(obj) = store.get_gr(&key.gr, &key.namespace, &key.name) else {
            return true;
        };
        meta::owner_refs(&obj).iter().all(|r| {
            let (Some(api_version), Some(kind), Some(name), Some(uid)) = (
                r["apiVersion"].as_str(),
                r["kind"].as_str(),
                r["name"].as_str(),
                r["uid"].as_str(),
            ) else {
                return false;
            };
            let Some(def) = store.registry().by_kind(api_version, kind) else {
                return false;
            };
            let ns = if def.namespaced {
                key.namespace.as_str()
            } else {
                ""
            };
            store
                .get_gr(&def.gr(), ns, name)
                .is_some_and(|owner| meta::uid(&owner) == uid)
        })
    })
}

fn delete(store: &Store, key: &ObjKey, propagation: Propagation) -> bool {
    let Some(def) = store.registry().by_gr(&key.gr) else {
        return false;
    };
    let opts = DeleteOptions {
        propagation: Some(propagation),
        ..Default::default()
    };
    match store.delete(&def, &key.namespace, &key.name, &opts) {
        Ok(_) => true,
        Err(e) if e.code == 404 => false,
        Err(e) => {
            tracing::warn!("garbage collector: deleting {key:?}: {e}");
            false
        }
    }
}

fn remove_finalizer(store: &Store, key: &ObjKey, fin: &str) {
    let r = store.raw_update(key, |o| {
        let fins: Vec<String> = meta::finalizers(o).into_iter().filter(|f| f != fin).collect();
        meta::set_finalizers(o, &fins);
    });
    if let Err(e) = r {
        tracing::warn!("garbage collector: removing finalizer {fin} from {key:?}: {e}");
    }
}

/// What one sweep did.
#[derive(Default)]
pub(crate) struct Swept {
    /// Something changed (another sweep may find more to do).
    pub(crate) changed: bool,
    /// How long until the earliest pod whose graceful deletion is pending expires.
    pub(crate) pod_expiry: Option<Duration>,
}

/// One pass over every object.
pub(crate) fn sweep(store: &Store, terms: &mut Terminations) -> Swept {
    let all = store.snapshot_all();
    let mut changed = false;
    let by_uid: HashMap<&str, &(ObjKey, Arc<Value>)> = all.iter().map(|e| (meta::uid(&e.1), e)).collect();
    let mut dependents: HashMap<String, Vec<&(ObjKey, Arc<Value>)>> = HashMap::new();
    for e in &all {
        for r in meta::owner_refs(&e.1) {
            if let Some(u) = r["uid"].as_str() {
                dependents.entry(u.to_string()).or_default().push(e);
            }
        }
    }
    // Owners being deleted in the foreground or with orphaning.
    for (key, obj) in &all {
        if !meta::is_deleting(obj) {
            continue;
        }
        let fins = meta::finalizers(obj);
        let uid = meta::uid(obj);
        let deps = dependents.get(uid).cloned().unwrap_or_default();
        if fins.iter().any(|f| f == "orphan") {
            for (dk, _) in &deps {
                let owner = uid.to_string();
                let _ = store.raw_update(dk, |o| {
                    let refs: Vec<Value> = meta::owner_refs(o)
                        .iter()
                        .filter(|r| r["uid"].as_str() != Some(&owner))
                        .cloned()
                        .collect();
                    let md = meta::meta_mut(o);
                    if refs.is_empty() {
                        md.remove("ownerReferences");
                    } else {
                        md.insert("ownerReferences".into(), Value::from(refs));
                    }
                });
            }
            remove_finalizer(store, key, "orphan");
            changed = true;
            continue;
        }
        if fins.iter().any(|f| f == "foregroundDeletion") {
            for (dk, d) in &deps {
                if !meta::is_deleting(d) {
                    changed |= delete(store, dk, Propagation::Foreground);
                }
            }
            let blocking = deps.iter().any(|(_, d)| {
                meta::owner_refs(d).iter().any(|r| {
                    r["uid"].as_str() == Some(uid) && r["blockOwnerDeletion"].as_bool() == Some(true)
                })
            });
            if !blocking {
                remove_finalizer(store, key, "foregroundDeletion");
                changed = true;
            }
        }
    }
    // Dependents whose owners are all gone.
    for (key, obj) in &all {
        let refs = meta::owner_refs(obj);
        if refs.is_empty() || meta::is_deleting(obj) {
            continue;
        }
        let alive: Vec<&Value> = refs
            .iter()
            .filter(|r| r["uid"].as_str().is_some_and(|u| by_uid.contains_key(u)))
            .collect();
        if alive.is_empty() {
            changed |= delete(store, key, Propagation::Background);
        } else if alive.len() < refs.len() {
            let keep: HashSet<String> = alive
                .iter()
                .filter_map(|r| r["uid"].as_str().map(String::from))
                .collect();
            let _ = store.raw_update(key, |o| {
                let refs: Vec<Value> = meta::owner_refs(o)
                    .iter()
                    .filter(|r| r["uid"].as_str().is_some_and(|u| keep.contains(u)))
                    .cloned()
                    .collect();
                meta::meta_mut(o).insert("ownerReferences".into(), Value::from(refs));
            });
            changed = true;
        }
    }
    let (expired, pod_expiry) = expire_pods(store, &all);
    changed |= expired;
    // Terminating namespaces: after the delay, delete contents, then the namespace.
    let terminating: HashSet<&str> = all
        .iter()
        .filter(|(k, o)| k.gr.group.is_empty() && k.gr.resource == "namespaces" && meta::is_deleting(o))
        .map(|(_, o)| meta::uid(o))
        .collect();
    terms.seen.retain(|uid, _| terminating.contains(uid.as_str()));
    for (key, obj) in &all {
        if !(key.gr.group.is_empty() && key.gr.resource == "namespaces" && meta::is_deleting(obj)) {
            continue;
        }
        let ns = &key.name;
        let contents: Vec<&(ObjKey, Arc<Value>)> = all.iter().filter(|(k, _)| &k.namespace == ns).collect();
        if contents.is_empty() {
            let _ = store.raw_update(key, |o| {
                if let Some(spec) = o.get_mut("spec").and_then(|s| s.as_object_mut()) {
                    spec.remove("finalizers");
                }
            });
            if meta::finalizers(obj).is_empty() {
                let _ = store.force_remove(key);
            }
            changed = true;
        } else if terms.due(meta::uid(obj)) {
            for (k, o) in contents {
                if !meta::is_deleting(o) {
                    changed |= delete(store, k, Propagation::Background);
                }
            }
        }
    }
    changed |= namespace_defaults(store, &all);
    Swept { changed, pod_expiry }
}

/// Removes pods whose graceful deletion expired more than a second ago: no kubelet answered, so
/// they go as kube-controller-manager's pod GC removes them for an unresponsive node. Returns
/// whether one went and how long until the next one expires.
fn expire_pods(store: &Store, all: &[(ObjKey, Arc<Value>)]) -> (bool, Option<Duration>) {
    let now = chrono::Utc::now();
    let mut changed = false;
    let mut next: Option<Duration> = None;
    for (key, obj) in all {
        if !(key.gr.group.is_empty() && key.gr.resource == "pods" && meta::is_deleting(obj)) {
            continue;
        }
        if !meta::finalizers(obj).is_empty() {
            continue;
        }
        let Some(expiry) = obj
            .pointer("/metadata/deletionTimestamp")
            .and_then(|v| v.as_str())
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&chrono::Utc) + chrono::Duration::seconds(1))
        else {
            continue;
        };
        if now <= expiry {
            // Whole seconds: the timestamp has no fraction; wake just after it passed.
            let left = (expiry - now).to_std().unwrap_or_default() + Duration::from_millis(20);
            next = Some(next.map_or(left, |n| n.min(left)));
            continue;
        }
        match store.force_remove(key) {
            Ok(Some(_)) => changed = true,
            Ok(None) => {}
            Err(e) => tracing::warn!("pod garbage collector: removing {key:?}: {e}"),
        }
    }
    (changed, next)
}

/// What kube-controller-manager's service-account and root-CA publisher controllers keep in every
/// active namespace: the `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap (re-made
/// when deleted). Written as `kube-controller-manager`, like the real ones.
/// [`namespace_defaults`] for the namespaces there are now (the server runs it before serving,
/// so `default` has them from the first request).
pub(crate) fn ensure_namespace_defaults(store: &Store) {
    namespace_defaults(store, &store.snapshot_all());
}

fn namespace_defaults(store: &Store, all: &[(ObjKey, Arc<Value>)]) -> bool {
    let core = |plural: &str| store.registry().by_path("", "v1", plural);
    let (Some(sa_def), Some(cm_def)) = (core("serviceaccounts"), core("configmaps")) else {
        return false;
    };
    // One pass over the objects, not one per namespace.
    let present: HashSet<(&str, &str, &str)> = all
        .iter()
        .filter(|(k, _)| k.gr.group.is_empty())
        .filter(|(k, _)| {
            (k.gr.resource == "serviceaccounts" && k.name == "default")
                || (k.gr.resource == "configmaps" && k.name == ROOT_CA_CONFIGMAP)
        })
        .map(|(k, _)| (k.gr.resource.as_str(), k.namespace.as_str(), k.name.as_str()))
        .collect();
    let exists = |resource: &str, ns: &str, name: &str| present.contains(&(resource, ns, name));
    let opts = crate::store::WriteOptions {
        field_manager: Some("kube-controller-manager".into()),
        ..Default::default()
    };
    let mut changed = false;
    for (key, ns) in all {
        if !(key.gr.group.is_empty() && key.gr.resource == "namespaces") || meta::is_deleting(ns) {
            continue;
        }
        let name = &key.name;
        let mut wanted = Vec::new();
        if !exists("serviceaccounts", name, "default") {
            wanted.push((
                &sa_def,
                json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
            ));
        }
        if !exists("configmaps", name, ROOT_CA_CONFIGMAP) {
            wanted.push((
                &cm_def,
                json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": ROOT_CA_CONFIGMAP,
                        "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION},
                    },
                    "data": {"ca.crt": EMBEDDED_CA_PEM},
                }),
            ));
        }
        for (def, obj) in wanted {
            match store.create(def, name, obj, &opts) {
                Ok(_) => changed = true,
                Err(e) if e.code == 409 || e.code == 403 || e.code == 404 => {}
                Err(e) => tracing::warn!("namespace defaults in {name}: {e}"),
            }
        }
    }
    changed
}

/// The ConfigMap the root-CA publisher keeps in every namespace.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
const ROOT_CA_DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";
/// A self-signed certificate made for kudo-rs (its key was discarded): the embedded server serves
/// plain HTTP on loopback, so nothing verifies against it, but the ConfigMap must hold a PEM
/// bundle for pods and tools that read it.
const EMBEDDED_CA_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBoDCCAUegAwIBAgIUN0581ioCcnI6jZ8xpC9RR2hQ0rYwCgYIKoZIzj0EAwIw
JTEjMCEGA1UEAwwaa3Vkby1lbWJlZGRlZC1hcGlzZXJ2ZXItY2EwIBcNMjYxMTI0
MjE0MTI0WhgPMjEyNjEwMzEyMTQxMjRaMCUxIzAhBgNVBAMMGmt1ZG8tZW1iZWRk
ZWQtYXBpc2VydmVyLWNhMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEjSXP8+Qu
aCE5I+Lb95eDgTzktdkMpwm8QWus7UNsHzQwOTVo0e4IgYq5njLTyZwKhl0W1Zna
EQkWP6RU6fVSlqNTMFEwHQYDVR0OBBYEFC0uWuV7UnkZ9uF2DWUhGSUHKkbiMB8G
A1UdIwQYMBaAFC0uWuV7UnkZ9uF2DWUhGSUHKkbiMA8GA1UdEwEB/wQFMAMBAf8w
CgYIKoZIzj0EAwIDRwAwRAIgAkoag7miFnf31Ux/eJOx7Hc0FphWypQKLy8thu0Z
TH0CIBxtdUxo2Z5g982sBXlG4taK95Vl/+1pUvWZxdN9hnAf
-----END CERTIFICATE-----
";

//! Autopilot rules (plan field `when`, a kudo-rs extension): the manager's side. What a rule
//! decides is [`kudo_engine::autopilot`]'s ([`Rules`]); this module reads what rules look at.
//!
//! The objects rules look at are **watched, not polled**: [`Watches`] keeps one watch per
//! (apiVersion, kind, namespace) that some rule references, started the first time a reconcile
//! evaluates such a rule, and a change of a watched object wakes every Instance whose rules name
//! it (by the rendered resource names). A reconcile then evaluates the rules ([`evaluate`]),
//! reading each object. Rule state lives in `status.autopilot`, so a restarted manager neither
//! re-fires within a cooldown nor restarts a `for` window. The timed requeue at the end of a `for`
//! window or cooldown is the only timer.
//!
//! * A watch stops once no Instance's rules name an object of its (apiVersion, kind, namespace)
//!   any more (the Instance went, or its rules changed).
//! * Each watch feeds a cache (a kube-runtime reflector store, managedFields dropped) that the
//!   rules read once it has its first list: a reconcile of an Instance with rules costs no GET.
//!   Before that, or for a kind not watched yet, a GET reads the object. A cached copy can lag
//!   behind the server; the watch event that brings the newer copy wakes the Instance again, so a
//!   rule never decides on a stale copy for long (and `for` windows are what guard a firing
//!   anyway).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::{self, watcher};
use kudo_engine::autopilot::{Evaluation, ReadError, RuleRead, Rules};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use kudo_kube::discovery::{self, Resolved};

/// An object a rule watches: (apiVersion, kind, namespace, name); namespace "" when
/// cluster-scoped.
pub(crate) type Watched = (String, String, String, String);

/// The dynamic set of watches of autopilot rules and which Instances each watched object wakes.
pub(crate) struct Watches {
    client: kube::Client,
    wake: UnboundedSender<ObjectRef<DynamicObject>>,
    state: Arc<Mutex<State>>,
}

/// A watch of autopilot rules: its task and the cache it feeds.
type Running = (tokio::task::JoinHandle<()>, Store<DynamicObject>);

#[derive(Default)]
struct State {
    /// (apiVersion, kind, namespace) → its watch task and the cache it feeds.
    running: HashMap<(String, String, String), Running>,
    /// Instance → the objects its rules named at their last evaluation.
    interest: HashMap<ObjectRef<DynamicObject>, HashSet<Watched>>,
}

impl Drop for Watches {
    fn drop(&mut self) {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for (h, _) in state.running.values() {
            h.abort();
        }
    }
}

impl Watches {
    pub(crate) fn new(client: kube::Client, wake: UnboundedSender<ObjectRef<DynamicObject>>) -> Watches {
        Watches {
            client,
            wake,
            state: Arc::default(),
        }
    }

    /// Records what `instance`'s rules look at now (replacing the previous set) and starts the
    /// watches that are missing.
    pub(crate) fn watch(&self, instance: ObjectRef<DynamicObject>, objects: Vec<(ApiResource, Watched)>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for (ar, w) in &objects {
            let key = (w.0.clone(), w.1.clone(), w.2.clone());
            if state.running.contains_key(&key) {
                continue;
            }
            let api: Api<DynamicObject> = if w.2.is_empty() {
                Api::all_with(self.client.clone(), ar)
            } else {
                Api::namespaced_with(self.client.clone(), &w.2, ar)
            };
            let shared = self.state.clone();
            let wake = self.wake.clone();
            let (av, kind) = (w.0.clone(), w.1.clone());
            tracing::debug!(api_version = %av, kind = %kind, namespace = %w.2, "autopilot: watching");
            let writer = Writer::new(ar.clone());
            let store = writer.as_reader();
            let task = tokio::spawn(async move {
                let mut events = std::pin::pin!(
                    watcher(api, watcher::Config::default())
                        .default_backoff()
                        .modify(|o| o.metadata.managed_fields = None)
                        .reflect(writer)
                        .touched_objects()
                );
                while let Some(ev) = events.next().await {
                    let Ok(obj) = ev else { continue };
                    let me: Watched = (
                        av.clone(),
                        kind.clone(),
                        obj.namespace().unwrap_or_default(),
                        obj.name_any(),
                    );
                    let targets: Vec<ObjectRef<DynamicObject>> = {
                        let s = shared.lock().unwrap_or_else(|e| e.into_inner());
                        s.interest
                            .iter()
                            .filter(|(_, set)| set.contains(&me))
                            .map(|(i, _)| i.clone())
                            .collect()
                    };
                    for t in targets {
                        let _ = wake.send(t);
                    }
                }
            });
            state.running.insert(key, (task, store));
        }
        let set: HashSet<Watched> = objects.into_iter().map(|(_, w)| w).collect();
        if set.is_empty() {
            state.interest.remove(&instance);
        } else {
            state.interest.insert(instance, set);
        }
        state.stop_unneeded();
    }
}

impl State {
    /// Stops the watches no Instance's rules need any more.
    fn stop_unneeded(&mut self) {
        let needed: HashSet<(&str, &str, &str)> = self
            .interest
            .values()
            .flatten()
            .map(|w| (w.0.as_str(), w.1.as_str(), w.2.as_str()))
            .collect();
        let unneeded: Vec<(String, String, String)> = self
            .running
            .keys()
            .filter(|k| !needed.contains(&(k.0.as_str(), k.1.as_str(), k.2.as_str())))
            .cloned()
            .collect();
        for k in unneeded {
            if let Some((task, _)) = self.running.remove(&k) {
                tracing::debug!(api_version = %k.0, kind = %k.1, namespace = %k.2, "autopilot: watch stopped");
                task.abort();
            }
        }
    }
}

impl Watches {
    /// An Instance that is gone, or whose OperatorVersion has no rules (any more), wakes on no
    /// watched object.
    pub(crate) fn forget(&self, instance: &ObjectRef<DynamicObject>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.interest.remove(instance).is_some() {
            state.stop_unneeded();
        }
    }

    /// The (apiVersion, kind, namespace) of the watches running.
    #[cfg(test)]
    fn running(&self) -> Vec<(String, String, String)> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut keys: Vec<_> = state.running.keys().cloned().collect();
        keys.sort();
        keys
    }

    /// The watched object from its watch's cache: `Some(copy or None when absent)` once the
    /// watch of its kind and namespace has its first list, `None` when the server must be asked.
    fn cached(&self, ar: &ApiResource, w: &Watched) -> Option<Option<Arc<DynamicObject>>> {
        let store = {
            let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state
                .running
                .get(&(w.0.clone(), w.1.clone(), w.2.clone()))
                .map(|(_, store)| store.clone())?
        };
        if !crate::cache::ready(&store) {
            return None;
        }
        let mut r = ObjectRef::new_with(&w.3, ar.clone());
        if !w.2.is_empty() {
            r = r.within(&w.2);
        }
        Some(store.get(&r))
    }
}

/// What evaluating rules reads through: discovery, the client acting for the Instance, and the
/// watches whose caches answer first (and which the evaluation keeps up to date).
pub(crate) struct Reads<'a> {
    pub discovery: &'a discovery::Cache,
    pub client: kube::Client,
    pub watches: &'a Watches,
}

/// Evaluates the rules of `instance` (in namespace `ns`) that `rules` hands out, reading each
/// object they name through `reads`, and watches those objects from now on (replacing what its
/// rules watched before).
pub(crate) async fn evaluate(
    reads: &Reads<'_>,
    instance: &ObjectRef<DynamicObject>,
    mut rules: Rules<'_>,
    ns: &str,
) -> Evaluation {
    let mut watched = Vec::new();
    while let Some(read) = rules.next_read() {
        let object = read_object(reads, &read, ns, &mut watched).await;
        rules.report(object);
    }
    reads.watches.watch(instance.clone(), watched);
    rules.finish()
}

/// The object one rule reads: from its watch's cache once that has listed, else a GET. `Ok(None)`:
/// it does not exist.
async fn read_object(
    reads: &Reads<'_>,
    read: &RuleRead,
    ns: &str,
    watched: &mut Vec<(ApiResource, Watched)>,
) -> Result<Option<Value>, ReadError> {
    let RuleRead {
        api_version: av,
        kind,
        name,
        ..
    } = read;
    let (ar, namespaced) = match reads.discovery.resolve(av, kind).await {
        Ok(Resolved::Found { resource, namespaced }) => (resource, namespaced),
        Ok(Resolved::Unknown(message)) => {
            return Err(ReadError::UnknownKind {
                api_version: av.clone(),
                kind: kind.clone(),
                message,
            });
        }
        Err(e) => {
            return Err(ReadError::Discovery {
                api_version: av.clone(),
                kind: kind.clone(),
                message: e.to_string(),
            });
        }
    };
    let obj_ns = if namespaced { ns.to_string() } else { String::new() };
    let w: Watched = (av.clone(), kind.clone(), obj_ns, name.clone());
    let cached = reads.watches.cached(&ar, &w);
    // Watched even when the read below fails: the watch's event is what retries it.
    watched.push((ar.clone(), w));
    if let Some(cached) = cached {
        return Ok(cached.map(|o| serde_json::to_value(&*o).unwrap_or(Value::Null)));
    }
    let api: Api<DynamicObject> = if namespaced {
        Api::namespaced_with(reads.client.clone(), ns, &ar)
    } else {
        Api::all_with(reads.client.clone(), &ar)
    };
    match api.get_opt(name).await {
        Ok(o) => Ok(o.map(|mut o| {
            o.metadata.managed_fields = None;
            serde_json::to_value(o).unwrap_or(Value::Null)
        })),
        Err(e) => Err(ReadError::Read {
            kind: kind.clone(),
            name: name.clone(),
            message: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_watch_stops_when_no_rule_names_its_kind_any_more() {
        // No server behind the client: the watches only back off, which is all this needs.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let watches = Watches::new(client, tx);
        let cm = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let sts = ApiResource::erase::<k8s_openapi::api::apps::v1::StatefulSet>(&());
        let w = |ar: &ApiResource, name: &str| {
            (
                ar.clone(),
                (
                    ar.api_version.clone(),
                    ar.kind.clone(),
                    "ns".to_string(),
                    name.to_string(),
                ),
            )
        };
        let inst = |n: &str| ObjectRef::new_with(n, crate::resources::instance_resource()).within("ns");
        watches.watch(inst("a"), vec![w(&cm, "x"), w(&sts, "db")]);
        watches.watch(inst("b"), vec![w(&sts, "db2")]);
        let key = |ar: &ApiResource| (ar.api_version.clone(), ar.kind.clone(), "ns".to_string());
        assert_eq!(watches.running(), vec![key(&sts), key(&cm)]);
        // a's rules change: no ConfigMap any more
        watches.watch(inst("a"), vec![w(&sts, "db")]);
        assert_eq!(watches.running(), vec![key(&sts)]);
        // a goes; b still needs the StatefulSet watch
        watches.forget(&inst("a"));
        assert_eq!(watches.running(), vec![key(&sts)]);
        watches.forget(&inst("b"));
        assert!(watches.running().is_empty());
    }
}

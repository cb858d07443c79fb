//! Watch-fed caches the manager reads from instead of asking the API server at every reconcile
//! (issue 14, bug 8: a first-operator deploy cost ~36 GETs and LISTs; controller-runtime, KUDO's
//! base, reads from informer caches too).
//!
//! One reflector per watched kind: Instances and OperatorVersions (all of them, in the manager's
//! scope) and the child kinds KUDO applies (label `heritage=kudo`). The same watch streams trigger
//! the reconciles, so caching costs no extra connection.
//!
//! A cache can lag behind the server, most visibly right after our own write. Where a stale read
//! would be wrong, the callers fall back to a GET:
//!
//! * **Instances**: the resourceVersion of the newest copy this manager has seen (its own writes'
//!   answers, its GETs) is remembered; the cached Instance is used only when it carries exactly
//!   that version (or nothing was remembered). Otherwise the Instance is read from the server.
//!   resourceVersions are only compared for equality: they are opaque.
//! * **Objects we applied**: the cached copy is used only when it is at least the generation the
//!   apply answered with and has the same uid (see [`crate::execute`]); else a GET.
//! * **Absent from the cache** (not yet seen, or deleted): a GET decides, wherever absence would
//!   lead to an action (apply again, skip a delete, report drift).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::Value;

/// The namespaced child kinds KUDO applies that are watched and cached: (group, version, kind,
/// plural). ReplicaSets are KUDO's readiness input (KEP-34) though never applied by a plan.
pub(crate) const CHILD_KINDS: &[(&str, &str, &str, &str)] = &[
    ("apps", "v1", "Deployment", "deployments"),
    ("apps", "v1", "StatefulSet", "statefulsets"),
    ("apps", "v1", "DaemonSet", "daemonsets"),
    ("apps", "v1", "ReplicaSet", "replicasets"),
    ("batch", "v1", "Job", "jobs"),
    ("", "v1", "Pod", "pods"),
    ("", "v1", "Service", "services"),
    ("", "v1", "ConfigMap", "configmaps"),
    ("", "v1", "Secret", "secrets"),
    ("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
];

/// The API resource of a child kind of [`CHILD_KINDS`].
pub(crate) fn child_resource(g: &str, v: &str, k: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, k), plural)
}

/// The caches shared by all reconciles.
pub(crate) struct Caches {
    /// Every Instance in the manager's scope (the controller's own store).
    pub instances: Store<DynamicObject>,
    /// Every OperatorVersion (cluster-wide: an Instance may reference another namespace).
    pub operator_versions: Store<DynamicObject>,
    /// `(apiVersion, kind)` → resource and store of the `heritage=kudo` objects of that kind.
    children: HashMap<(String, String), (ApiResource, Store<DynamicObject>)>,
    /// `(namespace, name)` → resourceVersion of the newest copy of the Instance we have seen.
    instance_versions: Mutex<HashMap<(String, String), String>>,
}

/// Whether a store has received its first full list (an unready store is empty, not "nothing
/// exists"). Never blocks. Polling an unready store replaces the waker of another task waiting
/// for it (its readiness is a oneshot channel); nothing else waits on the OperatorVersion and
/// child stores, and the Instance store is ready before any reconcile runs (the applier waits
/// for it), so no waiter is lost.
fn ready(store: &Store<DynamicObject>) -> bool {
    store.wait_until_ready().now_or_never().is_some_and(|r| r.is_ok())
}

impl Caches {
    pub fn new(
        instances: Store<DynamicObject>,
        operator_versions: Store<DynamicObject>,
        children: HashMap<(String, String), (ApiResource, Store<DynamicObject>)>,
    ) -> Caches {
        Caches {
            instances,
            operator_versions,
            children,
            instance_versions: Mutex::default(),
        }
    }

    /// The cached Instance when it is known to be current (see the module docs): `Ok(Some)`
    /// current copy, `Ok(None)` gone (its delete event arrived), `Err(())` read it from the server.
    pub fn instance(&self, ns: &str, name: &str) -> Result<Option<Arc<DynamicObject>>, ()> {
        if !ready(&self.instances) {
            return Err(());
        }
        let key = (ns.to_string(), name.to_string());
        let cached = self
            .instances
            .get(&ObjectRef::new_with(name, crate::instance_resource()).within(ns));
        let mut seen = self.instance_versions.lock().unwrap_or_else(|e| e.into_inner());
        match cached {
            None => {
                seen.remove(&key);
                Ok(None)
            }
            Some(obj) => match seen.get(&key) {
                None => Ok(Some(obj)),
                Some(rv) if obj.metadata.resource_version.as_ref() == Some(rv) => Ok(Some(obj)),
                Some(_) => Err(()),
            },
        }
    }

    /// Notes the resourceVersion of an Instance copy read from or written to the server.
    pub fn saw_instance(&self, ns: &str, name: &str, rv: Option<&str>) {
        let mut seen = self.instance_versions.lock().unwrap_or_else(|e| e.into_inner());
        let key = (ns.to_string(), name.to_string());
        match rv {
            Some(rv) => {
                seen.insert(key, rv.to_string());
            }
            None => {
                seen.remove(&key);
            }
        }
    }

    /// The cached OperatorVersion, if the cache has it (`None`: ask the server).
    pub fn operator_version(&self, ns: &str, name: &str) -> Option<Arc<DynamicObject>> {
        if !ready(&self.operator_versions) {
            return None;
        }
        self.operator_versions
            .get(&ObjectRef::new_with(name, crate::operator_version_resource()).within(ns))
    }

    /// The cached OperatorVersions of a namespace; `None` when the cache is not ready.
    pub fn operator_versions_in(&self, ns: &str) -> Option<Vec<Arc<DynamicObject>>> {
        if !ready(&self.operator_versions) {
            return None;
        }
        Some(
            self.operator_versions
                .state()
                .into_iter()
                .filter(|o| o.metadata.namespace.as_deref() == Some(ns))
                .collect(),
        )
    }

    /// The ready store of a child kind, `None` when the kind is not cached (or not synced yet).
    fn child_store(&self, api_version: &str, kind: &str) -> Option<&(ApiResource, Store<DynamicObject>)> {
        self.children
            .get(&(api_version.to_string(), kind.to_string()))
            .filter(|(_, s)| ready(s))
    }

    /// Whether objects of this kind are cached: `Some(cached copy or None)` — `None` meaning "not
    /// in the cache", which the caller confirms with the server before acting on it.
    pub fn child(&self, api_version: &str, kind: &str, ns: &str, name: &str) -> Option<Option<Value>> {
        let (ar, store) = self.child_store(api_version, kind)?;
        let obj = store.get(&ObjectRef::new_with(name, ar.clone()).within(ns));
        Some(obj.map(|o| with_type(&o, api_version, kind)))
    }

    /// The cached objects of a kind in `ns` whose labels include all of `labels`, with
    /// apiVersion/kind set; `None` when the kind is not cached.
    pub fn children_labelled(
        &self,
        api_version: &str,
        kind: &str,
        ns: &str,
        labels: &[(&str, &str)],
    ) -> Option<Vec<Value>> {
        let (_, store) = self.child_store(api_version, kind)?;
        Some(
            store
                .state()
                .iter()
                .filter(|o| o.metadata.namespace.as_deref() == Some(ns))
                .filter(|o| {
                    let l = o.metadata.labels.as_ref();
                    labels
                        .iter()
                        .all(|(k, v)| l.and_then(|l| l.get(*k)).map(String::as_str) == Some(*v))
                })
                .map(|o| with_type(o, api_version, kind))
                .collect(),
        )
    }
}

/// A cached object as JSON with its type filled in (watch events of typed lists may omit it).
fn with_type(obj: &DynamicObject, api_version: &str, kind: &str) -> Value {
    let mut v = serde_json::to_value(obj).unwrap_or(Value::Null);
    if v.is_object() {
        v["apiVersion"] = Value::String(api_version.to_string());
        v["kind"] = Value::String(kind.to_string());
    }
    v
}
